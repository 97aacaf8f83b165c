//! Generated sessions in DSH 0.2's format (V4): the V0 generator's sessions carried through the
//! shape changes later-format-spec §3.8 describes, so V4 workloads say what V0 ones say.
//!
//! - `assistant/chunk`s are folded away (the message keeps an empty `stream`, as migrated
//!   legacy messages do) and later seqs close up; a regenerated assistant message replacing
//!   another is dropped (V4 assistant messages carry no sources, so they cannot replace);
//! - a `system/message` head (empty) follows the first `step/start`; a `request/header` whose
//!   `system` text differs from the current prompt is preceded by a `system/message` replacing
//!   the head, and loses its `system`;
//! - the first `request/header` with tools is followed by a `developer/message` adding one tool
//!   (`headerSeq` names the header);
//! - every third session is a seeded fork: `isSeeded` (with a
//!   `parentSession`), the first turn being the inherited prefix, closed by the
//!   `{inherited:true}` end-seed that marks the cut;
//! - tool results become tool-role messages; `plugin` sources become producer kinds; replaces
//!   are spelled `{op,startSeq,endSeq}`; every seq reference is renumbered;
//! - every third human prompt carries 1–3 image blocks, and now and then a step ends with an
//!   `image/offload` of the next image of the oldest current message that has one;
//! - batches keep their grouping; each batch's text is its rows, `sourceEventSeqs`
//!   range-encoded, one per line.

use std::collections::HashMap;

use sessionlog_codec::format::header::{author_header, parse_header, HeaderFields};
use sessionlog_codec::format::rows::file_row_text;
use sessionlog_codec::json::{JsString, Object, Value};
use sessionlog_codec::rules::surface::{SurfaceChange, SurfaceFold, SurfaceModel};

use super::feed::{Batch, SessionFeed};
use super::session::build_each;
use super::GenOptions;

/// Session number `index` of the corpus `opts` describes, in format V4, as a live feed.
pub fn session_batches_v4(index: u64, opts: &GenOptions) -> SessionFeed {
    let mut batches = Vec::new();
    let (id, header_line) = session_v4_each(index, opts, &mut |b| batches.push(b));
    SessionFeed {
        id,
        header_line,
        batches,
    }
}

/// [`session_batches_v4`] in bounded memory: each batch goes to `on_batch` as soon as it is
/// complete; returns the session id and its header line.
pub fn session_v4_each(
    index: u64,
    opts: &GenOptions,
    on_batch: &mut dyn FnMut(Batch),
) -> (String, String) {
    let seeded = index % 3 == 2;
    let mut t = Transform {
        surface: SurfaceFold::new().with_model(SurfaceModel::V4),
        seed_pending: seeded,
        ..Transform::default()
    };
    let v0 = build_each(index, opts, true, &mut |batch| {
        let first_seq = t.next;
        let mut events = Vec::new();
        for e in &batch.events {
            t.event(e, &mut events);
        }
        if events.is_empty() {
            return;
        }
        let text = events.iter().map(|e| file_row_text(e) + "\n").collect();
        on_batch(Batch {
            first_seq,
            events,
            text,
        });
    });
    let header_line = v4_header(v0.out.trim_end_matches('\n'), seeded.then_some(&v0.id));
    (v0.id, header_line)
}

/// The V0 header's fields in V4's layout; a seeded session (`seeded_id`) gets `isSeeded` and a
/// parent.
fn v4_header(v0: &str, seeded_id: Option<&String>) -> String {
    let Ok(h) = parse_header(v0.as_bytes()) else {
        return v0.to_owned();
    };
    let o = &h.object;
    let text = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_owned);
    let int = |k: &str| o.get(k).and_then(Value::as_safe_integer);
    author_header(&HeaderFields {
        id: h.id.to_string_lossy(),
        created_at: int("createdAt").unwrap_or(0),
        cwd: text("cwd"),
        parent_session: text("parentSession")
            .or_else(|| seeded_id.map(|id| format!("{id}-parent"))),
        seed_length: seeded_id.map(|_| 0),
        origin: text("origin"),
        delegation_depth: int("delegationDepth").unwrap_or(0),
        agent_preset: text("agentPreset"),
        version: 4,
    })
}

