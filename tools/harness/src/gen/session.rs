//! One synthetic session: the header, the turn loop, and the writer that turns appended events
//! into DSH batches on disk.
//!
//! Invariants kept here (they are what DSH's `Session.append` and JSONL backend guarantee):
//! - seqs are contiguous from 0; every event is written with envelope key order
//!   `type, seq, time, data[, sourceEventSeqs][, surfaceOp]`;
//! - events are written in batches: each batch is packed with `pack_chunk_runs` on its own (so a
//!   delta run split by a batch boundary becomes a row plus loose events, or two rows), each record
//!   is `stringify` + `"\n"`;
//! - `surfaceOp` / `sourceEventSeqs` only on the three surface types; the surface node list is
//!   tracked so every replacement targets current nodes and cites every node it shadows;
//! - turns and steps nest properly and every turn is closed before the session ends.

use sessionlog_codec::format::chunk_rows::pack_chunk_runs;
use sessionlog_codec::format::header::{author_header, HeaderFields};
use sessionlog_codec::json::{write_value, JsString, Object, Value};

use super::feed::Batch;
use super::rng::Rng;
use super::text;
use super::GenOptions;

/// The models sessions are attributed to, as `(provider, model)`.
const MODELS: &[(&str, &str)] = &[
    ("deepseek-official", "deepseek-v4-flash"),
    ("deepseek-official", "deepseek-v4"),
    ("deepseek", "deepseek-reasoner"),
];

/// About how many events one step adds; used so sessions land near their target length.
const TYPICAL_STEP_EVENTS: i64 = 200;

/// A current surface node and what a later replacement needs to know about it.
#[derive(Clone, Debug)]
pub(super) struct Node {
    /// The node's seq.
    pub(super) seq: i64,
    /// What kind of event it is.
    pub(super) kind: NodeKind,
}

/// The surface event kinds, with the identity a tool-result rewrite must keep.
#[derive(Clone, Debug)]
pub(super) enum NodeKind {
    /// A `user/message`.
    User,
    /// An `assistant/message`.
    Assistant,
    /// A `tool/result` (boxed: only these carry data).
    ToolResult(Box<ToolResultNode>),
}

/// Everything of a `tool/result` except its content, so a pruning replacement can reproduce it.
#[derive(Clone, Debug)]
pub(super) struct ToolResultNode {
    pub(super) turn: i64,
    pub(super) step: i64,
    pub(super) call_id: String,
    pub(super) message_id: String,
    pub(super) is_error: bool,
    pub(super) content_len: usize,
}

/// A surface marker for [`Session::surface`].
pub(super) enum SurfaceOp {
    /// `"append"`.
    Append,
    /// `{"op":"replace","start":S,"end":E}`.
    Replace { start: i64, end: i64 },
}

/// The state of one session being generated.
pub(super) struct Session {
    pub(super) rng: Rng,
    /// File text so far: the header, and the flushed batches unless they are collected.
    out: String,
    /// When set, flushed batches are kept here, one [`Batch`] each, instead of going to `out`.
    batches: Option<Vec<Batch>>,
    /// Events of the open batch, in seq order.
    pending: Vec<Value>,
    /// How many events the open batch takes before it is flushed.
    batch_size: usize,
    /// Next seq.
    seq: i64,
    /// Epoch-ms clock (mostly increasing).
    clock: i64,
    /// Current surface nodes in model order.
    pub(super) nodes: Vec<Node>,
    /// `(provider, model)` of this session.
    pub(super) model: (&'static str, &'static str),
    /// Number of the open or last turn.
    pub(super) turn: i64,
    /// Logical events to reach, less a typical step's worth: once past it, the turn in progress
    /// ends after its current step and no new turn starts.
    target: i64,
}

/// One built session.
pub(super) struct Built {
    /// The session id.
    pub(super) id: String,
    /// The header line with its `"\n"`, followed by every batch's text unless they were collected.
    pub(super) out: String,
    /// Logical events.
    pub(super) events: u64,
    /// The batches, when collected.
    pub(super) batches: Vec<Batch>,
}

/// Build one session's file bytes and its logical event count.
pub(super) fn build(index: u64, opts: &GenOptions) -> (String, Vec<u8>, u64) {
    let built = build_with(index, opts, false);
    (built.id, built.out.into_bytes(), built.events)
}

