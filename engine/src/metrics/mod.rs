//! The store's metrics: what a host needs to run it, readable as one [`Metrics`] struct
//! ([`Store::metrics`]) and rendered as Prometheus text exposition ([`Metrics::to_prometheus`]).
//!
//! Two kinds of figures. The write path's counters and histograms (appends, events and bytes
//! appended, refusals, write-state cache hits, group-commit sizes and latencies) are recorded as
//! the store works (`recorder.rs`, `histogram.rs`: atomics, no lock per append) and count from
//! the moment the store opened, as Prometheus counters do from a process's start. RocksDB's
//! figures (write stalls, compaction debt, memtable and file bytes per column family, block
//! cache hits) are read from RocksDB when metrics are asked for (`store/metrics.rs`, as only
//! `store/` touches the handle). `exposition.rs` renders both with the `prometheus-client`
//! crate's text encoder; `docs/METRICS.md` describes every metric for operators.
//!
//! [`Store::metrics`]: crate::Store::metrics

mod exposition;
mod histogram;
mod recorder;

pub use histogram::HistogramSnapshot;
pub(crate) use recorder::{AppendTally, GroupWrite, Recorder};

use std::time::Duration;

use crate::error::Error;

/// Everything the store reports about itself at one moment.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Metrics {
    /// Group-commit counters ([`Store::commit_stats`](crate::Store::commit_stats)), the
    /// acknowledged appends among them.
    pub commits: CommitStats,
    /// Group-commit sizes and latencies.
    pub commit_distributions: CommitDistributions,
    /// What the appends added, and what was refused.
    pub appends: AppendMetrics,
    /// Whether the store refuses writes after a failed durable write (until it is reopened).
    pub poisoned: bool,
    /// RocksDB's own figures, read when the metrics were asked for.
    pub rocksdb: RocksDbMetrics,
}

/// What the group-commit queue has done since the store opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// RocksDB writes made (one WAL record each).
    pub writes: u64,
    /// Of those, the ones fsynced before they returned.
    pub synced_writes: u64,
    /// Commits those writes carried (each the changes of one call: one or more sessions').
    pub batches: u64,
    /// Bytes of the WriteBatches written.
    pub bytes: u64,
    /// Session batches appended and acknowledged (live appends and creations, each one
    /// session's DSH write batch).
    pub appends: u64,
}

/// Where the events subscriptions yielded since the store opened came from
/// ([`Store::subscription_stats`](crate::Store::subscription_stats)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SubscriptionStats {
    /// Taken from their sessions' rings of committed events, without a read (live subscribers
    /// that keep up).
    pub events_from_memory: u64,
    /// Read from the store (catch-up, and subscribers behind the ring).
    pub events_from_store: u64,
}

/// Group-commit distributions since the store opened.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct CommitDistributions {
    /// Commits per RocksDB write.
    pub group_batches: HistogramSnapshot,
    /// Session batches appended per RocksDB write (0 for a write carrying no append: an
    /// import, a repair, a deletion).
    pub group_appends: HistogramSnapshot,
    /// Seconds from a commit's queueing to its return (what a caller waits: its group's write,
    /// and the write ahead of it).
    pub commit_seconds: HistogramSnapshot,
    /// Seconds of each fsynced RocksDB write: WAL append, fsync, memtable inserts.
    pub synced_write_seconds: HistogramSnapshot,
    /// Seconds of each RocksDB write without an fsync.
    pub unsynced_write_seconds: HistogramSnapshot,
}

/// What appends added to the store since it opened, and what they were refused.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct AppendMetrics {
    /// Sessions created by an append, with their first batch.
    pub sessions_created: u64,
    /// Events in the acknowledged appends.
    pub events: u64,
    /// The JSONL bytes those appends added to their sessions' logs: the lines as DSH writes
    /// them, newlines included, before any zstd compression.
    pub bytes: u64,
    /// Appends refused or failed, per reason (every reason listed, in [`RefusalReason::ALL`]'s
    /// order).
    pub refused: Vec<(RefusalReason, u64)>,
    /// Appends whose session's write state (next seq, surface, projections) was in memory.
    pub write_state_hits: u64,
    /// Appends whose session's write state was read from the store first.
    pub write_state_misses: u64,
    /// Sessions whose write lock and state are held in memory now (at most about
    /// [`Options::hot_sessions`](crate::Options::hot_sessions)).
    pub open_sessions: u64,
}

