//! V0→V1 (later-format-spec §3.8.1): the released V0 header checked, and each event normalized
//! one for one (same seq, same time): `compact/*` renamed, `steering/message` made a user
//! message, `turn/start.trigger` dropped, retired `turn/end` reasons converted, the duplicate
//! `request/header.header.messagePrefix` removed, legacy retry and compaction ids supplied,
//! legacy flat messages wrapped with `legacy-message:<id>:<seq>` ids; then each payload is held
//! to the frozen V0 inventory (exact `data` members per type).

use std::collections::HashMap;

use super::inventory::{check_payload, exact_members};
use super::messages::type_of;
use super::{Refusal, Stage};
use crate::json::{stringify, Object, Value};

/// The released V0 physical header's members.
const HEADER_REQUIRED: [&str; 5] = ["type", "version", "id", "createdAt", "delegationDepth"];
const HEADER_OPTIONAL: [&str; 5] = [
    "cwd",
    "parentSession",
    "seedLength",
    "origin",
    "agentPreset",
];

/// The V0→V1 stage.
#[derive(Default)]
pub struct V0ToV1 {
    /// The header's id, raw (for legacy ids) and JSON-quoted (for messages).
    id: String,
    has_parent: bool,
    inherited: u64,
    next: u64,
    /// Message ids by seq (a legacy replacement takes the id of the message it replaces).
    message_ids: HashMap<u64, Value>,
    /// Retry chain (turn, step, provider, policyKey as JSON texts) → its retry id.
    retry_ids: HashMap<[String; 4], Value>,
    /// The open legacy compaction group's id.
    compaction_id: Option<Value>,
}

fn refuse(message: impl Into<String>) -> Refusal {
    Refusal::format(0, message)
}

fn unsupported(message: impl Into<String>) -> Refusal {
    Refusal::unsupported(0, message)
}

fn data_mut<'a>(event: &'a mut Object, ty: &str, seq: u64) -> Result<&'a mut Object, Refusal> {
    match event.get_mut("data") {
        Some(Value::Object(d)) => Ok(d),
        _ => Err(refuse(format!("{ty} {seq} data must be a JSON object"))),
    }
}

impl V0ToV1 {
    fn quoted_id(&self) -> String {
        stringify(&Value::from(self.id.as_str()))
    }

    fn legacy_message_id(&self, seq: u64) -> Value {
        Value::from(format!("legacy-message:{}:{seq}", self.id).as_str())
    }

    fn malformed(&self, what: &str, seq: u64) -> Refusal {
        refuse(format!(
            "session {} contains malformed pre-react-loop {what} at seq {seq}",
            self.quoted_id()
        ))
    }

