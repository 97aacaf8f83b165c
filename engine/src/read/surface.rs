//! The surface index read (`surface` CF, written by `write/indexer.rs`): point-in-time surface,
//! messages and transcript queries, from the nearest snapshot ≤ N, then the ops in
//! (snapshot, N]. Cost O(log n + k): one seek, at most a quarter of the nodes' worth of ops (see
//! the snapshot policy in `write/indexer.rs`), and the answer itself.

use sessionlog_codec::json::Value;
use sessionlog_codec::rules::surface::{
    derive_messages_in, is_append_surface_event_in, surface_json, Replacement, SurfaceChange,
    SurfaceFold, SurfaceModel,
};

use crate::error::{Error, FirstError, Result};
use crate::layout::keys::{event_key, parse_event_key, CF_SURFACE, OP, REPL, SNAP};
use crate::layout::meta::SessionMeta;
use crate::layout::values::{decode, Snapshot};
use crate::store::{visit, Store};

/// The surface after event N.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SurfaceView {
    /// Current surface nodes (event seqs) in model order.
    pub nodes: Vec<u64>,
    /// Replacements so far.
    pub replace_generation: u64,
    /// Every replacement up to N, in log order.
    pub replacements: Vec<Replacement>,
    /// The surface rules of the session's format.
    pub model: SurfaceModel,
    /// DSH 0.2's `contentGeneration`: replacements plus committed message-projection events.
    pub content_generation: u64,
}

impl SurfaceView {
    /// `{"nodes","replaceGeneration","replacements"}` as DSH's surface files spell it.
    pub fn to_json(&self) -> String {
        surface_json(
            self.model,
            &self.nodes,
            (self.replace_generation, self.content_generation),
            &self.replacements,
        )
    }
}

impl Store {
    /// The surface after event `at` (default: the last event).
    pub fn surface_at(&self, id: &str, at: Option<u64>) -> Result<SurfaceView> {
        let meta = self.require_meta(id.as_bytes())?;
        if let Some(replay) = self.migrated_replay(&meta, at)? {
            return Ok(Self::replay_surface(replay.as_ref()));
        }
        let model = meta.require_surface_model("the surface")?;
        let Some(at) = resolve_at(&meta, at)? else {
            return Ok(SurfaceView {
                nodes: Vec::new(),
                replace_generation: 0,
                replacements: Vec::new(),
                model,
                content_generation: 0,
            });
        };
        let fold = self.surface_fold_at(&meta, at)?;
        let mut replacements = Vec::new();
        self.scan_surface(&meta, REPL, at, &mut |_, v| {
            replacements.push(decode::<Replacement>(&meta.id_lossy(), v)?);
            Ok(())
        })?;
        let projections = match model {
            SurfaceModel::V4 => self.projection_state_at(&meta, at)?.count,
            SurfaceModel::V0 => 0,
        };
        Ok(SurfaceView {
            nodes: fold.nodes().to_vec(),
            replace_generation: fold.replace_generation(),
            replacements,
            model,
            content_generation: fold.replace_generation() + projections,
        })
    }

    /// The model-visible messages after event `at`, as DSH's `deriveMessages()` returns them.
    pub fn messages_at(&self, id: &str, at: Option<u64>) -> Result<Vec<Value>> {
        let meta = self.require_meta(id.as_bytes())?;
        if let Some(replay) = self.migrated_replay(&meta, at)? {
            return Ok(replay.map(|r| r.messages).unwrap_or_default());
        }
        let Some(at) = resolve_at(&meta, at)? else {
            return Ok(Vec::new());
        };
        let fold = self.surface_fold_at(&meta, at)?;
        let projected_any = match fold.model() {
            SurfaceModel::V4 => self.projection_state_at(&meta, at)?.count > 0,
            SurfaceModel::V0 => false,
        };
        let failure = FirstError::default();
        let lookup = |seq: u64| failure.keep(self.event_at(&meta, seq));
        // One seek per node, and only when some projection happened by `at`.
        let projected = |seq: u64| {
            if !projected_any {
                return None;
            }
            failure.keep(self.projected_message(&meta, seq, at))
        };
        let messages =
            derive_messages_in(fold.model(), fold.nodes(), lookup, &projected).map_err(|e| {
                Error::SurfaceFailed {
                    id: id.into(),
                    reason: e.to_string(),
                }
            });
        failure.check()?;
        messages
    }

