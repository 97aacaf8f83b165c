//! V3→V4 (later-format-spec §3.8.4): tool-role results, producer-owned sources, namespaced
//! unknown names, the outcome-unknown repair of started tools, the interrupted closure, and the
//! subagent catalog backfilled from the session's children.

use std::collections::HashMap;

use super::messages::{type_of, Restart};
use super::producers::rewrite_sources;
use super::references::{BadReference, Renumber};
use super::tool_role::{lift_tool_result, migrate_content};
use super::{ChildFacts, Refusal, Stage};
use crate::json::{JsString, Object, Value};
use crate::vocabulary::RELEASED_V3_EVENT_TYPES;

/// DSH's frozen wording of a repaired started tool's result.
const OUTCOME_UNKNOWN_TEXT: &str = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";

/// The V3→V4 stage.
pub struct V3ToV4 {
    children: Vec<ChildFacts>,
    seeded: bool,
    has_parent: bool,
    /// The session's id (a delivery marker naming another is foreign).
    id: String,
    renumber: Renumber,
    restart: Restart,
    /// The source and target seqs of the last inherited marker (0 when unseeded).
    cut: Option<(u64, u64)>,
    /// Catalog payloads after the last inherited marker.
    catalogs: Vec<Value>,
    /// The time of the last event (the header's `createdAt` before any).
    time: Value,
    foreign_delivery: Option<u64>,
    /// Tool calls of the open step without an appended result: call id → target seq.
    started: Vec<(JsString, u64)>,
    /// A turn whose repaired step now needs an error `turn/end`.
    pending_error_turn: Option<Value>,
}

impl V3ToV4 {
    /// The stage, with the session's direct children in the same store.
    pub fn new(mut children: Vec<ChildFacts>) -> Self {
        children.sort_by(|a, b| {
            a.child_created_at
                .total_cmp(&b.child_created_at)
                .then_with(|| a.child_id.cmp(&b.child_id))
        });
        V3ToV4 {
            children,
            seeded: false,
            has_parent: false,
            id: String::new(),
            renumber: Renumber::default(),
            restart: Restart::default(),
            cut: None,
            catalogs: Vec::new(),
            time: Value::Number(0.0),
            foreign_delivery: None,
            started: Vec::new(),
            pending_error_turn: None,
        }
    }

    /// A format rule broken (DSH's `SessionFormatError`, named after the stage).
    fn refuse(message: impl Into<String>) -> Refusal {
        Refusal::format(3, message)
    }

    /// The stage's own refusal (DSH's `SessionFormatUnsupportedMigrationError`).
    fn unsupported(message: impl Into<String>) -> Refusal {
        Refusal::unsupported(3, message)
    }

    /// A repaired step's turn must end in error before anything else starts.
    fn check_repaired_turn(&mut self, ty: &str, data: Option<&Object>) -> Result<(), Refusal> {
        let Some(turn) = &self.pending_error_turn else {
            return Ok(());
        };
        if ty == "turn/end" {
            let kind = data
                .and_then(|d| d.get("reason"))
                .and_then(Value::as_object)
                .and_then(|r| r.get("kind"))
                .and_then(Value::as_str);
            if data.and_then(|d| d.get("turn")) != Some(turn) || kind != Some("error") {
                return Err(Self::unsupported(
                    "V3 tool result repair requires an error turn/end for the same turn",
                ));
            }
            self.pending_error_turn = None;
        } else if ty == "step/start" || ty == "turn/start" {
            return Err(Self::unsupported(
                "V3 tool result repair requires an error turn/end before another step or turn",
            ));
        }
        Ok(())
    }

    /// Before a `step/end`: an outcome-unknown result for every started tool without one.
    fn repair_started(&mut self, event: &Object, out: &mut Vec<Object>) -> Result<(), Refusal> {
        if self.started.is_empty() {
            return Ok(());
        }
        let data = event
            .get("data")
            .and_then(Value::as_object)
            .ok_or_else(|| Self::refuse("V3 step/end data must be an object"))?;
        let count = |key: &str, what: &str| {
            data.get(key)
                .filter(|v| v.as_safe_u64().is_some())
                .cloned()
                .ok_or_else(|| Self::refuse(format!("{what} must be a non-negative safe integer")))
        };
        let turn = count("turn", "V3 repaired step turn")?;
        let step = count("step", "V3 repaired step")?;
        for (call_id, call_seq) in std::mem::take(&mut self.started) {
            let seq = self.renumber.take();
            let id = format!("interrupted-tool-result-{call_id}-{seq}");
            let message = Object::new()
                .with("id", id.as_str())
                .with("role", "tool")
                .with("toolCallId", Value::String(call_id.clone()))
                .with(
                    "source",
                    Object::new()
                        .with("kind", "tool")
                        .with("callId", Value::String(call_id.clone())),
                )
                .with("isError", true)
                .with(
                    "content",
                    Value::Array(vec![Object::new()
                        .with("type", "text")
                        .with("text", OUTCOME_UNKNOWN_TEXT)
                        .into()]),
                );
            out.push(
                Object::new()
                    .with("type", "tool/result")
                    .with("seq", seq as f64)
                    .with("time", event.get("time").cloned().unwrap_or(Value::Null))
                    .with("surfaceOp", "append")
                    .with(
                        "sourceEventSeqs",
                        Value::Array(vec![Value::Number(call_seq as f64)]),
                    )
                    .with(
                        "data",
                        Object::new()
                            .with("turn", turn.clone())
                            .with("step", step.clone())
                            .with("message", message)
                            .with(
                                "error",
                                Object::new()
                                    .with("name", "ToolOutcomeUnknownError")
                                    .with("code", "TOOL_OUTCOME_UNKNOWN"),
                            ),
                    ),
            );
        }
        self.pending_error_turn = Some(turn);
        Ok(())
    }

