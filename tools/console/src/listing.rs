//! The listing (`/api/sessions`): sessions by most recent activity, cursor-paged; with the
//! search box's text, the sessions whose messages hold it, found by the session index
//! ([`Store::search`], newest first, each with its matched messages' snippets), and the session
//! whose id is that text, first.
//!
//! The console reads beside the process holding the store, so it reads the index that process
//! keeps, as far as that one caught it up (the answer says how many changes it is behind). A
//! store whose index was never built has none to read, and a reader cannot build one: the
//! search box then filters the listing by id, title, project directory and header (reading at
//! most [`MAX_SCANNED`] index entries a request), and the answer's `note` says so and what
//! builds the index.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use serde::Serialize;
use sessionlog_codec::json::Value;
use sessionlog_engine::{
    Error, ListOrder, SearchHit, SearchMatch, SearchQuery, SessionSummary, Store,
};

use crate::api::{number, params, read, Params, MAX_ID_BYTES};
use crate::reply::{json_body, ApiError};
use crate::Console;

/// The most sessions a listing page holds (and the default page).
pub const MAX_PAGE: usize = 200;
const DEFAULT_PAGE: usize = 50;
/// The most index entries one filtered listing request reads looking for matches.
const MAX_SCANNED: usize = 5_000;
/// Matched messages shown per session found.
const MATCHES_SHOWN: usize = 3;

/// One listed session: its summary and title, and, when found by a search, its matched
/// messages.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Listed {
    #[serde(flatten)]
    summary: SessionSummary,
    title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    matches: Option<Vec<SearchMatch>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    match_count: Option<u64>,
}

#[derive(Serialize)]
struct Listing {
    sessions: Vec<Listed>,
    /// Pass as `after` for the next page; `null` at the end.
    next: Option<String>,
    /// How `q` was answered: `index` (the session index) or `filter` (no index to read).
    #[serde(skip_serializing_if = "Option::is_none")]
    search: Option<&'static str>,
    /// What the reader should know about the answer (the index behind, or missing).
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// `GET /api/sessions?limit=N&after=CURSOR&q=TEXT`: sessions by most recent activity; with `q`,
/// the sessions found by the session index (or, without one, filtered; see the module docs).
pub(crate) async fn sessions(
    State(console): State<Arc<Console>>,
    query: Params,
) -> Result<Response, ApiError> {
    let params = params(query)?;
    let limit = match number(&params, "limit")? {
        None => DEFAULT_PAGE,
        Some(0) => {
            return Err(ApiError::bad_request(
                "limit=0: a page holds at least one session",
            ))
        }
        Some(n) => usize::try_from(n).unwrap_or(MAX_PAGE).min(MAX_PAGE),
    };
    let after = params.get("after").cloned();
    let text = params
        .get("q")
        .map(|q| q.trim().to_owned())
        .filter(|q| !q.is_empty());
    let listing = read(&console, move |store| match text {
        None => {
            let after = after.as_deref().map(decode_cursor).transpose()?;
            list(store, limit, after, None)
        }
        Some(text) => search(store, limit, after, &text),
    })
    .await?;
    json_body(&listing)
}

/// The sessions the index finds for `text`, or, without an index, the filtered listing.
fn search(
    store: &Store,
    limit: usize,
    after: Option<String>,
    text: &str,
) -> Result<Listing, ApiError> {
    let query = SearchQuery {
        text: Some(text.to_owned()),
        limit,
        after: after.clone(),
        max_matches: MATCHES_SHOWN,
        ..SearchQuery::default()
    };
    let page = match store.search(&query) {
        Ok(page) => page,
        Err(Error::SearchIndex { detail }) => {
            let after = after.as_deref().map(decode_cursor).transpose()?;
            let mut listing = list(store, limit, after, Some(&text.to_lowercase()))?;
            listing.search = Some("filter");
            listing.note = Some(format!(
                "The session index cannot be read here ({detail}), so this is a filter of the \
                 listing by id, title, project and header, not a search of message text. \
                 `sessionlog reindex` builds the index (or any `sessionlog search` by the \
                 process that holds the store)."
            ));
            return Ok(listing);
        }
        Err(e) => return Err(e.into()),
    };
    let mut sessions = Vec::new();
    // An id typed whole lists that session first, on the first page.
    if after.is_none() && text.len() <= MAX_ID_BYTES {
        if let Ok(summary) = store.summary(text) {
            if summary.deleted_at_ms.is_none() {
                let title = title_of(store, &summary.id);
                sessions.push(Listed {
                    summary,
                    title,
                    matches: None,
                    match_count: None,
                });
            }
        }
    }
    for hit in page.sessions {
        if sessions.iter().any(|s| s.summary.id == hit.row.id) {
            continue;
        }
        // A session found may have gone (purged) since the index read it; it is left out.
        if let Ok(summary) = store.summary(&hit.row.id) {
            sessions.push(found(summary, hit));
        }
    }
    let behind = page.watermark.behind;
    Ok(Listing {
        sessions,
        next: page.next,
        search: Some("index"),
        note: (behind > 0).then(|| {
            format!(
                "The session index is {behind} changes behind the store: the process that \
                 holds the store keeps it and catches it up on its own searches."
            )
        }),
    })
}

fn found(summary: SessionSummary, hit: SearchHit) -> Listed {
    Listed {
        summary,
        title: hit.row.title,
        matches: Some(hit.matches),
        match_count: Some(hit.match_count),
    }
}

/// The listing, filtered by `needle` (lower-case) over each session's id, title, project
/// directory and header.
fn list(
    store: &Store,
    limit: usize,
    mut after: Option<Vec<u8>>,
    needle: Option<&str>,
) -> Result<Listing, ApiError> {
    let mut out = Listing {
        sessions: Vec::new(),
        next: None,
        search: None,
        note: None,
    };
    let mut scanned = 0;
    loop {
        let want = limit - out.sessions.len();
        let page = store.list_page(ListOrder::Activity, want, after.as_deref())?;
        scanned += page.sessions.len().max(1);
        for summary in page.sessions {
            let title = title_of(store, &summary.id);
            let matches = needle.is_none_or(|n| {
                [
                    Some(summary.id.as_str()),
                    title.as_deref(),
                    summary.cwd.as_deref(),
                    Some(summary.header.as_str()),
                ]
                .into_iter()
                .flatten()
                .any(|field| field.to_lowercase().contains(n))
            });
            if matches {
                out.sessions.push(Listed {
                    summary,
                    title,
                    matches: None,
                    match_count: None,
                });
            }
        }
        after = page.next;
        let full = out.sessions.len() >= limit;
        if after.is_none() || full || scanned >= MAX_SCANNED {
            out.next = after.map(|c| encode_cursor(&c));
            return Ok(out);
        }
    }
}

/// A session's title now, when its format has one.
fn title_of(store: &Store, id: &str) -> Option<String> {
    match store.state_at(id, "title", None) {
        Ok(Value::String(s)) => Some(s.to_string_lossy()),
        _ => None,
    }
}

fn encode_cursor(cursor: &[u8]) -> String {
    cursor.iter().map(|b| format!("{b:02x}")).collect()
}

fn decode_cursor(text: &str) -> Result<Vec<u8>, ApiError> {
    let bad = || ApiError::bad_request(format!("after={text:?}: not a cursor this listing gave"));
    if !text.len().is_multiple_of(2) || text.len() > 2 * (MAX_ID_BYTES + 64) {
        return Err(bad());
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(bad)
        })
        .collect()
}
