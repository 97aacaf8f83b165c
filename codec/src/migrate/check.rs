//! DSH 0.2's verdict on an older generation, streamed. DSH 0.2 opens a V0–V3 log only through
//! the migration chain and then reads the result with its V4 reader, so a log that an edge or
//! that reader refuses is one DSH 0.2 will not open.
//!
//! - [`Admission`] is the V4 reader over a migrated log, fed one event at a time as its rows;
//! - [`MigrationCheck`] runs the chain and the admission over a source log's events.

use super::{Chain, ChildFacts, TARGET_VERSION};
use crate::format::header::{parse_header, HeaderCheck};
use crate::format::rows::file_row_text;
use crate::json::{stringify, Object, Value};
use crate::rules::scanner::{BodyScanner, BodyVerdict};

/// The V4 reader over a migrated log, in strict mode: every row must be committed cleanly.
pub struct Admission {
    scanner: BodyScanner,
    offset: u64,
    failure: Option<String>,
}

impl Admission {
    /// The reader for a log whose (migrated) header is `header`; also returns the header line.
    pub fn new(header: &Object) -> Result<(Admission, String), String> {
        let line = stringify(&Value::Object(header.clone()));
        let parsed = parse_header(line.as_bytes()).map_err(|e| e.to_string())?;
        if let HeaderCheck::Unsupported(m) | HeaderCheck::Corrupt(m) = &parsed.check {
            return Err(m.clone());
        }
        let offset = line.len() as u64 + 1;
        let admission = Admission {
            scanner: BodyScanner::for_header(&parsed, offset),
            offset,
            failure: None,
        };
        Ok((admission, line))
    }

    /// Read the next event's row; returns the row's text (without `\n`).
    pub fn push(&mut self, event: &Value) -> String {
        let row = file_row_text(event);
        if self.failure.is_none() {
            self.offset += row.len() as u64 + 1;
            if let Err(e) = self.scanner.push_line(row.as_bytes(), self.offset) {
                self.failure = Some(e.to_string());
            }
        }
        row
    }

    /// The reader's verdict: clean, or its reason.
    pub fn finish(&self) -> Result<(), String> {
        if let Some(f) = &self.failure {
            return Err(f.clone());
        }
        match self.scanner.finish(self.offset) {
            BodyVerdict::Clean => Ok(()),
            BodyVerdict::Torn => Err("current session generation has a torn physical tail".into()),
            BodyVerdict::Corrupt(m) | BodyVerdict::Unsupported(m) => Err(m),
        }
    }
}

/// DSH 0.2's refusal of a migrated log its V4 reader does not admit.
pub fn transformed_refusal(from: u32, detail: &str) -> String {
    format!(
        "Session migration from v{from} to v{TARGET_VERSION} refuses the transformed artifact: {detail}"
    )
}

/// A migrated log as its V4 file holds it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Successor {
    /// The header line and every row, each ending in `\n`.
    pub text: Vec<u8>,
    /// Where the rows start in `text`.
    pub header_len: usize,
    /// The events, seqs dense from 0.
    pub events: Vec<Value>,
}

/// The chain and the V4 reader over a source log, event by event; the first refusal is kept,
/// and with [`MigrationCheck::keeping`] the successor too.
pub struct MigrationCheck {
    from: u32,
    chain: Chain,
    admission: Option<Admission>,
    refusal: Option<String>,
    emitted: Vec<Object>,
    kept: Option<Successor>,
}

impl MigrationCheck {
    /// A check of a format-`from` log whose header is `header` (its session's children in
    /// `children`, for the catalog backfill). A header DSH 0.2 cannot take is refused at once:
    /// first its version (DSH reads it before anything else), then the edges' header rules.
    pub fn new(from: u32, header: &Object, children: Vec<ChildFacts>) -> Self {
        Self::start(from, header, children, false)
    }

    /// [`MigrationCheck::new`], keeping the successor for [`MigrationCheck::into_successor`].
    pub fn keeping(from: u32, header: &Object, children: Vec<ChildFacts>) -> Self {
        Self::start(from, header, children, true)
    }

    fn start(from: u32, header: &Object, children: Vec<ChildFacts>, keep: bool) -> Self {
        let mut check = MigrationCheck {
            from,
            chain: Chain::from_version(from, children),
            admission: None,
            refusal: None,
            emitted: Vec::new(),
            kept: None,
        };
        if header.get("version").and_then(Value::as_count).is_none() {
            check.refusal =
                Some("Session format version must be a non-negative safe integer".into());
            return check;
        }
        let mut header = header.clone();
        match check.chain.header(&mut header) {
            Err(r) => check.refusal = Some(r.to_string()),
            Ok(()) => match Admission::new(&header) {
                Ok((admission, line)) => {
                    check.admission = Some(admission);
                    if keep {
                        let mut text = line.into_bytes();
                        text.push(b'\n');
                        check.kept = Some(Successor {
                            header_len: text.len(),
                            text,
                            events: Vec::new(),
                        });
                    }
                }
                Err(detail) => check.refusal = Some(transformed_refusal(from, &detail)),
            },
        }
        check
    }

    /// The refusal met so far (the header's, before any event).
    pub fn refusal(&self) -> Option<&str> {
        self.refusal.as_deref()
    }

    /// The next source event.
    pub fn observe(&mut self, event: &Value) {
        if self.refusal.is_some() {
            return;
        }
        match self.chain.push(event.clone(), &mut self.emitted) {
            Ok(()) => self.admit(),
            Err(r) => self.refusal = Some(r.to_string()),
        }
    }

    /// The end of the source: DSH 0.2's refusal, if the log has one.
    pub fn finish(&mut self) -> Option<String> {
        if self.refusal.is_none() {
            match self.chain.finish(&mut self.emitted) {
                Ok(()) => self.admit(),
                Err(r) => self.refusal = Some(r.to_string()),
            }
        }
        if self.refusal.is_none() {
            if let Some(Err(detail)) = self.admission.as_ref().map(Admission::finish) {
                self.refusal = Some(transformed_refusal(self.from, &detail));
            }
        }
        self.refusal.clone()
    }

    /// After a [`MigrationCheck::finish`] without refusal: the successor, when kept.
    pub fn into_successor(self) -> Option<Successor> {
        self.kept.filter(|_| self.refusal.is_none())
    }

    fn admit(&mut self) {
        let Some(admission) = &mut self.admission else {
            return;
        };
        for event in self.emitted.drain(..) {
            let event = Value::Object(event);
            let row = admission.push(&event);
            if let Some(kept) = &mut self.kept {
                kept.text.extend_from_slice(row.as_bytes());
                kept.text.push(b'\n');
                kept.events.push(event);
            }
        }
    }
}
