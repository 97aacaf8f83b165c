//! One model call inside a step: the streamed `assistant/chunk` events, the `assistant/message`
//! that collects them, and the `tool/call` / `tool/result` pairs it triggers.
//!
//! Invariants: chunk events follow the provider stream shape (`block-start`, deltas, `block-end`
//! per block, then `usage` and `finish`); `assistant/message.sourceEventSeqs` lists exactly the
//! step's chunk seqs; each `tool/result` cites its `tool/call` and carries the same call id.

use sessionlog_codec::json::{stringify, Object, Value};

use super::rng::Rng;
use super::session::{string, text_block, NodeKind, Session, SurfaceOp, ToolResultNode};
use super::text;

/// How a model call ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Normal: `stop`, or `tool-calls` when the turn continues.
    Normal,
    /// `finish: max-tokens`; the turn ends with `max-tokens`.
    MaxTokens,
    /// The stream is cut by the user: `interrupted: true`, turn aborted.
    Interrupted,
    /// Provider error: no message, turn ends with `error`.
    Error,
}

/// A tool call the model makes.
struct ToolCall {
    id: String,
    name: &'static str,
    arguments: String,
}

impl Session {
    /// Stream one model response in step `(turn, step)`. `more_steps` lets it call tools (the turn
    /// continues). Returns the turn-end reason when the turn ends after this step.
    pub(super) fn model_call(&mut self, turn: i64, step: i64, more_steps: bool) -> Option<Value> {
        let fate = match self.rng.unit() {
            x if x < 0.004 => Fate::Error,
            x if x < 0.012 => Fate::Interrupted,
            x if x < 0.05 && !more_steps => Fate::MaxTokens,
            _ => Fate::Normal,
        };
        if fate == Fate::Error {
            return Some(self.provider_error(turn, step));
        }
        let mut seqs = Vec::new();
        let mut content = Vec::new();
        let mut index = 0;
        let calls: Vec<ToolCall> = if more_steps && fate == Fate::Normal {
            let n = if self.rng.chance(0.8) {
                1
            } else {
                self.rng.range(2, 3)
            };
            (0..n).map(|_| tool_call(&mut self.rng)).collect()
        } else {
            Vec::new()
        };
        if self.rng.chance(0.6) {
            let words = usize::try_from(self.rng.range(15, 220)).unwrap_or(15);
            let cut = fate == Fate::Interrupted && self.rng.chance(0.3);
            let (done, said) =
                self.stream_text((turn, step), index, "reasoning", words, cut, &mut seqs);
            content.push(text_block("reasoning", &said));
            index += 1;
            if !done {
                return Some(self.interrupted(turn, step, content, seqs));
            }
        }
        if calls.is_empty() || self.rng.chance(0.35) {
            let words = usize::try_from(self.rng.range(5, 350)).unwrap_or(5);
            let cut = fate == Fate::Interrupted;
            let (done, said) = self.stream_text((turn, step), index, "text", words, cut, &mut seqs);
            content.push(text_block("text", &said));
            index += 1;
            if !done {
                return Some(self.interrupted(turn, step, content, seqs));
            }
        }
        for call in &calls {
            self.stream_tool_call(turn, step, index, call, &mut seqs);
            content.push(Value::Object(
                Object::new()
                    .with("type", "tool-call")
                    .with("id", call.id.as_str())
                    .with("name", call.name)
                    .with("arguments", call.arguments.as_str()),
            ));
            index += 1;
        }
        let usage = self.usage(turn);
        seqs.push(
            self.chunk(
                turn,
                step,
                Object::new()
                    .with("type", "usage")
                    .with("usage", usage.clone()),
            ),
        );
        let finish = match (fate, calls.is_empty()) {
            (Fate::MaxTokens, _) => "max-tokens",
            (_, false) => "tool-calls",
            _ => "stop",
        };
        let reason = Object::new().with("kind", finish);
        seqs.push(self.chunk(
            turn,
            step,
            Object::new().with("type", "finish").with("reason", reason),
        ));
        let message = self.assistant_message(content.clone());
        let data = step_data(turn, step)
            .with("message", message)
            .with("usage", usage.clone());
        let seq = self.surface(
            "assistant/message",
            (0, 3),
            data,
            Some(seqs.clone()),
            SurfaceOp::Append,
            NodeKind::Assistant,
        );
        if self.rng.chance(0.004) {
            // A regenerated response replacing the one just appended (model-only copy).
            let message = self.assistant_message(content);
            let data = step_data(turn, step)
                .with("message", message)
                .with("usage", usage);
            seqs.push(seq);
            let op = SurfaceOp::Replace {
                start: seq,
                end: seq,
            };
            self.surface(
                "assistant/message",
                (50, 2_000),
                data,
                Some(seqs),
                op,
                NodeKind::Assistant,
            );
        }
        for call in &calls {
            self.run_tool(turn, step, call);
        }
        match (fate, calls.is_empty()) {
            (Fate::MaxTokens, _) => Some(Value::Object(Object::new().with("kind", "max-tokens"))),
            (_, true) => Some(Value::Object(Object::new().with("kind", "completed"))),
            _ => None,
        }
    }

