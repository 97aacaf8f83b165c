//! PTC dispatches: a start per sub-call, settled once, under one root.

use super::{nonempty, Check, Dispatch, V4Relations};
use crate::json::{Object, Value};
use crate::rules::surface::deep_equal;

impl V4Relations {
    /// PTC dispatches: a start per sub-call, settled once, under one root.
    pub(super) fn dispatch(&mut self, ty: &str, data: &Object) -> Check {
        self.require_turn(ty)?;
        let id = nonempty(data.get("subCallId"), "PTC subCallId")?;
        let root = nonempty(data.get("rootCallId"), "PTC rootCallId")?;
        let parent = nonempty(data.get("parentCallId"), "PTC parentCallId")?;
        let root_of = |d: &Dispatch| {
            d.data
                .get("rootCallId")
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        if self
            .dispatches
            .get(&id)
            .is_some_and(|d| root_of(d).as_deref() != Some(root.as_str()))
        {
            return Err("PTC dispatch changes its rootCallId".into());
        }
        if parent != root
            && self.dispatches.get(&parent).and_then(root_of).as_deref() != Some(root.as_str())
        {
            return Err("PTC parentCallId does not belong to rootCallId".into());
        }
        if ty == "tool/ptc-dispatch-start" {
            if self.dispatches.contains_key(&id) {
                return Err("PTC dispatch repeats subCallId".into());
            }
            let start = Dispatch {
                data: data.clone(),
                settled: false,
            };
            self.dispatches.insert(id, start);
            return Ok(());
        }
        let Some(start) = self.dispatches.get_mut(&id).filter(|d| !d.settled) else {
            return Err("PTC dispatch has no unique start".into());
        };
        let same = ["rootCallId", "parentCallId", "name", "arguments"]
            .iter()
            .all(|k| match (start.data.get(k), data.get(k)) {
                (Some(a), Some(b)) => deep_equal(a, b),
                (None, None) => true,
                _ => false,
            });
        if !same {
            return Err("PTC dispatch does not match its start".into());
        }
        start.settled = true;
        Ok(())
    }
}
