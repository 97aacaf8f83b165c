//! The JSONL body scanner with DSH's strict-reader semantics (`SessionLogScanner`).
//!
//! Fed one newline-terminated body line at a time, it decides whether the line joins the
//! *committed region* (the valid contiguous prefix of logical events) and, at the end, gives
//! DSH's verdict. The rules, exactly as DSH applies them:
//! - an unparsable line or malformed row records an issue (`unparsable committed event at line N`)
//!   and is skipped; a seq mismatch rolls back its whole row and records a gap issue;
//! - once an issue exists, a later parsable line holding a `turn/end` makes the issue fatal (the
//!   defect is inside the committed region); otherwise the rest of the file is a removable tail;
//! - a final fragment without `\n` is never consumed (torn).
//!
//! Invariant: committed lines are exactly the lines before the first issue, and their events have
//! seqs `0..n` in order. Everything after `committed_bytes` is tail.

use crate::chunk_rows::decode_record;
use crate::json::{self, Value};
use crate::Result;

/// What became of one body line.
#[derive(Debug)]
pub enum LineOutcome {
    /// The line is part of the committed region and holds these logical events (seqs contiguous).
    Committed(Vec<Value>),
    /// The line is past the committed region (tail): it is kept as bytes only.
    Tail,
}

/// DSH's reader verdict on a body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BodyVerdict {
    /// Every byte is committed.
    Clean,
    /// A removable tail follows the committed region.
    Torn,
    /// The reader throws: the text is DSH's, without the `corrupt session log: ` prefix.
    Corrupt(String),
}

/// Streaming body scanner; see the module docs for the rules.
#[derive(Debug)]
pub struct BodyScanner {
    line: u64,
    next_seq: u64,
    committed_bytes: u64,
    issue: Option<String>,
    fatal: Option<String>,
}

impl BodyScanner {
    /// A scanner for a body that starts at byte `header_len` of the file.
    pub fn new(header_len: u64) -> Self {
        BodyScanner {
            line: 0,
            next_seq: 0,
            committed_bytes: header_len,
            issue: None,
            fatal: None,
        }
    }

    /// Number of committed logical events so far (= the next expected seq).
    pub fn events(&self) -> u64 {
        self.next_seq
    }

    /// End offset of the last committed line.
    pub fn committed_bytes(&self) -> u64 {
        self.committed_bytes
    }

    /// Whether the reader has thrown (everything from here on is tail).
    pub fn is_fatal(&self) -> bool {
        self.fatal.is_some()
    }

    /// Whether some consumed line was left out of the committed region.
    pub fn has_issue(&self) -> bool {
        self.issue.is_some() || self.fatal.is_some()
    }

    /// Body lines consumed so far.
    pub fn lines(&self) -> u64 {
        self.line
    }

    /// Consume one complete body line (`line` excludes the `\n`; `end` is the file offset just
    /// past it). `Err` only for input no JS value model here can hold (nesting deeper than
    /// [`json::MAX_DEPTH`]); DSH-level defects are recorded, never returned as errors.
    pub fn push_line(&mut self, line: &[u8], end: u64) -> Result<LineOutcome> {
        self.line += 1;
        if self.fatal.is_some() {
            return Ok(LineOutcome::Tail);
        }
        let decoded = match json::parse(&String::from_utf8_lossy(line)) {
            Ok(value) => decode_record(value).ok(),
            Err(e @ crate::Error::TooDeep { .. }) => return Err(e),
            Err(_) => None,
        };
        let Some(events) = decoded else {
            self.issue
                .get_or_insert_with(|| format!("unparsable committed event at line {}", self.line));
            return Ok(LineOutcome::Tail);
        };
        if let Some(issue) = &self.issue {
            match has_turn_end(&events) {
                Err(type_error) => self.fatal = Some(type_error),
                Ok(true) => self.fatal = Some(issue.clone()),
                Ok(false) => {}
            }
            return Ok(LineOutcome::Tail);
        }
        for (k, event) in events.iter().enumerate() {
            let expected = self.next_seq + k as u64;
            let seq = match event {
                Value::Null => {
                    self.fatal = Some("Cannot read properties of null (reading 'seq')".into());
                    return Ok(LineOutcome::Tail);
                }
                Value::Object(o) => o.get("seq"),
                _ => None,
            };
            if seq.and_then(Value::as_f64) != Some(expected as f64) {
                let got = seq.map_or_else(|| "undefined".to_owned(), json::js_string_of);
                let issue = format!(
                    "seq gap in committed region at line {} (expected {expected}, got {got})",
                    self.line
                );
                if has_turn_end(&events).unwrap_or(false) {
                    self.fatal = Some(issue.clone());
                }
                self.issue = Some(issue);
                return Ok(LineOutcome::Tail);
            }
        }
        self.next_seq += events.len() as u64;
        self.committed_bytes = end;
        Ok(LineOutcome::Committed(events))
    }

    /// The verdict for a body whose file is `file_len` bytes long.
    pub fn finish(&self, file_len: u64) -> BodyVerdict {
        match &self.fatal {
            Some(text) => BodyVerdict::Corrupt(text.clone()),
            None if self.committed_bytes < file_len => BodyVerdict::Torn,
            None => BodyVerdict::Clean,
        }
    }
}

/// `decoded.some(e => e.type === 'turn/end')`, with JS's TypeError on a `null` member.
fn has_turn_end(events: &[Value]) -> std::result::Result<bool, String> {
    for e in events {
        match e {
            Value::Null => return Err("Cannot read properties of null (reading 'type')".into()),
            Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("turn/end") => {
                return Ok(true)
            }
            _ => {}
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests;
