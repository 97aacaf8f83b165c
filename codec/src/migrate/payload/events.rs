//! The payloads of single event families: assistant streams and turn ends, request headers and compaction ranges, goals and schedules, subagents, teams, workflows and search.

use super::*;
use crate::rules::surface::is_js_whitespace;

pub(super) fn stream_chunk(value: Option<&Value>, label: &str) -> Check {
    let chunk = record(value, label)?;
    let ty = chunk.get("type");
    let member = |m: &str| format!("{label} {m}");
    match ty.and_then(Value::as_str) {
        Some("block-start") => {
            keys(chunk, &["type", "index", "blockType"], &[], label)?;
            count(chunk.get("index"), &member("index"))?;
            non_empty(chunk.get("blockType"), &member("blockType"))?;
        }
        Some("text-delta" | "reasoning-delta") => {
            keys(chunk, &["type", "index", "text"], &[], label)?;
            count(chunk.get("index"), &member("index"))?;
            string(chunk.get("text"), &member("text"))?;
        }
        Some("tool-call-delta") => {
            keys(
                chunk,
                &["type", "index", "id", "argumentsDelta"],
                &["name"],
                label,
            )?;
            count(chunk.get("index"), &member("index"))?;
            non_empty(chunk.get("id"), &member("id"))?;
            if let Some(v) = chunk.get("name") {
                string(Some(v), &member("name"))?;
            }
            string(chunk.get("argumentsDelta"), &member("argumentsDelta"))?;
        }
        Some("block-end") => {
            keys(chunk, &["type", "index", "block"], &[], label)?;
            count(chunk.get("index"), &member("index"))?;
            let block_label = member("block");
            match chunk.get("block") {
                Some(block) => content_block(block, &block_label)?,
                None => return Err(format!("{block_label} must be a JSON object")),
            }
        }
        Some("usage") => {
            keys(chunk, &["type", "usage"], &[], label)?;
            token_usage(chunk.get("usage"), &member("usage"))?;
        }
        Some("finish") => {
            keys(chunk, &["type", "reason"], &["replayState"], label)?;
            finish_reason(chunk.get("reason"), &member("reason"))?;
            if let Some(v) = chunk.get("replayState") {
                replay_envelope(Some(v), &member("replayState"))?;
            }
        }
        _ => {
            return Err(format!(
                "{label} has unknown stream chunk type {}",
                ty.map_or_else(|| "undefined".to_owned(), stringify)
            ))
        }
    }
    Ok(())
}

pub(super) fn finish_reason(value: Option<&Value>, label: &str) -> Check {
    let reason = record(value, label)?;
    let kind = reason.get("kind");
    if is_str(kind, "aborted") || is_str(kind, "error") {
        keys(reason, &["kind", "failure"], &[], label)?;
        return llm_failure(reason.get("failure"), &format!("{label} failure"));
    }
    if ["stop", "tool-calls", "max-tokens"]
        .iter()
        .any(|k| is_str(kind, k))
    {
        keys(reason, &["kind"], &[], label)?;
    }
    non_empty(kind, &format!("{label} kind")).map(drop)
}

pub(super) fn replay_envelope(value: Option<&Value>, label: &str) -> Check {
    let replay = exact(value, label, &["response"], &["blocks"])?;
    match replay.get("blocks") {
        None | Some(Value::Array(_)) => Ok(()),
        Some(_) => Err(format!("{label} blocks must be an array")),
    }
}

pub(super) fn turn_end_reason(value: Option<&Value>, label: &str) -> Check {
    let reason = record(value, label)?;
    let kind = reason.get("kind");
    match kind.and_then(Value::as_str) {
        Some("completed" | "blocked" | "max-tokens" | "interrupted") => {
            keys(reason, &["kind"], &[], label)
        }
        Some("aborted") => {
            keys(reason, &["kind", "reason"], &[], label)?;
            let cause_label = format!("{label} abort cause");
            let cause = record(reason.get("reason"), &cause_label)?;
            if is_str(cause.get("kind"), "hook") {
                keys(cause, &["kind", "reason"], &[], &cause_label)?;
                string(cause.get("reason"), &format!("{label} abort reason")).map(drop)
            } else {
                keys(cause, &["kind"], &[], &cause_label)?;
                one_of(
                    cause.get("kind"),
                    &["user", "parent", "disposed", "legacy"],
                    &format!("{label} abort kind"),
                )
            }
        }
        Some("error") => {
            keys(reason, &["kind", "error"], &[], label)?;
            llm_failure(reason.get("error"), &format!("{label} error"))
        }
        _ => non_empty(kind, &format!("{label} kind")).map(drop),
    }
}

