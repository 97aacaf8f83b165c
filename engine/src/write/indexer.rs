//! The one indexer every writer drives: the surface index (`surface` CF: ops, snapshots,
//! replacements), message-projection records, and projection-unit checkpoints (`checkpoints`
//! CF), each staged with the events it derives from, so an index never runs ahead of or behind
//! the log.
//!
//! - [`SurfaceBuilder`] folds a log being imported (lookups from memory);
//! - [`fold_batch`] folds a batch appended to a stored session (append, repair, fork; lookups
//!   of earlier events from the store), all or nothing;
//! - [`ProjectionCheckpoints`] folds every projection unit and emits its checkpoints.
//!
//! Snapshot policy: after every replacement, and after an append run of
//! `max(SNAPSHOT_MIN_OPS, nodes / 4)` ops, so the ops replayed on top of a snapshot never exceed
//! a quarter of the nodes (a query's cost stays proportional to its answer) and snapshots take
//! space linear in the log.
//!
//! Checkpoint policy: every unit is checkpointed after each `turn/end` and after every
//! [`CHECKPOINT_EVERY`]th event (a stateless rule: seq + 1 divisible by it). A unit no event
//! touched since its last whole checkpoint is checkpointed as a reference to it (10 bytes), so
//! a state that rarely changes is not rewritten at every point. A point's checkpoints of every
//! unit are one record (one key), not a key per unit: most are references, and each key costs
//! a memtable insert, WAL and index bytes, and compaction work of its own.

use std::collections::HashMap;

use sessionlog_codec::format::event::event_type;
use sessionlog_codec::json::{self, Object, Value};
use sessionlog_codec::rules::projection::{unit_at, ProjectionSet};
use sessionlog_codec::rules::surface::{SurfaceChange, SurfaceFold, SurfaceModel};

use crate::error::{Error, FirstError, Result};
use crate::layout::keys::{
    event_key, target_key, CHECKPOINT_POINTS, EVENT_KEY_LEN, OP, PROJ, REPL, SNAP, TURNS,
    TURN_RECORDS,
};
use crate::layout::meta::SessionMeta;
use crate::layout::values::{encode, PointRecord, Snapshot};
use crate::read::message_projections::{Projected, ProjectionState};
use crate::store::{ProjectionCheckpoints, Store};

/// A lookup of an earlier event (or message) by seq.
type EventLookup<'f> = dyn Fn(u64) -> Option<Value> + 'f;

/// Fewest append ops between two surface snapshots.
const SNAPSHOT_MIN_OPS: u64 = 256;

/// Turns the fold's changes into surface-index keys. `since_snapshot` counts the ops written
/// after the last snapshot (persisted in the session's metadata so appends continue the policy).
#[derive(Debug, Default)]
pub(crate) struct SurfaceIndexer {
    pub(crate) since_snapshot: u64,
}

impl SurfaceIndexer {
    /// The keys and values to write for event `seq`, whose change `change` has been applied to
    /// `fold`; `put` receives each.
    pub(crate) fn record(
        &mut self,
        number: u64,
        seq: u64,
        change: &SurfaceChange,
        fold: &SurfaceFold,
        put: &mut dyn FnMut([u8; EVENT_KEY_LEN], Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        let replaced = match change {
            SurfaceChange::Unchanged => return Ok(()),
            SurfaceChange::Appended { .. } => false,
            SurfaceChange::Replaced(r) => {
                put(event_key(number, REPL, seq), encode(r)?)?;
                true
            }
        };
        put(event_key(number, OP, seq), encode(change)?)?;
        self.since_snapshot += 1;
        let threshold = SNAPSHOT_MIN_OPS.max(fold.nodes().len() as u64 / 4);
        if replaced || self.since_snapshot >= threshold {
            put(event_key(number, SNAP, seq), encode(&Snapshot::of(fold))?)?;
            self.since_snapshot = 0;
        }
        Ok(())
    }
}

/// The surface fold of a log being imported: applies each committed event, indexes the change,
/// and remembers what a later `tool/result` rewrite needs to look up. Stops at the first event
/// DSH's fold refuses and keeps that refusal: queries past it fail the way DSH's code does.
#[derive(Debug, Default)]
pub(crate) struct SurfaceBuilder {
    pub(crate) fold: SurfaceFold,
    pub(crate) indexer: SurfaceIndexer,
    /// Current surface events a rewrite may target: whole `tool/result` events (and under V4,
    /// whose message projections read them, `user/message` events), and the type alone of the
    /// others (all DSH's rules read of them).
    current: HashMap<u64, Value>,
    /// V4: the messages committed projection events made so far, by original seq.
    projected: HashMap<u64, Value>,
    /// V4: the projection state so far.
    projections: ProjectionState,
    /// The seq and DSH's message of the first event the fold refused.
    pub(crate) error: Option<(u64, String)>,
    /// That refusal as DSH's own code words it (no location prefix).
    pub(crate) rule: Option<String>,
}

impl SurfaceBuilder {
    /// A builder folding by `model`'s rules.
    pub(crate) fn for_model(model: SurfaceModel) -> Self {
        SurfaceBuilder {
            fold: SurfaceFold::new().with_model(model),
            ..Self::default()
        }
    }

