//! Ownership facts: delivery markers and catalog children, decided once the header and the cut are
//! known.

use super::{count, nonempty};
use crate::json::Value;

/// `validateDeliveryAccepted(event, current)`: the session a marker of generation `current`
/// names (`None` for another generation's).
pub(crate) fn delivery(
    data: Option<&Value>,
    seq: u64,
    current: u64,
) -> Result<Option<String>, String> {
    let data = data
        .and_then(Value::as_object)
        .ok_or("delivery-accepted data must be an object")?;
    let version = match data.get("sessionFormatVersion") {
        None => 0,
        v => count(v, "delivery sessionFormatVersion")?,
    };
    if version != current {
        return Ok(None);
    }
    if count(data.get("throughSeq"), "delivery throughSeq")? >= seq {
        return Err("delivery throughSeq must precede its marker".into());
    }
    nonempty(data.get("sessionId"), "")
        .map(Some)
        .map_err(|_| "delivery requires a nonempty Session id".into())
}

/// `catalogFact(value, subject)`: the child a supported catalog fact names.
pub(crate) fn catalog_child(data: Option<&Value>, subject: &str) -> Result<String, String> {
    let unsupported = || format!("{subject} requires a supported versioned catalog fact");
    let fact = data.and_then(Value::as_object).ok_or_else(unsupported)?;
    let version = fact.get("version").and_then(Value::as_f64);
    let mode = fact.get("mode").and_then(Value::as_str);
    let label = fact.get("label");
    let supported = matches!(version, Some(v) if v == 0.0 || v == 1.0 || v == 2.0)
        && matches!(fact.get("childId"), Some(Value::String(_)))
        && matches!(
            mode,
            Some("continuable" | "one-shot" | "external" | "unknown")
        )
        && ((version == Some(2.0)) == (mode == Some("external")))
        && !(version == Some(0.0) && mode == Some("unknown"))
        && (mode != Some("continuable") || matches!(label, Some(Value::String(_))))
        && matches!(label, None | Some(Value::String(_)));
    if !supported {
        return Err(unsupported());
    }
    count(fact.get("childCreatedAt"), "catalog child creation time")?;
    Ok(fact
        .get("childId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned())
}
