//! One host process of the nemesis run (the hidden `sessionlog-harness nemesis-host`): it joins
//! the fleet through its proxy, keeps its leases, prints [`READY`], then answers calls read as
//! JSON lines on standard input, each on its own thread (a call may hang while the nemesis
//! holds the host's packets), one JSON line per answer on standard output. It exits when
//! standard input closes.
//!
//! Answers are classified by what the fleet claims: acknowledged; refused, nothing written
//! (every refusal but one whose message says the outcome is unknown, and but a write the fleet
//! could not finish talking to PostgreSQL about); unknown. The checker holds the fleet to it.
//!
//! A final [`DUMP`] request catches the store up on every id it names (as a read does) and
//! answers every local session's export and deleted flag: each host's final state.

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use sessionlog_cluster::{Config, Error as FleetError, Fleet, FleetOptions};
use sessionlog_codec::format::event::NewEvent;
use sessionlog_codec::json::{self, Object, Value};
use sessionlog_engine::{AppendItem, Error as StoreError, Options, RefusalKind, SourceEncoding};

use super::history::{event_line, header_line, Answer, Call, Outcome, Served};
use crate::gen::host_options;

/// What a host prints once it has joined the fleet.
pub const READY: &str = "ready";
/// The request (`{"dump": [ids]}`) for the host's final state.
pub const DUMP: &str = "dump";

/// How one host process runs.
#[derive(Clone, Debug)]
pub struct HostSpec {
    /// PostgreSQL's URL, through the host's proxies.
    pub url: String,
    /// The host's name in the fleet.
    pub host: String,
    /// Its store's directory (kept across restarts).
    pub dir: PathBuf,
    /// Its lease (`FleetOptions::lease`).
    pub lease: Duration,
    /// Its group commit's patience (`FleetOptions::commit_patience`).
    pub commit_patience: Duration,
    /// Its read bound (`FleetOptions::read_bound`).
    pub read_bound: Duration,
}

/// The incarnation and epoch the host learned for each session it acquired or created.
type Known = Mutex<HashMap<String, (u32, i64)>>;

/// Serve calls from `input` until it closes (see the module docs).
pub fn serve<W: Write + Send + 'static>(
    spec: &HostSpec,
    input: &mut dyn BufRead,
    output: W,
) -> anyhow::Result<()> {
    let fleet = Arc::new(
        Fleet::open(
            &spec.dir,
            Config::parse(&spec.url)?,
            FleetOptions {
                lease: spec.lease,
                commit_patience: spec.commit_patience,
                read_bound: spec.read_bound,
                store: host_options(Options::default()),
                ..FleetOptions::new(spec.host.as_str())
            },
        )
        .with_context(|| format!("{} joining the fleet", spec.host))?,
    );
    let _leases = fleet.keep_leases()?;
    let output = Arc::new(Mutex::new(output));
    let known: Arc<Known> = Arc::default();
    write_line(&output, READY)?;
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let request = json::parse(line.trim()).map_err(|e| anyhow::anyhow!("{e}: {line:?}"))?;
        let request = request
            .as_object()
            .with_context(|| format!("a request is an object: {line:?}"))?
            .clone();
        let (fleet, known, output) = (Arc::clone(&fleet), Arc::clone(&known), Arc::clone(&output));
        std::thread::Builder::new()
            .name("nemesis-call".into())
            .spawn(move || {
                let reply = match request.get(DUMP).and_then(Value::as_array) {
                    Some(ids) => dump(&fleet, ids),
                    None => match Call::from_json(&request) {
                        Ok((op, call)) => execute(&fleet, &known, op, &call).to_json(op),
                        Err(e) => Object::new().with("error", format!("{e:#}").as_str()),
                    },
                };
                let _ = write_line(&output, &json::stringify(&Value::Object(reply)));
            })
            .context("starting a call's thread")?;
    }
}

fn write_line<W: Write>(output: &Mutex<W>, line: &str) -> anyhow::Result<()> {
    let mut out = output.lock().unwrap_or_else(PoisonError::into_inner);
    writeln!(out, "{line}")?;
    out.flush()?;
    Ok(())
}

