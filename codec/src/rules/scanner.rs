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
//! The row codec follows the header's version: V0/V1 lines are events or packed chunk rows
//! (with DSH 0.1.2's range-encoded `sourceEventSeqs`); V2–V4 lines are one event each under an
//! exact envelope, V4 rows pass admission before tail recovery, and the inherited cut is the last
//! `{inherited:true}` end-seed, which a seeded header requires and an unseeded one forbids. Over
//! the committed V4 events DSH's reader then refuses a type it does not know (unless ignorable),
//! then a broken lifecycle relationship.
//!
//! Invariant: committed lines are exactly the lines before the first issue, and their events have
//! seqs `0..n` in order. Everything after `committed_bytes` is tail.

use crate::format::header::Header;
use crate::format::known_types::v4_unknown_type;
use crate::format::rows::{admit_v4_row, check_surface_op, decode_line, decode_row, Admission};
use crate::json::skim::{skim, Level, Rejected, Skim};
use crate::json::{self, Value};
use crate::rules::fold_reads::partial_v0_event;
use crate::rules::relations::V4Relations;
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
    /// The reader refuses the format (`SessionFormatUnsupportedError`): DSH's text.
    Unsupported(String),
}

/// Streaming body scanner; see the module docs for the rules.
#[derive(Debug)]
pub struct BodyScanner {
    version: u32,
    seeded: bool,
    cut: Option<u64>,
    /// V4: the lifecycle relationships of the committed events, and the first they break
    /// (DSH checks them once the scan is done, over the committed prefix).
    relations: V4Relations,
    relation_error: Option<String>,
    /// V4: the first committed event of a type DSH 0.2 does not know, not marked ignorable
    /// (its reader refuses the log before the relationships).
    unknown_type: Option<String>,
    /// V4: the header's id, and whether it names a parent (a child's inherited delivery
    /// markers name the parent).
    owner: (String, bool),
    line: u64,
    next_seq: u64,
    committed_bytes: u64,
    issue: Option<String>,
    fatal: Option<String>,
    unsupported: Option<String>,
    /// The committed events feed only an import's folds: V0 events of the types
    /// [`partial_v0_event`] knows carry only what those folds read.
    indexing: bool,
}

impl BodyScanner {
    /// A V0 scanner for a body that starts at byte `header_len` of the file.
    pub fn new(header_len: u64) -> Self {
        BodyScanner {
            version: 0,
            seeded: false,
            cut: None,
            relations: V4Relations::default(),
            relation_error: None,
            unknown_type: None,
            owner: (String::new(), false),
            line: 0,
            next_seq: 0,
            committed_bytes: header_len,
            issue: None,
            fatal: None,
            unsupported: None,
            indexing: false,
        }
    }

    /// A scanner for the body under `header` (its version chooses the row codec), starting at
    /// byte `header_len` of the file.
    pub fn for_header(header: &Header, header_len: u64) -> Self {
        BodyScanner {
            version: header.version.unwrap_or(0),
            seeded: header.object.get("isSeeded") == Some(&Value::Bool(true)),
            owner: (
                header.id.to_string_lossy(),
                header.object.contains_key("parentSession"),
            ),
            ..Self::new(header_len)
        }
    }

    /// Hand back committed events for an import's folds only: V0 events of the types
    /// [`partial_v0_event`] knows are built with only the members those folds read (found by the
    /// skim, the rest never built). The verdict and the committed region are unchanged.
    pub fn index_only(&mut self) {
        self.indexing = true;
    }

    /// Continue a clean V0 body as a scan of its first `lines` lines left it: `events` events
    /// committed, the last ending at byte `committed_bytes`, no issue recorded.
    pub fn resume_clean(&mut self, lines: u64, events: u64, committed_bytes: u64) {
        self.line = lines;
        self.next_seq = events;
        self.committed_bytes = committed_bytes;
    }

