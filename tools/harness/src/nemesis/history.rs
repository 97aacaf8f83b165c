//! The nemesis run's history: every call a client made (which host, which session, its
//! arguments, when it was invoked and answered) with its answer, and every fault the nemesis
//! injected with its time. The checker reads nothing else but this and the final state.
//!
//! A call and an answer cross the pipe to a host process as one JSON line each
//! ([`Call::to_json`], [`Answer::to_json`] and their parsers), so the host and the controller
//! agree on one vocabulary.
//!
//! Batches are recognisable in any bytes: every event a client writes carries the text
//! `nemesis-<op>-<i>` ([`token`]), `<op>` being the call's number in the run, and a session a
//! client creates has `nemesis-<op>-h` in its header's `cwd`. [`ops_in`] finds them again.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{anyhow, Context};
use sessionlog_codec::json::{self, JsString, Object, Value};

/// One call a client makes to a host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    /// Create `session` with a first batch of `events` events (its header names the call).
    Create { session: String, events: u64 },
    /// Append a batch of `events` events to `session` (at its end, wherever that is).
    Append { session: String, events: u64 },
    /// Fork `parent` (after its last event) into a new session `child`.
    Fork { parent: String, child: String },
    /// Import a DSH file of `events` events as the new session `session`.
    Import { session: String, events: u64 },
    /// Mark `session` deleted in the fleet.
    Delete { session: String },
    /// Restore the deleted `session`.
    Undelete { session: String },
    /// Remove for good every session deleted in the fleet (`purge --older-than 0`).
    Purge,
    /// Take `session` for the host (by force when `force`) and catch its store up.
    Acquire { session: String, force: bool },
    /// Give `session` up.
    Release { session: String },
    /// Catch the host's store up on `session` (without taking it), then export it.
    Read { session: String },
}

impl Call {
    /// The call's kind, as the report counts it.
    pub fn kind(&self) -> &'static str {
        match self {
            Call::Create { .. } => "create",
            Call::Append { .. } => "append",
            Call::Fork { .. } => "fork",
            Call::Import { .. } => "import",
            Call::Delete { .. } => "delete",
            Call::Undelete { .. } => "undelete",
            Call::Purge => "purge",
            Call::Acquire { .. } => "acquire",
            Call::Release { .. } => "release",
            Call::Read { .. } => "read",
        }
    }

    /// The session the call is about (a fork's: its child), if one.
    pub fn session(&self) -> Option<&str> {
        match self {
            Call::Create { session, .. }
            | Call::Append { session, .. }
            | Call::Import { session, .. }
            | Call::Delete { session }
            | Call::Undelete { session }
            | Call::Acquire { session, .. }
            | Call::Release { session }
            | Call::Read { session } => Some(session),
            Call::Fork { child, .. } => Some(child),
            Call::Purge => None,
        }
    }

    /// Whether the call writes events of its own (whose tokens the checker follows).
    pub fn writes_events(&self) -> bool {
        matches!(
            self,
            Call::Create { .. } | Call::Append { .. } | Call::Import { .. }
        )
    }

    /// The call as the request line's object, numbered `op`.
    pub fn to_json(&self, op: u64) -> Object {
        let o = Object::new()
            .with("op", count(op))
            .with("call", self.kind());
        match self {
            Call::Create { session, events }
            | Call::Append { session, events }
            | Call::Import { session, events } => o
                .with("session", session.as_str())
                .with("events", count(*events)),
            Call::Fork { parent, child } => o
                .with("parent", parent.as_str())
                .with("session", child.as_str()),
            Call::Acquire { session, force } => {
                o.with("session", session.as_str()).with("force", *force)
            }
            Call::Delete { session }
            | Call::Undelete { session }
            | Call::Release { session }
            | Call::Read { session } => o.with("session", session.as_str()),
            Call::Purge => o,
        }
    }

    /// The call and its number from a request line's object.
    pub fn from_json(o: &Object) -> anyhow::Result<(u64, Call)> {
        let op = number(o, "op")?;
        let session = || text(o, "session");
        let events = || number(o, "events");
        let call = match text(o, "call")?.as_str() {
            "create" => Call::Create {
                session: session()?,
                events: events()?,
            },
            "append" => Call::Append {
                session: session()?,
                events: events()?,
            },
            "import" => Call::Import {
                session: session()?,
                events: events()?,
            },
            "fork" => Call::Fork {
                parent: text(o, "parent")?,
                child: session()?,
            },
            "delete" => Call::Delete {
                session: session()?,
            },
            "undelete" => Call::Undelete {
                session: session()?,
            },
            "purge" => Call::Purge,
            "acquire" => Call::Acquire {
                session: session()?,
                force: matches!(o.get("force"), Some(Value::Bool(true))),
            },
            "release" => Call::Release {
                session: session()?,
            },
            "read" => Call::Read {
                session: session()?,
            },
            other => return Err(anyhow!("unknown call {other:?}")),
        };
        Ok((op, call))
    }
}

