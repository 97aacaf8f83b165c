//! Commits: the store's one door for changes. A [`Batch`] (RocksDB's WriteBatch, which nothing
//! outside `store/` builds) is filled by the write layer's `SessionBatch` and committed here,
//! through the group-commit queue every writer shares.
//!
//! Group commit (leader and followers, as RocksDB's write group and raft-engine's write barrier
//! do it): a committing thread queues its batch; when no write is under way it becomes the
//! leader, takes every batch queued by then (its own and those of any number of other threads
//! and sessions), writes them as one WriteBatch (one WAL record, one fsync when any of them asks
//! for one), then wakes its group's members and one thread of the next group, which leads it.
//! Each group has its own condition variable, so a write wakes only the threads it concerns, not
//! every thread waiting. So concurrent writers share fsyncs without any batching code of their
//! own, and a single writer pays nothing for the queue.
//!
//! A commit is made of parts (one per session batch when a commit hook is set, else one), each
//! carrying its [`Recording`]: with a hook (`commit_hook.rs`), the leader hands the group's
//! records to it first and writes only the parts it accepted; each caller learns the outcome of
//! each of its parts. A part the hook committed whose local write then fails is answered
//! `OutcomeUnknown`, never a plain storage error: its batch is in the system of record though
//! not here.
//!
//! The fleet boundary is kept here, for every writer at once: with a hook set, a part that
//! changes anything must either carry a hook record or be [`Recording::Recorded`] (its system of
//! record holds it already: a replicated batch, a retention change the record decided), whose
//! proof [`Recorded`] only those two writers build (a test names them). Any other part is
//! refused with [`Error::IndexOfFleet`] and writes nothing, so a writer that forgets the fleet
//! cannot make a host's store drift from its system of record.
//!
//! Invariants: a commit returns only after the write holding its batch returned, so a returned
//! durable commit is durable; batches are written in the order they were queued (a group keeps
//! the queue's order, and groups are written one at a time); a failed write fails every batch in
//! its group and poisons the store, which then refuses writes until it is reopened (the WAL's
//! state after a failed write or fsync is unknown).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

use rocksdb::{WriteBatch, WriteOptions};
use sessionlog_codec::json::Value;

use super::commit_hook::{CommitHook, CommitRecord};
use super::feed::Committed;
use super::Store;
use crate::error::{Error, Result};
use crate::error::{Refusal, RefusalKind};
use crate::layout::changes::Change;
use crate::layout::keys::{self, SESSION_RANGE_CFS};
use crate::metrics::{CommitStats, GroupWrite};
use crate::options::Durability;

/// The changes of one commit, in order. Built by the write layer's `SessionBatch`.
pub(crate) struct Batch<'s> {
    store: &'s Store,
    inner: WriteBatch,
    /// The session changes the batch makes, for the change log and subscribers (`feed.rs`).
    feed: Vec<Committed>,
}

impl<'s> Batch<'s> {
    /// An empty batch with room for `bytes` of records, so that staging them does not regrow it
    /// (RocksDB's WriteBatch grows by doubling, copying itself each time).
    pub(crate) fn with_capacity(store: &'s Store, bytes: usize) -> Self {
        Batch {
            store,
            inner: WriteBatch::with_capacity_bytes(bytes),
            feed: Vec::new(),
        }
    }

    /// Whether nothing was staged.
    pub(crate) fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// How many updates are staged.
    pub(crate) fn len(&self) -> usize {
        self.inner.len()
    }

    /// Put `key` = `value` in column family `cf`.
    pub(crate) fn put(&mut self, cf: &str, key: &[u8], value: &[u8]) -> Result<()> {
        self.inner.put_cf(self.store.cf(cf)?, key, value);
        Ok(())
    }

    /// Merge `operand` into `key` of column family `cf` (its merge operator decides how).
    pub(crate) fn merge(&mut self, cf: &str, key: &[u8], operand: &[u8]) -> Result<()> {
        self.inner.merge_cf(self.store.cf(cf)?, key, operand);
        Ok(())
    }

