//! DSH 0.2's lifecycle relationships of a V4 log (`assertV4LifecycleRelationships`), checked
//! over its committed events in order: turn and step numbering and enclosure, tool calls
//! advertised by assistant messages and settled by their results, the protected system head on
//! the surface, title citations and command pairing. A failure is corruption; the text is DSH's.
//!
//! An unfinished tail may leave a turn, step or call open (nothing is checked at the end).
//! Not modelled yet: compaction transactions, PTC dispatch pairing, `llm/retry` chains, catalog
//! ids and delivery markers.

use std::collections::HashSet;

use crate::json::{Object, Value};

/// Event types the lifecycle looks at.
const RELATIONSHIP_TYPES: [&str; 26] = [
    "system/message",
    "user/message",
    "developer/message",
    "assistant/message",
    "tool/result",
    "assistant/attempt",
    "turn/start",
    "turn/end",
    "step/start",
    "step/end",
    "tool/call",
    "request/header",
    "request/context",
    "tool/ptc-dispatch-start",
    "tool/ptc-dispatch",
    "llm/retry",
    "llm/retry-started",
    "session/title",
    "session/title-llm-request",
    "command/run",
    "command/done",
    "compaction/start",
    "compaction/summary",
    "compaction/end",
    "compaction/prune",
    "session/end-seed",
];

/// The interrupted closer's text a not-started repair must carry (DSH's `CLOSER_TEXT`).
const INTERRUPTED_NOT_STARTED: &str =
    "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.";

/// A call advertised by an assistant message.
#[derive(Clone, Debug)]
struct Call {
    id: String,
    name: Value,
    arguments: Value,
    started: bool,
}

/// The lifecycle state after the events seen so far.
#[derive(Clone, Debug)]
pub struct V4Relations {
    turn: Option<Value>,
    step: Option<Value>,
    next_turn: f64,
    next_step: f64,
    surface: Vec<u64>,
    protected_head: Option<u64>,
    /// Advertised, unsettled calls in advertisement order.
    tools: Vec<Call>,
    human_prompts: HashSet<u64>,
    commands: HashSet<String>,
}

impl Default for V4Relations {
    fn default() -> Self {
        V4Relations {
            turn: None,
            step: None,
            next_turn: 1.0,
            next_step: 1.0,
            surface: Vec::new(),
            protected_head: None,
            tools: Vec::new(),
            human_prompts: HashSet::new(),
            commands: HashSet::new(),
        }
    }
}

type Check = Result<(), String>;

