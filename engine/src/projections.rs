//! Message projections in the store (DSH 0.2's `registerMessageProjection`): the registry, and
//! the `PROJ` records of the surface index that hold what each committed projection event made
//! of earlier messages.
//!
//! A projection runs once, when its event is written (import or append), against the surface at
//! that point; its result is stored beside the event (`number ‖ PROJ ‖ seq` → `{"type",
//! "messages":[[seq, message]…]}`), in the same WriteBatch. Reads overlay the records at or
//! before the asked seq, later over earlier, so a point-in-time query never re-runs a plugin.
//! Invariant, as in DSH: a session whose records name a projection that is no longer registered
//! is not read (its messages would depend on code that is gone).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use sessionlog_codec::json::{self, Value};
use sessionlog_codec::surface::{
    duplicate_projection, missing_projection, removed_projection, ImageOffload, MessageProjection,
    ProjectionContext, MESSAGE_PROJECTION_EVENT_TYPES,
};

use crate::meta::SessionMeta;
use crate::store::Store;
use crate::{Error, Result};

/// Section byte of projection records in the `surface` CF.
pub(crate) const PROJ: u8 = 3;

/// The registered projections, one per event type; `image/offload` is built in.
pub(crate) struct Registry(RwLock<Vec<Arc<dyn MessageProjection>>>);

impl Default for Registry {
    fn default() -> Self {
        Registry(RwLock::new(vec![Arc::new(ImageOffload)]))
    }
}

impl Registry {
    fn get(&self, ty: &str) -> Option<Arc<dyn MessageProjection>> {
        let list = self
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        list.iter().find(|p| p.event_type() == ty).cloned()
    }
}

/// What writing one event did to the projections: nothing, or a record to store.
pub(crate) enum Projected {
    /// Not a projection event.
    None,
    /// A committed projection: its record, and the messages it made (by original seq).
    Record(Vec<u8>, Vec<(u64, Value)>),
}

impl Store {
    /// Register a message projection for its event type (one owner per type).
    pub fn register_message_projection(
        &self,
        projection: Arc<dyn MessageProjection>,
    ) -> Result<()> {
        let mut list = self
            .projections
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let ty = projection.event_type().to_owned();
        if list.iter().any(|p| p.event_type() == ty) {
            return Err(Error::Projection(duplicate_projection(&ty)));
        }
        list.push(projection);
        Ok(())
    }

    /// Remove the projection of `ty` (built-in ones included); whether one was registered.
    /// Sessions that used it can no longer be read until it is registered again.
    pub fn remove_message_projection(&self, ty: &str) -> bool {
        let mut list = self
            .projections
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = list.len();
        list.retain(|p| p.event_type() != ty);
        list.len() != before
    }

    /// Whether `event`'s type is a message projection's (registered, or declared by DSH).
    pub(crate) fn is_projection_event(&self, event: &Value) -> bool {
        let ty = event_type(event);
        self.projections.get(ty).is_some() || MESSAGE_PROJECTION_EVENT_TYPES.contains(&ty)
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
        let Some(projection) = self.projections.get(ty) else {
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
        Ok(Projected::Record(encode_record(ty, &messages), messages))
    }

    /// The messages projections made, as of event `at` (later records over earlier), and how
    /// many projection events committed up to it. Fails if a projection a record names is no
    /// longer registered.
    pub(crate) fn projected_at(
        &self,
        meta: &SessionMeta,
        at: u64,
    ) -> Result<(HashMap<u64, Value>, u64)> {
        let mut overlay = HashMap::new();
        let mut count = 0;
        let id = meta.id_lossy();
        self.scan_surface(meta, PROJ, at, &mut |seq, v| {
            let (ty, messages) = decode_record(v).ok_or_else(|| Error::Corrupt {
                id: id.clone(),
                detail: format!("projection record at seq {seq} does not decode"),
            })?;
            if self.projections.get(&ty).is_none() {
                return Err(Error::SurfaceFailed {
                    id: id.clone(),
                    reason: removed_projection(&ty),
                });
            }
            overlay.extend(messages);
            count += 1;
            Ok(())
        })?;
        Ok((overlay, count))
    }
}

fn event_type(event: &Value) -> &str {
    event
        .as_object()
        .and_then(|o| o.get("type"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `{"type":T,"messages":[[seq,message],…]}`.
fn encode_record(ty: &str, messages: &[(u64, Value)]) -> Vec<u8> {
    let list = messages
        .iter()
        .map(|(seq, m)| Value::Array(vec![Value::Number(*seq as f64), m.clone()]))
        .collect();
    let record = json::Object::new()
        .with("type", ty)
        .with("messages", Value::Array(list));
    json::stringify(&Value::Object(record)).into_bytes()
}

fn decode_record(bytes: &[u8]) -> Option<(String, Vec<(u64, Value)>)> {
    let value = json::parse(std::str::from_utf8(bytes).ok()?).ok()?;
    let o = value.as_object()?;
    let ty = o.get("type")?.as_str()?.to_owned();
    let mut messages = Vec::new();
    for pair in o.get("messages")?.as_array()? {
        let [seq, message] = pair.as_array()? else {
            return None;
        };
        let seq = seq.as_safe_integer().and_then(|s| u64::try_from(s).ok())?;
        messages.push((seq, message.clone()));
    }
    Some((ty, messages))
}
