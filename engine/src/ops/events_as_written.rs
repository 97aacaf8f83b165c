//! The events of a log DSH's 0.1.0 reader refuses, read from its lines as they are written, for
//! a host behind DSH's persistence seam: DSH's coordinator judges them at load (a newer DSH
//! normalises some legacy shapes there), so they are handed over unjudged.
//!
//! Invariant: the events are the lines' logical events in order (packed chunk runs and V2+ rows
//! decoded as the line's generation writes them); a line that is no event at all is the log's
//! corruption, reported as such, never skipped.

use sessionlog_codec::format::rows::decode_line;
use sessionlog_codec::json::{parse, Value};

use crate::error::{Error, Result};
use crate::ops::export::ExportFormat;
use crate::store::Store;

impl Store {
    /// Call `put` with each event of session `id`'s lines from the `from`-th on, whatever DSH's
    /// reader makes of them (see [`AppendItem::as_written`](crate::AppendItem::as_written)).
    /// Reads the whole log: for logs the reader refuses, whose events are not indexed.
    pub fn events_as_written(
        &self,
        id: &str,
        from: u64,
        put: &mut dyn FnMut(&Value),
    ) -> Result<()> {
        let version = self.require_meta(id.as_bytes())?.version;
        let mut bytes = Vec::new();
        self.export(id, Some(ExportFormat::Jsonl), &mut bytes)?;
        let corrupt = |line: usize, detail: String| Error::Corrupt {
            id: id.into(),
            detail: format!("line {line} is not a session event: {detail}"),
        };
        let mut seq = 0u64;
        for (k, line) in bytes.split_inclusive(|&b| b == b'\n').enumerate().skip(1) {
            let Some(text) = line.strip_suffix(b"\n") else {
                break;
            };
            let value =
                parse(&String::from_utf8_lossy(text)).map_err(|e| corrupt(k + 1, e.to_string()))?;
            for event in &decode_line(value, version, seq).map_err(|e| corrupt(k + 1, e))? {
                if seq >= from {
                    put(event);
                }
                seq += 1;
            }
        }
        Ok(())
    }
}
