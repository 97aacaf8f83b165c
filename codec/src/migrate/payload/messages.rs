//! Messages, their content blocks and their sources (plugin and session-reference sources, the legacy goal message).

use super::*;

/// `messageValue`: a message with exactly `id`, `role`, `content` and `source`, its role and
/// source as `expected` requires.
pub(super) fn message(
    value: Option<&Value>,
    label: &str,
    version: u32,
    expected: Option<Expected>,
) -> Check {
    let message = exact(value, label, &["id", "role", "content", "source"], &[])?;
    non_empty(message.get("id"), &format!("{label} id"))?;
    let role_label = format!("{label} role");
    match expected {
        Some(Expected::Assistant) => one_of(message.get("role"), &["assistant"], &role_label)?,
        Some(Expected::User | Expected::Tool) => {
            one_of(message.get("role"), &["user"], &role_label)?;
        }
        None => one_of(
            message.get("role"),
            &["system", "user", "assistant"],
            &role_label,
        )?,
    }
    content_blocks(message.get("content"), &format!("{label} content"))?;
    let source_label = format!("{label} source");
    let source = record(message.get("source"), &source_label)?;
    if version < 2
        && expected == Some(Expected::User)
        && is_str(source.get("kind"), "goal")
        && source.contains_key("change")
    {
        legacy_goal_message(message, source, label)?;
    } else {
        message_source(source, &source_label, version, expected)?;
    }
    if expected == Some(Expected::Tool) {
        let block = match message.get("content") {
            Some(Value::Array(content)) if content.len() == 1 => {
                Some(record(content.first(), &format!("{label} tool result"))?)
            }
            _ => None,
        };
        let matches = block.is_some_and(|b| {
            is_str(b.get("type"), "tool-result")
                && strict_eq(b.get("toolCallId"), source.get("callId"))
        });
        if !matches {
            return Err(format!(
                "{label} must contain exactly one tool-result block"
            ));
        }
    }
    Ok(())
}

/// A released V0/V1 goal message that still carries its `goal/change`: the change must be
/// valid, name the source's goal revision, and be exactly what the message's content renders.
pub(super) fn legacy_goal_message(message: &Object, source: &Object, label: &str) -> Check {
    let source_label = format!("{label} source");
    keys(
        source,
        &["kind", "goalId", "revision", "round", "change"],
        &[],
        &source_label,
    )?;
    non_empty(source.get("goalId"), &format!("{label} source goalId"))?;
    positive(source.get("revision"), &format!("{label} source revision"))?;
    if !strict_eq(source.get("round"), Some(&Value::Number(0.0))) {
        return Err(format!("{label} legacy goal source round must be 0"));
    }
    let change_label = format!("{label} source change");
    let change = record(source.get("change"), &change_label)?;
    goal_change(change, &change_label)?;
    let cleared = is_str(change.get("operation"), "clear");
    let reference = record(
        change.get(if cleared { "cleared" } else { "goal" }),
        &format!("{label} source change ref"),
    )?;
    if !strict_eq(source.get("goalId"), reference.get("id"))
        || !strict_eq(source.get("revision"), reference.get("revision"))
    {
        return Err(format!(
            "{label} legacy goal source does not match its change"
        ));
    }
    let members: &[&str] = if cleared {
        &["cleared", "clearedAt"]
    } else {
        &["goal", "roundsStarted", "createdAt", "updatedAt"]
    };
    let mut state = Object::new();
    for key in members {
        // goal_change has required every one of these members.
        if let Some(v) = change.get(key) {
            state.insert(JsString::from(*key), v.clone());
        }
    }
    let text = format!(
        "<goal_state>{}</goal_state>",
        stringify(&Value::Object(state))
    );
    let expected = Value::Array(vec![Value::Object(
        Object::new()
            .with("type", "text")
            .with("text", text.as_str()),
    )]);
    if !message
        .get("content")
        .is_some_and(|content| deep_equal(content, &expected))
    {
        return Err(format!(
            "{label} legacy goal content does not match its change"
        ));
    }
    Ok(())
}

