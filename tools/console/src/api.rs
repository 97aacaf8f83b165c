//! The JSON API's reads of one session, and what every route shares (its parameters, a read
//! on a blocking thread). Every route is a read: the listing (`/api/sessions`, `listing.rs`), and
//! per session its view at a seq (`view`: the messages the model saw, as `sessionlog messages ID
//! --at N` prints them, whole or a window of them, and the projections there; the compactions
//! up to a seq are those of `marks` at or before it, so a scrubber move does not derive the
//! surface twice), raw events around a seq (`events`), the scrubber's marks (`marks`: turns and
//! compaction ranges; `steps.rs`: the steps of a range), token usage over its turns (`tokens`),
//! and its fork tree (`tree`). Sizes are capped: at most [`crate::listing::MAX_PAGE`] sessions,
//! [`MAX_WINDOW`] messages when a window is asked for, [`MAX_EVENTS`] events and
//! [`MAX_SAMPLES`] usage points an answer.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde::Serialize;
use serde_json::value::RawValue;
use sessionlog_codec::json::Value;
use sessionlog_engine::{LineageEntry, SessionSummary, Store};

use crate::reply::{json_body, raw, ApiError};
use crate::Console;

/// The most raw events one answer holds.
pub const MAX_EVENTS: u64 = 200;
/// The most messages a view's window holds.
pub const MAX_WINDOW: usize = 1_000;
/// The most points of the token-usage series.
pub const MAX_SAMPLES: usize = 120;
/// The longest session id the API takes.
pub(crate) const MAX_ID_BYTES: usize = 1024;
/// The projection units the view shows.
const VIEW_UNITS: [&str; 4] = ["title", "todos", "tokenUsage", "requestHeader"];

/// The query string, as given.
pub(crate) type Params = Result<Query<HashMap<String, String>>, QueryRejection>;
/// The session id of the path.
pub(crate) type IdPath = Result<Path<String>, PathRejection>;

/// Run `read` on a blocking thread (reads are synchronous RocksDB calls; they must not hold up
/// the server's event loop).
async fn blocking<T: Send + 'static>(
    read: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(read).await.map_err(|e| {
        ApiError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            format!("the read failed: {e}"),
        )
    })?
}

/// Run `read` of the listing on a blocking thread, on the store as [`Console::listing`] gives it.
pub(crate) async fn read<T: Send + 'static>(
    console: &Arc<Console>,
    read: impl FnOnce(&Store) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let console = Arc::clone(console);
    blocking(move || read(&*console.listing()?)).await
}

/// Run `read_one` of session `id` on a blocking thread, on the store as [`Console::session`]
/// gives it; when the session is archived, again on the scratch store holding it
/// (`archived.rs`).
pub(crate) async fn read_session<T: Send + 'static>(
    console: &Arc<Console>,
    id: String,
    read_one: impl Fn(&Store, &str) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let console = Arc::clone(console);
    blocking(move || {
        let store = console.session(&id)?;
        match read_one(&store, &id) {
            Err(e) if e.is_archived() => read_one(console.archived.view(&store, &id)?.store(), &id),
            other => other,
        }
    })
    .await
}

/// The query's parameters, or a 400 naming what could not be read.
pub(crate) fn params(query: Params) -> Result<HashMap<String, String>, ApiError> {
    query
        .map(|Query(q)| q)
        .map_err(|e| ApiError::bad_request(format!("the query string cannot be read: {e}")))
}

/// The path's session id, or a 400.
pub(crate) fn session_id(path: IdPath) -> Result<String, ApiError> {
    let Path(id) =
        path.map_err(|e| ApiError::bad_request(format!("the session id cannot be read: {e}")))?;
    if id.is_empty() || id.len() > MAX_ID_BYTES {
        return Err(ApiError::bad_request(format!(
            "a session id is 1 to {MAX_ID_BYTES} bytes; this one is {}",
            id.len()
        )));
    }
    Ok(id)
}

