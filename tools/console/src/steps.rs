//! The scrubber's step marks (`/api/sessions/{id}/steps?from=A&to=B`): where each step of the
//! range starts (its `step/start` event), with its turn and step numbers and the tools it
//! called (V0's `tool/call` events, and the tool-call parts of its assistant messages), so
//! the page can mark them and move from step to step.
//!
//! Steps are not a projection: they are found by reading the range's events, so a range is at
//! most [`MAX_STEP_SCAN`] events (the page asks for one turn at a time).

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use serde::Serialize;
use serde_json::value::RawValue;
use sessionlog_codec::format::event::event_type;
use sessionlog_codec::json::Value;

use crate::api::{end_of, params, read_session, seq_range, session_id, within, IdPath, Params};
use crate::reply::{json_body, raw, ApiError};
use crate::Console;

/// The most events one steps answer reads.
pub const MAX_STEP_SCAN: u64 = 100_000;

#[derive(Serialize)]
struct Steps {
    id: String,
    from: u64,
    /// The last seq read (the range's `to`, or the session's last seq when it ends sooner).
    to: u64,
    end: u64,
    steps: Vec<Step>,
}

/// One step: the seq of its `step/start`, its turn and step as the event gives them, and the
/// names of the tools it called, in call order, each once.
#[derive(Serialize)]
struct Step {
    seq: u64,
    turn: Box<RawValue>,
    step: Box<RawValue>,
    tools: Vec<String>,
}

/// `GET /api/sessions/{id}/steps?from=A&to=B` (`to` inclusive; default: as far as allowed).
pub(crate) async fn steps(
    State(console): State<Arc<Console>>,
    path: IdPath,
    query: Params,
) -> Result<Response, ApiError> {
    let id = session_id(path)?;
    let (from, to) = seq_range(&params(query)?, MAX_STEP_SCAN)?;
    let steps = read_session(&console, id, move |store, id| {
        let end = end_of(store, id)?;
        within(id, from, end)?;
        let to = to.min(end - 1);
        let mut steps: Vec<Step> = Vec::new();
        store.events(id, from, Some(to), &mut |seq, event| {
            let data = event.as_object().and_then(|o| o.get("data"));
            match event_type(event) {
                "step/start" => steps.push(Step {
                    seq,
                    turn: field(data, "turn"),
                    step: field(data, "step"),
                    tools: Vec::new(),
                }),
                "tool/call" => called(&mut steps, data.and_then(|d| text(d, "name"))),
                "assistant/message" => {
                    let message = data.and_then(|d| d.as_object()?.get("message")).or(data);
                    let parts = message
                        .and_then(|m| m.as_object()?.get("content")?.as_array())
                        .unwrap_or_default();
                    for part in parts {
                        if text(part, "type") == Some("tool-call") {
                            called(&mut steps, text(part, "name"));
                        }
                    }
                }
                _ => {}
            }
            Ok(())
        })?;
        Ok(Steps {
            id: id.to_owned(),
            from,
            to,
            end,
            steps,
        })
    })
    .await?;
    json_body(&steps)
}

/// Field `key` of an event's data, as raw JSON (`null` when absent).
fn field(data: Option<&Value>, key: &str) -> Box<RawValue> {
    raw(data
        .and_then(|d| d.as_object()?.get(key))
        .unwrap_or(&Value::Null))
}

fn text<'v>(value: &'v Value, key: &str) -> Option<&'v str> {
    value.as_object()?.get(key)?.as_str()
}

/// Record a call of tool `name` in the step it belongs to (the last one started).
fn called(steps: &mut [Step], name: Option<&str>) {
    let (Some(step), Some(name)) = (steps.last_mut(), name) else {
        return;
    };
    if !step.tools.iter().any(|t| t == name) {
        step.tools.push(name.to_owned());
    }
}
