//! Helpers more than one edge uses: an event's type, walking the messages an event carries
//! (DSH's `mapEventMessages`) and the legacy restart closure (V1→V2 and V3→V4).

use crate::json::{Object, Value};

/// An event's `type` (`""` when it has none), owned so the event can be rewritten meanwhile.
pub fn type_of(event: &Object) -> String {
    event
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Apply `f` to every message `event` (of type `ty`) carries: a `user/message`'s data; the
/// `data.message` of system, developer, assistant and tool-result events; each of
/// `agent/inbox/spliced.inserted[]` and `session/title-llm-request.messages[]`.
/// `Err` is DSH's text for a payload without the message it must carry, or `f`'s.
pub fn for_each_message(
    ty: &str,
    event: &mut Object,
    f: &mut dyn FnMut(&mut Object) -> Result<(), String>,
) -> Result<(), String> {
    let Some(Value::Object(data)) = event.get_mut("data") else {
        return Ok(());
    };
    match ty {
        "user/message" => f(data),
        "developer/message" | "system/message" | "assistant/message" | "tool/result" => {
            match data.get_mut("message") {
                Some(Value::Object(message)) => f(message),
                _ => Err(format!("{ty} requires a message")),
            }
        }
        "agent/inbox/spliced" | "session/title-llm-request" => {
            let key = if ty == "agent/inbox/spliced" {
                "inserted"
            } else {
                "messages"
            };
            let Some(Value::Array(messages)) = data.get_mut(key) else {
                return Err(format!("{ty} requires message array"));
            };
            for message in messages {
                let Some(message) = message.as_object_mut() else {
                    return Err(format!("{ty} requires message objects"));
                };
                f(message)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The legacy restart closure: a `turn/start` of turn k+1 right after a non-empty
/// `agent/inbox/spliced{target:"next-turn"}`, while turn k is open with no open step, first gets
/// an `interrupted` `turn/end` for turn k.
#[derive(Debug, Default)]
pub struct Restart {
    turn: Option<f64>,
    step_open: bool,
    spliced_next_turn: bool,
    /// V1→V2 closes the step with its turn (`turn/start` and `turn/end` clear it); V3→V4 leaves
    /// that to `step/*`.
    turns_close_steps: bool,
}

impl Restart {
    /// V1→V2's tracking, where turn boundaries also close the step.
    pub fn resetting_steps() -> Self {
        Restart {
            turns_close_steps: true,
            ..Restart::default()
        }
    }

    /// The open turn's number.
    pub fn open_turn(&self) -> Option<f64> {
        self.turn
    }

    /// Observe the next source event; `Some(turn)` when an interrupted `turn/end` for `turn`
    /// must come first.
    pub fn observe(&mut self, ty: &str, data: Option<&Value>) -> Option<f64> {
        let data = data.and_then(Value::as_object);
        let turn_of = |d: Option<&Object>| d.and_then(|d| d.get("turn")).and_then(Value::as_f64);
        let interrupted = match (ty, self.turn) {
            ("turn/start", Some(open))
                if !self.step_open
                    && self.spliced_next_turn
                    && turn_of(data) == Some(open + 1.0) =>
            {
                Some(open)
            }
            _ => None,
        };
        self.spliced_next_turn = ty == "agent/inbox/spliced"
            && data.is_some_and(|d| {
                d.get("target").and_then(Value::as_str) == Some("next-turn")
                    && d.get("inserted")
                        .and_then(Value::as_array)
                        .is_some_and(|a| !a.is_empty())
            });
        match ty {
            "turn/start" => {
                if let Some(t) = turn_of(data) {
                    self.turn = Some(t);
                }
                self.step_open &= !self.turns_close_steps;
            }
            "turn/end" => {
                self.turn = None;
                self.step_open &= !self.turns_close_steps;
            }
            "step/start" => self.step_open = true,
            "step/end" => self.step_open = false,
            _ => {}
        }
        interrupted
    }

    /// The interrupted `turn/end` for `turn`, at `seq`, timed as `next` (the `turn/start`).
    pub fn closer(&self, seq: u64, next: &Object, turn: f64) -> Object {
        Object::new()
            .with("type", "turn/end")
            .with("seq", seq as f64)
            .with("time", next.get("time").cloned().unwrap_or(Value::Null))
            .with(
                "data",
                Object::new()
                    .with("turn", turn)
                    .with("reason", Object::new().with("kind", "interrupted")),
            )
    }
}
