//! The store's side of live feeds: the change log written with each group commit, its
//! retention, and the marks and wakers that tell subscribers a group was published.
//!
//! Why a change log written in the commit's own WriteBatch, and not RocksDB's sequence numbers:
//! a store-wide cursor must survive a restart and order every change by commit. RocksDB's
//! sequence numbers do order every write, but reading changes back by them needs the WAL
//! (`GetUpdatesSince`), which the store recycles and deletes after each flush, so a cursor older
//! than the last flush would point nowhere. A `L ‖ position` record per session change in the
//! `sessions` column family (`layout/changes.rs`), put into the group's WriteBatch by its
//! leader, commits atomically with the change, survives restarts and compactions, and costs one
//! small key per session batch on the append path (some 40 bytes beside a batch's lines and
//! indexes) and no extra write or fsync.
//!
//! Retention: the log keeps the last [`Options::feed_retained_changes`] positions. When it holds
//! an eighth more than that, the leader puts one range delete of the oldest and the new retained
//! start (`L` alone) into the group's WriteBatch, so the trim commits with a change and a reader
//! sees both or neither. A feed whose position is below the retained start is refused with an
//! error naming it ([`Store::retained_start`]), never silently moved past the trimmed changes.
//!
//! Waking (one waker shared by many subscriptions, no thread each): every followed session has a
//! [`Mark`], a counter of its published changes, and the store-wide feed one of published
//! positions. A subscription compares its mark with the value it last read up to and touches
//! the store only when it moved, so idle subscriptions cost an atomic load. Each mark lists the
//! [`Waker`]s of the subscriptions following it; a publication bumps the marks of the changed
//! sessions, then wakes each of their wakers once (a waker is a counter and a condition
//! variable). A consumer serving a thousand subscriptions on one thread gives them one waker
//! ([`crate::Watch`]) and is woken once per group commit, whatever the number of sessions in it.
//!
//! Handing the events over from memory: a live append of a followed session carries the events
//! its appender authored ([`Committed::events`]: what the store reads back from the lines it
//! wrote, so a subscriber cannot tell them from a read), and the publication puts them in the
//! session mark's [`Recent`] ring before it bumps the mark. A subscriber whose next seq the ring
//! holds takes its events from there, without reading or parsing a line; one the ring does not
//! serve (it started before the ring, fell behind it, or a change without events in memory came
//! since: an import, a repair, a batch written as DSH's writer wrote it, a delete) reads the
//! store as before. The ring holds one contiguous run of the session's latest events, at most
//! [`RECENT_EVENTS`]: a change it cannot extend the run with empties it, so it never holds a
//! gap; memory is bounded by that per followed session, and nothing of an unfollowed session
//! is kept. A session's only subscriber takes the batches it consumed out of the ring (moving
//! their events rather than copying them), so a subscriber that keeps up holds the ring near
//! empty, and the events are freed by it, not by the commit's leader.
//!
//! Invariants: positions are assigned by the group's leader, one writer at a time, so they
//! increase in commit order; a change is published (its marks bumped, its wakers woken) only
//! after the write holding it returned, so a subscriber never reads an event that is not
//! acknowledged; a mark is bumped before its wakers are woken, and a subscriber reads its
//! waker's count before its marks and its marks before the store, so a publication between any
//! two of these reads is never missed; a session's ring is changed before its mark is bumped,
//! so a subscriber that read the mark finds in the ring every publication up to it (or an
//! empty ring); the retained start is raised in memory before the write
//! that trims, so a reader that checks it after its read never takes a trimmed range for an
//! empty one.
//!
//! [`Options::feed_retained_changes`]: crate::Options::feed_retained_changes

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock, Weak};
use std::sync::{RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use rocksdb::WriteBatch;
use sessionlog_codec::json::Value;

use super::{visit, Store};
use crate::error::{Error, Result};
use crate::layout::changes::{
    change_key, parse_change_key, Change, CHANGE_TAG, RETAINED_START_KEY,
};
use crate::layout::keys::CF_SESSIONS;
use crate::layout::values::{checked_bytes, checked_value};

/// The most events a followed session's [`Recent`] ring holds (a batch with more is not kept).
/// A subscriber more than this behind its session's end reads the store.
pub(crate) const RECENT_EVENTS: usize = 256;

/// How often a reader beside another process's store (a RocksDB secondary instance, which no
/// commit of this process wakes) catches up with it while it waits: the lag a tail there has
/// beyond the primary's commit, on top of the catch-up's own read of the primary's new WAL.
pub const SECONDARY_POLL: Duration = Duration::from_millis(50);

/// A lock held only to read or change a few numbers or a list, so a poisoned one still holds
/// true ones.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What wakes the subscriptions that share it: a count of wake-ups and a condition variable.
/// The subscriptions of a [`crate::Watch`] share one, so one thread waits for all of them; a
/// lone [`crate::Subscription`] or [`crate::Feed`] has its own.
#[derive(Clone, Default)]
pub(crate) struct Waker(Arc<WakerState>);

#[derive(Default)]
struct WakerState {
    /// Wake-ups so far, and how many threads wait for the next.
    count: Mutex<(u64, usize)>,
    woken: Condvar,
}

impl Waker {
    /// A waker no subscription uses yet.
    pub(crate) fn new() -> Waker {
        Waker::default()
    }

    /// The wake-ups so far: read before polling the subscriptions, and given to
    /// [`Store::wait_for_wake`] after, so a wake-up between the two is never slept through.
    pub(crate) fn count(&self) -> u64 {
        lock(&self.0.count).0
    }

    /// One wake-up: the count moves, and the waiting threads (if any) wake.
    pub(crate) fn wake(&self) {
        let mut count = lock(&self.0.count);
        count.0 += 1;
        let waiting = count.1 > 0;
        drop(count);
        if waiting {
            self.0.woken.notify_all();
        }
    }

    /// Wait until the count moves past `seen`, at most `timeout`.
    fn wait_past(&self, seen: u64, timeout: Duration) {
        let mut count = lock(&self.0.count);
        count.1 += 1;
        let (mut count, _) = self
            .0
            .woken
            .wait_timeout_while(count, timeout, |c| c.0 <= seen)
            .unwrap_or_else(PoisonError::into_inner);
        count.1 -= 1;
    }
}

/// A change a commit makes, as the change log records it, with the events of a live append to a
/// followed session as its appender authored them (else `None`), for the session's ring.
pub(crate) struct Committed {
    pub(crate) change: Change,
    pub(crate) events: Option<Arc<[Value]>>,
}

/// A followed session's latest events, one contiguous run of seqs (see the module docs).
#[derive(Default)]
pub(crate) struct Recent {
    /// Batches in seq order, each (its first seq, its events), each starting where the one
    /// before ends.
    batches: VecDeque<(u64, Arc<[Value]>)>,
    /// Their events, at most [`RECENT_EVENTS`].
    events: usize,
}

impl Recent {
    /// The seq after the run's last event; `None` while the ring is empty.
    fn end(&self) -> Option<u64> {
        self.batches.back().map(|(first, e)| first + e.len() as u64)
    }

    /// Put a committed batch's events (seqs from `first` on) at the run's end, dropping the
    /// oldest batches beyond [`RECENT_EVENTS`]; a batch that does not continue the run, or
    /// that alone is too large, empties the ring instead (it never holds a gap).
    fn push(&mut self, first: u64, events: Option<Arc<[Value]>>) {
        let events = match events {
            Some(e) if !e.is_empty() && e.len() <= RECENT_EVENTS => e,
            _ => return self.clear(),
        };
        if self.end().is_some_and(|end| end != first) {
            self.clear();
        }
        self.events += events.len();
        self.batches.push_back((first, events));
        while self.events > RECENT_EVENTS {
            if let Some((_, oldest)) = self.batches.pop_front() {
                self.events -= oldest.len();
            }
        }
    }

    fn clear(&mut self) {
        self.batches.clear();
        self.events = 0;
    }

    /// Give the events from seq `next` on to `out`, at most `room`: `Some(true)` when they
    /// reach the run's end, `Some(false)` when `room` ran out first, `None` when the ring does
    /// not hold `next` (empty, or `next` before its first seq or past its end). The taker that
    /// is its session's `sole` subscription takes the batches it consumed whole out of the ring:
    /// it moves their events out instead of copying them when nothing else holds the batch, and
    /// frees what is left of them itself, off the commit path.
    fn take(
        &mut self,
        next: u64,
        mut room: usize,
        out: &mut VecDeque<(u64, Value)>,
        sole: bool,
    ) -> Option<bool> {
        let (start, _) = self.batches.front()?;
        if next < *start || self.end().is_some_and(|end| next > end) {
            return None;
        }
        let mut at = 0;
        loop {
            let Some((first, events)) = self.batches.get(at) else {
                return Some(true);
            };
            let first = *first;
            let skip = usize::try_from(next.saturating_sub(first))
                .unwrap_or(usize::MAX)
                .min(events.len());
            let wanted = events.len() - skip;
            if wanted > room {
                let part = events.iter().enumerate().skip(skip).take(room);
                out.extend(part.map(|(k, e)| (first + k as u64, e.clone())));
                return Some(false);
            }
            room -= wanted;
            if !(sole && at == 0) {
                let copied = events.iter().enumerate().skip(skip);
                out.extend(copied.map(|(k, e)| (first + k as u64, e.clone())));
                at += 1;
                continue;
            }
            let Some((_, mut events)) = self.batches.pop_front() else {
                return Some(true);
            };
            self.events -= events.len();
            match Arc::get_mut(&mut events) {
                Some(owned) => {
                    let moved = owned.iter_mut().enumerate().skip(skip);
                    out.extend(moved.map(|(k, e)| (first + k as u64, std::mem::take(e))));
                }
                None => {
                    let copied = events.iter().enumerate().skip(skip);
                    out.extend(copied.map(|(k, e)| (first + k as u64, e.clone())));
                }
            }
        }
    }
}

/// A counter of publications a subscription follows (a session's changes, or the store-wide
/// feed's positions), the wakers of the subscriptions following it, and, for a session, its
/// latest events.
#[derive(Default)]
pub(crate) struct Mark {
    published: AtomicU64,
    wakers: Mutex<Vec<Weak<WakerState>>>,
    /// A session's latest committed events (the store-wide feed's mark keeps none).
    recent: Mutex<Recent>,
}

impl Mark {
    /// The counter now.
    pub(crate) fn published(&self) -> u64 {
        self.published.load(Ordering::SeqCst)
    }

    /// Let `waker` be woken by this mark's publications (once, however many subscriptions
    /// that share it follow the mark).
    pub(crate) fn wake(&self, waker: &Waker) {
        let mut wakers = lock(&self.wakers);
        wakers.retain(|w| w.strong_count() > 0);
        if !wakers.iter().any(|w| w.as_ptr() == Arc::as_ptr(&waker.0)) {
            wakers.push(Arc::downgrade(&waker.0));
        }
    }

    /// The session's events from seq `next` on that its ring holds, at most `room`, into
    /// `out` (see [`Recent::take`]; `mark` is the taker's, so a mark held by no other
    /// subscription is its sole one): `None` when the store must be read instead.
    pub(crate) fn take_recent(
        mark: &Arc<Mark>,
        next: u64,
        room: usize,
        out: &mut VecDeque<(u64, Value)>,
    ) -> Option<bool> {
        let sole = Arc::strong_count(mark) == 1;
        lock(&mark.recent).take(next, room, out, sole)
    }

    /// Move the counter (by one, or to at least `to`) and collect the wakers to wake.
    fn publish(&self, to: Option<u64>, wake: &mut Vec<Arc<WakerState>>) {
        match to {
            Some(to) => self.published.fetch_max(to, Ordering::SeqCst),
            None => self.published.fetch_add(1, Ordering::SeqCst),
        };
        wake.extend(lock(&self.wakers).iter().filter_map(Weak::upgrade));
    }
}

/// The feeds' state a store holds.
#[derive(Default)]
pub(crate) struct Feeds {
    /// The position the next change takes.
    next_position: AtomicU64,
    /// The first position the log retains (written by the leader, before the trim's write).
    retained_start: AtomicU64,
    /// Store-wide: the position after the last published change.
    all: Arc<Mark>,
    /// Per followed session: its published changes. Entries whose every subscription is gone
    /// are dropped when the next session is followed. Read by every append to a followed
    /// store (and each publication), written only when a session is followed.
    sessions: RwLock<HashMap<Vec<u8>, Weak<Mark>>>,
    /// Whether any session was ever followed (so publication looks up none before).
    followed: AtomicBool,
}

impl Store {
    /// Put `changes` into `batch` as change-log records at the next positions, and, when the log
    /// then holds an eighth more than it retains, the trim of its oldest records (see the
    /// module docs). Called by the group commit's leader only, for the changes of the parts it
    /// writes.
    pub(crate) fn log_changes(&self, batch: &mut WriteBatch, changes: &[Committed]) -> Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        let cf = self.cf(CF_SESSIONS)?;
        let count = changes.len() as u64;
        let first = self.feeds.next_position.fetch_add(count, Ordering::SeqCst);
        for (position, committed) in (first..).zip(changes) {
            batch.put_cf(cf, change_key(position), committed.change.encode());
        }
        let end = first + count;
        let retained = self.options.feed_retained_changes;
        let start = self.feeds.retained_start.load(Ordering::SeqCst);
        if end.saturating_sub(start) > retained.saturating_add(retained / 8) {
            let trimmed_to = end - retained;
            self.feeds
                .retained_start
                .store(trimmed_to, Ordering::SeqCst);
            batch.delete_range_cf(cf, change_key(start), change_key(trimmed_to));
            batch.put_cf(
                cf,
                RETAINED_START_KEY,
                checked_value(&trimmed_to.to_be_bytes()),
            );
        }
        Ok(())
    }

    /// The write holding `changes` returned: bump the store-wide mark, put each changed
    /// followed session's events in its ring and bump its mark, then wake each of their
    /// wakers once. The events move into the ring, which then holds them alone, so a sole
    /// subscriber moves them out rather than copying them (see [`Recent::take`]).
    pub(crate) fn publish_changes(&self, changes: Vec<Committed>) {
        if changes.is_empty() {
            return;
        }
        let mut wake = Vec::new();
        let end = self.feeds.next_position.load(Ordering::SeqCst);
        self.feeds.all.publish(Some(end), &mut wake);
        if self.feeds.followed.load(Ordering::SeqCst) {
            let sessions = self.feeds.sessions();
            for Committed { change, events } in changes {
                if let Some(mark) = sessions.get(&change.session).and_then(Weak::upgrade) {
                    lock(&mark.recent).push(change.first, events);
                    mark.publish(None, &mut wake);
                }
            }
        }
        wake.sort_unstable_by_key(Arc::as_ptr);
        wake.dedup_by(|a, b| Arc::ptr_eq(a, b));
        for state in wake {
            Waker(state).wake();
        }
    }

    /// Move the store-wide feed's end to the change log's end, and read where the log starts:
    /// at open, and beside another process's store (a secondary instance) after each catch-up
    /// with it, so what reads the end (a search's `behind`, an index rebuild's watermark) sees
    /// the holder's changes since this handle opened. Positions only move forward.
    pub(crate) fn read_change_log_end(&self) -> Result<()> {
        let start = self.stored_retained_start()?;
        let end = self.stored_change_log_end(start)?;
        self.feeds.retained_start.fetch_max(start, Ordering::SeqCst);
        self.feeds.next_position.fetch_max(end, Ordering::SeqCst);
        self.feeds.all.publish(Some(end), &mut Vec::new());
        Ok(())
    }

    /// The position after the last change the log holds, at least `start` (its retained start).
    fn stored_change_log_end(&self, start: u64) -> Result<u64> {
        let mut it = self.db.raw_iterator_cf(self.cf(CF_SESSIONS)?);
        it.seek_for_prev(change_key(u64::MAX));
        let last = it.key().and_then(parse_change_key);
        it.status()
            .map_err(Error::storage("reading the end of the change log"))?;
        Ok(last.map_or(0, |p| p + 1).max(start))
    }

    /// The first position the change log retains: a feed at an earlier one has lost changes.
    /// A store beside another process's (a secondary instance) reads it from the store, as the
    /// primary trims.
    pub(crate) fn retained_start(&self) -> Result<u64> {
        match self.secondary.is_some() {
            false => Ok(self.feeds.retained_start.load(Ordering::SeqCst)),
            true => self.stored_retained_start(),
        }
    }

    /// The retained start as stored (0 before the first trim).
    fn stored_retained_start(&self) -> Result<u64> {
        let stored = self
            .db
            .get_pinned_cf(self.cf(CF_SESSIONS)?, RETAINED_START_KEY)
            .map_err(Error::storage("reading the change log's retained start"))?;
        let Some(value) = stored else {
            return Ok(0);
        };
        checked_bytes(&value)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
            .ok_or_else(|| Error::Corrupt {
                id: String::new(),
                detail: "the change log's retained start fails its checksum".into(),
            })
    }

    /// Up to `limit` changes of the log from position `from` on, in order.
    pub(crate) fn read_changes(&self, from: u64, limit: usize) -> Result<Vec<(u64, Change)>> {
        let mut out = Vec::new();
        let mut it = self.db.raw_iterator_cf(self.cf(CF_SESSIONS)?);
        it.seek(change_key(from));
        visit(&mut it, "reading the change log".into(), &mut |k, v| {
            if out.len() >= limit || k.first() != Some(&CHANGE_TAG) {
                return Ok(false);
            }
            let Some(position) = parse_change_key(k) else {
                return Ok(false);
            };
            out.push((position, Change::decode(position, v)?));
            Ok(true)
        })?;
        Ok(out)
    }

    /// The position after the store-wide feed's last published change.
    pub(crate) fn feed_end(&self) -> u64 {
        self.feeds.all.published()
    }

    /// The store-wide feed's mark (its value: the position after the last published change),
    /// waking `waker` from now on.
    pub(crate) fn feed_mark(&self, waker: &Waker) -> Arc<Mark> {
        self.feeds.all.wake(waker);
        Arc::clone(&self.feeds.all)
    }

    /// Session `id`'s mark, shared by its subscriptions, waking `waker` from now on.
    pub(crate) fn session_mark(&self, id: &[u8], waker: &Waker) -> Arc<Mark> {
        let mark = {
            let mut sessions = self.feeds.sessions_mut();
            match sessions.get(id).and_then(Weak::upgrade) {
                Some(mark) => mark,
                None => {
                    sessions.retain(|_, m| m.strong_count() > 0);
                    let mark = Arc::new(Mark::default());
                    sessions.insert(id.to_vec(), Arc::downgrade(&mark));
                    self.feeds.followed.store(true, Ordering::SeqCst);
                    mark
                }
            }
        };
        mark.wake(waker);
        mark
    }

    /// Whether session `id` is followed now: only then does a live append keep its events
    /// for the session's ring.
    pub(crate) fn is_followed(&self, id: &[u8]) -> bool {
        self.feeds.followed.load(Ordering::SeqCst)
            && self
                .feeds
                .sessions()
                .get(id)
                .is_some_and(|m| m.strong_count() > 0)
    }

    /// Whether every change to this store moves its marks: false beside another process's
    /// store (a secondary instance), whose changes come by catching up, so its subscriptions
    /// read the store on every wake-up instead of when a mark moved.
    pub(crate) fn marks_follow_changes(&self) -> bool {
        self.secondary.is_none()
    }

    /// Wait, at most `timeout`, for `waker`'s count to move past `seen`. A store opened beside
    /// another process's (a secondary instance) is woken by no commit of its own: it waits out
    /// [`SECONDARY_POLL`] (or `timeout`, if shorter) and catches up with the primary instead.
    pub(crate) fn wait_for_wake(&self, waker: &Waker, seen: u64, timeout: Duration) -> Result<()> {
        match self.secondary.is_some() {
            false => {
                waker.wait_past(seen, timeout);
                Ok(())
            }
            true => {
                waker.wait_past(u64::MAX, timeout.min(SECONDARY_POLL));
                self.catch_up()
            }
        }
    }

    /// The identity of this store (RocksDB's `IDENTITY`, made when the store was created), which
    /// a feed's cursor carries so that a cursor is never used on another store.
    pub(crate) fn identity(&self) -> Result<String> {
        let path = self.path.join("IDENTITY");
        std::fs::read_to_string(&path)
            .map(|s| s.trim().to_owned())
            .map_err(|source| Error::Io { path, source })
    }
}

impl Feeds {
    fn sessions(&self) -> RwLockReadGuard<'_, HashMap<Vec<u8>, Weak<Mark>>> {
        self.sessions.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn sessions_mut(&self) -> RwLockWriteGuard<'_, HashMap<Vec<u8>, Weak<Mark>>> {
        self.sessions
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }
}
