//! The commit hook: a step every group commit takes before its local write, for a store that
//! is the index of a system of record elsewhere (the fleet: each group's batches committed to
//! PostgreSQL in one transaction). The hook sees one [`CommitRecord`] per session batch and
//! answers for each; the group's local write then holds only the batches it accepted.
//!
//! Invariant: a batch the hook refused writes nothing locally, and its caller gets the refusal;
//! a batch the hook accepted is in the system of record before the local write starts.

use crate::error::Refusal;

/// A session batch as the system of record keeps it: the exact bytes it adds to the session's
/// log file, and where they go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitRecord {
    /// The session.
    pub session: String,
    /// The seq of the batch's first event.
    pub first_seq: u64,
    /// The events the batch adds (its seqs are `first_seq..first_seq + events`).
    pub events: u64,
    /// The session's batch number (a log's header is batch 0; its write batches follow).
    pub batch: u64,
    /// The bytes the batch adds to the log file: its lines (`.jsonl`), or its zstd frames
    /// (`.jsonl.zstd`: one per appended batch; a batch given as bytes may hold several).
    pub bytes: Vec<u8>,
    /// When the batch creates its session: the session as created.
    pub creates: Option<CreatedSession>,
    /// DSH's reader verdict on the log once the batch is in it.
    pub verdict: String,
}

/// A session a [`CommitRecord`] creates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreatedSession {
    /// The header's bytes in the log file: the header line and its `\n` (`.jsonl`), or the
    /// header's zstd frame (`.jsonl.zstd`).
    pub header: Vec<u8>,
    /// Whether the log is kept as `.jsonl.zstd`.
    pub zstd: bool,
    /// The log's format version.
    pub version: u32,
}

/// The step a group commit takes before its local write (see the module docs). Called by the
/// group's leader, one group at a time, so an implementation needs no ordering of its own.
pub trait CommitHook: Send + Sync {
    /// Make `records` durable in the system of record; one outcome per record, in order.
    fn commit(&self, records: &[&CommitRecord]) -> Vec<Result<(), Refusal>>;
}
