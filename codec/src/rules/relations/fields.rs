//! DSH's field readers (`record`, `sessionFormatCount`, `text`, `earlier`) with its messages.

use crate::json::{Object, Value};

/// DSH's `record`: an object.
pub(super) fn record<'a>(v: Option<&'a Value>, subject: &str) -> Result<&'a Object, String> {
    v.and_then(Value::as_object)
        .ok_or_else(|| format!("{subject} requires an object"))
}

/// DSH's `sessionFormatCount`: a non-negative safe integer, not `-0`.
pub(super) fn count(v: Option<&Value>, subject: &str) -> Result<u64, String> {
    v.and_then(Value::as_count)
        .ok_or_else(|| format!("{subject} must be a non-negative safe integer"))
}

/// DSH's `text`: a nonempty string.
pub(super) fn nonempty(v: Option<&Value>, subject: &str) -> Result<String, String> {
    v.and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| format!("{subject} requires a nonempty string"))
}

/// DSH's `earlier`: a count naming an earlier seq.
pub(super) fn earlier(v: Option<&Value>, seq: u64, subject: &str) -> Result<u64, String> {
    let n = count(v, subject)?;
    if n >= seq {
        return Err(format!("{subject} must name an earlier event"));
    }
    Ok(n)
}
