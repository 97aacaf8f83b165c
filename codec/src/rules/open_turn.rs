//! DSH 0.2's open-turn closers (`openTurnClosers` / `ToolCallRecovery`): the events that close
//! a turn a log leaves open, used by V4 fork (`forked`) and crash repair (`interrupted`).
//!
//! Rules, as DSH applies them:
//! - a call is pending from its `tool-call` block in an `assistant/message` (turn and step from
//!   that event); a later `tool/call` with its id marks it started; an appended `tool/result`
//!   in the same turn and step answers it; `turn/start`, `turn/end` and `step/end` clear all;
//! - each pending call gets an error `tool/result` (append; started calls cite their `tool/call`),
//!   then `step/end` if a step is open, then `turn/end {reason:{kind}}`, at the seqs after the
//!   last event and with its time;
//! - objects are built in DSH's key order, so their `JSON.stringify` is DSH's.

use crate::json::{Object, Value};

/// The interrupted closer's text for a call never recorded as started (DSH's `CLOSER_TEXT`);
/// the lifecycle checks a not-started repair carries it.
pub(crate) const INTERRUPTED_NOT_STARTED: &str =
    "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.";

/// Why a turn is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseCause {
    /// Crash repair.
    Interrupted,
    /// A fork whose boundary falls inside a turn.
    Forked,
}

impl CloseCause {
    fn kind(self) -> &'static str {
        match self {
            CloseCause::Interrupted => "interrupted",
            CloseCause::Forked => "forked",
        }
    }

    /// DSH's `CLOSER_TEXT[kind]`: (started, not started).
    fn texts(self) -> (&'static str, &'static str) {
        match self {
            CloseCause::Interrupted => (
                "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.",
                INTERRUPTED_NOT_STARTED,
            ),
            CloseCause::Forked => (
                "The history inherited by this branch records this tool call starting but does not include its result. The parent session may have completed it after the fork point. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.",
                "The history inherited by this branch has no record of this tool call starting. The parent session may have executed it after the fork point. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.",
            ),
        }
    }
}

/// A call without an answer yet.
#[derive(Clone, Debug)]
struct Pending {
    id: Value,
    turn: Value,
    step: Value,
    call_seq: Option<Value>,
}

/// The open-turn state of a log, fed one event at a time.
#[derive(Clone, Debug, Default)]
pub struct OpenTurn {
    turn: Option<Value>,
    step: Option<Value>,
    /// In block order; a repeated id keeps its place and starts over (DSH's `Map.set`).
    pending: Vec<Pending>,
    last: Option<(u64, Value)>,
}

impl OpenTurn {
    /// Observe the next event.
    pub fn observe(&mut self, event: &Value) {
        let Some(o) = event.as_object() else { return };
        let seq = o.get("seq").and_then(Value::as_safe_u64);
        if let Some(seq) = seq {
            self.last = Some((seq, o.get("time").cloned().unwrap_or(Value::Null)));
        }
        let data = o.get("data").and_then(Value::as_object);
        let field = |k: &str| data.and_then(|d| d.get(k)).cloned().unwrap_or(Value::Null);
        match o.get("type").and_then(Value::as_str).unwrap_or_default() {
            "turn/start" => {
                self.pending.clear();
                self.turn = Some(field("turn"));
                self.step = None;
            }
            "turn/end" => {
                self.pending.clear();
                self.turn = None;
                self.step = None;
            }
            "step/start" => self.step = Some(field("step")),
            "step/end" => {
                self.pending.clear();
                self.step = None;
            }
            "assistant/message" => {
                let content = data
                    .and_then(|d| d.get("message"))
                    .and_then(Value::as_object)
                    .and_then(|m| m.get("content"))
                    .and_then(Value::as_array)
                    .unwrap_or(&[]);
                for block in content.iter().filter_map(Value::as_object) {
                    if block.get("type").and_then(Value::as_str) != Some("tool-call") {
                        continue;
                    }
                    let id = block.get("id").cloned().unwrap_or(Value::Null);
                    let fresh = Pending {
                        id: id.clone(),
                        turn: field("turn"),
                        step: field("step"),
                        call_seq: None,
                    };
                    match self.pending.iter_mut().find(|p| p.id == id) {
                        Some(p) => *p = fresh,
                        None => self.pending.push(fresh),
                    }
                }
            }
            "tool/call" => {
                let id = field("callId");
                if let Some(p) = self.pending.iter_mut().find(|p| p.id == id) {
                    p.call_seq = o.get("seq").cloned();
                }
            }
            "tool/result" => {
                let call = data
                    .and_then(|d| d.get("message"))
                    .and_then(Value::as_object)
                    .and_then(|m| m.get("source"))
                    .and_then(Value::as_object)
                    .and_then(|s| s.get("callId"))
                    .cloned()
                    .unwrap_or(Value::Null);
                let appended = o.get("surfaceOp").and_then(Value::as_str) == Some("append");
                let (turn, step) = (field("turn"), field("step"));
                self.pending
                    .retain(|p| !(appended && p.id == call && p.turn == turn && p.step == step));
            }
            _ => {}
        }
    }

