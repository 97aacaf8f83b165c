//! V3→V4 content: a tool result's `tool-result` wrapper lifted into a tool-role message, and
//! content tags V3 did not define namespaced as `plugin:<tag>` (messages, summaries, dispatch
//! content, stream chunks); a V3 tool definition using V4's `deferLoading` is refused.

use super::messages::for_each_message;
use super::Refusal;
use crate::json::{Object, Value};

/// A format rule broken (DSH's `SessionFormatError`, named after the V3→V4 stage).
fn refuse(message: impl Into<String>) -> Refusal {
    Refusal::format(3, message)
}

/// The V3→V4 stage's own refusal (DSH's `SessionFormatUnsupportedMigrationError`).
fn unsupported(message: impl Into<String>) -> Refusal {
    Refusal::unsupported(3, message)
}

/// A V3 tool result (a user message holding one `tool-result` wrapper) becomes a tool-role
/// message; the wrapper's and message's extra fields are kept under `plugin:result:` and
/// `plugin:message:` names.
pub(super) fn lift_tool_result(ty: &str, event: &mut Object, seq: u64) -> Result<(), Refusal> {
    if ty != "tool/result" {
        return Ok(());
    }
    let Some(Value::Object(data)) = event.get_mut("data") else {
        return Ok(());
    };
    let Some(Value::Object(message)) = data.get("message") else {
        return Ok(());
    };
    if message.get("role").and_then(Value::as_str) != Some("user") {
        return Ok(());
    }
    let subject = format!("format v3 {ty} at seq {seq}");
    let source = message.get("source").and_then(Value::as_object);
    let call_id = source.and_then(|s| s.get("callId")).and_then(Value::as_str);
    let wrapper = match message.get("content") {
        Some(Value::Array(blocks)) if blocks.len() == 1 => blocks[0].as_object(),
        _ => None,
    };
    let id = message
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let valid = id.is_some()
        && source.and_then(|s| s.get("kind")).and_then(Value::as_str) == Some("tool")
        && call_id.is_some_and(|c| !c.is_empty())
        && wrapper.is_some_and(|w| {
            w.get("type").and_then(Value::as_str) == Some("tool-result")
                && w.get("toolCallId").and_then(Value::as_str) == call_id
        });
    let (Some(wrapper), Some(call_id), true) = (wrapper, call_id, valid) else {
        return Err(refuse(format!(
            "{subject} requires exactly one tool-result wrapper matching its tool source"
        )));
    };
    let is_error = wrapper.get("isError");
    if is_error.is_some_and(|v| !matches!(v, Value::Bool(_))) {
        return Err(refuse(format!(
            "{subject} tool-result isError must be boolean"
        )));
    }
    let content = match wrapper.get("content") {
        Some(Value::Array(blocks)) => {
            if blocks.iter().any(|b| block_type(b) == Some("tool-result")) {
                return Err(unsupported(format!(
                    "{subject} contains a nested tool-result unsupported by this converter"
                )));
            }
            Value::Array(blocks.clone())
        }
        _ => {
            return Err(refuse(format!(
                "{subject} tool-result content must be an array"
            )))
        }
    };
    let mut lifted = Object::new()
        .with("role", "tool")
        .with(
            "source",
            message.get("source").cloned().unwrap_or(Value::Null),
        )
        .with("toolCallId", call_id)
        .with("content", content);
    if let Some(e) = is_error {
        lifted.insert("isError".into(), e.clone());
    }
    lifted.insert(
        "id".into(),
        message.get("id").cloned().unwrap_or(Value::Null),
    );
    for (owner, object, fields) in [
        ("message", message, &["id", "role", "source", "content"][..]),
        (
            "result",
            wrapper,
            &["type", "toolCallId", "content", "isError"][..],
        ),
    ] {
        for (k, v) in object.iter() {
            if !fields.iter().any(|f| k.eq_str(f)) {
                lifted.insert(format!("plugin:{owner}:{k}").into(), v.clone());
            }
        }
    }
    data.insert("message".into(), Value::Object(lifted));
    Ok(())
}

