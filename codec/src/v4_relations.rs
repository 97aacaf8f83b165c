//! DSH 0.2's lifecycle relationships of a V4 log (`assertV4LifecycleRelationships`), checked
//! over its committed events in order: turn and step numbering and enclosure, tool calls
//! advertised by assistant messages and settled by their results, the protected system head on
//! the surface, `headerSeq` tool definitions, title citations, command pairing, PTC dispatch
//! pairing, `llm/retry` chains and compaction transactions. A failure is corruption; the text is
//! DSH's.
//!
//! An unfinished tail may leave a turn, step, call or compaction open (nothing is checked at the
//! end). DSH decides before the walk which compactions are orphans (an end-seed comes before
//! their end), and lets turns cross those; reading in one pass, a crossing is held until the
//! compaction's end or an end-seed decides it ([`V4Relations::finish`]).
//! The ownership facts DSH checks first over the whole log (delivery markers naming this
//! session, catalog children unique after the inherited cut) are recorded as they come and
//! decided at the end ([`V4Relations::owned`], [`V4Relations::owner_failure`]).

use std::collections::{HashMap, HashSet};

use crate::json::{Object, Value};
use crate::open_turn::INTERRUPTED_NOT_STARTED;
use crate::rows::{check_header_seq, declared_tools};
use crate::surface::deep_equal;

/// Event types the lifecycle looks at.
const RELATIONSHIP_TYPES: [&str; 26] = [
    "system/message",
    "user/message",
    "developer/message",
    "assistant/message",
    "tool/result",
    "assistant/attempt",
    "turn/start",
    "turn/end",
    "step/start",
    "step/end",
    "tool/call",
    "request/header",
    "request/context",
    "tool/ptc-dispatch-start",
    "tool/ptc-dispatch",
    "llm/retry",
    "llm/retry-started",
    "session/title",
    "session/title-llm-request",
    "command/run",
    "command/done",
    "compaction/start",
    "compaction/summary",
    "compaction/end",
    "compaction/prune",
    "session/end-seed",
];

/// A call advertised by an assistant message.
#[derive(Clone, Debug)]
struct Call {
    id: String,
    name: Value,
    arguments: Value,
    started: bool,
}

/// An open compaction transaction.
#[derive(Clone, Debug)]
struct Compaction {
    id: String,
    command: Option<Value>,
    turn: Option<Value>,
    seq: u64,
    summarized: bool,
}

/// A PTC dispatch by sub-call id.
#[derive(Clone, Debug)]
struct Dispatch {
    data: Object,
    settled: bool,
}

/// The lifecycle state after the events seen so far.
#[derive(Clone, Debug)]
pub struct V4Relations {
    turn: Option<Value>,
    step: Option<Value>,
    next_turn: f64,
    next_step: f64,
    provider: Option<Value>,
    surface: Vec<u64>,
    protected_head: Option<u64>,
    compaction: Option<Compaction>,
    /// Advertised, unsettled calls in advertisement order.
    tools: Vec<Call>,
    dispatches: HashMap<String, Dispatch>,
    retries: Vec<Object>,
    started_retries: HashSet<(String, u64)>,
    human_prompts: HashSet<u64>,
    commands: HashSet<String>,
    /// Seqs of `command/run` and `command/done` events (a done's source may be neither).
    command_events: HashSet<u64>,
    /// The tools each `request/header` declares, by seq.
    header_tools: HashMap<u64, HashMap<String, Vec<bool>>>,
    /// A turn event that crossed an open compaction, held until that compaction ends (the
    /// crossing stands) or an end-seed makes it an orphan (it does not): compaction seq, text.
    crossing: Option<(u64, String)>,
    /// The first failure after a held crossing, reported only if the crossing falls.
    later: Option<String>,
    /// Ownership facts in log order, decided once the header and the cut are known.
    owned: Vec<Owned>,
}

/// One ownership fact (pass 1 of DSH's `assertReleasedV4Relationships`).
#[derive(Clone, Debug)]
enum Owned {
    /// A current-generation delivery marker naming a session.
    Delivery { seq: u64, id: String },
    /// A catalog entry: its child id, or why its fact is unsupported.
    Catalog {
        seq: u64,
        child: Result<String, String>,
    },
    /// A delivery marker that fails whatever the cut.
    Failure(String),
}

impl Default for V4Relations {
    fn default() -> Self {
        V4Relations {
            turn: None,
            step: None,
            next_turn: 1.0,
            next_step: 1.0,
            provider: None,
            surface: Vec::new(),
            protected_head: None,
            compaction: None,
            tools: Vec::new(),
            dispatches: HashMap::new(),
            retries: Vec::new(),
            started_retries: HashSet::new(),
            human_prompts: HashSet::new(),
            commands: HashSet::new(),
            command_events: HashSet::new(),
            header_tools: HashMap::new(),
            crossing: None,
            later: None,
            owned: Vec::new(),
        }
    }
}

type Check = Result<(), String>;

impl V4Relations {
    /// Check the next committed event against the lifecycle and advance it. `Err` is a
    /// decided failure; a crossing of a compaction that may still turn out an orphan is held
    /// (see [`V4Relations::finish`], [`V4Relations::held`]).
    pub fn accept(&mut self, event: &Value) -> Check {
        if let Some((cseq, text)) = self.crossing.clone() {
            if self.decide_crossing(cseq, event) {
                return match self.crossing.take() {
                    Some(_) => Err(text),
                    None => match self.later.take() {
                        Some(later) => Err(later),
                        None => self.step_in(event),
                    },
                };
            }
            if self.later.is_some() {
                return Ok(());
            }
            if let Err(e) = self.step_in(event) {
                self.later = Some(e);
            }
            return Ok(());
        }
        self.step_in(event)
    }

