//! DSH's `AssistantStreamAccumulator`: the compact `stream` of an assistant attempt as V2+
//! embeds it. Adjacent text, reasoning and tool-call deltas of one block fold into packed
//! records (`{type:"text-chunks",time0,index,dt,texts}` …, `dt` the gaps between member
//! times); every other chunk is kept raw as `{type:"chunk",time,chunk}`.

use crate::json::{Object, Value};

/// One record being built, with the time of its last member.
#[derive(Debug)]
struct Record {
    object: Object,
    last_time: f64,
}

/// The stream of one attempt.
#[derive(Debug, Default)]
pub struct StreamAccumulator {
    records: Vec<Record>,
}

/// The packed record type a delta chunk folds into.
fn packed_type(chunk_type: &str) -> Option<&'static str> {
    match chunk_type {
        "text-delta" => Some("text-chunks"),
        "reasoning-delta" => Some("reasoning-chunks"),
        "tool-call-delta" => Some("tool-call-chunks"),
        _ => None,
    }
}

impl StreamAccumulator {
    /// Add the chunk that arrived at `time`. `Err` is DSH's `TypeError` text.
    pub fn push(&mut self, time: &Value, chunk: &Value) -> Result<(), String> {
        let Some(t) = time.as_safe_integer().map(|t| t as f64) else {
            return Err(format!(
                "Assistant stream time must be a safe integer, got {}",
                crate::json::js_string_of(time)
            ));
        };
        if crate::json::admit(chunk).is_err() {
            return Err("Assistant stream chunk must be losslessly JSON-serializable".into());
        }
        let Some(c) = chunk.as_object() else {
            return Err(format!(
                "unreachable variant in AssistantStreamAccumulator.push: {}",
                crate::json::stringify(chunk)
            ));
        };
        let ty = c.get("type").and_then(Value::as_str).unwrap_or_default();
        let raw = || Record {
            object: Object::new()
                .with("type", "chunk")
                .with("time", t)
                .with("chunk", chunk.clone()),
            last_time: t,
        };
        match ty {
            "block-start" | "block-end" | "usage" | "finish" => {
                self.records.push(raw());
                Ok(())
            }
            "text-delta" | "reasoning-delta" | "tool-call-delta" => {
                let index = c.get("index").filter(|i| i.as_safe_u64().is_some());
                let Some(index) = index else {
                    return Err(format!("{ty} index must be a non-negative safe integer"));
                };
                let packed = packed_type(ty).unwrap_or_default();
                if ty == "tool-call-delta" {
                    let id = c
                        .get("id")
                        .and_then(Value::as_str)
                        .ok_or("tool-call-delta id must be a string")?;
                    let name = c.get("name");
                    if name.is_some_and(|n| n.as_str().is_none()) {
                        return Err("tool-call-delta name must be a string".into());
                    }
                    let args = c
                        .get("argumentsDelta")
                        .filter(|a| a.as_str().is_some())
                        .ok_or("tool-call-delta argumentsDelta must be a string")?;
                    if id.is_empty() || name.and_then(Value::as_str) == Some("") {
                        self.records.push(raw());
                        return Ok(());
                    }
                    let same = |r: &Record| {
                        r.object.get("id").and_then(Value::as_str) == Some(id)
                            && r.object.get("name") == name
                    };
                    if !self.extend(packed, index, t, "args", args, same) {
                        let mut o = Object::new()
                            .with("type", packed)
                            .with("time0", t)
                            .with("index", index.clone())
                            .with("dt", Value::Array(Vec::new()))
                            .with("id", id);
                        if let Some(n) = name {
                            o.insert("name".into(), n.clone());
                        }
                        let o = o.with("args", Value::Array(vec![args.clone()]));
                        self.records.push(Record {
                            object: o,
                            last_time: t,
                        });
                    }
                    return Ok(());
                }
                let text = c
                    .get("text")
                    .filter(|a| a.as_str().is_some())
                    .ok_or_else(|| format!("{ty} text must be a string"))?;
                if !self.extend(packed, index, t, "texts", text, |_| true) {
                    self.records.push(Record {
                        object: Object::new()
                            .with("type", packed)
                            .with("time0", t)
                            .with("index", index.clone())
                            .with("dt", Value::Array(Vec::new()))
                            .with("texts", Value::Array(vec![text.clone()])),
                        last_time: t,
                    });
                }
                Ok(())
            }
            _ => Err(format!(
                "unreachable variant in AssistantStreamAccumulator.push: {}",
                crate::json::stringify(chunk)
            )),
        }
    }

