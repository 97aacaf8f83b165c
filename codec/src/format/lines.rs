//! The one line-authoring rule: how events become log lines, exactly as DSH's JSONL writer
//! writes them. The engine's appends, repairs, forks and a fork's re-serialized seed all go
//! through it, and so does the hosting benchmark's model of DSH's JSONL backend.
//!
//! Invariant: the lines of one batch are a pure function of the format version and the events:
//! V2+ logs hold one row per event (`sourceEventSeqs` range-encoded in the file form); V0 (and
//! V1) logs pack each run of `assistant/chunk` events into one line.

use crate::format::chunk_rows::pack_runs;
use crate::format::rows::write_file_row;
use crate::json::Value;

/// Append to `text` the lines (each with its `\n`) of `events` written as one batch to a log of
/// format `version`, and to `members` each line's number of events.
pub fn author_lines(version: u32, events: &[Value], text: &mut String, members: &mut Vec<u32>) {
    if version >= 2 {
        for event in events {
            write_file_row(text, event);
            text.push('\n');
            members.push(1);
        }
    } else {
        for packed in &pack_runs(events) {
            packed.write_json(text);
            text.push('\n');
            members.push(u32::try_from(packed.members()).unwrap_or(u32::MAX));
        }
    }
}
