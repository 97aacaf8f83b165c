//! V1→V2 (later-format-spec §3.8.2): top-level `assistant/chunk`s fold into attempts. An
//! `assistant/message` that cites exactly its pending attempt's chunks embeds them as its
//! `stream`; an unclaimed attempt becomes a log-only `assistant/attempt` where its last chunk
//! was. Seqs close up densely; the legacy restart gets its `interrupted` closer, a legacy goal
//! message its `goal/change`, and the inherited cut its `{inherited:true}` marker; the header
//! trades `seedLength` for `isSeeded`.
//!
//! Only one attempt is pending at a time. Events after an attempt's last chunk wait until it
//! settles: an unclaimed attempt goes before them, a claiming message after them.

use super::inventory::{check_payload, is_v0_type};
use super::messages::{type_of, Restart};
use super::references::{BadReference, Renumber};
use super::stream::StreamAccumulator;
use super::{Refusal, Stage};
use crate::json::{js_string_of, stringify, Object, Value};

/// The chunks of one attempt.
struct Attempt {
    turn: Value,
    step: Value,
    /// Member chunk seqs, in order.
    chunks: Vec<u64>,
    stream: StreamAccumulator,
    last_chunk_seq: u64,
    last_chunk_time: Value,
    /// A `finish` chunk was seen: the next chunk opens another attempt.
    terminal: bool,
    /// Source events since the last chunk, held until the attempt settles.
    after_last_chunk: Vec<Object>,
}

/// The V1→V2 stage.
pub struct V1ToV2 {
    id: Value,
    has_parent: bool,
    seeded: bool,
    source_cut: u64,
    target_cut: Option<u64>,
    renumber: Renumber,
    restart: Restart,
    pending: Option<Attempt>,
    last_time: Value,
    /// The next source seq expected (sources are dense).
    next_source: u64,
    /// The source is a decoded V1 file (not V0→V1's output): its payloads are checked here.
    decoded: bool,
}

impl Default for V1ToV2 {
    fn default() -> Self {
        V1ToV2 {
            id: Value::Null,
            has_parent: false,
            seeded: false,
            source_cut: 0,
            target_cut: Some(0),
            renumber: Renumber::default(),
            restart: Restart::resetting_steps(),
            pending: None,
            last_time: Value::Null,
            next_source: 0,
            decoded: false,
        }
    }
}

fn unsupported(message: impl Into<String>) -> Refusal {
    Refusal::unsupported(1, message)
}

fn refuse(message: impl Into<String>) -> Refusal {
    Refusal::format(1, message)
}

/// `event.data[key]` (`null` when absent).
fn data_field(event: &Object, key: &str) -> Value {
    event
        .get("data")
        .and_then(Value::as_object)
        .and_then(|d| d.get(key))
        .cloned()
        .unwrap_or_default()
}

fn seq_of(event: &Object) -> u64 {
    event.get("seq").and_then(Value::as_safe_u64).unwrap_or(0)
}

impl V1ToV2 {
    /// The stage for a decoded V1 file, whose payloads no earlier edge has checked.
    pub fn decoded() -> Self {
        V1ToV2 {
            decoded: true,
            ..V1ToV2::default()
        }
    }

    /// Emit a source event under its dense target seq, its references remapped.
    fn emit_source(&mut self, mut event: Object, out: &mut Vec<Object>) -> Result<(), Refusal> {
        let seq = seq_of(&event);
        let ty = type_of(&event);
        if self.seeded && seq == self.source_cut && ty == "session/end-seed" {
            event.insert(
                "data".into(),
                Value::Object(Object::new().with("inherited", true)),
            );
        }
        let time = event.get("time").cloned().unwrap_or(Value::Null);
        self.ensure_cut(seq, &time, &ty, out);
        self.renumber
            .remap(&mut event, seq, ("start", "end"))
            .map_err(|bad: BadReference| {
                unsupported(format!(
                    "{ty} {seq} {} targets consumed assistant/chunk {}",
                    bad.field,
                    js_string_of(&bad.value)
                ))
            })?;
        let target = self.renumber.take();
        self.renumber.record_at(seq, target);
        event.insert("seq".into(), Value::Number(target as f64));
        // DSH rebuilds the envelope: the references go last, sources before the surface op, and
        // a replacement is exactly `{op,start,end}` (a compaction range exactly `{start,end}`).
        if let Some(sources) = event.remove("sourceEventSeqs") {
            event.insert("sourceEventSeqs".into(), sources);
        }
        if let Some(op) = event.remove("surfaceOp") {
            let op = match op {
                Value::Object(o) => Value::Object(
                    Object::new()
                        .with("op", "replace")
                        .with("start", o.get("start").cloned().unwrap_or(Value::Null))
                        .with("end", o.get("end").cloned().unwrap_or(Value::Null)),
                ),
                other => other,
            };
            event.insert("surfaceOp".into(), op);
        }
        if ty == "compaction/summary" || ty == "compaction/prune" {
            if let Some(Value::Object(data)) = event.get_mut("data") {
                if let Some(Value::Object(range)) = data.get_mut("shadowedRange") {
                    *range = Object::new()
                        .with("start", range.get("start").cloned().unwrap_or(Value::Null))
                        .with("end", range.get("end").cloned().unwrap_or(Value::Null));
                }
            }
        }
        out.push(event);
        Ok(())
    }