    /// Track the step's started tools after the event is emitted.
    fn observe_started(&mut self, ty: &str, event: &Object, target: u64) {
        let data = event.get("data").and_then(Value::as_object);
        match ty {
            "tool/call" => {
                if let Some(Value::String(id)) = data.and_then(|d| d.get("callId")) {
                    self.started.retain(|(c, _)| c != id);
                    self.started.push((id.clone(), target));
                }
            }
            "tool/result" if event.get("surfaceOp").and_then(Value::as_str) == Some("append") => {
                let call = data
                    .and_then(|d| d.get("message"))
                    .and_then(Value::as_object)
                    .and_then(|m| m.get("source"))
                    .and_then(Value::as_object)
                    .and_then(|s| s.get("callId"));
                if let Some(Value::String(id)) = call {
                    self.started.retain(|(c, _)| c != id);
                }
            }
            "step/end" | "turn/end" => self.started.clear(),
            _ => {}
        }
    }

    /// The catalog payloads of this session (after the final cut), checked and keyed by child.
    fn existing_catalogs(&self) -> Result<HashMap<String, Object>, Refusal> {
        let mut existing = HashMap::new();
        for data in &self.catalogs {
            let fact = catalog_fact(data, "subagent/catalog")?;
            let id = fact
                .get("childId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            if existing.insert(id.clone(), fact.clone()).is_some() {
                return Err(Self::unsupported(format!("duplicate catalog child {id}")));
            }
        }
        Ok(existing)
    }
}

impl Stage for V3ToV4 {
    fn source_version(&self) -> u32 {
        3
    }

    fn header(&mut self, header: &mut Object) -> Result<(), Refusal> {
        self.seeded = header.get("isSeeded") == Some(&Value::Bool(true));
        self.has_parent = header.contains_key("parentSession");
        self.id = header
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if !self.seeded {
            self.cut = Some((0, 0));
        }
        self.time = header
            .get("createdAt")
            .cloned()
            .unwrap_or(Value::Number(0.0));
        header.insert("version".into(), Value::Number(4.0));
        Ok(())
    }