    /// Fold and index committed event `seq`, then, under V4, run its message projection (if its
    /// type has one) with `store`'s registry and store its record. A refusal of either stops the
    /// index at `seq`. The event is taken by value: a later replace may target it, and it is
    /// then kept whole, moved rather than copied.
    pub(crate) fn apply(
        &mut self,
        store: &Store,
        number: u64,
        seq: u64,
        event: Value,
        put: &mut dyn FnMut(Vec<u8>, Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        if self.error.is_some() {
            return Ok(());
        }
        let current = &self.current;
        let change = match self.fold.apply(&event, |s| current.get(&s).cloned()) {
            Ok(change) => change,
            Err(e) => {
                self.rule = Some(match &e {
                    sessionlog_codec::Error::Surface { rule, .. } => rule.clone(),
                    other => other.to_string(),
                });
                self.error = Some((seq, e.to_string()));
                return Ok(());
            }
        };
        let v4 = self.fold.model() == SurfaceModel::V4;
        if let SurfaceChange::Replaced(r) = &change {
            for s in &r.shadowed_seqs {
                self.current.remove(s);
            }
        }
        let changed = !matches!(change, SurfaceChange::Unchanged);
        let ty = event_type(&event);
        let whole = changed && (ty == "tool/result" || (v4 && ty == "user/message"));
        if changed && !whole {
            let kept = Value::Object(Object::new().with("type", ty));
            self.current.insert(seq, kept);
        }
        self.indexer
            .record(number, seq, &change, &self.fold, &mut |k, v| {
                put(k.to_vec(), v)
            })?;
        let held;
        let event = if whole {
            self.current.insert(seq, event);
            &self.current[&seq]
        } else {
            held = event;
            &held
        };
        if !v4 {
            return Ok(());
        }
        let (current, projected) = (&self.current, &self.projected);
        let event_at = |s: u64| current.get(&s).cloned();
        let earlier = |s: u64| projected.get(&s).cloned();
        let outcome = project_and_record(
            store,
            (number, seq, event),
            self.fold.nodes(),
            (&event_at, &earlier),
            &mut self.projections,
            put,
        )?;
        match outcome {
            Err(rule) => {
                self.rule = Some(rule.clone());
                self.error = Some((seq, rule));
            }
            Ok(messages) => self.projected.extend(messages),
        }
        Ok(())
    }
}

/// A turn entry's `endSeq`, when it is closed.
fn end_seq(turn: &Value) -> Option<u64> {
    turn.as_object()?.get("endSeq")?.as_safe_u64()
}

/// Events between two periodic checkpoints.
pub const CHECKPOINT_EVERY: u64 = 200;

/// Folding committed events into every projection unit and emitting their checkpoints by the
/// policy in the module docs (and the `turns` unit's closed-turn records). A unit no event
/// touched since its last whole checkpoint gets a reference to that one instead (the request
/// header, kilobytes, is set once and checkpointed at every turn).
impl ProjectionCheckpoints {
    /// Fold event `seq` into every unit, without checkpointing (for a run of events holding no
    /// checkpoint point).
    pub(crate) fn fold(&mut self, seq: u64, event: &Value) {
        let untouched_since = &mut self.untouched_since;
        self.set
            .apply_noting(seq, event, |i| untouched_since[i] = None);
    }