pub(super) fn request_header(value: Option<&Value>, label: &str) -> Check {
    let header = exact(
        value,
        label,
        &["config"],
        &["adapterDefaults", "system", "tools"],
    )?;
    let config = exact(
        header.get("config"),
        &format!("{label} config"),
        &["provider", "model"],
        &["reasoningEffort", "temperature", "maxTokens", "stop"],
    )?;
    let member = |m: &str| format!("{label} {m}");
    non_empty(config.get("provider"), &member("provider"))?;
    non_empty(config.get("model"), &member("model"))?;
    if let Some(v) = config.get("reasoningEffort") {
        non_empty(Some(v), &member("reasoningEffort"))?;
    }
    if let Some(v) = config.get("temperature") {
        finite(Some(v), &member("temperature"))?;
    }
    if let Some(v) = config.get("maxTokens") {
        positive(Some(v), &member("maxTokens"))?;
    }
    if let Some(v) = config.get("stop") {
        array(Some(v), &member("stop"), |s, l| {
            string(Some(s), l).map(drop)
        })?;
    }
    if let Some(v) = header.get("adapterDefaults") {
        let defaults = exact(
            Some(v),
            &member("adapterDefaults"),
            &[],
            &["reasoningEffort", "maxTokens"],
        )?;
        for (key, marker) in defaults.iter() {
            exactly_true(Some(marker), &format!("{label} adapterDefaults {key}"))?;
            if !config.iter().any(|(k, _)| k == key) {
                return Err(format!("{label} adapter default {key} lacks config value"));
            }
        }
    }
    if let Some(v) = header.get("system") {
        string(Some(v), &member("system"))?;
    }
    if let Some(v) = header.get("tools") {
        array(Some(v), &member("tools"), tool_schema)?;
    }
    Ok(())
}

pub(super) fn tool_schema(value: &Value, label: &str) -> Check {
    let schema = exact(
        Some(value),
        label,
        &["name", "description", "parameters"],
        &[],
    )?;
    non_empty(schema.get("name"), &format!("{label} name"))?;
    string(schema.get("description"), &format!("{label} description"))?;
    record(schema.get("parameters"), &format!("{label} parameters"))?;
    Ok(())
}

/// A compaction's shadowed range: distinct earlier seqs whose endpoints are the range's.
pub(super) fn shadowed(data: &Object, event_seq: u64, label: &str) -> Check {
    let range = exact(
        data.get("shadowedRange"),
        &format!("{label} shadowedRange"),
        &["start", "end"],
        &[],
    )?;
    let start = earlier_seq(
        range.get("start"),
        event_seq,
        &format!("{label} shadowedRange start"),
    )?;
    let end = earlier_seq(
        range.get("end"),
        event_seq,
        &format!("{label} shadowedRange end"),
    )?;
    let seqs = seq_array(
        data.get("shadowedSeqs"),
        event_seq,
        &format!("{label} shadowedSeqs"),
        true,
    )?;
    // Every member passed `earlier_seq`, so each is a safe count.
    let first = seqs.first().and_then(Value::as_safe_u64);
    let last = seqs.last().and_then(Value::as_safe_u64);
    if first != Some(start) || last != Some(end) {
        return Err(format!(
            "{label} shadowedRange must match shadowedSeqs endpoints"
        ));
    }
    count(
        data.get("shadowedTokenCount"),
        &format!("{label} shadowedTokenCount"),
    )?;
    Ok(())
}

pub(super) fn goal_change(data: &Object, label: &str) -> Check {
    let member = |m: &str| format!("{label} {m}");
    let data_label = member("data");
    one_of(data.get("kind"), &["goal/change"], &member("kind"))?;
    exactly_number(data.get("version"), 1, &member("version"))?;
    if is_str(data.get("operation"), "clear") {
        keys(
            data,
            &["kind", "version", "operation", "cleared", "clearedAt"],
            &[],
            &data_label,
        )?;
        goal_ref(data.get("cleared"), &member("cleared"))?;
        count(data.get("clearedAt"), &member("clearedAt"))?;
        return Ok(());
    }
    keys(
        data,
        &[
            "kind",
            "version",
            "operation",
            "goal",
            "roundsStarted",
            "createdAt",
            "updatedAt",
        ],
        &[],
        &data_label,
    )?;
    one_of(
        data.get("operation"),
        &["create", "edit", "pause", "resume", "complete", "block"],
        &member("operation"),
    )?;
    goal_snapshot(data.get("goal"), &member("goal"))?;
    for key in ["roundsStarted", "createdAt", "updatedAt"] {
        count(data.get(key), &member(key))?;
    }
    Ok(())
}

