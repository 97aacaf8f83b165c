//! The surface as the lifecycle sees it: the protected system head and the nodes rewrites may
//! target.

use super::{earlier, Check, V4Relations};
use crate::json::{Object, Value};

impl V4Relations {
    /// DSH's surface relationship: the protected system head and exact replacement spans.
    pub(super) fn fold_surface(&mut self, ty: &str, seq: u64, o: &Object) -> Check {
        if !matches!(
            ty,
            "system/message"
                | "user/message"
                | "developer/message"
                | "assistant/message"
                | "tool/result"
        ) {
            return Ok(());
        }
        if ty == "system/message" && !self.surface.is_empty() && self.protected_head.is_none() {
            return Err("system/message requires a protected first surface head".into());
        }
        let op = o.get("surfaceOp");
        if op.and_then(Value::as_str) == Some("append") {
            if ty == "system/message" && self.surface.is_empty() {
                self.protected_head = Some(seq);
            }
            self.surface.push(seq);
            return Ok(());
        }
        let op = op
            .and_then(Value::as_object)
            .ok_or_else(|| format!("{ty} surfaceOp requires an object"))?;
        let start = earlier(op.get("startSeq"), seq, "replacement start")?;
        let end = earlier(op.get("endSeq"), seq, "replacement end")?;
        let first = self.surface.iter().position(|&n| n == start);
        let last = self.surface.iter().position(|&n| n == end);
        let (Some(first), Some(last)) = (first, last) else {
            return Err(format!(
                "{ty} replacement range is not on the current surface"
            ));
        };
        if last < first {
            return Err(format!(
                "{ty} replacement range is not on the current surface"
            ));
        }
        let removed: Vec<u64> = self.surface[first..=last].to_vec();
        let sources = o
            .get("sourceEventSeqs")
            .and_then(Value::as_array)
            .ok_or("replacement sourceEventSeqs requires an array")?;
        let cited = |s: u64| sources.iter().any(|v| v.as_f64() == Some(s as f64));
        if removed.iter().any(|&s| !cited(s)) {
            return Err("replacement sourceEventSeqs omit a shadowed surface node".into());
        }
        if self.protected_head.is_some_and(|h| removed.contains(&h)) {
            if ty != "system/message" || removed.len() != 1 {
                return Err("surface replacement cannot shadow the protected system head".into());
            }
            self.protected_head = Some(seq);
        }
        self.surface.splice(first..=last, [seq]);
        Ok(())
    }
}
