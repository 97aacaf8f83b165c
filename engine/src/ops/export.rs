//! Export: a session's bytes, exactly as DSH wrote them, in one forward scan of its range.
//!
//! - In its source encoding, export reproduces the imported file byte for byte: a `.jsonl` is
//!   the header record, each committed line + `\n`, then the tail; a `.jsonl.zstd` is its
//!   verbatim frames, then the tail.
//! - Across encodings: `.jsonl.zstd` → `.jsonl` is `zstd -dc` of the stored file: every byte its
//!   frames decode to, whatever the verdict (lines past the committed region and what a torn
//!   final frame's complete blocks hold included); `.jsonl` → `.jsonl.zstd` is a header frame
//!   plus the committed region in Node-identical frames cut at line ends by size
//!   ([`BodyFramer`]), so the conversion is a function of the plaintext alone and survives an
//!   export → import round trip through a `.jsonl` file (a torn tail cannot be framed: DSH
//!   would reject a frame holding a torn record).
//!
//! Every stored value's crc32 is checked before its bytes are written.

use std::io::Write;

use sessionlog_codec::format::stored::block_text;
use sessionlog_codec::format::zstd::{BodyFramer, Decompressor, FrameCompressor};

use crate::error::{Error, Result};
use crate::layout::keys;
use crate::layout::meta::{SessionMeta, SourceEncoding};
use crate::layout::values::checked_bytes;
use crate::store::{visit, Snapshot, Store};

/// The two DSH artifact encodings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// `session.jsonl`.
    Jsonl,
    /// `session.jsonl.zstd`.
    JsonlZstd,
}

impl Store {
    /// Write session `id` to `out` in `format` (default: the encoding it was imported in);
    /// returns the number of bytes written.
    pub fn export(
        &self,
        id: &str,
        format: Option<ExportFormat>,
        out: &mut dyn Write,
    ) -> Result<u64> {
        // One snapshot for the metadata and every block read: a batch appended meanwhile is
        // neither half-seen nor counted against the size the metadata promises.
        let snap = self.snapshot();
        let meta = self.meta_at(id.as_bytes(), &snap)?;
        let snap = Some(&snap);
        let mut w = Counting {
            out,
            written: 0,
            id: &meta,
        };
        match (meta.source, format) {
            (SourceEncoding::Jsonl, None | Some(ExportFormat::Jsonl)) if meta.fork_of.is_some() => {
                // A fork's file: header, the seed batch re-serialized from the parent, then its
                // own lines. Its size is only known once written, so there is nothing to check.
                w.put(&meta.header)?;
                self.seed_text(&meta, &mut |text| w.put(text))?;
                self.copy_section(&meta, snap, keys::BLOCK, &mut |b| w.put(b))?;
                self.copy_section(&meta, snap, keys::TAIL, &mut |b| w.put(b))?;
            }
            (SourceEncoding::Jsonl, None | Some(ExportFormat::Jsonl)) => {
                w.put(&meta.header)?;
                self.copy_section(&meta, snap, keys::BLOCK, &mut |b| w.put(b))?;
                self.copy_section(&meta, snap, keys::TAIL, &mut |b| w.put(b))?;
                w.expect(meta.total_bytes)?;
            }
            (SourceEncoding::JsonlZstd, None | Some(ExportFormat::JsonlZstd)) => {
                self.copy_section(&meta, snap, keys::FRAME, &mut |b| w.put(b))?;
                self.copy_section(&meta, snap, keys::TAIL, &mut |b| w.put(b))?;
                w.expect(meta.total_bytes)?;
            }
            (SourceEncoding::JsonlZstd, Some(ExportFormat::Jsonl)) => {
                let mut decompressor = Decompressor::new()?;
                let mut plain = Vec::new();
                for section in [keys::FRAME, keys::TAIL] {
                    self.copy_section(&meta, snap, section, &mut |b| {
                        plain.clear();
                        decompressor.feed(b, &mut plain);
                        w.put(&plain)
                    })?;
                }
                w.expect_at_least(meta.plaintext_bytes)?;
            }
            (SourceEncoding::Jsonl, Some(ExportFormat::JsonlZstd)) => {
                self.write_frames(&meta, snap, &mut w)?
            }
        }
        Ok(w.written)
    }

