//! The store's side of live feeds: the change log written with each group commit, and the
//! signals that wake subscribers when a group is published.
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
//! Invariants: positions are assigned by the group's leader, one writer at a time, so they
//! increase in commit order; a change is published (its signals woken) only after the write
//! holding it returned, so a subscriber never reads an event that is not acknowledged; a
//! subscriber reads its signal's value before it reads the store, so a publication between
//! the two is never missed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use rocksdb::WriteBatch;

use super::{visit, Store};
use crate::error::{Error, Result};
use crate::layout::changes::{change_key, parse_change_key, Change, CHANGE_TAG};
use crate::layout::keys::CF_SESSIONS;

/// How often a reader beside another process's store (a RocksDB secondary instance, which no
/// commit of this process wakes) catches up with it while it waits: the lag a tail there has
/// beyond the primary's commit, on top of the catch-up's own read of the primary's new WAL.
pub const SECONDARY_POLL: Duration = Duration::from_millis(50);

/// A counter that moves with every publication it covers, and wakes whoever waits for it.
#[derive(Default)]
pub(crate) struct Signal {
    published: Mutex<u64>,
    changed: Condvar,
}

impl Signal {
    /// The counter. Its lock is held only to read or bump a number, so a poisoned lock still
    /// holds a true one.
    fn count(&self) -> MutexGuard<'_, u64> {
        self.published
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The counter's value now.
    pub(crate) fn current(&self) -> u64 {
        *self.count()
    }

    /// Move the counter to at least `to` and wake every waiter.
    fn publish(&self, to: u64) {
        let mut count = self.count();
        *count = (*count).max(to);
        drop(count);
        self.changed.notify_all();
    }

    /// Wait until the counter moves past `seen`, at most `timeout`.
    fn wait_past(&self, seen: u64, timeout: Duration) {
        let count = self.count();
        let waited = self
            .changed
            .wait_timeout_while(count, timeout, |c| *c <= seen);
        drop(waited.unwrap_or_else(PoisonError::into_inner));
    }
}

/// The feeds' state a store holds.
#[derive(Default)]
pub(crate) struct Feeds {
    /// The position the next change takes.
    next_position: AtomicU64,
    /// Store-wide: the position after the last published change.
    all: Arc<Signal>,
    /// Per subscribed session: the count of its published changes. Entries whose every
    /// subscriber is gone are dropped when the next subscriber comes.
    sessions: Mutex<HashMap<Vec<u8>, Weak<Signal>>>,
    /// Whether any session signal was ever handed out (so publication looks up none before).
    subscribed: std::sync::atomic::AtomicBool,
}

impl Feeds {
    fn sessions(&self) -> MutexGuard<'_, HashMap<Vec<u8>, Weak<Signal>>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Store {
    /// Put `changes` into `batch` as change-log records at the next positions. Called by the
    /// group commit's leader only, for the changes of the parts it writes.
    pub(crate) fn log_changes(&self, batch: &mut WriteBatch, changes: &[Change]) -> Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        let cf = self.cf(CF_SESSIONS)?;
        let first = self
            .feeds
            .next_position
            .fetch_add(changes.len() as u64, Ordering::SeqCst);
        for (position, change) in (first..).zip(changes) {
            batch.put_cf(cf, change_key(position), change.encode());
        }
        Ok(())
    }

    /// The write holding `changes` returned: wake the store-wide feed and each changed
    /// session's subscribers.
    pub(crate) fn publish_changes(&self, changes: &[Change]) {
        if changes.is_empty() {
            return;
        }
        self.feeds
            .all
            .publish(self.feeds.next_position.load(Ordering::SeqCst));
        if !self.feeds.subscribed.load(Ordering::SeqCst) {
            return;
        }
        let signals: Vec<Arc<Signal>> = {
            let sessions = self.feeds.sessions();
            changes
                .iter()
                .filter_map(|c| sessions.get(&c.session).and_then(Weak::upgrade))
                .collect()
        };
        for signal in signals {
            signal.publish(signal.current() + 1);
        }
    }

    /// Start positions past every change the log holds (at open).
    pub(crate) fn start_change_log(&self) -> Result<()> {
        let mut it = self.db.raw_iterator_cf(self.cf(CF_SESSIONS)?);
        it.seek_for_prev(change_key(u64::MAX));
        let last = it.key().and_then(parse_change_key);
        it.status()
            .map_err(Error::storage("reading the end of the change log"))?;
        let next = last.map_or(0, |p| p + 1);
        self.feeds.next_position.store(next, Ordering::SeqCst);
        self.feeds.all.publish(next);
        Ok(())
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

    /// The signal of the store-wide feed.
    pub(crate) fn feed_signal(&self) -> Arc<Signal> {
        Arc::clone(&self.feeds.all)
    }

    /// The signal of session `id`'s changes, shared by its subscribers.
    pub(crate) fn session_signal(&self, id: &[u8]) -> Arc<Signal> {
        let mut sessions = self.feeds.sessions();
        if let Some(signal) = sessions.get(id).and_then(Weak::upgrade) {
            return signal;
        }
        sessions.retain(|_, s| s.strong_count() > 0);
        let signal = Arc::new(Signal::default());
        sessions.insert(id.to_vec(), Arc::downgrade(&signal));
        self.feeds.subscribed.store(true, Ordering::SeqCst);
        signal
    }

    /// Wait, at most `timeout`, for `signal` to move past `seen`. A store opened beside another
    /// process's (a secondary instance) is woken by no commit of its own: it waits out
    /// [`SECONDARY_POLL`] (or `timeout`, if shorter) and catches up with the primary instead.
    pub(crate) fn await_change(&self, signal: &Signal, seen: u64, timeout: Duration) -> Result<()> {
        match self.secondary.is_some() {
            false => {
                signal.wait_past(seen, timeout);
                Ok(())
            }
            true => {
                signal.wait_past(u64::MAX, timeout.min(SECONDARY_POLL));
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