/// The running state of one session's transform.
#[derive(Default)]
struct Transform {
    /// The next V4 seq.
    next: u64,
    /// V0 seq → V4 seq of every event kept.
    seqs: HashMap<u64, u64>,
    /// The current system head's seq, once the first step started.
    head: Option<u64>,
    prompt: String,
    /// The `{turn, step}` of the open step.
    step: Option<(Value, Value)>,
    developer_added: bool,
    /// A seeded session whose inherited prefix (its first turn) is not closed yet.
    seed_pending: bool,
    /// Human messages with images: (seq, images, images offloaded so far).
    images: Vec<(u64, u64, u64)>,
    /// The V4 surface so far, to cite every node a replace shadows (the nodes this transform
    /// inserted are not among the V0 sources).
    surface: SurfaceFold,
    /// The events currently on the surface, by seq (what the fold's rules look up).
    current: HashMap<u64, Value>,
}

impl Transform {
    /// Emit `event`'s V4 counterpart (and what goes with it) into `out`.
    fn event(&mut self, event: &Value, out: &mut Vec<Value>) {
        let Some(o) = event.as_object() else { return };
        let ty = o.get("type").and_then(Value::as_str).unwrap_or_default();
        let old_seq = seq_of(o.get("seq"));
        let time = o.get("time").cloned().unwrap_or(Value::Null);
        if ty == "assistant/chunk" {
            return;
        }
        if ty == "assistant/message" && matches!(o.get("surfaceOp"), Some(Value::Object(_))) {
            // A V4 assistant message cannot replace (it cites no sources): the regenerated copy
            // is dropped and references to it go to the message it would have replaced.
            let start = o
                .get("surfaceOp")
                .and_then(Value::as_object)
                .and_then(|op| seq_of(op.get("start")))
                .and_then(|s| self.seqs.get(&s).copied());
            if let (Some(old), Some(start)) = (old_seq, start) {
                self.seqs.insert(old, start);
            }
            return;
        }
        let mut e = o.clone();
        let mut data = o
            .get("data")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        match ty {
            "step/start" => {
                self.step = Some((
                    data.get("turn").cloned().unwrap_or(Value::Null),
                    data.get("step").cloned().unwrap_or(Value::Null),
                ));
            }
            "request/header" => {
                let mut header = data
                    .get("header")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                if let Some(Value::String(system)) = header.get("system") {
                    let system = system.to_string_lossy();
                    if system != self.prompt && self.head.is_some() {
                        self.replace_head(&system, &time, out);
                    }
                    self.prompt = system;
                }
                header = without(&header, "system");
                data.insert(JsString::from("header"), Value::Object(header));
            }
            "assistant/message" => {
                e = without(&e, "sourceEventSeqs");
                data.insert(JsString::from("stream"), Value::Array(Vec::new()));
            }
            "tool/result" => data = tool_role(&data),
            "user/message" => {
                data = producer_source(&data);
                if old_seq.is_some_and(|s| s % 3 == 0) && is_human(&data) {
                    add_images(&mut data, 1 + old_seq.unwrap_or(0) % 3);
                }
            }
            _ => {}
        }
        self.remap(&mut e, &mut data);
        if matches!(ty, "compaction/summary" | "compaction/prune") {
            self.name_span(&mut data);
        }
        e.insert(JsString::from("data"), Value::Object(data.clone()));
        let seq = self.push(e, out);
        if let Some(old) = old_seq {
            self.seqs.insert(old, seq);
        }
        if ty == "step/start" && self.head.is_none() {
            self.head = Some(self.system_message(&time, None, out));
        }
        if ty == "user/message" && is_human(&data) {
            let images = count_images(&data);
            if images > 0 {
                self.images.push((seq, images, 0));
            }
        }
        if ty == "step/end" && old_seq.is_some_and(|s| s % 5 == 0) {
            self.offload_image(&time, out);
        }
        if ty == "request/header" && !self.developer_added && self.step.is_some() {
            self.add_tool(&data, seq, &time, out);
        }
        if ty == "turn/end" && self.seed_pending {
            self.seed_pending = false;
            let marker = Object::new()
                .with("type", "session/end-seed")
                .with("seq", 0)
                .with("time", time)
                .with("data", Object::new().with("inherited", true));
            self.push(marker, out);
        }
    }

