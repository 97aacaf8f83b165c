//! The V2→V3 edge's source audit (DSH's `assertEvent(event, 2)`): a V2 event is transformed
//! only when every member is one the edge knows, so no coordinate can hide in an unaudited field.
//!
//! Checked here: the released V2 vocabulary with each type's exact envelope and `data` members;
//! `ignorable` and `surfaceOp` presence; feedback payloads; content kinds and `file` blocks in
//! every content the edge carries (messages, spliced and title messages, summaries, dispatch
//! content, assistant streams); message source kinds; positive assistant coordinates; the
//! inherited marker; the canonical id of a `TOOL_NOT_STARTED` repair; and each content block
//! against the frozen V0 field rules, probed as DSH probes it.

use super::inventory::inventory_members;
use super::Refusal;
use crate::json::{stringify, Object, Value};

/// Message source kinds the edge knows how to carry.
const SOURCE_KINDS: [&str; 15] = [
    "user",
    "plugin",
    "model",
    "tool",
    "agent-instructions",
    "session-reference",
    "team-message",
    "goal",
    "skill-invocation",
    "skill-catalog",
    "coordinator",
    "subagent-report",
    "subagent-settled",
    "webhook",
    "agent-message",
];

/// The V2 surface types.
pub(super) const SURFACE_TYPES: [&str; 4] = [
    "system/message",
    "user/message",
    "assistant/message",
    "tool/result",
];

fn unsupported(message: impl Into<String>) -> Refusal {
    Refusal::unsupported(2, message)
}

fn refuse(message: impl Into<String>) -> Refusal {
    Refusal::format(2, message)
}

/// The released V2 members of `ty` (`RELEASED_V2_EVENT_DISPOSITIONS`): V0's inventory without
/// top-level chunks, with embedded streams, the attempt, the V1 delivery marker and the
/// inherited end-seed.
fn v2_members(ty: &str) -> Option<(&'static [&'static str], &'static [&'static str])> {
    match ty {
        "assistant/chunk" => None,
        "assistant/attempt" => Some((&["turn", "step", "stream"], &[])),
        "assistant/message" => Some((
            &["turn", "step", "message", "stream"],
            &["usage", "interrupted"],
        )),
        "session-log-deepseek/delivery-accepted" => {
            Some((&["sessionId", "throughSeq"], &["sessionFormatVersion"]))
        }
        "session/end-seed" => Some((&[], &["inherited"])),
        _ => inventory_members(ty),
    }
}

/// DSH's `keys`: a missing required member first, then an unexpected one.
fn keys(o: &Object, required: &[&str], optional: &[&str], label: &str) -> Result<(), Refusal> {
    if let Some(k) = required.iter().find(|k| !o.contains_key(k)) {
        return Err(refuse(format!("{label} lacks required field {k}")));
    }
    if let Some((k, _)) = o
        .iter()
        .find(|(k, _)| !required.iter().chain(optional).any(|m| k.eq_str(m)))
    {
        return Err(refuse(format!("{label} has unexpected field {k}")));
    }
    Ok(())
}

fn record<'a>(v: Option<&'a Value>, label: &str) -> Result<&'a Object, Refusal> {
    v.and_then(Value::as_object)
        .ok_or_else(|| refuse(format!("{label} must be an object")))
}

/// Audit one V2 source event (`seq` is its source seq).
pub(super) fn audit(ty: &str, event: &Object, seq: u64) -> Result<(), Refusal> {
    let feedback = matches!(ty, "feedback/message-put" | "feedback/message-delete");
    let members = v2_members(ty);
    if members.is_none() && !feedback {
        return Err(unsupported(format!(
            "format v2 to v3 cannot safely transform unclassified event {ty}"
        )));
    }
    let surface = SURFACE_TYPES.contains(&ty);
    let envelope: &[&str] = if surface {
        &["ignorable", "sourceEventSeqs", "surfaceOp"]
    } else {
        &["ignorable"]
    };
    keys(event, &["type", "seq", "time", "data"], envelope, ty)?;
    if event
        .get("ignorable")
        .is_some_and(|i| *i != Value::Bool(true))
    {
        return Err(refuse("ignorable must be true"));
    }
    if surface && !event.contains_key("surfaceOp") {
        return Err(refuse(format!("{ty} requires surfaceOp")));
    }
    let data = record(event.get("data"), &format!("{ty} data"))?;
    let Some((required, optional)) = members else {
        return check_feedback(ty, data);
    };
    keys(data, required, optional, &format!("{ty} data"))?;
    check_owned_content(ty, data, seq)?;
    if matches!(ty, "assistant/message" | "assistant/attempt") {
        for coordinate in ["turn", "step"] {
            let v = data.get(coordinate);
            if v.and_then(Value::as_count).is_none() {
                return Err(refuse(format!(
                    "{coordinate} must be a non-negative safe integer"
                )));
            }
            if v.and_then(Value::as_f64) == Some(0.0) {
                return Err(refuse(format!("{coordinate} must be positive")));
            }
        }
    }
    if ty == "session/end-seed"
        && data
            .get("inherited")
            .is_some_and(|i| *i != Value::Bool(true))
    {
        return Err(refuse("session/end-seed inherited must be true"));
    }
    match ty {
        "user/message" => check_source(data)?,
        "assistant/message" | "tool/result" => {
            check_source(record(data.get("message"), "message")?)?
        }
        "agent/inbox/spliced" | "session/title-llm-request" => {
            let key = if ty == "agent/inbox/spliced" {
                "inserted"
            } else {
                "messages"
            };
            for message in data.get(key).and_then(Value::as_array).unwrap_or_default() {
                check_source(record(Some(message), "message")?)?;
            }
        }
        _ => {}
    }
    if ty == "tool/result" {
        check_repair_identity(data)?;
    }
    Ok(())
}