    /// Fold event `seq`; when it is a checkpoint point, `put` every unit's checkpoint.
    pub(crate) fn apply(
        &mut self,
        number: u64,
        seq: u64,
        event: &Value,
        put: &mut dyn FnMut([u8; EVENT_KEY_LEN], Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        self.fold(seq, event);
        if let Some((i, _)) = ProjectionSet::unit(TURNS) {
            // Closed turns leave the state for records of their own, so checkpoints stay small.
            // Most events close no turn: the list is rebuilt only when one is closed.
            if let Some(Value::Array(list)) = self.set.states.get_mut(i) {
                if list.iter().any(|t| end_seq(t).is_some()) {
                    let (closed, open): (Vec<Value>, Vec<Value>) = std::mem::take(list)
                        .into_iter()
                        .partition(|t| end_seq(t).is_some());
                    for t in closed {
                        put(
                            event_key(number, TURN_RECORDS, end_seq(&t).unwrap_or(seq)),
                            json::stringify(&t).into_bytes(),
                        )?;
                    }
                    *list = open;
                }
            }
        }
        if is_checkpoint_point(seq, event) {
            let mut record = PointRecord::default();
            for (i, state) in self.set.states.iter().enumerate() {
                let unit = unit_at(self.set.model, i);
                match self.untouched_since[i] {
                    Some(whole) => record.push_reference(unit, whole)?,
                    None => {
                        self.untouched_since[i] = Some(seq);
                        record.push_whole(unit, state)?;
                    }
                }
            }
            put(
                event_key(number, CHECKPOINT_POINTS, seq),
                record.into_bytes(),
            )?;
        }
        Ok(())
    }
}

/// Whether every unit is checkpointed after event `seq` (the policy in the module docs).
pub(crate) fn is_checkpoint_point(seq: u64, event: &Value) -> bool {
    (seq + 1).is_multiple_of(CHECKPOINT_EVERY)
        || event
            .as_object()
            .and_then(|o| o.get("type"))
            .and_then(Value::as_str)
            == Some("turn/end")
}

/// DSH's refusal of an event by its surface fold or a message projection.
#[derive(Clone, Debug)]
pub(crate) struct Refusal {
    /// The refused event's seq.
    pub(crate) seq: u64,
    /// DSH's message, as its reader reports it.
    pub(crate) message: String,
    /// The rule as DSH's own code words it (no location prefix).
    pub(crate) rule: String,
}

impl Refusal {
    /// The refusal of event `seq` by the surface fold's error `e`.
    fn of_fold(seq: u64, e: &sessionlog_codec::Error) -> Self {
        let rule = match e {
            sessionlog_codec::Error::Surface { rule, .. } => rule.clone(),
            other => other.to_string(),
        };
        Refusal {
            seq,
            message: e.to_string(),
            rule,
        }
    }