    /// An `image/offload` of the next image of the oldest current human message that has one
    /// left (messages shadowed by a compaction are skipped for good).
    fn offload_image(&mut self, time: &Value, out: &mut Vec<Value>) {
        let nodes = self.surface.nodes();
        self.images
            .retain(|(seq, images, done)| done < images && nodes.contains(seq));
        let Some(target) = self.images.first_mut() else {
            return;
        };
        let (seq, index) = (target.0, target.2);
        target.2 += 1;
        let target = Object::new().with("seq", seq as i64).with(
            "imageIndexes",
            Value::Array(vec![Value::from(index as i64)]),
        );
        let e = Object::new()
            .with("type", "image/offload")
            .with("seq", 0)
            .with("time", time.clone())
            .with(
                "data",
                Object::new().with("targets", Value::Array(vec![Value::Object(target)])),
            );
        self.push(e, out);
    }

    /// Assign the next seq to `e`, make a replace cite every node it shadows, and emit it.
    fn push(&mut self, mut e: Object, out: &mut Vec<Value>) -> u64 {
        let seq = self.next;
        e.insert(JsString::from("seq"), Value::from(seq as i64));
        self.cite_shadowed(&mut e);
        let event = Value::Object(e);
        let current = &self.current;
        let lookup = |s: u64| current.get(&s);
        // The V0 session folds; the transform keeps that true, and the live append that
        // consumes this feed re-checks every event anyway.
        match self.surface.apply(&event, lookup) {
            Ok(SurfaceChange::Appended { seq }) => {
                self.current.insert(seq, event.clone());
            }
            Ok(SurfaceChange::Replaced(r)) => {
                for s in &r.shadowed_seqs {
                    self.current.remove(s);
                }
                self.current.insert(r.seq, event.clone());
            }
            Ok(SurfaceChange::Unchanged) | Err(_) => {}
        }
        out.push(event);
        self.next += 1;
        seq
    }

    /// A compaction's `shadowedSeqs`: the current V4 surface from `shadowedRange.start` to its
    /// end (the span holds the nodes this transform inserted, which the V0 list lacks).
    fn name_span(&self, data: &mut Object) {
        let range = data.get("shadowedRange").and_then(Value::as_object);
        let nodes = self.surface.nodes();
        let at = |key: &str| {
            let seq = seq_of(range.and_then(|r| r.get(key)))?;
            nodes.iter().position(|&n| n == seq)
        };
        if let (Some(a), Some(b)) = (at("start"), at("end")) {
            if let Some(span) = nodes.get(a..=b) {
                let list = span.iter().map(|&s| Value::from(s as i64)).collect();
                data.insert(JsString::from("shadowedSeqs"), Value::Array(list));
            }
        }
    }

