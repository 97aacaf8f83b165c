//! V2→V3 (later-format-spec §3.8.3): the protected system head and prompt-change replacements,
//! the PTC renames, and canonical envelopes (`{op,startSeq,endSeq}`, no `tools:[]` or
//! `adapterDefaults:{}` in request headers).
//!
//! - Right after the first `step/start` goes an empty `system/message` head. Each
//!   `request/header` whose `system` differs from the current prompt (absent counts as `""`; the
//!   first header is compared with `""`) is preceded by a `system/message` replacing the current
//!   head, which it becomes; every header loses `system`.
//! - The inserted messages' ids are `v2-to-v3-system-` + the SHA-256 of
//!   `JSON.stringify(["session-format-v2-to-v3", id, anchor.seq, anchor.type])`, the anchor being
//!   the source `step/start` (head) or `request/header` (replacement).

use std::collections::HashSet;

use sha2::{Digest, Sha256};

use super::messages::{for_each_message, type_of};
use super::references::Renumber;
use super::{Refusal, Stage};
use crate::json::{stringify, JsString, Object, Value};

/// The V2→V3 stage.
#[derive(Default)]
pub struct V2ToV3 {
    id: Value,
    has_parent: bool,
    seeded: bool,
    renumber: Renumber,
    /// The open step's `{turn, step}`.
    step: Option<(Value, Value)>,
    /// The target seq of the current system head.
    head: Option<u64>,
    prompt: Value,
    source_cut: Option<u64>,
    original_ids: HashSet<JsString>,
    generated_ids: HashSet<JsString>,
    foreign_delivery: Option<u64>,
}

fn unsupported(message: impl Into<String>) -> Refusal {
    Refusal::unsupported(2, message)
}

fn refuse(message: impl Into<String>) -> Refusal {
    Refusal::format(2, message)
}

impl V2ToV3 {
    /// Record the source's message ids; one equal to a generated id is refused.
    fn observe_ids(&mut self, ty: &str, event: &mut Object) -> Result<(), Refusal> {
        let mut ids = Vec::new();
        let _ = for_each_message(ty, event, &mut |message| {
            if let Some(Value::String(id)) = message.get("id") {
                ids.push(id.clone());
            }
            Ok(())
        });
        for id in ids {
            if self.generated_ids.contains(&id) {
                return Err(unsupported(
                    "source message id collides with a generated system message id",
                ));
            }
            self.original_ids.insert(id);
        }
        Ok(())
    }

