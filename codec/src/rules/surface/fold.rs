//! The incremental surface fold: DSH's `foldSurface` / `SurfaceManager`, one event at a time.
//!
//! State is the ordered node list (seqs of the events currently on the model-visible surface, in
//! model order, never sorted by seq), `replaceGeneration`, the history of replacements, and the
//! next expected seq. Invariants kept:
//! - events are taken at contiguous seqs from the fold's base (0 unless windowed);
//! - an event DSH rejects leaves the state untouched (plan first, commit last), and the error
//!   carries DSH's own message text;
//! - a replace `{start, end}` names two nodes currently on the surface by *position*: `start` must
//!   not sit after `end`, whatever their seq values; the covered range collapses into one node at
//!   the range's first position.
//!
//! The state derives serde so the engine can snapshot and restore it mid-log.

use std::borrow::Borrow;

use serde::{Deserialize, Serialize};

use super::js::{deep_equal, index0, prop, spread, template, TypeError};
use super::model::{SurfaceModel, SYSTEM_MESSAGE};
use super::{ASSISTANT_MESSAGE, TOOL_RESULT};
use crate::json::{stringify, Object, Value};
use crate::{Error, Result};

/// One replace observed by the fold (DSH's `SurfaceFoldReplacement`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replacement {
    /// Seq of the replacing event (the node that took the range's place).
    pub seq: u64,
    /// Declared inclusive start seq of the replaced range.
    pub start: u64,
    /// Declared inclusive end seq of the replaced range.
    pub end: u64,
    /// The nodes actually removed, in surface order.
    pub shadowed_seqs: Vec<u64>,
}

/// What one event did to the surface.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SurfaceChange {
    /// Not a surface event: the node list is unchanged.
    Unchanged,
    /// The event appended itself as the last node.
    Appended {
        /// The event's seq, now the last node.
        seq: u64,
    },
    /// The event replaced a range of nodes with itself.
    Replaced(Replacement),
}

/// The surface fold state (DSH's `nodes` + `replaceGeneration`, plus the replacement history
/// `foldSurface` returns and the next expected seq).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SurfaceFold {
    next_seq: u64,
    nodes: Vec<u64>,
    replace_generation: u64,
    replacements: Vec<Replacement>,
    #[serde(default)]
    model: SurfaceModel,
    /// Message-projection events committed (each advances `contentGeneration` only).
    #[serde(default)]
    projections: u64,
}

/// A validated `surfaceOp`.
enum Op {
    Append,
    Replace { start: u64, end: u64 },
}

impl SurfaceFold {
    /// An empty fold expecting seq 0 next.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same fold under `model`'s rules (V0 unless set).
    pub fn with_model(mut self, model: SurfaceModel) -> Self {
        self.model = model;
        self
    }

    /// The rules this fold applies.
    pub fn model(&self) -> SurfaceModel {
        self.model
    }

    /// An empty fold over a window whose first event has seq `base_seq` (DSH's
    /// `SurfaceManager(log, baseSeq)`): replaces reaching before the window fail as not found.
    pub fn starting_at(base_seq: u64) -> Self {
        SurfaceFold {
            next_seq: base_seq,
            ..Self::default()
        }
    }

    /// A fold resumed from a stored snapshot: `nodes` and `replace_generation` after the event at
    /// `next_seq - 1`, without the replacement history (the engine keeps that separately).
    pub fn from_snapshot(next_seq: u64, nodes: Vec<u64>, replace_generation: u64) -> Self {
        SurfaceFold {
            next_seq,
            nodes,
            replace_generation,
            replacements: Vec::new(),
            model: SurfaceModel::V0,
            projections: 0,
        }
    }

    /// Re-apply a change a fold produced, without re-validating it: rebuilding a surface from
    /// its index. Events between stored changes changed nothing, so the next seq moves to the
    /// change's seq + 1.
    pub fn redo(&mut self, change: &SurfaceChange) {
        match change {
            SurfaceChange::Unchanged => {}
            SurfaceChange::Appended { seq } => {
                self.nodes.push(*seq);
                self.next_seq = *seq;
            }
            SurfaceChange::Replaced(r) => {
                let at = r
                    .shadowed_seqs
                    .first()
                    .and_then(|&s| self.position(s))
                    .unwrap_or(self.nodes.len());
                let end = (at + r.shadowed_seqs.len()).min(self.nodes.len());
                self.nodes.splice(at..end, [r.seq]);
                self.replace_generation += 1;
                self.replacements.push(r.clone());
                self.next_seq = r.seq;
            }
        }
        self.next_seq += 1;
    }

