//! Following a session as it grows: [`Store::subscribe`] yields every event from a seq on, first
//! those stored (catch-up), then each as the group commit holding it is written (live), and the
//! store-wide feed of every change in commit order ([`Store::subscribe_all`], `all.rs`). A
//! [`Watch`] serves any number of subscriptions on one thread (`watch.rs`).
//!
//! A subscription takes its events from the seq after the last it yielded up to the session's
//! committed end, each time its session's mark moved: from the session's ring of latest
//! committed events when the ring holds that seq (a live subscriber that keeps up: the events
//! as the appender authored them, handed over from memory without a read or a parse), else
//! from the store (catch-up, and a subscriber that fell behind the ring or follows a change
//! whose events are not in memory; `store/feed.rs` says which). Catch-up and live are then one
//! loop, so the switch between them, either way, can neither skip nor repeat an event, and what
//! it takes is what a commit wrote and returned (acknowledged, and under `Durability::Sync` on
//! disk): a publication fills the ring only after the write returned. A subscription whose mark
//! has not moved since it took the session to its end takes nothing: polling an idle
//! subscription costs an atomic load.
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
use crate::metrics::SubscriptionStats;
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
    /// The mark's value before the last take that reached the session's end: until the mark
    /// moves past it, nothing new was committed for this subscription.
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

    /// How many events subscriptions yielded from memory (their sessions' rings of committed
    /// events) and how many they read from the store, since the store opened.
    pub fn subscription_stats(&self) -> SubscriptionStats {
        self.recorder.subscription_stats()
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

    /// The next event if one is buffered or committed, without waiting. Takes events (from the
    /// session's ring, else the store) only when the session's mark moved since the last take
    /// reached its end.
    fn poll(&mut self, store: &Store) -> Result<Option<(u64, Value)>> {
        if self.buffer.is_empty() {
            let published = self.mark.published();
            let follows = store.marks_follow_changes();
            if follows && self.read_to_end_at == Some(published) {
                return Ok(None);
            }
            let recent = match follows {
                true => Mark::take_recent(&self.mark, self.next, BUFFERED_EVENTS, &mut self.buffer),
                false => None,
            };
            let at_end = match recent {
                Some(at_end) => at_end,
                None => {
                    self.read_ahead(store)?;
                    self.buffer.len() < BUFFERED_EVENTS
                }
            };
            let taken = self.buffer.len() as u64;
            store.recorder.subscribed(taken, recent.is_some());
            self.read_to_end_at = at_end.then_some(published);
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