    /// Insert the system message for `prompt` anchored at source event `anchor`: the head when
    /// there is none, else a replacement of the head.
    fn emit_system(
        &mut self,
        prompt: Value,
        anchor: &Object,
        out: &mut Vec<Object>,
    ) -> Result<(), Refusal> {
        let Some((turn, step)) = self.step.clone() else {
            return Err(unsupported(
                "format v2 changed request prompt outside an open step cannot retain source chronology",
            ));
        };
        let identity = Value::Array(vec![
            Value::from("session-format-v2-to-v3"),
            self.id.clone(),
            anchor.get("seq").cloned().unwrap_or(Value::Null),
            anchor.get("type").cloned().unwrap_or(Value::Null),
        ]);
        let digest = Sha256::digest(stringify(&identity).as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        let id = JsString::from(format!("v2-to-v3-system-{hex}"));
        if self.original_ids.contains(&id) || self.generated_ids.contains(&id) {
            return Err(unsupported(
                "generated system message id collides with an existing message id",
            ));
        }
        self.generated_ids.insert(id.clone());
        let content = match prompt.as_str() {
            Some("") => Vec::new(),
            _ => vec![Value::Object(
                Object::new()
                    .with("type", "text")
                    .with("text", prompt.clone()),
            )],
        };
        let message = Object::new()
            .with("id", Value::String(id))
            .with("role", "system")
            .with(
                "source",
                Object::new()
                    .with("kind", "plugin")
                    .with("plugin", "@deepseek-ai/dsh-system-prompt"),
            )
            .with("content", Value::Array(content));
        let seq = self.renumber.take();
        let mut event = Object::new()
            .with("type", "system/message")
            .with("seq", seq as f64)
            .with("time", anchor.get("time").cloned().unwrap_or(Value::Null))
            .with(
                "data",
                Object::new()
                    .with("turn", turn)
                    .with("step", step)
                    .with("message", message),
            );
        match self.head {
            None => event.insert("surfaceOp".into(), Value::from("append")),
            Some(head) => {
                let op = Object::new()
                    .with("op", "replace")
                    .with("startSeq", head as f64)
                    .with("endSeq", head as f64);
                event.insert("surfaceOp".into(), Value::Object(op));
                event.insert(
                    "sourceEventSeqs".into(),
                    Value::Array(vec![Value::Number(head as f64)]),
                );
            }
        }
        out.push(event);
        self.head = Some(seq);
        self.prompt = prompt;
        Ok(())
    }
}

/// `tool/code-dispatch*` become `tool/ptc-dispatch*`, the `code` preset `ptc`, and the
/// `tools-code-mode` plugin source `tools-ptc` (user messages, spliced and title messages).
fn rename_ptc(ty: &str, event: &mut Object) {
    match ty {
        "tool/code-dispatch" => event.insert("type".into(), Value::from("tool/ptc-dispatch")),
        "tool/code-dispatch-start" => {
            event.insert("type".into(), Value::from("tool/ptc-dispatch-start"));
        }
        "agent-preset/selected" => {
            if let Some(Value::Object(data)) = event.get_mut("data") {
                if data.get("agentPreset").and_then(Value::as_str) == Some("code") {
                    data.insert("agentPreset".into(), Value::from("ptc"));
                }
            }
        }
        "user/message" | "agent/inbox/spliced" | "session/title-llm-request" => {
            let _ = for_each_message(ty, event, &mut |message| {
                if let Some(Value::Object(source)) = message.get_mut("source") {
                    if source.get("kind").and_then(Value::as_str) == Some("plugin")
                        && source.get("plugin").and_then(Value::as_str) == Some("tools-code-mode")
                    {
                        source.insert("plugin".into(), Value::from("tools-ptc"));
                    }
                }
                Ok(())
            });
        }
        _ => {}
    }
}

/// V3's canonical envelope: a replacement spelled `{op,startSeq,endSeq}` (same key position),
/// and request headers without `tools:[]` or `adapterDefaults:{}`.
fn canonicalize(ty: &str, event: &mut Object, seq: u64) -> Result<(), Refusal> {
    if let Some(op) = event.get_mut("surfaceOp") {
        if op.as_str() != Some("append") {
            let exact = op.as_object().filter(|o| {
                o.len() == 3
                    && o.get("op").and_then(Value::as_str) == Some("replace")
                    && o.contains_key("start")
                    && o.contains_key("end")
            });
            let Some(o) = exact else {
                return Err(refuse(format!(
                    "format v2 {ty} at seq {seq} requires exact replace fields op/start/end"
                )));
            };
            let count = |key: &str| {
                o.get(key).filter(|v| v.as_safe_u64().is_some()).cloned().ok_or_else(|| {
                    refuse(format!(
                        "format v2 {ty} at seq {seq} replace {key} must be a non-negative safe integer"
                    ))
                })
            };
            let canonical = Object::new()
                .with("op", "replace")
                .with("startSeq", count("start")?)
                .with("endSeq", count("end")?);
            *op = Value::Object(canonical);
        }
    }
    if ty == "request/header" {
        if let Some(Value::Object(header)) = event
            .get_mut("data")
            .and_then(Value::as_object_mut)
            .and_then(|d| d.get_mut("header"))
        {
            if matches!(header.get("tools"), Some(Value::Array(a)) if a.is_empty()) {
                header.remove("tools");
            }
            if matches!(header.get("adapterDefaults"), Some(Value::Object(o)) if o.is_empty()) {
                header.remove("adapterDefaults");
            }
        }
    }
    Ok(())
}

impl Stage for V2ToV3 {
    fn source_version(&self) -> u32 {
        2
    }