/// What an answer says happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done (for a read: the bytes were served).
    Acknowledged,
    /// Refused, and by the fleet's word nothing was written; `code` names the refusal.
    Refused { code: String },
    /// It may or may not have happened: the fleet said its outcome is unknown, the host did
    /// not answer in time, or it died first.
    Unknown,
}

impl Outcome {
    /// The outcome's kind, as the report counts it.
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Acknowledged => "acknowledged",
            Outcome::Refused { .. } => "refused",
            Outcome::Unknown => "unknown",
        }
    }
}

/// A host's answer to one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// What happened.
    pub outcome: Outcome,
    /// The fleet's message (empty on success).
    pub message: String,
    /// An acknowledged append's first seq and event count.
    pub seqs: Option<(u64, u64)>,
    /// The session's incarnation as the host knows it after the call (crc32 of its header's
    /// bytes, header line and newline): after an acknowledged create, import, fork or acquire,
    /// and with an acknowledged append (the one the host last acquired or created).
    pub incarnation: Option<u32>,
    /// The owner epoch the host holds the session at, as it learned it (acquire: the row's;
    /// create, import, fork: 1), with an acknowledged append or acquire.
    pub epoch: Option<i64>,
    /// What a read served (the session's export, by digest), `None` when the host had no
    /// such session.
    pub served: Option<Served>,
    /// An acknowledged purge's ids.
    pub purged: Vec<String>,
}

impl Answer {
    /// An answer with `outcome` and `message` and nothing else.
    pub fn plain(outcome: Outcome, message: impl Into<String>) -> Answer {
        Answer {
            outcome,
            message: message.into(),
            seqs: None,
            incarnation: None,
            epoch: None,
            served: None,
            purged: Vec::new(),
        }
    }

    /// The answer as the reply line's object, for call `op`.
    pub fn to_json(&self, op: u64) -> Object {
        let mut o = Object::new()
            .with("op", count(op))
            .with("outcome", self.outcome.kind());
        if let Outcome::Refused { code } = &self.outcome {
            o = o.with("code", code.as_str());
        }
        if !self.message.is_empty() {
            o = o.with("message", self.message.as_str());
        }
        if let Some((first, n)) = self.seqs {
            o = o.with("firstSeq", count(first)).with("count", count(n));
        }
        if let Some(i) = self.incarnation {
            o = o.with("incarnation", i64::from(i));
        }
        if let Some(e) = self.epoch {
            o = o.with("epoch", e);
        }
        if let Some(served) = &self.served {
            o = o.with("served", served.to_json());
        }
        if !self.purged.is_empty() {
            o = o.with("purged", strings(&self.purged));
        }
        o
    }

    /// The answer and its call's number from a reply line's object.
    pub fn from_json(o: &Object) -> anyhow::Result<(u64, Answer)> {
        let op = number(o, "op")?;
        let outcome = match text(o, "outcome")?.as_str() {
            "acknowledged" => Outcome::Acknowledged,
            "refused" => Outcome::Refused {
                code: text(o, "code")?,
            },
            "unknown" => Outcome::Unknown,
            other => return Err(anyhow!("unknown outcome {other:?}")),
        };
        let seqs = match (o.get("firstSeq"), o.get("count")) {
            (Some(_), Some(_)) => Some((number(o, "firstSeq")?, number(o, "count")?)),
            _ => None,
        };
        Ok((
            op,
            Answer {
                outcome,
                message: text(o, "message").unwrap_or_default(),
                seqs,
                incarnation: o
                    .get("incarnation")
                    .and_then(Value::as_safe_u64)
                    .and_then(|n| u32::try_from(n).ok()),
                epoch: o.get("epoch").and_then(Value::as_safe_integer),
                served: o
                    .get("served")
                    .and_then(Value::as_object)
                    .map(Served::from_json)
                    .transpose()?,
                purged: string_list(o, "purged"),
            },
        ))
    }
}