    /// Record the ownership facts of the next event (every event, even past a failure: DSH
    /// checks these over the whole log before the lifecycle).
    pub fn owned(&mut self, event: &Value) {
        let Some(o) = event.as_object() else { return };
        let seq = o.get("seq").and_then(Value::as_safe_u64).unwrap_or(0);
        match o.get("type").and_then(Value::as_str) {
            Some("session-log-deepseek/delivery-accepted") => match delivery(o.get("data"), seq, 4)
            {
                Ok(Some(id)) => self.owned.push(Owned::Delivery { seq, id }),
                Ok(None) => {}
                Err(e) => self.owned.push(Owned::Failure(e)),
            },
            Some("subagent/catalog") => {
                let child = catalog_child(o.get("data"), "subagent/catalog");
                self.owned.push(Owned::Catalog { seq, child });
            }
            _ => {}
        }
    }

    /// The first ownership failure of a log whose header has id `id` (a fork child when
    /// `child`) and whose inherited cut is `cut`: a delivery marker naming another session
    /// outside a child's inherited prefix, or a catalog entry after the cut that is unsupported
    /// or repeats a child.
    pub fn owner_failure(&self, id: &str, child: bool, cut: u64) -> Option<String> {
        let mut children = HashSet::new();
        for fact in &self.owned {
            match fact {
                Owned::Failure(e) => return Some(e.clone()),
                Owned::Delivery { seq, id: named } => {
                    if named != id && !(child && *seq < cut) {
                        return Some(
                            "current-generation delivery marker names the wrong Session".into(),
                        );
                    }
                }
                Owned::Catalog { seq, child: entry } if *seq >= cut => match entry {
                    Err(e) => return Some(e.clone()),
                    Ok(c) if !children.insert(c.clone()) => {
                        return Some(format!("duplicate catalog child {c}"))
                    }
                    Ok(_) => {}
                },
                Owned::Catalog { .. } => {}
            }
        }
        None
    }

    /// The failure decided by the end of the log: a crossing still held (its compaction never
    /// met an end-seed, so it was no orphan).
    pub fn finish(&self) -> Option<String> {
        self.crossing.as_ref().map(|(_, text)| text.clone())
    }

    /// A crossing being held, for writers that cannot wait for the rest of the log.
    pub fn held(&self) -> Option<&str> {
        self.crossing.as_ref().map(|(_, text)| text.as_str())
    }

    /// Whether `event` decides the held crossing of compaction `cseq`: its end confirms the
    /// crossing; an end-seed while it is open makes it an orphan (the crossing is dropped).
    fn decide_crossing(&mut self, cseq: u64, event: &Value) -> bool {
        let ty = event
            .as_object()
            .and_then(|o| o.get("type"))
            .and_then(Value::as_str);
        let open = self.compaction.as_ref().is_some_and(|c| c.seq == cseq);
        match ty {
            Some("session/end-seed") if open || self.later.is_some() => {
                self.crossing = None;
                true
            }
            Some("compaction/end") => true,
            _ => false,
        }
    }