/// Parameter `name` as a number, if given.
pub(crate) fn number(
    params: &HashMap<String, String>,
    name: &str,
) -> Result<Option<u64>, ApiError> {
    params
        .get(name)
        .map(|text| {
            text.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!("{name}={text:?}: {name} is a whole number"))
            })
        })
        .transpose()
}

/// Parameters `from` (default 0) and `to` (inclusive; default: the widest range allowed) as a
/// range of at most `cap` seqs, or a 400 naming the rule.
pub(crate) fn seq_range(
    params: &HashMap<String, String>,
    cap: u64,
) -> Result<(u64, u64), ApiError> {
    let from = number(params, "from")?.unwrap_or(0);
    let to = number(params, "to")?.unwrap_or(from.saturating_add(cap - 1));
    if to < from {
        return Err(ApiError::bad_request(format!(
            "from={from} to={to}: the range is empty (to is inclusive, and not below from)"
        )));
    }
    if to - from >= cap {
        return Err(ApiError::bad_request(format!(
            "from={from} to={to}: an answer covers at most {cap} events"
        )));
    }
    Ok((from, to))
}

/// The session's number of events, 404 when it is not stored.
pub(crate) fn end_of(store: &Store, id: &str) -> Result<u64, ApiError> {
    Ok(store.summary(id)?.events)
}

/// `seq` checked against the session's end: 404 past it.
pub(crate) fn within(id: &str, seq: u64, end: u64) -> Result<u64, ApiError> {
    match seq < end {
        true => Ok(seq),
        false => Err(ApiError::new(
            axum::http::StatusCode::NOT_FOUND,
            format!(
                "session \"{id}\" has {end} events (seqs 0 to {}); seq {seq} is past its end",
                end.saturating_sub(1)
            ),
        )),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct View {
    id: String,
    /// The seq looked at (`null` for a session with no events).
    at: Option<u64>,
    /// The session's number of events (its next seq).
    end: u64,
    summary: SessionSummary,
    /// What the model saw after `at`, as DSH derives it: every message, or the window asked
    /// for.
    messages: Vec<Box<RawValue>>,
    /// How many messages the model saw after `at`.
    message_count: usize,
    /// The index of `messages`' first message among them.
    messages_from: usize,
    /// Each unit of [`VIEW_UNITS`] after `at`, `null` where the format has none.
    projections: HashMap<&'static str, Box<RawValue>>,
    /// Why a unit could not be shown.
    projection_errors: HashMap<&'static str, String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Compaction {
    /// The replacing event.
    seq: u64,
    /// The replaced range, inclusive.
    start: u64,
    end: u64,
}

/// Which of a view's messages an answer holds: from the `from`th, at most `limit`.
#[derive(Clone, Copy)]
struct Window {
    from: usize,
    limit: usize,
}

/// `GET /api/sessions/{id}/view?at=SEQ&from=I&limit=N` (default: the last event, every
/// message; with `from` or `limit`, the messages from the `I`th (default 0), at most `N`
/// (default and cap [`MAX_WINDOW`])).
pub(crate) async fn view(
    State(console): State<Arc<Console>>,
    path: IdPath,
    query: Params,
) -> Result<Response, ApiError> {
    let id = session_id(path)?;
    let params = params(query)?;
    let at = number(&params, "at")?;
    let from = number(&params, "from")?;
    let limit = number(&params, "limit")?;
    let window = match (from, limit) {
        (None, None) => None,
        (_, Some(0)) => {
            return Err(ApiError::bad_request(
                "limit=0: a window holds at least one message",
            ))
        }
        (from, limit) => Some(Window {
            from: from.map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX)),
            limit: limit.map_or(MAX_WINDOW, |n| {
                usize::try_from(n).unwrap_or(MAX_WINDOW).min(MAX_WINDOW)
            }),
        }),
    };
    let view = read_session(&console, id, move |store, id| {
        view_at(store, id, at, window)
    })
    .await?;
    json_body(&view)
}

