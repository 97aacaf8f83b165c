//! Import in the fleet: a DSH session file becomes a fleet session through the group commit's
//! hook, created with its whole body as its first batch (every line after the header's, or every
//! zstd frame after the header's, kept as they are), so PostgreSQL takes the file in one fenced
//! transaction or not at all. The file must be whole (whole lines; complete frames, each
//! decoding to whole lines; a header frame as DSH's writer compresses it, which the engine
//! re-makes from the header line); a file that is not is refused before anything is written.
//!
//! Invariant: PostgreSQL holds the file's exact bytes, so every host exports it byte for byte.

use sessionlog_codec::format::zstd::{compress_frame, scan_frames, FrameDecoder, MAGIC_BYTES};
use sessionlog_engine::{AppendItem, SourceEncoding};

use crate::error::{Error, Result};
use crate::fleet::Fleet;

/// What an import into the fleet created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Imported {
    /// The session's id (its header's).
    pub id: String,
    /// The events the session holds.
    pub events: u64,
}

/// A DSH file cut into what the fleet commits: its header line and its body (every line after
/// the header's, or every frame after the header's).
struct Cut {
    header_line: String,
    encoding: SourceEncoding,
    body: Vec<u8>,
}

impl Fleet {
    /// Import the DSH session file `bytes` (named `name` in errors) as a new fleet session,
    /// which this host then holds: one batch, committed whole or refused whole (a file that is
    /// not whole, an id already in the fleet), writing nothing then.
    pub fn import(&self, name: &str, bytes: &[u8]) -> Result<Imported> {
        let cut = cut(name, bytes)?;
        let id = session_id(name, &cut.header_line)?;
        let item = AppendItem::written_bytes(&id, Some(0), cut.body)
            .creating(cut.header_line, cut.encoding);
        self.store
            .append_many(vec![item])
            .pop()
            .unwrap_or_else(|| {
                Err(sessionlog_engine::Error::Internal(
                    "an import gave no outcome".into(),
                ))
            })?;
        let summary = self.store.summary(&id)?;
        Ok(Imported {
            id,
            events: summary.events,
        })
    }
}

/// Cut the DSH file `bytes` into its header line and body, refusing a file whose end is torn or
/// whose header the fleet could not give back byte for byte.
fn cut(name: &str, bytes: &[u8]) -> Result<Cut> {
    let refuse = |why: String| Error::Import {
        name: name.to_owned(),
        why: format!("{why}; nothing was imported"),
    };
    if bytes.starts_with(&MAGIC_BYTES) {
        let scan = scan_frames(bytes).map_err(|e| refuse(format!("not a Zstandard log: {e}")))?;
        if scan.torn_start.is_some() {
            return Err(refuse(
                "its last frame is torn; the fleet takes whole frames (import it into a store of \
                 its own to keep it as it is)"
                    .into(),
            ));
        }
        // The frames after the header's are checked by the engine as it stages them.
        let Some(first) = scan.frames.first() else {
            return Err(refuse("it is empty".into()));
        };
        let mut header = Vec::new();
        FrameDecoder::new()
            .and_then(|mut d| d.decode_frame(&bytes[first.clone()], 0, &mut header))
            .map_err(|e| refuse(format!("its header frame does not decode: {e}")))?;
        let remade = compress_frame(&header).map_err(|e| refuse(e.to_string()))?;
        if bytes[first.clone()] != remade[..] {
            return Err(refuse(
                "its header frame is not compressed as DSH's writer compresses it, so the fleet \
                 could not give it back byte for byte"
                    .into(),
            ));
        }
        let body = scan.frames.get(1).map_or(bytes.len(), |r| r.start);
        return Ok(Cut {
            header_line: header_line(name, &header)?,
            encoding: SourceEncoding::JsonlZstd,
            body: bytes[body..].to_vec(),
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
        body: body.to_vec(),
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