/// A `TOOL_NOT_STARTED` repair must carry its canonical `interrupted-tool-result-<call>-<n>` id.
fn check_repair_identity(data: &Object) -> Result<(), Refusal> {
    let code = data
        .get("error")
        .and_then(Value::as_object)
        .and_then(|e| e.get("code"))
        .and_then(Value::as_str);
    if code != Some("TOOL_NOT_STARTED") {
        return Ok(());
    }
    let message = record(data.get("message"), "tool result message")?;
    let source = record(message.get("source"), "tool result source")?;
    let canonical = match (
        message.get("id").and_then(Value::as_str),
        source.get("callId").and_then(Value::as_str),
    ) {
        (Some(id), Some(call)) => id
            .strip_prefix(&format!("interrupted-tool-result-{call}-"))
            .is_some_and(|n| {
                (n == "0" || (!n.starts_with('0') && !n.is_empty()))
                    && n.bytes().all(|b| b.is_ascii_digit())
                    && n.parse::<f64>()
                        .is_ok_and(|x| crate::json::safe_integer(x).is_some())
            }),
        _ => false,
    };
    if canonical {
        Ok(())
    } else {
        Err(refuse(
            "TOOL_NOT_STARTED repair requires its canonical historical message id",
        ))
    }
}

fn check_source(message: &Object) -> Result<(), Refusal> {
    let source = record(message.get("source"), "message source")?;
    let kind = source.get("kind").and_then(Value::as_str);
    if !kind.is_some_and(|k| SOURCE_KINDS.contains(&k)) {
        return Err(unsupported(
            "cannot safely transform unclassified message source",
        ));
    }
    if kind == Some("agent-message") {
        keys(
            source,
            &["kind", "form", "senderSessionId"],
            &[],
            "agent-message source",
        )?;
        let relay = source.get("form").and_then(Value::as_str) == Some("relay")
            && source
                .get("senderSessionId")
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty());
        if !relay {
            return Err(refuse(
                "agent-message source requires relay form and senderSessionId",
            ));
        }
    }
    Ok(())
}

/// Every content the edge carries holds only kinds it knows.
fn check_owned_content(ty: &str, data: &Object, seq: u64) -> Result<(), Refusal> {
    let label = format!("format v2 {ty} at seq {seq} data");
    match ty {
        "user/message" | "tool/code-dispatch" => {
            check_kinds(data.get("content"), &format!("{label}.content"))?;
        }
        "assistant/message" | "tool/result" | "team/message/queued" => {
            let message = record(data.get("message"), &format!("{label}.message"))?;
            check_kinds(message.get("content"), &format!("{label}.message.content"))?;
        }
        "agent/inbox/spliced" | "session/title-llm-request" => {
            let field = if ty == "agent/inbox/spliced" {
                "inserted"
            } else {
                "messages"
            };
            for (i, value) in content_array(data.get(field), &format!("{label}.{field}"))?
                .iter()
                .enumerate()
            {
                let path = format!("{label}.{field}[{i}]");
                check_kinds(
                    record(Some(value), &path)?.get("content"),
                    &format!("{path}.content"),
                )?;
            }
        }
        "compaction/summary" => {
            check_kinds(data.get("summary"), &format!("{label}.summary"))?;
            if data.contains_key("rawOutput") {
                check_kinds(data.get("rawOutput"), &format!("{label}.rawOutput"))?;
            }
        }
        _ => {}
    }
    if matches!(ty, "assistant/message" | "assistant/attempt") {
        for (i, value) in content_array(data.get("stream"), &format!("{label}.stream"))?
            .iter()
            .enumerate()
        {
            let path = format!("{label}.stream[{i}]");
            let entry = record(Some(value), &path)?;
            if entry.get("type").and_then(Value::as_str) != Some("chunk") {
                continue;
            }
            let chunk = record(entry.get("chunk"), &format!("{path}.chunk"))?;
            match chunk.get("type").and_then(Value::as_str) {
                Some("block-end") => {
                    check_block(chunk.get("block"), &format!("{path}.chunk.block"))?
                }
                Some("block-start") => {
                    check_kind(chunk.get("blockType"), &format!("{path}.chunk.blockType"))?;
                }
                _ => {}
            }
        }
    }
    Ok(())
}