    /// The human transcript up to event `at`: every append-origin surface event, whole, in log
    /// order (shadowed or not). It is the events themselves, not a view of the fold: where DSH's
    /// fold refuses an event, the surface index stops, and the events from there to `at` are
    /// read and picked by DSH's `isAppendSurfaceEvent`.
    pub fn transcript(&self, id: &str, at: Option<u64>) -> Result<Vec<Value>> {
        let meta = self.require_meta(id.as_bytes())?;
        if let Some(replay) = self.migrated_replay(&meta, at)? {
            return Ok(replay.map(|r| r.transcript).unwrap_or_default());
        }
        let model = meta.require_surface_model("the transcript")?;
        let Some(at) = resolve_at(&meta, at)? else {
            return Ok(Vec::new());
        };
        let unindexed = meta
            .surface_error
            .as_ref()
            .map(|(seq, _)| *seq)
            .filter(|&seq| seq <= at);
        let mut seqs = Vec::new();
        if let Some(indexed) = unindexed.map_or(Some(at), |seq| seq.checked_sub(1)) {
            self.scan_surface(&meta, OP, indexed, &mut |seq, v| {
                if matches!(
                    decode::<SurfaceChange>(&meta.id_lossy(), v)?,
                    SurfaceChange::Appended { .. }
                ) {
                    seqs.push(seq);
                }
                Ok(())
            })?;
        }
        let mut out = Vec::with_capacity(seqs.len());
        for seq in seqs {
            out.push(self.event_at(&meta, seq)?.ok_or_else(|| Error::Corrupt {
                id: id.into(),
                detail: format!("surface index names seq {seq}, which the log does not hold"),
            })?);
        }
        if let Some(from) = unindexed {
            self.events_of(&meta, from, Some(at), &mut |_, e| {
                if is_append_surface_event_in(model, e) {
                    out.push(e.clone());
                }
                Ok(())
            })?;
        }
        Ok(out)
    }

    /// The fold after event `at`: nearest snapshot ≤ `at`, then the ops after it.
    pub(crate) fn surface_fold_at(&self, meta: &SessionMeta, at: u64) -> Result<SurfaceFold> {
        if let Some(base) = meta.fork_of.as_ref().filter(|b| at < b.seed) {
            return self.surface_fold_at(&self.require_meta(&base.id)?, at);
        }
        let model = meta.require_surface_model("the surface, its messages and transcript")?;
        let id = meta.id_lossy();
        if let Some((seq, reason)) = &meta.surface_error {
            if at >= *seq {
                return Err(Error::SurfaceFailed {
                    id,
                    reason: reason.clone(),
                });
            }
        }
        let mut it = self.session_iter_cf(CF_SURFACE, meta.number)?;
        it.seek_for_prev(event_key(meta.number, SNAP, at));
        let mut fold = SurfaceFold::new().with_model(model);
        let mut from = 0;
        if let (Some(k), Some(v)) = (it.key(), it.value()) {
            if let Some((_, SNAP, seq)) = parse_event_key(k) {
                let snap: Snapshot = decode(&id, v)?;
                fold =
                    SurfaceFold::from_snapshot(snap.next_seq, snap.nodes, snap.replace_generation)
                        .with_model(model);
                from = seq + 1;
            }
        }
        it.status()
            .map_err(Error::storage(format!("reading the surface of \"{id}\"")))?;
        let mut it = self.session_iter_cf(CF_SURFACE, meta.number)?;
        it.seek(event_key(meta.number, OP, from));
        let context = format!("reading the surface of \"{id}\"");
        visit(&mut it, context, &mut |k, v| match parse_event_key(k) {
            Some((_, OP, seq)) if seq <= at => {
                fold.redo(&decode::<SurfaceChange>(&id, v)?);
                Ok(true)
            }
            _ => Ok(false),
        })?;
        Ok(
            SurfaceFold::from_snapshot(at + 1, fold.nodes().to_vec(), fold.replace_generation())
                .with_model(model),
        )
    }

    /// Visit every record of surface `section` with seq ≤ `at`, in seq order.
    pub(crate) fn scan_surface(
        &self,
        meta: &SessionMeta,
        section: u8,
        at: u64,
        each: &mut dyn FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<()> {
        self.scan_records(meta, (CF_SURFACE, section), at, "the surface", each)
    }
}

/// `at` defaulted to the last event (`None` for an empty log) and checked against the log: a
/// seq the log does not hold, `--at 0` of an empty log included, is an error naming its length.
pub(crate) fn resolve_at(meta: &SessionMeta, at: Option<u64>) -> Result<Option<u64>> {
    match (at, meta.events) {
        (None, 0) => Ok(None),
        (None, n) => Ok(Some(n - 1)),
        (Some(a), n) if a < n => Ok(Some(a)),
        (Some(a), n) => Err(Error::OutOfRange {
            id: meta.id_lossy(),
            seq: a,
            events: n,
        }),
    }
}
