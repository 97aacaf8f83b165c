//! Whole-log replay: every surface projection of a log at its last event, computed the naive way
//! (DSH's `foldSurface` + `deriveEventMessage` per node + `foldRequestHeader`). Tests and
//! point-in-time checks compare the engine's indexed answers against this.
//!
//! Invariant: the result is a pure function of the events; an event DSH would throw on makes the
//! whole replay fail with that error.

use super::{
    derive_messages_in, is_append_surface_event_in, RequestHeaderFold, SurfaceFold, SurfaceModel,
};
use crate::json::{stringify, Value};
use crate::Result;

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

/// [`replay`] under `model`'s surface rules.
///
/// # Errors
/// As [`replay`].
pub fn replay_with(model: SurfaceModel, events: &[Value]) -> Result<Replay> {
    let lookup = |seq: u64| usize::try_from(seq).ok().and_then(|i| events.get(i));
    let mut surface = SurfaceFold::new().with_model(model);
    for event in events {
        surface.apply(event, lookup)?;
    }
    let messages = derive_messages_in(model, surface.nodes(), lookup)?;
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