    /// Current surface node seqs in model order.
    pub fn nodes(&self) -> &[u64] {
        &self.nodes
    }

    /// Number of replaces committed so far (DSH's `replaceGeneration`).
    pub fn replace_generation(&self) -> u64 {
        self.replace_generation
    }

    /// Every replace so far, in log order (DSH's `foldSurface(...).replacements`).
    pub fn replacements(&self) -> &[Replacement] {
        &self.replacements
    }

    /// Record a committed message-projection event (the engine and replay apply its messages).
    pub fn note_projection(&mut self) {
        self.projections += 1;
    }

    /// DSH's `contentGeneration`: replaces plus committed projection events.
    pub fn content_generation(&self) -> u64 {
        self.replace_generation + self.projections
    }

    /// The seq the next applied event must carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Fold one event, exactly as DSH's `foldSurface` does at this position. `lookup(seq)` returns
    /// an earlier event of the log; it is called only for a replace: for the node a `tool/result`
    /// replacement rewrites and, under V4, for node 0 when the span starts there (only its `type`
    /// is read). On error the state is unchanged.
    ///
    /// # Errors
    /// [`Error::Surface`] with DSH's message wherever DSH throws: a seq gap, a misplaced or invalid
    /// `surfaceOp` / `sourceEventSeqs`, a replace range not on the surface or reversed in surface
    /// order, a `tool/result` rewrite that changes more than content, or a `TypeError` on a shape
    /// DSH's code cannot read.
    pub fn apply<V: Borrow<Value>>(
        &mut self,
        event: &Value,
        lookup: impl FnMut(u64) -> Option<V>,
    ) -> Result<SurfaceChange> {
        let seq = self.next_seq;
        let change = self.plan(seq, event, lookup).map_err(|e| e.at(seq))?;
        match &change {
            SurfaceChange::Unchanged => {}
            SurfaceChange::Appended { seq } => self.nodes.push(*seq),
            SurfaceChange::Replaced(r) => {
                let at = self.position(r.start).unwrap_or(self.nodes.len());
                let removed = r.shadowed_seqs.len();
                self.nodes.splice(at..at + removed, [r.seq]);
                self.replace_generation += 1;
                self.replacements.push(r.clone());
            }
        }
        self.next_seq = seq + 1;
        Ok(change)
    }

    /// Undo the last applied event, whose result was `change`: a batch that fails midway rolls
    /// back the events it already folded, newest first, without copying the whole state.
    /// Undoing anything but the most recent change is a logic error and leaves a wrong state.
    pub fn undo(&mut self, change: &SurfaceChange) {
        match change {
            SurfaceChange::Unchanged => {}
            SurfaceChange::Appended { .. } => {
                self.nodes.pop();
            }
            SurfaceChange::Replaced(r) => {
                if let Some(at) = self.position(r.seq) {
                    self.nodes.splice(at..=at, r.shadowed_seqs.iter().copied());
                }
                self.replace_generation = self.replace_generation.saturating_sub(1);
                self.replacements.pop();
            }
        }
        self.next_seq = self.next_seq.saturating_sub(1);
    }

    /// The surface as DSH's expected-output file writes it (see [`surface_json`]).
    pub fn to_json(&self) -> String {
        surface_json(
            self.model,
            &self.nodes,
            (self.replace_generation, self.content_generation()),
            &self.replacements,
        )
    }

    fn position(&self, seq: u64) -> Option<usize> {
        self.nodes.iter().position(|&n| n == seq)
    }

