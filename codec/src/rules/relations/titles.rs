//! Session titles: their citations name human prompts.

use std::collections::HashSet;

use super::{earlier, record, Check, V4Relations};
use crate::json::{Object, Value};

impl V4Relations {
    /// Titles cite distinct earlier human prompts (none for a user-written title); a title
    /// request holds exactly the one prompt message it sends.
    pub(super) fn title(&self, ty: &str, seq: u64, data: &Object) -> Check {
        let refs = data
            .get("messageSeqs")
            .and_then(Value::as_array)
            .ok_or("title messageSeqs requires an array")?;
        if ty == "session/title" {
            let source = record(data.get("source"), "title source")?;
            let by_user = source.get("kind").and_then(Value::as_str) == Some("user");
            if refs.is_empty() != by_user {
                return Err(
                    "session/title messageSeqs must be empty exactly for a user title".into(),
                );
            }
        }
        let mut seen = HashSet::new();
        for r in refs {
            let s = earlier(Some(r), seq, "title messageSeqs")?;
            if !seen.insert(s) || !self.human_prompts.contains(&s) {
                return Err(format!(
                    "{ty} messageSeqs must cite distinct earlier human user/message events"
                ));
            }
        }
        if ty != "session/title-llm-request" {
            return Ok(());
        }
        let messages = data
            .get("messages")
            .and_then(Value::as_array)
            .ok_or("title messages requires an array")?;
        let message = record(messages.first(), "title message")?;
        let content = message
            .get("content")
            .and_then(Value::as_array)
            .ok_or("title content requires an array")?;
        let source = record(message.get("source"), "title source")?;
        let text_block = matches!(content, [b] if b.as_object().is_some_and(|b| b.get("type").and_then(Value::as_str) == Some("text")));
        if refs.is_empty()
            || messages.len() != 1
            || message.get("role").and_then(Value::as_str) != Some("user")
            || source.get("kind").and_then(Value::as_str) != Some("dsh-session-title-llm")
            || !text_block
        {
            return Err("session/title-llm-request messages do not represent messageSeqs".into());
        }
        Ok(())
    }
}
