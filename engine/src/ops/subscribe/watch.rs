//! Many subscriptions on one thread: a [`Watch`] holds any number of [`Subscription`]s that
//! share one waker, so a consumer following a thousand sessions (a dashboard, a fan-out server)
//! needs one thread, woken once per group commit that changed any of them, instead of a thread
//! per session.
//!
//! [`Watch::next_within`] takes the subscriptions in turn, from the one after the last that
//! yielded, and drains what the current one read in one go before moving on (its buffer, at most
//! [`BUFFERED_EVENTS`](super::BUFFERED_EVENTS) events), so a busy session cannot starve the
//! others for longer than one read. An idle subscription costs one atomic load a turn.
//!
//! Invariants: each subscription keeps its own guarantee (its session's events from its start,
//! in order, each once); a subscription removed (or failed) yields nothing more, and its key is
//! never reused by the same watch.

use std::time::{Duration, Instant};

use sessionlog_codec::json::Value;

use super::Subscription;
use crate::error::Result;
use crate::store::{Store, Waker};

/// Names one subscription of a [`Watch`] (the order it was added in).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WatchKey(pub usize);

/// Subscriptions sharing one waker, served by one thread (see the module docs).
#[derive(Default)]
pub struct Watch {
    waker: Waker,
    /// By key; `None` once removed.
    subscriptions: Vec<Option<Subscription>>,
    /// The subscription whose turn it is.
    turn: usize,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("subscriptions", &self.len())
            .finish_non_exhaustive()
    }
}

impl Watch {
    /// A watch with no subscription.
    pub fn new() -> Watch {
        Watch::default()
    }

    /// Follow session `id` from seq `from_seq` on, as [`Store::subscribe`] does, woken with
    /// the watch's other subscriptions.
    pub fn add(&mut self, store: &Store, id: &str, from_seq: u64) -> Result<WatchKey> {
        let subscription = Subscription::new(store, id, from_seq, self.waker.clone())?;
        self.subscriptions.push(Some(subscription));
        Ok(WatchKey(self.subscriptions.len() - 1))
    }

    /// Stop following `key`'s session; its subscription, returned, tells where it stopped.
    pub fn remove(&mut self, key: WatchKey) -> Option<Subscription> {
        self.subscriptions.get_mut(key.0).and_then(Option::take)
    }

    /// The subscription `key` names, while it is in the watch.
    pub fn get(&self, key: WatchKey) -> Option<&Subscription> {
        self.subscriptions.get(key.0).and_then(Option::as_ref)
    }

    /// How many subscriptions the watch holds.
    pub fn len(&self) -> usize {
        self.subscriptions.iter().flatten().count()
    }

    /// Whether the watch holds no subscription.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next event of any subscription (its key, seq and event), waiting at most `timeout`
    /// for one to commit; `None` when none came by then. `Duration::ZERO` asks only for what is
    /// stored. A subscription that fails (its session purged or archived while followed, as
    /// the error says) is removed and its error returned; the others go on at the next call.
    pub fn next_within(
        &mut self,
        store: &Store,
        timeout: Duration,
    ) -> Result<Option<(WatchKey, u64, Value)>> {
        let deadline = Instant::now() + timeout;
        loop {
            let seen = self.waker.count();
            let count = self.subscriptions.len();
            for step in 0..count {
                let at = (self.turn + step) % count;
                let Some(subscription) = self.subscriptions[at].as_mut() else {
                    continue;
                };
                let polled = match subscription.poll(store) {
                    Ok(polled) => polled,
                    Err(e) => {
                        self.subscriptions[at] = None;
                        self.turn = at + 1;
                        return Err(e);
                    }
                };
                if let Some((seq, event)) = polled {
                    // Stay while it has buffered events; the next call moves on.
                    self.turn = match subscription.buffer.is_empty() {
                        true => at + 1,
                        false => at,
                    };
                    return Ok(Some((WatchKey(at), seq, event)));
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            store.wait_for_wake(&self.waker, seen, left)?;
        }
    }
}
