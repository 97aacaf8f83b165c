//! DSH 0.2's message-event shape (`assertMessageEventShape`): what a `Session` requires of an
//! event carrying a message when it is restored from a seed (a stored V4 log being loaded). The
//! five message types carry an identified message of their own role, with a producer source and
//! array content; system messages come from the system prompt, assistant messages from a model
//! (provider and model named), tool results from their tool call. DSH's live `append` does not
//! check this; a log breaking it is written, and refused when it is loaded.
//!
//! Every refusal is DSH's text after the caller's subject (`seed assistant/message at index 7`).

use crate::json::{Object, Value};

/// The role the message of each message-event type must have.
fn expected_role(ty: &str) -> Option<&'static str> {
    match ty {
        "system/message" => Some("system"),
        "developer/message" => Some("developer"),
        "user/message" => Some("user"),
        "assistant/message" => Some("assistant"),
        "tool/result" => Some("tool"),
        _ => None,
    }
}

/// A non-empty string member.
fn nonempty<'a>(o: &'a Object, key: &str) -> Option<&'a str> {
    o.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Check the message `event` carries, if its type carries one; `subject` names the event in the
/// refusal. `Err` is DSH's text.
pub fn check_message_shape(event: &Value, subject: &str) -> Result<(), String> {
    let Some(o) = event.as_object() else {
        return Ok(());
    };
    let ty = o.get("type").and_then(Value::as_str).unwrap_or_default();
    let Some(role) = expected_role(ty) else {
        return Ok(());
    };
    let data = o.get("data");
    let slot = if ty == "user/message" {
        data
    } else {
        data.and_then(Value::as_object)
            .and_then(|d| d.get("message"))
    };
    let message = slot
        .and_then(Value::as_object)
        .filter(|m| nonempty(m, "id").is_some())
        .ok_or_else(|| format!("{subject} lacks an identified message"))?;
    if message.get("role").and_then(Value::as_str) != Some(role) {
        return Err(format!("{subject} message must have role \"{role}\""));
    }
    let source = message
        .get("source")
        .and_then(Value::as_object)
        .filter(|s| nonempty(s, "kind").is_some())
        .ok_or_else(|| format!("{subject} message has invalid source"))?;
    if !matches!(message.get("content"), Some(Value::Array(_))) {
        return Err(format!("{subject} message has invalid content"));
    }
    let kind = nonempty(source, "kind");
    match ty {
        "system/message" if kind != Some("system-prompt") => {
            Err(format!("{subject} message must have system-prompt source"))
        }
        "assistant/message"
            if kind != Some("model")
                || nonempty(source, "provider").is_none()
                || nonempty(source, "model").is_none() =>
        {
            Err(format!("{subject} message must have model source"))
        }
        "tool/result" => {
            let call_id = nonempty(source, "callId");
            if kind != Some("tool") || call_id.is_none() {
                return Err(format!("{subject} message must have tool source"));
            }
            if message.get("toolCallId") != source.get("callId") {
                return Err(format!("{subject} message has mismatched tool call ids"));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    fn check(text: &str) -> Result<(), String> {
        check_message_shape(&parse(text).expect("json"), "seed x at index 4")
    }

    #[test]
    fn each_rule_refuses_with_dsh_s_text() {
        let assistant = |source: &str| {
            format!(
                r#"{{"type":"assistant/message","data":{{"message":{{"id":"a","role":"assistant","content":[],"source":{source}}}}}}}"#
            )
        };
        assert_eq!(
            check(&assistant(r#"{"kind":"model","provider":"p","model":"m"}"#)),
            Ok(())
        );
        for bad in [
            r#"{"kind":"model","provider":"p"}"#,
            r#"{"kind":"model","provider":"","model":"m"}"#,
            r#"{"kind":"user","provider":"p","model":"m"}"#,
        ] {
            assert_eq!(
                check(&assistant(bad)),
                Err("seed x at index 4 message must have model source".into()),
                "{bad}"
            );
        }
        assert_eq!(
            check(&assistant(r#"{"kind":""}"#)),
            Err("seed x at index 4 message has invalid source".into())
        );
        assert_eq!(
            check(
                r#"{"type":"user/message","data":{"role":"user","content":[],"source":{"kind":"user"}}}"#
            ),
            Err("seed x at index 4 lacks an identified message".into())
        );
        assert_eq!(
            check(
                r#"{"type":"user/message","data":{"id":"u","role":"assistant","content":[],"source":{"kind":"user"}}}"#
            ),
            Err("seed x at index 4 message must have role \"user\"".into())
        );
        assert_eq!(
            check(
                r#"{"type":"user/message","data":{"id":"u","role":"user","content":"x","source":{"kind":"user"}}}"#
            ),
            Err("seed x at index 4 message has invalid content".into())
        );
        assert_eq!(
            check(
                r#"{"type":"system/message","data":{"message":{"id":"s","role":"system","content":[],"source":{"kind":"user"}}}}"#
            ),
            Err("seed x at index 4 message must have system-prompt source".into())
        );
        assert_eq!(
            check(
                r#"{"type":"tool/result","data":{"message":{"id":"t","role":"tool","content":[],"toolCallId":"b","source":{"kind":"tool","callId":"c"}}}}"#
            ),
            Err("seed x at index 4 message has mismatched tool call ids".into())
        );
        assert_eq!(
            check(
                r#"{"type":"tool/result","data":{"message":{"id":"t","role":"tool","content":[],"toolCallId":"c","source":{"kind":"tool"}}}}"#
            ),
            Err("seed x at index 4 message must have tool source".into())
        );
        assert_eq!(check(r#"{"type":"turn/start","data":7}"#), Ok(()));
    }
}