    /// Fold a member into the last record when it is a `packed` record of the same block
    /// (`same` holds) and the time gap is exact.
    fn extend(
        &mut self,
        packed: &str,
        index: &Value,
        time: f64,
        members: &str,
        member: &Value,
        same: impl Fn(&Record) -> bool,
    ) -> bool {
        let Some(last) = self.records.last_mut() else {
            return false;
        };
        let gap = time - last.last_time;
        let fits = last.object.get("type").and_then(Value::as_str) == Some(packed)
            && last.object.get("index") == Some(index)
            && same(last)
            && crate::json::safe_integer(gap).is_some()
            && last.last_time + gap == time;
        if !fits {
            return false;
        }
        if let Some(Value::Array(dt)) = last.object.get_mut("dt") {
            dt.push(Value::Number(gap));
        }
        if let Some(Value::Array(items)) = last.object.get_mut(members) {
            items.push(member.clone());
        }
        last.last_time = time;
        true
    }

    /// The stream so far.
    pub fn snapshot(&self) -> Value {
        Value::Array(
            self.records
                .iter()
                .map(|r| Value::Object(r.object.clone()))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{parse, stringify};

    #[test]
    fn adjacent_deltas_of_one_block_pack_and_other_chunks_stay_raw() {
        let mut s = StreamAccumulator::default();
        for (t, c) in [
            (1, r#"{"type":"block-start","index":0,"blockType":"text"}"#),
            (1, r#"{"type":"text-delta","index":0,"text":"a"}"#),
            (3, r#"{"type":"text-delta","index":0,"text":"b"}"#),
            (4, r#"{"type":"text-delta","index":1,"text":"c"}"#),
            (
                5,
                r#"{"type":"tool-call-delta","index":2,"id":"x","name":"read","argumentsDelta":"{"}"#,
            ),
            (
                6,
                r#"{"type":"tool-call-delta","index":2,"id":"x","argumentsDelta":"}"}"#,
            ),
            (
                6,
                r#"{"type":"tool-call-delta","index":2,"id":"x","argumentsDelta":"!"}"#,
            ),
            (7, r#"{"type":"finish","reason":{"kind":"stop"}}"#),
        ] {
            s.push(&Value::Number(f64::from(t)), &parse(c).expect("JSON"))
                .expect("push");
        }
        assert_eq!(
            stringify(&s.snapshot()),
            concat!(
                r#"[{"type":"chunk","time":1,"chunk":{"type":"block-start","index":0,"blockType":"text"}},"#,
                r#"{"type":"text-chunks","time0":1,"index":0,"dt":[2],"texts":["a","b"]},"#,
                r#"{"type":"text-chunks","time0":4,"index":1,"dt":[],"texts":["c"]},"#,
                r#"{"type":"tool-call-chunks","time0":5,"index":2,"dt":[],"id":"x","name":"read","args":["{"]},"#,
                r#"{"type":"tool-call-chunks","time0":6,"index":2,"dt":[0],"id":"x","args":["}","!"]},"#,
                r#"{"type":"chunk","time":7,"chunk":{"type":"finish","reason":{"kind":"stop"}}}]"#
            )
        );
        let bad = s.push(
            &Value::Number(8.0),
            &parse(r#"{"type":"nope"}"#).expect("JSON"),
        );
        assert!(bad.expect_err("refused").starts_with("unreachable variant"));
    }
}