/// Run `call` (number `op`) on `fleet`.
fn execute(fleet: &Fleet, known: &Known, op: u64, call: &Call) -> Answer {
    let learn = |id: &str, incarnation: u32, epoch: i64| {
        known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.to_owned(), (incarnation, epoch));
    };
    let learned = |id: &str| {
        known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .copied()
    };
    let incarnation_of = |id: &str| {
        fleet
            .store()
            .summary(id)
            .ok()
            .map(|s| crc32fast::hash(format!("{}\n", s.header).as_bytes()))
    };
    match call {
        Call::Create { session, events } | Call::Append { session, events } => {
            let creating = matches!(call, Call::Create { .. });
            let built: Result<Vec<NewEvent>, String> = (0..*events)
                .map(|i| {
                    json::parse(&event_line(op, i, None))
                        .map_err(|e| e.to_string())
                        .and_then(|v| NewEvent::from_value(&v))
                })
                .collect();
            let events = match built {
                Ok(e) => e,
                Err(e) => return refused("HARNESS", e),
            };
            let mut item = AppendItem::new(session, creating.then_some(0), events);
            let header = header_line(session, op);
            if creating {
                item = item.creating(header.clone(), SourceEncoding::Jsonl);
            }
            match fleet.append_many(vec![item]).pop() {
                Some(Ok(receipt)) => {
                    if creating {
                        learn(
                            session,
                            crc32fast::hash(format!("{header}\n").as_bytes()),
                            1,
                        );
                    }
                    let (incarnation, epoch) = learned(session).unzip();
                    Answer {
                        seqs: Some((receipt.first_seq, receipt.count)),
                        incarnation,
                        epoch,
                        ..Answer::plain(Outcome::Acknowledged, "")
                    }
                }
                Some(Err(e)) => store_failure(&e),
                None => Answer::plain(Outcome::Unknown, "no outcome"),
            }
        }
        Call::Import { session, events } => {
            let mut file = format!("{}\n", header_line(session, op));
            for i in 0..*events {
                file.push_str(&event_line(op, i, Some(i)));
                file.push('\n');
            }
            match fleet.import(&format!("{session}.jsonl"), file.as_bytes()) {
                Ok(_) => {
                    let incarnation =
                        crc32fast::hash(format!("{}\n", header_line(session, op)).as_bytes());
                    learn(session, incarnation, 1);
                    Answer {
                        incarnation: Some(incarnation),
                        epoch: Some(1),
                        ..Answer::plain(Outcome::Acknowledged, "")
                    }
                }
                Err(e) => fleet_failure(&e, true),
            }
        }
        Call::Fork { parent, child } => match fleet.fork(parent, None, child) {
            Ok(_) => {
                let incarnation = incarnation_of(child);
                if let Some(i) = incarnation {
                    learn(child, i, 1);
                }
                Answer {
                    incarnation,
                    epoch: Some(1),
                    ..Answer::plain(Outcome::Acknowledged, "")
                }
            }
            Err(e) => fleet_failure(&e, true),
        },
        Call::Delete { session } | Call::Undelete { session } => {
            let deleted = matches!(call, Call::Delete { .. });
            match fleet.set_deleted(session, deleted) {
                Ok(()) => Answer::plain(Outcome::Acknowledged, ""),
                Err(e) => fleet_failure(&e, true),
            }
        }
        Call::Purge => match fleet.purge(Duration::ZERO) {
            Ok(ids) => Answer {
                purged: ids,
                ..Answer::plain(Outcome::Acknowledged, "")
            },
            Err(e) => fleet_failure(&e, true),
        },
        Call::Acquire { session, force } => match fleet.acquire(session, *force) {
            Ok(acquired) => {
                let incarnation = crc32fast::hash(&acquired.row.header);
                learn(session, incarnation, acquired.row.epoch);
                Answer {
                    incarnation: Some(incarnation),
                    epoch: Some(acquired.row.epoch),
                    ..Answer::plain(Outcome::Acknowledged, "")
                }
            }
            Err(e) => fleet_failure(&e, true),
        },
        Call::Release { session } => match fleet.release(session) {
            Ok(true) => Answer::plain(Outcome::Acknowledged, ""),
            Ok(false) => refused("NOT_HELD", "this host did not hold it"),
            Err(e) => fleet_failure(&e, true),
        },
        Call::Read { session } => read(fleet, session),
    }
}

/// Catch up on `id` as the Node binding does (an id PostgreSQL does not know is read from the
/// store as it is), then export it.
fn read(fleet: &Fleet, id: &str) -> Answer {
    match fleet.sync(id) {
        Ok(_) | Err(FleetError::UnknownSession(_)) => {}
        Err(e) => return fleet_failure(&e, false),
    }
    let mut bytes = Vec::new();
    match fleet.store().export(id, None, &mut bytes) {
        Ok(_) => Answer {
            served: Some(Served::of(&bytes)),
            ..Answer::plain(Outcome::Acknowledged, "")
        },
        Err(StoreError::UnknownSession { .. }) => Answer::plain(Outcome::Acknowledged, "absent"),
        Err(e) => store_failure(&e),
    }
}

