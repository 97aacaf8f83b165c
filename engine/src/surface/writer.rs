//! Maintaining the surface index while events are written (import and append).

use std::collections::HashMap;

use sessionlog_codec::event::event_type;
use sessionlog_codec::json::{Object, Value};
use sessionlog_codec::surface::{SurfaceChange, SurfaceFold, SurfaceModel};

use crate::projections::{Projected, ProjectionState};

use super::{encode, Snapshot, OP, REPL, SNAP, SNAPSHOT_MIN_OPS};
use crate::keys::event_key;
use crate::store::Store;
use crate::Result;

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
        put: &mut dyn FnMut([u8; crate::keys::EVENT_KEY_LEN], Vec<u8>) -> Result<()>,
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
    /// index at `seq`.
    pub(crate) fn apply(
        &mut self,
        store: &Store,
        number: u64,
        seq: u64,
        event: &Value,
        put: &mut dyn FnMut(Vec<u8>, Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        if self.error.is_some() {
            return Ok(());
        }
        let current = &self.current;
        let change = match self.fold.apply(event, |s| current.get(&s).cloned()) {
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
        if !matches!(change, SurfaceChange::Unchanged) {
            let ty = event_type(event);
            let kept = if ty == "tool/result" || (v4 && ty == "user/message") {
                event.clone()
            } else {
                Value::Object(Object::new().with("type", ty))
            };
            self.current.insert(seq, kept);
        }
        self.indexer
            .record(number, seq, &change, &self.fold, &mut |k, v| {
                put(k.to_vec(), v)
            })?;
        if !v4 {
            return Ok(());
        }
        let (current, projected) = (&self.current, &self.projected);
        let event_at = |s: u64| current.get(&s).cloned();
        let earlier = |s: u64| projected.get(&s).cloned();
        match store.project_event(event, self.fold.nodes(), &event_at, &earlier) {
            Err(rule) => {
                self.rule = Some(rule.clone());
                self.error = Some((seq, rule));
            }
            Ok(Projected::None) => {}
            Ok(Projected::Messages(ty, messages)) => {
                self.projections = self.projections.put(number, seq, &ty, &messages, put)?;
                self.projected.extend(messages);
            }
        }
        Ok(())
    }
}
