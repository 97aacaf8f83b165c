//! The store operations the addon serves, each rendering its result as its report's one
//! serialization (serde's JSON, as the CLI's `--json` prints it; `reply.rs`) or as bytes, for
//! `index.js` to parse. Events are rendered with the codec's `JSON.stringify`, so a value reaches
//! JavaScript exactly as DSH's reader would have parsed it.
//!
//! Invariant: a load's events and its revision describe the same stored prefix (the events are
//! read up to the count the revision names).

use serde::Serialize;
use serde_json::value::RawValue;
use sessionlog_codec::json::{stringify, Value};
use sessionlog_engine::{
    Error, ExportFormat, ImportReport, SessionSummary, SourceEncoding, Store, Verdict,
};

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
    reply(store.list(), |all| list_of(&all))
}

/// The live sessions of `all`, as [`list`] renders them.
pub fn list_of(all: &[SessionSummary]) -> Reply {
    let live: Vec<&SessionSummary> = all.iter().filter(|s| s.deleted_at_ms.is_none()).collect();
    Reply::json(&live)
}

/// Create an empty session from its header line.
pub fn create_session(store: &Store, header_line: &str, zstd: bool) -> Reply {
    let encoding = if zstd {
        SourceEncoding::JsonlZstd
    } else {
        SourceEncoding::Jsonl
    };
    report(store.create_session(header_line, encoding))
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

/// Import one session log given as bytes: its `ImportReport`.
pub fn import_bytes(store: &Store, name: &str, bytes: &[u8]) -> Reply {
    let options = sessionlog_engine::ImportOptions::default();
    let imported: sessionlog_engine::Result<ImportReport> =
        if bytes.starts_with(&sessionlog_codec::format::zstd::MAGIC_BYTES) {
            store.import_zstd(name, bytes, &options)
        } else {
            store.import_jsonl(name, bytes, &options, &mut |_| {})
        };
    report(imported)
}

/// Check the given sessions (all when empty): its `VerifyReport`.
pub fn verify(store: &Store, ids: &[String]) -> Reply {
    report(store.verify(ids))
}