/// The final state: `ids` and every local session caught up, then each local session's export
/// and deleted flag, and the catch-ups that failed.
fn dump(fleet: &Fleet, ids: &[Value]) -> Object {
    let mut all: BTreeSet<String> = ids
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    let mut failures = Vec::new();
    if let Ok(local) = fleet.store().list() {
        all.extend(local.into_iter().map(|s| s.id));
    }
    for id in &all {
        match fleet.sync(id) {
            Ok(_) | Err(FleetError::UnknownSession(_)) => {}
            Err(e) => failures.push(Value::from(format!("{id}: {e}").as_str())),
        }
    }
    let mut sessions = Vec::new();
    for summary in fleet.store().list().unwrap_or_default() {
        let mut bytes = Vec::new();
        if let Err(e) = fleet.store().export(&summary.id, None, &mut bytes) {
            failures.push(Value::from(format!("{}: export: {e}", summary.id).as_str()));
            continue;
        }
        sessions.push(Value::Object(
            Object::new()
                .with("id", summary.id.as_str())
                .with("deleted", summary.deleted_at_ms.is_some())
                .with("bytes", &*String::from_utf8_lossy(&bytes)),
        ));
    }
    Object::new()
        .with("sessions", Value::Array(sessions))
        .with("failures", Value::Array(failures))
}

fn refused(code: &str, message: impl Into<String>) -> Answer {
    Answer::plain(
        Outcome::Refused {
            code: code.to_owned(),
        },
        message,
    )
}

/// A store error's answer: a refusal whose outcome the hook says is unknown, or a local write
/// failing after PostgreSQL committed, is unknown; every other error is a refusal (the fleet claims nothing was written), coded by its variant.
fn store_failure(e: &StoreError) -> Answer {
    match e {
        StoreError::Refused(r)
            if r.kind == RefusalKind::Unavailable && r.message.contains("outcome unknown") =>
        {
            Answer::plain(Outcome::Unknown, r.message.as_str())
        }
        StoreError::Refused(r) => refused(
            match r.kind {
                RefusalKind::Fenced => "SESSIONLOG_FENCED",
                RefusalKind::Stale => "SESSIONLOG_STALE",
                RefusalKind::Unavailable => "SESSIONLOG_UNAVAILABLE",
                RefusalKind::Unstorable => "SESSIONLOG_UNSTORABLE",
            },
            r.message.as_str(),
        ),
        StoreError::OutcomeUnknown { .. } => Answer::plain(Outcome::Unknown, e.to_string()),
        StoreError::Shared(inner) => store_failure(inner),
        other => refused(&variant(other), other.to_string()),
    }
}

/// A fleet error's answer: PostgreSQL unreachable past the fleet's patience leaves a write's
/// outcome unknown (`writes`) and a read refused; the rest as [`store_failure`] or refusals.
fn fleet_failure(e: &FleetError, writes: bool) -> Answer {
    match e {
        FleetError::Store(inner) => store_failure(inner),
        FleetError::Postgres { .. } if writes => Answer::plain(Outcome::Unknown, e.to_string()),
        other => refused(&variant(other), other.to_string()),
    }
}

/// The name of an error's variant (`UnknownSession`), its stable code here.
fn variant(e: &dyn std::fmt::Debug) -> String {
    let text = format!("{e:?}");
    text.split(|c: char| !c.is_alphanumeric() && c != '_')
        .next()
        .unwrap_or("Error")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sessionlog_engine::Refusal;

    fn refusal(kind: RefusalKind, message: &str) -> StoreError {
        StoreError::Refused(Refusal {
            kind,
            message: message.into(),
        })
    }

    fn code(answer: &Answer) -> Option<&str> {
        match &answer.outcome {
            Outcome::Refused { code } => Some(code),
            _ => None,
        }
    }

    #[test]
    fn answers_say_what_the_fleet_claims() {
        let unknown = refusal(
            RefusalKind::Unavailable,
            "outcome unknown: the connection dropped during the commit",
        );
        assert_eq!(store_failure(&unknown).outcome, Outcome::Unknown);
        let not_committed = refusal(RefusalKind::Unavailable, "PostgreSQL unreachable");
        assert_eq!(
            code(&store_failure(&not_committed)),
            Some("SESSIONLOG_UNAVAILABLE")
        );
        let fenced = refusal(RefusalKind::Fenced, "taken over");
        assert_eq!(code(&store_failure(&fenced)), Some("SESSIONLOG_FENCED"));

        let lost = FleetError::Postgres {
            url: "postgres://h@127.0.0.1/p".into(),
            during: "acquiring a session".into(),
            detail: "connection reset".into(),
        };
        assert_eq!(fleet_failure(&lost, true).outcome, Outcome::Unknown);
        assert_eq!(code(&fleet_failure(&lost, false)), Some("Postgres"));
        let missing = FleetError::UnknownSession("s0".into());
        assert_eq!(code(&fleet_failure(&missing, true)), Some("UnknownSession"));
        assert_eq!(
            code(&fleet_failure(&FleetError::Store(fenced), true)),
            Some("SESSIONLOG_FENCED")
        );
    }
}