    /// Emit an event the stage made, `origin` the source seq it stands for.
    fn emit_generated(&mut self, origin: u64, mut event: Object, out: &mut Vec<Object>) {
        let time = event.get("time").cloned().unwrap_or(Value::Null);
        let ty = type_of(&event);
        self.ensure_cut(origin, &time, &ty, out);
        event.insert("seq".into(), Value::Number(self.renumber.take() as f64));
        out.push(event);
    }

    /// The inherited marker goes where the first event at or after the source cut lands.
    fn ensure_cut(&mut self, origin: u64, time: &Value, ty: &str, out: &mut Vec<Object>) {
        if !self.seeded || self.target_cut.is_some() || origin < self.source_cut {
            return;
        }
        self.target_cut = Some(self.renumber.peek());
        if origin == self.source_cut && ty == "session/end-seed" {
            return;
        }
        out.push(marker(self.renumber.take(), time.clone()));
    }

    /// A chunk split by the inherited cut from its attempt's first is refused.
    fn check_cut(&self, first: Option<u64>, member: u64) -> Result<(), Refusal> {
        let first = first.unwrap_or(member);
        if (first < self.source_cut) != (member < self.source_cut) {
            return Err(unsupported(format!(
                "inherited Session cut {} splits one Assistant attempt",
                self.source_cut
            )));
        }
        Ok(())
    }

    /// Settle the pending attempt as unclaimed: an `assistant/attempt`, then what it held back.
    fn finish_attempt(&mut self, out: &mut Vec<Object>) -> Result<(), Refusal> {
        let Some(attempt) = self.pending.take() else {
            return Ok(());
        };
        let event = Object::new()
            .with("type", "assistant/attempt")
            .with("seq", attempt.last_chunk_seq as f64)
            .with("time", attempt.last_chunk_time.clone())
            .with(
                "data",
                Object::new()
                    .with("turn", attempt.turn.clone())
                    .with("step", attempt.step.clone())
                    .with("stream", attempt.stream.snapshot()),
            );
        self.emit_generated(attempt.last_chunk_seq, event, out);
        for held in attempt.after_last_chunk {
            self.emit_source(held, out)?;
        }
        Ok(())
    }

    fn chunk(&mut self, event: Object, out: &mut Vec<Object>) -> Result<(), Refusal> {
        let seq = seq_of(&event);
        let [turn, step, chunk] = ["turn", "step", "chunk"].map(|k| data_field(&event, k));
        let other = self
            .pending
            .as_ref()
            .is_some_and(|p| p.terminal || p.turn != turn || p.step != step);
        if other {
            self.finish_attempt(out)?;
        } else if let Some(p) = &mut self.pending {
            for held in std::mem::take(&mut p.after_last_chunk) {
                self.emit_source(held, out)?;
            }
        }
        let time = event.get("time").cloned().unwrap_or(Value::Null);
        let attempt = self.pending.get_or_insert_with(|| Attempt {
            turn,
            step,
            chunks: Vec::new(),
            stream: StreamAccumulator::default(),
            last_chunk_seq: seq,
            last_chunk_time: time.clone(),
            terminal: false,
            after_last_chunk: Vec::new(),
        });
        let first = attempt.chunks.first().copied();
        attempt.stream.push(&time, &chunk).map_err(refuse)?;
        attempt.chunks.push(seq);
        attempt.last_chunk_seq = seq;
        attempt.last_chunk_time = time;
        if chunk
            .as_object()
            .and_then(|c| c.get("type"))
            .and_then(Value::as_str)
            == Some("finish")
        {
            attempt.terminal = true;
        }
        self.renumber.record_at(seq, None);
        self.check_cut(first, seq)
    }