    /// The events that close the open turn (none when no turn is open).
    pub fn closers(&self, cause: CloseCause) -> Vec<Value> {
        let (Some(turn), Some((last_seq, time))) = (&self.turn, &self.last) else {
            return Vec::new();
        };
        let (started_text, not_started_text) = cause.texts();
        let mut seq = last_seq + 1;
        let mut out = Vec::new();
        for p in &self.pending {
            let started = p.call_seq.is_some();
            let id = format!(
                "{}-tool-result-{}-{seq}",
                cause.kind(),
                crate::json::js_string_of(&p.id)
            );
            let text = if started {
                started_text
            } else {
                not_started_text
            };
            let message = Object::new()
                .with("id", id.as_str())
                .with("role", "tool")
                .with("toolCallId", p.id.clone())
                .with("isError", true)
                .with(
                    "source",
                    Object::new()
                        .with("kind", "tool")
                        .with("callId", p.id.clone()),
                )
                .with(
                    "content",
                    Value::Array(vec![Value::Object(
                        Object::new().with("type", "text").with("text", text),
                    )]),
                );
            let error = if started {
                Object::new()
                    .with("name", "ToolOutcomeUnknownError")
                    .with("code", "TOOL_OUTCOME_UNKNOWN")
            } else {
                Object::new()
                    .with("name", "ToolNotStartedError")
                    .with("code", "TOOL_NOT_STARTED")
            };
            let mut result = event("tool/result", seq, time).with(
                "data",
                Object::new()
                    .with("turn", p.turn.clone())
                    .with("step", p.step.clone())
                    .with("message", message)
                    .with("error", error),
            );
            result = result.with("surfaceOp", "append");
            if let Some(call_seq) = &p.call_seq {
                result = result.with("sourceEventSeqs", Value::Array(vec![call_seq.clone()]));
            }
            out.push(Value::Object(result));
            seq += 1;
        }
        if let Some(step) = &self.step {
            out.push(Value::Object(
                event("step/end", seq, time).with(
                    "data",
                    Object::new()
                        .with("turn", turn.clone())
                        .with("step", step.clone()),
                ),
            ));
            seq += 1;
        }
        out.push(Value::Object(
            event("turn/end", seq, time).with(
                "data",
                Object::new()
                    .with("turn", turn.clone())
                    .with("reason", Object::new().with("kind", cause.kind())),
            ),
        ));
        out
    }
}

/// `{type, seq, time}`, the start of every envelope.
fn event(ty: &str, seq: u64, time: &Value) -> Object {
    Object::new()
        .with("type", ty)
        .with("seq", seq as f64)
        .with("time", time.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{parse, stringify};

    fn closers(log: &[&str], cause: CloseCause) -> Vec<String> {
        let mut t = OpenTurn::default();
        for e in log {
            t.observe(&parse(e).expect("JSON"));
        }
        t.closers(cause).iter().map(stringify).collect()
    }

    const START: [&str; 2] = [
        r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}"#,
        r#"{"type":"step/start","seq":1,"time":6,"data":{"turn":1,"step":1}}"#,
    ];
    const CALL: &str = r#"{"type":"assistant/message","seq":2,"time":7,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"read","arguments":"{}"}]},"stream":[]},"surfaceOp":"append"}"#;
    const MARKER: &str =
        r#"{"type":"session/end-seed","seq":3,"time":7,"data":{"inherited":true}}"#;

    /// later-format-spec §5.1 case 25.
    #[test]
    fn a_fork_inside_a_step_closes_the_call_the_step_and_the_turn() {
        let got = closers(&[START[0], START[1], CALL, MARKER], CloseCause::Forked);
        let (_, not_started) = CloseCause::Forked.texts();
        assert_eq!(
            got,
            [
                format!(r#"{{"type":"tool/result","seq":4,"time":7,"data":{{"turn":1,"step":1,"message":{{"id":"forked-tool-result-c1-4","role":"tool","toolCallId":"c1","isError":true,"source":{{"kind":"tool","callId":"c1"}},"content":[{{"type":"text","text":"{not_started}"}}]}},"error":{{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}}}},"surfaceOp":"append"}}"#),
                r#"{"type":"step/end","seq":5,"time":7,"data":{"turn":1,"step":1}}"#.to_owned(),
                r#"{"type":"turn/end","seq":6,"time":7,"data":{"turn":1,"reason":{"kind":"forked"}}}"#.to_owned(),
            ]
        );
    }

    #[test]
    fn started_calls_cite_their_tool_call_and_answered_ones_need_nothing() {
        let call = r#"{"type":"tool/call","seq":3,"time":8,"data":{"turn":1,"step":1,"callId":"c1","name":"read"}}"#;
        let got = closers(&[START[0], START[1], CALL, call], CloseCause::Interrupted);
        assert!(
            got[0].contains(r#""id":"interrupted-tool-result-c1-4""#),
            "{}",
            got[0]
        );
        assert!(
            got[0].contains(
                r#""code":"TOOL_OUTCOME_UNKNOWN"}},"surfaceOp":"append","sourceEventSeqs":[3]}"#
            ),
            "{}",
            got[0]
        );
        let result = r#"{"type":"tool/result","seq":4,"time":9,"data":{"turn":1,"step":1,"message":{"source":{"kind":"tool","callId":"c1"}}},"surfaceOp":"append"}"#;
        let got = closers(
            &[START[0], START[1], CALL, call, result],
            CloseCause::Forked,
        );
        assert_eq!(got.len(), 2, "step/end and turn/end only: {got:?}");
        let closed_step = r#"{"type":"step/end","seq":3,"time":9,"data":{"turn":1,"step":1}}"#;
        let got = closers(&[START[0], START[1], CALL, closed_step], CloseCause::Forked);
        assert_eq!(
            got,
            [
                r#"{"type":"turn/end","seq":4,"time":9,"data":{"turn":1,"reason":{"kind":"forked"}}}"#
            ]
        );
        let ended = r#"{"type":"turn/end","seq":2,"time":9,"data":{"turn":1}}"#;
        assert!(closers(&[START[0], START[1], ended], CloseCause::Forked).is_empty());
    }
}