    /// Write generation `version` of session `id` to `out`: the served generation as
    /// [`Store::export`] writes it (in `format`); a frozen lower generation exactly as stored,
    /// in the one encoding it has (asking for the other is refused).
    pub fn export_generation(
        &self,
        id: &str,
        version: u32,
        format: Option<ExportFormat>,
        out: &mut dyn Write,
    ) -> Result<u64> {
        let snap = self.snapshot();
        let meta = self.meta_at(id.as_bytes(), &snap)?;
        if version == meta.version {
            drop(snap);
            return self.export(id, format, out);
        }
        let frozen = meta
            .frozen
            .iter()
            .find(|g| g.version == version)
            .ok_or_else(|| {
                let held: Vec<String> = std::iter::once(meta.version)
                    .chain(meta.frozen.iter().map(|g| g.version))
                    .map(|v| format!("v{v}"))
                    .collect();
                Error::Generation(format!(
                    "session \"{id}\" has no generation v{version} (it holds {})",
                    held.join(", ")
                ))
            })?;
        let stored = if frozen.zstd {
            ExportFormat::JsonlZstd
        } else {
            ExportFormat::Jsonl
        };
        if format.is_some_and(|f| f != stored) {
            return Err(Error::Generation(format!(
                "generation v{version} of session \"{id}\" is frozen as {}; it is exported only as stored",
                frozen.file_name()
            )));
        }
        let mut w = Counting {
            out,
            written: 0,
            id: &meta,
        };
        let first = keys::generation_n(version, 0);
        self.scan_section(&meta, Some(&snap), keys::GENERATION, first, &mut |n, v| {
            if n >> 32 != u64::from(version) {
                return Ok(false);
            }
            let bytes = checked_bytes(v).ok_or_else(|| {
                meta.corrupt(format!(
                    "generation v{version} chunk {} fails its crc32",
                    n & 0xFFFF_FFFF
                ))
            })?;
            w.put(bytes)?;
            Ok(true)
        })?;
        w.expect(frozen.bytes)?;
        Ok(w.written)
    }

    /// The stored bytes in the source encoding (`export(id, None, out)`).
    pub fn export_jsonl(&self, id: &str, out: &mut dyn Write) -> Result<u64> {
        self.export(id, None, out)
    }

    /// Hand each stored zstd frame of `meta`'s log to `each`, in order, its crc32 checked.
    pub(crate) fn for_each_frame(
        &self,
        meta: &SessionMeta,
        each: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        self.copy_section(meta, None, keys::FRAME, each)
    }

    /// Hand the stored bytes of one section of a session's range to `put`, in order (BLOCK
    /// texts, FRAMEs, TAIL chunks), each checked first.
    fn copy_section(
        &self,
        meta: &SessionMeta,
        snap: Option<&Snapshot<'_>>,
        section: u8,
        put: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        self.scan_section(meta, snap, section, 0, &mut |n, v| {
            if section == keys::BLOCK {
                put(block_text(v).map_err(|e| meta.corrupt(format!("block at seq {n}: {e}")))?)?;
            } else {
                let bytes = checked_bytes(v).ok_or_else(|| {
                    meta.corrupt(format!("{} {n} fails its crc32", section_name(section)))
                })?;
                put(bytes)?;
            }
            Ok(true)
        })
    }

    /// Visit the values of one section of a session's range in key order, from key `n = from`,
    /// while `each(n, value)` returns true.
    fn scan_section(
        &self,
        meta: &SessionMeta,
        snap: Option<&Snapshot<'_>>,
        section: u8,
        from: u64,
        each: &mut dyn FnMut(u64, &[u8]) -> Result<bool>,
    ) -> Result<()> {
        let mut it = self.scan_iter_at(meta.number, snap)?;
        it.seek(keys::event_key(meta.number, section, from));
        let context = format!("reading session \"{}\"", meta.id_lossy());
        visit(&mut it, context, &mut |k, v| {
            let (_, s, n) = keys::parse_event_key(k)
                .ok_or_else(|| meta.corrupt(format!("malformed key {k:02x?}")))?;
            Ok(s == section && each(n, v)?)
        })
    }

    /// Author DSH frames for a session stored as plain lines: the header frame, then the
    /// committed body (a fork's re-serialized seed first) cut by [`BodyFramer`].
    fn write_frames(
        &self,
        meta: &SessionMeta,
        snap: Option<&Snapshot<'_>>,
        w: &mut Counting<'_>,
    ) -> Result<()> {
        w.put(&FrameCompressor::new()?.compress(&meta.header)?)?;
        let mut framer = BodyFramer::new()?;
        let mut emit = |frame: &[u8]| w.put(frame);
        self.seed_text(meta, &mut |text| framer.feed(text, &mut emit))?;
        self.copy_section(meta, snap, keys::BLOCK, &mut |text| {
            framer.feed(text, &mut emit)
        })?;
        framer.finish(&mut emit)
    }
}

/// A writer that counts what it wrote and reports failures with the session's name.
struct Counting<'a> {
    out: &'a mut dyn Write,
    written: u64,
    id: &'a SessionMeta,
}

impl Counting<'_> {
    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes).map_err(|source| Error::Io {
            path: format!("export of session \"{}\"", self.id.id_lossy()).into(),
            source,
        })?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Fail if fewer bytes were written than `size`, the part the metadata accounts for.
    fn expect_at_least(&self, size: u64) -> Result<()> {
        if self.written >= size {
            Ok(())
        } else {
            Err(self.id.corrupt(format!(
                "exported {} bytes but the committed plaintext alone is {size}",
                self.written
            )))
        }
    }

    /// Fail if the bytes written differ from what the metadata promises.
    fn expect(&self, size: u64) -> Result<()> {
        if self.written == size {
            Ok(())
        } else {
            Err(self.id.corrupt(format!(
                "exported {} bytes but {size} were stored",
                self.written
            )))
        }
    }
}

fn section_name(section: u8) -> &'static str {
    match section {
        keys::FRAME => "frame",
        keys::TAIL => "tail chunk",
        _ => "line",
    }
}
