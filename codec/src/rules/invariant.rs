//! DSH's invariant companion (`invariant.ts`): turn and step numbering and enclosure, and tool
//! call/result pairing, checked event by event. The engine runs it on appends in strict mode.
//!
//! The trace is checked on a copy and adopted only when the whole batch passes, so a vetoed
//! batch leaves it untouched.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::json::{self, Value};

/// The companion's trace state (`lastSeq`, `openTurn`, `openStep`, `nextTurn`, `nextStep`,
/// `pendingCalls`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvariantTrace {
    last_seq: Option<i64>,
    open_turn: Option<String>,
    open_step: Option<String>,
    next_turn: i64,
    next_step: i64,
    pending_calls: BTreeSet<String>,
}

impl Default for InvariantTrace {
    fn default() -> Self {
        InvariantTrace {
            last_seq: None,
            open_turn: None,
            open_step: None,
            next_turn: 1,
            next_step: 1,
            pending_calls: BTreeSet::new(),
        }
    }
}

/// JS `String(x)` of a field, `"undefined"` when absent.
fn shown(v: Option<&Value>) -> String {
    v.map_or_else(|| "undefined".to_owned(), json::js_string_of)
}

impl InvariantTrace {
    /// Check one event and advance the trace; `Err` is DSH's `InvariantError` text.
    pub fn check(&mut self, event: &Value) -> Result<(), String> {
        self.step(event)
            .map_err(|m| format!("invariant violated by \"@deepseek-ai/dsh-session\": {m}"))
    }