    /// Validate `event` at `seq` and compute its change without touching the state.
    fn plan<V: Borrow<Value>>(
        &self,
        seq: u64,
        event: &Value,
        mut lookup: impl FnMut(u64) -> Option<V>,
    ) -> Result<SurfaceChange, Rejection> {
        let got = prop(Some(event), "seq")?;
        if event_seq(got) != Some(seq) {
            return Err(Rejection::rule(format!(
                "session event seq {} is not contiguous; expected {seq}",
                template(got)
            )));
        }
        let ty = prop(Some(event), "type")?;
        let Some(op) = surface_op(self.model, event, ty)? else {
            return Ok(SurfaceChange::Unchanged);
        };
        let is_assistant = ty.and_then(Value::as_str) == Some(ASSISTANT_MESSAGE);
        let sources = prop(Some(event), "sourceEventSeqs")?;
        if is_assistant && sources.is_some() && self.model == SurfaceModel::V4 {
            return Err(Rejection::rule(format!(
                "format v4 assistant/message at seq {seq} embeds its stream and cannot carry sourceEventSeqs"
            )));
        }
        let (start, end) = match op {
            Op::Append => {
                check_provenance(seq, ty, is_assistant, sources, &[])?;
                return Ok(SurfaceChange::Appended { seq });
            }
            Op::Replace { start, end } => (start, end),
        };
        let start_idx = self.position(start).ok_or_else(|| {
            Rejection::rule(format!(
                "surface replace: start seq {start} not found in surface"
            ))
        })?;
        let end_idx = self.position(end).ok_or_else(|| {
            Rejection::rule(format!(
                "surface replace: end seq {end} not found in surface"
            ))
        })?;
        if start_idx > end_idx {
            return Err(Rejection::rule(format!(
                "surface replace: start seq {start} (index {start_idx}) is after end seq {end} \
                 (index {end_idx})"
            )));
        }
        let shadowed = self.nodes[start_idx..=end_idx].to_vec();
        if start_idx == 0 && self.model == SurfaceModel::V4 {
            let head = lookup(shadowed[0]);
            let head_type = head
                .as_ref()
                .map(Borrow::borrow)
                .and_then(Value::as_object)
                .and_then(|o| o.get("type"))
                .and_then(Value::as_str);
            let by_system = ty.and_then(Value::as_str) == Some(SYSTEM_MESSAGE);
            if head_type == Some(SYSTEM_MESSAGE) && !(by_system && shadowed.len() == 1) {
                return Err(Rejection::rule(
                    "surface replace: node 0 holds the system prompt and may be rewritten only by \
                     a system/message over exactly that node"
                        .to_owned(),
                ));
            }
        }
        check_provenance(seq, ty, is_assistant, sources, &shadowed)?;
        if ty.and_then(Value::as_str) == Some(TOOL_RESULT) {
            check_tool_result_rewrite(self.model, event, &shadowed, lookup)?;
        }
        Ok(SurfaceChange::Replaced(Replacement {
            seq,
            start,
            end,
            shadowed_seqs: shadowed,
        }))
    }
}

/// Why DSH throws: one of its own rules, or a `TypeError` reading a malformed shape.
enum Rejection {
    Rule(String),
    Type(TypeError),
}

impl Rejection {
    fn rule(text: String) -> Self {
        Rejection::Rule(text)
    }

    fn at(self, seq: u64) -> Error {
        match self {
            Rejection::Rule(rule) => Error::Surface { seq, rule },
            Rejection::Type(e) => e.at(seq),
        }
    }
}

impl From<TypeError> for Rejection {
    fn from(e: TypeError) -> Self {
        Rejection::Type(e)
    }
}

/// DSH's `isEventSeq`: a non-negative safe integer (`-0` counts as 0).
fn event_seq(value: Option<&Value>) -> Option<u64> {
    value.and_then(Value::as_safe_u64)
}