fn view_at(
    store: &Store,
    id: &str,
    at: Option<u64>,
    window: Option<Window>,
) -> Result<View, ApiError> {
    let summary = store.summary(id)?;
    let end = summary.events;
    let at = match (at, end) {
        (Some(seq), _) => Some(within(id, seq, end)?),
        (None, 0) => None,
        (None, _) => Some(end - 1),
    };
    let all = match at {
        Some(_) => store.messages_at(id, at)?,
        None => Vec::new(),
    };
    let window = window.unwrap_or(Window {
        from: 0,
        limit: all.len(),
    });
    let messages = all
        .iter()
        .skip(window.from)
        .take(window.limit)
        .map(raw)
        .collect();
    let mut projections = HashMap::new();
    let mut projection_errors = HashMap::new();
    for unit in VIEW_UNITS {
        match at.map(|seq| store.state_at(id, unit, Some(seq))) {
            Some(Ok(value)) => {
                projections.insert(unit, raw(&value));
            }
            Some(Err(e)) => {
                projection_errors.insert(unit, e.to_string());
            }
            None => {}
        }
    }
    Ok(View {
        id: id.to_owned(),
        at,
        end,
        summary,
        messages,
        message_count: all.len(),
        messages_from: window.from.min(all.len()),
        projections,
        projection_errors,
    })
}

fn compactions(store: &Store, id: &str, at: Option<u64>) -> Result<Vec<Compaction>, ApiError> {
    Ok(store
        .surface_at(id, at)?
        .replacements
        .iter()
        .map(|r| Compaction {
            seq: r.seq,
            start: r.start,
            end: r.end,
        })
        .collect())
}

#[derive(Serialize)]
struct Events {
    id: String,
    from: u64,
    to: u64,
    end: u64,
    events: Vec<SeqEvent>,
}

/// One stored event and its seq.
#[derive(Serialize)]
pub(crate) struct SeqEvent {
    pub(crate) seq: u64,
    pub(crate) event: Box<RawValue>,
}

/// `GET /api/sessions/{id}/events?from=A&to=B`, or `?at=SEQ&radius=R` (the events within R of
/// SEQ; default 8): at most [`MAX_EVENTS`].
pub(crate) async fn events(
    State(console): State<Arc<Console>>,
    path: IdPath,
    query: Params,
) -> Result<Response, ApiError> {
    let id = session_id(path)?;
    let params = params(query)?;
    let (from, to) = match number(&params, "at")? {
        Some(at) => {
            let radius = number(&params, "radius")?
                .unwrap_or(8)
                .min((MAX_EVENTS - 1) / 2);
            (at.saturating_sub(radius), at.saturating_add(radius))
        }
        None => seq_range(&params, MAX_EVENTS)?,
    };
    let events = read_session(&console, id, move |store, id| {
        let end = end_of(store, id)?;
        within(id, from, end)?;
        let to = to.min(end - 1);
        let mut events = Vec::new();
        store.events(id, from, Some(to), &mut |seq, event| {
            events.push(SeqEvent {
                seq,
                event: raw(event),
            });
            Ok(())
        })?;
        Ok(Events {
            id: id.to_owned(),
            from,
            to,
            end,
            events,
        })
    })
    .await?;
    json_body(&events)
}