    /// One event of the walk (DSH's `accept`).
    fn step_in(&mut self, event: &Value) -> Check {
        let Some(o) = event.as_object() else {
            return Ok(());
        };
        let ty = o.get("type").and_then(Value::as_str).unwrap_or_default();
        if !RELATIONSHIP_TYPES.contains(&ty) {
            return Ok(());
        }
        let seq = o.get("seq").and_then(Value::as_safe_u64).unwrap_or(0);
        let data = o
            .get("data")
            .and_then(Value::as_object)
            .ok_or_else(|| format!("{ty} requires an object"))?;
        if matches!(
            ty,
            "system/message" | "developer/message" | "assistant/attempt"
        ) {
            self.require_step(ty, data)?;
        }
        if ty.starts_with("turn/") && self.crossing.is_none() {
            if let Some(c) = &self.compaction {
                self.crossing = Some((c.seq, format!("{ty} crosses an open compaction")));
            }
        }
        self.fold_surface(ty, seq, o)?;
        match ty {
            "turn/start" => {
                if self.turn.is_some() || data.get("turn") != Some(&Value::Number(self.next_turn)) {
                    return Err("turn/start does not open the expected turn".into());
                }
                self.turn = Some(Value::Number(self.next_turn));
                self.next_step = 1.0;
                self.tools.clear();
            }
            "turn/end" => {
                if self.turn.is_none()
                    || data.get("turn") != self.turn.as_ref()
                    || self.step.is_some()
                {
                    return Err("turn/end does not match the open turn with no open step".into());
                }
                self.close_tools(ty)?;
                self.turn = None;
                self.next_turn += 1.0;
            }
            "step/start" => {
                if self.turn.is_none()
                    || data.get("turn") != self.turn.as_ref()
                    || self.step.is_some()
                    || data.get("step") != Some(&Value::Number(self.next_step))
                {
                    return Err("step/start does not match the open turn and next step".into());
                }
                self.step = Some(Value::Number(self.next_step));
            }
            "step/end" => {
                self.require_step(ty, data)?;
                self.close_tools(ty)?;
                self.step = None;
                self.next_step += 1.0;
            }
            "assistant/message" | "tool/call" | "tool/result" => self.tool(ty, o, data)?,
            "developer/message" => {
                let tools = &self.header_tools;
                check_header_seq(event, |s| tools.get(&s).cloned())?;
            }
            "request/header" => {
                self.require_turn(ty)?;
                let header = record(data.get("header"), "request header")?;
                let config = record(header.get("config"), "request config")?;
                self.provider = config.get("provider").cloned();
                if let Some(declared) = declared_tools(event) {
                    self.header_tools.insert(seq, declared);
                }
            }
            "request/context" => self.require_turn(ty)?,
            "tool/ptc-dispatch-start" | "tool/ptc-dispatch" => self.dispatch(ty, data)?,
            "llm/retry" | "llm/retry-started" => self.retry(ty, data)?,
            "session/title" | "session/title-llm-request" => self.title(ty, seq, data)?,
            "command/run" => {
                let id = nonempty(data.get("commandId"), "commandId")?;
                if !self.commands.insert(id.clone()) {
                    return Err(format!("command/run repeats commandId {id}"));
                }
                self.command_events.insert(seq);
            }
            "command/done" => {
                let id = nonempty(data.get("commandId"), "commandId")?;
                if !self.commands.contains(&id) {
                    return Err("command/done has no prior command/run".into());
                }
                if let Some(source) = data.get("sourceEventSeq") {
                    let source = earlier(Some(source), seq, "command sourceEventSeq")?;
                    let success = data.get("kind").and_then(Value::as_str) == Some("success");
                    if !success || self.command_events.contains(&source) {
                        return Err("command/done has invalid sourceEventSeq".into());
                    }
                }
                self.command_events.insert(seq);
            }
            "compaction/start" | "compaction/summary" | "compaction/end" | "compaction/prune" => {
                self.compact(ty, seq, data)?;
            }
            "user/message" => {
                let source = record(data.get("source"), "user message source")?;
                let kind = source.get("kind").and_then(Value::as_str);
                if kind == Some("user") {
                    self.human_prompts.insert(seq);
                }
                let replaces = o.get("surfaceOp").and_then(Value::as_str) != Some("append");
                if kind == Some("compact-checkpoint") && replaces {
                    self.compaction_owner(source, "compaction checkpoint")?;
                }
            }
            "session/end-seed" => self.compaction = None,
            _ => {}
        }
        Ok(())
    }

