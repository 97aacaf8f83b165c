//! `tailNext`: one step of `Store.tail` in `index.js`: the events of a session from a seq on,
//! waiting a bounded time for the next commit when none is stored yet. Each step subscribes
//! afresh through the host ([`Host::subscribe`]) from the seq the JS side holds, so the JS
//! iterator owns the only state and cancelling it leaves nothing behind. On a store of its own
//! a subscription is a position and a wake-up signal, cheap to make; in cluster mode it is a
//! `LISTEN` connection to PostgreSQL and a catch-up of the session, made once a step (a step
//! ends at its first events or after at most [`MAX_WAIT`]).

use std::time::Duration;

use serde::Serialize;
use serde_json::value::RawValue;
use sessionlog_cluster::Host;
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

/// `{"next": SEQ, "events": [...]}`: the events of `id` from `from` on that are stored, or the
/// first ones to commit within `wait` (in cluster mode, on any host of the fleet), at most
/// [`BUFFERED_EVENTS`]; `next` is where the next step starts.
pub fn next(host: &Host, id: &str, from: u64, wait: Duration) -> Reply {
    let mut sub = match host.subscribe(id, from) {
        Ok(sub) => sub,
        Err(e) => return e.into(),
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
    match RawValue::from_string(events) {
        Ok(events) => Reply::json(&Step {
            next: sub.next_seq(),
            events,
        }),
        Err(e) => Reply::failed("SESSIONLOG_INTERNAL", format!("rendering a tail step: {e}")),
    }
}
