//! DSH 0.2's producer-owned message sources (V3→V4): a released `{kind:"plugin", plugin:P}`
//! source becomes the producer's own kind (`compact` → `compact-checkpoint`, the system prompt
//! → `system-prompt` or `runtime-context`, 25 first-party names kept, anything else
//! `plugin:P`), its `plugin` field dropped.

use super::messages::for_each_message;
use super::Refusal;
use crate::json::{Object, Value};

/// A format rule broken (DSH's `SessionFormatError`, named after the V3→V4 stage).
fn refuse(message: impl Into<String>) -> Refusal {
    Refusal::format(3, message)
}

/// Released plugin names whose V4 producer kind is another name.
const RENAMED_PRODUCERS: [(&str, &str); 5] = [
    ("compact", "compact-checkpoint"),
    ("tools-code-mode", "ptc-mode"),
    ("tools-ptc", "ptc-mode"),
    ("dsh-compaction-basic", "compact-basic"),
    ("@deepseek-ai/dsh-system-prompt", "runtime-context"),
];

/// First-party plugin names that keep their name as the V4 producer kind.
const SAME_NAME_PRODUCERS: [&str; 25] = [
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
    "model-selection",
    "plan-mode",
    "time-context",
    "tmux-context",
    "user-approval",
    "repeat-tool-reminder",
    "tool-cordis",
    "cordis-host-runner",
    "tool-goal",
    "tool-jobs",
    "hooks-codex",
    "hooks-claude-code",
    "schedule",
    "dsh-session-title-llm",
];

/// `{kind:"plugin", plugin:P}` sources become the producer's own kind.
pub(super) fn rewrite_sources(ty: &str, event: &mut Object, seq: u64) -> Result<(), Refusal> {
    for_each_message(ty, event, &mut |message| {
        let role = message.get("role").cloned();
        let Some(Value::Object(source)) = message.get_mut("source") else {
            return Ok(());
        };
        let kind = source
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if kind.is_empty() {
            return Err(format!(
                "message source at seq {seq} requires a nonempty kind"
            ));
        }
        if kind != "plugin" {
            return Ok(());
        }
        let Some(plugin) = source
            .get("plugin")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            return Err(format!(
                "plugin source at seq {seq} is not canonical: plugin requires a string"
            ));
        };
        let kind = producer_kind(&plugin, role.as_ref());
        source.remove("plugin");
        source.insert("kind".into(), Value::from(kind.as_str()));
        Ok(())
    })
    .map_err(refuse)
}

/// The V4 producer kind of released plugin `plugin` on a message of `role`.
pub fn producer_kind(plugin: &str, role: Option<&Value>) -> String {
    if plugin == "@deepseek-ai/dsh-system-prompt" && role.and_then(Value::as_str) == Some("system")
    {
        return "system-prompt".into();
    }
    if let Some((_, to)) = RENAMED_PRODUCERS.iter().find(|(from, _)| *from == plugin) {
        return (*to).into();
    }
    if SAME_NAME_PRODUCERS.contains(&plugin) {
        return plugin.into();
    }
    format!("plugin:{plugin}")
}
