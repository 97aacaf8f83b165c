//! Surface replacements: compaction (a summary `user/message` replacing an older range of nodes)
//! and tool-result pruning (a `tool/result` rewrite that changes only its content).
//!
//! Invariants (DSH's fold rules): a replacement's `start`/`end` are current surface nodes with
//! `start` not after `end`; its `sourceEventSeqs` cite every shadowed node and only earlier seqs;
//! a tool-result rewrite shadows exactly one current `tool/result` and keeps everything but
//! `message.content[0].content` identical (same turn, step, message id, call id, isError).

use sessionlog_codec::json::{Object, Value};

use super::session::{ints, text_block, NodeKind, Session, SurfaceOp};
use super::stream::tool_result_data;
use super::text;

/// The fixed preamble DSH puts before a compacted summary.
const CHECKPOINT_PREAMBLE: &str = "This is an automatically generated checkpoint condensing an earlier span of the \
conversation to free up context. Treat the captured context as established background and build on it without \
restating it. Continue the task directly from the messages that follow, without acknowledging this checkpoint.\n\n\
<compacted-summary>";

impl Session {
    /// A compaction, between turns (`turn == None`) or between steps of `turn`: `compaction/start`,
    /// `compaction/summary`, the replacement `user/message`, `compaction/end`. Skipped when the
    /// surface is too short to leave a recent tail.
    pub(super) fn compaction(&mut self, turn: Option<i64>) {
        if self.nodes.len() < 6 {
            return;
        }
        let keep = usize::try_from(self.rng.range(2, 5)).unwrap_or(2);
        let shadowed: Vec<i64> = self.nodes[..self.nodes.len() - keep]
            .iter()
            .map(|n| n.seq)
            .collect();
        let (Some(&start), Some(&end)) = (shadowed.first(), shadowed.last()) else {
            return;
        };
        let id = text::uuid(&mut self.rng);
        let turn_value = turn.map_or(Value::Null, Value::from);
        let data = Object::new()
            .with("compactionId", id.as_str())
            .with("turn", turn_value.clone());
        let start_seq = self.event("compaction/start", (0, 50), data);
        let words = usize::try_from(self.rng.range(40, 300)).unwrap_or(40);
        let summary = text::prose_string(&mut self.rng, words);
        let range = Object::new().with("start", start).with("end", end);
        let token_count =
            i64::try_from(shadowed.len()).unwrap_or(0) * 350 + self.rng.range_i(0, 500);
        let usage = Object::new()
            .with("inputTokens", token_count)
            .with("outputTokens", i64::try_from(words).unwrap_or(0) * 4 / 3);
        let data = Object::new()
            .with("compactionId", id.as_str())
            .with("summary", Value::Array(vec![text_block("text", &summary)]))
            .with("shadowedRange", range)
            .with("shadowedSeqs", ints(&shadowed))
            .with("shadowedTokenCount", token_count)
            .with("provider", self.model.0)
            .with("model", self.model.1)
            .with("maxTokens", 4_096)
            .with("usage", usage);
        let summary_seq = self.event("compaction/summary", (2_000, 40_000), data);
        let source = Object::new()
            .with("kind", "plugin")
            .with("plugin", "compact")
            .with("compactionId", id.as_str());
        let content = vec![
            text_block("text", CHECKPOINT_PREAMBLE),
            text_block("text", &summary),
            text_block("text", "</compacted-summary>"),
        ];
        let message = Object::new()
            .with("content", Value::Array(content))
            .with("source", source)
            .with("role", "user")
            .with("id", text::uuid(&mut self.rng).as_str());
        let mut sources = vec![start_seq, summary_seq];
        sources.extend_from_slice(&shadowed);
        let op = SurfaceOp::Replace { start, end };
        self.surface(
            "user/message",
            (0, 2),
            message,
            Some(sources),
            op,
            NodeKind::User,
        );
        let data = Object::new()
            .with("compactionId", id.as_str())
            .with("turn", turn_value);
        self.event("compaction/end", (0, 2), data);
    }

    /// Prune one older current tool result: `compaction/prune`, then a `tool/result` replacement
    /// with the same identity and a stub content. Skipped when no candidate exists.
    pub(super) fn prune_tool_result(&mut self) {
        let recent = self.nodes.len().saturating_sub(3);
        let candidates: Vec<usize> = (0..recent)
            .filter(
                |&i| matches!(&self.nodes[i].kind, NodeKind::ToolResult(t) if t.content_len > 200),
            )
            .collect();
        if candidates.is_empty() {
            return;
        }
        let pick = candidates[self.rng.index(candidates.len())];
        let target = &self.nodes[pick];
        let NodeKind::ToolResult(node) = &target.kind else {
            return;
        };
        let (seq, mut node) = (target.seq, node.clone());
        let tokens = i64::try_from(node.content_len / 4).unwrap_or(0);
        let data = Object::new()
            .with(
                "shadowedRange",
                Object::new().with("start", seq).with("end", seq),
            )
            .with("shadowedSeqs", ints(&[seq]))
            .with("shadowedTokenCount", tokens);
        self.event("compaction/prune", (0, 20), data);
        let stub = format!("[tool output pruned: {} bytes]", node.content_len);
        node.content_len = stub.len();
        let data = tool_result_data(&node, stub);
        let op = SurfaceOp::Replace {
            start: seq,
            end: seq,
        };
        self.surface(
            "tool/result",
            (0, 2),
            data,
            Some(vec![seq]),
            op,
            NodeKind::ToolResult(node),
        );
    }
}