/// What a read served, without its bytes (a log grows long; the checker needs only this).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    /// Its length.
    pub len: u64,
    /// The crc32 of its bytes.
    pub crc: u32,
    /// Its incarnation (the crc32 of its header line and newline).
    pub incarnation: u32,
    /// The calls whose events it holds.
    pub ops: BTreeSet<u64>,
}

impl Served {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Served {
        Served {
            len: bytes.len() as u64,
            crc: crc32fast::hash(bytes),
            incarnation: crc32fast::hash(header_of(bytes)),
            ops: ops_in(bytes),
        }
    }

    /// Whether `log` starts with the bytes served.
    pub fn is_prefix_of(&self, log: &[u8]) -> bool {
        usize::try_from(self.len)
            .ok()
            .and_then(|n| log.get(..n))
            .is_some_and(|p| crc32fast::hash(p) == self.crc)
    }

    fn to_json(&self) -> Object {
        Object::new()
            .with("len", count(self.len))
            .with("crc", i64::from(self.crc))
            .with("incarnation", i64::from(self.incarnation))
            .with(
                "ops",
                Value::Array(self.ops.iter().map(|&o| Value::from(count(o))).collect()),
            )
    }

    fn from_json(o: &Object) -> anyhow::Result<Served> {
        let small = |key: &str| -> anyhow::Result<u32> {
            u32::try_from(number(o, key)?).with_context(|| format!("\"{key}\" is no crc"))
        };
        Ok(Served {
            len: number(o, "len")?,
            crc: small("crc")?,
            incarnation: small("incarnation")?,
            ops: o
                .get("ops")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_safe_u64).collect())
                .unwrap_or_default(),
        })
    }
}

/// One call in the history, with its answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    /// The call's number in the run (its tokens' `<op>`).
    pub index: u64,
    /// The client that made it.
    pub client: usize,
    /// The host it went to.
    pub host: usize,
    /// What was asked.
    pub call: Call,
    /// When it was sent, from the run's start.
    pub invoked: Duration,
    /// When its answer came (or the client gave up), from the run's start.
    pub completed: Duration,
    /// The answer.
    pub answer: Answer,
}

impl Op {
    /// The op as one line of a finding's excerpt.
    pub fn line(&self) -> String {
        let a = self.answer.to_json(self.index);
        format!(
            "#{} {:.3}-{:.3}s client {} host{} {} -> {}",
            self.index,
            self.invoked.as_secs_f64(),
            self.completed.as_secs_f64(),
            self.client,
            self.host,
            json::stringify(&Value::Object(self.call.to_json(self.index))),
            json::stringify(&Value::Object(a)),
        )
    }
}

/// A fault the nemesis injected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// Its kind (`pause`, `kill`, `blackhole`, `kill-leader`).
    pub kind: &'static str,
    /// What it hit (`host1`, `node0`).
    pub target: String,
    /// How it was healed (`deliver`/`reset` for a blackhole; empty otherwise).
    pub detail: String,
    /// When it began, from the run's start.
    pub at: Duration,
    /// When it was healed, from the run's start.
    pub healed: Duration,
}

impl Fault {
    /// The fault as one line of the history.
    pub fn line(&self) -> String {
        format!(
            "fault {:.3}-{:.3}s {} {} {}",
            self.at.as_secs_f64(),
            self.healed.as_secs_f64(),
            self.kind,
            self.target,
            self.detail
        )
    }
}

/// Everything the run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// Every call, in the order the answers came.
    pub ops: Vec<Op>,
    /// Every fault, in order.
    pub faults: Vec<Fault>,
    /// Every host that exited without the nemesis killing it, with the end of its stderr.
    pub exits: Vec<String>,
}

/// The text of event `i` of call `op`.
pub fn token(op: u64, i: u64) -> String {
    format!("nemesis-{op}-{i}")
}

/// The header line of a session `id` created by call `op`.
pub fn header_line(id: &str, op: u64) -> String {
    format!(
        r#"{{"type":"session","version":0,"id":"{id}","createdAt":1,"cwd":"/w/nemesis-{op}-h","delegationDepth":0}}"#
    )
}