    /// PTC dispatches: a start per sub-call, settled once, under one root.
    fn dispatch(&mut self, ty: &str, data: &Object) -> Check {
        self.require_turn(ty)?;
        let id = nonempty(data.get("subCallId"), "PTC subCallId")?;
        let root = nonempty(data.get("rootCallId"), "PTC rootCallId")?;
        let parent = nonempty(data.get("parentCallId"), "PTC parentCallId")?;
        let root_of = |d: &Dispatch| {
            d.data
                .get("rootCallId")
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        if self
            .dispatches
            .get(&id)
            .is_some_and(|d| root_of(d).as_deref() != Some(root.as_str()))
        {
            return Err("PTC dispatch changes its rootCallId".into());
        }
        if parent != root
            && self.dispatches.get(&parent).and_then(root_of).as_deref() != Some(root.as_str())
        {
            return Err("PTC parentCallId does not belong to rootCallId".into());
        }
        if ty == "tool/ptc-dispatch-start" {
            if self.dispatches.contains_key(&id) {
                return Err("PTC dispatch repeats subCallId".into());
            }
            let start = Dispatch {
                data: data.clone(),
                settled: false,
            };
            self.dispatches.insert(id, start);
            return Ok(());
        }
        let Some(start) = self.dispatches.get_mut(&id).filter(|d| !d.settled) else {
            return Err("PTC dispatch has no unique start".into());
        };
        let same = ["rootCallId", "parentCallId", "name", "arguments"]
            .iter()
            .all(|k| match (start.data.get(k), data.get(k)) {
                (Some(a), Some(b)) => deep_equal(a, b),
                (None, None) => true,
                _ => false,
            });
        if !same {
            return Err("PTC dispatch does not match its start".into());
        }
        start.settled = true;
        Ok(())
    }

    /// `llm/retry` chains per (turn, step, provider, policy) and their started attempts.
    fn retry(&mut self, ty: &str, data: &Object) -> Check {
        let id = nonempty(data.get("retryId"), "retryId")?;
        let attempt = count(data.get("retry"), "retry")?;
        if ty == "llm/retry-started" {
            let scheduled = self.retries.iter().find(|r| {
                r.get("retryId").and_then(Value::as_str) == Some(id.as_str())
                    && r.get("retry").and_then(Value::as_f64) == Some(attempt as f64)
            });
            let Some(scheduled) = scheduled else {
                return Err("llm/retry-started pairs no prior scheduled attempt".into());
            };
            if scheduled.get("turn") != data.get("turn")
                || scheduled.get("step") != data.get("step")
            {
                return Err("llm/retry-started changes scheduled coordinates".into());
            }
            if !self.started_retries.insert((id, attempt)) {
                return Err("llm/retry-started repeats one scheduled attempt".into());
            }
            return Ok(());
        }
        let step = self
            .step
            .clone()
            .unwrap_or(Value::Number(self.next_step - 1.0));
        if self.turn.is_none()
            || data.get("turn") != self.turn.as_ref()
            || data.get("step") != Some(&step)
        {
            return Err("llm/retry does not match the current turn and step".into());
        }
        if data.get("provider") != self.provider.as_ref() {
            return Err("llm/retry provider does not match the open request/header".into());
        }
        let key = |o: &Object| ["turn", "step", "provider", "policyKey"].map(|k| o.get(k).cloned());
        let prior = self.retries.iter().rev().find(|r| key(r) == key(data));
        let expected = match prior {
            None => 1,
            Some(p) => count(p.get("retry"), "prior retry")? + 1,
        };
        if attempt != expected {
            return Err("llm/retry skips its policy attempt sequence".into());
        }
        let same_id = |r: &Object| r.get("retryId").and_then(Value::as_str) == Some(id.as_str());
        let broken = match prior {
            None => self.retries.iter().any(same_id),
            Some(p) => !same_id(p),
        };
        if broken {
            return Err("llm/retry must keep one retryId per policy chain".into());
        }
        self.retries.push(data.clone());
        Ok(())
    }

    /// Compaction transactions: start, one summary, end, in the owner turn; spans exact and
    /// clear of the protected head.
    fn compact(&mut self, ty: &str, seq: u64, data: &Object) -> Check {
        if matches!(ty, "compaction/prune" | "compaction/summary") {
            self.span(ty, seq, data)?;
        }
        if ty == "compaction/prune" {
            return Ok(());
        }
        if ty == "compaction/start" {
            if self.compaction.is_some() {
                return Err("compaction/start overlaps an open compaction".into());
            }
            let owner = match data.get("turn") {
                Some(Value::Null) => None,
                v => Some(Value::Number(count(v, "compaction turn")? as f64)),
            };
            if owner != self.turn {
                return Err("compaction/start does not match the open turn".into());
            }
            self.compaction = Some(Compaction {
                id: nonempty(data.get("compactionId"), "compactionId")?,
                command: data.get("sourceCommandId").cloned(),
                turn: owner,
                seq,
                summarized: false,
            });
            return Ok(());
        }
        let turn = self.turn.clone();
        let current = self.compaction_owner(data, ty)?;
        if current.turn != turn {
            return Err(format!("{ty} does not match the open turn"));
        }
        if ty == "compaction/summary" {
            if current.summarized {
                return Err("compaction/summary repeats".into());
            }
            current.summarized = true;
            return Ok(());
        }
        // `data.turn !== current.turn`: a missing turn is `undefined`, never the owner.
        let owner = current.turn.clone().unwrap_or(Value::Null);
        if data.get("turn") != Some(&owner) {
            return Err("compaction/end changes its owner turn".into());
        }
        if !data.contains_key("error") && !current.summarized {
            return Err("successful compaction/end requires one summary".into());
        }
        self.compaction = None;
        Ok(())
    }

    /// The open compaction `data` names (by id and source command).
    fn compaction_owner(
        &mut self,
        data: &Object,
        subject: &str,
    ) -> Result<&mut Compaction, String> {
        let id = data.get("compactionId").and_then(Value::as_str);
        let command = data.get("sourceCommandId");
        match &mut self.compaction {
            Some(c) if Some(c.id.as_str()) == id && c.command.as_ref() == command => Ok(c),
            _ => Err(format!("{subject} has no matching compaction/start")),
        }
    }

    /// A compaction's `shadowedSeqs` name an exact current surface span, not the protected head.
    fn span(&self, ty: &str, seq: u64, data: &Object) -> Check {
        let range = record(data.get("shadowedRange"), "compaction shadowedRange")?;
        let start = earlier(range.get("start"), seq, "compaction range start")?;
        let end = earlier(range.get("end"), seq, "compaction range end")?;
        let seqs = data
            .get("shadowedSeqs")
            .and_then(Value::as_array)
            .ok_or("compaction shadowedSeqs requires an array")?;
        let first = self.surface.iter().position(|&n| n == start);
        let last = self.surface.iter().position(|&n| n == end);
        let exact = match (first, last) {
            (Some(a), Some(b)) if a <= b => {
                self.surface[a..=b].len() == seqs.len()
                    && self.surface[a..=b]
                        .iter()
                        .zip(seqs)
                        .all(|(&n, v)| v.as_f64() == Some(n as f64))
            }
            _ => false,
        };
        if !exact {
            return Err(format!(
                "{ty} shadowedSeqs do not name an exact current surface span"
            ));
        }
        let head = self.protected_head;
        if head.is_some_and(|h| seqs.iter().any(|v| v.as_f64() == Some(h as f64))) {
            return Err("compaction cannot shadow the protected system head".into());
        }
        Ok(())
    }

    fn require_turn(&self, ty: &str) -> Check {
        match self.turn {
            Some(_) => Ok(()),
            None => Err(format!("{ty} is outside an open turn")),
        }
    }

    fn require_step(&self, ty: &str, data: &Object) -> Check {
        let ok = self.turn.is_some()
            && self.step.is_some()
            && data.get("turn") == self.turn.as_ref()
            && data.get("step") == self.step.as_ref();
        if ok {
            Ok(())
        } else {
            Err(format!("{ty} does not match an open turn and step"))
        }
    }

    fn close_tools(&mut self, ty: &str) -> Check {
        match self.tools.first() {
            Some(call) => Err(format!("{ty} leaves unresolved tool call {}", call.id)),
            None => Ok(()),
        }
    }

    /// DSH's surface relationship: the protected system head and exact replacement spans.
    fn fold_surface(&mut self, ty: &str, seq: u64, o: &Object) -> Check {
        if !matches!(
            ty,
            "system/message"
                | "user/message"
                | "developer/message"
                | "assistant/message"
                | "tool/result"
        ) {
            return Ok(());
        }
        if ty == "system/message" && !self.surface.is_empty() && self.protected_head.is_none() {
            return Err("system/message requires a protected first surface head".into());
        }
        let op = o.get("surfaceOp");
        if op.and_then(Value::as_str) == Some("append") {
            if ty == "system/message" && self.surface.is_empty() {
                self.protected_head = Some(seq);
            }
            self.surface.push(seq);
            return Ok(());
        }
        let op = op
            .and_then(Value::as_object)
            .ok_or_else(|| format!("{ty} surfaceOp requires an object"))?;
        let start = earlier(op.get("startSeq"), seq, "replacement start")?;
        let end = earlier(op.get("endSeq"), seq, "replacement end")?;
        let first = self.surface.iter().position(|&n| n == start);
        let last = self.surface.iter().position(|&n| n == end);
        let (Some(first), Some(last)) = (first, last) else {
            return Err(format!(
                "{ty} replacement range is not on the current surface"
            ));
        };
        if last < first {
            return Err(format!(
                "{ty} replacement range is not on the current surface"
            ));
        }
        let removed: Vec<u64> = self.surface[first..=last].to_vec();
        let sources = o
            .get("sourceEventSeqs")
            .and_then(Value::as_array)
            .ok_or("replacement sourceEventSeqs requires an array")?;
        let cited = |s: u64| sources.iter().any(|v| v.as_f64() == Some(s as f64));
        if removed.iter().any(|&s| !cited(s)) {
            return Err("replacement sourceEventSeqs omit a shadowed surface node".into());
        }
        if self.protected_head.is_some_and(|h| removed.contains(&h)) {
            if ty != "system/message" || removed.len() != 1 {
                return Err("surface replacement cannot shadow the protected system head".into());
            }
            self.protected_head = Some(seq);
        }
        self.surface.splice(first..=last, [seq]);
        Ok(())
    }

    /// Calls advertised by assistant messages, started by `tool/call`, settled by appended
    /// results.
    fn tool(&mut self, ty: &str, o: &Object, data: &Object) -> Check {
        if ty == "tool/result" && o.get("surfaceOp").and_then(Value::as_str) != Some("append") {
            return self.require_turn(ty);
        }
        self.require_step(ty, data)?;
        if ty == "assistant/message" {
            let message = data
                .get("message")
                .and_then(Value::as_object)
                .ok_or("assistant message requires an object")?;
            let content = message
                .get("content")
                .and_then(Value::as_array)
                .ok_or("assistant content requires an array")?;
            for block in content {
                let block = block
                    .as_object()
                    .ok_or("assistant content block requires an object")?;
                if block.get("type").and_then(Value::as_str) != Some("tool-call") {
                    continue;
                }
                let id = nonempty(block.get("id"), "tool call id")?;
                if self.tools.iter().any(|c| c.id == id) {
                    return Err(format!(
                        "assistant/message repeats advertised tool call {id}"
                    ));
                }
                self.tools.push(Call {
                    id,
                    name: block.get("name").cloned().unwrap_or(Value::Null),
                    arguments: block.get("arguments").cloned().unwrap_or(Value::Null),
                    started: false,
                });
            }
            return Ok(());
        }
        let message = match ty {
            "tool/result" => Some(
                data.get("message")
                    .and_then(Value::as_object)
                    .ok_or("tool result message requires an object")?,
            ),
            _ => None,
        };
        let id = match message {
            Some(m) => nonempty(m.get("toolCallId"), "tool call id")?,
            None => nonempty(data.get("callId"), "tool call id")?,
        };
        let Some(at) = self.tools.iter().position(|c| c.id == id) else {
            return Err(format!("{ty} {id} has no advertised tool lifecycle"));
        };
        match message {
            None => {
                let call = &mut self.tools[at];
                let same = Some(&call.name) == data.get("name")
                    && Some(&call.arguments) == data.get("arguments");
                if call.started || !same {
                    return Err(format!(
                        "tool/call {id} does not match one advertised tool call"
                    ));
                }
                call.started = true;
            }
            Some(m) => {
                if !self.tools[at].started && !not_started_repair(o, data, m, &id)? {
                    return Err(format!(
                        "tool/result {id} is not the exact TOOL_NOT_STARTED repair"
                    ));
                }
                self.tools.remove(at);
            }
        }
        Ok(())
    }

    /// Titles cite distinct earlier human prompts (none for a user-written title); a title
    /// request holds exactly the one prompt message it sends.
    fn title(&self, ty: &str, seq: u64, data: &Object) -> Check {
        let refs = data
            .get("messageSeqs")
            .and_then(Value::as_array)
            .ok_or("title messageSeqs requires an array")?;
        if ty == "session/title" {
            let source = record(data.get("source"), "title source")?;
            let by_user = source.get("kind").and_then(Value::as_str) == Some("user");
            if refs.is_empty() != by_user {
                return Err(
                    "session/title messageSeqs must be empty exactly for a user title".into(),
                );
            }
        }
        let mut seen = HashSet::new();
        for r in refs {
            let s = earlier(Some(r), seq, "title messageSeqs")?;
            if !seen.insert(s) || !self.human_prompts.contains(&s) {
                return Err(format!(
                    "{ty} messageSeqs must cite distinct earlier human user/message events"
                ));
            }
        }
        if ty != "session/title-llm-request" {
            return Ok(());
        }
        let messages = data
            .get("messages")
            .and_then(Value::as_array)
            .ok_or("title messages requires an array")?;
        let message = record(messages.first(), "title message")?;
        let content = message
            .get("content")
            .and_then(Value::as_array)
            .ok_or("title content requires an array")?;
        let source = record(message.get("source"), "title source")?;
        let text_block = matches!(content, [b] if b.as_object().is_some_and(|b| b.get("type").and_then(Value::as_str) == Some("text")));
        if refs.is_empty()
            || messages.len() != 1
            || message.get("role").and_then(Value::as_str) != Some("user")
            || source.get("kind").and_then(Value::as_str) != Some("dsh-session-title-llm")
            || !text_block
        {
            return Err("session/title-llm-request messages do not represent messageSeqs".into());
        }
        Ok(())
    }
}

/// DSH's `notStartedRepair`: the exact form of a result for a call that never started.
fn not_started_repair(
    o: &Object,
    data: &Object,
    message: &Object,
    call: &str,
) -> Result<bool, String> {
    let error = data
        .get("error")
        .and_then(Value::as_object)
        .ok_or("not-started error requires an object")?;
    if error.get("name").and_then(Value::as_str) != Some("ToolNotStartedError")
        || error.get("code").and_then(Value::as_str) != Some("TOOL_NOT_STARTED")
        || message.get("isError") != Some(&Value::Bool(true))
        || o.contains_key("sourceEventSeqs")
    {
        return Ok(false);
    }
    let id = nonempty(message.get("id"), "not-started message id")?;
    if id.starts_with(&format!("forked-tool-result-{call}-")) {
        return Ok(true);
    }
    let prefix = format!("interrupted-tool-result-{call}-");
    let content = message
        .get("content")
        .and_then(Value::as_array)
        .ok_or("not-started content requires an array")?;
    let suffix_ok = id.strip_prefix(&prefix).is_some_and(|n| {
        (n == "0"
            || (!n.starts_with('0') && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())))
            && n.parse::<u64>().is_ok_and(|v| v < (1 << 53))
    });
    let text_ok = matches!(content, [block] if block.as_object().is_some_and(|b| {
        b.get("type").and_then(Value::as_str) == Some("text")
            && b.get("text").and_then(Value::as_str) == Some(INTERRUPTED_NOT_STARTED)
    }));
    Ok(suffix_ok && text_ok)
}

