//! The frozen V0 inventory (DSH's `RELEASED_V0_EVENT_DISPOSITIONS`): the 51 event types a
//! released V0 or V1 log may hold and each one's exact `data` members, checked on every event
//! that enters the chain from a V0 or decoded V1 file.

use super::Refusal;
use crate::json::{stringify, Object, Value};

/// The frozen V0 inventory: each type's required and optional `data` members.
const INVENTORY: [(&str, &[&str], &[&str]); 51] = [
    ("agent-preset/selected", &["agentPreset"], &[]),
    (
        "agent/inbox/spliced",
        &["target", "start", "inserted"],
        &["removedCount", "outcome"],
    ),
    ("approval/asked", &["id", "toolName"], &["callId", "reason"]),
    ("approval/decided", &["id", "outcome"], &[]),
    ("approval/policy", &["policy"], &["source"]),
    ("assistant/chunk", &["turn", "step", "chunk"], &[]),
    (
        "assistant/message",
        &["turn", "step", "message"],
        &["usage", "interrupted"],
    ),
    (
        "command/done",
        &["commandId", "kind"],
        &["text", "sourceEventSeq"],
    ),
    ("command/run", &["commandId", "name", "source"], &["args"]),
    (
        "compaction/end",
        &["compactionId", "turn"],
        &["sourceCommandId", "error"],
    ),
    (
        "compaction/prune",
        &["shadowedRange", "shadowedSeqs", "shadowedTokenCount"],
        &[],
    ),
    (
        "compaction/start",
        &["compactionId", "turn"],
        &["sourceCommandId"],
    ),
    (
        "compaction/summary",
        &[
            "compactionId",
            "summary",
            "shadowedRange",
            "shadowedSeqs",
            "shadowedTokenCount",
            "provider",
            "model",
        ],
        &[
            "sourceCommandId",
            "maxTokens",
            "usage",
            "rawOutput",
            "llmStreamCall",
        ],
    ),
    ("feedback/record", &["text"], &[]),
    (
        "goal/change",
        &["kind", "version", "operation"],
        &[
            "goal",
            "roundsStarted",
            "createdAt",
            "updatedAt",
            "cleared",
            "clearedAt",
        ],
    ),
    (
        "hook/invoked",
        &["turn", "point", "dialect", "handlerId"],
        &["matcher"],
    ),
    (
        "hook/result",
        &["turn", "point", "handlerId", "decision", "durationMs"],
        &["exitCode", "stderrSummary"],
    ),
    (
        "llm/retry",
        &[
            "retryId",
            "turn",
            "step",
            "provider",
            "mode",
            "policyKey",
            "retry",
            "delayMs",
            "failure",
        ],
        &["maxRetries"],
    ),
    (
        "llm/retry-started",
        &["retryId", "turn", "step", "retry"],
        &[],
    ),
    (
        "model/selection",
        &["provider", "model"],
        &["reasoningEffort"],
    ),
    ("permission/preset", &["preset"], &[]),
    ("plan/mode", &["active"], &[]),
    (
        "request/context",
        &["provider", "model"],
        &["contextWindow"],
    ),
    ("request/header", &["header", "reason"], &["startsSeries"]),
    ("sandbox/mode", &["mode"], &["source"]),
    (
        "schedule/change",
        &["version", "operation"],
        &["schedule", "id", "acceptedAt"],
    ),
    (
        "session-log-deepseek/delivery-accepted",
        &["sessionId", "throughSeq"],
        &[],
    ),
    ("session/end-seed", &[], &[]),
    ("session/title", &["title", "messageSeqs", "source"], &[]),
    (
        "session/title-llm-request",
        &[
            "titleProvider",
            "messageSeqs",
            "route",
            "system",
            "messages",
            "maxTokens",
        ],
        &[],
    ),
    ("step/end", &["turn", "step"], &[]),
    ("step/start", &["turn", "step"], &[]),
    (
        "subagent/descriptor",
        &["mode", "version", "provider"],
        &[
            "label",
            "agentProvider",
            "agentModel",
            "agentReasoningEffort",
            "persona",
            "toolFilter",
        ],
    ),
    ("subagent/model-selection-policy", &["allowedModels"], &[]),
    ("team/member", &["version", "teamId", "member"], &[]),
    (
        "team/message/delivered",
        &["version", "teamId", "messageId", "targetId"],
        &[],
    ),
    (
        "team/message/queued",
        &["version", "teamId", "message"],
        &[],
    ),
    ("team/task", &["version", "teamId", "task"], &[]),
    ("todo/write", &["todos"], &[]),
    ("tool-workflow/agent-end", &["runId", "seq", "outcome"], &[]),
    (
        "tool-workflow/agent-start",
        &["runId", "seq", "label", "childId"],
        &["phase"],
    ),
    ("tool-workflow/run-end", &["runId", "stopReason"], &[]),
    ("tool-workflow/run-start", &["runId", "name"], &[]),
    (
        "tool/call",
        &["turn", "step", "callId", "name", "arguments"],
        &[],
    ),
    (
        "tool/code-dispatch",
        &[
            "rootCallId",
            "parentCallId",
            "subCallId",
            "name",
            "arguments",
            "isError",
            "content",
        ],
        &[],
    ),
    (
        "tool/code-dispatch-start",
        &[
            "rootCallId",
            "parentCallId",
            "subCallId",
            "name",
            "arguments",
        ],
        &[],
    ),
    (
        "tool/result",
        &["turn", "step", "message"],
        &["error", "meta"],
    ),
    ("turn/end", &["turn", "reason"], &[]),
    ("turn/start", &["turn"], &[]),
    ("user/message", &["role", "id", "content", "source"], &[]),
    (
        "web/deepseek-search-llm-request",
        &["endpoint", "apiVersion", "body"],
        &[],
    ),
];