    /// Delete `key` of column family `cf`.
    pub(crate) fn delete(&mut self, cf: &str, key: &[u8]) -> Result<()> {
        self.inner.delete_cf(self.store.cf(cf)?, key);
        Ok(())
    }

    /// Delete the keys of column family `cf` in `from..to`.
    pub(crate) fn delete_range(&mut self, cf: &str, from: &[u8], to: &[u8]) -> Result<()> {
        self.inner.delete_range_cf(self.store.cf(cf)?, from, to);
        Ok(())
    }

    /// Delete everything stored under session number `number` in every column family keyed by
    /// session (its lines, tail, frames and indexes).
    pub(crate) fn delete_number_range(&mut self, number: u64) -> Result<()> {
        let (start, end) = (keys::session_start(number), keys::session_end(number));
        for name in SESSION_RANGE_CFS {
            self.delete_range(name, &start, &end)?;
        }
        Ok(())
    }

    /// Say that the batch makes `change` (the change log records it with the batch), and, for
    /// a live append to a followed session, give the events it appends as authored, which the
    /// session's subscribers take from memory once the batch is written.
    pub(crate) fn record_change(&mut self, change: Change, events: Option<Arc<[Value]>>) {
        self.feed.push(Committed { change, events });
    }

    /// This batch as one part of a commit, standing with the commit hook as `recording` says.
    pub(crate) fn into_part(self, recording: Recording) -> Part {
        Part {
            changes: self.inner,
            recording,
            appends: 0,
            feed: self.feed,
        }
    }

    /// Take what is staged, leaving this batch empty.
    pub(crate) fn take(&mut self) -> Batch<'s> {
        Batch {
            store: self.store,
            inner: std::mem::take(&mut self.inner),
            feed: std::mem::take(&mut self.feed),
        }
    }
}

/// Whether a commit must be on disk when it returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sync {
    /// As the store's [`Durability`] says: fsynced before it returns under `Sync`.
    AsConfigured,
    /// No fsync of its own (an import's intermediate batches, which acknowledge nothing): it
    /// becomes durable with the next synced write. When the store reuses its WAL files it is
    /// synced anyway: there every WAL record is synced before the next one is written, so a
    /// power cut leaves at most the last record unsynced, and the WAL audit may take a complete
    /// record after a lost one for damage in synced data (`wal_audit.rs`).
    Deferred,
}

/// The group-commit queue (see the module docs).
#[derive(Default)]
pub(crate) struct CommitQueue {
    state: Mutex<QueueState>,
    /// The step each group takes before its write, once set.
    hook: OnceLock<Arc<dyn CommitHook>>,
}

/// How a part of a commit stands with the store's commit hook.
pub(crate) enum Recording {
    /// Offered to the hook with this record: written here once the system of record took it.
    Offered(CommitRecord),
    /// Held by the system of record already: written here without asking the hook again.
    Recorded(Recorded),
    /// This store's alone: refused, when it changes anything, while a hook is set.
    Local,
}

/// The proof that a part's changes are its system of record's already (a replicated batch, a
/// retention change the record decided). Built only by [`Recorded::by_the_system_of_record`],
/// which the two writers that apply the record's own changes call: `ops/append` for
/// replicated batches and `ops/retention` for [`Store::apply_recorded`] (the layering test
/// holds the list).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Recorded {
    _proof: (),
}

impl Recorded {
    /// Say that the changes to be committed are the system of record's already.
    pub(crate) fn by_the_system_of_record() -> Self {
        Recorded { _proof: () }
    }
}

/// One part of a commit: its changes, and how it stands with the commit hook.
pub(crate) struct Part {
    pub(crate) changes: WriteBatch,
    pub(crate) recording: Recording,
    /// Session batches appended by its changes (for the group-commit metrics).
    pub(crate) appends: u64,
    /// The session changes it makes, for the change log and subscribers (`feed.rs`).
    pub(crate) feed: Vec<Committed>,
}

