//! Request reconstruction: what the model was sent for step S of turn T, rebuilt from the log
//! (the latest canonical `request/header` and the messages at the step's dispatch point), and
//! the check that a recorded request equals it.
//!
//! Dispatch point: the seq before the step's first `assistant/chunk`, else before its
//! `assistant/message`, else before its `step/end` (projection-query-spec §4). In V4, whose
//! chunks are folded into streams, the first model output of a step is its first
//! `assistant/attempt` or `assistant/message`, so the point is the seq before that, else before
//! its `step/end`.

use sessionlog_codec::json::{self, Object, Value};

use crate::error::{Error, Result};
use crate::store::Store;

impl Store {
    /// The seq of the last event before step `step` of turn `turn` was dispatched (see the
    /// module docs for the V0 and V4 rules).
    pub fn dispatch_point(&self, id: &str, turn: i64, step: i64) -> Result<u64> {
        let meta = self.require_meta(id.as_bytes())?;
        // A session read through migration is asked in its successor's model and seqs.
        let migrated = self.migrated_events(&meta)?;
        let version = match migrated {
            Some(_) => sessionlog_codec::format::generation::NEWEST_VERSION,
            None => {
                meta.require_surface_model("request reconstruction")?;
                meta.version
            }
        };
        let (mut first_chunk, mut message, mut end) = (None, None, None);
        let mut visit = |seq: u64, e: &Value| {
            let o = e.as_object();
            let d = o.and_then(|o| o.get("data")).and_then(Value::as_object);
            let here = d.is_some_and(|d| {
                d.get("turn").and_then(Value::as_safe_integer) == Some(turn)
                    && d.get("step").and_then(Value::as_safe_integer) == Some(step)
            });
            if here {
                match o.and_then(|o| o.get("type")).and_then(Value::as_str) {
                    Some("assistant/chunk" | "assistant/attempt") => {
                        first_chunk.get_or_insert(seq);
                    }
                    Some("assistant/message") => {
                        message.get_or_insert(seq);
                    }
                    Some("step/end") => {
                        end.get_or_insert(seq);
                    }
                    _ => {}
                }
            }
            Ok(())
        };
        match &migrated {
            Some(events) => {
                for (seq, e) in events.iter().enumerate() {
                    visit(seq as u64, e)?;
                }
            }
            None => self.events_of(&meta, 0, None, &mut visit)?,
        }
        // V4: an attempt and a message are both the step's model output; the earlier one counts.
        let output = match (version, first_chunk, message) {
            (4, Some(a), Some(m)) => Some(a.min(m)),
            _ => first_chunk.or(message),
        };
        output
            .or(end)
            .and_then(|s: u64| s.checked_sub(1))
            .ok_or_else(|| Error::NoSuchStep {
                id: id.into(),
                turn,
                step,
            })
    }

    /// The request of step `step` of turn `turn`: `{"header","messages"}`.
    pub fn request(&self, id: &str, turn: i64, step: i64) -> Result<Value> {
        let at = self.dispatch_point(id, turn, step)?;
        let header = self.state_at(id, "requestHeader", Some(at))?;
        let messages = self.messages_at(id, Some(at))?;
        Ok(Value::Object(
            Object::new()
                .with("header", header)
                .with("messages", Value::Array(messages)),
        ))
    }

    /// Check a recorded request against the reconstruction; the error names the first field or
    /// message that differs.
    pub fn check_request(&self, id: &str, turn: i64, step: i64, recorded: &Value) -> Result<()> {
        let rebuilt = self.request(id, turn, step)?;
        let mismatch = |what: String| {
            Err(Error::ReconstructionMismatch {
                id: id.into(),
                turn,
                step,
                what,
            })
        };
        let get = |v: &Value, k: &str| {
            v.as_object()
                .and_then(|o| o.get(k))
                .cloned()
                .unwrap_or(Value::Null)
        };
        let (want_h, got_h) = (get(&rebuilt, "header"), get(recorded, "header"));
        if json::stringify(&want_h) != json::stringify(&got_h) {
            let keys: Vec<String> = [&want_h, &got_h]
                .iter()
                .filter_map(|h| h.as_object())
                .flat_map(|o| o.iter().map(|(k, _)| k.to_string()))
                .collect();
            let field = keys
                .into_iter()
                .find(|k| json::stringify(&get(&want_h, k)) != json::stringify(&get(&got_h, k)))
                .unwrap_or_default();
            return mismatch(if field.is_empty() {
                "header".into()
            } else {
                format!("header.{field}")
            });
        }
        let (want, got) = (get(&rebuilt, "messages"), get(recorded, "messages"));
        let (want, got) = (
            want.as_array().unwrap_or_default(),
            got.as_array().unwrap_or_default(),
        );
        for i in 0..want.len().max(got.len()) {
            if want.get(i).map(json::stringify) != got.get(i).map(json::stringify) {
                return mismatch(format!("messages[{i}]"));
            }
        }
        Ok(())
    }
}
