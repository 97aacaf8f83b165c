//! A generated session as a live host would write it: the header line, then its write batches
//! one by one, each with its logical events and the exact text DSH's JSONL backend appends.
//! ([`session_batches`](super::session_batches) and
//! [`session_batches_v4`](super::session_batches_v4) build them.)
//!
//! Invariant: the header line, a `"\n"`, and the batch texts concatenated are byte-identical to
//! [`session_bytes`](super::session_bytes) of the same session when it is not torn (torn tails
//! are a property of files, not of a live feed, so a feed never has one).

use sessionlog_codec::format::header::parse_header;
use sessionlog_codec::json::{stringify, JsString, Value};

/// One DSH write batch (one `appendBatch` call).
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    /// Seq of the first event.
    pub first_seq: u64,
    /// The logical events, seqs `first_seq..first_seq + events.len()`, in DSH key order.
    pub events: Vec<Value>,
    /// What DSH's JSONL backend appends for it: `pack_chunk_runs(events)`, each record
    /// `JSON.stringify`'d and followed by `"\n"`.
    pub text: String,
}

/// One session: its header line and its batches, in write order.
#[derive(Clone, Debug)]
pub struct SessionFeed {
    /// The session id (the header's `id`).
    pub id: String,
    /// The header line, without its `"\n"`.
    pub header_line: String,
    /// The batches; their seqs are contiguous from 0.
    pub batches: Vec<Batch>,
}

impl SessionFeed {
    /// Logical events over all batches.
    pub fn events(&self) -> u64 {
        self.batches.iter().map(|b| b.events.len() as u64).sum()
    }

    /// The JSONL file DSH writes for this session: the header line, then every batch's lines.
    pub fn dsh_bytes(&self) -> Vec<u8> {
        let mut bytes = format!("{}\n", self.header_line).into_bytes();
        for batch in &self.batches {
            bytes.extend_from_slice(batch.text.as_bytes());
        }
        bytes
    }

    /// The header line with `id` in place of this feed's id (same key order, same other fields):
    /// how a host replays these batches as another session. Events never name their session,
    /// so the batches need no change.
    pub fn header_line_for(&self, id: &str) -> String {
        let Ok(header) = parse_header(self.header_line.as_bytes()) else {
            // The generator authored this line; it always parses. Fall back to text replacement.
            return self.header_line.replacen(&self.id, id, 1);
        };
        let mut object = header.object;
        object.insert(JsString::from("id"), Value::from(id));
        stringify(&Value::Object(object))
    }
}
