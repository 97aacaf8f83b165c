//! Message projections in the store (DSH 0.2's `registerMessageProjection`): registering them
//! (the registry itself is `store/projection_registry.rs`), running one, and reading the records
//! of the surface index that hold what committed projection events made of earlier messages.
//!
//! A projection runs once, when its event is written (import or append), against the surface at
//! that point; its result is stored in the same WriteBatch:
//! - `number ‖ PROJ ‖ seq` → `{"type","count","types"}`: the event's projection, and the
//!   cumulative number of projection events and set of projection types up to it;
//! - `number ‖ PROJN ‖ target ‖ seq` (25 bytes) → the message event `seq` made of node `target`.
//!
//! A read at seq N costs one seek for the cumulative state (contentGeneration, the types to check
//! against the registry) and, when any projection happened, one seek per node for its latest
//! projected message: proportional to the answer, never to the log. As in DSH, a session whose
//! records name a projection that is no longer registered is not read.

use std::sync::Arc;

use sessionlog_codec::format::event::event_type;
use sessionlog_codec::json::{self, Value};
use sessionlog_codec::rules::surface::{
    missing_projection, MessageProjection, ProjectionContext, MESSAGE_PROJECTION_EVENT_TYPES,
};

use crate::error::{Error, Result};
use crate::layout::keys::{self, target_key, CF_SURFACE, PROJ};
use crate::layout::meta::SessionMeta;
use crate::store::Store;

/// What writing one event did to the projections: nothing, or a projection of a type.
pub(crate) enum Projected {
    /// Not a projection event.
    None,
    /// A committed projection of type `.0`: the messages it made, by original seq.
    Messages(String, Vec<(u64, Value)>),
}

/// The cumulative projection state after some event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProjectionState {
    /// Projection events committed (their share of `contentGeneration`).
    pub(crate) count: u64,
    /// The projection types they used.
    pub(crate) types: Vec<String>,
}

impl ProjectionState {
    /// The state after one more projection event, of type `ty`.
    pub(crate) fn after(&self, ty: &str) -> ProjectionState {
        let mut types = self.types.clone();
        if !types.iter().any(|t| t == ty) {
            types.push(ty.to_owned());
        }
        ProjectionState {
            count: self.count + 1,
            types,
        }
    }

    /// The PROJ record of the projection event of type `ty` that led to this state.
    pub(crate) fn encode(&self, ty: &str) -> Vec<u8> {
        let list = self.types.iter().map(|t| Value::from(t.as_str())).collect();
        let record = json::Object::new()
            .with("type", ty)
            .with("count", self.count as f64)
            .with("types", Value::Array(list));
        json::stringify(&Value::Object(record)).into_bytes()
    }

    fn decode(bytes: &[u8]) -> Option<ProjectionState> {
        let value = json::parse(std::str::from_utf8(bytes).ok()?).ok()?;
        let o = value.as_object()?;
        let count = o.get("count")?.as_safe_u64()?;
        let types = o
            .get("types")?
            .as_array()?
            .iter()
            .map(|t| t.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()?;
        Some(ProjectionState { count, types })
    }
}

impl Store {
    /// Register a message projection for its event type (one owner per type).
    pub fn register_message_projection(
        &self,
        projection: Arc<dyn MessageProjection>,
    ) -> Result<()> {
        self.projection_registry
            .register(projection)
            .map_err(Error::Projection)
    }

    /// Remove the projection of `ty` (built-in ones included); whether one was registered.
    /// Sessions that used it can no longer be read until it is registered again.
    pub fn remove_message_projection(&self, ty: &str) -> bool {
        self.projection_registry.remove(ty)
    }

    /// Whether `event`'s type is a message projection's (registered, or declared by DSH).
    pub(crate) fn is_projection_event(&self, event: &Value) -> bool {
        let ty = event_type(event);
        self.projection_registry.get(ty).is_some() || MESSAGE_PROJECTION_EVENT_TYPES.contains(&ty)
    }

