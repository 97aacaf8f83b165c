//! `.jsonl.zstd` import (DSH's `readZstdPrefix`): every structurally complete frame is stored
//! verbatim (FRAME keys) and the bytes after them as tail, so export is byte-exact whatever the
//! file's state. The logical index comes from the decoded plaintext, scanned across frames (a
//! record may span two frames); each line's batch is the frame it ends in.
//!
//! Check order, which decides the verdict when a file has several defects: the structural scan
//! and frame 0 come first; then the header; then frames 1.. in order, each scanned before the
//! next is decoded. zstd is stricter than raw text: inside complete frames any line the scanner
//! leaves out (unparsable, seq gap, a record left open) is fatal. A torn final frame's decodable
//! complete records that continue the seq are recovered as logical events (unverified, as in
//! DSH); its bytes stay tail.

use sessionlog_codec::format::header::parse_header;
use sessionlog_codec::format::zstd::{
    check_header_frame, scan_frames, scan_frames_limited, FrameDecoder, HEADER_LESS,
    TORN_RECORD_IN_COMPLETE_FRAME,
};

use super::{check_strict, BodyIndexer, ImportOptions, ImportReport, Landing};
use crate::error::{Error, Result};
use crate::layout::meta::{SessionMeta, SourceEncoding, Verdict};
use crate::store::Store;
use crate::write::session_writer::SessionWriter;

/// DSH's prefix on zstd corruption texts; verdicts drop it like they drop the JSONL one.
const CORRUPT_PREFIX: &str = "corrupt Zstandard session log: ";

/// A zstd corruption text as a verdict words it: without DSH's prefix.
pub(crate) fn strip(m: String) -> String {
    m.strip_prefix(CORRUPT_PREFIX)
        .map(str::to_owned)
        .unwrap_or(m)
}

impl Store {
    /// Import one `.jsonl.zstd` session log held in memory.
    pub fn import_zstd(
        &self,
        source_name: &str,
        bytes: &[u8],
        options: &ImportOptions,
    ) -> Result<ImportReport> {
        self.land_zstd(source_name, bytes, options, Landing::default())
    }

