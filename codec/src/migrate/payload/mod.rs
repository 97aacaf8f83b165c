//! DSH's frozen payload semantics (`assertReleasedPayloadSemantics(event, version)` of
//! `session-format-v0-to-v1`): the value rules of every event type in the frozen V0 inventory,
//! checked after the inventory's exact `data` members.
//!
//! `version` is the payload generation: 0 for a V0 source, 1 for a decoded V1 event (2 when the
//! V2→V3 edge probes content). It selects the few generation-dependent rules: which delivery
//! markers are checked, whether a legacy goal message is admitted, and which session-reference
//! members a recall may carry. Every refusal is a DSH `SessionFormatError` with DSH's text; labels
//! compose as DSH's helpers compose them (`<label> <member>`, `<label>[<index>]`).

use std::collections::HashSet;

use super::Refusal;
use crate::json::{stringify, JsString, Object, Value};
use crate::rules::surface::deep_equal;

/// A rule's outcome: DSH's error message when broken.
pub(super) type Check<T = ()> = Result<T, String>;

/// The role a message must play where it appears (DSH's `expected`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Expected {
    User,
    Assistant,
    Tool,
}

/// DSH's `assertReleasedPayloadSemantics`: the value rules of event type `ty` at `seq`, for a
/// payload of generation `version`. The inventory's member check comes first (the caller's).
pub(super) fn check_semantics(
    version: u32,
    ty: &str,
    event: &Object,
    seq: u64,
) -> Result<(), Refusal> {
    payload(version, ty, event.get("data"), seq).map_err(|m| Refusal::format(version, m))
}

