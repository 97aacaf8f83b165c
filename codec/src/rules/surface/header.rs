//! The request-header fold: DSH's `canonicalHeader` of the latest `request/header` event
//! (`foldRequestHeader`, and the live `Session.requestHeader()`).
//!
//! Invariants kept: the folded header has keys `config, adapterDefaults?, system?, tools?` in
//! that order, holding the event's own values; any other header key is dropped; there are no
//! deltas, the latest `request/header` wins outright.

use super::event_seq_or_zero;
use super::js::{greater_than_zero, length, prop, TypeError};
use crate::json::{Object, Value};
use crate::Result;

const REQUEST_HEADER: &str = "request/header";

/// DSH's `canonicalHeader(header)`: `config` as is; `adapterDefaults` only when its
/// `reasoningEffort` or `maxTokens` is `true`; `system` and `tools` only when their `length` is
/// greater than 0. `header` is `None` for `undefined`.
///
/// # Errors
/// [`crate::Error::Surface`] (at seq 0; the fold reports the event's seq) with the `TypeError`
/// DSH throws for a `null`/`undefined` header, `system` or `tools`.
pub fn canonical_header(header: Option<&Value>) -> Result<Value> {
    canonical(header).map_err(|e| e.at(0))
}

fn canonical(header: Option<&Value>) -> Result<Value, TypeError> {
    let adapter_defaults = prop(header, "adapterDefaults")?;
    let mut out = Object::new();
    if let Some(config) = prop(header, "config")? {
        out.insert("config".into(), config.clone());
    }
    // `adapterDefaults?.x === true`: optional chaining reads nothing from null/undefined.
    let flag = |key| {
        adapter_defaults
            .filter(|a| !matches!(a, Value::Null))
            .and_then(|a| prop(Some(a), key).ok().flatten())
            .is_some_and(|v| *v == Value::Bool(true))
    };
    if let Some(defaults) =
        adapter_defaults.filter(|_| flag("reasoningEffort") || flag("maxTokens"))
    {
        out.insert("adapterDefaults".into(), defaults.clone());
    }
    for key in ["system", "tools"] {
        if let Some(value) = prop(header, key)? {
            if greater_than_zero(length(Some(value))?.as_deref()) {
                out.insert(key.into(), value.clone());
            }
        }
    }
    Ok(Value::Object(out))
}

/// The incremental request-header fold: the canonical header of the latest `request/header`
/// seen, or `None` before the first one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestHeaderFold {
    header: Option<Value>,
}

impl RequestHeaderFold {
    /// A fold that has seen no header.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fold resumed from a previously folded header (DSH's `from` argument).
    pub fn from_header(header: Option<Value>) -> Self {
        RequestHeaderFold { header }
    }

    /// The folded canonical header, `None` before the first `request/header`.
    pub fn header(&self) -> Option<&Value> {
        self.header.as_ref()
    }

    /// Fold one event; returns whether it was a `request/header` (and so replaced the state).
    ///
    /// # Errors
    /// [`crate::Error::Surface`] at the event's seq with the `TypeError` DSH throws when a
    /// `request/header`'s `data` or `data.header` is `null`/missing, or its `system`/`tools` is
    /// `null`. The state is unchanged on error.
    pub fn apply(&mut self, event: &Value) -> Result<bool> {
        let folded = (|| {
            let ty = prop(Some(event), "type")?;
            if ty.and_then(Value::as_str) != Some(REQUEST_HEADER) {
                return Ok(None);
            }
            canonical(prop(prop(Some(event), "data")?, "header")?).map(Some)
        })()
        .map_err(|e: TypeError| e.at(event_seq_or_zero(event)))?;
        let changed = folded.is_some();
        if folded.is_some() {
            self.header = folded;
        }
        Ok(changed)
    }

    /// The folded header as DSH's expected-output file writes it (`null` when none).
    pub fn to_json(&self) -> String {
        crate::json::stringify(self.header.as_ref().unwrap_or(&Value::Null))
    }
}

/// DSH's `foldRequestHeader(events)`: the canonical header of the last `request/header`.
///
/// # Errors
/// As [`RequestHeaderFold::apply`].
pub fn fold_request_header(events: &[Value]) -> Result<Option<Value>> {
    let mut fold = RequestHeaderFold::new();
    for event in events {
        fold.apply(event)?;
    }
    Ok(fold.header)
}