/// `messageSourceValue`.
pub(super) fn message_source(
    source: &Object,
    label: &str,
    version: u32,
    expected: Option<Expected>,
) -> Check {
    let kind = source.get("kind");
    if expected == Some(Expected::Assistant) && !is_str(kind, "model") {
        return Err(format!("{label} must be model source"));
    }
    if expected == Some(Expected::Tool) && !is_str(kind, "tool") {
        return Err(format!("{label} must be tool source"));
    }
    let member = |m: &str| format!("{label} {m}");
    let get = |m: &str| source.get(m);
    let Some(kind_name) = kind.and_then(Value::as_str) else {
        return non_empty(kind, &member("kind")).map(drop);
    };
    match kind_name {
        "user" => {
            keys(source, &["kind"], &["rpcId", "clientTimeZone"], label)?;
            for key in ["rpcId", "clientTimeZone"] {
                if let Some(v) = get(key) {
                    non_empty(Some(v), &member(key))?;
                }
            }
        }
        "plugin" => plugin_source(source, label)?,
        "model" => {
            keys(
                source,
                &["kind", "provider", "model"],
                &["replayState"],
                label,
            )?;
            non_empty(get("provider"), &member("provider"))?;
            non_empty(get("model"), &member("model"))?;
        }
        "tool" => {
            keys(source, &["kind", "callId"], &[], label)?;
            non_empty(get("callId"), &member("callId"))?;
        }
        "agent-instructions" => {
            keys(
                source,
                &["kind", "form", "changes"],
                &["baseline", "baselineIdentity"],
                label,
            )?;
            one_of(get("form"), &["instructions"], &member("form"))?;
            if let Some(v) = get("baseline") {
                exactly_true(Some(v), &member("baseline"))?;
            }
            if let Some(v) = get("baselineIdentity") {
                non_empty(Some(v), &member("baselineIdentity"))?;
            }
            array(get("changes"), &member("changes"), |v, change_label| {
                let change = exact(
                    Some(v),
                    change_label,
                    &["action", "scope", "path"],
                    &["digest"],
                )?;
                one_of(
                    change.get("action"),
                    &["set", "replace", "remove"],
                    &format!("{change_label} action"),
                )?;
                string(change.get("scope"), &format!("{change_label} scope"))?;
                string(change.get("path"), &format!("{change_label} path"))?;
                if let Some(v) = change.get("digest") {
                    string(Some(v), &format!("{change_label} digest"))?;
                }
                Ok(())
            })?;
        }
        "session-reference" => session_reference_source(source, label, version)?,
        "team-message" => {
            keys(
                source,
                &["kind", "teamId", "messageId", "senderId", "senderName"],
                &[],
                label,
            )?;
            for key in ["teamId", "messageId", "senderId"] {
                non_empty(get(key), &member(key))?;
            }
            string(get("senderName"), &member("senderName"))?;
        }
        "goal" => {
            keys(source, &["kind", "goalId", "revision", "round"], &[], label)?;
            non_empty(get("goalId"), &member("goalId"))?;
            positive(get("revision"), &member("revision"))?;
            positive(get("round"), &member("round"))?;
        }
        "skill-invocation" => {
            keys(source, &["kind", "name", "form"], &[], label)?;
            non_empty(get("name"), &member("name"))?;
            one_of(get("form"), &["instructions"], &member("form"))?;
        }
        "skill-catalog" => {
            keys(source, &["kind", "form", "entries"], &["update"], label)?;
            one_of(get("form"), &["catalog"], &member("form"))?;
            if let Some(v) = get("update") {
                exactly_true(Some(v), &member("update"))?;
            }
            array(get("entries"), &member("entries"), |v, entry_label| {
                let entry = exact(Some(v), entry_label, &["name", "description"], &[])?;
                non_empty(entry.get("name"), &format!("{entry_label} name"))?;
                string(
                    entry.get("description"),
                    &format!("{entry_label} description"),
                )?;
                Ok(())
            })?;
        }
        "coordinator" | "subagent-report" => {
            keys(source, &["kind", "form", "senderSessionId"], &[], label)?;
            one_of(get("form"), &["relay"], &member("form"))?;
            non_empty(get("senderSessionId"), &member("senderSessionId"))?;
        }
        "subagent-settled" => {
            keys(
                source,
                &["kind", "form", "summary", "senderSessionId"],
                &[],
                label,
            )?;
            one_of(get("form"), &["notice"], &member("form"))?;
            string(get("summary"), &member("summary"))?;
            non_empty(get("senderSessionId"), &member("senderSessionId"))?;
        }
        "webhook" => {
            keys(
                source,
                &[
                    "kind",
                    "provider",
                    "source",
                    "deliveryId",
                    "ruleId",
                    "form",
                    "summary",
                ],
                &[],
                label,
            )?;
            for key in ["provider", "source", "deliveryId", "ruleId"] {
                non_empty(get(key), &member(key))?;
            }
            one_of(get("form"), &["notice"], &member("form"))?;
            string(get("summary"), &member("summary"))?;
        }
        _ => {
            non_empty(kind, &member("kind"))?;
        }
    }
    Ok(())
}