/// DSH's `surfaceOpOf`: `None` for a non-surface event (under V4, an unknown ignorable record
/// whatever metadata it carries), else its validated operation.
fn surface_op(
    model: SurfaceModel,
    event: &Value,
    ty: Option<&Value>,
) -> Result<Option<Op>, Rejection> {
    if model == SurfaceModel::V4 && crate::format::known_types::is_opaque_v4(event) {
        // DSH 0.2: an unknown ignorable record keeps its metadata opaque, outside history.
        return Ok(None);
    }
    let op = prop(Some(event), "surfaceOp")?;
    // The type's text is only for a refusal's message: built when one is made.
    let ty_text = || template(ty);
    if !ty
        .and_then(Value::as_str)
        .is_some_and(|t| model.is_eligible(t))
    {
        if op.is_some() {
            return Err(Rejection::rule(format!(
                "session event \"{}\" is not surface-eligible and cannot carry surfaceOp",
                ty_text()
            )));
        }
        if prop(Some(event), "sourceEventSeqs")?.is_some() {
            return Err(Rejection::rule(format!(
                "session event \"{}\" is not surface-eligible and cannot carry \
                 sourceEventSeqs",
                ty_text()
            )));
        }
        return Ok(None);
    }
    let op = match op {
        None => {
            return Err(Rejection::rule(format!(
                "session event \"{}\" is surface-eligible and requires a surfaceOp marker",
                ty_text()
            )))
        }
        Some(Value::String(s)) if s.eq_str("append") => return Ok(Some(Op::Append)),
        Some(Value::Object(o)) => o,
        Some(_) => {
            return Err(Rejection::rule(format!(
                "session event \"{}\" carries an invalid surfaceOp",
                ty_text()
            )))
        }
    };
    let (start_key, end_key) = model.replace_keys();
    let is_replace = op.has_exact_keys(&["op", start_key, end_key])
        && op.get("op").is_some_and(|v| v.as_str() == Some("replace"));
    match (
        is_replace,
        event_seq(op.get(start_key)),
        event_seq(op.get(end_key)),
    ) {
        (true, Some(start), Some(end)) => Ok(Some(Op::Replace { start, end })),
        _ => Err(Rejection::rule(format!(
            "session event \"{}\" carries an invalid replace surfaceOp",
            ty_text()
        ))),
    }
}

/// DSH's `assertProvenance`: `sourceEventSeqs`, when present, is a non-empty (except on
/// `assistant/message`) array of distinct earlier seqs that covers every shadowed node.
fn check_provenance(
    seq: u64,
    ty: Option<&Value>,
    is_assistant: bool,
    raw: Option<&Value>,
    shadowed: &[u64],
) -> Result<(), Rejection> {
    // The distinct sources, sorted (lists are short: a sort beats hashing every item).
    let mut sources: Vec<u64> = Vec::new();
    if let Some(raw) = raw {
        let Value::Array(list) = raw else {
            return Err(Rejection::rule(format!(
                "sourceEventSeqs on event at seq {seq} must be an array when present"
            )));
        };
        if list.is_empty() && !is_assistant {
            return Err(Rejection::rule(
                "sourceEventSeqs must not be empty except on assistant/message".to_owned(),
            ));
        }
        let mut not_earlier = None;
        for item in list {
            let Some(source) = event_seq(Some(item)) else {
                return Err(Rejection::rule(format!(
                    "session event \"{}\" sourceEventSeqs must densely contain non-negative safe \
                     integers",
                    template(ty)
                )));
            };
            sources.push(source);
            if not_earlier.is_none() && source >= seq {
                not_earlier = Some(source);
            }
        }
        sources.sort_unstable();
        sources.dedup();
        if sources.len() != list.len() {
            return Err(Rejection::rule(
                "sourceEventSeqs must not contain duplicates".to_owned(),
            ));
        }
        if let Some(source) = not_earlier {
            return Err(Rejection::rule(format!(
                "sourceEventSeqs must reference earlier events: {source} >= current seq {seq}"
            )));
        }
    }
    let missing: Vec<String> = shadowed
        .iter()
        .filter(|s| sources.binary_search(s).is_err())
        .map(u64::to_string)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Rejection::rule(format!(
            "surface replace: sourceEventSeqs must include every shadowed surface node; missing {}",
            missing.join(", ")
        )))
    }
}

