//! Import in the fleet: a DSH session file becomes a fleet session through the group commit's
//! hook, as its header and its batches: each zstd frame after the header's of a `.jsonl.zstd`
//! file, the whole body as one batch of a `.jsonl` file (a file does not say where its writer's
//! batches ended). Every batch is checked before the first is committed: the file must be whole
//! (whole lines; complete frames, each decoding to whole lines; a header frame as DSH's writer
//! compresses it, which the engine re-makes from the header line), so what the fleet refuses is
//! refused before anything is written.
//!
//! Invariant: PostgreSQL holds the file's exact bytes, so every host exports it byte for byte.

use sessionlog_codec::format::zstd::{compress_frame, scan_frames, FrameDecoder};
use sessionlog_engine::{AppendItem, SourceEncoding};

use crate::error::{Error, Result};
use crate::fleet::Fleet;

/// What an import into the fleet created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Imported {
    /// The session's id (its header's).
    pub id: String,
    /// The batches committed after the header.
    pub batches: u64,
    /// The events the session holds.
    pub events: u64,
}

/// A DSH file cut into what the fleet commits.
struct Cut {
    header_line: String,
    encoding: SourceEncoding,
    batches: Vec<Vec<u8>>,
}

impl Fleet {
    /// Import the DSH session file `bytes` (named `name` in errors) as a new fleet session,
    /// which this host then holds. Refused whole, writing nothing, when the file is not whole
    /// or its id is in the fleet already.
    pub fn import(&self, name: &str, bytes: &[u8]) -> Result<Imported> {
        let cut = cut(name, bytes)?;
        let id = session_id(name, &cut.header_line)?;
        let mut batches = cut.batches.into_iter();
        let first = AppendItem::written_bytes(&id, Some(0), batches.next().unwrap_or_default())
            .creating(cut.header_line, cut.encoding);
        let mut items = vec![first];
        items.extend(batches.map(|b| AppendItem::written_bytes(&id, None, b)));
        let total = items.len() as u64;
        for (n, item) in (0u64..).zip(items) {
            let outcome = self.store.append_many(vec![item]).pop().unwrap_or_else(|| {
                Err(sessionlog_engine::Error::Internal(
                    "an import's batch gave no outcome".into(),
                ))
            });
            if let Err(e) = outcome {
                return Err(match n {
                    0 => e.into(),
                    _ => Error::Import {
                        name: name.to_owned(),
                        why: format!(
                            "batch {} of {total} was not committed ({e}); session \"{id}\" holds \
                             the batches before it in the fleet",
                            n + 1
                        ),
                    },
                });
            }
        }
        Ok(Imported {
            batches: self.store.summary(&id)?.batches.saturating_sub(1),
            events: self.store.summary(&id)?.events,
            id,
        })
    }
}

/// Cut the DSH file `bytes` into its header line and batches, refusing a file that is not
/// whole.
fn cut(name: &str, bytes: &[u8]) -> Result<Cut> {
    let refuse = |why: String| Error::Import {
        name: name.to_owned(),
        why: format!("{why}; nothing was imported"),
    };
    if bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let scan = scan_frames(bytes).map_err(|e| refuse(format!("not a Zstandard log: {e}")))?;
        if scan.torn_start.is_some() {
            return Err(refuse(
                "its last frame is torn; the fleet takes whole frames (import it into a store of \
                 its own to keep it as it is)"
                    .into(),
            ));
        }
        let mut decoder = FrameDecoder::new().map_err(|e| refuse(e.to_string()))?;
        let mut texts = Vec::with_capacity(scan.frames.len());
        for (k, range) in scan.frames.iter().enumerate() {
            let mut plain = Vec::new();
            decoder
                .decode_frame(&bytes[range.clone()], 0, &mut plain)
                .map_err(|e| refuse(format!("frame {k} does not decode: {e}")))?;
            if plain.last() != Some(&b'\n') {
                return Err(refuse(format!("frame {k} does not end with a whole line")));
            }
            texts.push(plain);
        }
        let Some(header) = texts.first() else {
            return Err(refuse("it is empty".into()));
        };
        let remade = compress_frame(header).map_err(|e| refuse(e.to_string()))?;
        if scan.frames.first().map(|r| &bytes[r.clone()]) != Some(remade.as_slice()) {
            return Err(refuse(
                "its header frame is not compressed as DSH's writer compresses it, so the fleet \
                 could not give it back byte for byte"
                    .into(),
            ));
        }
        return Ok(Cut {
            header_line: header_line(name, header)?,
            encoding: SourceEncoding::JsonlZstd,
            batches: scan.frames[1..]
                .iter()
                .map(|r| bytes[r.clone()].to_vec())
                .collect(),
        });
    }
    let end = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| refuse("it has no whole header line".into()))?;
    let body = &bytes[end + 1..];
    if !body.is_empty() && body.last() != Some(&b'\n') {
        return Err(refuse(
            "it ends inside a line (a torn tail); the fleet takes whole lines (repair it, or \
             import it into a store of its own to keep it as it is)"
                .into(),
        ));
    }
    Ok(Cut {
        header_line: header_line(name, &bytes[..=end])?,
        encoding: SourceEncoding::Jsonl,
        batches: match body.is_empty() {
            true => Vec::new(),
            false => vec![body.to_vec()],
        },
    })
}

/// The header line (without its `\n`) of a header record.
fn header_line(name: &str, record: &[u8]) -> Result<String> {
    let line = record.strip_suffix(b"\n").unwrap_or(record);
    String::from_utf8(line.to_vec()).map_err(|_| Error::Import {
        name: name.to_owned(),
        why: "its header is not text; nothing was imported".into(),
    })
}

/// The session id the header line names.
fn session_id(name: &str, header_line: &str) -> Result<String> {
    sessionlog_codec::format::header::parse_header(header_line.as_bytes())
        .map(|h| h.id.to_string_lossy())
        .map_err(|e| Error::Import {
            name: name.to_owned(),
            why: format!("not a DSH session log: {e}; nothing was imported"),
        })
}
