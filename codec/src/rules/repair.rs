//! Crash repair of an interrupted session log: DSH's `interruptedTurnClosers`
//! (`core/session/src/repair.ts`) and the `session/end-seed` marker its `Session` constructor adds.
//!
//! [`OpenTurn`] is the scan as an incremental fold (the engine keeps it per session as events
//! commit); [`interrupted_turn_closers`] is that fold over a whole log followed by
//! [`OpenTurn::closers`]. Invariants kept:
//! - the closers are DSH's byte for byte: `json::stringify` of each equals DSH's
//!   `JSON.stringify`, key order included, for any logical events the scanner commits (including
//!   odd shapes: a missing `data.turn` is `undefined` and drops the key, as in JS);
//! - seqs continue the log and every closer reuses the last event's `time` (never invented);
//! - where DSH's scan throws a `TypeError` (an event whose `data` it cannot read), the fold stops
//!   and records V8's message ([`OpenTurn::type_error`]); DSH's load fails there, so no closers
//!   are produced.

use serde::{Deserialize, Serialize};

use crate::json::{js_string_of, parse, stringify, JsString, Object, Value};

/// Recovery code for an assistant tool request that never reached a recorded call start.
pub const TOOL_NOT_STARTED: &str = "TOOL_NOT_STARTED";

/// Recovery code for a recorded tool call whose outcome was not durably recorded.
pub const TOOL_OUTCOME_UNKNOWN: &str = "TOOL_OUTCOME_UNKNOWN";

const STARTED_TEXT: &str = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";
const NOT_STARTED_TEXT: &str = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.";

/// The `session/end-seed` marker DSH's `Session` appends after an explicit seed:
/// `{"type":"session/end-seed","seq":N,"time":T,"data":{}}`.
pub fn end_seed(seq: u64, time: i64) -> Value {
    Value::Object(
        Object::new()
            .with("type", "session/end-seed")
            .with("seq", number(seq))
            .with("time", time)
            .with("data", Object::new()),
    )
}

/// Whether a resumed log whose last event is `last_event` gets an end-seed
/// (`log.at(-1)?.type !== 'session/end-seed'`): yes for an empty log, no when it already ends
/// with one.
pub fn needs_end_seed(last_event: Option<&Value>) -> bool {
    let ty = last_event
        .and_then(Value::as_object)
        .and_then(|e| e.get("type"));
    !matches!(ty, Some(Value::String(t)) if t.eq_str("session/end-seed"))
}

/// DSH's `interruptedTurnClosers(events)`: the synthetic events closing an open final turn, or
/// none for a balanced or empty log (or one DSH's scan throws on; see [`OpenTurn::type_error`]).
/// The first closer's seq is `last.seq + 1` (the log's length when `last.seq` is not a safe
/// integer, which the scanner never commits).
pub fn interrupted_turn_closers(events: &[Value]) -> Vec<Value> {
    let mut open = OpenTurn::default();
    for event in events {
        open.observe(event);
    }
    let Some(last) = events.last().and_then(Value::as_object) else {
        return Vec::new();
    };
    let next_seq = last
        .get("seq")
        .and_then(Value::as_safe_u64)
        .map_or(events.len() as u64, |s| s + 1);
    open.closers(next_seq, last.get("time"))
}

/// The repair scan's state after some prefix of a log: the open turn, the open step and the
/// pending tool calls (in registration order). Serializable, so it can be kept beside the log.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpenTurn {
    /// `openTurn`: `None` is JS `null` (no open turn); `Some(None)` an `undefined` turn number.
    turn: Option<Js>,
    /// `openStep`, likewise.
    step: Option<Js>,
    /// `pendingCalls`, in `Map` insertion order.
    pending: Vec<Pending>,
    /// V8's message where DSH's scan threw; the fold stops there.
    type_error: Option<String>,
}

/// A JS value read from an event; `None` is `undefined`.
type Js = Option<Json>;

/// A JSON value kept as `JSON.stringify` text when serialized.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
struct Json(Value);

impl TryFrom<String> for Json {
    type Error = crate::Error;
    fn try_from(text: String) -> crate::Result<Self> {
        parse(&text).map(Json)
    }
}

impl From<Json> for String {
    fn from(v: Json) -> String {
        stringify(&v.0)
    }
}

/// One entry of `pendingCalls`: the call id (the `Map` key), the step recorded from the
/// assistant message and, once a `tool/call` names it, that event's seq.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Pending {
    id: Js,
    step: Js,
    call_seq: Js,
}

