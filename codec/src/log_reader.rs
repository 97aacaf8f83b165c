//! DSH's reader over one session log, line by line: which lines join the committed region, and
//! the verdict DSH's reader gives the whole log. The engine's import runs it over a file; an
//! append through DSH's persistence seam runs it on over the lines it adds, from the state the
//! stored log left it in, so that a log written batch by batch gets exactly the verdict and the
//! committed region an import of the same bytes gets.
//!
//! The rules are the codec's: the body scanner (`BodyScanner`: rows, seqs, the first issue and
//! when it is fatal, V4 admission, the inherited cut), the V0 closed vocabulary (`SupportCheck`),
//! the V1–V3 migration chain's refusals (`MigrationCheck`), and under V4 DSH 0.2's restore of a
//! `Session` (the first committed event whose message shape or surface transition it refuses).

use crate::format::event::event_type;
use crate::format::generation::NEWEST_VERSION;
use crate::format::header::{Header, HeaderCheck};
use crate::format::known_types::SupportCheck;
use crate::json::{JsString, Value};
use crate::migrate::MigrationCheck;
use crate::rules::message_shape::check_message_shape;
use crate::rules::scanner::{BodyScanner, BodyVerdict, LineOutcome};

/// DSH's reader state over a log's body so far.
pub struct LogReader {
    /// The body scanner: the committed region so far.
    pub scanner: BodyScanner,
    /// V0 and V1 refuse event types outside V0's frozen inventory, even ignorable ones.
    closed_v0_vocabulary: bool,
    support: SupportCheck,
    /// V1–V3 logs: DSH 0.2 reads them only through the migration chain and its V4 reader, whose
    /// refusal is the verdict (checked without the session's children, whom an import cannot
    /// know yet).
    migration: Option<MigrationCheck>,
    id: JsString,
    /// V4 logs: DSH 0.2 restores a `Session` from their committed events.
    restores: bool,
    /// V4: the first refusal of that restore (DSH's text).
    restore: Option<String>,
    /// Plaintext bytes consumed so far (header included): the end offset of the last line.
    pub plain_end: u64,
}

impl std::fmt::Debug for LogReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogReader")
            .field("scanner", &self.scanner)
            .field("restore", &self.restore)
            .field("plain_end", &self.plain_end)
            .finish_non_exhaustive()
    }
}

impl LogReader {
    /// A reader for the body under `header`, whose line (with its `\n`) is `header_len` bytes.
    pub fn new(header: &Header, header_len: u64) -> Self {
        let version = header.version.unwrap_or(0);
        LogReader {
            scanner: BodyScanner::for_header(header, header_len),
            closed_v0_vocabulary: version <= 1,
            support: SupportCheck::default(),
            migration: (1..NEWEST_VERSION)
                .contains(&version)
                .then(|| MigrationCheck::new(version, &header.object, Vec::new())),
            id: header.id.clone(),
            restores: version == NEWEST_VERSION,
            restore: None,
            plain_end: header_len,
        }
    }

    /// The reader a clean V0 body leaves after `lines` lines holding `events` events, the last
    /// ending at byte `committed_bytes` with nothing after it: its scanner holds no issue, no
    /// refusal and no relationship state, so its state is these numbers alone (a V4 body keeps
    /// lifecycle state that only reading it again rebuilds).
    pub fn resume_clean_v0(header: &Header, lines: u64, events: u64, committed_bytes: u64) -> Self {
        let mut reader = LogReader::new(header, committed_bytes);
        reader.scanner.resume_clean(lines, events, committed_bytes);
        reader
    }

    /// Hand back committed events for an import's folds only ([`BodyScanner::index_only`]): the
    /// events [`LogReader::observe`] and the surface and projection folds read, no more.
    pub fn index_only(mut self) -> Self {
        self.scanner.index_only();
        self
    }

    /// Consume one complete line (without its `\n`); `Committed` holds its logical events, whose
    /// first seq is `self.scanner.events()` minus their count. `Err` only for input no JS value
    /// model here can hold (nesting too deep).
    pub fn push_line(&mut self, line: &[u8]) -> crate::Result<LineOutcome> {
        self.plain_end += line.len() as u64 + 1;
        self.scanner.push_line(line, self.plain_end)
    }

    /// Account for bytes consumed without a line ending (a final fragment, never a line).
    pub fn skip(&mut self, bytes: u64) {
        self.plain_end += bytes;
    }

    /// Observe committed event `seq`: the closed vocabulary, the migration chain and, under V4,
    /// the restore's message-shape check.
    pub fn observe(&mut self, seq: u64, event: &Value) {
        if self.closed_v0_vocabulary {
            self.support.observe(&self.id, event);
        }
        if let Some(check) = &mut self.migration {
            check.observe(event);
        }
        if self.restores && self.restore.is_none() {
            let subject = format!("seed {} at index {seq}", event_type(event));
            self.restore = check_message_shape(event, &subject).err();
        }
    }

    /// The surface fold (or a message projection) refused committed event `seq` with `rule`,
    /// after [`LogReader::observe`] saw it: under V4, the restore's refusal unless an earlier
    /// one stands.
    pub fn surface_refused(&mut self, seq: u64, rule: &str) {
        if self.restores && self.restore.is_none() {
            self.restore = Some(format!("invalid seed event at index {seq}: {rule}"));
        }
    }

    /// Whether the V4 restore check applies (the surface's refusals feed it).
    pub fn restores(&self) -> bool {
        self.restores
    }

    /// The verdict on the log so far, given the header's check and any container-level (zstd)
    /// refusal, for a body whose file is `body_len` bytes long.
    pub fn verdict(
        &mut self,
        header: &Header,
        container: Option<String>,
        body_len: u64,
    ) -> BodyVerdict {
        match (&header.check, container) {
            (HeaderCheck::Unsupported(m), _) => BodyVerdict::Unsupported(m.clone()),
            (HeaderCheck::Corrupt(m), _) => BodyVerdict::Corrupt(m.clone()),
            (HeaderCheck::Valid, Some(m)) => BodyVerdict::Corrupt(m),
            (HeaderCheck::Valid, None) => match self.scanner.finish(body_len) {
                refused @ (BodyVerdict::Corrupt(_) | BodyVerdict::Unsupported(_)) => refused,
                body => match self
                    .support
                    .refusal()
                    .map(str::to_owned)
                    .or_else(|| self.migration.as_mut().and_then(|c| c.finish()))
                {
                    Some(m) => BodyVerdict::Unsupported(m),
                    None => match self.restore.clone() {
                        Some(m) => BodyVerdict::Corrupt(m),
                        None => body,
                    },
                },
            },
        }
    }
}