/// Build one session; with `collect`, its batches are returned one by one rather than appended
/// to the file text (the content drawn is the same either way).
pub(super) fn build_with(index: u64, opts: &GenOptions, collect: bool) -> Built {
    let mut batches = Vec::new();
    let mut built = build_each(index, opts, collect, &mut |b| batches.push(b));
    built.batches = batches;
    built
}

/// [`build_with`], handing each batch to `on_batch` as soon as it is complete (with `collect`),
/// so a session of any length is generated in bounded memory. `Built::out` holds the header line
/// and `Built::batches` is empty.
pub(super) fn build_each(
    index: u64,
    opts: &GenOptions,
    collect: bool,
    on_batch: &mut dyn FnMut(Batch),
) -> Built {
    let mut rng = Rng::new(opts.seed, index);
    let id = text::uuid(&mut rng);
    let created_at = 1_780_000_000_000 + rng.range_i(0, 30 * 86_400_000);
    // Sessions vary in length around the requested mean: 0.5x to 1.5x.
    let target = (opts.events_per_session as f64 * (0.5 + rng.unit())).round() as i64;
    let model = rng.pick(MODELS);
    let mut s = Session {
        rng,
        out: String::with_capacity(usize::try_from(target).unwrap_or(0).saturating_mul(100)),
        batches: collect.then(Vec::new),
        pending: Vec::new(),
        batch_size: 1,
        seq: 0,
        clock: created_at,
        nodes: Vec::new(),
        model,
        turn: 0,
        target: (target - TYPICAL_STEP_EVENTS).max(1),
    };
    s.write_header(&id, created_at);
    s.new_batch_size();
    let mut hand_over = |s: &mut Session| {
        for batch in s.batches.iter_mut().flat_map(std::mem::take) {
            on_batch(batch);
        }
    };
    while s.seq < s.target {
        if s.turn > 0 && s.rng.chance(0.05) {
            s.compaction(None);
        }
        s.run_turn();
        hand_over(&mut s);
    }
    s.flush();
    hand_over(&mut s);
    Built {
        id,
        out: s.out,
        events: u64::try_from(s.seq).unwrap_or(0),
        batches: Vec::new(),
    }
}

impl Session {
    fn write_header(&mut self, id: &str, created_at: i64) {
        let subagent = self.rng.chance(0.1);
        let fields = HeaderFields {
            id: id.to_owned(),
            created_at,
            cwd: Some(format!("/home/dev/src/{}", text::project(&mut self.rng))),
            parent_session: subagent.then(|| text::uuid(&mut self.rng)),
            seed_length: None,
            origin: subagent.then(|| "subagent".to_owned()),
            delegation_depth: i64::from(subagent),
            agent_preset: self.rng.chance(0.05).then(|| "coder".to_owned()),
            version: 0,
        };
        self.out.push_str(&author_header(&fields));
        self.out.push('\n');
    }

    /// Advance the clock by `lo..=hi` ms, with the occasional backwards step real logs show.
    fn tick(&mut self, lo: i64, hi: i64) -> i64 {
        if self.rng.chance(0.002) {
            self.clock = (self.clock - self.rng.range_i(1, 3_000)).max(0);
        } else {
            self.clock += self.rng.range_i(lo, hi);
        }
        self.clock
    }

    /// Append a non-surface event, `dt` = clock advance range; returns its seq.
    pub(super) fn event(&mut self, ty: &str, dt: (i64, i64), data: Object) -> i64 {
        let seq = self.seq;
        let time = self.tick(dt.0, dt.1);
        let event = Object::new()
            .with("type", ty)
            .with("seq", seq)
            .with("time", time)
            .with("data", data);
        self.push(Value::Object(event));
        seq
    }

    /// Append a surface event with its provenance and marker, and update the surface.
    pub(super) fn surface(
        &mut self,
        ty: &str,
        dt: (i64, i64),
        data: Object,
        sources: Option<Vec<i64>>,
        op: SurfaceOp,
        kind: NodeKind,
    ) -> i64 {
        let seq = self.seq;
        let time = self.tick(dt.0, dt.1);
        let mut event = Object::new()
            .with("type", ty)
            .with("seq", seq)
            .with("time", time)
            .with("data", data);
        if let Some(sources) = sources {
            event = event.with("sourceEventSeqs", ints(&sources));
        }
        let node = Node { seq, kind };
        event = match op {
            SurfaceOp::Append => {
                self.nodes.push(node);
                event.with("surfaceOp", "append")
            }
            SurfaceOp::Replace { start, end } => {
                let first = self.nodes.iter().position(|n| n.seq == start);
                let last = self.nodes.iter().position(|n| n.seq == end);
                if let (Some(first), Some(last)) = (first, last) {
                    self.nodes.splice(first..=last, [node]);
                }
                let op = Object::new()
                    .with("op", "replace")
                    .with("start", start)
                    .with("end", end);
                event.with("surfaceOp", op)
            }
        };
        self.push(Value::Object(event));
        seq
    }