impl V4Relations {
    /// Check the next committed event against the lifecycle and advance it.
    pub fn accept(&mut self, event: &Value) -> Check {
        let Some(o) = event.as_object() else {
            return Ok(());
        };
        let ty = o.get("type").and_then(Value::as_str).unwrap_or_default();
        if !RELATIONSHIP_TYPES.contains(&ty) {
            return Ok(());
        }
        let seq = o
            .get("seq")
            .and_then(Value::as_safe_integer)
            .and_then(|s| u64::try_from(s).ok())
            .unwrap_or(0);
        let data = o
            .get("data")
            .and_then(Value::as_object)
            .ok_or_else(|| format!("{ty} requires an object"))?;
        if matches!(
            ty,
            "system/message" | "developer/message" | "assistant/attempt"
        ) {
            self.require_step(ty, data)?;
        }
        self.fold_surface(ty, seq, o)?;
        match ty {
            "turn/start" => {
                if self.turn.is_some() || data.get("turn") != Some(&Value::Number(self.next_turn)) {
                    return Err("turn/start does not open the expected turn".into());
                }
                self.turn = Some(Value::Number(self.next_turn));
                self.next_step = 1.0;
                self.tools.clear();
            }
            "turn/end" => {
                if self.turn.is_none()
                    || data.get("turn") != self.turn.as_ref()
                    || self.step.is_some()
                {
                    return Err("turn/end does not match the open turn with no open step".into());
                }
                self.close_tools(ty)?;
                self.turn = None;
                self.next_turn += 1.0;
            }
            "step/start" => {
                if self.turn.is_none()
                    || data.get("turn") != self.turn.as_ref()
                    || self.step.is_some()
                    || data.get("step") != Some(&Value::Number(self.next_step))
                {
                    return Err("step/start does not match the open turn and next step".into());
                }
                self.step = Some(Value::Number(self.next_step));
            }
            "step/end" => {
                self.require_step(ty, data)?;
                self.close_tools(ty)?;
                self.step = None;
                self.next_step += 1.0;
            }
            "assistant/message" | "tool/call" | "tool/result" => self.tool(ty, o, data)?,
            "request/header"
            | "request/context"
            | "tool/ptc-dispatch-start"
            | "tool/ptc-dispatch" => {
                self.require_turn(ty)?;
            }
            "llm/retry" => {
                let step = self
                    .step
                    .clone()
                    .unwrap_or(Value::Number(self.next_step - 1.0));
                if self.turn.is_none()
                    || data.get("turn") != self.turn.as_ref()
                    || data.get("step") != Some(&step)
                {
                    return Err("llm/retry does not match the current turn and step".into());
                }
            }
            "user/message" => {
                let human = data
                    .get("source")
                    .and_then(Value::as_object)
                    .and_then(|s| s.get("kind"))
                    .and_then(Value::as_str)
                    == Some("user");
                if human {
                    self.human_prompts.insert(seq);
                }
            }
            "session/title" => self.title(seq, data)?,
            "command/run" => {
                let id = nonempty(data.get("commandId"), "command id")?;
                if !self.commands.insert(id.clone()) {
                    return Err(format!("command/run repeats commandId {id}"));
                }
            }
            "command/done" => {
                let id = nonempty(data.get("commandId"), "command id")?;
                if !self.commands.contains(&id) {
                    return Err("command/done has no prior command/run".into());
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn require_turn(&self, ty: &str) -> Check {
        match self.turn {
            Some(_) => Ok(()),
            None => Err(format!("{ty} is outside an open turn")),
        }
    }

    fn require_step(&self, ty: &str, data: &Object) -> Check {
        let ok = self.turn.is_some()
            && self.step.is_some()
            && data.get("turn") == self.turn.as_ref()
            && data.get("step") == self.step.as_ref();
        if ok {
            Ok(())
        } else {
            Err(format!("{ty} does not match an open turn and step"))
        }
    }

    fn close_tools(&mut self, ty: &str) -> Check {
        match self.tools.first() {
            Some(call) => Err(format!("{ty} leaves unresolved tool call {}", call.id)),
            None => Ok(()),
        }
    }

    /// DSH's surface relationship: the protected system head and exact replacement spans.
    fn fold_surface(&mut self, ty: &str, seq: u64, o: &Object) -> Check {
        if !matches!(
            ty,
            "system/message"
                | "user/message"
                | "developer/message"
                | "assistant/message"
                | "tool/result"
        ) {
            return Ok(());
        }
        if ty == "system/message" && !self.surface.is_empty() && self.protected_head.is_none() {
            return Err("system/message requires a protected first surface head".into());
        }
        let op = o.get("surfaceOp");
        if op.and_then(Value::as_str) == Some("append") {
            if ty == "system/message" && self.surface.is_empty() {
                self.protected_head = Some(seq);
            }
            self.surface.push(seq);
            return Ok(());
        }
        let op = op
            .and_then(Value::as_object)
            .ok_or_else(|| format!("{ty} surfaceOp requires an object"))?;
        let start = earlier(op.get("startSeq"), seq, "replacement start")?;
        let end = earlier(op.get("endSeq"), seq, "replacement end")?;
        let first = self.surface.iter().position(|&n| n == start);
        let last = self.surface.iter().position(|&n| n == end);
        let (Some(first), Some(last)) = (first, last) else {
            return Err(format!(
                "{ty} replacement range is not on the current surface"
            ));
        };
        if last < first {
            return Err(format!(
                "{ty} replacement range is not on the current surface"
            ));
        }
        let removed: Vec<u64> = self.surface[first..=last].to_vec();
        let sources = o
            .get("sourceEventSeqs")
            .and_then(Value::as_array)
            .ok_or("replacement sourceEventSeqs requires an array")?;
        let cited = |s: u64| sources.iter().any(|v| v.as_f64() == Some(s as f64));
        if removed.iter().any(|&s| !cited(s)) {
            return Err("replacement sourceEventSeqs omit a shadowed surface node".into());
        }
        if self.protected_head.is_some_and(|h| removed.contains(&h)) {
            if ty != "system/message" || removed.len() != 1 {
                return Err("surface replacement cannot shadow the protected system head".into());
            }
            self.protected_head = Some(seq);
        }
        self.surface.splice(first..=last, [seq]);
        Ok(())
    }

    /// Calls advertised by assistant messages, started by `tool/call`, settled by appended
    /// results.
    fn tool(&mut self, ty: &str, o: &Object, data: &Object) -> Check {
        if ty == "tool/result" && o.get("surfaceOp").and_then(Value::as_str) != Some("append") {
            return self.require_turn(ty);
        }
        self.require_step(ty, data)?;
        if ty == "assistant/message" {
            let message = data
                .get("message")
                .and_then(Value::as_object)
                .ok_or("assistant message requires an object")?;
            let content = message
                .get("content")
                .and_then(Value::as_array)
                .ok_or("assistant content requires an array")?;
            for block in content {
                let block = block
                    .as_object()
                    .ok_or("assistant content block requires an object")?;
                if block.get("type").and_then(Value::as_str) != Some("tool-call") {
                    continue;
                }
                let id = nonempty(block.get("id"), "tool call id")?;
                if self.tools.iter().any(|c| c.id == id) {
                    return Err(format!(
                        "assistant/message repeats advertised tool call {id}"
                    ));
                }
                self.tools.push(Call {
                    id,
                    name: block.get("name").cloned().unwrap_or(Value::Null),
                    arguments: block.get("arguments").cloned().unwrap_or(Value::Null),
                    started: false,
                });
            }
            return Ok(());
        }
        let message = match ty {
            "tool/result" => Some(
                data.get("message")
                    .and_then(Value::as_object)
                    .ok_or("tool result message requires an object")?,
            ),
            _ => None,
        };
        let id = match message {
            Some(m) => nonempty(m.get("toolCallId"), "tool call id")?,
            None => nonempty(data.get("callId"), "tool call id")?,
        };
        let Some(at) = self.tools.iter().position(|c| c.id == id) else {
            return Err(format!("{ty} {id} has no advertised tool lifecycle"));
        };
        match message {
            None => {
                let call = &mut self.tools[at];
                let same = Some(&call.name) == data.get("name")
                    && Some(&call.arguments) == data.get("arguments");
                if call.started || !same {
                    return Err(format!(
                        "tool/call {id} does not match one advertised tool call"
                    ));
                }
                call.started = true;
            }
            Some(m) => {
                if !self.tools[at].started && !not_started_repair(o, data, m, &id)? {
                    return Err(format!(
                        "tool/result {id} is not the exact TOOL_NOT_STARTED repair"
                    ));
                }
                self.tools.remove(at);
            }
        }
        Ok(())
    }

    /// `session/title` cites earlier human prompts, none for a user-written title.
    fn title(&self, seq: u64, data: &Object) -> Check {
        let refs = data
            .get("messageSeqs")
            .and_then(Value::as_array)
            .ok_or("session/title messageSeqs requires an array")?;
        let by_user = data
            .get("source")
            .and_then(Value::as_object)
            .and_then(|s| s.get("kind"))
            .and_then(Value::as_str)
            == Some("user");
        if refs.is_empty() != by_user {
            return Err("session/title messageSeqs must be empty exactly for a user title".into());
        }
        let mut seen = HashSet::new();
        for r in refs {
            let s = earlier(Some(r), seq, "session/title messageSeqs")?;
            if !seen.insert(s) || !self.human_prompts.contains(&s) {
                return Err("session/title messageSeqs must cite distinct earlier human user/message events".into());
            }
        }
        Ok(())
    }
}

/// DSH's `notStartedRepair`: the exact form of a result for a call that never started.
fn not_started_repair(
    o: &Object,
    data: &Object,
    message: &Object,
    call: &str,
) -> Result<bool, String> {
    let error = data
        .get("error")
        .and_then(Value::as_object)
        .ok_or("not-started error requires an object")?;
    if error.get("name").and_then(Value::as_str) != Some("ToolNotStartedError")
        || error.get("code").and_then(Value::as_str) != Some("TOOL_NOT_STARTED")
        || message.get("isError") != Some(&Value::Bool(true))
        || o.contains_key("sourceEventSeqs")
    {
        return Ok(false);
    }
    let id = nonempty(message.get("id"), "not-started message id")?;
    if id.starts_with(&format!("forked-tool-result-{call}-")) {
        return Ok(true);
    }
    let prefix = format!("interrupted-tool-result-{call}-");
    let content = message
        .get("content")
        .and_then(Value::as_array)
        .ok_or("not-started content requires an array")?;
    let suffix_ok = id.strip_prefix(&prefix).is_some_and(|n| {
        (n == "0"
            || (!n.starts_with('0') && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())))
            && n.parse::<u64>().is_ok_and(|v| v < (1 << 53))
    });
    let text_ok = matches!(content, [block] if block.as_object().is_some_and(|b| {
        b.get("type").and_then(Value::as_str) == Some("text")
            && b.get("text").and_then(Value::as_str) == Some(INTERRUPTED_NOT_STARTED)
    }));
    Ok(suffix_ok && text_ok)
}

/// DSH's `text`: a nonempty string.
fn nonempty(v: Option<&Value>, subject: &str) -> Result<String, String> {
    v.and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| format!("{subject} requires a nonempty string"))
}

/// DSH's `earlier`: a count naming an earlier seq.
fn earlier(v: Option<&Value>, seq: u64, subject: &str) -> Result<u64, String> {
    let n = v
        .filter(|v| !matches!(v, Value::Number(n) if *n == 0.0 && n.is_sign_negative()))
        .and_then(Value::as_safe_integer)
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| format!("{subject} must be a non-negative safe integer"))?;
    if n >= seq {
        return Err(format!("{subject} must name an earlier event"));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    fn check(log: &[&str]) -> Result<(), String> {
        let mut r = V4Relations::default();
        for e in log {
            r.accept(&parse(e).expect("JSON"))?;
        }
        Ok(())
    }

    const T1: &str = r#"{"type":"turn/start","seq":0,"data":{"turn":1}}"#;
    const S1: &str = r#"{"type":"step/start","seq":1,"data":{"turn":1,"step":1}}"#;
    const CALL: &str = r#"{"type":"assistant/message","seq":2,"data":{"turn":1,"step":1,"message":{"content":[{"type":"tool-call","id":"c","name":"ls","arguments":"{}"}]}},"surfaceOp":"append"}"#;
    const STARTED: &str = r#"{"type":"tool/call","seq":3,"data":{"turn":1,"step":1,"callId":"c","name":"ls","arguments":"{}"}}"#;
    const RESULT: &str = r#"{"type":"tool/result","seq":4,"data":{"turn":1,"step":1,"message":{"toolCallId":"c"}},"surfaceOp":"append"}"#;
    const E1: &str = r#"{"type":"step/end","seq":5,"data":{"turn":1,"step":1}}"#;
    const TE: &str =
        r#"{"type":"turn/end","seq":6,"data":{"turn":1,"reason":{"kind":"completed"}}}"#;

    #[test]
    fn a_settled_turn_passes_and_an_open_tail_is_allowed() {
        assert_eq!(check(&[T1, S1, CALL, STARTED, RESULT, E1, TE]), Ok(()));
        assert_eq!(check(&[T1, S1, CALL]), Ok(()));
    }

    #[test]
    fn numbering_enclosure_and_settlement_are_dsh_s() {
        let t2 = r#"{"type":"turn/start","seq":0,"data":{"turn":2}}"#;
        assert_eq!(
            check(&[t2]),
            Err("turn/start does not open the expected turn".into())
        );
        assert_eq!(
            check(&[T1, S1, CALL, STARTED, E1]),
            Err("step/end leaves unresolved tool call c".into())
        );
        assert_eq!(
            check(&[T1, S1, CALL, RESULT]),
            Err("not-started error requires an object".into())
        );
        assert_eq!(
            check(&[T1, S1, CALL, STARTED, STARTED]),
            Err("tool/call c does not match one advertised tool call".into())
        );
        assert_eq!(
            check(&[T1, S1, CALL, STARTED, RESULT, RESULT]),
            Err("tool/result c has no advertised tool lifecycle".into())
        );
        let system = r#"{"type":"system/message","seq":2,"data":{"turn":1,"step":2,"message":{}},"surfaceOp":"append"}"#;
        assert_eq!(
            check(&[T1, S1, system]),
            Err("system/message does not match an open turn and step".into())
        );
        let header = r#"{"type":"request/header","seq":0,"data":{"header":{}}}"#;
        assert_eq!(
            check(&[header]),
            Err("request/header is outside an open turn".into())
        );
        assert_eq!(
            check(&[
                T1,
                S1,
                E1.replace("\"seq\":5", "\"seq\":2").as_str(),
                TE.replace("\"seq\":6", "\"seq\":3").as_str()
            ]),
            Ok(())
        );
        assert_eq!(
            check(&[T1, S1, TE]),
            Err("turn/end does not match the open turn with no open step".into())
        );
    }

    #[test]
    fn the_interrupted_repair_form_is_exact() {
        let repair = |text: &str| {
            format!(
                r#"{{"type":"tool/result","seq":3,"data":{{"turn":1,"step":1,"message":{{"id":"interrupted-tool-result-c-3","toolCallId":"c","isError":true,"content":[{{"type":"text","text":"{text}"}}]}},"error":{{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}}}},"surfaceOp":"append"}}"#
            )
        };
        assert_eq!(
            check(&[T1, S1, CALL, &repair(INTERRUPTED_NOT_STARTED)]),
            Ok(())
        );
        assert_eq!(
            check(&[T1, S1, CALL, &repair("other")]),
            Err("tool/result c is not the exact TOOL_NOT_STARTED repair".into())
        );
    }

    #[test]
    fn the_system_head_is_protected_and_titles_cite_human_prompts() {
        let head =
            r#"{"type":"system/message","seq":2,"data":{"turn":1,"step":1},"surfaceOp":"append"}"#;
        let user = r#"{"type":"user/message","seq":3,"data":{"source":{"kind":"user"}},"surfaceOp":"append"}"#;
        let compact = r#"{"type":"user/message","seq":4,"data":{"source":{"kind":"compact-checkpoint"}},"sourceEventSeqs":[2,3],"surfaceOp":{"op":"replace","startSeq":2,"endSeq":3}}"#;
        assert_eq!(
            check(&[T1, S1, head, user, compact]),
            Err("surface replacement cannot shadow the protected system head".into())
        );
        let title = |refs: &str, kind: &str| {
            format!(
                r#"{{"type":"session/title","seq":4,"data":{{"title":"t","messageSeqs":{refs},"source":{{"kind":"{kind}"}}}}}}"#
            )
        };
        assert_eq!(
            check(&[T1, S1, head, user, &title("[3]", "fallback")]),
            Ok(())
        );
        assert_eq!(
            check(&[T1, S1, head, user, &title("[2]", "fallback")]),
            Err(
                "session/title messageSeqs must cite distinct earlier human user/message events"
                    .into()
            )
        );
        assert_eq!(
            check(&[T1, S1, head, user, &title("[3]", "user")]),
            Err("session/title messageSeqs must be empty exactly for a user title".into())
        );
    }
}
