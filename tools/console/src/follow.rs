//! Following a session live: `GET /api/sessions/{id}/follow?from=SEQ` answers server-sent
//! events, one `event` message (`{"seq","event"}`) per stored event from SEQ on, then each as
//! it commits: read through [`Host::subscribe`](sessionlog_cluster::Host::subscribe), which
//! catches the reader up with the store's holder while it waits, or, on a host of a fleet,
//! catches the session's copy up as the fleet commits it. A follower runs on a blocking thread and stops
//! when its client goes away; at most [`MAX_FOLLOWERS`] run at once, so a client cannot tie up
//! every thread.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use sessionlog_cluster::Followed;
use tokio::sync::mpsc;

use crate::api::{number, params, session_id, IdPath, Params, SeqEvent};
use crate::reply::{raw, ApiError};
use crate::Console;

/// The most sessions followed at once.
pub const MAX_FOLLOWERS: usize = 32;
/// Events sent ahead of a slow client before its follower waits.
const QUEUED: usize = 256;
/// How long a follower waits for a commit before it looks whether its client is still there.
const LOOK_EVERY: Duration = Duration::from_millis(500);

static FOLLOWERS: AtomicUsize = AtomicUsize::new(0);

pub(crate) fn routes() -> Router<Arc<Console>> {
    Router::new().route("/api/sessions/{id}/follow", get(follow))
}

async fn follow(
    State(console): State<Arc<Console>>,
    path: IdPath,
    query: Params,
) -> Result<Response, ApiError> {
    let id = session_id(path)?;
    let from = number(&params(query)?, "from")?.unwrap_or(0);
    let slot = Slot::take().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{MAX_FOLLOWERS} sessions are being followed already; close one and retry"),
        )
    })?;
    // The subscription is made here, so an unknown session is a 404 rather than a stream
    // that ends at once.
    let follower = {
        let console = Arc::clone(&console);
        let id = id.clone();
        tokio::task::spawn_blocking(move || follower(&console, &id, from))
            .await
            .map_err(|e| {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("following: {e}"))
            })??
    };
    let (tx, rx) = mpsc::channel(QUEUED);
    tokio::task::spawn_blocking(move || {
        let _slot = slot;
        let mut follower = follower;
        loop {
            let event = match follower.next_within(console.host(), LOOK_EVERY) {
                Ok(Some((seq, event))) => message(&SeqEvent {
                    seq,
                    event: raw(&event),
                }),
                Ok(None) if tx.is_closed() => return,
                Ok(None) => continue,
                Err(e) => {
                    let _ = tx.blocking_send(Event::default().event("error").data(e.to_string()));
                    return;
                }
            };
            if tx.blocking_send(event).is_err() {
                return;
            }
        }
    });
    Ok(Sse::new(Events(rx))
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// Follow session `id` of `console`'s host from seq `from` on, once the session is caught up
/// (so one stored since the last catch-up is found, and an unknown one is a 404).
fn follower(console: &Console, id: &str, from: u64) -> Result<Followed, ApiError> {
    console.session(id)?;
    Ok(console.host().subscribe(id, from)?)
}

/// One `event` message.
fn message(event: &SeqEvent) -> Event {
    let data = serde_json::to_string(event).unwrap_or_else(|_| String::from("null"));
    Event::default().event("event").data(data)
}

/// A place among the [`MAX_FOLLOWERS`]; given back when dropped.
struct Slot;

impl Slot {
    fn take() -> Option<Slot> {
        FOLLOWERS
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_FOLLOWERS).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        FOLLOWERS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The follower's messages as the stream the SSE answer sends.
struct Events(mpsc::Receiver<Event>);

impl futures_core::Stream for Events {
    type Item = Result<Event, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx).map(|e| e.map(Ok))
    }
}