    fn header(&mut self, header: &mut Object) -> Result<(), Refusal> {
        self.id = header.get("id").cloned().unwrap_or(Value::Null);
        self.has_parent = header.contains_key("parentSession");
        self.seeded = header.get("isSeeded") == Some(&Value::Bool(true));
        self.source_cut = (!self.seeded).then_some(0);
        self.prompt = Value::from("");
        header.insert("version".into(), Value::Number(3.0));
        if header.get("agentPreset").and_then(Value::as_str) == Some("code") {
            header.insert("agentPreset".into(), Value::from("ptc"));
        }
        Ok(())
    }

    fn event(&mut self, mut event: Object, out: &mut Vec<Object>) -> Result<(), Refusal> {
        let seq = self.renumber.sources();
        if event.get("seq").and_then(Value::as_safe_u64) != Some(seq) {
            return Err(refuse("format v2 source events must be dense"));
        }
        let ty = type_of(&event);
        super::v2_audit::audit(&ty, &event, seq)?;
        self.observe_ids(&ty, &mut event)?;
        if ty == "request/header" {
            let system = event
                .get_mut("data")
                .and_then(Value::as_object_mut)
                .and_then(|d| d.get_mut("header"))
                .and_then(Value::as_object_mut)
                .and_then(|h| h.remove("system"));
            let prompt = match system {
                Some(s @ Value::String(_)) => s,
                _ => Value::from(""),
            };
            if prompt != self.prompt {
                self.emit_system(prompt, &event, out)?;
            }
        }
        if super::v2_audit::SURFACE_TYPES.contains(&ty.as_str()) && self.head.is_none() {
            return Err(unsupported(
                "format v2 surface before first step cannot acquire a system head without changing chronology",
            ));
        }
        let data = event.get("data").and_then(Value::as_object);
        if ty == "session/end-seed"
            && data.and_then(|d| d.get("inherited")) == Some(&Value::Bool(true))
        {
            if !self.seeded {
                return Err(refuse(
                    "format v2 unseeded Session contains an inherited end-seed marker",
                ));
            }
            self.source_cut = Some(seq);
        }
        if ty == "session-log-deepseek/delivery-accepted" {
            let version = data.and_then(|d| d.get("sessionFormatVersion"));
            if version == Some(&Value::Number(3.0)) {
                return Err(refuse("format v2 delivery marker claims target format v3"));
            }
            if version == Some(&Value::Number(2.0))
                && data.and_then(|d| d.get("sessionId")) != Some(&self.id)
            {
                self.foreign_delivery = Some(seq);
            }
        }
        let step = (ty == "step/start").then(|| {
            let field = |k: &str| data.and_then(|d| d.get(k)).cloned().unwrap_or(Value::Null);
            (field("turn"), field("step"))
        });
        self.renumber
            .remap(&mut event, seq, ("start", "end"))
            .map_err(|_| refuse("reference must name an earlier source event"))?;
        let target = self.renumber.take();
        self.renumber.record(Some(target));
        event.insert("seq".into(), Value::Number(target as f64));
        rename_ptc(&ty, &mut event);
        canonicalize(&ty, &mut event, target)?;
        // The head's anchor is the first source `step/start` (its source seq).
        let anchor = (step.is_some() && self.head.is_none()).then(|| {
            let mut anchor = event.clone();
            anchor.insert("seq".into(), Value::Number(seq as f64));
            anchor
        });
        out.push(event);
        if let Some(step) = step {
            self.step = Some(step);
            if let Some(anchor) = anchor {
                self.emit_system(Value::from(""), &anchor, out)?;
            }
        } else if ty == "step/end" || ty == "turn/end" {
            self.step = None;
        }
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<Object>) -> Result<(), Refusal> {
        let Some(cut) = self.source_cut else {
            return Err(refuse(
                "format v2 inherited end-seed marker must be a non-negative safe integer",
            ));
        };
        if let Some(seq) = self.foreign_delivery {
            if !self.has_parent || seq >= cut {
                return Err(refuse(
                    "current-generation delivery marker names the wrong Session",
                ));
            }
        }
        Ok(())
    }
}
