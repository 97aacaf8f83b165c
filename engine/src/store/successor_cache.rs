//! The last few V4 successors of sessions read through migration (`read/migrated_view.rs`), so
//! a session's views do not re-run the migration chain per query.
//!
//! Invariant: an entry is keyed by everything its successor depends on, so a stale entry is
//! never found, only evicted. A plain cache: it knows nothing of the store.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use sessionlog_codec::json::Value;

/// How many successors stay in memory for repeated reads.
const CACHED_SUCCESSORS: usize = 4;

/// What a successor depends on: the session's number and event count, and the store's session
/// number watermark (a new session may be a child the catalog backfill lists).
pub(crate) type SuccessorKey = (u64, u64, u64);

/// The last few successors read, so a session's views do not re-run the chain per query.
#[derive(Default)]
pub(crate) struct SuccessorCache(Mutex<VecDeque<(SuccessorKey, Arc<Vec<Value>>)>>);

impl SuccessorCache {
    pub(crate) fn get(&self, key: SuccessorKey) -> Option<Arc<Vec<Value>>> {
        let cache = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cache
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, events)| Arc::clone(events))
    }

    pub(crate) fn put(&self, key: SuccessorKey, events: Arc<Vec<Value>>) {
        let mut cache = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cache.retain(|(k, _)| k.0 != key.0);
        if cache.len() == CACHED_SUCCESSORS {
            cache.pop_front();
        }
        cache.push_back((key, events));
    }
}