/// `validateDeliveryAccepted(event, current)`: the session a marker of generation `current`
/// names (`None` for another generation's).
pub(crate) fn delivery(
    data: Option<&Value>,
    seq: u64,
    current: u64,
) -> Result<Option<String>, String> {
    let data = data
        .and_then(Value::as_object)
        .ok_or("delivery-accepted data must be an object")?;
    let version = match data.get("sessionFormatVersion") {
        None => 0,
        v => count(v, "delivery sessionFormatVersion")?,
    };
    if version != current {
        return Ok(None);
    }
    if count(data.get("throughSeq"), "delivery throughSeq")? >= seq {
        return Err("delivery throughSeq must precede its marker".into());
    }
    nonempty(data.get("sessionId"), "")
        .map(Some)
        .map_err(|_| "delivery requires a nonempty Session id".into())
}

/// `catalogFact(value, subject)`: the child a supported catalog fact names.
pub(crate) fn catalog_child(data: Option<&Value>, subject: &str) -> Result<String, String> {
    let unsupported = || format!("{subject} requires a supported versioned catalog fact");
    let fact = data.and_then(Value::as_object).ok_or_else(unsupported)?;
    let version = fact.get("version").and_then(Value::as_f64);
    let mode = fact.get("mode").and_then(Value::as_str);
    let label = fact.get("label");
    let supported = matches!(version, Some(v) if v == 0.0 || v == 1.0 || v == 2.0)
        && matches!(fact.get("childId"), Some(Value::String(_)))
        && matches!(
            mode,
            Some("continuable" | "one-shot" | "external" | "unknown")
        )
        && ((version == Some(2.0)) == (mode == Some("external")))
        && !(version == Some(0.0) && mode == Some("unknown"))
        && (mode != Some("continuable") || matches!(label, Some(Value::String(_))))
        && matches!(label, None | Some(Value::String(_)));
    if !supported {
        return Err(unsupported());
    }
    count(fact.get("childCreatedAt"), "catalog child creation time")?;
    Ok(fact
        .get("childId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned())
}

/// DSH's `record`: an object.
fn record<'a>(v: Option<&'a Value>, subject: &str) -> Result<&'a Object, String> {
    v.and_then(Value::as_object)
        .ok_or_else(|| format!("{subject} requires an object"))
}

