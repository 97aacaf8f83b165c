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

/// A reference that cannot be remapped: which field of the event holds it (DSH's label, e.g.
/// `sources`, `surface start`, `messageSeqs`) and the value written there.
#[derive(Clone, Debug, PartialEq)]
pub struct BadReference {
    /// The field, as DSH's V1→V2 labels name it.
    pub field: &'static str,
    /// The value found.
    pub value: Value,
    /// Whether it names an earlier event the stage consumed (rather than no earlier event).
    pub consumed: bool,
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

    /// Record where source event `source` went, for a stage that emits out of source order
    /// (sources not recorded yet read as consumed).
    pub fn record_at(&mut self, source: u64, target: impl Into<Option<u64>>) {
        let Ok(at) = usize::try_from(source) else {
            return;
        };
        if self.mapping.len() <= at {
            self.mapping.resize(at + 1, None);
        }
        self.mapping[at] = target.into();
    }

    /// The target of source seq `value` (held in `field`), which must be earlier than `before`.
    pub fn map(
        &self,
        value: &Value,
        before: u64,
        field: &'static str,
    ) -> Result<u64, BadReference> {
        let bad = |consumed| BadReference {
            field,
            value: value.clone(),
            consumed,
        };
        let source = value
            .as_safe_u64()
            .filter(|&s| s < before)
            .ok_or_else(|| bad(false))?;
        match usize::try_from(source)
            .ok()
            .and_then(|i| self.mapping.get(i))
        {
            Some(Some(target)) => Ok(*target),
            Some(None) => Err(bad(true)),
            None => Err(bad(false)),
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
                        self.one(v, seq, "sourceEventSeq")?;
                    }
                }
                "compaction/summary" | "compaction/prune" => {
                    if let Some(Value::Object(range)) = data.get_mut("shadowedRange") {
                        for (key, field) in [
                            ("start", "shadowedRange start"),
                            ("end", "shadowedRange end"),
                        ] {
                            if let Some(v) = range.get_mut(key) {
                                self.one(v, seq, field)?;
                            }
                        }
                    }
                    if let Some(v) = data.get_mut("shadowedSeqs") {
                        self.all(v, seq, "shadowedSeqs")?;
                    }
                }
                "session/title" | "session/title-llm-request" => {
                    if let Some(v) = data.get_mut("messageSeqs") {
                        self.all(v, seq, "messageSeqs")?;
                    }
                }
                "image/offload" => {
                    if let Some(Value::Array(targets)) = data.get_mut("targets") {
                        for target in targets {
                            if let Some(v) = target.as_object_mut().and_then(|t| t.get_mut("seq")) {
                                self.one(v, seq, "targets seq")?;
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        if let Some(v) = event.get_mut("sourceEventSeqs") {
            self.all(v, seq, "sources")?;
        }
        if let Some(Value::Object(op)) = event.get_mut("surfaceOp") {
            for (key, field) in [
                (replace_keys.0, "surface start"),
                (replace_keys.1, "surface end"),
            ] {
                if let Some(v) = op.get_mut(key) {
                    self.one(v, seq, field)?;
                }
            }
        }
        Ok(())
    }

    fn one(&self, v: &mut Value, before: u64, field: &'static str) -> Result<(), BadReference> {
        *v = Value::Number(self.map(v, before, field)? as f64);
        Ok(())
    }

    fn all(&self, v: &mut Value, before: u64, field: &'static str) -> Result<(), BadReference> {
        let Value::Array(items) = v else {
            return Err(BadReference {
                field,
                value: v.clone(),
                consumed: false,
            });
        };
        for item in items {
            self.one(item, before, field)?;
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
        let bad = r
            .remap(&mut consumed, 4, ("start", "end"))
            .expect_err("consumed");
        assert!(bad.consumed && bad.field == "sources" && bad.value == Value::Number(1.0));
        let mut later = object(r#"{"type":"x","sourceEventSeqs":[3]}"#);
        let bad = r.remap(&mut later, 3, ("start", "end")).expect_err("later");
        assert!(!bad.consumed);
    }
}