    fn step(&mut self, event: &Value) -> Result<(), String> {
        let o = event.as_object().ok_or("event is not an object")?;
        let seq = o.get("seq").and_then(Value::as_safe_integer).unwrap_or(-1);
        if let Some(last) = self.last_seq.filter(|&l| seq <= l) {
            return Err(format!(
                "seq must strictly increase: saw {seq} after {last}"
            ));
        }
        self.last_seq = Some(seq);
        let ty = o.get("type").and_then(Value::as_str).unwrap_or_default();
        let data = o.get("data").and_then(Value::as_object);
        let field = |k: &str| data.and_then(|d| d.get(k));
        let turn = shown(field("turn"));
        let step = shown(field("step"));
        let open_turn = self.open_turn.clone().unwrap_or_else(|| "null".into());
        let open_step = self.open_step.clone().unwrap_or_else(|| "null".into());
        let names_open_step = || {
            if self.open_turn.as_deref() == Some(turn.as_str())
                && self.open_step.as_deref() == Some(step.as_str())
            {
                Ok(())
            } else {
                Err(format!("{ty} names turn {turn}/step {step} but open is turn {open_turn}/step {open_step}"))
            }
        };
        match ty {
            "turn/start" => {
                if self.open_turn.is_some() {
                    return Err(format!(
                        "turn/start {turn} while turn {open_turn} is still open"
                    ));
                }
                if field("turn").and_then(Value::as_safe_integer) != Some(self.next_turn) {
                    return Err(format!(
                        "turn/start expected turn {}, got {turn}",
                        self.next_turn
                    ));
                }
                self.open_turn = Some(turn);
                self.next_step = 1;
            }
            "turn/end" => {
                if self.open_turn.as_deref() != Some(turn.as_str()) {
                    return Err(format!(
                        "turn/end {turn} does not match open turn {open_turn}"
                    ));
                }
                if self.open_step.is_some() {
                    return Err(format!(
                        "turn/end {turn} while step {open_step} is still open"
                    ));
                }
                self.open_turn = None;
                self.next_turn += 1;
            }
            "step/start" => {
                if self.open_turn.as_deref() != Some(turn.as_str()) {
                    return Err(format!(
                        "step/start in turn {turn} but open turn is {open_turn}"
                    ));
                }
                if self.open_step.is_some() {
                    return Err(format!(
                        "step/start {step} while step {open_step} is still open"
                    ));
                }
                if field("step").and_then(Value::as_safe_integer) != Some(self.next_step) {
                    return Err(format!(
                        "step/start expected step {} in turn {turn}, got {step}",
                        self.next_step
                    ));
                }
                self.open_step = Some(step);
            }
            "step/end" => {
                names_open_step()?;
                self.pending_calls.clear();
                self.open_step = None;
                self.next_step += 1;
            }
            "assistant/chunk" | "assistant/message" => names_open_step()?,
            "tool/call" => {
                names_open_step()?;
                let id = shown(field("callId"));
                self.pending_calls.insert(id);
            }
            "tool/result" => {
                let append = o.get("surfaceOp").and_then(Value::as_str) == Some("append");
                if !append {
                    if self.open_turn.is_none() {
                        return Err(
                            "tool/result surface replacement appended outside any open turn".into(),
                        );
                    }
                    return Ok(());
                }
                names_open_step()?;
                let message = field("message").and_then(Value::as_object);
                let call = shown(
                    message
                        .and_then(|m| m.get("source"))
                        .and_then(Value::as_object)
                        .and_then(|s| s.get("callId")),
                );
                let not_started = message
                    .and_then(|m| m.get("content"))
                    .and_then(Value::as_array)
                    .and_then(|c| c.first())
                    .and_then(Value::as_object)
                    .is_some_and(|b| b.get("isError") == Some(&Value::Bool(true)))
                    && field("error")
                        .and_then(Value::as_object)
                        .and_then(|e| e.get("code"))
                        .and_then(Value::as_str)
                        == Some("TOOL_NOT_STARTED");
                if !self.pending_calls.remove(&call) && !not_started {
                    return Err(format!(
                        "tool/result for {call} with no prior tool/call in this step"
                    ));
                }
            }
            "todo/write" | "request/header" | "request/context" if self.open_turn.is_none() => {
                return Err(format!("{ty} appended outside any open turn (core execution events must be turn-enclosed)"));
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    fn run(events: &[&str]) -> Result<(), String> {
        let mut t = InvariantTrace::default();
        for e in events {
            t.check(&parse(e).expect("json"))?;
        }
        Ok(())
    }

    #[test]
    fn a_well_formed_turn_passes_and_each_rule_fails_with_dsh_s_message() {
        let ok = [
            r#"{"type":"turn/start","seq":0,"data":{"turn":1}}"#,
            r#"{"type":"step/start","seq":1,"data":{"turn":1,"step":1}}"#,
            r#"{"type":"tool/call","seq":2,"data":{"turn":1,"step":1,"callId":"c1"}}"#,
            r#"{"type":"tool/result","seq":3,"data":{"turn":1,"step":1,"message":{"source":{"kind":"tool","callId":"c1"},"content":[]}},"surfaceOp":"append"}"#,
            r#"{"type":"step/end","seq":4,"data":{"turn":1,"step":1}}"#,
            r#"{"type":"turn/end","seq":5,"data":{"turn":1}}"#,
        ];
        assert_eq!(run(&ok), Ok(()));
        let err = |events: &[&str]| run(events).expect_err("must fail");
        assert!(err(&[r#"{"type":"turn/start","seq":0,"data":{"turn":2}}"#])
            .ends_with("turn/start expected turn 1, got 2"));
        assert!(
            err(&[ok[0], r#"{"type":"turn/start","seq":1,"data":{"turn":2}}"#])
                .ends_with("turn/start 2 while turn 1 is still open")
        );
        assert!(err(&[
            ok[0],
            ok[1],
            r#"{"type":"turn/end","seq":2,"data":{"turn":1}}"#
        ])
        .ends_with("turn/end 1 while step 1 is still open"));
        assert!(err(&[
            ok[0],
            r#"{"type":"step/start","seq":1,"data":{"turn":1,"step":2}}"#
        ])
        .ends_with("step/start expected step 1 in turn 1, got 2"));
        assert!(err(&[ok[0], ok[1], r#"{"type":"tool/result","seq":2,"data":{"turn":1,"step":1,"message":{"source":{"callId":"zz"},"content":[]}},"surfaceOp":"append"}"#])
            .ends_with("tool/result for zz with no prior tool/call in this step"));
        assert!(err(&[r#"{"type":"todo/write","seq":0,"data":{"todos":[]}}"#]).ends_with("todo/write appended outside any open turn (core execution events must be turn-enclosed)"));
        assert!(err(&[
            ok[0],
            ok[1],
            r#"{"type":"assistant/chunk","seq":2,"data":{"turn":1,"step":2}}"#
        ])
        .ends_with("assistant/chunk names turn 1/step 2 but open is turn 1/step 1"));
        assert!(err(&[ok[0], r#"{"type":"x","seq":0,"data":{}}"#])
            .ends_with("seq must strictly increase: saw 0 after 0"));
    }
}