    /// Run the projection of V4 event `event` (if its type has one) against the surface
    /// `nodes`; `event_at` reads earlier events, `earlier` the messages earlier projections
    /// made. `Err` is DSH's text: a projection event without a projection, or its refusal.
    pub(crate) fn project_event(
        &self,
        event: &Value,
        nodes: &[u64],
        event_at: &dyn Fn(u64) -> Option<Value>,
        earlier: &dyn Fn(u64) -> Option<Value>,
    ) -> std::result::Result<Projected, String> {
        let ty = event_type(event);
        let Some(projection) = self.projection_registry.get(ty) else {
            if MESSAGE_PROJECTION_EVENT_TYPES.contains(&ty) {
                return Err(missing_projection(ty));
            }
            return Ok(Projected::None);
        };
        let ctx = ProjectionContext {
            nodes,
            event_at,
            projected: earlier,
        };
        let messages = projection.project(event, &ctx)?;
        Ok(Projected::Messages(ty.to_owned(), messages))
    }

    /// The projection state after event `at` (walking a fork's segments, newest first). Fails
    /// with DSH's text if a projection the session used by then is not registered (removed
    /// since the store opened, or never registered in this store's life).
    pub(crate) fn projection_state_at(
        &self,
        meta: &SessionMeta,
        at: u64,
    ) -> Result<ProjectionState> {
        let id = meta.id_lossy();
        let found = self.latest_record(
            meta,
            at,
            &|number, hi| keys::event_key(number, PROJ, hi).to_vec(),
            &|k| keys::parse_event_key(k).and_then(|(_, s, seq)| (s == PROJ).then_some(seq)),
        )?;
        let Some(bytes) = found else {
            return Ok(ProjectionState::default());
        };
        let state = ProjectionState::decode(&bytes).ok_or_else(|| Error::Corrupt {
            id: id.clone(),
            detail: "projection record does not decode".into(),
        })?;
        if let Some(ty) = state
            .types
            .iter()
            .find(|t| self.projection_registry.get(t).is_none())
        {
            return Err(Error::SurfaceFailed {
                id,
                reason: self.projection_registry.unregistered(ty),
            });
        }
        Ok(state)
    }

    /// The latest message a projection at or before `at` made of node `target`, if any.
    pub(crate) fn projected_message(
        &self,
        meta: &SessionMeta,
        target: u64,
        at: u64,
    ) -> Result<Option<Value>> {
        let found = self.latest_record(
            meta,
            at,
            &|number, hi| target_key(number, target, hi).to_vec(),
            &|k| keys::parse_target_key(k).and_then(|(t, seq)| (t == target).then_some(seq)),
        )?;
        let Some(bytes) = found else {
            return Ok(None);
        };
        std::str::from_utf8(&bytes)
            .ok()
            .and_then(|t| json::parse(t).ok())
            .map(Some)
            .ok_or_else(|| Error::Corrupt {
                id: meta.id_lossy(),
                detail: format!("projected message of seq {target} does not decode"),
            })
    }

    /// The value of the last record at or before seq `at` in the segments of `meta` (newest
    /// first): `key(number, hi)` is the key to seek back from, `seq_of(key)` the record's seq
    /// when the key is one of the records looked for.
    fn latest_record(
        &self,
        meta: &SessionMeta,
        at: u64,
        key: &dyn Fn(u64, u64) -> Vec<u8>,
        seq_of: &dyn Fn(&[u8]) -> Option<u64>,
    ) -> Result<Option<Vec<u8>>> {
        for seg in self.segments(meta)?.iter().rev() {
            let Some(hi) = seg.last_upto(at) else {
                continue;
            };
            let mut it = self.session_iter_cf(CF_SURFACE, seg.number)?;
            it.seek_for_prev(key(seg.number, hi));
            let found = match (it.key().and_then(seq_of), it.value()) {
                (Some(seq), Some(v)) if seq >= seg.from => Some(v.to_vec()),
                _ => None,
            };
            it.status().map_err(Error::storage(format!(
                "reading the projections of \"{}\"",
                meta.id_lossy()
            )))?;
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }
}
