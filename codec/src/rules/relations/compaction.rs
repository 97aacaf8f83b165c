//! Compaction transactions: start, summary and end of one compaction, and which ones an end-seed
//! leaves orphaned.

use super::{count, nonempty, Check, Compaction, V4Relations};
use crate::json::{Object, Value};

impl V4Relations {
    /// Compaction transactions: start, one summary, end, in the owner turn; spans exact and
    /// clear of the protected head.
    pub(super) fn compact(&mut self, ty: &str, seq: u64, data: &Object) -> Check {
        if matches!(ty, "compaction/prune" | "compaction/summary") {
            self.span(ty, seq, data)?;
        }
        if ty == "compaction/prune" {
            return Ok(());
        }
        if ty == "compaction/start" {
            if self.compaction.is_some() {
                return Err("compaction/start overlaps an open compaction".into());
            }
            let owner = match data.get("turn") {
                Some(Value::Null) => None,
                v => Some(Value::Number(count(v, "compaction turn")? as f64)),
            };
            if owner != self.turn {
                return Err("compaction/start does not match the open turn".into());
            }
            self.compaction = Some(Compaction {
                id: nonempty(data.get("compactionId"), "compactionId")?,
                command: data.get("sourceCommandId").cloned(),
                turn: owner,
                seq,
                summarized: false,
            });
            return Ok(());
        }
        let turn = self.turn.clone();
        let current = self.compaction_owner(data, ty)?;
        if current.turn != turn {
            return Err(format!("{ty} does not match the open turn"));
        }
        if ty == "compaction/summary" {
            if current.summarized {
                return Err("compaction/summary repeats".into());
            }
            current.summarized = true;
            return Ok(());
        }
        // `data.turn !== current.turn`: a missing turn is `undefined`, never the owner.
        let owner = current.turn.clone().unwrap_or(Value::Null);
        if data.get("turn") != Some(&owner) {
            return Err("compaction/end changes its owner turn".into());
        }
        if !data.contains_key("error") && !current.summarized {
            return Err("successful compaction/end requires one summary".into());
        }
        self.compaction = None;
        Ok(())
    }

    /// The open compaction `data` names (by id and source command).
    pub(super) fn compaction_owner(
        &mut self,
        data: &Object,
        subject: &str,
    ) -> Result<&mut Compaction, String> {
        let id = data.get("compactionId").and_then(Value::as_str);
        let command = data.get("sourceCommandId");
        match &mut self.compaction {
            Some(c) if Some(c.id.as_str()) == id && c.command.as_ref() == command => Ok(c),
            _ => Err(format!("{subject} has no matching compaction/start")),
        }
    }
}