    fn event(&mut self, mut event: Object, out: &mut Vec<Object>) -> Result<(), Refusal> {
        let source_seq = self.renumber.sources();
        if event.get("seq").and_then(Value::as_safe_u64) != Some(source_seq) {
            return Err(Self::refuse("V3 source events must be dense"));
        }
        let ty = type_of(&event);
        self.check_repaired_turn(&ty, event.get("data").and_then(Value::as_object))?;
        if let Some(turn) = self.restart.observe(&ty, event.get("data")) {
            out.push(self.restart.closer(self.renumber.take(), &event, turn));
        }
        if ty == "step/end" {
            self.repair_started(&event, out)?;
        }
        let target = self.renumber.take();
        self.time = event.get("time").cloned().unwrap_or(Value::Null);
        let data = event.get("data").and_then(Value::as_object);
        if ty == "session/end-seed"
            && data.and_then(|d| d.get("inherited")) == Some(&Value::Bool(true))
        {
            if !self.seeded {
                return Err(Self::refuse(
                    "unseeded format v3 Session contains an inherited end-seed marker",
                ));
            }
            self.cut = Some((source_seq, target));
            self.catalogs.clear();
        } else if ty == "subagent/catalog" {
            self.catalogs
                .push(event.get("data").cloned().unwrap_or(Value::Null));
        } else if ty == "session-log-deepseek/delivery-accepted" {
            if data.and_then(|d| d.get("sessionFormatVersion")) == Some(&Value::Number(4.0)) {
                return Err(Self::unsupported(
                    "format v3 delivery marker claims target format v4",
                ));
            }
            let named = crate::rules::relations::delivery(event.get("data"), source_seq, 3)
                .map_err(Self::refuse)?;
            if named.is_some_and(|id| id != self.id) {
                self.foreign_delivery = Some(source_seq);
            }
        }
        let known = RELEASED_V3_EVENT_TYPES.contains(&ty.as_str());
        if !known && event.get("ignorable") == Some(&Value::Bool(true)) {
            // Opaque events keep their unvalidated references: only `seq` moves.
            self.renumber.record(Some(target));
            event.insert("type".into(), Value::from(format!("plugin:{ty}").as_str()));
            event.insert("seq".into(), Value::Number(target as f64));
            out.push(event);
            return Ok(());
        }
        if !known {
            return Err(Self::unsupported(format!(
                "format v3 contains unknown event type {} at seq {source_seq}",
                crate::json::stringify(&Value::from(ty.as_str()))
            )));
        }
        self.renumber
            .remap(&mut event, source_seq, ("startSeq", "endSeq"))
            .map_err(|_: BadReference| {
                Self::refuse("V3 reference must name an earlier source event")
            })?;
        self.renumber.record(Some(target));
        event.insert("seq".into(), Value::Number(target as f64));
        rewrite_sources(&ty, &mut event, source_seq)?;
        lift_tool_result(&ty, &mut event, source_seq)?;
        migrate_content(&ty, &mut event, source_seq)?;
        // The rewrites keep what this reads: call ids, tool sources and the surface op.
        self.observe_started(&ty, &event, target);
        out.push(event);
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<Object>) -> Result<(), Refusal> {
        if self.pending_error_turn.is_some() {
            return Err(Self::unsupported(
                "V3 tool result repair requires a recorded error turn/end",
            ));
        }
        let Some((source_cut, _)) = self.cut else {
            return Err(Self::refuse(
                "V3 inherited event count must be a non-negative safe integer",
            ));
        };
        let mut existing = self.existing_catalogs()?;
        if let Some(seq) = self.foreign_delivery {
            if !self.has_parent || seq >= source_cut {
                return Err(Self::refuse(
                    "current-generation delivery marker names the wrong Session",
                ));
            }
        }
        for child in &self.children {
            let fact = child_catalog_fact(child)?;
            if let Some(found) = existing.get(&child.child_id) {
                let conflicts = found.get("childCreatedAt")
                    != Some(&Value::Number(child.child_created_at))
                    || fact.as_ref().is_some_and(|f| {
                        ["mode", "label"].iter().any(|k| found.get(k) != f.get(k))
                    });
                if conflicts {
                    return Err(Self::unsupported(format!(
                        "Session {} conflicts with its parent catalog",
                        child.child_id
                    )));
                }
                continue;
            }
            let entry = fact.unwrap_or_else(|| {
                Object::new()
                    .with("version", 1.0)
                    .with("childId", child.child_id.as_str())
                    .with("childCreatedAt", child.child_created_at)
                    .with("mode", "unknown")
            });
            existing.insert(child.child_id.clone(), entry.clone());
            out.push(
                Object::new()
                    .with("type", "subagent/catalog")
                    .with("seq", self.renumber.take() as f64)
                    .with("time", self.time.clone())
                    .with("data", entry),
            );
        }
        Ok(())
    }
}

/// DSH's `catalogFact` over `value`, with its failure named after `subject`.
fn catalog_fact(value: &Value, subject: &str) -> Result<Object, Refusal> {
    crate::rules::relations::catalog_child(Some(value), subject)
        .map(|_| value.as_object().cloned().unwrap_or_default())
        .map_err(V3ToV4::refuse)
}

/// DSH's `childCatalogFact`: the catalog fact a child's own single descriptor supports, if any.
fn child_catalog_fact(child: &ChildFacts) -> Result<Option<Object>, Refusal> {
    let [descriptor] = child.descriptors.as_slice() else {
        return Ok(None);
    };
    let Some(d) = descriptor.as_object() else {
        return Ok(None);
    };
    let version = d.get("version").and_then(Value::as_f64);
    if !matches!(version, Some(v) if v == 1.0 || v == 2.0 || v == 3.0) {
        return Ok(None);
    }
    let subject = format!("Session {}", child.child_id);
    if d.get("provider").and_then(Value::as_str).is_none() {
        return Err(V3ToV4::unsupported(format!(
            "{subject} has an invalid subagent descriptor provider"
        )));
    }
    let mode = d.get("mode").and_then(Value::as_str);
    if version != Some(1.0) && !matches!(mode, Some("continuable" | "one-shot")) {
        return Err(V3ToV4::unsupported(format!(
            "{subject} has an invalid subagent descriptor mode"
        )));
    }
    let mut fact = Object::new()
        .with("version", 0.0)
        .with("childId", child.child_id.as_str())
        .with("childCreatedAt", child.child_created_at)
        .with(
            "mode",
            if version == Some(1.0) {
                "continuable"
            } else {
                mode.unwrap_or_default()
            },
        );
    if let Some(label) = d.get("label") {
        fact.insert("label".into(), label.clone());
    }
    catalog_fact(&Value::Object(fact), &subject).map(Some)
}
