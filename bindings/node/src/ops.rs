//! The store operations the addon serves, each rendering its result as its report's one
//! serialization (serde's JSON, as the CLI's `--json` prints it; `reply.rs`) or as bytes, for
//! `index.js` to parse. Events are rendered with the codec's `JSON.stringify`, so a value reaches
//! JavaScript exactly as DSH's reader would have parsed it.
//!
//! Invariant: a load's events and its revision describe the same stored prefix (the events are
//! read up to the count the revision names).

use serde::Serialize;
use serde_json::value::RawValue;
use sessionlog_cluster::Host;
use sessionlog_codec::json::{stringify, Value};
use sessionlog_engine::{Error, ExportFormat, SessionSummary, SourceEncoding, Store, Verdict};

use crate::reply::{reply, report, Reply};

/// A stored session as `load` returns it: `{header, events, revision, torn, verdict}`.
#[derive(Serialize)]
struct Loaded<'a> {
    /// The header line.
    header: &'a str,
    /// The events, as the codec's `JSON.stringify` of their array.
    events: Box<RawValue>,
    /// [`SessionSummary::revision`].
    revision: String,
    /// The stored log ends in a torn fragment.
    torn: bool,
    /// DSH's verdict, as text.
    verdict: String,
}

/// `summary` when the session exists and is not deleted, `None` when absent.
fn live_summary(store: &Store, id: &str) -> Result<Option<SessionSummary>, Error> {
    match store.summary(id) {
        Ok(s) if s.deleted_at_ms.is_none() => Ok(Some(s)),
        Ok(_) | Err(Error::UnknownSession { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `{header, events, revision, torn, verdict}` of session `id` from seq `from`, or `null`.
pub fn load(store: &Store, id: &str, from: u64) -> Reply {
    let summary = match live_summary(store, id) {
        Ok(Some(s)) => s,
        Ok(None) => return Reply::Json("null".into()),
        Err(e) => return e.into(),
    };
    let mut events = String::with_capacity(64 + summary.bytes as usize);
    events.push('[');
    let mut first = true;
    let mut put = |e: &Value| {
        if !first {
            events.push(',');
        }
        first = false;
        sessionlog_codec::json::write_value(&mut events, e);
    };
    let walked = match summary.verdict {
        Verdict::Corrupt(_) | Verdict::Unsupported(_) => {
            store.events_as_written(id, from, &mut put)
        }
        Verdict::Clean | Verdict::Torn if summary.events > from => {
            store.events(id, from, Some(summary.events - 1), &mut |_, e| {
                put(e);
                Ok(())
            })
        }
        Verdict::Clean | Verdict::Torn => Ok(()),
    };
    if let Err(e) = walked {
        return e.into();
    }
    events.push(']');
    let events = match RawValue::from_string(events) {
        Ok(events) => events,
        Err(e) => {
            return Reply::failed(
                "SESSIONLOG_INTERNAL",
                format!("session \"{id}\": its events did not render as JSON: {e}"),
            )
        }
    };
    Reply::json(&Loaded {
        header: &summary.header,
        events,
        revision: summary.revision(),
        torn: summary.verdict == Verdict::Torn,
        verdict: summary.verdict.to_string(),
    })
}

/// The summary of session `id` (`SessionSummary`'s rendering), or `null`.
pub fn summary_of(store: &Store, id: &str) -> Reply {
    report(live_summary(store, id))
}

/// Every live session's summary.
pub fn list(store: &Store) -> Reply {
    reply(store.list(), |all| {
        let live: Vec<&SessionSummary> = all.iter().filter(|s| s.deleted_at_ms.is_none()).collect();
        Reply::json(&live)
    })
}

/// Create an empty session from its header line.
pub fn create_session(host: &Host, header_line: &str, zstd: bool) -> Reply {
    let encoding = if zstd {
        SourceEncoding::JsonlZstd
    } else {
        SourceEncoding::Jsonl
    };
    report(host.create_session(header_line, encoding))
}

/// The session's bytes in `format` (default: its own encoding), or one generation's.
pub fn export(
    store: &Store,
    id: &str,
    format: Option<ExportFormat>,
    generation: Option<u32>,
) -> Reply {
    let mut bytes = Vec::new();
    let written = match generation {
        Some(v) => store.export_generation(id, v, format, &mut bytes),
        None => store.export(id, format, &mut bytes),
    };
    reply(written, |_| Reply::Bytes(bytes))
}

/// A list of values as a JSON array.
pub fn values_json(values: Vec<Value>) -> Reply {
    Reply::Json(stringify(&Value::Array(values)))
}

/// `store.search(query)`'s argument, as JSON: the CLI's flags by their camelCase names, times
/// as epoch milliseconds or the CLI's date text.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SearchArgs {
    text: Option<String>,
    tool: Option<String>,
    #[serde(default)]
    tool_error: bool,
    model: Option<String>,
    since: Option<Time>,
    until: Option<Time>,
    min_tokens: Option<u64>,
    #[serde(default)]
    open: bool,
    verdict: Option<String>,
    parent: Option<String>,
    limit: Option<usize>,
    after: Option<String>,
}

/// A time as a number (epoch ms) or as text.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Time {
    Ms(i64),
    Text(String),
}

impl Time {
    fn ms(self) -> sessionlog_engine::Result<i64> {
        match self {
            Time::Ms(ms) => Ok(ms),
            Time::Text(t) => sessionlog_engine::parse_time(&t),
        }
    }
}

fn search_query(json: &str) -> sessionlog_engine::Result<sessionlog_engine::SearchQuery> {
    let args: SearchArgs =
        serde_json::from_str(json).map_err(|e| sessionlog_engine::Error::Query {
            reason: format!("the query object is not one search takes: {e}"),
        })?;
    let defaults = sessionlog_engine::SearchQuery::default();
    Ok(sessionlog_engine::SearchQuery {
        text: args.text,
        tool: args.tool,
        tool_error: args.tool_error,
        model: args.model,
        since_ms: args.since.map(Time::ms).transpose()?,
        until_ms: args.until.map(Time::ms).transpose()?,
        min_tokens: args.min_tokens,
        open: args.open,
        verdict: args.verdict,
        parent: args.parent,
        limit: args.limit.unwrap_or(defaults.limit),
        after: args.after,
        ..defaults
    })
}

/// Find sessions: the `SearchPage` (`{sessions, next, watermark}`; each session as
/// `search --json` prints it).
pub fn search(store: &Store, query: &str) -> Reply {
    report(search_query(query).and_then(|q| store.search(&q)))
}

/// Rebuild the session index: its `ReindexReport`.
pub fn reindex(store: &Store) -> Reply {
    report(store.reindex())
}

/// Check the given sessions (all when empty): its `VerifyReport`.
pub fn verify(store: &Store, ids: &[String]) -> Reply {
    report(store.verify(ids))
}
