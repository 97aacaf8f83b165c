//! Following a session as it grows: [`Store::subscribe`] yields every event from a seq on, first
//! those stored (catch-up), then each as the group commit holding it is written (live), and the
//! store-wide feed of every change in commit order ([`Store::subscribe_all`], `all.rs`). A
//! [`Watch`] serves any number of subscriptions on one thread (`watch.rs`).
//!
//! A subscription reads every event from the store, live ones included: a publication only
//! moves its session's mark and wakes its waker (`store/feed.rs`), and it reads the session from
//! the seq after the last it yielded up to the session's committed end. Catch-up and live are
//! then one loop, so the switch between them can neither skip nor repeat an event, and what it
//! reads is what a commit wrote and returned (acknowledged, and under `Durability::Sync` on
//! disk). Live events are read from the memtable, where the commit just put them: one seek per
//! woken batch. A subscription whose mark has not moved since it read the session to its end
//! does not read it again: polling an idle subscription costs an atomic load.
//!
//! Invariants: events come in seq order, each once, from the requested seq on; a subscriber
//! holds at most [`BUFFERED_EVENTS`] events, so one that reads slowly costs memory bounded by
//! that, and falls behind only into catch-up reads: it is never dropped and never holds up an
//! appender (a publication is a counter bump and a wake).

mod all;
#[cfg(test)]
mod tests;
mod watch;

pub use all::{Feed, FeedChange, FeedCursor, FeedItem};
pub use watch::{Watch, WatchKey};

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sessionlog_codec::json::Value;

use crate::error::Result;
use crate::store::{Mark, Store, Waker};

/// The most events a subscription reads ahead of its consumer.
pub const BUFFERED_EVENTS: usize = 1024;

/// A session's events from a seq on, catch-up then live (see the module docs). It holds no
/// borrow of the store: each call is given it, so a host keeps the subscription wherever it
/// keeps its own state.
pub struct Subscription {
    id: String,
    /// The seq of the next event to yield.
    next: u64,
    /// The session's mark, and the waker its publications wake.
    mark: Arc<Mark>,
    waker: Waker,
    /// The mark's value before the last read that reached the session's end: until the mark
    /// moves past it, the store holds nothing new for this subscription.
    read_to_end_at: Option<u64>,
    /// Events read and not yet yielded, from `next` on.
    buffer: VecDeque<(u64, Value)>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Follow session `id` from seq `from_seq` on: every event with seq ≥ `from_seq`, in order,
    /// each once, those stored first, then each as it commits ([`Subscription::next_within`]).
    /// A `from_seq` past the session's end waits for the events to come. The session must be
    /// stored (and not archived); a session purged or archived while followed ends the
    /// subscription with that error. To follow many sessions on one thread, use a [`Watch`].
    pub fn subscribe(&self, id: &str, from_seq: u64) -> Result<Subscription> {
        Subscription::new(self, id, from_seq, Waker::new())
    }
}

impl Subscription {
    /// A subscription woken by `waker`. The mark is taken before the session is read, so no
    /// commit after the read is missed.
    fn new(store: &Store, id: &str, from_seq: u64, waker: Waker) -> Result<Subscription> {
        let mark = store.session_mark(id.as_bytes(), &waker);
        store.require_meta(id.as_bytes())?;
        Ok(Subscription {
            id: id.to_owned(),
            next: from_seq,
            mark,
            waker,
            read_to_end_at: None,
            buffer: VecDeque::new(),
        })
    }

    /// The session followed.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The seq of the next event this subscription yields: where a restarted subscriber
    /// resumes.
    pub fn next_seq(&self) -> u64 {
        self.next
    }

    /// The next event (seq, event), waiting at most `timeout` for it to commit; `None` when
    /// none came by then. `Duration::ZERO` asks only for what is stored.
    pub fn next_within(
        &mut self,
        store: &Store,
        timeout: Duration,
    ) -> Result<Option<(u64, Value)>> {
        let deadline = Instant::now() + timeout;
        loop {
            let seen = self.waker.count();
            if let Some(next) = self.poll(store)? {
                return Ok(Some(next));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            store.wait_for_wake(&self.waker, seen, left)?;
        }
    }

    /// The next event if one is buffered or stored, without waiting. Reads the store only
    /// when the session's mark moved since the last read reached its end.
    fn poll(&mut self, store: &Store) -> Result<Option<(u64, Value)>> {
        if self.buffer.is_empty() {
            let published = self.mark.published();
            let unchanged = self.read_to_end_at == Some(published);
            if unchanged && store.marks_follow_changes() {
                return Ok(None);
            }
            self.read_ahead(store)?;
            self.read_to_end_at = match self.buffer.len() < BUFFERED_EVENTS {
                true => Some(published),
                false => None,
            };
        }
        let Some((seq, event)) = self.buffer.pop_front() else {
            return Ok(None);
        };
        self.next = seq + 1;
        Ok(Some((seq, event)))
    }

    /// The session's committed end now (the seq its next event will take): with it a caller
    /// tells a subscriber that starts past the end that it is waiting, not lost.
    pub fn end(&self, store: &Store) -> Result<u64> {
        Ok(store.require_meta(self.id.as_bytes())?.events)
    }

    /// Read up to [`BUFFERED_EVENTS`] stored events from `next` on into the empty buffer.
    fn read_ahead(&mut self, store: &Store) -> Result<()> {
        let meta = store.require_meta(self.id.as_bytes())?;
        if meta.events <= self.next {
            return Ok(());
        }
        let last = self.next + BUFFERED_EVENTS as u64 - 1;
        let buffer = &mut self.buffer;
        store.events_of(&meta, self.next, Some(last), &mut |seq, event| {
            buffer.push_back((seq, event.clone()));
            Ok(())
        })
    }
}