/// DSH's `assertToolResultRewrite`: a `tool/result` replacement rewrites exactly one current
/// `tool/result`, and its `data` equals the original's once `message.content` is replaced by
/// `[{...content[0], content: null}]` on both sides (order-insensitive deep equality).
fn check_tool_result_rewrite<V: Borrow<Value>>(
    model: SurfaceModel,
    event: &Value,
    shadowed: &[u64],
    mut lookup: impl FnMut(u64) -> Option<V>,
) -> Result<(), Rejection> {
    let [target] = shadowed else {
        return Err(Rejection::rule(
            "tool/result surface replacement must rewrite exactly one current node".to_owned(),
        ));
    };
    let original = lookup(*target);
    let original = original.as_ref().map(Borrow::borrow);
    // `original?.type`: a missing (or null) event reads as undefined.
    let original_type = match original {
        None | Some(Value::Null) => None,
        Some(o) => prop(Some(o), "type")?,
    };
    let Some(original) =
        original.filter(|_| original_type.and_then(Value::as_str) == Some(TOOL_RESULT))
    else {
        return Err(Rejection::rule(
            "tool/result surface replacement must target a current tool/result".to_owned(),
        ));
    };
    let view = match model {
        SurfaceModel::V0 => content_blind_view,
        SurfaceModel::V4 => message_content_blind_view,
    };
    let original_view = view(original)?;
    let replacement_view = view(event)?;
    if deep_equal(&original_view, &replacement_view) {
        Ok(())
    } else {
        Err(Rejection::rule(
            "tool/result surface replacement may change only content".to_owned(),
        ))
    }
}

/// `{...data, message: {...data.message, content: [{...data.message.content[0], content: null}]}}`
/// with DSH's evaluation order of property reads (so the same `TypeError`s surface first).
fn content_blind_view(event: &Value) -> Result<Value, TypeError> {
    let data = prop(Some(event), "data")?;
    let message = prop(data, "message")?;
    let content = prop(message, "content")?;
    let first = index0(content)?;
    let mut result = spread(first.as_deref());
    result.insert("content".into(), Value::Null);
    let mut message_view = spread(message);
    message_view.insert("content".into(), Value::Array(vec![Value::Object(result)]));
    let mut rest = spread(data);
    rest.insert("message".into(), Value::Object(message_view));
    Ok(Value::Object(rest))
}

/// V4's rewrite rule: `{...data, message: {...data.message, content: null}}` (a V4 tool result
/// is a first-class tool message; only its `content` may change).
fn message_content_blind_view(event: &Value) -> Result<Value, TypeError> {
    let data = prop(Some(event), "data")?;
    let message = prop(data, "message")?;
    let mut message_view = spread(message);
    message_view.insert("content".into(), Value::Null);
    let mut rest = spread(data);
    rest.insert("message".into(), Value::Object(message_view));
    Ok(Value::Object(rest))
}

/// A surface as DSH's expected-output file writes it, without spaces: `{"nodes":[…],
/// "replaceGeneration":n,"replacements":[{"seq","start","end","shadowedSeqs"}…]}`. Under V4 the
/// endpoints are spelled `startSeq`/`endSeq` and `contentGeneration` follows
/// `replaceGeneration`. `generations` is `(replaceGeneration, contentGeneration)`.
pub fn surface_json(
    model: SurfaceModel,
    nodes: &[u64],
    generations: (u64, u64),
    replacements: &[Replacement],
) -> String {
    let (replace_generation, content_generation) = generations;
    let (start_key, end_key) = model.replace_keys();
    let replacements = replacements
        .iter()
        .map(|r| {
            Value::Object(
                Object::new()
                    .with("seq", seq_value(r.seq))
                    .with(start_key, seq_value(r.start))
                    .with(end_key, seq_value(r.end))
                    .with("shadowedSeqs", seqs_value(&r.shadowed_seqs)),
            )
        })
        .collect();
    let mut surface = Object::new()
        .with("nodes", seqs_value(nodes))
        .with("replaceGeneration", seq_value(replace_generation));
    if model == SurfaceModel::V4 {
        surface = surface.with("contentGeneration", seq_value(content_generation));
    }
    stringify(&Value::Object(
        surface.with("replacements", Value::Array(replacements)),
    ))
}

fn seq_value(seq: u64) -> Value {
    #[expect(
        clippy::cast_precision_loss,
        reason = "seqs are safe integers (< 2^53)"
    )]
    Value::Number(seq as f64)
}

fn seqs_value(seqs: &[u64]) -> Value {
    Value::Array(seqs.iter().map(|&s| seq_value(s)).collect())
}