    /// The V2+ inherited cut so far: the seq of the last committed `{inherited:true}` end-seed.
    pub fn cut(&self) -> Option<u64> {
        self.cut
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
        if self.version >= 2 {
            return self.push_row(line, end);
        }
        let partial = (self.indexing && self.version == 0)
            .then(|| partial_v0_event(line))
            .flatten();
        let parsed = match partial {
            Some(event) => Ok(event),
            None => json::parse_bytes(line),
        };
        let decoded = match parsed {
            Ok(value) => self.decode_v0(value),
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

    /// A V2–V4 line: one row, one event. V4 rows pass admission before anything else; after
    /// the first issue, rows are only parsed to find a `turn/end` that makes it fatal.
    fn push_row(&mut self, line: &[u8], end: u64) -> Result<LineOutcome> {
        if self.issue.is_some() && self.version < 4 {
            return self.push_row_after_issue(line);
        }
        let value = match json::parse_bytes(line) {
            Ok(value) => value,
            Err(e @ crate::Error::TooDeep { .. }) => return Err(e),
            Err(_) => {
                let issue = if self.version == 4 {
                    format!("unparsable committed event at line {}", self.line)
                } else {
                    format!("row {} is not valid JSON", self.line)
                };
                self.issue.get_or_insert(issue);
                return Ok(LineOutcome::Tail);
            }
        };
        if self.version == 4 {
            match admit_v4_row(&value) {
                Ok(()) => {}
                Err(Admission::Corrupt(m)) => {
                    self.fatal = Some(m);
                    return Ok(LineOutcome::Tail);
                }
                Err(Admission::Unsupported(m)) => {
                    self.unsupported = Some(m);
                    self.fatal = Some(String::new());
                    return Ok(LineOutcome::Tail);
                }
            }
        }
        let is_turn_end = value
            .as_object()
            .and_then(|o| o.get("type"))
            .and_then(Value::as_str)
            == Some("turn/end");
        if let Some(issue) = &self.issue {
            if is_turn_end {
                self.fatal = Some(issue.clone());
            }
            return Ok(LineOutcome::Tail);
        }
        match self.decode_row(value) {
            Ok(event) => {
                if self.version == 4 {
                    if self.unknown_type.is_none() {
                        self.unknown_type = v4_unknown_type(&event, self.next_seq);
                    }
                    self.relations.owned(&event);
                    if self.relation_error.is_none() {
                        self.relation_error = self.relations.accept(&event).err();
                    }
                }
                if is_inherited_marker(&event) {
                    self.cut = Some(self.next_seq);
                }
                self.next_seq += 1;
                self.committed_bytes = end;
                Ok(LineOutcome::Committed(vec![event]))
            }
            Err(detail) => {
                let issue = if self.version == 4 {
                    format!("invalid committed event at line {}: {detail}", self.line)
                } else {
                    detail
                };
                if is_turn_end {
                    self.fatal = Some(issue.clone());
                }
                self.issue = Some(issue);
                Ok(LineOutcome::Tail)
            }
        }
    }

    /// A V2/V3 row after the first issue: all that matters is whether it holds a `turn/end`
    /// (which makes the issue fatal), so the row is skimmed, not built; a row the skim does not
    /// index is parsed in full, and one nested too deep fails as the full parser fails.
    fn push_row_after_issue(&mut self, line: &[u8]) -> Result<LineOutcome> {
        let is_turn_end = match skim(line) {
            Ok(Skim::Indexed(envelope)) => envelope
                .get(Level::Top, "type")
                .and_then(|t| envelope.str(t))
                .is_some_and(|t| t == "turn/end"),
            Ok(Skim::Unusual) | Err(Rejected::TooDeep) => {
                let value = json::parse_bytes(line)?;
                value
                    .as_object()
                    .and_then(|o| o.get("type"))
                    .and_then(Value::as_str)
                    == Some("turn/end")
            }
            Err(Rejected::Syntax) => false,
        };
        if is_turn_end {
            self.fatal = self.issue.clone();
        }
        Ok(LineOutcome::Tail)
    }

    /// Decode one V2–V4 row at the next seq: the envelope, the seq, the generation's surfaceOp
    /// spelling and the end-seed's data. `Err` is DSH's text.
    fn decode_row(&self, value: Value) -> std::result::Result<Value, String> {
        let row_index = self.next_seq;
        let o = decode_row(value, row_index)?;
        let seq = o.get("seq").unwrap_or(&Value::Null);
        if seq.as_f64() != Some(row_index as f64) {
            return Err(format!(
                "released v2 row {row_index} has seq gap (expected {row_index}, got {})",
                json::js_string_of(seq)
            ));
        }
        if o.get("type").and_then(Value::as_str) == Some("session/end-seed")
            && !matches!(o.get("data"), Some(Value::Object(_)))
        {
            return Err(format!(
                "session/end-seed {row_index} data must be an object"
            ));
        }
        let event = Value::Object(o);
        check_surface_op(&event, self.version)?;
        Ok(event)
    }

    /// The logical events of one parsed V0/V1 line, or `None` when the row is malformed.
    fn decode_v0(&self, value: Value) -> Option<Vec<Value>> {
        decode_line(value, self.version, self.next_seq).ok()
    }

    /// The verdict for a body whose file is `file_len` bytes long.
    pub fn finish(&self, file_len: u64) -> BodyVerdict {
        if let Some(text) = &self.unsupported {
            return BodyVerdict::Unsupported(text.clone());
        }
        match &self.fatal {
            Some(text) => BodyVerdict::Corrupt(text.clone()),
            None if self.version >= 2 && self.seeded && self.cut.is_none() => BodyVerdict::Corrupt(
                "released v2 seeded Session lacks an inherited end-seed marker".into(),
            ),
            None if self.version >= 2 && !self.seeded && self.cut.is_some() => {
                BodyVerdict::Corrupt(
                    "released v2 unseeded Session contains an inherited end-seed marker".into(),
                )
            }
            None if self.version == 4 && self.unknown_type.is_some() => {
                BodyVerdict::Unsupported(self.unknown_type.clone().unwrap_or_default())
            }
            None if self.version == 4 && self.relation_failure().is_some() => {
                BodyVerdict::Corrupt(self.relation_failure().unwrap_or_default())
            }
            None if self.committed_bytes < file_len => BodyVerdict::Torn,
            None => BodyVerdict::Clean,
        }
    }

    /// DSH 0.2's relationship verdict over the committed events: ownership facts first (DSH
    /// checks them over the whole log before the lifecycle), then the lifecycle.
    fn relation_failure(&self) -> Option<String> {
        let (id, child) = &self.owner;
        self.relations
            .owner_failure(id, *child, self.cut.unwrap_or(0))
            .or_else(|| self.relation_error.clone())
            .or_else(|| self.relations.finish())
    }
}

/// A `session/end-seed` whose `data.inherited` is `true`: the V2+ inherited cut.
fn is_inherited_marker(event: &Value) -> bool {
    event.as_object().is_some_and(|o| {
        o.get("type").and_then(Value::as_str) == Some("session/end-seed")
            && o.get("data")
                .and_then(Value::as_object)
                .and_then(|d| d.get("inherited"))
                == Some(&Value::Bool(true))
    })
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