/// How one part of a commit failed (cloned for each part a failure covers).
#[derive(Clone, Debug)]
enum PartFailure {
    Storage(rocksdb::Error),
    Refused(Refusal),
    /// A change of this store alone while a commit hook is set (see the module docs).
    Unrecorded,
    /// The local write failed after the commit hook committed the part's batch (its session
    /// and batch number).
    CommittedElsewhere {
        session: String,
        batch: u64,
        error: rocksdb::Error,
    },
}

/// The outcome of each part of each member of a group, in order.
type GroupOutcome = Vec<Vec<std::result::Result<(), PartFailure>>>;

#[derive(Default)]
struct QueueState {
    /// The parts of each commit queued for the next group, in order.
    waiting: Vec<Vec<Part>>,
    /// Whether any of them asks for an fsync.
    sync: bool,
    /// Whether a leader is writing a group now.
    leading: bool,
    /// The number the next group takes (groups are numbered from 0 as they are taken).
    next_group: u64,
    /// How many groups have been written (so groups `0..written` are done).
    written: u64,
    /// The outcomes of written groups whose members have not all read theirs yet, and how many
    /// have not.
    outcomes: HashMap<u64, (GroupOutcome, usize)>,
    /// The condition variable of the group being filled (`next_group`): its members wait on
    /// it, to be woken when their group is written or when one of them is to lead it.
    open: Arc<Condvar>,
}