pub(super) fn plugin_source(source: &Object, label: &str) -> Check {
    let compact = is_str(source.get("plugin"), "compact");
    let optional: &[&str] = if compact {
        &[
            "form",
            "sections",
            "summary",
            "compactionId",
            "sourceCommandId",
        ]
    } else {
        &["form", "sections", "summary"]
    };
    keys(source, &["kind", "plugin"], optional, label)?;
    let member = |m: &str| format!("{label} {m}");
    non_empty(source.get("plugin"), &member("plugin"))?;
    if compact {
        non_empty(source.get("compactionId"), &member("compactionId"))?;
        if let Some(v) = source.get("sourceCommandId") {
            non_empty(Some(v), &member("sourceCommandId"))?;
        }
    }
    let Some(form) = source.get("form") else {
        return Ok(());
    };
    one_of(
        Some(form),
        &[
            "instructions",
            "catalog",
            "snapshot",
            "notice",
            "relay",
            "recall",
        ],
        &member("form"),
    )?;
    if is_str(Some(form), "snapshot") {
        array(
            source.get("sections"),
            &member("sections"),
            |v, section_label| {
                let section = exact(Some(v), section_label, &["name", "text"], &[])?;
                non_empty(section.get("name"), &format!("{section_label} name"))?;
                string(section.get("text"), &format!("{section_label} text"))?;
                Ok(())
            },
        )?;
    } else if source.contains_key("sections") {
        return Err(format!("{label} sections require snapshot form"));
    }
    if is_str(Some(form), "notice") {
        string(source.get("summary"), &member("summary"))?;
    } else if source.contains_key("summary") {
        return Err(format!("{label} summary requires notice form"));
    }
    Ok(())
}

pub(super) fn session_reference_source(source: &Object, label: &str, version: u32) -> Check {
    keys(
        source,
        &["kind", "form", "version", "references"],
        &[],
        label,
    )?;
    one_of(source.get("form"), &["recall"], &format!("{label} form"))?;
    exactly_number(source.get("version"), 1, &format!("{label} version"))?;
    let optional: &[&str] = if version >= 1 {
        &["capturedFormatVersion"]
    } else {
        &[]
    };
    let mut expected_input_index = 0;
    let mut session_ids = HashSet::new();
    let references = array(
        source.get("references"),
        &format!("{label} references"),
        |member, member_label| {
            let reference = exact(
                Some(member),
                member_label,
                &[
                    "sessionId",
                    "label",
                    "capturedThroughSeq",
                    "compacted",
                    "originalMessages",
                    "retainedMessages",
                    "omittedMessages",
                    "omittedBytes",
                    "truncated",
                    "inputIndex",
                ],
                optional,
            )?;
            let at = |m: &str| format!("{member_label} {m}");
            let session_id = non_empty(reference.get("sessionId"), &at("sessionId"))?;
            string(reference.get("label"), &at("label"))?;
            let through = reference.get("capturedThroughSeq");
            if through != Some(&Value::Null) {
                count(through, &at("capturedThroughSeq"))?;
            }
            if let Some(v) = reference.get("capturedFormatVersion") {
                let captured = count(Some(v), &at("capturedFormatVersion"))?;
                if captured < 1 || captured > u64::from(version) {
                    return Err(format!(
                        "{member_label} capturedFormatVersion must be between 1 and {version}"
                    ));
                }
            }
            boolean(reference.get("compacted"), &at("compacted"))?;
            let original = count(reference.get("originalMessages"), &at("originalMessages"))?;
            let retained = count(reference.get("retainedMessages"), &at("retainedMessages"))?;
            let omitted = count(reference.get("omittedMessages"), &at("omittedMessages"))?;
            let omitted_bytes = count(reference.get("omittedBytes"), &at("omittedBytes"))?;
            let input_index = count(reference.get("inputIndex"), &at("inputIndex"))?;
            let truncated = boolean(reference.get("truncated"), &at("truncated"))?;
            if retained > original || omitted != original - retained {
                return Err(format!("{member_label} message counts are inconsistent"));
            }
            if truncated != (omitted > 0 || omitted_bytes > 0) {
                return Err(format!(
                    "{member_label} truncated disagrees with omitted content"
                ));
            }
            if input_index != expected_input_index {
                return Err(format!("{label} inputIndex must match reference position"));
            }
            expected_input_index += 1;
            if !session_ids.insert(session_id.clone()) {
                return Err(format!("{label} repeats sessionId {session_id}"));
            }
            Ok(())
        },
    )?;
    if references.is_empty() {
        return Err(format!("{label} references must be non-empty"));
    }
    Ok(())
}
