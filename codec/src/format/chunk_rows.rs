//! Packed `assistant/chunk` runs: expansion on read and packing on write (DSH `chunk-rows.ts`).
//!
//! A storage row (`text-chunks`, `reasoning-chunks`, `tool-call-chunks`) holds a run of ≥3
//! consecutive same-block delta chunks. Expansion validates the row exactly as DSH does (a
//! malformed row is corrupt storage, never silently skipped). Packing whitelists exact shapes:
//! anything not fully recognised is written verbatim, so packing never loses data. Runs never span
//! batches: callers pack one batch at a time.

use crate::json::{write_value, JsString, Object, Value};
use crate::vocabulary::{REASONING_DELTA, ROW_TAGS, TEXT_DELTA, TOOL_CALL_DELTA};

/// `Number.MAX_SAFE_INTEGER` as an integer.
const MAX_SAFE: i64 = 9_007_199_254_740_991;

/// Minimum run length that packs (a format constant).
pub const MIN_RUN: usize = 3;

/// Whether a record type is a storage-row tag.
pub fn is_row_tag(tag: &str) -> bool {
    ROW_TAGS.contains(&tag)
}

/// Decode one parsed line into the events it stores (`decodeStorageRecord`): a row expands into
/// its members; anything else is one event, unvalidated. `Err` is DSH's malformed-row text.
pub fn decode_record(value: Value) -> Result<Vec<Value>, String> {
    let tag = match &value {
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some(t) if is_row_tag(t) => t.to_owned(),
            _ => return Ok(vec![value]),
        },
        _ => return Ok(vec![value]),
    };
    let Value::Object(row) = value else {
        return Ok(vec![value]);
    };
    expand_row(row, &tag).map_err(|why| format!("malformed {tag} storage row: {why}"))
}

