//! The store operations the addon serves, each rendering its result as the JSON text (or bytes)
//! `index.js` parses. Events and headers are rendered with the codec's `JSON.stringify`, so a
//! value reaches JavaScript exactly as DSH's reader would have parsed it.
//!
//! Invariant: a load's events and its revision describe the same stored prefix (the events are
//! read up to the count the revision names).

use sessionlog_codec::json::{stringify, Value};
use sessionlog_engine::{
    Error, ExportFormat, ForkReport, RepairReport, SessionSummary, SourceEncoding, Store, Verdict,
};

use crate::reply::{reply, Reply};

/// A Rust string as a JSON string literal.
pub fn quoted(s: &str) -> String {
    stringify(&Value::from(s))
}

/// The revision token of a stored session: it changes with every commit to it.
fn revision(s: &SessionSummary) -> String {
    let verdict = match s.verdict {
        Verdict::Clean => "clean",
        Verdict::Torn => "torn",
        Verdict::Corrupt(_) => "corrupt",
        Verdict::Unsupported(_) => "unsupported",
    };
    format!(
        "sessionlog:{}:{}:{}:{verdict}",
        s.events, s.bytes, s.batches
    )
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
    let mut out = String::with_capacity(256 + summary.bytes as usize);
    out.push_str("{\"header\":");
    out.push_str(&quoted(&summary.header));
    out.push_str(",\"events\":[");
    let mut first = true;
    let mut put = |e: &Value| {
        if !first {
            out.push(',');
        }
        first = false;
        sessionlog_codec::json::write_value(&mut out, e);
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
    out.push_str("],\"revision\":");
    out.push_str(&quoted(&revision(&summary)));
    out.push_str(",\"torn\":");
    out.push_str(if summary.verdict == Verdict::Torn {
        "true"
    } else {
        "false"
    });
    out.push_str(",\"verdict\":");
    out.push_str(&quoted(&summary.verdict.to_string()));
    out.push('}');
    Reply::Json(out)
}

/// `{events, lines, bytes, verdict, revision}` of session `id`, or `null`.
pub fn summary_of(store: &Store, id: &str) -> Reply {
    reply(live_summary(store, id), |s| {
        Reply::Json(s.map_or_else(
            || "null".into(),
            |s| {
                format!(
                    "{{\"events\":{},\"lines\":{},\"bytes\":{},\"verdict\":{},\"revision\":{}}}",
                    s.events,
                    s.body_lines,
                    s.bytes,
                    quoted(&s.verdict.to_string()),
                    quoted(&revision(&s))
                )
            },
        ))
    })
}

/// Every live session: `[{id, header, events, lines, bytes, verdict, revision}]`.
pub fn list(store: &Store) -> Reply {
    reply(store.list(), |all| list_of(&all))
}

/// The live sessions of `all`, as [`list`] renders them.
pub fn list_of(all: &[SessionSummary]) -> Reply {
    let rows: Vec<String> = all
        .iter()
        .filter(|s| s.deleted_at_ms.is_none())
        .map(|s| {
                format!(
                    "{{\"id\":{},\"header\":{},\"events\":{},\"lines\":{},\"bytes\":{},\"verdict\":{},\"revision\":{}}}",
                    quoted(&s.id),
                    quoted(&s.header),
                    s.events,
                    s.body_lines,
                    s.bytes,
                    quoted(&s.verdict.to_string()),
                    quoted(&revision(s)),
                )
        })
        .collect();
    Reply::Json(format!("[{}]", rows.join(",")))
}

/// Create an empty session from its header line.
pub fn create_session(store: &Store, header_line: &str, zstd: bool) -> Reply {
    let encoding = if zstd {
        SourceEncoding::JsonlZstd
    } else {
        SourceEncoding::Jsonl
    };
    reply(store.create_session(header_line, encoding), |id| {
        Reply::Json(quoted(&id))
    })
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

/// A repair report as JSON.
pub fn repair_json(r: RepairReport) -> Reply {
    Reply::Json(format!(
        "{{\"cutBytes\":{},\"recovered\":{},\"closers\":{},\"endSeed\":{}}}",
        r.cut_bytes, r.recovered, r.closers, r.end_seed
    ))
}

/// A fork report as JSON.
pub fn fork_json(r: ForkReport) -> Reply {
    Reply::Json(format!(
        "{{\"id\":{},\"seed\":{},\"endSeed\":{},\"closers\":{}}}",
        quoted(&r.id),
        r.seed,
        r.end_seed,
        r.closers
    ))
}

/// A list of values as a JSON array.
pub fn values_json(values: Vec<Value>) -> Reply {
    Reply::Json(stringify(&Value::Array(values)))
}

/// Import one session log given as bytes: `{id, verdict}`.
pub fn import_bytes(store: &Store, name: &str, bytes: &[u8]) -> Reply {
    let options = sessionlog_engine::ImportOptions::default();
    let report = if bytes.starts_with(&sessionlog_codec::format::zstd::MAGIC_BYTES) {
        store.import_zstd(name, bytes, &options)
    } else {
        store.import_jsonl(name, bytes, &options, &mut |_| {})
    };
    reply(report, |r| {
        Reply::Json(format!(
            "{{\"id\":{},\"verdict\":{}}}",
            quoted(&r.id),
            quoted(&r.verdict.to_string())
        ))
    })
}

/// Check the given sessions (all when empty): `{sessions, events, problems: [{session, detail}]}`.
pub fn verify(store: &Store, ids: &[String]) -> Reply {
    reply(store.verify(ids), |r| {
        let problems: Vec<String> = r
            .problems
            .iter()
            .map(|p| {
                format!(
                    "{{\"session\":{},\"detail\":{}}}",
                    quoted(&p.session),
                    quoted(&p.detail)
                )
            })
            .collect();
        Reply::Json(format!(
            "{{\"sessions\":{},\"events\":{},\"problems\":[{}]}}",
            r.sessions,
            r.events,
            problems.join(",")
        ))
    })
}
