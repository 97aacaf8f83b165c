//! What the write path records as it goes: counters and histograms kept in atomics, so each
//! append call and each group-commit write adds to them without a lock. The RocksDB figures are
//! not here: `store/metrics.rs` reads them when metrics are asked for.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::histogram::Histogram;
use super::{AppendMetrics, CommitDistributions, CommitStats, RefusalReason, SubscriptionStats};

/// The write path's counters and histograms, one per store.
pub(crate) struct Recorder {
    writes: AtomicU64,
    synced_writes: AtomicU64,
    batches: AtomicU64,
    commit_bytes: AtomicU64,
    appends: AtomicU64,
    sessions_created: AtomicU64,
    events: AtomicU64,
    appended_bytes: AtomicU64,
    write_state_hits: AtomicU64,
    write_state_misses: AtomicU64,
    subscribed_from_memory: AtomicU64,
    subscribed_from_store: AtomicU64,
    refused: [AtomicU64; RefusalReason::ALL.len()],
    group_batches: Histogram,
    group_appends: Histogram,
    commit_latency: Histogram,
    synced_write_latency: Histogram,
    unsynced_write_latency: Histogram,
}

/// What one `append_many` call acknowledged, added up by the caller and recorded at once.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct AppendTally {
    /// Session batches acknowledged.
    pub(crate) appends: u64,
    /// Of those, the ones that created their session.
    pub(crate) created: u64,
    /// Events they held.
    pub(crate) events: u64,
    /// JSONL bytes they added to their logs.
    pub(crate) bytes: u64,
    /// Items whose session's write state was in memory.
    pub(crate) write_state_hits: u64,
    /// Items whose session's write state was read from the store.
    pub(crate) write_state_misses: u64,
}

/// One group-commit write, as its leader saw it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GroupWrite {
    /// Commits it carried.
    pub(crate) batches: u64,
    /// Session batches appended in those commits.
    pub(crate) appends: u64,
    /// WriteBatch bytes written.
    pub(crate) bytes: u64,
    /// Whether it was fsynced before it returned.
    pub(crate) synced: bool,
    /// How long RocksDB's write took (WAL append, fsync when synced, memtable inserts).
    pub(crate) took: Duration,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            writes: AtomicU64::new(0),
            synced_writes: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            commit_bytes: AtomicU64::new(0),
            appends: AtomicU64::new(0),
            sessions_created: AtomicU64::new(0),
            events: AtomicU64::new(0),
            appended_bytes: AtomicU64::new(0),
            write_state_hits: AtomicU64::new(0),
            write_state_misses: AtomicU64::new(0),
            subscribed_from_memory: AtomicU64::new(0),
            subscribed_from_store: AtomicU64::new(0),
            refused: Default::default(),
            group_batches: Histogram::sizes(),
            group_appends: Histogram::sizes(),
            commit_latency: Histogram::latency(),
            synced_write_latency: Histogram::latency(),
            unsynced_write_latency: Histogram::latency(),
        }
    }
}

fn add(counter: &AtomicU64, n: u64) {
    if n > 0 {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

fn load(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

impl Recorder {
    /// Count what an append call acknowledged.
    pub(crate) fn appended(&self, tally: &AppendTally) {
        add(&self.appends, tally.appends);
        add(&self.sessions_created, tally.created);
        add(&self.events, tally.events);
        add(&self.appended_bytes, tally.bytes);
        add(&self.write_state_hits, tally.write_state_hits);
        add(&self.write_state_misses, tally.write_state_misses);
    }

    /// Count `n` appends refused (or failed) for `reason`.
    pub(crate) fn refused(&self, reason: RefusalReason, n: u64) {
        add(&self.refused[reason as usize], n);
    }

    /// Count a group-commit write.
    pub(crate) fn wrote_group(&self, write: &GroupWrite) {
        add(&self.writes, 1);
        add(&self.batches, write.batches);
        add(&self.commit_bytes, write.bytes);
        self.group_batches.record(write.batches);
        self.group_appends.record(write.appends);
        if write.synced {
            add(&self.synced_writes, 1);
            self.synced_write_latency.record_duration(write.took);
        } else {
            self.unsynced_write_latency.record_duration(write.took);
        }
    }

    /// Count a commit that waited `took` from its queueing to its return.
    pub(crate) fn committed(&self, took: Duration) {
        self.commit_latency.record_duration(took);
    }

    /// Count `n` events a subscription took, from memory (its session's ring) or the store.
    pub(crate) fn subscribed(&self, n: u64, from_memory: bool) {
        match from_memory {
            true => add(&self.subscribed_from_memory, n),
            false => add(&self.subscribed_from_store, n),
        }
    }

    /// Where subscriptions' events came from so far.
    pub(crate) fn subscription_stats(&self) -> SubscriptionStats {
        SubscriptionStats {
            events_from_memory: load(&self.subscribed_from_memory),
            events_from_store: load(&self.subscribed_from_store),
        }
    }

    /// The group-commit counters so far.
    pub(crate) fn commit_stats(&self) -> CommitStats {
        CommitStats {
            writes: load(&self.writes),
            synced_writes: load(&self.synced_writes),
            batches: load(&self.batches),
            bytes: load(&self.commit_bytes),
            appends: load(&self.appends),
        }
    }

    /// The group-commit histograms so far.
    pub(crate) fn commit_distributions(&self) -> CommitDistributions {
        CommitDistributions {
            group_batches: self.group_batches.snapshot(),
            group_appends: self.group_appends.snapshot(),
            commit_seconds: self.commit_latency.snapshot(),
            synced_write_seconds: self.synced_write_latency.snapshot(),
            unsynced_write_seconds: self.unsynced_write_latency.snapshot(),
        }
    }

    /// The append counters so far; `open_sessions` is the caller's (the write-state cache's).
    pub(crate) fn append_metrics(&self, open_sessions: u64) -> AppendMetrics {
        AppendMetrics {
            sessions_created: load(&self.sessions_created),
            events: load(&self.events),
            bytes: load(&self.appended_bytes),
            refused: RefusalReason::ALL
                .iter()
                .map(|&r| (r, load(&self.refused[r as usize])))
                .collect(),
            write_state_hits: load(&self.write_state_hits),
            write_state_misses: load(&self.write_state_misses),
            open_sessions,
        }
    }
}
