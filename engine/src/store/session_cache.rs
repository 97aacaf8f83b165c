//! Per-session write locks, and the write state cached under each (bounded, rebuilt from the
//! store on a miss). A plain cache: it knows nothing of the store.
//!
//! Invariant: a cached [`WriteState`] equals what the store holds for that session whenever its
//! mutex is not held by a writer: writers change it only while holding the session's mutex (an
//! append folds its batch in while staging and publishes the metadata after its WriteBatch
//! committed), and a writer whose commit fails empties the slot, so the state is reloaded. That mutex is also what makes appends to one session
//! sequential (one writer per session), while sessions in other shards proceed in parallel.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, MutexGuard};

use sessionlog_codec::format::header::Header;
use sessionlog_codec::log_reader::LogReader;
use sessionlog_codec::rules::projection::ProjectionSet;
use sessionlog_codec::rules::surface::{SurfaceFold, SurfaceModel};

use crate::layout::meta::SessionMeta;

/// What an append needs to know about its session without reading the log.
#[derive(Debug)]
pub(crate) struct WriteState {
    /// The session's metadata, as committed.
    pub(crate) meta: SessionMeta,
    /// The current surface, for validating surface ops; `None` where the log has no surface
    /// index (a format without a surface model, or a log whose surface DSH's fold refused).
    pub(crate) surface: Option<SurfaceFold>,
    /// Every projection unit's state, for writing checkpoints with the events; `None` for a
    /// format without a surface model.
    pub(crate) projections: Option<ProjectionCheckpoints>,
    /// DSH's relationship rules over the whole log, kept only in strict mode.
    pub(crate) relations: Option<RelationRules>,
    /// DSH's reader over the log, for batches appended as DSH's writer wrote them; loaded on
    /// the first such batch.
    pub(crate) reader: Option<SeamReader>,
}

/// DSH's reader as a stored log left it, to read on over the lines appended to it.
#[derive(Debug)]
pub(crate) struct SeamReader {
    /// The log's header.
    pub(crate) header: Header,
    /// The reader after the log's last byte.
    pub(crate) reader: LogReader,
    /// The log's last bytes when they end without a newline: the next line appended completes
    /// that line, as it does in the file.
    pub(crate) fragment: Vec<u8>,
}

/// Every projection unit's state after a log's last event, and per unit whether the next
/// checkpoint may refer to an earlier one (`write/indexer.rs` folds and checkpoints it).
#[derive(Debug)]
pub(crate) struct ProjectionCheckpoints {
    pub(crate) set: ProjectionSet,
    /// Per unit, the seq of its last whole checkpoint if no event touched the unit since;
    /// `None` when one did (or it is not known: the next checkpoint is then whole).
    pub(crate) untouched_since: Vec<Option<u64>>,
}

impl ProjectionCheckpoints {
    /// Every unit's initial state for a log of `model` whose header carries `seed_length`.
    pub(crate) fn new(seed_length: u64, model: SurfaceModel) -> Self {
        Self::resume(ProjectionSet::for_model(seed_length, model))
    }

    /// Continue from `set`, every unit's state after a stored log's last event.
    pub(crate) fn resume(set: ProjectionSet) -> Self {
        let units = set.states.len();
        ProjectionCheckpoints {
            set,
            untouched_since: vec![None; units],
        }
    }
}

/// The relationship rules a strict store enforces at every append: DSH 0.1's invariant
/// companion for V0 sessions, DSH 0.2's lifecycle relationships for V4 ones.
#[derive(Clone, Debug)]
pub(crate) enum RelationRules {
    /// DSH 0.1.
    V0(sessionlog_codec::rules::invariant::InvariantTrace),
    /// DSH 0.2.
    V4(Box<sessionlog_codec::rules::relations::V4Relations>),
}

impl RelationRules {
    /// The empty state for a session of format `version`.
    pub(crate) fn for_version(version: u32) -> Self {
        if version >= 4 {
            RelationRules::V4(Box::default())
        } else {
            RelationRules::V0(Default::default())
        }
    }

    /// Check the next event and advance; `Err` is DSH's text.
    pub(crate) fn check(&mut self, event: &sessionlog_codec::json::Value) -> Result<(), String> {
        match self {
            RelationRules::V0(trace) => trace.check(event),
            RelationRules::V4(relations) => {
                relations.accept(event)?;
                // A writer cannot wait for the end-seed that would excuse a crossing.
                match relations.held() {
                    Some(crossing) => Err(crossing.to_owned()),
                    None => Ok(()),
                }
            }
        }
    }
}

/// A handle to one cached session; lock it (with [`lock_session`]) to write.
pub(crate) type WriteLock = Arc<Mutex<Option<WriteState>>>;

/// Lock one session for writing. A writer that panicked while holding the lock may have left
/// its cached state half-updated (a surface folded for a batch that never committed): that
/// state is dropped, so the session is reloaded from the store, and the lock is usable again.
pub(crate) fn lock_session(handle: &WriteLock) -> MutexGuard<'_, Option<WriteState>> {
    handle.lock().unwrap_or_else(|poisoned| {
        let mut guard = poisoned.into_inner();
        *guard = None;
        handle.clear_poison();
        guard
    })
}

/// Number of independently locked shards.
const SHARDS: usize = 64;

/// The bounded cache of sessions' write locks and states.
pub(crate) struct WriteStateCache {
    shards: Vec<Mutex<HashMap<Vec<u8>, WriteLock>>>,
    hasher: RandomState,
    per_shard: usize,
}

impl WriteStateCache {
    /// A cache holding at most about `capacity` sessions.
    pub(crate) fn new(capacity: usize) -> Self {
        WriteStateCache {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: RandomState::new(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
        }
    }

    /// How many sessions' handles are held now (each shard locked in turn, so the count is not
    /// one moment's).
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                shard
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .len()
            })
            .sum()
    }

    /// The handle for `id`, created empty (`None` inside) when absent. When the shard is full,
    /// entries nobody holds are evicted first; an evicted session is simply reloaded later.
    pub(crate) fn handle(&self, id: &[u8]) -> WriteLock {
        let shard = &self.shards[self.hasher.hash_one(id) as usize % SHARDS];
        // Map operations cannot be left half-done by a panic elsewhere: a poisoned shard is safe.
        let mut map = shard
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(h) = map.get(id) {
            return Arc::clone(h);
        }
        if map.len() >= self.per_shard {
            map.retain(|_, h| Arc::strong_count(h) > 1);
        }
        let h: WriteLock = Arc::new(Mutex::new(None));
        map.insert(id.to_vec(), Arc::clone(&h));
        h
    }
}