    /// Add to a replace's `sourceEventSeqs` the shadowed nodes it does not cite.
    fn cite_shadowed(&self, e: &mut Object) {
        let Some(op) = e.get("surfaceOp").and_then(Value::as_object) else {
            return;
        };
        let nodes = self.surface.nodes();
        let at = |key: &str| {
            let seq = seq_of(op.get(key))?;
            nodes.iter().position(|&n| n == seq)
        };
        let (Some(a), Some(b)) = (at("startSeq"), at("endSeq")) else {
            return;
        };
        let Some(shadowed) = nodes.get(a..=b) else {
            return;
        };
        let mut sources: Vec<u64> = e
            .get("sourceEventSeqs")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|v| seq_of(Some(v))).collect())
            .unwrap_or_default();
        for s in shadowed {
            if !sources.contains(s) {
                sources.push(*s);
            }
        }
        let list = sources.iter().map(|&s| Value::from(s as i64)).collect();
        e.insert(JsString::from("sourceEventSeqs"), Value::Array(list));
    }

    /// A `system/message` with the current prompt: the head (append), or with `replaces` its
    /// replacement.
    fn system_message(&mut self, time: &Value, replaces: Option<u64>, out: &mut Vec<Value>) -> u64 {
        let content = if self.prompt.is_empty() {
            Vec::new()
        } else {
            vec![Value::Object(
                Object::new()
                    .with("type", "text")
                    .with("text", self.prompt.as_str()),
            )]
        };
        let message = Object::new()
            .with("id", format!("system-{}", self.next).as_str())
            .with("role", "system")
            .with("content", Value::Array(content))
            .with("source", Object::new().with("kind", "system-prompt"));
        let mut e = self.step_message("system/message", time, message, None);
        match replaces {
            None => e = e.with("surfaceOp", "append"),
            Some(head) => {
                let h = Value::from(head as i64);
                e = e
                    .with("sourceEventSeqs", Value::Array(vec![h.clone()]))
                    .with(
                        "surfaceOp",
                        Object::new()
                            .with("op", "replace")
                            .with("startSeq", h.clone())
                            .with("endSeq", h),
                    );
            }
        }
        self.push(e, out)
    }

    fn replace_head(&mut self, prompt: &str, time: &Value, out: &mut Vec<Value>) {
        self.prompt = prompt.to_owned();
        let head = self.head;
        self.head = Some(self.system_message(time, head, out));
    }

    /// After the first `request/header` with tools: a `developer/message` adding its first tool.
    fn add_tool(&mut self, data: &Object, header_seq: u64, time: &Value, out: &mut Vec<Value>) {
        let header = data.get("header").and_then(Value::as_object);
        let Some(name) = header
            .and_then(|h| h.get("tools"))
            .and_then(Value::as_array)
            .and_then(|t| t.first())
            .and_then(Value::as_object)
            .and_then(|t| t.get("name"))
            .cloned()
        else {
            return;
        };
        let block = Object::new()
            .with("type", "tool-addition")
            .with("toolName", name);
        let message = Object::new()
            .with("id", format!("developer-{}", self.next).as_str())
            .with("role", "developer")
            .with("content", Value::Array(vec![Value::Object(block)]))
            .with("source", Object::new().with("kind", "tool-catalog"));
        let header_seq = ("headerSeq", Value::from(header_seq as i64));
        let e = self
            .step_message("developer/message", time, message, Some(header_seq))
            .with("surfaceOp", "append");
        self.push(e, out);
        self.developer_added = true;
    }

    /// `{type, seq, time, data:{turn, step, message[, extra]}}` in the open step (its seq is
    /// assigned when pushed).
    fn step_message(
        &self,
        ty: &str,
        time: &Value,
        message: Object,
        extra: Option<(&'static str, Value)>,
    ) -> Object {
        let (turn, step) = self
            .step
            .clone()
            .unwrap_or((Value::from(1), Value::from(1)));
        let mut data = Object::new()
            .with("turn", turn)
            .with("step", step)
            .with("message", message);
        if let Some((key, value)) = extra {
            data = data.with(key, value);
        }
        Object::new()
            .with("type", ty)
            .with("seq", 0)
            .with("time", time.clone())
            .with("data", data)
    }

    /// Renumber `e`'s and `data`'s seq references through the V0 → V4 map.
    fn remap(&self, e: &mut Object, data: &mut Object) {
        let map = |v: &Value| -> Value {
            match seq_of(Some(v)).and_then(|s| self.seqs.get(&s)) {
                Some(&n) => Value::from(n as i64),
                None => v.clone(),
            }
        };
        if let Some(Value::Array(list)) = e.get("sourceEventSeqs").cloned() {
            let mapped = list
                .iter()
                .filter(|v| seq_of(Some(v)).is_some_and(|s| self.seqs.contains_key(&s)))
                .map(map)
                .collect();
            e.insert(JsString::from("sourceEventSeqs"), Value::Array(mapped));
        }
        if let Some(Value::Object(op)) = e.get("surfaceOp").cloned() {
            let start = op.get("start").map(map).unwrap_or(Value::Null);
            let end = op.get("end").map(map).unwrap_or(Value::Null);
            let op = Object::new()
                .with("op", "replace")
                .with("startSeq", start)
                .with("endSeq", end);
            e.insert(JsString::from("surfaceOp"), Value::Object(op));
        }
        for key in ["shadowedSeqs", "messageSeqs"] {
            if let Some(Value::Array(list)) = data.get(key).cloned() {
                data.insert(
                    JsString::from(key),
                    Value::Array(list.iter().map(map).collect()),
                );
            }
        }
        if let Some(Value::Object(range)) = data.get("shadowedRange").cloned() {
            let mut range = range;
            for key in ["start", "end"] {
                if let Some(v) = range.get(key).cloned() {
                    range.insert(JsString::from(key), map(&v));
                }
            }
            data.insert(JsString::from("shadowedRange"), Value::Object(range));
        }
        if let Some(v) = data.get("sourceEventSeq").cloned() {
            data.insert(JsString::from("sourceEventSeq"), map(&v));
        }
    }
}