    /// Append one `assistant/chunk`.
    fn chunk(&mut self, turn: i64, step: i64, chunk: Object) -> i64 {
        self.event(
            "assistant/chunk",
            (0, 45),
            step_data(turn, step).with("chunk", chunk),
        )
    }

    /// Stream a text or reasoning block of about `words` words. With `cut`, the stream stops
    /// part-way (no `block-end`). Returns whether the block completed and the text delivered.
    fn stream_text(
        &mut self,
        (turn, step): (i64, i64),
        index: i64,
        kind: &str,
        words: usize,
        cut: bool,
        seqs: &mut Vec<i64>,
    ) -> (bool, String) {
        let full = text::prose_string(&mut self.rng, words);
        let start = Object::new()
            .with("type", "block-start")
            .with("index", index)
            .with("blockType", kind);
        seqs.push(self.chunk(turn, step, start));
        let pieces = text::tokens(&mut self.rng, &full);
        let keep = if cut {
            self.rng.index(pieces.len().max(1))
        } else {
            pieces.len()
        };
        let delta = if kind == "text" {
            "text-delta"
        } else {
            "reasoning-delta"
        };
        for piece in &pieces[..keep] {
            let chunk = Object::new()
                .with("type", delta)
                .with("index", index)
                .with("text", *piece);
            seqs.push(self.chunk(turn, step, chunk));
        }
        if cut {
            return (false, pieces[..keep].concat());
        }
        let block = Object::new().with("type", kind).with("text", full.as_str());
        let end = Object::new()
            .with("type", "block-end")
            .with("index", index)
            .with("block", block);
        seqs.push(self.chunk(turn, step, end));
        (true, full)
    }

    /// Stream one tool-call block. Most providers repeat `name` on every delta; some send it only
    /// on the first, which leaves that delta loose in front of a packed row.
    fn stream_tool_call(
        &mut self,
        turn: i64,
        step: i64,
        index: i64,
        call: &ToolCall,
        seqs: &mut Vec<i64>,
    ) {
        let start = Object::new()
            .with("type", "block-start")
            .with("index", index)
            .with("blockType", "tool-call");
        seqs.push(self.chunk(turn, step, start));
        let name_every_time = self.rng.chance(0.8);
        let pieces = text::arg_pieces(&mut self.rng, &call.arguments);
        for (k, piece) in pieces.iter().enumerate() {
            let mut chunk = Object::new()
                .with("type", "tool-call-delta")
                .with("index", index)
                .with("id", call.id.as_str());
            if name_every_time || k == 0 {
                chunk = chunk.with("name", call.name);
            }
            seqs.push(self.chunk(turn, step, chunk.with("argumentsDelta", *piece)));
        }
        let block = Object::new()
            .with("type", "tool-call")
            .with("id", call.id.as_str())
            .with("name", call.name)
            .with("arguments", call.arguments.as_str());
        let end = Object::new()
            .with("type", "block-end")
            .with("index", index)
            .with("block", block);
        seqs.push(self.chunk(turn, step, end));
    }

    /// The `assistant/message` for a stream the user interrupted; the turn is aborted.
    fn interrupted(&mut self, turn: i64, step: i64, content: Vec<Value>, seqs: Vec<i64>) -> Value {
        let message = self.assistant_message(content);
        let data = step_data(turn, step)
            .with("message", message)
            .with("interrupted", true);
        self.surface(
            "assistant/message",
            (0, 3),
            data,
            Some(seqs),
            SurfaceOp::Append,
            NodeKind::Assistant,
        );
        Value::Object(
            Object::new()
                .with("kind", "aborted")
                .with("reason", Object::new().with("kind", "user")),
        )
    }

    /// A provider failure: a `finish` chunk with the failure, no message; the turn errors.
    fn provider_error(&mut self, turn: i64, step: i64) -> Value {
        let (message, code) = self.rng.pick(&[
            ("provider returned HTTP 503: overloaded", "UNAVAILABLE"),
            (
                "request exceeded the model context window",
                "CONTEXT_WINDOW_EXCEEDED",
            ),
            ("stream ended without a finish event", "PROTOCOL"),
        ]);
        let error = Object::new().with("message", message).with("code", code);
        let reason = Object::new()
            .with("kind", "error")
            .with("failure", error.clone());
        self.chunk(
            turn,
            step,
            Object::new().with("type", "finish").with("reason", reason),
        );
        Value::Object(Object::new().with("kind", "error").with("error", error))
    }

    /// An assistant message in `createMessage` key order: `role, content, source, id`.
    fn assistant_message(&mut self, content: Vec<Value>) -> Object {
        let source = Object::new()
            .with("kind", "model")
            .with("provider", self.model.0)
            .with("model", self.model.1);
        Object::new()
            .with("role", "assistant")
            .with("content", Value::Array(content))
            .with("source", source)
            .with("id", text::uuid(&mut self.rng).as_str())
    }

