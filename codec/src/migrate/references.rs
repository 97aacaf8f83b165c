//! Dense renumbering and the declared same-session references a stage remaps through its
//! old→new seq map (later-format-spec §3.8): `sourceEventSeqs`, `surfaceOp` endpoints,
//! `command/done.sourceEventSeq`, `compaction/summary|prune.shadowedRange.{start,end}` and
//! `shadowedSeqs`, `session/title[-llm-request].messageSeqs` and `image/offload` target seqs.
//! Every other number keeps its value. Edits are in place, so keys keep their positions, as
//! DSH's `{...event, seq, data}` spreads keep them.

use crate::json::{Object, Value};

/// A stage's old→new seq map: source seqs are dense, so the map is a vector; a source event the
/// stage consumed (a folded chunk) maps to nothing.
#[derive(Clone, Debug, Default)]
pub struct Renumber {
    mapping: Vec<Option<u64>>,
    next: u64,
}

/// Why a reference cannot be remapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadReference {
    /// Not a count, or not an earlier source event.
    NotEarlier(Option<u64>),
    /// An earlier event the stage consumed.
    Consumed(u64),
}

impl Renumber {
    /// The seq the next emitted event takes; advances the counter.
    pub fn take(&mut self) -> u64 {
        let seq = self.next;
        self.next += 1;
        seq
    }

    /// The seq the next emitted event would take.
    pub fn peek(&self) -> u64 {
        self.next
    }

    /// How many source events were recorded (the next source seq expected: sources are dense).
    pub fn sources(&self) -> u64 {
        self.mapping.len() as u64
    }

    /// Record where source event `mapping.len()` went (`None`: consumed).
    pub fn record(&mut self, target: Option<u64>) {
        self.mapping.push(target);
    }

    /// Re-point an earlier recorded source (a chunk that a later message claims lands where the
    /// message lands).
    pub fn repoint(&mut self, source: u64, target: Option<u64>) {
        if let Some(slot) = usize::try_from(source)
            .ok()
            .and_then(|i| self.mapping.get_mut(i))
        {
            *slot = target;
        }
    }

    /// The target of source seq `value`, which must be earlier than `before`.
    pub fn map(&self, value: &Value, before: u64) -> Result<u64, BadReference> {
        let source = value.as_safe_u64().filter(|&s| s < before);
        let Some(source) = source else {
            return Err(BadReference::NotEarlier(value.as_safe_u64()));
        };
        match usize::try_from(source)
            .ok()
            .and_then(|i| self.mapping.get(i))
        {
            Some(Some(target)) => Ok(*target),
            Some(None) => Err(BadReference::Consumed(source)),
            None => Err(BadReference::NotEarlier(Some(source))),
        }
    }

    /// Remap every declared reference of `event` (source seq `seq`) in place. `replace_keys` are
    /// the edge's spelling of a replacement's endpoints. The first reference that cannot be
    /// remapped is returned.
    pub fn remap(
        &self,
        event: &mut Object,
        seq: u64,
        replace_keys: (&str, &str),
    ) -> Result<(), BadReference> {
        let ty = event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if let Some(Value::Object(data)) = event.get_mut("data") {
            match ty.as_str() {
                "command/done" => {
                    if let Some(v) = data.get_mut("sourceEventSeq") {
                        self.one(v, seq)?;
                    }
                }
                "compaction/summary" | "compaction/prune" => {
                    if let Some(Value::Object(range)) = data.get_mut("shadowedRange") {
                        for key in ["start", "end"] {
                            if let Some(v) = range.get_mut(key) {
                                self.one(v, seq)?;
                            }
                        }
                    }
                    if let Some(v) = data.get_mut("shadowedSeqs") {
                        self.all(v, seq)?;
                    }
                }
                "session/title" | "session/title-llm-request" => {
                    if let Some(v) = data.get_mut("messageSeqs") {
                        self.all(v, seq)?;
                    }
                }
                "image/offload" => {
                    if let Some(Value::Array(targets)) = data.get_mut("targets") {
                        for target in targets {
                            if let Some(v) = target.as_object_mut().and_then(|t| t.get_mut("seq")) {
                                self.one(v, seq)?;
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        if let Some(v) = event.get_mut("sourceEventSeqs") {
            self.all(v, seq)?;
        }
        if let Some(Value::Object(op)) = event.get_mut("surfaceOp") {
            for key in [replace_keys.0, replace_keys.1] {
                if let Some(v) = op.get_mut(key) {
                    self.one(v, seq)?;
                }
            }
        }
        Ok(())
    }

    fn one(&self, v: &mut Value, before: u64) -> Result<(), BadReference> {
        *v = Value::Number(self.map(v, before)? as f64);
        Ok(())
    }

    fn all(&self, v: &mut Value, before: u64) -> Result<(), BadReference> {
        let Value::Array(items) = v else {
            return Err(BadReference::NotEarlier(None));
        };
        for item in items {
            self.one(item, before)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{parse, stringify};

    fn object(text: &str) -> Object {
        match parse(text).expect("JSON") {
            Value::Object(o) => o,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn references_follow_the_map_and_keep_their_positions() {
        let mut r = Renumber::default();
        for target in [Some(0), None, Some(1), Some(2)] {
            r.record(target);
        }
        let mut e = object(
            r#"{"type":"session/title","seq":4,"data":{"messageSeqs":[2,3],"x":3},"sourceEventSeqs":[0,2],"surfaceOp":{"op":"replace","start":2,"end":3}}"#,
        );
        r.remap(&mut e, 4, ("start", "end")).expect("remap");
        assert_eq!(
            stringify(&Value::Object(e)),
            r#"{"type":"session/title","seq":4,"data":{"messageSeqs":[1,2],"x":3},"sourceEventSeqs":[0,1],"surfaceOp":{"op":"replace","start":1,"end":2}}"#
        );
        let mut consumed = object(r#"{"type":"x","sourceEventSeqs":[1]}"#);
        assert_eq!(
            r.remap(&mut consumed, 4, ("start", "end")),
            Err(BadReference::Consumed(1))
        );
        let mut later = object(r#"{"type":"x","sourceEventSeqs":[3]}"#);
        assert_eq!(
            r.remap(&mut later, 3, ("start", "end")),
            Err(BadReference::NotEarlier(Some(3)))
        );
    }
}