pub(super) fn goal_ref(value: Option<&Value>, label: &str) -> Check {
    let reference = exact(value, label, &["id", "revision"], &[])?;
    non_empty(reference.get("id"), &format!("{label} id"))?;
    positive(reference.get("revision"), &format!("{label} revision"))?;
    Ok(())
}

pub(super) fn goal_snapshot(value: Option<&Value>, label: &str) -> Check {
    let goal = exact(
        value,
        label,
        &["id", "revision", "objective", "phase", "maxGoalRounds"],
        &["blockedReason"],
    )?;
    let member = |m: &str| format!("{label} {m}");
    non_empty(goal.get("id"), &member("id"))?;
    positive(goal.get("revision"), &member("revision"))?;
    non_empty(goal.get("objective"), &member("objective"))?;
    one_of(
        goal.get("phase"),
        &["active", "paused", "blocked", "complete"],
        &member("phase"),
    )?;
    positive(goal.get("maxGoalRounds"), &member("maxGoalRounds"))?;
    if is_str(goal.get("phase"), "blocked") {
        let reason = exact(
            goal.get("blockedReason"),
            &member("blockedReason"),
            &["code", "message"],
            &[],
        )?;
        non_empty(reason.get("code"), &member("blocked code"))?;
        non_empty(reason.get("message"), &member("blocked message"))?;
    } else if goal.contains_key("blockedReason") {
        return Err(format!("{label} blockedReason requires blocked phase"));
    }
    Ok(())
}

pub(super) fn schedule_change(data: &Object, label: &str) -> Check {
    let member = |m: &str| format!("{label} {m}");
    exactly_number(data.get("version"), 1, &member("version"))?;
    let operation = data.get("operation");
    if is_str(operation, "create") {
        keys(
            data,
            &["version", "operation", "schedule"],
            &[],
            &member("data"),
        )?;
        return schedule_record(data.get("schedule"), &member("schedule"));
    }
    let optional: &[&str] = if is_str(operation, "dispatch") {
        &["acceptedAt"]
    } else {
        &[]
    };
    keys(
        data,
        &["version", "operation", "id"],
        optional,
        &member("data"),
    )?;
    one_of(operation, &["delete", "dispatch"], &member("operation"))?;
    schedule_id(data.get("id"), &member("id"))?;
    if let Some(v) = data.get("acceptedAt") {
        instant(Some(v), &member("acceptedAt"))?;
    }
    Ok(())
}

pub(super) fn schedule_record(value: Option<&Value>, label: &str) -> Check {
    let schedule = record(value, label)?;
    let member = |m: &str| format!("{label} {m}");
    match schedule.get("kind").and_then(Value::as_str) {
        Some("after") => {
            keys(
                schedule,
                &["id", "kind", "prompt", "afterSeconds", "scheduledAt"],
                &[],
                label,
            )?;
            positive(schedule.get("afterSeconds"), &member("afterSeconds"))?;
        }
        Some("at") => keys(
            schedule,
            &["id", "kind", "prompt", "scheduledAt"],
            &[],
            label,
        )?,
        Some("every") => {
            keys(
                schedule,
                &["id", "kind", "prompt", "everySeconds", "scheduledAt"],
                &[],
                label,
            )?;
            if positive(schedule.get("everySeconds"), &member("everySeconds"))? < 300 {
                return Err(format!("{label} everySeconds must be at least 300"));
            }
        }
        _ => return Err(format!("{label} has unknown schedule kind")),
    }
    schedule_id(schedule.get("id"), &member("id"))?;
    non_empty(schedule.get("prompt"), &member("prompt"))?;
    instant(schedule.get("scheduledAt"), &member("scheduledAt"))
}

/// A non-empty schedule id without surrounding JS whitespace (`value.trim() === value`).
pub(super) fn schedule_id(value: Option<&Value>, label: &str) -> Check {
    let id = non_empty(value, label)?.to_string_lossy();
    // Lone surrogates become U+FFFD here, which is no more whitespace than they are.
    if id.trim_matches(is_js_whitespace) != id {
        return Err(format!("{label} must not have surrounding whitespace"));
    }
    Ok(())
}

/// A canonical UTC instant: `YYYY-MM-DDTHH:MM:SS.mmmZ` (year not 0000) that names a real
/// calendar day, i.e. what `new Date(Date.parse(v)).toISOString()` gives back unchanged.
pub(super) fn instant(value: Option<&Value>, label: &str) -> Check {
    let canonical = value
        .and_then(Value::as_str)
        .is_some_and(is_canonical_instant);
    if canonical {
        Ok(())
    } else {
        Err(format!("{label} must be a canonical UTC instant"))
    }
}

