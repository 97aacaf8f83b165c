//! Whole-log replay: every surface projection of a log at its last event, computed the naive way
//! (DSH's `foldSurface` + `deriveEventMessage` per node + `foldRequestHeader`). Tests and
//! point-in-time checks compare the engine's indexed answers against this.
//!
//! Invariant: the result is a pure function of the events; an event DSH would throw on makes the
//! whole replay fail with that error.

use std::collections::HashMap;

use super::{
    derive_messages_in, is_append_surface_event_in, missing_projection, ImageOffload,
    MessageProjection, ProjectionContext, RequestHeaderFold, SurfaceFold, SurfaceModel,
    MESSAGE_PROJECTION_EVENT_TYPES,
};
use crate::json::{stringify, Value};
use crate::{Error, Result};

/// Every surface projection of a log after its last event.
#[derive(Clone, Debug, PartialEq)]
pub struct Replay {
    /// The model-visible messages (DSH's `deriveMessages()`).
    pub messages: Vec<Value>,
    /// The surface fold after the last event (nodes, generation, replacements).
    pub surface: SurfaceFold,
    /// The human transcript: every append-origin surface event, whole, in log order.
    pub transcript: Vec<Value>,
    /// The canonical header of the latest `request/header`, `None` when there is none.
    pub request_header: Option<Value>,
}

impl Replay {
    /// The messages as JSONL: one `JSON.stringify(message)` per line, each ending in `\n`.
    pub fn messages_jsonl(&self) -> String {
        jsonl(&self.messages)
    }

    /// The transcript as JSONL: one `JSON.stringify(event)` per line, each ending in `\n`.
    pub fn transcript_jsonl(&self) -> String {
        jsonl(&self.transcript)
    }
}

fn jsonl(values: &[Value]) -> String {
    values.iter().map(|v| stringify(v) + "\n").collect()
}

/// Replay `events` (contiguous from seq 0) through every surface projection.
///
/// # Errors
/// [`crate::Error::Surface`] wherever DSH's fold, message projection or header fold throws.
pub fn replay(events: &[Value]) -> Result<Replay> {
    replay_with(SurfaceModel::V0, events)
}

/// [`replay`] under `model`'s surface rules, with the first-party message projection
/// (`image/offload`) under V4.
///
/// # Errors
/// As [`replay`].
pub fn replay_with(model: SurfaceModel, events: &[Value]) -> Result<Replay> {
    replay_projected(model, events, &[&ImageOffload])
}

/// [`replay_with`] with the given message projections (V4 only; V0 has none).
///
/// # Errors
/// As [`replay`], and where a projection refuses its event or a projection event has none.
pub fn replay_projected(
    model: SurfaceModel,
    events: &[Value],
    projections: &[&dyn MessageProjection],
) -> Result<Replay> {
    let lookup = |seq: u64| usize::try_from(seq).ok().and_then(|i| events.get(i));
    let mut surface = SurfaceFold::new().with_model(model);
    let mut projected: HashMap<u64, Value> = HashMap::new();
    for (seq, event) in events.iter().enumerate() {
        surface.apply(event, lookup)?;
        if model != SurfaceModel::V4 {
            continue;
        }
        let ty = event
            .as_object()
            .and_then(|o| o.get("type"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let rule = |rule: String| Error::Surface {
            seq: seq as u64,
            rule,
        };
        let Some(projection) = projections.iter().find(|p| p.event_type() == ty) else {
            if MESSAGE_PROJECTION_EVENT_TYPES.contains(&ty) {
                return Err(rule(missing_projection(ty)));
            }
            continue;
        };
        let event_at = |s: u64| lookup(s).cloned();
        let earlier = |s: u64| projected.get(&s).cloned();
        let ctx = ProjectionContext {
            nodes: surface.nodes(),
            event_at: &event_at,
            projected: &earlier,
        };
        let updates = projection.project(event, &ctx).map_err(rule)?;
        projected.extend(updates);
        surface.note_projection();
    }
    let messages = derive_messages_in(model, surface.nodes(), lookup, &|s| {
        projected.get(&s).cloned()
    })?;
    let mut header = RequestHeaderFold::new();
    for event in events {
        header.apply(event)?;
    }
    let transcript = events
        .iter()
        .filter(|e| is_append_surface_event_in(model, e))
        .cloned()
        .collect();
    Ok(Replay {
        messages,
        surface,
        transcript,
        request_header: header.header().cloned(),
    })
}