impl OpenTurn {
    /// A fresh scan (nothing open).
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a turn is open (closers would be produced).
    pub fn is_open(&self) -> bool {
        self.turn.is_some() && self.type_error.is_none()
    }

    /// V8's `TypeError` message where DSH's scan would have thrown, if it would.
    pub fn type_error(&self) -> Option<&str> {
        self.type_error.as_deref()
    }

    /// Fold one logical event, in log order.
    pub fn observe(&mut self, event: &Value) {
        if self.type_error.is_some() {
            return;
        }
        if let Err(e) = self.step_event(event) {
            self.type_error = Some(e);
        }
    }

    fn step_event(&mut self, event: &Value) -> Result<(), String> {
        let ty = prop(Some(event), "type")?;
        let Some(Value::String(ty)) = ty else {
            return Ok(());
        };
        let data = || prop(Some(event), "data");
        match ty.as_wtf8() {
            b"turn/start" => {
                self.turn = nullable(prop(data()?, "turn")?);
                self.step = None;
                self.pending.clear();
            }
            b"turn/end" => {
                self.turn = None;
                self.step = None;
                self.pending.clear();
            }
            b"step/start" => self.step = nullable(prop(data()?, "step")?),
            b"step/end" => {
                self.pending.clear();
                self.step = None;
            }
            b"assistant/message" => self.register_calls(data()?)?,
            b"tool/call" => {
                let id = prop(data()?, "callId")?;
                if let Some(entry) = self.pending.iter_mut().find(|p| same_key(&p.id, id)) {
                    entry.call_seq = js(prop(Some(event), "seq")?);
                }
            }
            b"tool/result" => {
                let message = prop(data()?, "message")?;
                let id = prop(prop(message, "source")?, "callId")?;
                self.pending.retain(|p| !same_key(&p.id, id));
            }
            _ => {}
        }
        Ok(())
    }

    /// `for (const block of data.message.content) if (block.type === 'tool-call')
    /// pendingCalls.set(block.id, { step: data.step })`.
    fn register_calls(&mut self, data: Option<&Value>) -> Result<(), String> {
        let content = prop(prop(data, "message")?, "content")?;
        let blocks = match content {
            Some(Value::Array(blocks)) => blocks,
            // A string iterates its characters, none of which has a `type`.
            Some(Value::String(_)) => return Ok(()),
            _ => return Err("TypeError: event.data.message.content is not iterable".to_owned()),
        };
        for block in blocks {
            let is_call = matches!(prop(Some(block), "type")?, Some(Value::String(t)) if t.eq_str("tool-call"));
            if !is_call {
                continue;
            }
            let id = prop(Some(block), "id")?;
            let step = js(prop(data, "step")?);
            match self.pending.iter_mut().find(|p| same_key(&p.id, id)) {
                // `Map.set` on a present key keeps its position and replaces the entry.
                Some(entry) => {
                    entry.step = step;
                    entry.call_seq = None;
                }
                None => self.pending.push(Pending {
                    id: js(id),
                    step,
                    call_seq: None,
                }),
            }
        }
        Ok(())
    }

    /// The closers for a log whose next seq is `next_seq` and whose last event's `time` is
    /// `last_time` (`None`: `undefined`, so the key is dropped): a `tool/result` per pending
    /// call, a `step/end` if a step is open, then `turn/end` `{"kind":"interrupted"}`. Empty when
    /// no turn is open.
    pub fn closers(&self, next_seq: u64, last_time: Option<&Value>) -> Vec<Value> {
        let Some(turn) = self.turn.as_ref().filter(|_| self.type_error.is_none()) else {
            return Vec::new();
        };
        let mut seq = next_seq;
        let mut out = Vec::with_capacity(self.pending.len() + 2);
        let envelope = |ty: &str, data: Object, seq: u64| {
            let mut e = Object::new().with("type", ty).with("seq", number(seq));
            put(&mut e, "time", last_time);
            e.with("data", data)
        };
        for call in &self.pending {
            let started = call.call_seq.is_some();
            let mut data = Object::new();
            put(&mut data, "turn", value(turn));
            put(&mut data, "step", value(&call.step));
            data.insert(key("message"), tool_result_message(&call.id, seq, started));
            let (name, code) = if started {
                ("ToolOutcomeUnknownError", TOOL_OUTCOME_UNKNOWN)
            } else {
                ("ToolNotStartedError", TOOL_NOT_STARTED)
            };
            data.insert(
                key("error"),
                Object::new().with("name", name).with("code", code).into(),
            );
            let mut e = envelope("tool/result", data, seq).with("surfaceOp", "append");
            if let Some(call_seq) = &call.call_seq {
                e.insert(
                    key("sourceEventSeqs"),
                    Value::Array(vec![call_seq.0.clone()]),
                );
            }
            out.push(Value::Object(e));
            seq += 1;
        }
        if let Some(step) = &self.step {
            let mut data = Object::new();
            put(&mut data, "turn", value(turn));
            put(&mut data, "step", value(step));
            out.push(Value::Object(envelope("step/end", data, seq)));
            seq += 1;
        }
        let mut data = Object::new();
        put(&mut data, "turn", value(turn));
        data.insert(
            key("reason"),
            Object::new().with("kind", "interrupted").into(),
        );
        out.push(Value::Object(envelope("turn/end", data, seq)));
        out
    }
}

