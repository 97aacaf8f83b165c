//! Tool calls advertised by assistant messages and settled by their results (and the exact repair
//! form of a call that never started).

use super::{nonempty, Call, Check, V4Relations};
use crate::json::{Object, Value};
use crate::rules::open_turn::INTERRUPTED_NOT_STARTED;

impl V4Relations {
    pub(super) fn close_tools(&mut self, ty: &str) -> Check {
        match self.tools.first() {
            Some(call) => Err(format!("{ty} leaves unresolved tool call {}", call.id)),
            None => Ok(()),
        }
    }

    /// Calls advertised by assistant messages, started by `tool/call`, settled by appended
    /// results.
    pub(super) fn tool(&mut self, ty: &str, o: &Object, data: &Object) -> Check {
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
}

/// DSH's `notStartedRepair`: the exact form of a result for a call that never started.
pub(super) fn not_started_repair(
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
