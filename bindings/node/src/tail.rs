//! `tailNext`: one step of `Store.tail` in `index.js`: the events of a session from a seq on,
//! waiting a bounded time for the next commit when none is stored yet (a step ends at its first
//! events or after at most [`MAX_WAIT`]). The JS iterator holds only the seq it goes on from. A
//! step leaves its subscription [`Parked`], and the next step from that seq resumes it: on a
//! store of its own a subscription is a position and a wake-up signal, but in cluster mode it
//! is a `LISTEN` connection to PostgreSQL and a catch-up of the session, too dear to make again
//! for every step. A tail that ends (`break`, its signal) drops its parked subscription
//! (`tailEnd`); one that an iterator abandoned mid-way left is dropped by the first step of any
//! tail after [`PARKED_FOR`], or when the store closes.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::value::RawValue;
use sessionlog_cluster::{Followed, Host};
use sessionlog_engine::BUFFERED_EVENTS;

use crate::reply::Reply;

/// One step of a tail: `{next, events}`.
#[derive(Serialize)]
struct Step {
    /// Where the next step starts.
    next: u64,
    /// The events, as the codec's `JSON.stringify` of their array.
    events: Box<RawValue>,
}

/// The longest one step waits (so a store being closed waits at most this for a tail).
pub const MAX_WAIT: Duration = Duration::from_secs(1);

/// The most subscriptions kept parked at once (the oldest goes first).
const PARKED: usize = 256;

/// How long a parked subscription waits for the step that resumes it.
const PARKED_FOR: Duration = Duration::from_secs(10);

/// The subscriptions steps left off, each with when it was parked (see the module docs).
/// Invariant: a parked subscription's next seq is where the step that left it told the JS side
/// to go on from, so resuming it yields what a fresh subscription from that seq would.
#[derive(Default)]
pub struct Parked(Mutex<Vec<(Instant, Followed)>>);

impl Parked {
    /// The subscription a step of session `id` left at seq `from`, if still parked.
    fn take(&self, id: &str, from: u64) -> Option<Followed> {
        let mut parked = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        parked.retain(|(at, _)| at.elapsed() < PARKED_FOR);
        let i = parked
            .iter()
            .position(|(_, f)| f.id() == id && f.next_seq() == from)?;
        Some(parked.swap_remove(i).1)
    }

    /// Keep `followed` for the next step.
    fn park(&self, followed: Followed) {
        let mut parked = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if parked.len() >= PARKED {
            parked.remove(0);
        }
        parked.push((Instant::now(), followed));
    }

    /// Drop the subscription a step of session `id` left at seq `from` (its tail has ended).
    pub fn drop_at(&self, id: &str, from: u64) {
        drop(self.take(id, from));
    }

    /// Drop every parked subscription (the store is closing).
    pub fn clear(&self) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// `{"next": SEQ, "events": [...]}`: the events of `id` from `from` on that are stored, or the
/// first ones to commit within `wait` (in cluster mode, on any host of the fleet), at most
/// [`BUFFERED_EVENTS`]; `next` is where the next step starts. The subscription a previous step
/// parked at `from` is resumed, and this one's is parked in turn.
pub fn next(host: &Host, parked: &Parked, id: &str, from: u64, wait: Duration) -> Reply {
    let mut sub = match parked.take(id, from) {
        Some(sub) => sub,
        None => match host.subscribe(id, from) {
            Ok(sub) => sub,
            Err(e) => return e.into(),
        },
    };
    let mut events = String::from("[");
    let mut count = 0;
    let mut timeout = wait.min(MAX_WAIT);
    while count < BUFFERED_EVENTS {
        match sub.next_within(host, timeout) {
            Ok(Some((_, event))) => {
                if count > 0 {
                    events.push(',');
                }
                sessionlog_codec::json::write_value(&mut events, &event);
                count += 1;
                timeout = Duration::ZERO;
            }
            Ok(None) => break,
            Err(e) => return e.into(),
        }
    }
    events.push(']');
    let next = sub.next_seq();
    parked.park(sub);
    match RawValue::from_string(events) {
        Ok(events) => Reply::json(&Step { next, events }),
        Err(e) => Reply::failed("SESSIONLOG_INTERNAL", format!("rendering a tail step: {e}")),
    }
}