fn block_type(block: &Value) -> Option<&str> {
    block.as_object()?.get("type")?.as_str()
}

/// Unknown content tags become `plugin:<tag>` in messages, summaries, dispatch content and
/// stream chunks; a V3 tool definition with V4's `deferLoading` is refused.
pub(super) fn migrate_content(ty: &str, event: &mut Object, seq: u64) -> Result<(), Refusal> {
    let subject = format!("format v3 {ty} at seq {seq}");
    for_each_message(ty, event, &mut |message| {
        namespace_content(message.get_mut("content"), &subject)
    })
    .map_err(refuse)?;
    let Some(Value::Object(data)) = event.get_mut("data") else {
        return Ok(());
    };
    let fields: &[&str] = match ty {
        "compaction/summary" => &["summary", "rawOutput"],
        "tool/ptc-dispatch" => &["content"],
        _ => &[],
    };
    for key in fields {
        if *key == "rawOutput" && !data.contains_key(key) {
            continue;
        }
        namespace_content(data.get_mut(key), &format!("{subject}.{key}")).map_err(refuse)?;
    }
    if ty == "team/message/queued" {
        if let Some(Value::Object(message)) = data.get_mut("message") {
            namespace_content(message.get_mut("content"), &subject).map_err(refuse)?;
        }
    }
    if ty == "request/header" {
        let tools = data
            .get("header")
            .and_then(Value::as_object)
            .and_then(|h| h.get("tools"))
            .and_then(Value::as_array);
        for (index, tool) in tools.unwrap_or_default().iter().enumerate() {
            if tool
                .as_object()
                .is_some_and(|t| t.contains_key("deferLoading"))
            {
                return Err(unsupported(format!(
                    "{subject}.header.tools[{index}] contains deferLoading, which is only defined in V4"
                )));
            }
        }
    }
    if ty == "assistant/message" || ty == "assistant/attempt" {
        if let Some(Value::Array(stream)) = data.get_mut("stream") {
            for (index, entry) in stream.iter_mut().enumerate() {
                let Some(entry) = entry.as_object_mut() else {
                    continue;
                };
                if entry.get("type").and_then(Value::as_str) != Some("chunk") {
                    continue;
                }
                if let Some(Value::Object(chunk)) = entry.get_mut("chunk") {
                    namespace_chunk(chunk, &format!("{subject}.stream[{index}]"))
                        .map_err(refuse)?;
                }
            }
        }
    }
    Ok(())
}

fn namespace_content(content: Option<&mut Value>, subject: &str) -> Result<(), String> {
    let Some(Value::Array(blocks)) = content else {
        return Err(format!("{subject} content must be an array"));
    };
    for (index, block) in blocks.iter_mut().enumerate() {
        namespace_block(block, &format!("{subject}[{index}]"))?;
    }
    Ok(())
}

fn namespace_block(block: &mut Value, subject: &str) -> Result<(), String> {
    let Some(Value::String(tag)) = block.as_object().and_then(|b| b.get("type")) else {
        return Err(format!(
            "{subject} requires content blocks with string type tags"
        ));
    };
    if !super::CONTENT_KINDS.iter().any(|t| tag.eq_str(t)) {
        let renamed = format!("plugin:{tag}");
        if let Some(b) = block.as_object_mut() {
            b.insert("type".into(), Value::from(renamed.as_str()));
        }
    }
    Ok(())
}

fn namespace_chunk(chunk: &mut Object, subject: &str) -> Result<(), String> {
    match chunk.get("type").and_then(Value::as_str) {
        Some("block-end") => {
            let block = chunk.get_mut("block").ok_or_else(|| {
                format!("{subject}.block requires content blocks with string type tags")
            })?;
            namespace_block(block, &format!("{subject}.block"))
        }
        Some("block-start") => {
            let Some(Value::String(tag)) = chunk.get("blockType") else {
                return Err(format!("{subject} blockType must be a string"));
            };
            if !super::CONTENT_KINDS.iter().any(|t| tag.eq_str(t)) {
                let renamed = format!("plugin:{tag}");
                chunk.insert("blockType".into(), Value::from(renamed.as_str()));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