/// Validate a row (`validateRow`) and expand it (`expandRow`). The members' payload strings
/// move into the events (the row is consumed), and each event is built from its fixed,
/// distinct names (no per-key duplicate search).
fn expand_row(mut row: Object, tag: &str) -> Result<Vec<Value>, String> {
    if !row.has_exact_keys(&["type", "seq0", "time0", "data"]) {
        return Err("envelope must be exactly {type, seq0, time0, data}".into());
    }
    let seq0 = row
        .get("seq0")
        .and_then(Value::as_safe_integer)
        .filter(|s| *s >= 0)
        .ok_or("seq0 must be a non-negative safe integer")?;
    let time0 = row
        .get("time0")
        .and_then(Value::as_safe_integer)
        .ok_or("time0 must be a safe integer")?;
    let Some(Value::Object(data)) = row.get_mut("data") else {
        return Err("data must be an object".into());
    };
    let tool = tag == "tool-call-chunks";
    let payload_key = if tool { "args" } else { "texts" };
    let mut with_name = false;
    if tool {
        with_name = data.has_exact_keys(&["turn", "step", "index", "id", "name", "dt", "args"]);
        if !with_name && !data.has_exact_keys(&["turn", "step", "index", "id", "dt", "args"]) {
            return Err("data must be exactly {turn, step, index, id, name?, dt, args}".into());
        }
        let name_ok = !with_name || matches!(data.get("name"), Some(Value::String(_)));
        if !matches!(data.get("id"), Some(Value::String(_))) || !name_ok {
            return Err("id (and name when present) must be strings".into());
        }
    } else if !data.has_exact_keys(&["turn", "step", "index", "dt", "texts"]) {
        return Err("data must be exactly {turn, step, index, dt, texts}".into());
    }
    let (turn, step, index) = match (data.get("turn"), data.get("step"), data.get("index")) {
        (Some(t @ Value::Number(_)), Some(s @ Value::Number(_)), Some(i @ Value::Number(_))) => {
            (t.clone(), s.clone(), i.clone())
        }
        _ => return Err("turn/step/index must be numbers".into()),
    };
    let payload_ok = matches!(
        data.get(payload_key),
        Some(Value::Array(items))
            if !items.is_empty() && items.iter().all(|v| matches!(v, Value::String(_)))
    );
    if !payload_ok {
        return Err(if tool {
            "args must be a non-empty string array".into()
        } else {
            "texts must be a non-empty string array".into()
        });
    }
    let dt: Vec<i64> = match data.get("dt") {
        Some(Value::Array(gaps)) => gaps
            .iter()
            .map(Value::as_safe_integer)
            .collect::<Option<_>>()
            .ok_or("dt must be an array of safe integers")?,
        _ => return Err("dt must be an array of safe integers".into()),
    };
    let payload = match data.get_mut(payload_key) {
        Some(Value::Array(items)) => std::mem::take(items),
        _ => Vec::new(),
    };
    if dt.len() + 1 != payload.len() {
        return Err(format!(
            "dt length {} does not match {} members",
            dt.len(),
            payload.len()
        ));
    }
    let last_seq = i64::try_from(payload.len() - 1)
        .ok()
        .and_then(|n| seq0.checked_add(n));
    if last_seq.is_none_or(|s| s > MAX_SAFE) {
        return Err("member seqs must stay safe integers".into());
    }
    let times = member_times(time0, &dt)?;
    let kind = match tag {
        "text-chunks" => TEXT_DELTA,
        "reasoning-chunks" => REASONING_DELTA,
        _ => TOOL_CALL_DELTA,
    };
    let id = data.get("id").cloned().unwrap_or(Value::Null);
    let name = data.get("name").cloned().unwrap_or(Value::Null);
    let name_of = JsString::from_static;
    let mut events = Vec::with_capacity(payload.len());
    for (k, (member, time)) in payload.into_iter().zip(times).enumerate() {
        let mut chunk = Vec::with_capacity(5);
        chunk.push((name_of("type"), Value::String(name_of(kind))));
        chunk.push((name_of("index"), index.clone()));
        if tool {
            chunk.push((name_of("id"), id.clone()));
            if with_name {
                chunk.push((name_of("name"), name.clone()));
            }
            chunk.push((name_of("argumentsDelta"), member));
        } else {
            chunk.push((name_of("text"), member));
        }
        let seq = seq0 + i64::try_from(k).unwrap_or(i64::MAX);
        let data = Object::from_distinct_names(vec![
            (name_of("turn"), turn.clone()),
            (name_of("step"), step.clone()),
            (
                name_of("chunk"),
                Value::Object(Object::from_distinct_names(chunk)),
            ),
        ]);
        events.push(Value::Object(Object::from_distinct_names(vec![
            (name_of("type"), Value::String(name_of("assistant/chunk"))),
            (name_of("seq"), Value::from(seq)),
            (name_of("time"), Value::from(time)),
            (name_of("data"), Value::Object(data)),
        ])));
    }
    Ok(events)
}

/// The times of a row's members: `time0`, then each gap of `dt` added in turn; `Err` is DSH's
/// text when one leaves the safe integers.
pub fn member_times(time0: i64, dt: &[i64]) -> Result<Vec<i64>, &'static str> {
    let mut times = Vec::with_capacity(dt.len() + 1);
    let mut time = time0;
    times.push(time);
    for gap in dt {
        time = time
            .checked_add(*gap)
            .filter(|t| t.abs() <= MAX_SAFE)
            .ok_or("member times must stay safe integers")?;
        times.push(time);
    }
    Ok(times)
}

/// The delta kinds that pack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DeltaKind {
    Text,
    Reasoning,
    ToolCall,
}

/// A whitelisted delta member, borrowed from its event.
#[derive(Debug)]
struct Delta<'a> {
    kind: DeltaKind,
    seq: i64,
    time: i64,
    turn: &'a Value,
    step: &'a Value,
    index: &'a Value,
    id: Option<&'a JsString>,
    name: Option<&'a Value>,
    payload: &'a Value,
}