/// The synthetic `ToolResultMessage` for `call_id`, closed at `seq`.
fn tool_result_message(call_id: &Js, seq: u64, started: bool) -> Value {
    let mut id = b"interrupted-tool-result-".to_vec();
    match value(call_id) {
        Some(Value::String(s)) => id.extend_from_slice(s.as_wtf8()),
        Some(other) => id.extend_from_slice(js_string_of(other).as_bytes()),
        None => id.extend_from_slice(b"undefined"),
    }
    id.extend_from_slice(format!("-{seq}").as_bytes());
    let mut source = Object::new().with("kind", "tool");
    put(&mut source, "callId", value(call_id));
    let mut block = Object::new().with("type", "tool-result");
    put(&mut block, "toolCallId", value(call_id));
    let text = if started {
        STARTED_TEXT
    } else {
        NOT_STARTED_TEXT
    };
    let text_block = Object::new().with("type", "text").with("text", text);
    let block = block
        .with("isError", true)
        .with("content", Value::Array(vec![text_block.into()]));
    let mut message = Object::new();
    message.insert(key("id"), Value::String(JsString::from_wtf8_unchecked(id)));
    message
        .with("role", "user")
        .with("source", source)
        .with("content", Value::Array(vec![block.into()]))
        .into()
}

/// `base.key`, with V8's `TypeError` on a `null` or `undefined` base.
fn prop<'a>(base: Option<&'a Value>, key: &str) -> Result<Option<&'a Value>, String> {
    match base {
        None => Err(format!(
            "TypeError: Cannot read properties of undefined (reading '{key}')"
        )),
        Some(Value::Null) => Err(format!(
            "TypeError: Cannot read properties of null (reading '{key}')"
        )),
        Some(Value::Object(o)) => Ok(o.get(key)),
        Some(_) => Ok(None),
    }
}

/// A read value as kept in the state.
fn js(v: Option<&Value>) -> Js {
    v.cloned().map(Json)
}

/// An assignment to a variable JS later compares with `null`: `null` itself is "nothing open".
fn nullable(v: Option<&Value>) -> Option<Js> {
    match v {
        Some(Value::Null) => None,
        v => Some(js(v)),
    }
}

/// The kept value back (`None`: `undefined`).
fn value(v: &Js) -> Option<&Value> {
    v.as_ref().map(|j| &j.0)
}

/// `Map` key equality (SameValueZero). Objects and arrays compare by identity in JS, and two
/// reads from different events are never the same object.
fn same_key(stored: &Js, probe: Option<&Value>) -> bool {
    match (value(stored), probe) {
        (None, None) => true,
        (Some(Value::Null), Some(Value::Null)) => true,
        (Some(Value::Bool(a)), Some(Value::Bool(b))) => a == b,
        (Some(Value::Number(a)), Some(Value::Number(b))) => a == b || (a.is_nan() && b.is_nan()),
        (Some(Value::String(a)), Some(Value::String(b))) => a == b,
        _ => false,
    }
}

/// `obj[key] = v`, where an `undefined` value is a key `JSON.stringify` drops.
fn put(obj: &mut Object, name: &str, v: Option<&Value>) {
    if let Some(v) = v {
        obj.insert(key(name), v.clone());
    }
}

fn key(name: &str) -> JsString {
    JsString::from(name)
}

/// A seq as a JS number.
fn number(seq: u64) -> Value {
    #[expect(
        clippy::cast_precision_loss,
        reason = "seqs are safe integers, exact as doubles"
    )]
    Value::Number(seq as f64)
}

#[cfg(test)]
mod tests;