    fn push(&mut self, event: Value) {
        self.pending.push(event);
        self.seq += 1;
        if self.pending.len() >= self.batch_size {
            self.flush();
        }
    }

    /// Draw the size of the next write-behind window: mostly a few to a few dozen events.
    fn new_batch_size(&mut self) {
        self.batch_size = if self.rng.chance(0.15) {
            usize::try_from(self.rng.range(1, 3)).unwrap_or(1)
        } else {
            usize::try_from(self.rng.range(4, 60)).unwrap_or(4)
        };
    }

    /// Write the open batch (packed, one record per line) and start a new one.
    pub(super) fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        match &mut self.batches {
            Some(batches) => {
                let mut text = String::new();
                write_batch(&self.pending, &mut text);
                let events = std::mem::take(&mut self.pending);
                let first_seq = u64::try_from(self.seq)
                    .unwrap_or(0)
                    .saturating_sub(events.len() as u64);
                batches.push(Batch {
                    first_seq,
                    events,
                    text,
                });
            }
            None => {
                write_batch(&self.pending, &mut self.out);
                self.pending.clear();
            }
        }
        self.new_batch_size();
    }

    /// One turn: optional inbox splice, `turn/start`, steps, `turn/end`, flushed (a checkpoint).
    fn run_turn(&mut self) {
        self.turn += 1;
        let turn = self.turn;
        let prompt_words = usize::try_from(self.rng.range(6, 120)).unwrap_or(6);
        let prompt = text::prose_string(&mut self.rng, prompt_words);
        let spliced = self.rng.chance(0.3);
        if spliced {
            let msg = user_message(&prompt, &text::uuid(&mut self.rng));
            let data = Object::new()
                .with("target", "next-turn")
                .with("start", 0)
                .with("inserted", Value::Array(vec![Value::Object(msg)]));
            self.event("agent/inbox/spliced", (2_000, 300_000), data);
        }
        self.event("turn/start", (1, 300_000), Object::new().with("turn", turn));
        if spliced {
            let data = Object::new()
                .with("target", "next-turn")
                .with("start", 0)
                .with("removedCount", 1)
                .with("inserted", Value::Array(Vec::new()));
            self.event("agent/inbox/spliced", (0, 2), data);
        }
        let planned_steps = self.rng.range_i(1, 9);
        let mut step = 0;
        let reason = loop {
            step += 1;
            if step > 1 && self.rng.chance(0.03) {
                self.prune_tool_result();
            }
            if step > 1 && self.rng.chance(0.015) {
                self.compaction(Some(turn));
            }
            self.event(
                "step/start",
                (1, 20),
                Object::new().with("turn", turn).with("step", step),
            );
            if step == 1 {
                self.turn_preamble(turn, prompt.clone());
            }
            if self.rng.chance(0.06) {
                self.todo_write();
            }
            let more_steps = step < planned_steps && self.seq < self.target;
            let outcome = self.model_call(turn, step, more_steps);
            self.event(
                "step/end",
                (0, 5),
                Object::new().with("turn", turn).with("step", step),
            );
            if let Some(reason) = outcome {
                break reason;
            }
        };
        let data = Object::new().with("turn", turn).with("reason", reason);
        self.event("turn/end", (0, 5), data);
        self.flush();
    }

    /// What the first step of a turn opens with: the user message, title, request header/context.
    fn turn_preamble(&mut self, turn: i64, prompt: String) {
        let msg = user_message(&prompt, &text::uuid(&mut self.rng));
        let seq = self.surface(
            "user/message",
            (0, 3),
            msg,
            None,
            SurfaceOp::Append,
            NodeKind::User,
        );
        if turn == 1 || self.rng.chance(0.03) {
            let title: Vec<&str> = prompt.split(' ').take(5).collect();
            let source = if turn == 1 {
                Object::new().with("kind", "fallback")
            } else {
                Object::new()
                    .with("kind", "provider")
                    .with("provider", self.model.0)
            };
            let data = Object::new()
                .with("title", title.join(" ").as_str())
                .with("messageSeqs", ints(&[seq]))
                .with("source", source);
            self.event("session/title", (0, 2), data);
        }
        if turn == 1 || self.rng.chance(0.04) {
            let reason = if turn == 1 { "initial" } else { "change" };
            let header = self.request_header();
            self.event(
                "request/header",
                (0, 3),
                Object::new().with("header", header).with("reason", reason),
            );
        }
        let context = Object::new()
            .with("provider", self.model.0)
            .with("model", self.model.1)
            .with("contextWindow", 128_000);
        self.event("request/context", (0, 2), context);
    }

    /// A `request/header` epoch header: config, system prompt, a few tool schemas.
    fn request_header(&mut self) -> Object {
        let mut config = Object::new()
            .with("provider", self.model.0)
            .with("model", self.model.1);
        if self.rng.chance(0.5) {
            config = config.with("reasoningEffort", self.rng.pick(&["high", "medium", "low"]));
        }
        let mut system = String::from("You are an AI agent powered by DeepSeek Harness.\n\n");
        // Real system prompts run to several KB (instructions, environment, skills).
        let words = usize::try_from(self.rng.range(400, 1_200)).unwrap_or(400);
        text::prose(&mut self.rng, &mut system, words);
        let tools = text::TOOLS
            .iter()
            .map(|name| {
                let params = Object::new()
                    .with("type", "object")
                    .with(
                        "properties",
                        Object::new().with("path", Object::new().with("type", "string")),
                    )
                    .with("required", Value::Array(vec![Value::from("path")]));
                let words = usize::try_from(self.rng.range(20, 60)).unwrap_or(20);
                let description = text::prose_string(&mut self.rng, words);
                Value::Object(
                    Object::new()
                        .with("name", *name)
                        .with("description", description.as_str())
                        .with("parameters", params),
                )
            })
            .collect();
        Object::new()
            .with("config", config)
            .with("system", system.as_str())
            .with("tools", Value::Array(tools))
    }

    /// A `todo/write` with a few items.
    fn todo_write(&mut self) {
        let n = self.rng.range(1, 6);
        let todos = (0..n)
            .map(|_| {
                let words = usize::try_from(self.rng.range(3, 10)).unwrap_or(3);
                let content = text::prose_string(&mut self.rng, words);
                let status = self.rng.pick(&["pending", "in_progress", "completed"]);
                Value::Object(
                    Object::new()
                        .with("content", content.as_str())
                        .with("status", status),
                )
            })
            .collect();
        self.event(
            "todo/write",
            (0, 5),
            Object::new().with("todos", Value::Array(todos)),
        );
    }
}