fn content_array<'a>(v: Option<&'a Value>, label: &str) -> Result<&'a [Value], Refusal> {
    v.and_then(Value::as_array)
        .ok_or_else(|| refuse(format!("{label}: content must be an array")))
}

fn check_kind(kind: Option<&Value>, label: &str) -> Result<(), Refusal> {
    if kind
        .and_then(Value::as_str)
        .is_some_and(|k| super::CONTENT_KINDS.contains(&k))
    {
        return Ok(());
    }
    Err(unsupported(format!(
        "{label}: cannot safely transform unclassified message content kind {}",
        kind.map_or_else(|| "undefined".into(), stringify)
    )))
}

fn check_kinds(content: Option<&Value>, label: &str) -> Result<(), Refusal> {
    for (i, block) in content_array(content, label)?.iter().enumerate() {
        check_block(Some(block), &format!("{label}[{i}]"))?;
    }
    Ok(())
}

fn check_block(value: Option<&Value>, label: &str) -> Result<(), Refusal> {
    let block = record(value, label)?;
    check_kind(block.get("type"), label)?;
    match block.get("type").and_then(Value::as_str) {
        Some("tool-result") => {
            if !matches!(block.get("content"), Some(Value::Array(_))) {
                return Err(refuse(format!(
                    "{label}.content: invalid message content kind \"tool-result\": content must be an array"
                )));
            }
            check_kinds(block.get("content"), &format!("{label}.content"))?;
            // Its children are checked above; the block itself is probed without them.
            let mut leaf = block.clone();
            leaf.insert("content".into(), Value::Array(Vec::new()));
            probe(leaf, label)
        }
        Some("file") => {
            let what = format!("{label} kind \"file\"");
            keys(block, &["type", "attachment"], &[], &what)?;
            let attachment = record(block.get("attachment"), &format!("{what} attachment"))?;
            keys(
                attachment,
                &["attachmentId", "name", "bytes"],
                &[],
                &format!("{what} attachment"),
            )?;
            let named = attachment
                .get("attachmentId")
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
                && attachment.get("name").and_then(Value::as_str).is_some();
            if !named {
                return Err(refuse(format!(
                    "{what}: file attachment requires attachmentId and name"
                )));
            }
            if attachment.get("bytes").and_then(Value::as_count).is_none() {
                return Err(refuse(format!(
                    "{what} attachment bytes must be a non-negative safe integer"
                )));
            }
            Ok(())
        }
        _ => probe(block.clone(), label),
    }
}

/// DSH reuses the frozen V0 field rules for one block: a user message holding just `block`
/// must pass them, else the block is refused under its own path.
fn probe(block: Object, label: &str) -> Result<(), Refusal> {
    let kind = block.get("type").cloned().unwrap_or_default();
    let message = Object::new()
        .with("id", "content-admission")
        .with("role", "user")
        .with("source", Object::new().with("kind", "user"))
        .with("content", Value::Array(vec![Value::Object(block)]));
    let event = Object::new()
        .with("type", "user/message")
        .with("seq", 0.0)
        .with("time", 0.0)
        .with("data", message);
    super::payload::check_semantics(2, "user/message", &event, 0).map_err(|r| {
        refuse(format!(
            "{label}: invalid message content kind {}: SessionFormatError: {}",
            stringify(&kind),
            r.message
        ))
    })
}

/// DSH's feedback payloads, the two V2 types outside the frozen inventory.
fn check_feedback(ty: &str, data: &Object) -> Result<(), Refusal> {
    let put = ty == "feedback/message-put";
    let required: &[&str] = if put {
        &["sessionId", "item"]
    } else {
        &["sessionId", "messageId"]
    };
    keys(data, required, &[], ty)?;
    if data.get("sessionId").and_then(Value::as_str).is_none() {
        return Err(refuse("feedback sessionId must be a string"));
    }
    if !put {
        return match data.get("messageId").and_then(Value::as_str) {
            Some(_) => Ok(()),
            None => Err(refuse("feedback messageId must be a string")),
        };
    }
    let item = record(data.get("item"), "feedback item")?;
    keys(
        item,
        &["messageId", "rating", "version", "createdAt", "updatedAt"],
        &["note"],
        "feedback item",
    )?;
    for key in ["messageId", "version"] {
        if item.get(key).and_then(Value::as_str).is_none() {
            return Err(refuse(format!("feedback {key} must be a string")));
        }
    }
    if !matches!(
        item.get("rating").and_then(Value::as_str),
        Some("positive" | "negative")
    ) {
        return Err(refuse("invalid feedback rating"));
    }
    if item.get("note").is_some_and(|n| n.as_str().is_none()) {
        return Err(refuse("feedback note must be a string"));
    }
    for key in ["createdAt", "updatedAt"] {
        if item.get(key).and_then(Value::as_count).is_none() {
            return Err(refuse(format!(
                "feedback {key} must be a non-negative safe integer"
            )));
        }
    }
    Ok(())
}