    fn turn_start(&self, event: &mut Object, seq: u64) -> Result<(), Refusal> {
        let data = data_mut(event, "turn/start", seq)?;
        if !data.contains_key("trigger") {
            return Ok(());
        }
        exact_members(
            data,
            &["turn", "trigger"],
            &[],
            &format!("turn/start {seq} data"),
        )?;
        if data.get("turn").and_then(Value::as_count).is_none() {
            return Err(refuse(format!(
                "turn/start {seq} turn must be a non-negative safe integer"
            )));
        }
        let Some(Value::Object(trigger)) = data.get("trigger") else {
            return Err(refuse(format!(
                "turn/start {seq} trigger must be a JSON object"
            )));
        };
        let turn = data.get("turn").cloned().unwrap_or(Value::Null);
        let kind_ok = trigger
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| !k.is_empty());
        if turn.as_f64().is_some_and(|t| t < 1.0) || !kind_ok {
            return Err(self.malformed("turn/start", seq));
        }
        *data = Object::new().with("turn", turn);
        Ok(())
    }

    fn turn_end(&self, event: &mut Object, seq: u64) -> Result<(), Refusal> {
        let malformed = || self.malformed("turn/end", seq);
        let data = data_mut(event, "turn/end", seq)?;
        exact_members(
            data,
            &["turn", "reason"],
            &[],
            &format!("turn/end {seq} data"),
        )?;
        if data.get("turn").and_then(Value::as_count).is_none() {
            return Err(refuse(format!(
                "turn/end {seq} turn must be a non-negative safe integer"
            )));
        }
        if data
            .get("turn")
            .and_then(Value::as_f64)
            .is_some_and(|t| t < 1.0)
        {
            return Err(malformed());
        }
        let Some(Value::Object(reason)) = data.get("reason") else {
            return Err(refuse(format!(
                "turn/end {seq} reason must be a JSON object"
            )));
        };
        let Some(kind) = reason.get("kind").and_then(Value::as_str) else {
            return Err(malformed());
        };
        let label = format!("turn/end {seq} reason");
        let current = match kind {
            "completed" | "blocked" | "max-tokens" | "interrupted" => {
                exact_members(reason, &["kind"], &[], &label)?;
                None
            }
            "aborted" if reason.contains_key("reason") => None,
            "aborted" | "disposed" => {
                exact_members(reason, &["kind"], &[], &label)?;
                let cause = if kind == "aborted" {
                    "legacy"
                } else {
                    "disposed"
                };
                Some(
                    Object::new()
                        .with("kind", "aborted")
                        .with("reason", Object::new().with("kind", cause)),
                )
            }
            "error" if reason.contains_key("error") => None,
            "error" => {
                if reason.get("step").and_then(Value::as_count).is_none() {
                    return Err(refuse(format!(
                        "turn/end {seq} error step must be a non-negative safe integer"
                    )));
                }
                let error = if reason.contains_key("failure") {
                    exact_members(reason, &["kind", "step", "failure"], &[], &label)?;
                    let Some(Value::Object(failure)) = reason.get("failure") else {
                        return Err(refuse(format!(
                            "turn/end {seq} failure must be a JSON object"
                        )));
                    };
                    exact_members(
                        failure,
                        &["message", "code"],
                        &["status", "providerRetryAfterMs", "requestId"],
                        &format!("turn/end {seq} failure"),
                    )?;
                    if failure.get("message").and_then(Value::as_str).is_none()
                        || failure.get("code").and_then(Value::as_str).is_none()
                    {
                        return Err(malformed());
                    }
                    failure.clone()
                } else {
                    exact_members(reason, &["kind", "step", "message"], &["code"], &label)?;
                    let Some(message) = reason.get("message").filter(|m| m.as_str().is_some())
                    else {
                        return Err(malformed());
                    };
                    let code = match reason.get("code") {
                        None => Value::from("UNKNOWN"),
                        Some(c @ Value::String(_)) => c.clone(),
                        Some(_) => return Err(malformed()),
                    };
                    Object::new()
                        .with("message", message.clone())
                        .with("code", code)
                };
                Some(Object::new().with("kind", "error").with("error", error))
            }
            _ => None,
        };
        if let Some(current) = current {
            data.insert("reason".into(), Value::Object(current));
        }
        Ok(())
    }

    fn request_header(&self, event: &mut Object, seq: u64) -> Result<(), Refusal> {
        let quoted = self.quoted_id();
        let data = data_mut(event, "request/header", seq)?;
        if data.get("reason").and_then(Value::as_str) == Some("fallback") {
            return Err(unsupported(format!(
                "session {quoted} contains unsupported request/header reason \"fallback\" at seq {seq}"
            )));
        }
        let Some(Value::Object(header)) = data.get_mut("header") else {
            return Err(refuse(format!(
                "request/header {seq} header must be a JSON object"
            )));
        };
        match header.get("messagePrefix") {
            None => Ok(()),
            Some(Value::Array(_)) => {
                header.remove("messagePrefix");
                Ok(())
            }
            Some(_) => Err(refuse(format!(
                "session {quoted} contains malformed request/header messagePrefix at seq {seq}"
            ))),
        }
    }

    fn steering(&self, event: &mut Object, seq: u64) -> Result<(), Refusal> {
        let legacy_id = self.legacy_message_id(seq);
        let Some(Value::Object(data)) = event.get("data") else {
            return Err(refuse(format!(
                "steering/message {seq} data must be a JSON object"
            )));
        };
        let label = format!("steering/message {seq} data");
        let message = if data.contains_key("message") {
            exact_members(data, &["turn", "message"], &[], &label)?;
            data.get("message").cloned().unwrap_or(Value::Null)
        } else {
            exact_members(data, &["turn", "content", "source"], &[], &label)?;
            let mut flat = data.clone();
            flat.remove("turn");
            Value::Object(flat.with("id", legacy_id).with("role", "user"))
        };
        if data.get("turn").and_then(Value::as_count).is_none() {
            return Err(refuse(format!(
                "steering/message {seq} turn must be a non-negative safe integer"
            )));
        }
        event.insert("type".into(), Value::from("user/message"));
        event.insert("data".into(), message);
        Ok(())
    }

    fn retry(&mut self, event: &mut Object, seq: u64) -> Result<(), Refusal> {
        let legacy = Value::from(format!("legacy-retry:{}:{seq}", self.id).as_str());
        let data = data_mut(event, "llm/retry", seq)?;
        let text = |k: &str| data.get(k).map(stringify).unwrap_or_default();
        let chain = [
            text("turn"),
            text("step"),
            text("provider"),
            text("policyKey"),
        ];
        match data.get("retryId") {
            Some(id @ Value::String(s)) if !s.as_wtf8().is_empty() => {
                self.retry_ids.insert(chain, id.clone());
            }
            Some(_) => {}
            None => {
                let id = self.retry_ids.entry(chain).or_insert(legacy).clone();
                data.insert("retryId".into(), id);
            }
        }
        Ok(())
    }

    fn compaction(&mut self, ty: &str, event: &mut Object, seq: u64) -> Result<(), Refusal> {
        if ty == "session/end-seed" {
            self.compaction_id = None;
            return Ok(());
        }
        if ty == "compaction/start" {
            let legacy = Value::from(format!("legacy-compaction:{}:{seq}", self.id).as_str());
            let data = data_mut(event, ty, seq)?;
            match data.get("compactionId") {
                Some(id @ Value::String(s)) if !s.as_wtf8().is_empty() => {
                    self.compaction_id = Some(id.clone());
                }
                Some(_) => {}
                None => {
                    data.insert("compactionId".into(), legacy.clone());
                    self.compaction_id = Some(legacy);
                }
            }
            return Ok(());
        }
        let Some(open) = self.compaction_id.clone() else {
            return Ok(());
        };
        match ty {
            "compaction/summary" | "compaction/end" => {
                let data = data_mut(event, ty, seq)?;
                if !data.contains_key("compactionId") {
                    data.insert("compactionId".into(), open);
                }
                if ty == "compaction/end" {
                    self.compaction_id = None;
                }
            }
            "user/message" => {
                if let Some(Value::Object(data)) = event.get_mut("data") {
                    if let Some(Value::Object(source)) = data.get_mut("source") {
                        let checkpoint = source.get("kind").and_then(Value::as_str)
                            == Some("plugin")
                            && source.get("plugin").and_then(Value::as_str) == Some("compact")
                            && !source.contains_key("compactionId");
                        if checkpoint {
                            source.insert("compactionId".into(), open);
                        }
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Legacy flat messages get the current wrapper and a deterministic id.
    fn wrap_legacy(&self, ty: &str, event: &mut Object, seq: u64) -> Result<(), Refusal> {
        let legacy_id = self.legacy_message_id(seq);
        let replaced = match event.get("surfaceOp") {
            Some(Value::Object(op)) if op.get("op").and_then(Value::as_str) == Some("replace") => {
                Some(op.get("start").and_then(Value::as_safe_u64))
            }
            _ => None,
        };
        let data = data_mut(event, ty, seq)?;
        match ty {
            "user/message"
                if data.contains_key("content")
                    && data.contains_key("source")
                    && !["id", "role", "message"]
                        .iter()
                        .any(|k| data.contains_key(k)) =>
            {
                data.insert("id".into(), legacy_id);
                data.insert("role".into(), Value::from("user"));
            }
            "assistant/message"
                if !data.contains_key("message")
                    && data.contains_key("content")
                    && data.contains_key("provenance") =>
            {
                let Some(Value::Object(mut source)) = data.remove("provenance") else {
                    return Err(refuse(format!(
                        "assistant/message {seq} provenance must be a JSON object"
                    )));
                };
                let content = data.remove("content").unwrap_or(Value::Null);
                source.insert("kind".into(), Value::from("model"));
                let message = Object::new()
                    .with("id", legacy_id)
                    .with("role", "assistant")
                    .with("content", content)
                    .with("source", source);
                data.insert("message".into(), Value::Object(message));
            }
            "tool/result" => {
                let call_id = data
                    .get("callId")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let flat = !data.contains_key("message")
                    && data.contains_key("content")
                    && matches!(data.get("isError"), Some(Value::Bool(_)));
                if let (true, Some(call_id)) = (flat, call_id) {
                    let id = match replaced {
                        None => legacy_id,
                        Some(start) => start
                            .and_then(|s| self.message_ids.get(&s))
                            .cloned()
                            .ok_or_else(|| {
                                refuse(format!(
                                    "tool/result {seq} replacement cites a message without identity"
                                ))
                            })?,
                    };
                    data.remove("callId");
                    let content = data.remove("content").unwrap_or(Value::Null);
                    let is_error = data.remove("isError").unwrap_or(Value::Null);
                    let block = Object::new()
                        .with("type", "tool-result")
                        .with("toolCallId", call_id.as_str())
                        .with("content", content)
                        .with("isError", is_error);
                    let message = Object::new()
                        .with("id", id)
                        .with("role", "user")
                        .with("content", Value::Array(vec![Value::Object(block)]))
                        .with(
                            "source",
                            Object::new()
                                .with("kind", "tool")
                                .with("callId", call_id.as_str()),
                        );
                    data.insert("message".into(), Value::Object(message));
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn record_message_id(&mut self, ty: &str, event: &Object, seq: u64) {
        let data = event.get("data").and_then(Value::as_object);
        let id = if ty == "user/message" {
            data.and_then(|d| d.get("id"))
        } else {
            data.and_then(|d| d.get("message"))
                .and_then(Value::as_object)
                .and_then(|m| m.get("id"))
        };
        if let Some(id @ Value::String(_)) = id {
            self.message_ids.insert(seq, id.clone());
        }
    }

    fn check_delivery(&self, event: &Object, seq: u64) -> Result<(), Refusal> {
        let Some(data) = event.get("data").and_then(Value::as_object) else {
            return Ok(());
        };
        let version = data
            .get("sessionFormatVersion")
            .cloned()
            .unwrap_or(Value::Number(0.0));
        let inherited = self.has_parent && seq < self.inherited;
        let named = data.get("sessionId").and_then(Value::as_str);
        if version == Value::Number(0.0) && !inherited && named != Some(self.id.as_str()) {
            return Err(refuse(
                "current-generation delivery marker names the wrong Session",
            ));
        }
        Ok(())
    }
}

impl Stage for V0ToV1 {
    fn source_version(&self) -> u32 {
        0
    }

    fn header(&mut self, header: &mut Object) -> Result<(), Refusal> {
        // The released decoder's header rules: its errors are not the stage's, so unwrapped.
        let decoder = |r: Refusal| Refusal::decoder(0, r.message);
        exact_members(
            header,
            &HEADER_REQUIRED,
            &HEADER_OPTIONAL,
            "released v0 physical header",
        )
        .map_err(decoder)?;
        let refuse = |m: &str| Refusal::decoder(0, m);
        if header.get("type").and_then(Value::as_str) != Some("session")
            || header.get("version") != Some(&Value::Number(0.0))
        {
            return Err(refuse("expected released v0 physical Session header"));
        }
        let Some(id) = header.get("id").and_then(Value::as_str) else {
            return Err(refuse("released v0 physical header id must be a string"));
        };
        self.id = id.to_owned();
        for key in ["createdAt", "delegationDepth", "seedLength"] {
            if header.contains_key(key) && header.get(key).and_then(Value::as_count).is_none() {
                return Err(refuse(&format!(
                    "released v0 physical header {key} must be a non-negative safe integer"
                )));
            }
        }
        for key in ["cwd", "parentSession", "agentPreset"] {
            if header.get(key).is_some_and(|v| v.as_str().is_none()) {
                return Err(refuse(&format!(
                    "released v0 physical header {key} must be a string"
                )));
            }
        }
        if header
            .get("origin")
            .is_some_and(|o| o.as_str() != Some("subagent"))
        {
            return Err(refuse(
                "released v0 physical header origin must be \"subagent\"",
            ));
        }
        if header
            .get("cwd")
            .and_then(Value::as_str)
            .is_some_and(|cwd| !cwd.starts_with('/'))
        {
            return Err(refuse("format v0 header cwd must be absolute"));
        }
        self.has_parent = header.contains_key("parentSession");
        self.inherited = header
            .get("seedLength")
            .and_then(Value::as_safe_u64)
            .unwrap_or(0);
        header.insert("version".into(), Value::Number(1.0));
        Ok(())
    }

    fn event(&mut self, mut event: Object, out: &mut Vec<Object>) -> Result<(), Refusal> {
        let seq = self.next;
        if event.get("seq").and_then(Value::as_safe_u64) != Some(seq) {
            return Err(refuse(format!("released Session row {seq} has seq gap")));
        }
        self.next += 1;
        let mut ty = type_of(&event);
        if let Some(rest) = ty.strip_prefix("compact/") {
            if ["start", "summary", "end", "prune"].contains(&rest) {
                ty = format!("compaction/{rest}");
                event.insert("type".into(), Value::from(ty.as_str()));
            }
        }
        if ty == "request/header-delta" || ty == "mode/set" {
            return Err(unsupported(format!(
                "session {} contains unsupported legacy {ty} event at seq {seq}",
                self.quoted_id()
            )));
        }
        match ty.as_str() {
            "turn/start" => self.turn_start(&mut event, seq)?,
            "turn/end" => self.turn_end(&mut event, seq)?,
            "request/header" => self.request_header(&mut event, seq)?,
            "steering/message" => {
                self.steering(&mut event, seq)?;
                ty = "user/message".into();
            }
            "llm/retry" => self.retry(&mut event, seq)?,
            _ => {}
        }
        self.compaction(&ty, &mut event, seq)?;
        self.wrap_legacy(&ty, &mut event, seq)?;
        check_payload(0, &ty, &event, seq)?;
        self.record_message_id(&ty, &event, seq);
        if ty == "session-log-deepseek/delivery-accepted" {
            self.check_delivery(&event, seq)?;
        }
        out.push(event);
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<Object>) -> Result<(), Refusal> {
        if self.inherited > self.next {
            return Err(refuse(
                "Session inheritedEventCount exceeds its event count",
            ));
        }
        Ok(())
    }
}
