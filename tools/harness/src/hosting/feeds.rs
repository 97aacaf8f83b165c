//! The sessions a hosting run replays, and how slots map onto them.
//!
//! Generating one distinct session per slot would cost gigabytes at 10,000 slots, so the run
//! generates a pool of at most [`FeedPool::MAX`] sessions and slot `k` replays feed
//! `k % pool.len()`. A slot that reaches the end of its feed starts a fresh session (next
//! *cycle*) with the same batches under a new id: events never name their session, so only the
//! header line changes. Ids are unique per `(slot, cycle)`: the feed's UUID with its last group
//! replaced by `slot << 28 | cycle`, so no two sessions of a run share an id or a file.

use anyhow::{bail, ensure};

use crate::gen::{session_feed, GenOptions, LogFormat, SessionFeed};

/// Generated sessions shared by all slots.
#[derive(Clone, Debug)]
pub struct FeedPool {
    feeds: Vec<SessionFeed>,
    format: LogFormat,
}

/// Slots supported by the id scheme (20 bits of the last UUID group).
pub const MAX_SLOTS: usize = 1 << 20;
/// Cycles per slot supported by the id scheme (28 bits).
const MAX_CYCLES: u64 = 1 << 28;

impl FeedPool {
    /// Most sessions a pool generates.
    pub const MAX: usize = 64;

    /// Generate sessions `0..min(slots, MAX)` of the corpus `opts` describes (which need not be
    /// torn-free: feeds never are), in `format`.
    pub fn generate(slots: usize, opts: &GenOptions, format: LogFormat) -> anyhow::Result<Self> {
        opts.validate()?;
        let feeds: Vec<SessionFeed> = (0..slots.clamp(1, Self::MAX) as u64)
            .map(|i| session_feed(i, opts, format))
            .collect();
        Self::from_feeds(feeds, format)
    }

    /// A pool of the given feeds, written in `format` (each must have at least one batch).
    pub fn from_feeds(feeds: Vec<SessionFeed>, format: LogFormat) -> anyhow::Result<Self> {
        ensure!(!feeds.is_empty(), "a feed pool needs at least one session");
        if let Some(empty) = feeds.iter().find(|f| f.batches.is_empty()) {
            bail!("generated session {} has no batches", empty.id);
        }
        Ok(FeedPool { feeds, format })
    }

    /// The log format of the pool's sessions.
    pub fn format(&self) -> LogFormat {
        self.format
    }

    /// The feed slot `slot` replays.
    pub fn feed(&self, slot: usize) -> &SessionFeed {
        &self.feeds[slot % self.feeds.len()]
    }

    /// Sessions in the pool.
    pub fn len(&self) -> usize {
        self.feeds.len()
    }

    /// Whether the pool is empty (never, once built).
    pub fn is_empty(&self) -> bool {
        self.feeds.is_empty()
    }

    /// Mean batches and mean events per batch over the pool.
    pub fn shape(&self) -> (f64, f64) {
        let batches: usize = self.feeds.iter().map(|f| f.batches.len()).sum();
        let events: u64 = self.feeds.iter().map(SessionFeed::events).sum();
        let n = self.feeds.len() as f64;
        (batches as f64 / n, events as f64 / batches.max(1) as f64)
    }
}

/// The id of the session slot `slot` runs in its `cycle`-th round through `feed`.
pub fn session_id(feed: &SessionFeed, slot: usize, cycle: u64) -> String {
    let tag = ((slot as u64 % MAX_SLOTS as u64) << 28) | (cycle % MAX_CYCLES);
    // Generated ids are UUIDs (8-4-4-4-12); keep the first four groups.
    let prefix = feed.id.get(..24).unwrap_or(&feed.id);
    format!("{prefix}{tag:012x}")
}