#[derive(Serialize)]
struct Marks {
    id: String,
    end: u64,
    turns: Vec<Turn>,
    compactions: Vec<Compaction>,
    /// Why a kind of mark is missing.
    notes: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Turn {
    turn: Box<RawValue>,
    start_seq: u64,
    /// `None` while the turn is open.
    end_seq: Option<u64>,
    steps: u64,
}

/// `GET /api/sessions/{id}/marks`: the turns and compactions, for the scrubber.
pub(crate) async fn marks(
    State(console): State<Arc<Console>>,
    path: IdPath,
) -> Result<Response, ApiError> {
    let id = session_id(path)?;
    let marks = read_session(&console, id, move |store, id| {
        let end = end_of(store, id)?;
        let mut notes = Vec::new();
        let turns = turns(store, id).unwrap_or_else(|e| {
            notes.push(format!("no turn marks: {e}"));
            Vec::new()
        });
        let compactions = match end {
            0 => Vec::new(),
            _ => compactions(store, id, None).unwrap_or_else(|e| {
                notes.push(format!("no compaction marks: {}", e.message()));
                Vec::new()
            }),
        };
        Ok(Marks {
            id: id.to_owned(),
            end,
            turns,
            compactions,
            notes,
        })
    })
    .await?;
    json_body(&marks)
}

/// The session's turns, from its `turns` projection (read at the checkpoint, not by a scan).
fn turns(store: &Store, id: &str) -> Result<Vec<Turn>, sessionlog_engine::Error> {
    let Value::Array(list) = store.state_at(id, "turns", None)? else {
        return Ok(Vec::new());
    };
    let seq = |o: &sessionlog_codec::json::Object, k: &str| {
        o.get(k).and_then(Value::as_f64).map(|n| n as u64)
    };
    Ok(list
        .iter()
        .filter_map(Value::as_object)
        .filter_map(|o| {
            Some(Turn {
                turn: raw(o.get("turn").unwrap_or(&Value::Null)),
                start_seq: seq(o, "startSeq")?,
                end_seq: seq(o, "endSeq"),
                steps: seq(o, "steps").unwrap_or(0),
            })
        })
        .collect())
}

#[derive(Serialize)]
struct Tokens {
    id: String,
    points: Vec<UsagePoint>,
}

#[derive(Serialize)]
struct UsagePoint {
    seq: u64,
    usage: Box<RawValue>,
}

/// `GET /api/sessions/{id}/tokens`: the `tokenUsage` projection at each turn's end (and at the
/// last event), at most [`MAX_SAMPLES`] points spread evenly over the turns.
pub(crate) async fn tokens(
    State(console): State<Arc<Console>>,
    path: IdPath,
) -> Result<Response, ApiError> {
    let id = session_id(path)?;
    let tokens = read_session(&console, id, move |store, id| {
        let end = end_of(store, id)?;
        let mut seqs: Vec<u64> = turns(store, id)
            .unwrap_or_default()
            .iter()
            .filter_map(|t| t.end_seq)
            .collect();
        if let Some(last) = end.checked_sub(1) {
            seqs.push(last);
        }
        seqs.dedup();
        let step = seqs.len().div_ceil(MAX_SAMPLES).max(1);
        let last = seqs.last().copied();
        let mut sampled: Vec<u64> = seqs.iter().copied().step_by(step).collect();
        if sampled.last().copied() != last {
            sampled.extend(last);
        }
        let mut points = Vec::new();
        for seq in sampled {
            // A format without a token meter has no points; the plot says so.
            let Ok(usage) = store.state_at(id, "tokenUsage", Some(seq)) else {
                break;
            };
            points.push(UsagePoint {
                seq,
                usage: raw(&usage),
            });
        }
        Ok(Tokens {
            id: id.to_owned(),
            points,
        })
    })
    .await?;
    json_body(&tokens)
}

#[derive(Serialize)]
struct Tree {
    id: String,
    /// Ancestors (negative depth, nearest first), the session (depth 0), descendants.
    lineage: Vec<LineageEntry>,
}

/// `GET /api/sessions/{id}/tree`.
pub(crate) async fn tree(
    State(console): State<Arc<Console>>,
    path: IdPath,
) -> Result<Response, ApiError> {
    let id = session_id(path)?;
    let console = Arc::clone(&console);
    let tree = blocking(move || {
        let lineage = console.lineage(&id)?;
        Ok(Tree { id, lineage })
    })
    .await?;
    json_body(&tree)
}