/// `<label> has unexpected member "k"` before `<label> lacks required member "k"`.
pub(super) fn exact_members(
    o: &Object,
    required: &[&str],
    optional: &[&str],
    label: &str,
) -> Result<(), Refusal> {
    super::payload::keys(o, required, optional, label).map_err(|m| Refusal::format(0, m))
}

/// DSH's `assertReleasedEventPayload(event, version)`: a type of the frozen inventory with
/// exactly its `data` members (V1 also admits a delivery marker's `sessionFormatVersion`),
/// descriptor version 3, then the type's payload semantics ([`super::payload`]). Refusals are
/// the edge from `version`'s.
pub(super) fn check_payload(
    version: u32,
    ty: &str,
    event: &Object,
    seq: u64,
) -> Result<(), Refusal> {
    if ty == "assistant/chunk" {
        return Ok(());
    }
    let refuse = |m: String| Refusal::format(version, m);
    let Some((_, required, optional)) = INVENTORY.iter().find(|(t, _, _)| *t == ty) else {
        return Err(Refusal::unsupported(version, format!(
            "format v{version} contains unknown historical event type {} at seq {seq}; migration refuses unknown historical events even when ignorable",
            stringify(&Value::from(ty))
        )));
    };
    let Some(Value::Object(data)) = event.get("data") else {
        return Err(refuse(format!("{ty} {seq} data must be a JSON object")));
    };
    let v1_delivery = ["sessionFormatVersion"];
    let optional: &[&str] = if version >= 1 && ty == "session-log-deepseek/delivery-accepted" {
        &v1_delivery
    } else {
        optional
    };
    exact_members(data, required, optional, &format!("{ty} {seq} data"))
        .map_err(|r| Refusal::format(version, r.message))?;
    if ty == "subagent/descriptor" {
        let descriptor = data.get("version");
        if descriptor.and_then(Value::as_count).is_none() {
            return Err(refuse(format!(
                "subagent/descriptor {seq} version must be a non-negative safe integer"
            )));
        }
        if descriptor != Some(&Value::Number(3.0)) {
            return Err(Refusal::unsupported(
                version,
                format!(
                    "subagent/descriptor {seq} uses unsupported descriptor version {}",
                    stringify(descriptor.unwrap_or(&Value::Null))
                ),
            ));
        }
    }
    super::payload::check_semantics(version, ty, event, seq)
}

/// The required and optional `data` members of inventory type `ty`.
pub(super) fn inventory_members(
    ty: &str,
) -> Option<(&'static [&'static str], &'static [&'static str])> {
    INVENTORY
        .iter()
        .find(|(t, _, _)| *t == ty)
        .map(|(_, required, optional)| (*required, *optional))
}

/// Whether `ty` is in the frozen V0 inventory (V1's closed vocabulary).
pub(super) fn is_v0_type(ty: &str) -> bool {
    INVENTORY.iter().any(|(t, _, _)| *t == ty)
}