impl CommitQueue {
    /// The queue's state. Its lock is held only to move batches and numbers, which a panic
    /// elsewhere cannot leave half-done, so a poisoned lock still holds a true state.
    fn state(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Store {
    /// Commit `parts` together through the group-commit queue; the outcome of each, in order.
    /// With a commit hook set, each part with a record is offered to it first, and a
    /// [`Recording::Local`] part that changes anything is refused.
    pub(crate) fn commit_parts(
        &self,
        parts: Vec<Part>,
        sync: Sync,
        context: &str,
    ) -> Vec<Result<()>> {
        if let Err(e) = self.check_writable() {
            return parts.iter().map(|_| Err(e.duplicate())).collect();
        }
        let wants_sync = match sync {
            Sync::AsConfigured => self.options.durability == Durability::Sync,
            Sync::Deferred => self.options.recycles_wal(),
        };
        let queued = Instant::now();
        let committed = self.commit_in_group(parts, wants_sync, context);
        self.recorder.committed(queued.elapsed());
        committed
    }

    /// Queue `parts` and return once the group holding them was written (leading that group
    /// when no write is under way); the outcome of each part.
    fn commit_in_group(
        &self,
        parts: Vec<Part>,
        wants_sync: bool,
        context: &str,
    ) -> Vec<Result<()>> {
        let queue = &self.commits;
        let mut state = queue.state();
        let group = state.next_group;
        let member = state.waiting.len();
        let members_wait = Arc::clone(&state.open);
        state.waiting.push(parts);
        state.sync |= wants_sync;
        loop {
            if state.written > group {
                let outcome = take_outcome(&mut state, group, member);
                return outcome
                    .into_iter()
                    .map(|r| r.map_err(|failure| part_error(failure, context)))
                    .collect();
            }
            if !state.leading {
                // No group is being written, so this thread's group is the one being filled.
                state.leading = true;
                let members = std::mem::take(&mut state.waiting);
                let sync = std::mem::take(&mut state.sync);
                let taken = std::mem::replace(&mut state.open, Arc::new(Condvar::new()));
                let number = state.next_group;
                state.next_group += 1;
                drop(state);
                let outcome = self.write_group(members, sync);
                state = queue.state();
                state.leading = false;
                state.written = number + 1;
                let readers = outcome.len();
                state.outcomes.insert(number, (outcome, readers));
                taken.notify_all();
                state.open.notify_one();
                continue;
            }
            state = members_wait
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Write one group: offer its records to the commit hook, then write the parts it accepted
    /// as one WriteBatch (fsynced when `sync`). The outcome of every part.
    fn write_group(&self, members: Vec<Vec<Part>>, sync: bool) -> GroupOutcome {
        let hook = self.commits.hook.get();
        let mut verdicts = {
            let records: Vec<&CommitRecord> = members
                .iter()
                .flatten()
                .filter_map(|p| match &p.recording {
                    Recording::Offered(record) => Some(record),
                    Recording::Recorded(_) | Recording::Local => None,
                })
                .collect();
            match (hook, records.is_empty()) {
                (Some(hook), false) => hook.commit(&records),
                _ => Vec::new(),
            }
        }
        .into_iter();
        let mut outcome: GroupOutcome = Vec::with_capacity(members.len());
        let mut accepted = Vec::new();
        // Where each accepted part's batch is committed already: the hook's session and batch
        // (`None`: the part is this store's alone), by member and part.
        let mut committed: Vec<Vec<Option<(String, u64)>>> = Vec::with_capacity(members.len());
        let mut appends = 0;
        let mut feed = Vec::new();
        for parts in members {
            let mut of_member = Vec::with_capacity(parts.len());
            let mut elsewhere = Vec::with_capacity(parts.len());
            for part in parts {
                let verdict = match &part.recording {
                    Recording::Offered(_) => verdicts
                        .next()
                        .unwrap_or_else(|| {
                            Err(Refusal {
                                kind: RefusalKind::Unavailable,
                                message: "the commit hook gave no outcome for the batch".into(),
                            })
                        })
                        .map_err(PartFailure::Refused),
                    Recording::Recorded(_) => Ok(()),
                    // The fleet boundary (see the module docs).
                    Recording::Local if hook.is_some() && !part.changes.is_empty() => {
                        Err(PartFailure::Unrecorded)
                    }
                    Recording::Local => Ok(()),
                };
                elsewhere.push(match &part.recording {
                    Recording::Offered(r) => Some((r.session.clone(), r.batch)),
                    Recording::Recorded(_) | Recording::Local => None,
                });
                match verdict {
                    Ok(()) => {
                        appends += part.appends;
                        feed.extend(part.feed);
                        accepted.push(part.changes);
                        of_member.push(Ok(()));
                    }
                    Err(failure) => of_member.push(Err(failure)),
                }
            }
            outcome.push(of_member);
            committed.push(elsewhere);
        }
        if accepted.is_empty() {
            return outcome;
        }
        let batches = accepted.len() as u64;
        let mut batch = match accepted.len() {
            1 => accepted.pop().unwrap_or_default(),
            _ => merged(&accepted),
        };
        if let Err(e) = self.log_changes(&mut batch, &feed) {
            // The change log's column family is missing: nothing of the group is written.
            for r in outcome.iter_mut().flatten().filter(|r| r.is_ok()) {
                *r = Err(PartFailure::Refused(Refusal {
                    kind: RefusalKind::Unavailable,
                    message: e.to_string(),
                }));
            }
            return outcome;
        }
        let bytes = batch.size_in_bytes() as u64;
        let mut options = WriteOptions::default();
        options.set_sync(sync);
        let began = Instant::now();
        let written = self.db.write_opt(batch, &options);
        self.recorder.wrote_group(&GroupWrite {
            batches,
            appends,
            bytes,
            synced: sync,
            took: began.elapsed(),
        });
        if written.is_ok() {
            self.publish_changes(feed);
        }
        if let Err(e) = written {
            self.poisoned.store(true, Ordering::SeqCst);
            let parts = outcome.iter_mut().flatten();
            for (r, elsewhere) in parts.zip(committed.into_iter().flatten()) {
                if r.is_ok() {
                    *r = Err(match elsewhere {
                        Some((session, batch)) => PartFailure::CommittedElsewhere {
                            session,
                            batch,
                            error: e.clone(),
                        },
                        None => PartFailure::Storage(e.clone()),
                    });
                }
            }
        }
        outcome
    }

    /// Set the step every group commit takes before its local write (see `commit_hook.rs`). A
    /// store has at most one, for its whole life: a second is refused.
    pub fn set_commit_hook(&self, hook: Arc<dyn CommitHook>) -> Result<()> {
        self.commits
            .hook
            .set(hook)
            .map_err(|_| Error::Options("the store already has a commit hook".into()))
    }

    /// Whether a commit hook is set: appends then commit each session's batch as a part of its
    /// own, with its record (a store with a hook refuses any other change: see the module docs).
    pub(crate) fn has_commit_hook(&self) -> bool {
        self.commits.hook.get().is_some()
    }

    /// Counters of the group-commit queue: writes made, the batches they carried, and the
    /// session batches appended.
    pub fn commit_stats(&self) -> CommitStats {
        self.recorder.commit_stats()
    }

    /// How durable a commit is when it returns (the store's [`Options::durability`]).
    ///
    /// [`Options::durability`]: crate::Options::durability
    pub fn durability(&self) -> Durability {
        self.options.durability
    }

    /// Make every write so far durable (fsync the WAL).
    pub fn sync(&self) -> Result<()> {
        self.db
            .flush_wal(true)
            .map_err(Error::storage("syncing the write-ahead log"))
    }
}

/// Member `member`'s outcome of written group `group`; the last member to read it removes the
/// group's outcomes.
fn take_outcome(
    state: &mut QueueState,
    group: u64,
    member: usize,
) -> Vec<std::result::Result<(), PartFailure>> {
    let Some((outcome, readers)) = state.outcomes.get_mut(&group) else {
        return Vec::new();
    };
    let mine = outcome
        .get_mut(member)
        .map(std::mem::take)
        .unwrap_or_default();
    *readers -= 1;
    if *readers == 0 {
        state.outcomes.remove(&group);
    }
    mine
}

/// The error a failed part's caller gets.
fn part_error(failure: PartFailure, context: &str) -> Error {
    match failure {
        PartFailure::Storage(e) => Error::storage(context)(e),
        PartFailure::Refused(refusal) => Error::Refused(refusal),
        PartFailure::Unrecorded => Error::IndexOfFleet {
            write: context.to_owned(),
        },
        PartFailure::CommittedElsewhere {
            session,
            batch,
            error,
        } => Error::OutcomeUnknown {
            id: session,
            batch,
            context: context.to_owned(),
            source: error,
        },
    }
}

/// The size of a WriteBatch's header: an 8-byte sequence number and a 4-byte record count, both
/// little-endian, before the records (RocksDB's `WriteBatchInternal::kHeader`).
const WRITE_BATCH_HEADER: usize = 12;

/// One WriteBatch holding `members`' records in order: their records concatenated under one
/// header counting them all, as RocksDB's `WriteBatchInternal::Append` joins a write group.
fn merged(members: &[WriteBatch]) -> WriteBatch {
    let bytes: usize = members
        .iter()
        .map(|b| b.data().len().saturating_sub(WRITE_BATCH_HEADER))
        .sum();
    let count: usize = members.iter().map(WriteBatch::len).sum();
    let mut rep = Vec::with_capacity(WRITE_BATCH_HEADER + bytes);
    rep.extend_from_slice(&0u64.to_le_bytes());
    rep.extend_from_slice(&u32::try_from(count).unwrap_or(u32::MAX).to_le_bytes());
    for member in members {
        rep.extend_from_slice(member.data().get(WRITE_BATCH_HEADER..).unwrap_or_default());
    }
    WriteBatch::from_data(&rep)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    use super::{merged, Batch, Recorded, Recording, Sync};
    use crate::error::Error;
    use crate::layout::keys::{CF_EVENTS, CF_SESSIONS};
    use crate::options::Options;
    use crate::store::{CommitRecord, Store};
    use crate::test_support::{empty, Counts};

    /// Commit `batch` alone, expecting success.
    fn commit(store: &Store, batch: Batch<'_>) {
        let parts = vec![batch.into_part(Recording::Local)];
        for outcome in store.commit_parts(parts, Sync::AsConfigured, "test") {
            outcome.expect("commit");
        }
    }

    /// With a commit hook set, a part that would change the store without a record for the
    /// hook is refused and writes nothing, whoever built it; a part with a record reaches the
    /// hook, one proven [`Recorded`] is written without it, and an empty part changes nothing.
    #[test]
    fn under_a_hook_a_part_without_a_record_is_refused() {
        let (_t, store) = empty();
        let hook = Arc::new(Counts::default());
        store.set_commit_hook(hook.clone()).expect("hook");
        let part = |key: &[u8], recording| {
            let mut batch = Batch::with_capacity(&store, 0);
            batch.put(CF_EVENTS, key, b"v").expect("put");
            batch.into_part(recording)
        };
        let record = CommitRecord {
            session: "s".into(),
            first_seq: 0,
            events: 1,
            batch: 1,
            bytes: b"{}\n".to_vec(),
            creates: None,
            verdict: "clean".into(),
        };
        let recorded = Recording::Recorded(Recorded::by_the_system_of_record());
        let outcomes = store.commit_parts(
            vec![
                part(b"local", Recording::Local),
                part(b"offered", Recording::Offered(record)),
                part(b"recorded", recorded),
                Batch::with_capacity(&store, 0).into_part(Recording::Local),
            ],
            Sync::AsConfigured,
            "writing the test's keys",
        );
        let mut outcomes = outcomes.into_iter();
        match outcomes.next() {
            Some(Err(Error::IndexOfFleet { write })) => {
                assert_eq!(write, "writing the test's keys");
            }
            other => panic!("a part without a record under a hook: {other:?}"),
        }
        for outcome in outcomes {
            outcome.expect("offered, recorded and empty parts are committed");
        }
        assert_eq!(store.raw_get(CF_EVENTS, b"local"), None, "the refused part");
        assert!(store.raw_get(CF_EVENTS, b"offered").is_some());
        assert!(store.raw_get(CF_EVENTS, b"recorded").is_some());
        assert_eq!(hook.0.load(Ordering::SeqCst), 1, "only the offered part");
    }

    /// A merged batch holds every member's records, in order: a later member's put of a key
    /// wins over an earlier one's.
    #[test]
    fn a_merged_batch_applies_every_member_in_order() {
        let (_t, store) = empty();
        let mut first = Batch::with_capacity(&store, 0);
        first.put(CF_EVENTS, b"k1", b"a").expect("put");
        first.put(CF_EVENTS, b"k2", b"a").expect("put");
        let mut second = Batch::with_capacity(&store, 0);
        second.put(CF_EVENTS, b"k2", b"b").expect("put");
        second.delete(CF_EVENTS, b"k1").expect("delete");
        second.put(CF_SESSIONS, b"k3", b"c").expect("put");
        let joined = merged(&[first.inner, second.inner]);
        assert_eq!(joined.len(), 5);
        let mut batch = Batch::with_capacity(&store, 0);
        batch.inner = joined;
        commit(&store, batch);
        assert_eq!(store.raw_get(CF_EVENTS, b"k1"), None);
        assert_eq!(store.raw_get(CF_EVENTS, b"k2").as_deref(), Some(&b"b"[..]));
        assert_eq!(
            store.raw_get(CF_SESSIONS, b"k3").as_deref(),
            Some(&b"c"[..])
        );
    }

    /// Many threads committing at once share writes: every batch lands, in fewer writes than
    /// batches once the threads overlap, and each fsynced write is counted.
    #[test]
    fn concurrent_commits_share_writes_and_all_land() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path(), Options::default()).expect("open");
        let store = Arc::new(store);
        let threads = 16;
        let per_thread = 50;
        std::thread::scope(|scope| {
            for t in 0..threads {
                let store = Arc::clone(&store);
                scope.spawn(move || {
                    for i in 0..per_thread {
                        let mut batch = Batch::with_capacity(&store, 64);
                        let key = format!("t{t:02}-{i:03}");
                        batch.put(CF_EVENTS, key.as_bytes(), b"v").expect("put");
                        commit(&store, batch);
                    }
                });
            }
        });
        for t in 0..threads {
            for i in 0..per_thread {
                let key = format!("t{t:02}-{i:03}");
                assert!(store.raw_get(CF_EVENTS, key.as_bytes()).is_some(), "{key}");
            }
        }
        let stats = store.commit_stats();
        let batches = (threads * per_thread) as u64;
        assert_eq!(stats.batches, batches);
        assert!(stats.writes < batches, "no write was shared: {stats:?}");
        assert_eq!(stats.synced_writes, stats.writes, "{stats:?}");
    }
}