/// DSH `classify`: the delta kind iff the entire shape is whitelisted.
fn classify(event: &Value) -> Option<Delta<'_>> {
    let [ty, seq, time, data] = event
        .as_object()?
        .exact_values(["type", "seq", "time", "data"])?;
    if ty.as_str()? != "assistant/chunk" {
        return None;
    }
    let seq = seq.as_safe_integer().filter(|s| *s >= 0)?;
    let time = time.as_safe_integer()?;
    let [turn, step, chunk] = data.as_object()?.exact_values(["turn", "step", "chunk"])?;
    if !matches!(turn, Value::Number(_)) || !matches!(step, Value::Number(_)) {
        return None;
    }
    let chunk = chunk.as_object()?;
    let (kind, index, id, name, payload) = match chunk.get("type")?.as_str()? {
        k @ (TEXT_DELTA | REASONING_DELTA) => {
            let [_, index, text] = chunk.exact_values(["type", "index", "text"])?;
            if !matches!(text, Value::String(_)) {
                return None;
            }
            let kind = if k == TEXT_DELTA {
                DeltaKind::Text
            } else {
                DeltaKind::Reasoning
            };
            (kind, index, None, None, text)
        }
        TOOL_CALL_DELTA => {
            let (index, id, name, args) =
                match chunk.exact_values(["type", "index", "id", "argumentsDelta"]) {
                    Some([_, index, id, args]) => (index, id, None, args),
                    None => {
                        let [_, index, id, name, args] = chunk.exact_values([
                            "type",
                            "index",
                            "id",
                            "name",
                            "argumentsDelta",
                        ])?;
                        if !matches!(name, Value::String(_)) {
                            return None;
                        }
                        (index, id, Some(name), args)
                    }
                };
            let (Value::String(id), Value::String(_)) = (id, args) else {
                return None;
            };
            (DeltaKind::ToolCall, index, Some(id), name, args)
        }
        _ => return None,
    };
    if !matches!(index, Value::Number(_)) {
        return None;
    }
    Some(Delta {
        kind,
        seq,
        time,
        turn,
        step,
        index,
        id,
        name,
        payload,
    })
}

/// DSH `continues`: whether `next` extends a run ending in `prev` (same kind checked by caller).
fn continues(prev: &Delta<'_>, next: &Delta<'_>) -> bool {
    next.seq == prev.seq + 1
        && (next.time - prev.time).abs() <= MAX_SAFE
        && next.turn == prev.turn
        && next.step == prev.step
        && next.index == prev.index
        && (next.kind != DeltaKind::ToolCall || (next.id == prev.id && next.name == prev.name))
}

/// The row type a run of `kind` packs into.
fn row_tag(kind: DeltaKind) -> &'static str {
    match kind {
        DeltaKind::Text => "text-chunks",
        DeltaKind::Reasoning => "reasoning-chunks",
        DeltaKind::ToolCall => "tool-call-chunks",
    }
}