    fn message(&mut self, mut event: Object, out: &mut Vec<Object>) -> Result<(), Refusal> {
        let seq = seq_of(&event);
        let [turn, step] = ["turn", "step"].map(|k| data_field(&event, k));
        let sources = event.remove("sourceEventSeqs");
        let empty = || Value::Array(Vec::new());
        if self
            .pending
            .as_ref()
            .is_some_and(|p| p.turn != turn || p.step != step)
        {
            self.finish_attempt(out)?;
            return self.emit_source(with_stream(event, empty()), out);
        }
        let Some(Value::Array(sources)) = sources else {
            if self.pending.is_some() {
                return Err(unsupported(format!(
                    "assistant/message {seq} does not cite its complete v1 chunk attempt"
                )));
            }
            return self.emit_source(with_stream(event, empty()), out);
        };
        if sources.is_empty() {
            self.finish_attempt(out)?;
            return self.emit_source(with_stream(event, empty()), out);
        }
        let claims = self.pending.as_ref().is_some_and(|p| {
            p.chunks.len() == sources.len()
                && p.chunks
                    .iter()
                    .zip(&sources)
                    .all(|(&c, s)| s.as_f64() == Some(c as f64))
        });
        let Some(attempt) = self.pending.take().filter(|_| claims) else {
            return Err(unsupported(format!(
                "assistant/message {seq} chunk references are not one complete ordered attempt"
            )));
        };
        self.check_cut(attempt.chunks.first().copied(), seq)?;
        for held in attempt.after_last_chunk {
            self.emit_source(held, out)?;
        }
        self.emit_source(with_stream(event, attempt.stream.snapshot()), out)
    }

    /// A legacy goal message: its `source.change` as a `goal/change`, then the message with a
    /// plain goal source.
    fn goal_split(&mut self, event: &Object, out: &mut Vec<Object>) -> Result<bool, Refusal> {
        let change = event
            .get("data")
            .and_then(Value::as_object)
            .and_then(|d| d.get("source"))
            .and_then(Value::as_object)
            .filter(|s| s.get("kind").and_then(Value::as_str) == Some("goal"))
            .and_then(|s| s.get("change"))
            .cloned();
        let Some(change) = change else {
            return Ok(false);
        };
        let seq = seq_of(event);
        let goal = Object::new()
            .with("type", "goal/change")
            .with("seq", seq as f64)
            .with("time", event.get("time").cloned().unwrap_or(Value::Null))
            .with("data", change);
        self.emit_generated(seq, goal, out);
        let mut message = event.clone();
        if let Some(Value::Object(data)) = message.get_mut("data") {
            data.insert(
                "source".into(),
                Value::Object(Object::new().with("kind", "plugin").with("plugin", "goal")),
            );
        }
        self.emit_source(message, out)?;
        Ok(true)
    }
}

/// `assistant/message` data with `stream` last.
fn with_stream(mut event: Object, stream: Value) -> Object {
    if let Some(Value::Object(data)) = event.get_mut("data") {
        data.remove("stream");
        data.insert("stream".into(), stream);
    }
    event
}

/// The `{inherited:true}` end-seed marking the cut.
pub(super) fn marker(seq: u64, time: Value) -> Object {
    Object::new()
        .with("type", "session/end-seed")
        .with("seq", seq as f64)
        .with("time", time)
        .with("data", Object::new().with("inherited", true))
}

