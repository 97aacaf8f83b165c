//! Turn and step numbering and enclosure: every event that needs a turn or step is inside one.

use super::{earlier, record, Check, V4Relations};
use crate::json::{Object, Value};

impl V4Relations {
    /// A compaction's `shadowedSeqs` name an exact current surface span, not the protected head.
    pub(super) fn span(&self, ty: &str, seq: u64, data: &Object) -> Check {
        let range = record(data.get("shadowedRange"), "compaction shadowedRange")?;
        let start = earlier(range.get("start"), seq, "compaction range start")?;
        let end = earlier(range.get("end"), seq, "compaction range end")?;
        let seqs = data
            .get("shadowedSeqs")
            .and_then(Value::as_array)
            .ok_or("compaction shadowedSeqs requires an array")?;
        let first = self.surface.iter().position(|&n| n == start);
        let last = self.surface.iter().position(|&n| n == end);
        let exact = match (first, last) {
            (Some(a), Some(b)) if a <= b => {
                self.surface[a..=b].len() == seqs.len()
                    && self.surface[a..=b]
                        .iter()
                        .zip(seqs)
                        .all(|(&n, v)| v.as_f64() == Some(n as f64))
            }
            _ => false,
        };
        if !exact {
            return Err(format!(
                "{ty} shadowedSeqs do not name an exact current surface span"
            ));
        }
        let head = self.protected_head;
        if head.is_some_and(|h| seqs.iter().any(|v| v.as_f64() == Some(h as f64))) {
            return Err("compaction cannot shadow the protected system head".into());
        }
        Ok(())
    }

    pub(super) fn require_turn(&self, ty: &str) -> Check {
        match self.turn {
            Some(_) => Ok(()),
            None => Err(format!("{ty} is outside an open turn")),
        }
    }

    pub(super) fn require_step(&self, ty: &str, data: &Object) -> Check {
        let ok = self.turn.is_some()
            && self.step.is_some()
            && data.get("turn") == self.turn.as_ref()
            && data.get("step") == self.step.as_ref();
        if ok {
            Ok(())
        } else {
            Err(format!("{ty} does not match an open turn and step"))
        }
    }
}