    /// [`Store::import_zstd`] landing as `landing` says.
    pub(crate) fn land_zstd(
        &self,
        source_name: &str,
        bytes: &[u8],
        options: &ImportOptions,
        landing: Landing,
    ) -> Result<ImportReport> {
        let not_a_session = |reason: String| Error::NotASession {
            source_name: source_name.into(),
            reason,
        };
        let mut decoder = FrameDecoder::new()?;
        // A structural defect past frame 0 still leaves frame 0, and so the session's identity.
        let (scan, mut early) = match scan_frames(bytes) {
            Ok(scan) => (scan, None),
            Err(e) => (
                scan_frames_limited(bytes, 1).unwrap_or_default(),
                Some(e.to_string()),
            ),
        };
        let Some(frame0) = scan.frames.first().cloned() else {
            return Err(not_a_session(
                early.unwrap_or_else(|| HEADER_LESS.to_owned()),
            ));
        };
        let mut header_plain = Vec::new();
        decoder
            .decode_frame(&bytes[frame0], 0, &mut header_plain)
            .map_err(|e| not_a_session(format!("its header frame does not decode: {e}")))?;
        let header_end = memchr::memchr(b'\n', &header_plain).map_or(header_plain.len(), |i| i + 1);
        let header_line = header_plain[..header_end].to_vec();
        let header = parse_header(header_line.strip_suffix(b"\n").unwrap_or(&header_line))
            .map_err(|e| not_a_session(e.to_string()))?;
        if early.is_none() {
            early = check_header_frame(&header_plain)
                .err()
                .map(|e| e.to_string());
        }

        let full_parse = landing.full_parse;
        self.import_session(source_name, &header, options, landing, |mut w| {
            let header_len = header_line.len() as u64;
            let mut body = BodyIndexer::new(source_name, &header, header_len, full_parse);
            let mut late = None;
            let mut torn_batch = None;
            let mut plain_end = header_len;
            if early.is_none() {
                let mut carry = Vec::new();
                let mut plain = Vec::new();
                for (index, range) in scan.frames.iter().enumerate().skip(1) {
                    plain.clear();
                    if let Err(e) =
                        decoder.decode_frame(&bytes[range.clone()], range.start, &mut plain)
                    {
                        late = Some(e.to_string());
                        break;
                    }
                    feed(
                        &mut body,
                        &mut w,
                        &mut carry,
                        &plain,
                        &mut plain_end,
                        index as u64,
                        false,
                    )?;
                    if body.reader.scanner.is_fatal() {
                        break;
                    }
                }
                let defect = !carry.is_empty() || body.reader.scanner.has_issue();
                if late.is_none() && !body.reader.scanner.is_fatal() && defect {
                    late = Some(TORN_RECORD_IN_COMPLETE_FRAME.to_owned());
                }
                if let (None, Some(start)) = (&late, scan.torn_start) {
                    let recovered = decoder.decode_torn(&bytes[start..]);
                    let index = scan.frames.len() as u64;
                    torn_batch = Some(index);
                    let mut recovered_end = plain_end;
                    feed(
                        &mut body,
                        &mut w,
                        &mut Vec::new(),
                        &recovered,
                        &mut recovered_end,
                        index,
                        true,
                    )?;
                }
            }
            for range in &scan.frames {
                w.put_frame(&bytes[range.clone()])?;
            }
            w.put_tail(&bytes[scan.frames.last().map_or(0, |r| r.end)..])?;
            let verdict = match early.clone() {
                Some(m) => Verdict::Corrupt(strip(m)),
                None => {
                    match body.verdict(
                        &header,
                        late.map(strip),
                        body.reader.scanner.committed_bytes(),
                    ) {
                        Verdict::Clean if scan.torn_start.is_some() => Verdict::Torn,
                        v => v,
                    }
                }
            };
            check_strict(options, source_name, &header, &verdict)?;
            let committed_bytes = body.reader.scanner.committed_bytes();
            let meta = SessionMeta {
                verdict,
                events: body.reader.scanner.events(),
                body_lines: body.reader.scanner.lines(),
                committed_bytes,
                total_bytes: bytes.len() as u64,
                plaintext_bytes: committed_bytes.min(plain_end),
                torn_batch,
                surface_error: body.surface.error.clone(),
                surface_since_snapshot: body.surface.indexer.since_snapshot,
                activity_ms: body.activity(),
                inherited_cut: body.reader.scanner.cut(),
                next_batch: scan.frames.len() as u64 + u64::from(scan.torn_start.is_some()),
                ..SessionMeta::new(
                    w.number(),
                    &header,
                    header_line.clone(),
                    SourceEncoding::JsonlZstd,
                )
            };
            w.finish(meta, options.defer_sync)
        })
    }
}

/// Scan plaintext into lines. `carry` holds a record continuing from an earlier frame and the
/// unterminated rest afterwards. With `stop_at_tail` (torn-frame recovery) scanning ends at the
/// first record the committed region does not take.
fn feed(
    body: &mut BodyIndexer,
    w: &mut SessionWriter<'_>,
    carry: &mut Vec<u8>,
    plain: &[u8],
    end: &mut u64,
    batch: u64,
    stop_at_tail: bool,
) -> Result<()> {
    let mut rest = plain;
    while let Some(nl) = memchr::memchr(b'\n', rest) {
        let (piece, after) = rest.split_at(nl);
        *end += nl as u64 + 1;
        let committed = if carry.is_empty() {
            body.line(w, piece, batch)?
        } else {
            carry.extend_from_slice(piece);
            let line = std::mem::take(carry);
            body.line(w, &line, batch)?
        };
        if stop_at_tail && !committed {
            return Ok(());
        }
        rest = &after[1..];
    }
    carry.extend_from_slice(rest);
    *end += rest.len() as u64;
    Ok(())
}
