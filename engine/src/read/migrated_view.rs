//! Logical reads of a V1–V3 session. DSH 0.2 opens such a log for reading by migrating it in
//! memory (a read-open publishes nothing), so its messages, surface, transcript and state are
//! those of its V4 successor, at the successor's seqs. The store does the same: the migration
//! chain runs over the stored events on each read and the views are folded naively over the
//! result; `sessionlog migrate` publishes the successor and makes the reads indexed.
//!
//! V0 sessions keep DSH 0.1's model (the format's own reader) unless the store is opened with
//! `V0Reads::Migrated`; V4 is served from its index.

use std::sync::Arc;

use sessionlog_codec::json::Value;
use sessionlog_codec::rules::surface::{replay_projected, MessageProjection, Replay, SurfaceModel};

use crate::error::{Error, Result};
use crate::layout::meta::SessionMeta;
use crate::options::V0Reads;
use crate::read::surface::SurfaceView;
use crate::store::Store;

/// Successors longer than this are not kept (each read rebuilds them), bounding the memory held.
const CACHEABLE_EVENTS: usize = 100_000;

/// The formats a read always serves through migration (V0 only when the store is opened with
/// `V0Reads::Migrated`).
const MIGRATED_READS: std::ops::Range<u32> = 1..4;

impl Store {
    /// The V4 successor's events of a session read through migration; `None` for sessions
    /// served natively.
    pub(crate) fn migrated_events(&self, meta: &SessionMeta) -> Result<Option<Arc<Vec<Value>>>> {
        let v0_migrated = meta.version == 0 && self.options.v0_reads == V0Reads::Migrated;
        if !MIGRATED_READS.contains(&meta.version) && !v0_migrated {
            return Ok(None);
        }
        // The successor depends on the session's events and, through the catalog backfill, on
        // which sessions exist: any new session changes the key.
        let key = (meta.number, meta.events, self.number_watermark());
        if let Some(events) = self.successors.get(key) {
            return Ok(Some(events));
        }
        let id = meta.id_lossy();
        let children = self.children_facts(Some(&id))?;
        let children = children.get(&id).cloned().unwrap_or_default();
        let successor = self
            .successor(meta, children)?
            .map_err(|reason| Error::Migration { id, reason })?;
        let events = Arc::new(successor.events);
        if events.len() <= CACHEABLE_EVENTS {
            self.successors.put(key, Arc::clone(&events));
        }
        Ok(Some(events))
    }

    /// The replay of a V1–V3 session's successor up to `at` (default: its last event); `None`
    /// for sessions served natively, `Some(None)` for an empty successor.
    pub(crate) fn migrated_replay(
        &self,
        meta: &SessionMeta,
        at: Option<u64>,
    ) -> Result<Option<Option<Replay>>> {
        let Some(events) = self.migrated_events(meta)? else {
            return Ok(None);
        };
        let Some(end) = migrated_at(meta, &events, at)? else {
            return Ok(Some(None));
        };
        // The successor's projection events are read with the store's registered projections,
        // as DSH 0.2 reads them with its host's.
        let registered = self.projection_registry.list();
        let projections: Vec<&dyn MessageProjection> =
            registered.iter().map(|p| p.as_ref()).collect();
        let replay =
            replay_projected(SurfaceModel::V4, &events[..=end], &projections).map_err(|e| {
                Error::SurfaceFailed {
                    id: meta.id_lossy(),
                    reason: e.to_string(),
                }
            })?;
        Ok(Some(Some(replay)))
    }

    /// The surface view of a replay (`None`: nothing folded yet).
    pub(crate) fn replay_surface(replay: Option<&Replay>) -> SurfaceView {
        let Some(r) = replay else {
            return SurfaceView {
                nodes: Vec::new(),
                replace_generation: 0,
                replacements: Vec::new(),
                model: SurfaceModel::V4,
                content_generation: 0,
            };
        };
        SurfaceView {
            nodes: r.surface.nodes().to_vec(),
            replace_generation: r.surface.replace_generation(),
            replacements: r.surface.replacements().to_vec(),
            model: SurfaceModel::V4,
            content_generation: r.surface.content_generation(),
        }
    }
}

/// The last successor seq a read at `at` covers, checked against the successor's length.
pub(crate) fn migrated_at(
    meta: &SessionMeta,
    events: &[Value],
    at: Option<u64>,
) -> Result<Option<usize>> {
    let n = events.len();
    match at {
        None => Ok(n.checked_sub(1)),
        Some(a) if (a as usize) < n => Ok(Some(a as usize)),
        Some(a) => Err(Error::OutOfRange {
            id: meta.id_lossy(),
            seq: a,
            events: n as u64,
        }),
    }
}