/// DSH's `sessionFormatCount`: a non-negative safe integer, not `-0`.
fn count(v: Option<&Value>, subject: &str) -> Result<u64, String> {
    v.and_then(Value::as_count)
        .ok_or_else(|| format!("{subject} must be a non-negative safe integer"))
}

/// DSH's `text`: a nonempty string.
fn nonempty(v: Option<&Value>, subject: &str) -> Result<String, String> {
    v.and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| format!("{subject} requires a nonempty string"))
}

/// DSH's `earlier`: a count naming an earlier seq.
fn earlier(v: Option<&Value>, seq: u64, subject: &str) -> Result<u64, String> {
    let n = count(v, subject)?;
    if n >= seq {
        return Err(format!("{subject} must name an earlier event"));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    fn check(log: &[&str]) -> Result<(), String> {
        let mut r = V4Relations::default();
        for e in log {
            r.accept(&parse(e).expect("JSON"))?;
        }
        Ok(())
    }

    const T1: &str = r#"{"type":"turn/start","seq":0,"data":{"turn":1}}"#;
    const S1: &str = r#"{"type":"step/start","seq":1,"data":{"turn":1,"step":1}}"#;
    const CALL: &str = r#"{"type":"assistant/message","seq":2,"data":{"turn":1,"step":1,"message":{"content":[{"type":"tool-call","id":"c","name":"ls","arguments":"{}"}]}},"surfaceOp":"append"}"#;
    const STARTED: &str = r#"{"type":"tool/call","seq":3,"data":{"turn":1,"step":1,"callId":"c","name":"ls","arguments":"{}"}}"#;
    const RESULT: &str = r#"{"type":"tool/result","seq":4,"data":{"turn":1,"step":1,"message":{"toolCallId":"c"}},"surfaceOp":"append"}"#;
    const E1: &str = r#"{"type":"step/end","seq":5,"data":{"turn":1,"step":1}}"#;
    const TE: &str =
        r#"{"type":"turn/end","seq":6,"data":{"turn":1,"reason":{"kind":"completed"}}}"#;

    #[test]
    fn a_settled_turn_passes_and_an_open_tail_is_allowed() {
        assert_eq!(check(&[T1, S1, CALL, STARTED, RESULT, E1, TE]), Ok(()));
        assert_eq!(check(&[T1, S1, CALL]), Ok(()));
    }

    #[test]
    fn numbering_enclosure_and_settlement_are_dsh_s() {
        let t2 = r#"{"type":"turn/start","seq":0,"data":{"turn":2}}"#;
        assert_eq!(
            check(&[t2]),
            Err("turn/start does not open the expected turn".into())
        );
        assert_eq!(
            check(&[T1, S1, CALL, STARTED, E1]),
            Err("step/end leaves unresolved tool call c".into())
        );
        assert_eq!(
            check(&[T1, S1, CALL, RESULT]),
            Err("not-started error requires an object".into())
        );
        assert_eq!(
            check(&[T1, S1, CALL, STARTED, STARTED]),
            Err("tool/call c does not match one advertised tool call".into())
        );
        assert_eq!(
            check(&[T1, S1, CALL, STARTED, RESULT, RESULT]),
            Err("tool/result c has no advertised tool lifecycle".into())
        );
        let system = r#"{"type":"system/message","seq":2,"data":{"turn":1,"step":2,"message":{}},"surfaceOp":"append"}"#;
        assert_eq!(
            check(&[T1, S1, system]),
            Err("system/message does not match an open turn and step".into())
        );
        let header = r#"{"type":"request/header","seq":0,"data":{"header":{}}}"#;
        assert_eq!(
            check(&[header]),
            Err("request/header is outside an open turn".into())
        );
        assert_eq!(
            check(&[
                T1,
                S1,
                E1.replace("\"seq\":5", "\"seq\":2").as_str(),
                TE.replace("\"seq\":6", "\"seq\":3").as_str()
            ]),
            Ok(())
        );
        assert_eq!(
            check(&[T1, S1, TE]),
            Err("turn/end does not match the open turn with no open step".into())
        );
    }

    #[test]
    fn the_interrupted_repair_form_is_exact() {
        let repair = |text: &str| {
            format!(
                r#"{{"type":"tool/result","seq":3,"data":{{"turn":1,"step":1,"message":{{"id":"interrupted-tool-result-c-3","toolCallId":"c","isError":true,"content":[{{"type":"text","text":"{text}"}}]}},"error":{{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}}}},"surfaceOp":"append"}}"#
            )
        };
        assert_eq!(
            check(&[T1, S1, CALL, &repair(INTERRUPTED_NOT_STARTED)]),
            Ok(())
        );
        assert_eq!(
            check(&[T1, S1, CALL, &repair("other")]),
            Err("tool/result c is not the exact TOOL_NOT_STARTED repair".into())
        );
    }

    #[test]
    fn the_system_head_is_protected_and_titles_cite_human_prompts() {
        let head =
            r#"{"type":"system/message","seq":2,"data":{"turn":1,"step":1},"surfaceOp":"append"}"#;
        let user = r#"{"type":"user/message","seq":3,"data":{"source":{"kind":"user"}},"surfaceOp":"append"}"#;
        let compact = r#"{"type":"user/message","seq":4,"data":{"source":{"kind":"compact-checkpoint"}},"sourceEventSeqs":[2,3],"surfaceOp":{"op":"replace","startSeq":2,"endSeq":3}}"#;
        assert_eq!(
            check(&[T1, S1, head, user, compact]),
            Err("surface replacement cannot shadow the protected system head".into())
        );
        let title = |refs: &str, kind: &str| {
            format!(
                r#"{{"type":"session/title","seq":4,"data":{{"title":"t","messageSeqs":{refs},"source":{{"kind":"{kind}"}}}}}}"#
            )
        };
        assert_eq!(
            check(&[T1, S1, head, user, &title("[3]", "fallback")]),
            Ok(())
        );
        assert_eq!(
            check(&[T1, S1, head, user, &title("[2]", "fallback")]),
            Err(
                "session/title messageSeqs must cite distinct earlier human user/message events"
                    .into()
            )
        );
        assert_eq!(
            check(&[T1, S1, head, user, &title("[3]", "user")]),
            Err("session/title messageSeqs must be empty exactly for a user title".into())
        );
    }

    /// Run `log` and report the failure DSH would: the first decided one, else a held crossing.
    fn verdict(log: &[&str]) -> Result<(), String> {
        let mut r = V4Relations::default();
        for e in log {
            r.accept(&parse(e).expect("JSON"))?;
        }
        r.finish().map_or(Ok(()), Err)
    }

    #[test]
    fn compaction_transactions_and_orphans() {
        let start =
            r#"{"type":"compaction/start","seq":0,"data":{"compactionId":"k","turn":null}}"#;
        let t1 = r#"{"type":"turn/start","seq":1,"data":{"turn":1}}"#;
        let end_seed = r#"{"type":"session/end-seed","seq":2,"data":{"inherited":true}}"#;
        let end = r#"{"type":"compaction/end","seq":2,"data":{"compactionId":"k","turn":null,"error":{}}}"#;
        // A turn crossing an open compaction stands unless an end-seed makes it an orphan.
        assert_eq!(
            verdict(&[start, t1]),
            Err("turn/start crosses an open compaction".into())
        );
        assert_eq!(
            verdict(&[start, t1, end]),
            Err("turn/start crosses an open compaction".into())
        );
        assert_eq!(verdict(&[start, t1, end_seed]), Ok(()));
        let unsummarized =
            r#"{"type":"compaction/end","seq":1,"data":{"compactionId":"k","turn":null}}"#;
        assert_eq!(
            verdict(&[start, unsummarized]),
            Err("successful compaction/end requires one summary".into())
        );
        let stray = r#"{"type":"compaction/end","seq":0,"data":{"compactionId":"k","turn":null}}"#;
        assert_eq!(
            verdict(&[stray]),
            Err("compaction/end has no matching compaction/start".into())
        );
        let in_turn = r#"{"type":"compaction/start","seq":1,"data":{"compactionId":"k","turn":2}}"#;
        assert_eq!(
            verdict(&[T1, in_turn]),
            Err("compaction/start does not match the open turn".into())
        );
    }

    #[test]
    fn retry_chains_and_ptc_dispatches() {
        let header =
            r#"{"type":"request/header","seq":2,"data":{"header":{"config":{"provider":"p"}}}}"#;
        let retry = |seq: u64, n: u64| {
            format!(
                r#"{{"type":"llm/retry","seq":{seq},"data":{{"turn":1,"step":1,"provider":"p","policyKey":"x","retryId":"r","retry":{n}}}}}"#
            )
        };
        assert_eq!(
            verdict(&[T1, S1, header, &retry(3, 1), &retry(4, 2)]),
            Ok(())
        );
        assert_eq!(
            verdict(&[T1, S1, header, &retry(3, 2)]),
            Err("llm/retry skips its policy attempt sequence".into())
        );
        let started = r#"{"type":"llm/retry-started","seq":3,"data":{"turn":1,"step":1,"retryId":"r","retry":1}}"#;
        assert_eq!(
            verdict(&[T1, S1, header, started]),
            Err("llm/retry-started pairs no prior scheduled attempt".into())
        );
        let dispatch = r#"{"type":"tool/ptc-dispatch","seq":2,"data":{"subCallId":"s","rootCallId":"r","parentCallId":"r"}}"#;
        assert_eq!(
            verdict(&[T1, S1, dispatch]),
            Err("PTC dispatch has no unique start".into())
        );
    }

    #[test]
    fn ownership_facts_are_decided_with_the_header_and_the_cut() {
        let mut r = V4Relations::default();
        let marker = |seq: u64, id: &str| {
            format!(
                r#"{{"type":"session-log-deepseek/delivery-accepted","seq":{seq},"data":{{"sessionFormatVersion":4,"throughSeq":0,"sessionId":"{id}"}}}}"#
            )
        };
        let catalog = |seq: u64, child: &str| {
            format!(
                r#"{{"type":"subagent/catalog","seq":{seq},"data":{{"version":0,"childId":"{child}","childCreatedAt":1,"mode":"one-shot"}}}}"#
            )
        };
        for e in [marker(1, "parent"), catalog(2, "c"), catalog(3, "c")] {
            r.owned(&parse(&e).expect("JSON"));
        }
        assert_eq!(r.owner_failure("child", true, 4), None, "all inherited");
        assert_eq!(
            r.owner_failure("child", true, 1),
            Some("current-generation delivery marker names the wrong Session".into())
        );
        assert_eq!(
            r.owner_failure("parent", false, 0),
            Some("duplicate catalog child c".into())
        );
        let mut bad = V4Relations::default();
        bad.owned(&parse(r#"{"type":"subagent/catalog","seq":0,"data":{"version":2,"childId":"c","childCreatedAt":1,"mode":"one-shot"}}"#).expect("JSON"));
        assert_eq!(
            bad.owner_failure("s", false, 0),
            Some("subagent/catalog requires a supported versioned catalog fact".into())
        );
    }
}
