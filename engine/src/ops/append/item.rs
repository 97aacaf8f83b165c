//! What one session's batch in an append is: [`AppendItem`], its session, expected seq and
//! [`AppendBatch`] (the events or bytes, and the one way they reach the store), and whether it
//! creates its session ([`NewSession`]).
//!
//! Invariant: an item's batch is one of the four ways a batch is appended, so no item can be
//! built that mixes two (events and bytes, a replicated batch given as events); creation is
//! orthogonal to them, as each may create its session.

use sessionlog_codec::format::event::NewEvent;

use crate::layout::meta::SourceEncoding;

/// One session's batch in an append.
#[derive(Clone, Debug)]
pub struct AppendItem {
    /// Session id.
    pub id: String,
    /// The seq the caller believes comes next; `None` skips the check.
    pub expected_next_seq: Option<u64>,
    /// The batch, and how it is appended.
    pub batch: AppendBatch,
    /// Create the session with this batch (see [`AppendItem::creating`]).
    pub create: Option<NewSession>,
}

/// What an [`AppendItem`] appends, and how: each variant is one way a batch reaches the store.
#[derive(Clone, Debug)]
pub enum AppendBatch {
    /// DSH events, in order, checked by DSH's append rules and written as DSH's writer writes
    /// them ([`AppendItem::new`]).
    Events(Vec<NewEvent>),
    /// DSH events, in order, kept as DSH's writer writes them even where DSH's append rules
    /// refuse them ([`AppendItem::as_written`]).
    AsWritten(Vec<NewEvent>),
    /// The bytes the batch adds to the log file, kept verbatim and offered to the store's commit
    /// hook like any batch ([`AppendItem::written_bytes`]).
    Bytes(Vec<u8>),
    /// Bytes as [`AppendBatch::Bytes`] that the store's system of record holds already, never
    /// offered to the commit hook ([`AppendItem::replicated`]).
    Replicated(Vec<u8>),
}

impl AppendBatch {
    /// The batch's events, for a batch given as events.
    pub(crate) fn events_mut(&mut self) -> Option<&mut Vec<NewEvent>> {
        match self {
            AppendBatch::Events(events) | AppendBatch::AsWritten(events) => Some(events),
            AppendBatch::Bytes(_) | AppendBatch::Replicated(_) => None,
        }
    }

    /// How many events the batch holds as given (0 for bytes, whose events DSH's reader counts).
    pub(crate) fn given_events(&self) -> usize {
        match self {
            AppendBatch::Events(events) | AppendBatch::AsWritten(events) => events.len(),
            AppendBatch::Bytes(_) | AppendBatch::Replicated(_) => 0,
        }
    }

    /// Whether the batch is kept as DSH's writer wrote it (so its session's header is too):
    /// every batch but strict events.
    pub(crate) fn is_written(&self) -> bool {
        !matches!(self, AppendBatch::Events(_))
    }

    /// Whether the store's system of record holds the batch already.
    pub(crate) fn is_replicated(&self) -> bool {
        matches!(self, AppendBatch::Replicated(_))
    }

    /// Take the batch, leaving an empty one of events.
    pub(crate) fn take(&mut self) -> AppendBatch {
        std::mem::replace(self, AppendBatch::Events(Vec::new()))
    }
}

/// A session an [`AppendItem`] creates: its header line (without `\n`), as DSH's writer authors
/// it, and how its bytes are kept.
#[derive(Clone, Debug)]
pub struct NewSession {
    /// The header line; it must name the item's id (and pass DSH's strict header check, unless
    /// the item's batch is kept as written: anything but [`AppendBatch::Events`]).
    pub header_line: String,
    /// The session's encoding.
    pub encoding: SourceEncoding,
}

impl AppendItem {
    /// Append `events` to the stored session `id`, by DSH's append rules.
    pub fn new(
        id: impl Into<String>,
        expected_next_seq: Option<u64>,
        events: Vec<NewEvent>,
    ) -> Self {
        AppendItem {
            id: id.into(),
            expected_next_seq,
            batch: AppendBatch::Events(events),
            create: None,
        }
    }

    /// A batch given as the bytes it adds to the log file (its lines for a `.jsonl` log, its
    /// zstd frames, each of whole lines, for a `.jsonl.zstd` one), kept verbatim and read by
    /// DSH's reader as [`AppendItem::as_written`] batches are. Offered to the store's commit
    /// hook like any batch: how a fleet writes bytes authored whole elsewhere (a fork's seed
    /// batch, an imported file's batches) through its system of record.
    pub fn written_bytes(
        id: impl Into<String>,
        expected_next_seq: Option<u64>,
        bytes: Vec<u8>,
    ) -> Self {
        AppendItem {
            batch: AppendBatch::Bytes(bytes),
            ..AppendItem::new(id, expected_next_seq, Vec::new())
        }
    }

    /// A [`AppendItem::written_bytes`] batch its system of record already holds: a store that
    /// is the index of a fleet's system of record catches up with these. Not offered to the
    /// store's commit hook (the one append a store with a hook takes without it).
    pub fn replicated(
        id: impl Into<String>,
        expected_next_seq: Option<u64>,
        bytes: Vec<u8>,
    ) -> Self {
        AppendItem {
            batch: AppendBatch::Replicated(bytes),
            ..AppendItem::new(id, expected_next_seq, Vec::new())
        }
    }

    /// Create the session with this batch as its first, in the same commit: as DSH's backends
    /// publish a session with its first batch, one synced write for both. The session must not
    /// be stored; a batch refused by DSH's rules creates nothing. This is the one way a session
    /// is created.
    pub fn creating(mut self, header_line: impl Into<String>, encoding: SourceEncoding) -> Self {
        self.create = Some(NewSession {
            header_line: header_line.into(),
            encoding,
        });
        self
    }

    /// Write the batch's events as DSH's writer writes them, whatever DSH's reader will say of
    /// the log: what DSH's append rules refuse (an unknown event type, a malformed legacy message
    /// shape, a header version DSH does not read) is stored anyway, with the verdict DSH's
    /// reader gives the resulting log, as DSH's own JSONL backend keeps it for DSH to judge at
    /// load. For hosts behind DSH's persistence seam; the store's own writers stay strict. A
    /// batch the strict rules take is stored exactly as without this mark. A batch given as
    /// bytes is kept as written already, and stays as it is.
    pub fn as_written(mut self) -> Self {
        self.batch = match self.batch {
            AppendBatch::Events(events) => AppendBatch::AsWritten(events),
            kept => kept,
        };
        self
    }
}

#[cfg(test)]
mod tests {
    use super::{AppendBatch, AppendItem};
    use crate::layout::meta::SourceEncoding;

    /// Marking an item as written changes a batch of events only; creation keeps the batch.
    #[test]
    fn as_written_marks_events_and_keeps_bytes() {
        let marked = AppendItem::new("a", Some(0), Vec::new()).as_written();
        assert!(
            matches!(marked.batch, AppendBatch::AsWritten(_)),
            "{marked:?}"
        );
        let bytes = AppendItem::written_bytes("a", Some(0), b"x\n".to_vec()).as_written();
        assert!(matches!(bytes.batch, AppendBatch::Bytes(_)), "{bytes:?}");
        let replicated = AppendItem::replicated("a", Some(0), b"x\n".to_vec())
            .as_written()
            .creating("{}", SourceEncoding::Jsonl);
        assert!(replicated.batch.is_replicated(), "{replicated:?}");
        assert!(replicated.create.is_some());
    }
}