/// Append one batch's records to `out`: exactly `pack_chunk_runs(batch)`, each stringified and
/// followed by `"\n"`. Only `assistant/chunk` events can be run members and any other event ends
/// a run, so packing each maximal stretch of chunks separately gives the same records while
/// sparing the packer from cloning the large non-chunk events.
pub(super) fn write_batch(batch: &[Value], out: &mut String) {
    let mut rest = batch;
    while let Some(first) = rest.first() {
        let chunks = rest.iter().take_while(|e| is_chunk(e)).count();
        if chunks == 0 {
            write_value(out, first);
            out.push('\n');
            rest = &rest[1..];
            continue;
        }
        for record in pack_chunk_runs(&rest[..chunks]) {
            write_value(out, &record);
            out.push('\n');
        }
        rest = &rest[chunks..];
    }
}

/// Whether an event is an `assistant/chunk`.
fn is_chunk(event: &Value) -> bool {
    event
        .as_object()
        .and_then(|o| o.get("type"))
        .and_then(Value::as_str)
        == Some("assistant/chunk")
}

/// A `user/message` data object in `createUserMessage` key order: `content, source, role, id`.
pub(super) fn user_message(prompt: &str, id: &str) -> Object {
    Object::new()
        .with("content", Value::Array(vec![text_block("text", prompt)]))
        .with("source", Object::new().with("kind", "user"))
        .with("role", "user")
        .with("id", id)
}

/// A `{type, text}` content block.
pub(super) fn text_block(ty: &str, text: &str) -> Value {
    Value::Object(Object::new().with("type", ty).with("text", text))
}

/// An array of integers.
pub(super) fn ints(seqs: &[i64]) -> Value {
    Value::Array(seqs.iter().map(|&s| Value::from(s)).collect())
}

/// An owned string value.
pub(super) fn string(s: String) -> Value {
    Value::String(JsString::from(s))
}
