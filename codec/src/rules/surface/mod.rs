//! The reference semantics of DSH's model-visible surface and its projections (`surface.ts`,
//! `request-header.ts`): the surface fold, the per-event message projection, the derived
//! message list, the human transcript selection and the request-header fold.
//!
//! These are the "naive replay" the engine's indexed point-in-time queries are checked against,
//! and the folds the engine runs incrementally. Invariants kept:
//! - every function gives what DSH 0.1.0's code gives on the same logical events, including
//!   *where* it throws (as [`crate::Error::Surface`] with DSH's message text, never a panic);
//! - derived messages are the event's own JSON values, so `json::stringify` of each equals DSH's
//!   `JSON.stringify(message)` byte for byte (key order included).

mod fold;
mod header;
mod js;
mod model;
mod projection;
mod replay;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod v4_tests;

use std::borrow::Borrow;

pub use fold::{surface_json, Replacement, SurfaceChange, SurfaceFold};
pub use header::{canonical_header, fold_request_header, RequestHeaderFold};
pub use model::{SurfaceModel, DEVELOPER_MESSAGE, SYSTEM_MESSAGE};
pub use projection::{
    duplicate_projection, missing_projection, removed_projection, ImageOffload, MessageProjection,
    ProjectionContext, MESSAGE_PROJECTION_EVENT_TYPES,
};
pub use replay::{replay, replay_projected, replay_with, Replay};

use crate::json::Value;
use crate::Result;
pub(crate) use js::{deep_equal, is_js_whitespace};
use js::{length, prop, truthy, TypeError};

const USER_MESSAGE: &str = "user/message";
const ASSISTANT_MESSAGE: &str = "assistant/message";
const TOOL_RESULT: &str = "tool/result";

/// Whether `ty` is one of the three message-producing types that may join the surface
/// (DSH's `isSurfaceEligibleType`).
pub fn is_surface_eligible_type(ty: &str) -> bool {
    SurfaceModel::V0.is_eligible(ty)
}

/// A surface-eligible event carrying a `surfaceOp` (any value, even `null`): DSH's
/// `isSurfaceEvent`.
pub fn is_surface_event(event: &Value) -> bool {
    is_surface_event_in(SurfaceModel::V0, event)
}

/// [`is_surface_event`] under `model`'s surface types.
pub fn is_surface_event_in(model: SurfaceModel, event: &Value) -> bool {
    let Some(obj) = event.as_object() else {
        return false;
    };
    obj.get("type")
        .and_then(Value::as_str)
        .is_some_and(|ty| model.is_eligible(ty))
        && obj.contains_key("surfaceOp")
}

/// An append-origin surface event (`"surfaceOp":"append"`): the human transcript's material,
/// kept in log order whether or not it was later shadowed (DSH's `isAppendSurfaceEvent`).
pub fn is_append_surface_event(event: &Value) -> bool {
    is_append_surface_event_in(SurfaceModel::V0, event)
}

/// [`is_append_surface_event`] under `model`'s surface types.
pub fn is_append_surface_event_in(model: SurfaceModel, event: &Value) -> bool {
    is_surface_event_in(model, event) && surface_op_is_append(event)
}

/// A surface event whose `surfaceOp` is anything but `"append"`: a model-only replacement copy
/// (DSH's `isReplacementSurfaceEvent`).
pub fn is_replacement_surface_event(event: &Value) -> bool {
    is_surface_event(event) && !surface_op_is_append(event)
}

fn surface_op_is_append(event: &Value) -> bool {
    event
        .as_object()
        .and_then(|o| o.get("surfaceOp"))
        .is_some_and(|op| op.as_str() == Some("append"))
}

/// The message one event projects to (DSH's `deriveEventMessage`): a `user/message`'s whole
/// `data`; an `assistant/message`'s `data.message` unless its `content` has length 0; a
/// `tool/result`'s `data.message`; nothing for any other type. `None` stands for JS `null` and
/// `undefined`; a present but falsy value (`false`, `0`, `""`) is returned as DSH returns it.
///
/// # Errors
/// [`crate::Error::Surface`] with a `TypeError:` rule where DSH's property reads throw (an
/// `assistant/message` without `data.message.content`, a `tool/result` with `null` data). The
/// seq is the event's `seq` (0 when it has none).
pub fn derive_event_message(event: &Value) -> Result<Option<&Value>> {
    derive(SurfaceModel::V0, Some(event)).map_err(|e| e.at(event_seq_or_zero(event)))
}

/// `deriveEventMessage` under `model`: V4 adds `system/message` and `developer/message`
/// (`data.message`, nothing when its content is empty, like an assistant's).
fn derive(model: SurfaceModel, event: Option<&Value>) -> Result<Option<&Value>, TypeError> {
    let ty = prop(event, "type")?;
    let ty = ty.and_then(Value::as_str).filter(|t| model.is_eligible(t));
    let message = match ty {
        Some(USER_MESSAGE) => prop(event, "data")?,
        Some(t) if model.drops_empty_content(t) => {
            let message = prop(prop(event, "data")?, "message")?;
            let content = prop(message, "content")?;
            let empty = length(content)?.is_some_and(|n| n.as_f64() == Some(0.0));
            if empty {
                None
            } else {
                message
            }
        }
        Some(_) => prop(prop(event, "data")?, "message")?,
        None => None,
    };
    Ok(message.filter(|m| !matches!(m, Value::Null)))
}

/// The model-visible messages of a surface (DSH's `deriveMessages()`): each node's
/// [`derive_event_message`], falsy results dropped, cloned in node order. `lookup(seq)` returns
/// the event at `seq`.
///
/// # Errors
/// [`crate::Error::Surface`] at the node's seq when its event cannot be read (a `TypeError` in
/// DSH) or `lookup` has no event for it.
pub fn derive_messages<V: Borrow<Value>>(
    nodes: &[u64],
    lookup: impl FnMut(u64) -> Option<V>,
) -> Result<Vec<Value>> {
    derive_messages_in(SurfaceModel::V0, nodes, lookup, &|_| None)
}

/// [`derive_messages`] under `model`'s message projection, with `projected(seq)` the message a
/// message projection made of node `seq`, which wins over the event's own (DSH 0.2's
/// `deriveEventMessage(event, projectedMessages)`).
pub fn derive_messages_in<V: Borrow<Value>>(
    model: SurfaceModel,
    nodes: &[u64],
    mut lookup: impl FnMut(u64) -> Option<V>,
    projected: &dyn Fn(u64) -> Option<Value>,
) -> Result<Vec<Value>> {
    let mut messages = Vec::with_capacity(nodes.len());
    for &seq in nodes {
        if let Some(m) = projected(seq) {
            messages.push(m);
            continue;
        }
        let event = lookup(seq);
        let message = derive(model, event.as_ref().map(Borrow::borrow)).map_err(|e| e.at(seq))?;
        messages.extend(message.filter(|m| truthy(m)).cloned());
    }
    Ok(messages)
}

/// The event's `seq` when it is a non-negative safe integer, for error context only.
fn event_seq_or_zero(event: &Value) -> u64 {
    event
        .as_object()
        .and_then(|o| o.get("seq"))
        .and_then(Value::as_safe_u64)
        .unwrap_or(0)
}