pub(super) fn is_canonical_instant(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() != 24 {
        return false;
    }
    let digits = |range: std::ops::Range<usize>| -> Option<u32> {
        b[range].iter().try_fold(0, |n, &d| {
            d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0'))
        })
    };
    let punctuation = [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
        (23, b'Z'),
    ];
    if punctuation.iter().any(|&(at, c)| b[at] != c) {
        return false;
    }
    let (Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second), Some(_)) = (
        digits(0..4),
        digits(5..7),
        digits(8..10),
        digits(11..13),
        digits(14..16),
        digits(17..19),
        digits(20..23),
    ) else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    year != 0
        && (1..=12).contains(&month)
        && (1..=days).contains(&day)
        && hour <= 23
        && minute <= 59
        && second <= 59
}

pub(super) fn title_source(value: Option<&Value>, label: &str) -> Check {
    let source = record(value, label)?;
    if is_str(source.get("kind"), "provider") {
        keys(source, &["kind", "provider"], &["model"], label)?;
        non_empty(source.get("provider"), &format!("{label} provider"))?;
        if let Some(v) = source.get("model") {
            model_route(Some(v), &format!("{label} model"))?;
        }
        return Ok(());
    }
    keys(source, &["kind"], &[], label)?;
    one_of(
        source.get("kind"),
        &["fallback", "user"],
        &format!("{label} kind"),
    )
}

pub(super) fn model_route(value: Option<&Value>, label: &str) -> Check {
    let route = exact(value, label, &["provider", "model"], &[])?;
    non_empty(route.get("provider"), &format!("{label} provider"))?;
    non_empty(route.get("model"), &format!("{label} model"))?;
    Ok(())
}

pub(super) fn subagent_descriptor(data: &Object, label: &str) -> Check {
    let member = |m: &str| format!("{label} {m}");
    exactly_number(data.get("version"), 3, &member("version"))?;
    non_empty(data.get("provider"), &member("provider"))?;
    if is_str(data.get("mode"), "one-shot") {
        keys(
            data,
            &["mode", "version", "provider"],
            &["label"],
            &member("data"),
        )?;
        if let Some(v) = data.get("label") {
            string(Some(v), &member("label"))?;
        }
        return Ok(());
    }
    one_of(data.get("mode"), &["continuable"], &member("mode"))?;
    non_empty(data.get("label"), &member("label"))?;
    for key in [
        "agentProvider",
        "agentModel",
        "agentReasoningEffort",
        "persona",
    ] {
        if let Some(v) = data.get(key) {
            non_empty(Some(v), &member(key))?;
        }
    }
    if data.contains_key("agentProvider") != data.contains_key("agentModel") {
        return Err(format!(
            "{label} agentProvider and agentModel must be paired"
        ));
    }
    if let Some(v) = data.get("toolFilter") {
        let filter = exact(Some(v), &member("toolFilter"), &[], &["allow", "deny"])?;
        if filter.is_empty() {
            return Err(format!("{label} toolFilter requires allow or deny"));
        }
        for key in ["allow", "deny"] {
            if let Some(v) = filter.get(key) {
                array(Some(v), &member(key), |s, l| {
                    non_empty(Some(s), l).map(drop)
                })?;
            }
        }
    }
    Ok(())
}

pub(super) fn allowed_models(value: Option<&Value>, label: &str) -> Check {
    let mut seen = HashSet::new();
    let routes = array(value, label, |member, member_label| {
        let route = exact(Some(member), member_label, &["provider", "model"], &[])?;
        let provider = non_empty(route.get("provider"), &format!("{member_label} provider"))?;
        let model = non_empty(route.get("model"), &format!("{member_label} model"))?;
        // DSH keys routes by the string `${provider}\0${model}`.
        let key = [provider.as_wtf8(), model.as_wtf8()].join(&0);
        if !seen.insert(key) {
            return Err(format!("{label} repeats route {provider}\0{model}"));
        }
        Ok(())
    })?;
    if routes.is_empty() {
        return Err(format!("{label} must be non-empty"));
    }
    Ok(())
}

pub(super) fn team_selector(data: &Object, label: &str) -> Check {
    exactly_number(data.get("version"), 1, &format!("{label} version"))?;
    non_empty(data.get("teamId"), &format!("{label} teamId"))?;
    Ok(())
}

