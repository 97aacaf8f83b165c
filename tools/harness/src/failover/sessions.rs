//! The failover run's sessions: session `k`'s id and the generated DSH feed it replays, which the
//! load appends and the check compares the stored logs against.

use crate::gen::{session_batches, GenOptions, SessionFeed};

/// The id of failover session `k`.
pub(crate) fn session_id(k: u64) -> String {
    format!("failover-{k:06}")
}

/// Feed `k` of the generator (`events` mean events, `seed`), replayed as session
/// `session_id(k)`, and that session's header line.
pub(crate) fn feed_for(k: u64, events: u64, seed: u64) -> (SessionFeed, String) {
    let feed = session_batches(
        k,
        &GenOptions {
            sessions: 1,
            events_per_session: events,
            seed,
            torn_fraction: 0.0,
        },
    );
    let header = feed.header_line_for(&session_id(k));
    (feed, header)
}
