//! `llm/retry` chains: each retry names the failed attempt it retries, in order.

use super::{count, nonempty, Check, V4Relations};
use crate::json::{Object, Value};

impl V4Relations {
    /// `llm/retry` chains per (turn, step, provider, policy) and their started attempts.
    pub(super) fn retry(&mut self, ty: &str, data: &Object) -> Check {
        let id = nonempty(data.get("retryId"), "retryId")?;
        let attempt = count(data.get("retry"), "retry")?;
        if ty == "llm/retry-started" {
            let scheduled = self.retries.iter().find(|r| {
                r.get("retryId").and_then(Value::as_str) == Some(id.as_str())
                    && r.get("retry").and_then(Value::as_f64) == Some(attempt as f64)
            });
            let Some(scheduled) = scheduled else {
                return Err("llm/retry-started pairs no prior scheduled attempt".into());
            };
            if scheduled.get("turn") != data.get("turn")
                || scheduled.get("step") != data.get("step")
            {
                return Err("llm/retry-started changes scheduled coordinates".into());
            }
            if !self.started_retries.insert((id, attempt)) {
                return Err("llm/retry-started repeats one scheduled attempt".into());
            }
            return Ok(());
        }
        let step = self
            .step
            .clone()
            .unwrap_or(Value::Number(self.next_step - 1.0));
        if self.turn.is_none()
            || data.get("turn") != self.turn.as_ref()
            || data.get("step") != Some(&step)
        {
            return Err("llm/retry does not match the current turn and step".into());
        }
        if data.get("provider") != self.provider.as_ref() {
            return Err("llm/retry provider does not match the open request/header".into());
        }
        let key = |o: &Object| ["turn", "step", "provider", "policyKey"].map(|k| o.get(k).cloned());
        let prior = self.retries.iter().rev().find(|r| key(r) == key(data));
        let expected = match prior {
            None => 1,
            Some(p) => count(p.get("retry"), "prior retry")? + 1,
        };
        if attempt != expected {
            return Err("llm/retry skips its policy attempt sequence".into());
        }
        let same_id = |r: &Object| r.get("retryId").and_then(Value::as_str) == Some(id.as_str());
        let broken = match prior {
            None => self.retries.iter().any(same_id),
            Some(p) => !same_id(p),
        };
        if broken {
            return Err("llm/retry must keep one retryId per policy chain".into());
        }
        self.retries.push(data.clone());
        Ok(())
    }
}