pub(super) fn team_member(value: Option<&Value>, label: &str) -> Check {
    let member = exact(
        value,
        label,
        &["id", "name", "description", "provider", "context", "phase"],
        &["error"],
    )?;
    let at = |m: &str| format!("{label} {m}");
    non_empty(member.get("id"), &at("id"))?;
    for key in ["name", "description", "provider"] {
        string(member.get(key), &at(key))?;
    }
    one_of(member.get("context"), &["fresh", "fork"], &at("context"))?;
    one_of(
        member.get("phase"),
        &["provisioning", "active", "failed"],
        &at("phase"),
    )?;
    if let Some(v) = member.get("error") {
        string(Some(v), &at("error"))?;
    }
    Ok(())
}

pub(super) fn team_task(value: Option<&Value>, label: &str) -> Check {
    let task = exact(
        value,
        label,
        &[
            "id",
            "revision",
            "subject",
            "description",
            "status",
            "blockedBy",
            "writeScopes",
        ],
        &["ownerId"],
    )?;
    let at = |m: &str| format!("{label} {m}");
    non_empty(task.get("id"), &at("id"))?;
    positive(task.get("revision"), &at("revision"))?;
    string(task.get("subject"), &at("subject"))?;
    string(task.get("description"), &at("description"))?;
    one_of(
        task.get("status"),
        &["pending", "in_progress", "completed", "deleted"],
        &at("status"),
    )?;
    if let Some(v) = task.get("ownerId") {
        non_empty(Some(v), &at("ownerId"))?;
    }
    array(task.get("blockedBy"), &at("blockedBy"), |s, l| {
        non_empty(Some(s), l).map(drop)
    })?;
    array(task.get("writeScopes"), &at("writeScopes"), |s, l| {
        string(Some(s), l).map(drop)
    })?;
    Ok(())
}

pub(super) fn team_message(value: Option<&Value>, label: &str) -> Check {
    let message = exact(
        value,
        label,
        &[
            "id",
            "senderId",
            "senderName",
            "targetId",
            "delivery",
            "content",
        ],
        &[],
    )?;
    let at = |m: &str| format!("{label} {m}");
    for key in ["id", "senderId", "targetId"] {
        non_empty(message.get(key), &at(key))?;
    }
    string(message.get("senderName"), &at("senderName"))?;
    one_of(
        message.get("delivery"),
        &["quiet", "wakeup"],
        &at("delivery"),
    )?;
    content_blocks(message.get("content"), &at("content"))
}

pub(super) fn workflow_identity(data: &Object, label: &str) -> Check {
    non_empty(data.get("runId"), &format!("{label} runId"))?;
    positive(data.get("seq"), &format!("{label} seq"))?;
    Ok(())
}

pub(super) fn deepseek_search_body(value: Option<&Value>, label: &str) -> Check {
    let body = exact(
        value,
        label,
        &["model", "max_tokens", "messages", "tools"],
        &[],
    )?;
    non_empty(body.get("model"), &format!("{label} model"))?;
    positive(body.get("max_tokens"), &format!("{label} max_tokens"))?;
    let messages = array(
        body.get("messages"),
        &format!("{label} messages"),
        |member, member_label| {
            let message = exact(Some(member), member_label, &["role", "content"], &[])?;
            one_of(
                message.get("role"),
                &["user"],
                &format!("{member_label} role"),
            )?;
            let content = array(
                message.get("content"),
                &format!("{member_label} content"),
                |block, block_label| {
                    let text = exact(Some(block), block_label, &["type", "text"], &[])?;
                    one_of(text.get("type"), &["text"], &format!("{block_label} type"))?;
                    string(text.get("text"), &format!("{block_label} text")).map(drop)
                },
            )?;
            if content.len() != 1 {
                return Err(format!(
                    "{member_label} content must contain one text block"
                ));
            }
            Ok(())
        },
    )?;
    if messages.len() != 1 {
        return Err(format!("{label} messages must contain one user message"));
    }
    let tools = array(
        body.get("tools"),
        &format!("{label} tools"),
        |member, member_label| {
            let tool = exact(
                Some(member),
                member_label,
                &["type", "name", "max_uses"],
                &[],
            )?;
            one_of(
                tool.get("type"),
                &["web_search_20250305"],
                &format!("{member_label} type"),
            )?;
            one_of(
                tool.get("name"),
                &["web_search"],
                &format!("{member_label} name"),
            )?;
            positive(tool.get("max_uses"), &format!("{member_label} max_uses")).map(drop)
        },
    )?;
    if tools.len() != 1 {
        return Err(format!("{label} tools must contain one web search tool"));
    }
    Ok(())
}