/// The released V2 header layout.
pub(super) fn v2_header(header: &Object, version: f64, seeded: bool) -> Object {
    let mut out = Object::new()
        .with("type", "session")
        .with("version", version);
    for key in ["id", "createdAt", "cwd", "parentSession"] {
        if let Some(v) = header.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    out.insert("isSeeded".into(), Value::Bool(seeded));
    for key in ["origin", "delegationDepth", "agentPreset"] {
        if let Some(v) = header.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    out
}

impl Stage for V1ToV2 {
    fn source_version(&self) -> u32 {
        1
    }

    fn header(&mut self, header: &mut Object) -> Result<(), Refusal> {
        if header
            .get("cwd")
            .and_then(Value::as_str)
            .is_some_and(|c| !c.starts_with('/'))
        {
            return Err(refuse("format v2 header cwd must be absolute"));
        }
        self.id = header.get("id").cloned().unwrap_or(Value::Null);
        self.has_parent = header.contains_key("parentSession");
        self.seeded = header.contains_key("seedLength");
        self.source_cut = header
            .get("seedLength")
            .and_then(Value::as_safe_u64)
            .unwrap_or(0);
        self.target_cut = (!self.seeded).then_some(0);
        self.last_time = header.get("createdAt").cloned().unwrap_or(Value::Null);
        *header = v2_header(header, 2.0, self.seeded);
        Ok(())
    }

    fn event(&mut self, event: Object, out: &mut Vec<Object>) -> Result<(), Refusal> {
        let seq = self.next_source;
        if event.get("seq").and_then(Value::as_safe_u64) != Some(seq) {
            return Err(refuse(format!("format v1 event {seq} is not dense")));
        }
        self.next_source += 1;
        let ty = type_of(&event);
        if ty == "assistant/chunk" {
            check_chunk_envelope(&event, seq)?;
        }
        if !is_v0_type(&ty) {
            return Err(unsupported(format!(
                "format v1 contains unknown event type {} at seq {seq}",
                stringify(&Value::from(ty.as_str()))
            )));
        }
        if self.decoded {
            check_payload(1, &ty, &event, seq)?;
        }
        let data = event.get("data");
        let open_turn = self.restart.open_turn();
        let interrupted = self.restart.observe(&ty, data);
        if ty == "turn/start" && open_turn.is_some() && interrupted.is_none() {
            let turn = data
                .and_then(Value::as_object)
                .and_then(|d| d.get("turn"))
                .map_or_else(|| "undefined".into(), stringify);
            return Err(unsupported(format!(
                "turn/start {turn} does not close the prior turn"
            )));
        }
        if ty == "session-log-deepseek/delivery-accepted" {
            let d = data.and_then(Value::as_object);
            let inherited = self.has_parent && seq < self.source_cut;
            if d.and_then(|d| d.get("sessionFormatVersion")) == Some(&Value::Number(1.0))
                && !inherited
                && d.and_then(|d| d.get("sessionId")) != Some(&self.id)
            {
                return Err(unsupported(
                    "current-generation delivery marker names the wrong Session",
                ));
            }
        }
        self.last_time = event.get("time").cloned().unwrap_or(Value::Null);
        if let Some(turn) = interrupted {
            self.finish_attempt(out)?;
            let closer = self.restart.closer(seq, &event, turn);
            self.emit_generated(seq, closer, out);
        }
        if ty == "user/message" && self.goal_split(&event, out)? {
            return Ok(());
        }
        match ty.as_str() {
            "assistant/chunk" => self.chunk(event, out),
            "assistant/message" => self.message(event, out),
            "turn/end" | "step/end" | "llm/retry" | "llm/retry-started" => {
                self.finish_attempt(out)?;
                self.emit_source(event, out)
            }
            _ => match &mut self.pending {
                Some(p) => {
                    p.after_last_chunk.push(event);
                    Ok(())
                }
                None => self.emit_source(event, out),
            },
        }
    }

    fn finish(&mut self, out: &mut Vec<Object>) -> Result<(), Refusal> {
        self.finish_attempt(out)?;
        if self.seeded && self.target_cut.is_none() {
            self.target_cut = Some(self.renumber.peek());
            out.push(marker(self.renumber.take(), self.last_time.clone()));
        }
        Ok(())
    }
}

/// A top-level chunk's envelope.
fn check_chunk_envelope(event: &Object, seq: u64) -> Result<(), Refusal> {
    const ALLOWED: [&str; 7] = [
        "type",
        "seq",
        "time",
        "data",
        "ignorable",
        "sourceEventSeqs",
        "surfaceOp",
    ];
    if let Some((k, _)) = event
        .iter()
        .find(|(k, _)| !ALLOWED.iter().any(|a| k.eq_str(a)))
    {
        return Err(unsupported(format!(
            "assistant/chunk {seq} has unexpected member {k}"
        )));
    }
    if let Some(k) = ["type", "seq", "time", "data"]
        .iter()
        .find(|k| !event.contains_key(k))
    {
        return Err(unsupported(format!(
            "assistant/chunk {seq} lacks required member {k}"
        )));
    }
    if event
        .get("ignorable")
        .is_some_and(|i| *i != Value::Bool(true))
    {
        return Err(unsupported(format!(
            "assistant/chunk {seq} ignorable must be true when present"
        )));
    }
    Ok(())
}