fn seq_of(v: Option<&Value>) -> Option<u64> {
    v?.as_safe_u64()
}

/// `o` without `key` (order kept).
fn without(o: &Object, key: &str) -> Object {
    let mut out = Object::new();
    for (k, v) in o.iter().filter(|(k, _)| !k.eq_str(key)) {
        out.insert(k.clone(), v.clone());
    }
    out
}

/// A V0 tool result (`role:"user"` with one `tool-result` block) as V4's tool-role message.
fn tool_role(data: &Object) -> Object {
    let mut data = data.clone();
    let Some(message) = data.get("message").and_then(Value::as_object).cloned() else {
        return data;
    };
    let block = message
        .get("content")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let call_id = block.get("toolCallId").cloned().unwrap_or(Value::Null);
    let mut lifted = Object::new()
        .with("id", message.get("id").cloned().unwrap_or(Value::Null))
        .with("role", "tool")
        .with(
            "source",
            message.get("source").cloned().unwrap_or(Value::Null),
        )
        .with("toolCallId", call_id)
        .with(
            "content",
            block
                .get("content")
                .cloned()
                .unwrap_or(Value::Array(Vec::new())),
        );
    if block.get("isError") == Some(&Value::Bool(true)) || data.contains_key("error") {
        lifted = lifted.with("isError", true);
    }
    data.insert(JsString::from("message"), Value::Object(lifted));
    data
}

/// A `user/message` whose source is `{kind:"plugin",plugin:P}` with V4's producer kind.
fn producer_source(data: &Object) -> Object {
    let mut data = data.clone();
    let Some(source) = data.get("source").and_then(Value::as_object).cloned() else {
        return data;
    };
    if source.get("kind").and_then(Value::as_str) != Some("plugin") {
        return data;
    }
    let plugin = source
        .get("plugin")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = sessionlog_codec::migrate::producer_kind(plugin, data.get("role"));
    let mut renamed = Object::new().with("kind", kind.as_str());
    for (k, v) in source
        .iter()
        .filter(|(k, _)| !k.eq_str("kind") && !k.eq_str("plugin"))
    {
        renamed.insert(k.clone(), v.clone());
    }
    data.insert(JsString::from("source"), Value::Object(renamed));
    data
}

/// Whether a `user/message`'s data is a human prompt (`source.kind == "user"`).
fn is_human(data: &Object) -> bool {
    data.get("source")
        .and_then(Value::as_object)
        .and_then(|s| s.get("kind"))
        .and_then(Value::as_str)
        == Some("user")
}

/// Append `n` image blocks (attachment references, as DSH stores them) to a message's content.
fn add_images(data: &mut Object, n: u64) {
    let mut content = data
        .get("content")
        .and_then(Value::as_array)
        .map(<[Value]>::to_vec)
        .unwrap_or_default();
    for i in 0..n {
        let attachment = Object::new()
            .with(
                "attachmentId",
                format!("sha256:{:064x}", content.len() as u64 * 31 + i).as_str(),
            )
            .with("mediaType", "image/png")
            .with("bytes", 48_213)
            .with("width", 1_280)
            .with("height", 720);
        content.push(Value::Object(
            Object::new()
                .with("type", "image")
                .with("attachment", attachment),
        ));
    }
    data.insert(JsString::from("content"), Value::Array(content));
}

fn count_images(data: &Object) -> u64 {
    data.get("content")
        .and_then(Value::as_array)
        .map_or(0, |c| {
            c.iter()
                .filter(|b| {
                    b.as_object()
                        .and_then(|o| o.get("type"))
                        .and_then(Value::as_str)
                        == Some("image")
                })
                .count() as u64
        })
}