    /// Token usage; input grows with the conversation.
    fn usage(&mut self, turn: i64) -> Object {
        let mut usage = Object::new()
            .with(
                "inputTokens",
                2_000 + turn * 900 + self.rng.range_i(0, 4_000),
            )
            .with("outputTokens", self.rng.range_i(5, 2_000));
        if self.rng.chance(0.7) {
            usage = usage.with("cacheReadTokens", self.rng.range_i(0, 2_000 + turn * 800));
        }
        if self.rng.chance(0.5) {
            usage = usage.with("reasoningTokens", self.rng.range_i(0, 800));
        }
        usage
    }

    /// `tool/call`, then its `tool/result` citing it.
    fn run_tool(&mut self, turn: i64, step: i64, call: &ToolCall) {
        let data = step_data(turn, step)
            .with("callId", call.id.as_str())
            .with("name", call.name)
            .with("arguments", call.arguments.as_str());
        let call_seq = self.event("tool/call", (0, 3), data);
        // Mostly short outputs, a quarter of file-sized ones, and a few very large ones.
        let size = match self.rng.unit() {
            x if x < 0.03 => self.rng.range(10_000, 100_000),
            x if x < 0.25 => self.rng.range(5, 80),
            x if x < 0.70 => self.rng.range(80, 2_000),
            _ => self.rng.range(2_000, 8_000),
        };
        let output = match call.name {
            "write" | "edit" => format!("Wrote {size} bytes to {}", text::path(&mut self.rng)),
            name => text::tool_output(&mut self.rng, name, usize::try_from(size).unwrap_or(80)),
        };
        let node = ToolResultNode {
            turn,
            step,
            call_id: call.id.clone(),
            message_id: text::uuid(&mut self.rng),
            is_error: self.rng.chance(0.05),
            content_len: output.len(),
        };
        let data = tool_result_data(&node, output);
        let kind = NodeKind::ToolResult(Box::new(node));
        self.surface(
            "tool/result",
            (5, 8_000),
            data,
            Some(vec![call_seq]),
            SurfaceOp::Append,
            kind,
        );
    }
}

/// `{turn, step}`, the start of every in-step payload.
fn step_data(turn: i64, step: i64) -> Object {
    Object::new().with("turn", turn).with("step", step)
}

/// `tool/result` data in DSH order; the message is in `createToolResultMessage` key order
/// (`source, content, role, id`) and its block is `type, toolCallId, content, isError`.
pub(super) fn tool_result_data(node: &ToolResultNode, output: String) -> Object {
    let block = Object::new()
        .with("type", "tool-result")
        .with("toolCallId", node.call_id.as_str())
        .with(
            "content",
            Value::Array(vec![Value::Object(
                Object::new()
                    .with("type", "text")
                    .with("text", string(output)),
            )]),
        )
        .with("isError", node.is_error);
    let message = Object::new()
        .with(
            "source",
            Object::new()
                .with("kind", "tool")
                .with("callId", node.call_id.as_str()),
        )
        .with("content", Value::Array(vec![Value::Object(block)]))
        .with("role", "user")
        .with("id", node.message_id.as_str());
    step_data(node.turn, node.step).with("message", message)
}

/// A tool call with JSON arguments shaped for its tool.
fn tool_call(rng: &mut Rng) -> ToolCall {
    let name = rng.pick(text::TOOLS);
    let path = text::path(rng);
    let args = match name {
        "bash" => {
            let mut command = String::new();
            text::code(rng, &mut command, 1);
            let words = rng.index(8) + 3;
            Object::new()
                .with("command", command.trim_end())
                .with("description", text::prose_string(rng, words).as_str())
        }
        "read" => {
            let args = Object::new().with("path", path.as_str());
            if rng.chance(0.3) {
                args.with("offset", rng.range_i(1, 900)).with("limit", 200)
            } else {
                args
            }
        }
        "write" => {
            let mut body = String::new();
            let size = usize::try_from(rng.range(100, 2_500)).unwrap_or(100);
            text::code(rng, &mut body, size);
            Object::new()
                .with("path", path.as_str())
                .with("content", string(body))
        }
        "grep" => Object::new()
            .with(
                "pattern",
                format!(
                    "{}\\s+\\w+",
                    text::prose_string(rng, 1).trim_end_matches('.')
                )
                .as_str(),
            )
            .with("path", path.as_str()),
        _ => {
            let (mut old, mut new) = (String::new(), String::new());
            text::code(rng, &mut old, 60);
            text::code(rng, &mut new, 80);
            Object::new()
                .with("path", path.as_str())
                .with("old_string", string(old))
                .with("new_string", string(new))
        }
    };
    ToolCall {
        id: text::call_id(rng),
        name,
        arguments: stringify(&Value::Object(args)),
    }
}