/// Build the row for a completed run (`buildRow`).
fn build_row(run: &[Delta<'_>]) -> Value {
    let first = &run[0];
    let dt: Vec<Value> = run
        .windows(2)
        .map(|w| Value::from(w[1].time - w[0].time))
        .collect();
    let payload: Vec<Value> = run.iter().map(|d| d.payload.clone()).collect();
    let mut data = Object::new()
        .with("turn", first.turn.clone())
        .with("step", first.step.clone())
        .with("index", first.index.clone())
        .with("dt", Value::Array(dt));
    if first.kind == DeltaKind::ToolCall {
        if let Some(id) = first.id {
            data = data.with("id", Value::String(id.clone()));
        }
        if let Some(name) = first.name {
            data = data.with("name", name.clone());
        }
        data = data.with("args", Value::Array(payload));
    } else {
        data = data.with("texts", Value::Array(payload));
    }
    Value::Object(
        Object::new()
            .with("type", row_tag(first.kind))
            .with("seq0", first.seq)
            .with("time0", first.time)
            .with("data", data),
    )
}

/// One storage record of a packed batch, borrowed from the batch's events: an event written
/// verbatim, or a run packed into a row.
#[derive(Debug)]
pub enum Packed<'a> {
    /// An event written as itself.
    Event(&'a Value),
    /// A packed run.
    Row(Row<'a>),
}

/// A run of ≥[`MIN_RUN`] deltas that packs into one row (`buildRow`). The row's line is written
/// straight from the borrowed members ([`Packed::write_json`]), without building its value.
#[derive(Debug)]
pub struct Row<'a> {
    /// The members, in seq order.
    deltas: Vec<Delta<'a>>,
}

impl Packed<'_> {
    /// Append `JSON.stringify` of the record to `out`: for a row, the same bytes as
    /// stringifying [`Packed::into_value`] (pinned by the tests), since the row's keys are
    /// distinct and none is an array index, so they stay in the order `buildRow` sets them.
    pub fn write_json(&self, out: &mut String) {
        let run = match self {
            Packed::Event(e) => return write_value(out, e),
            Packed::Row(row) => &row.deltas,
        };
        let first = &run[0];
        out.push_str("{\"type\":\"");
        out.push_str(row_tag(first.kind));
        out.push_str("\",\"seq0\":");
        write_value(out, &Value::from(first.seq));
        out.push_str(",\"time0\":");
        write_value(out, &Value::from(first.time));
        out.push_str(",\"data\":{\"turn\":");
        write_value(out, first.turn);
        out.push_str(",\"step\":");
        write_value(out, first.step);
        out.push_str(",\"index\":");
        write_value(out, first.index);
        out.push_str(",\"dt\":[");
        for (k, w) in run.windows(2).enumerate() {
            if k > 0 {
                out.push(',');
            }
            write_value(out, &Value::from(w[1].time - w[0].time));
        }
        out.push(']');
        if first.kind == DeltaKind::ToolCall {
            if let Some(id) = first.id {
                out.push_str(",\"id\":");
                write_value(out, &Value::String(id.clone()));
            }
            if let Some(name) = first.name {
                out.push_str(",\"name\":");
                write_value(out, name);
            }
            out.push_str(",\"args\":[");
        } else {
            out.push_str(",\"texts\":[");
        }
        for (k, d) in run.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            write_value(out, d.payload);
        }
        out.push_str("]}}");
    }

    /// How many events the record holds.
    pub fn members(&self) -> usize {
        match self {
            Packed::Event(_) => 1,
            Packed::Row(row) => row.deltas.len(),
        }
    }

    /// The record as an owned value.
    pub fn into_value(self) -> Value {
        match self {
            Packed::Event(e) => e.clone(),
            Packed::Row(row) => build_row(&row.deltas),
        }
    }
}

/// Pack one batch for storage (`packChunkRuns`) without copying the events that stay verbatim:
/// each run of ≥[`MIN_RUN`] whitelisted deltas becomes one row; every other event passes
/// through, in order.
pub fn pack_runs<'a>(events: &'a [Value]) -> Vec<Packed<'a>> {
    let mut out = Vec::with_capacity(events.len());
    let mut run: Vec<(Delta<'a>, &'a Value)> = Vec::with_capacity(events.len());
    let flush = |run: &mut Vec<(Delta<'a>, &'a Value)>, out: &mut Vec<Packed<'a>>| {
        if run.len() >= MIN_RUN {
            let deltas = run.drain(..).map(|(d, _)| d).collect();
            out.push(Packed::Row(Row { deltas }));
        } else {
            out.extend(run.drain(..).map(|(_, e)| Packed::Event(e)));
        }
    };
    for event in events {
        match classify(event) {
            None => {
                flush(&mut run, &mut out);
                out.push(Packed::Event(event));
            }
            Some(delta) => {
                let extends = run
                    .last()
                    .is_some_and(|(last, _)| last.kind == delta.kind && continues(last, &delta));
                if !extends {
                    flush(&mut run, &mut out);
                }
                run.push((delta, event));
            }
        }
    }
    flush(&mut run, &mut out);
    out
}

/// [`pack_runs`] as owned values.
pub fn pack_chunk_runs(events: &[Value]) -> Vec<Value> {
    pack_runs(events)
        .into_iter()
        .map(Packed::into_value)
        .collect()
}

#[cfg(test)]
mod tests;