/// The log line of event `i` of call `op` at `seq` (DSH's key order), without its newline.
pub fn event_line(op: u64, i: u64, seq: Option<u64>) -> String {
    let t = token(op, i);
    let seq = seq.map(|s| format!(r#""seq":{s},"#)).unwrap_or_default();
    format!(
        r#"{{"type":"user/message",{seq}"time":{op},"data":{{"content":[{{"type":"text","text":"{t}"}}],"source":{{"kind":"user"}},"role":"user","id":"u{op}-{i}"}},"surfaceOp":"append"}}"#
    )
}

/// The calls whose event tokens (`nemesis-<op>-<i>`, not a header's `-h`) occur in `bytes`.
pub fn ops_in(bytes: &[u8]) -> BTreeSet<u64> {
    const MARK: &[u8] = b"nemesis-";
    let mut found = BTreeSet::new();
    let mut at = 0;
    while let Some(p) = find(&bytes[at..], MARK) {
        let start = at + p + MARK.len();
        let digits = bytes[start..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let after = start + digits;
        if digits > 0
            && bytes.get(after) == Some(&b'-')
            && bytes.get(after + 1).is_some_and(u8::is_ascii_digit)
        {
            if let Some(op) = std::str::from_utf8(&bytes[start..after])
                .ok()
                .and_then(|s| s.parse().ok())
            {
                found.insert(op);
            }
        }
        at = after.max(at + p + 1);
    }
    found
}

/// The first line of `bytes` with its newline (a session's header in an export).
pub fn header_of(bytes: &[u8]) -> &[u8] {
    match bytes.iter().position(|&b| b == b'\n') {
        Some(n) => &bytes[..=n],
        None => bytes,
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn strings(items: &[String]) -> Value {
    Value::Array(items.iter().map(|s| Value::from(s.as_str())).collect())
}

/// The strings of `o`'s array member `key` (none when it is missing or not an array).
pub(crate) fn string_list(o: &Object, key: &str) -> Vec<String> {
    o.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn text(o: &Object, key: &str) -> anyhow::Result<String> {
    o.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .with_context(|| format!("no text \"{key}\""))
}

fn number(o: &Object, key: &str) -> anyhow::Result<u64> {
    o.get(key)
        .and_then(Value::as_safe_u64)
        .with_context(|| format!("no count \"{key}\""))
}

/// `o` with `key` (not a static string) set to `value`.
pub(crate) fn with_key(mut o: Object, key: &str, value: Value) -> Object {
    o.insert(JsString::from(key), value);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_found_and_headers_are_not_taken_for_them() {
        let mut bytes = format!("{}\n", header_line("s1", 7)).into_bytes();
        for (op, i) in [(12, 0), (12, 1), (40, 0)] {
            bytes.extend_from_slice(event_line(op, i, Some(i)).as_bytes());
            bytes.push(b'\n');
        }
        assert_eq!(ops_in(&bytes), BTreeSet::from([12, 40]));
        assert_eq!(
            header_of(&bytes),
            format!("{}\n", header_line("s1", 7)).as_bytes()
        );
    }

    #[test]
    fn calls_and_answers_cross_the_pipe_unchanged() {
        let calls = [
            Call::Create {
                session: "s0".into(),
                events: 2,
            },
            Call::Fork {
                parent: "s0".into(),
                child: "s1".into(),
            },
            Call::Acquire {
                session: "s2".into(),
                force: true,
            },
            Call::Purge,
            Call::Read {
                session: "s3".into(),
            },
        ];
        for (n, call) in calls.into_iter().enumerate() {
            let line = json::stringify(&Value::Object(call.to_json(n as u64)));
            let back = json::parse(&line).expect("json");
            let (op, parsed) = Call::from_json(back.as_object().expect("object")).expect("call");
            assert_eq!((op, parsed), (n as u64, call));
        }
        let answer = Answer {
            outcome: Outcome::Refused {
                code: "SESSIONLOG_FENCED".into(),
            },
            message: "fenced".into(),
            seqs: Some((3, 2)),
            incarnation: Some(77),
            epoch: Some(4),
            served: Some(Served::of(b"{}\n")),
            purged: vec!["s1".into()],
        };
        let line = json::stringify(&Value::Object(answer.to_json(9)));
        let back = json::parse(&line).expect("json");
        let parsed = Answer::from_json(back.as_object().expect("object")).expect("answer");
        assert_eq!(parsed, (9, answer));
    }
}
