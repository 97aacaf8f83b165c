//! DSH 0.2's lifecycle relationships of a V4 log (`assertV4LifecycleRelationships`), checked
//! over its committed events in order, one concern per file (`turns`, `tools`, `surface_head`,
//! `titles`, `ptc`, `retry`, `compaction`, `ownership`; DSH's field readers in `fields`), the
//! walk and its state here: turn and step numbering and enclosure, tool calls
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

mod compaction;
mod fields;
mod ownership;
mod ptc;
mod retry;
mod surface_head;
#[cfg(test)]
mod tests;
mod titles;
mod tools;
mod turns;

use std::collections::{HashMap, HashSet};

use fields::{count, earlier, nonempty, record};
pub(crate) use ownership::{catalog_child, delivery};

use crate::format::rows::{check_header_seq, declared_tools};
use crate::json::{Object, Value};

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
}