    /// A refusal whose message is its rule (a message projection's, an index record's).
    fn plain(seq: u64, rule: String) -> Self {
        Refusal {
            seq,
            message: rule.clone(),
            rule,
        }
    }
}

/// A batch folded into the surface: the changes (for rollback) and the surface-index records.
pub(crate) struct Folded {
    pub(crate) changes: Vec<SurfaceChange>,
    pub(crate) puts: Vec<(Vec<u8>, Vec<u8>)>,
    pub(crate) since_snapshot: u64,
}

/// Fold `authored` (seqs from `meta.events` on) into `fold` by DSH's surface rules, collecting
/// the surface-index records. On a refusal the fold is rolled back and DSH's refusal returned
/// (`Ok(Err(..))`); a failure reading the stored log (an earlier event, a projection record)
/// rolls the fold back too and is returned as the error it is.
pub(crate) fn fold_batch(
    store: &Store,
    meta: &SessionMeta,
    fold: &mut SurfaceFold,
    authored: &[Value],
) -> Result<std::result::Result<Folded, Refusal>> {
    let next = meta.events;
    let mut indexer = SurfaceIndexer {
        since_snapshot: meta.surface_since_snapshot,
    };
    let mut folded = Folded {
        changes: Vec::with_capacity(authored.len()),
        puts: Vec::new(),
        since_snapshot: 0,
    };
    // V4: the projection state, loaded only when the batch holds a projection event, and the
    // messages this batch's projections made.
    let mut projections: Option<ProjectionState> = None;
    let mut projected: std::collections::HashMap<u64, Value> = std::collections::HashMap::new();
    let failure = FirstError::default();
    for (k, event) in authored.iter().enumerate() {
        let seq = next + k as u64;
        let lookup = |s: u64| match s.checked_sub(next) {
            Some(i) => usize::try_from(i)
                .ok()
                .and_then(|i| authored.get(i))
                .cloned(),
            None => failure.keep(store.event_at(meta, s)),
        };
        let outcome = fold
            .apply(event, lookup)
            .map_err(|e| Refusal::of_fold(seq, &e))
            .and_then(|change| {
                let mut put = |key: [u8; EVENT_KEY_LEN], value| {
                    folded.puts.push((key.to_vec(), value));
                    Ok(())
                };
                let recorded = indexer
                    .record(meta.number, seq, &change, fold, &mut put)
                    .map_err(|e| Refusal::plain(seq, e.to_string()));
                folded.changes.push(change);
                recorded
            })
            .and_then(|()| {
                if meta.version != 4 {
                    return Ok(());
                }
                project_batch_event(
                    store,
                    meta,
                    (fold, seq, event),
                    (&lookup, &failure),
                    (&mut projections, &mut projected),
                    &mut folded.puts,
                )
                .map_err(|rule| Refusal::plain(seq, rule))
            });
        let stored = failure.check();
        if outcome.is_err() || stored.is_err() {
            for change in folded.changes.iter().rev() {
                fold.undo(change);
            }
            stored?;
        }
        if let Err(refusal) = outcome {
            return Ok(Err(refusal));
        }
    }
    folded.since_snapshot = indexer.since_snapshot;
    Ok(Ok(folded))
}

/// Run the message projection of appended V4 event `seq` (if its type has one) against the
/// fold's surface, staging its records into `puts`. The state before the batch is loaded on
/// first need; `projected` holds what this batch's projections made. `Err` is DSH's text; a
/// failure reading the store is kept in `failure` (the caller reports it, not the text).
fn project_batch_event(
    store: &Store,
    meta: &SessionMeta,
    (fold, seq, event): (&SurfaceFold, u64, &Value),
    (lookup, failure): (&EventLookup<'_>, &FirstError),
    (state, projected): (
        &mut Option<ProjectionState>,
        &mut std::collections::HashMap<u64, Value>,
    ),
    puts: &mut Vec<(Vec<u8>, Vec<u8>)>,
) -> std::result::Result<(), String> {
    if !store.is_projection_event(event) {
        return Ok(());
    }
    let mut current = match state.take() {
        Some(s) => s,
        None => match meta.events.checked_sub(1) {
            Some(at) => match store.projection_state_at(meta, at) {
                Ok(s) => s,
                // A projection the log used is gone: DSH's refusal, the caller's to see.
                Err(Error::SurfaceFailed { reason, .. }) => return Err(reason),
                Err(e) => {
                    let reason = e.to_string();
                    failure.keep::<()>(Err(e));
                    return Err(reason);
                }
            },
            None => ProjectionState::default(),
        },
    };
    let last = meta.events.checked_sub(1);
    let earlier = |s: u64| {
        projected
            .get(&s)
            .cloned()
            .or_else(|| last.and_then(|at| failure.keep(store.projected_message(meta, s, at))))
    };
    let outcome = project_and_record(
        store,
        (meta.number, seq, event),
        fold.nodes(),
        (lookup, &earlier),
        &mut current,
        &mut |k, v| {
            puts.push((k, v));
            Ok(())
        },
    );
    *state = Some(current);
    match outcome {
        Ok(Ok(messages)) => {
            projected.extend(messages);
            Ok(())
        }
        Ok(Err(rule)) => Err(rule),
        Err(e) => {
            let reason = e.to_string();
            failure.keep::<()>(Err(e));
            Err(reason)
        }
    }
}

/// Run the message projection of V4 event `seq` (if its type has one) against the surface
/// `nodes`, after the projection `state`: `event_at` reads earlier events, `earlier` the
/// messages earlier projections made. On success its records go to `put`, `state` advances and
/// the messages it made are returned; `Err` is DSH's text, with nothing staged. The one driver
/// of message projections for every writer.
fn project_and_record(
    store: &Store,
    (number, seq, event): (u64, u64, &Value),
    nodes: &[u64],
    (event_at, earlier): (&EventLookup<'_>, &EventLookup<'_>),
    state: &mut ProjectionState,
    put: &mut dyn FnMut(Vec<u8>, Vec<u8>) -> Result<()>,
) -> Result<std::result::Result<Vec<(u64, Value)>, String>> {
    match store.project_event(event, nodes, event_at, earlier) {
        Err(rule) => Ok(Err(rule)),
        Ok(Projected::None) => Ok(Ok(Vec::new())),
        Ok(Projected::Messages(ty, messages)) => {
            let after = state.after(&ty);
            put(event_key(number, PROJ, seq).to_vec(), after.encode(&ty))?;
            for (target, message) in &messages {
                put(
                    target_key(number, *target, seq).to_vec(),
                    json::stringify(message).into_bytes(),
                )?;
            }
            *state = after;
            Ok(Ok(messages))
        }
    }
}