pub(super) fn payload(version: u32, ty: &str, data_value: Option<&Value>, seq: u64) -> Check {
    let data = record(data_value, &format!("{ty} {seq} data"))?;
    let label = format!("{ty} {seq}");
    let at = |member: &str| format!("{label} {member}");
    let get = |member: &str| data.get(member);
    match ty {
        "agent-preset/selected" => {
            string(get("agentPreset"), &at("agentPreset"))?;
        }
        "agent/inbox/spliced" => {
            one_of(get("target"), &["next-turn", "next-step"], &at("target"))?;
            count(get("start"), &at("start"))?;
            if let Some(v) = get("removedCount") {
                count(Some(v), &at("removedCount"))?;
            }
            let inserted_label = at("inserted message");
            array(get("inserted"), &at("inserted"), |v, _| {
                message(Some(v), &inserted_label, version, Some(Expected::User))
            })?;
            if let Some(v) = get("outcome") {
                one_of(Some(v), &["canceled"], &at("outcome"))?;
            }
        }
        "approval/asked" => {
            non_empty(get("id"), &at("id"))?;
            non_empty(get("toolName"), &at("toolName"))?;
            if let Some(v) = get("callId") {
                non_empty(Some(v), &at("callId"))?;
            }
            if let Some(v) = get("reason") {
                string(Some(v), &at("reason"))?;
            }
        }
        "approval/decided" => {
            non_empty(get("id"), &at("id"))?;
            one_of(
                get("outcome"),
                &["allowed-once", "rejected", "cancelled", "unavailable"],
                &at("outcome"),
            )?;
        }
        "approval/policy" => {
            one_of(get("policy"), &["ask", "never"], &at("policy"))?;
            if let Some(v) = get("source") {
                one_of(Some(v), &["delegation"], &at("source"))?;
            }
        }
        "assistant/chunk" => {
            coordinates(data, &label)?;
            stream_chunk(get("chunk"), &at("chunk"))?;
        }
        "assistant/message" => {
            coordinates(data, &label)?;
            message(
                get("message"),
                &at("message"),
                version,
                Some(Expected::Assistant),
            )?;
            if let Some(v) = get("usage") {
                token_usage(Some(v), &at("usage"))?;
            }
            if let Some(v) = get("interrupted") {
                exactly_true(Some(v), &at("interrupted"))?;
            }
        }
        "command/done" => {
            non_empty(get("commandId"), &at("commandId"))?;
            one_of(get("kind"), &["success", "error"], &at("kind"))?;
            if let Some(v) = get("text") {
                string(Some(v), &at("text"))?;
            }
            if let Some(v) = get("sourceEventSeq") {
                earlier_seq(Some(v), seq, &at("sourceEventSeq"))?;
            }
        }
        "command/run" => {
            non_empty(get("commandId"), &at("commandId"))?;
            non_empty(get("name"), &at("name"))?;
            if let Some(v) = get("args") {
                string(Some(v), &at("args"))?;
            }
            let source = exact(get("source"), &at("source"), &["kind"], &[])?;
            one_of(source.get("kind"), &["user"], &at("source kind"))?;
        }
        "compaction/start" | "compaction/end" => {
            non_empty(get("compactionId"), &at("compactionId"))?;
            if let Some(v) = get("sourceCommandId") {
                non_empty(Some(v), &at("sourceCommandId"))?;
            }
            if get("turn") != Some(&Value::Null) {
                count(get("turn"), &at("turn"))?;
            }
            if let Some(v) = get("error") {
                string(Some(v), &at("error"))?;
            }
        }
        "compaction/prune" => shadowed(data, seq, &label)?,
        "compaction/summary" => {
            if get("llmStreamCall") == Some(&Value::Bool(true)) && get("rawOutput").is_none() {
                return Err(format!("{label} llmStreamCall requires rawOutput"));
            }
            non_empty(get("compactionId"), &at("compactionId"))?;
            if let Some(v) = get("sourceCommandId") {
                non_empty(Some(v), &at("sourceCommandId"))?;
            }
            content_blocks(get("summary"), &at("summary"))?;
            shadowed(data, seq, &label)?;
            non_empty(get("provider"), &at("provider"))?;
            non_empty(get("model"), &at("model"))?;
            if let Some(v) = get("maxTokens") {
                count(Some(v), &at("maxTokens"))?;
            }
            if let Some(v) = get("usage") {
                token_usage(Some(v), &at("usage"))?;
            }
            if let Some(v) = get("rawOutput") {
                content_blocks(Some(v), &at("rawOutput"))?;
            }
            if let Some(v) = get("llmStreamCall") {
                exactly_true(Some(v), &at("llmStreamCall"))?;
            }
        }
        "feedback/record" => {
            non_empty(get("text"), &at("text"))?;
        }
        "goal/change" => goal_change(data, &label)?,
        "hook/invoked" => {
            count(get("turn"), &at("turn"))?;
            non_empty(get("point"), &at("point"))?;
            one_of(get("dialect"), &["claude-code", "codex"], &at("dialect"))?;
            if let Some(v) = get("matcher") {
                string(Some(v), &at("matcher"))?;
            }
            non_empty(get("handlerId"), &at("handlerId"))?;
        }
        "hook/result" => {
            count(get("turn"), &at("turn"))?;
            non_empty(get("point"), &at("point"))?;
            non_empty(get("handlerId"), &at("handlerId"))?;
            non_empty(get("decision"), &at("decision"))?;
            if let Some(v) = get("exitCode") {
                safe_integer(Some(v), &at("exitCode"))?;
            }
            if let Some(v) = get("stderrSummary") {
                string(Some(v), &at("stderrSummary"))?;
            }
            if finite(get("durationMs"), &at("durationMs"))? < 0.0 {
                return Err(format!("{label} durationMs must be non-negative"));
            }
        }
        "llm/retry" => {
            non_empty(get("retryId"), &at("retryId"))?;
            coordinates(data, &label)?;
            non_empty(get("provider"), &at("provider"))?;
            one_of(get("mode"), &["normal", "always"], &at("mode"))?;
            non_empty(get("policyKey"), &at("policyKey"))?;
            let retry = positive(get("retry"), &at("retry"))?;
            if is_str(get("mode"), "normal") {
                let max_retries = positive(get("maxRetries"), &at("maxRetries"))?;
                if retry > max_retries {
                    return Err(format!("{label} retry exceeds maxRetries"));
                }
            } else if get("maxRetries").is_some() {
                return Err(format!("{label} always mode must omit maxRetries"));
            }
            let delay = finite(get("delayMs"), &at("delayMs"))?;
            if delay < 0.0 {
                return Err(format!("{label} delayMs must be non-negative"));
            }
            if delay > 2_147_483_647.0 {
                return Err(format!("{label} delayMs exceeds the timer range"));
            }
            llm_failure(get("failure"), &at("failure"))?;
        }
        "llm/retry-started" => {
            non_empty(get("retryId"), &at("retryId"))?;
            coordinates(data, &label)?;
            positive(get("retry"), &at("retry"))?;
        }
        "model/selection" => {
            non_empty(get("provider"), &at("provider"))?;
            non_empty(get("model"), &at("model"))?;
            if let Some(v) = get("reasoningEffort") {
                non_empty(Some(v), &at("reasoningEffort"))?;
            }
        }
        "permission/preset" => {
            non_empty(get("preset"), &at("preset"))?;
        }
        "plan/mode" => {
            boolean(get("active"), &at("active"))?;
        }
        "request/context" => {
            non_empty(get("provider"), &at("provider"))?;
            non_empty(get("model"), &at("model"))?;
            if let Some(v) = get("contextWindow") {
                positive(Some(v), &at("contextWindow"))?;
            }
        }
        "request/header" => {
            request_header(get("header"), &at("header"))?;
            one_of(
                get("reason"),
                &["initial", "resume", "change", "series"],
                &at("reason"),
            )?;
            if let Some(v) = get("startsSeries") {
                exactly_true(Some(v), &at("startsSeries"))?;
            }
        }
        "sandbox/mode" => {
            one_of(
                get("mode"),
                &["read-only", "workspace-write", "danger-full-access"],
                &at("mode"),
            )?;
            if let Some(v) = get("source") {
                one_of(Some(v), &["delegation"], &at("source"))?;
            }
        }
        "schedule/change" => schedule_change(data, &label)?,
        "session-log-deepseek/delivery-accepted" => {
            let accepted = match get("sessionFormatVersion") {
                None => 0,
                Some(v) => count(Some(v), &at("sessionFormatVersion"))?,
            };
            if accepted == u64::from(version) {
                non_empty(get("sessionId"), &at("sessionId"))?;
                earlier_seq(get("throughSeq"), seq, &at("throughSeq"))?;
            }
        }
        "session/end-seed" => {}
        "session/title" => {
            non_empty(get("title"), &at("title"))?;
            seq_array(get("messageSeqs"), seq, &at("messageSeqs"), false)?;
            title_source(get("source"), &at("source"))?;
        }
        "session/title-llm-request" => {
            non_empty(get("titleProvider"), &at("titleProvider"))?;
            seq_array(get("messageSeqs"), seq, &at("messageSeqs"), true)?;
            model_route(get("route"), &at("route"))?;
            string(get("system"), &at("system"))?;
            let message_label = at("message");
            array(get("messages"), &at("messages"), |v, _| {
                message(Some(v), &message_label, version, None)
            })?;
            positive(get("maxTokens"), &at("maxTokens"))?;
        }
        "step/end" | "step/start" => coordinates(data, &label)?,
        "subagent/descriptor" => subagent_descriptor(data, &label)?,
        "subagent/model-selection-policy" => {
            allowed_models(get("allowedModels"), &at("allowedModels"))?;
        }
        "team/member" => {
            team_selector(data, &label)?;
            team_member(get("member"), &at("member"))?;
        }
        "team/message/delivered" => {
            team_selector(data, &label)?;
            non_empty(get("messageId"), &at("messageId"))?;
            non_empty(get("targetId"), &at("targetId"))?;
        }
        "team/message/queued" => {
            team_selector(data, &label)?;
            team_message(get("message"), &at("message"))?;
        }
        "team/task" => {
            team_selector(data, &label)?;
            team_task(get("task"), &at("task"))?;
        }
        "todo/write" => {
            array(get("todos"), &at("todos"), |v, item| {
                let todo = exact(Some(v), item, &["content", "status"], &[])?;
                string(todo.get("content"), &format!("{item} content"))?;
                one_of(
                    todo.get("status"),
                    &["pending", "in_progress", "completed"],
                    &format!("{item} status"),
                )
            })?;
        }
        "tool-workflow/agent-end" => {
            workflow_identity(data, &label)?;
            one_of(
                get("outcome"),
                &["completed", "failed", "cancelled"],
                &at("outcome"),
            )?;
        }
        "tool-workflow/agent-start" => {
            workflow_identity(data, &label)?;
            string(get("label"), &at("label"))?;
            if let Some(v) = get("phase") {
                string(Some(v), &at("phase"))?;
            }
            non_empty(get("childId"), &at("childId"))?;
        }
        "tool-workflow/run-end" => {
            non_empty(get("runId"), &at("runId"))?;
            one_of(
                get("stopReason"),
                &["completed", "cancelled", "error"],
                &at("stopReason"),
            )?;
        }
        "tool-workflow/run-start" => {
            non_empty(get("runId"), &at("runId"))?;
            non_empty(get("name"), &at("name"))?;
        }
        "tool/call" => {
            coordinates(data, &label)?;
            non_empty(get("callId"), &at("callId"))?;
            non_empty(get("name"), &at("name"))?;
            string(get("arguments"), &at("arguments"))?;
        }
        "tool/code-dispatch" | "tool/code-dispatch-start" => {
            for key in ["rootCallId", "parentCallId", "subCallId", "name"] {
                non_empty(get(key), &at(key))?;
            }
            if ty == "tool/code-dispatch" {
                boolean(get("isError"), &at("isError"))?;
                content_blocks(get("content"), &at("content"))?;
            }
        }
        "tool/result" => {
            coordinates(data, &label)?;
            message(
                get("message"),
                &at("message"),
                version,
                Some(Expected::Tool),
            )?;
            if let Some(v) = get("error") {
                let error = exact(Some(v), &at("error"), &["name", "code"], &[])?;
                non_empty(error.get("name"), &at("error name"))?;
                non_empty(error.get("code"), &at("error code"))?;
            }
        }
        "turn/end" => {
            count(get("turn"), &at("turn"))?;
            turn_end_reason(get("reason"), &at("reason"))?;
        }
        "turn/start" => {
            count(get("turn"), &at("turn"))?;
        }
        "user/message" => message(data_value, &label, version, Some(Expected::User))?,
        "web/deepseek-search-llm-request" => {
            non_empty(get("endpoint"), &at("endpoint"))?;
            non_empty(get("apiVersion"), &at("apiVersion"))?;
            deepseek_search_body(get("body"), &at("body"))?;
        }
        _ => {
            return Err(format!(
                "released payload validator is missing event {}",
                stringify(&Value::from(ty))
            ))
        }
    }
    Ok(())
}

mod checks;
mod events;
mod messages;
#[cfg(test)]
mod tests;

pub(super) use checks::keys;
use checks::*;
use events::*;
use messages::*;