/// Why an append was not acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefusalReason {
    /// The batch broke one of DSH's append rules (or, for a V1–V3 session, its migration on
    /// write was refused); nothing was written.
    Rejected,
    /// The caller's expected next seq was stale.
    StaleSeq,
    /// The session takes no appends: deleted, torn, or a log DSH's reader refuses.
    NotAppendable,
    /// No such session.
    UnknownSession,
    /// A creation of a session already stored.
    DuplicateSession,
    /// The store failed (a storage error, a poisoned store, damaged data): not the caller's
    /// fault.
    Failed,
}

impl RefusalReason {
    /// Every reason, in the order metrics list them.
    pub const ALL: [RefusalReason; 6] = [
        RefusalReason::Rejected,
        RefusalReason::StaleSeq,
        RefusalReason::NotAppendable,
        RefusalReason::UnknownSession,
        RefusalReason::DuplicateSession,
        RefusalReason::Failed,
    ];

    /// The reason's label value in the exposition.
    pub fn label(self) -> &'static str {
        match self {
            RefusalReason::Rejected => "rejected",
            RefusalReason::StaleSeq => "stale_seq",
            RefusalReason::NotAppendable => "not_appendable",
            RefusalReason::UnknownSession => "unknown_session",
            RefusalReason::DuplicateSession => "duplicate_session",
            RefusalReason::Failed => "failed",
        }
    }

    /// The reason an append failed with `error`.
    pub(crate) fn of(error: &Error) -> RefusalReason {
        match error {
            Error::Rejected { .. } | Error::Codec(_) | Error::Migration { .. } => {
                RefusalReason::Rejected
            }
            Error::StaleSeq { .. } => RefusalReason::StaleSeq,
            Error::NotAppendable { .. } | Error::NotLoadable { .. } => RefusalReason::NotAppendable,
            Error::UnknownSession { .. } => RefusalReason::UnknownSession,
            Error::DuplicateSession { .. } => RefusalReason::DuplicateSession,
            Error::Shared(inner) => RefusalReason::of(inner),
            _ => RefusalReason::Failed,
        }
    }
}

/// RocksDB's figures for the store, read when the metrics were asked for.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct RocksDbMetrics {
    /// Per column family, in the store's order.
    pub column_families: Vec<ColumnFamilyMetrics>,
    /// Time writes spent stalled (slowed down or stopped) by RocksDB since the store opened.
    pub write_stall: Duration,
    /// Whether writes are stopped now (too many L0 files, memtables or pending compaction).
    pub write_stopped: bool,
    /// The rate RocksDB slows writes to now, in bytes per second; 0 when it does not.
    pub delayed_write_rate: u64,
    /// Compactions running now.
    pub running_compactions: u64,
    /// Memtable flushes running now.
    pub running_flushes: u64,
    /// Bytes compactions read since the store opened.
    pub compaction_read_bytes: u64,
    /// Bytes compactions wrote since the store opened.
    pub compaction_written_bytes: u64,
    /// Bytes memtable flushes wrote since the store opened.
    pub flush_written_bytes: u64,
    /// Block lookups the block cache answered since the store opened.
    pub block_cache_hits: u64,
    /// Block lookups that read from the files since the store opened.
    pub block_cache_misses: u64,
    /// Bytes held in the block cache now.
    pub block_cache_usage_bytes: u64,
    /// The block cache's capacity ([`Options::block_cache_bytes`](crate::Options)).
    pub block_cache_capacity_bytes: u64,
}

/// RocksDB's figures for one column family.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ColumnFamilyMetrics {
    /// The column family (`sessions`, `events`, `surface`, `checkpoints`).
    pub name: &'static str,
    /// Bytes in its memtables (the active one, and any waiting to be flushed).
    pub memtable_bytes: u64,
    /// Bytes of its live SST files.
    pub live_sst_bytes: u64,
    /// Bytes of its live blob files (with `Options::blob_files`).
    pub live_blob_bytes: u64,
    /// RocksDB's estimate of the bytes compaction must rewrite to bring every level within its
    /// target size: the compaction debt.
    pub pending_compaction_bytes: u64,
    /// Files in its level 0 (writes slow down, then stop, as they pile up).
    pub l0_files: u64,
}
