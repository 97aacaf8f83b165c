//! DSH's words, as plain lists: the event types each release knows, and the kinds of the
//! `assistant/chunk` deltas that pack into storage rows with the rows' tags. Nothing here decides
//! anything: which types a reader refuses is `format::known_types`, how runs pack is
//! `format::chunk_rows`; the JSON layer interns these words (`json::interned`), which is why they
//! sit below it, in a module that imports nothing.

/// The 48 event types DSH 0.1.0 knows (`KNOWN_SESSION_EVENT_TYPES`), sorted for binary search.
pub(crate) const V0_EVENT_TYPES: [&str; 48] = [
    "agent-preset/selected",
    "agent/inbox/spliced",
    "approval/asked",
    "approval/decided",
    "approval/policy",
    "assistant/chunk",
    "assistant/message",
    "command/done",
    "command/run",
    "compaction/end",
    "compaction/prune",
    "compaction/start",
    "compaction/summary",
    "feedback/record",
    "goal/change",
    "hook/invoked",
    "hook/result",
    "llm/retry",
    "llm/retry-started",
    "permission/preset",
    "plan/mode",
    "request/context",
    "request/header",
    "sandbox/mode",
    "schedule/change",
    "session/end-seed",
    "session/title",
    "session/title-llm-request",
    "step/end",
    "step/start",
    "subagent/descriptor",
    "team/member",
    "team/message/delivered",
    "team/message/queued",
    "team/task",
    "todo/write",
    "tool-workflow/agent-end",
    "tool-workflow/agent-start",
    "tool-workflow/run-end",
    "tool-workflow/run-start",
    "tool/call",
    "tool/code-dispatch",
    "tool/code-dispatch-start",
    "tool/result",
    "turn/end",
    "turn/start",
    "user/message",
    "web/deepseek-search-llm-request",
];

/// First-party event names the released V3 reader knows (DSH's frozen `RELEASED_V3_EVENT_TYPES`),
/// sorted for binary search.
pub(crate) const RELEASED_V3_EVENT_TYPES: [&str; 58] = [
    "agent-preset/selected",
    "agent/inbox/spliced",
    "approval/asked",
    "approval/decided",
    "approval/policy",
    "assistant/attempt",
    "assistant/message",
    "command/done",
    "command/run",
    "compaction/end",
    "compaction/prune",
    "compaction/start",
    "compaction/summary",
    "deliverables/presented",
    "feedback/message-delete",
    "feedback/message-put",
    "feedback/record",
    "goal/change",
    "hook/invoked",
    "hook/result",
    "image/offload",
    "llm/retry",
    "llm/retry-started",
    "model/selection",
    "permission/preset",
    "plan/mode",
    "request/context",
    "request/header",
    "sandbox/mode",
    "schedule/change",
    "session-log-deepseek/delivery-accepted",
    "session/end-seed",
    "session/title",
    "session/title-llm-request",
    "step/end",
    "step/start",
    "subagent/catalog",
    "subagent/descriptor",
    "subagent/model-selection-policy",
    "system/message",
    "team/member",
    "team/message/delivered",
    "team/message/queued",
    "team/task",
    "todo/write",
    "tool-workflow/agent-end",
    "tool-workflow/agent-start",
    "tool-workflow/run-end",
    "tool-workflow/run-start",
    "tool/call",
    "tool/ptc-dispatch",
    "tool/ptc-dispatch-start",
    "tool/result",
    "turn/end",
    "turn/start",
    "user/message",
    "web/deepseek-search-llm-request",
    "workspace/changes",
];

/// The types DSH 0.2 knows beyond the released V3 ones: its `KNOWN_SESSION_EVENT_TYPES` is the
/// union of the two lists.
pub(crate) const ADDED_IN_V4: [&str; 2] = ["developer/message", "working-directory/change"];

/// Legacy types the coordinator still reads by normalizing them (§4.8), so never "unknown".
pub(crate) const NORMALIZED_LEGACY: [&str; 1] = ["steering/message"];

/// Every event type DSH 0.1.0 or 0.2 knows.
pub(crate) fn event_types() -> impl Iterator<Item = &'static str> {
    V0_EVENT_TYPES
        .into_iter()
        .chain(RELEASED_V3_EVENT_TYPES)
        .chain(ADDED_IN_V4)
        .chain(NORMALIZED_LEGACY)
}

/// A text chunk's kind.
pub(crate) const TEXT_DELTA: &str = "text-delta";
/// A reasoning chunk's kind.
pub(crate) const REASONING_DELTA: &str = "reasoning-delta";
/// A tool-call chunk's kind.
pub(crate) const TOOL_CALL_DELTA: &str = "tool-call-delta";

/// The chunk kinds whose runs pack into rows.
pub(crate) const DELTA_KINDS: [&str; 3] = [TEXT_DELTA, REASONING_DELTA, TOOL_CALL_DELTA];

/// The three row tags.
pub(crate) const ROW_TAGS: [&str; 3] = ["text-chunks", "reasoning-chunks", "tool-call-chunks"];
