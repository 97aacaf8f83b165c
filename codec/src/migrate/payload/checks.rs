//! DSH's helpers: records, exact members, primitives, and the payload shapes several events share (coordinates, seqs, failures, usage).

use super::*;

/// `releasedV0Record`: a JSON object.
pub(super) fn record<'a>(value: Option<&'a Value>, label: &str) -> Check<&'a Object> {
    match value {
        Some(Value::Object(o)) => Ok(o),
        _ => Err(format!("{label} must be a JSON object")),
    }
}

/// `assertReleasedV0Keys`: no member outside `required` + `optional` (in enumeration order),
/// then every required member present.
pub(in crate::migrate) fn keys(
    o: &Object,
    required: &[&str],
    optional: &[&str],
    label: &str,
) -> Check {
    let allowed = |k: &JsString| required.iter().chain(optional).any(|m| k.eq_str(m));
    if let Some((k, _)) = o.iter().find(|(k, _)| !allowed(k)) {
        return Err(format!(
            "{label} has unexpected member {}",
            stringify(&Value::String(k.clone()))
        ));
    }
    if let Some(k) = required.iter().find(|k| !o.contains_key(k)) {
        return Err(format!(
            "{label} lacks required member {}",
            stringify(&Value::from(*k))
        ));
    }
    Ok(())
}

/// `exactRecord`: a JSON object with exactly the given members.
pub(super) fn exact<'a>(
    value: Option<&'a Value>,
    label: &str,
    required: &[&str],
    optional: &[&str],
) -> Check<&'a Object> {
    let o = record(value, label)?;
    keys(o, required, optional, label)?;
    Ok(o)
}

pub(super) fn string<'a>(value: Option<&'a Value>, label: &str) -> Check<&'a JsString> {
    match value {
        Some(Value::String(s)) => Ok(s),
        _ => Err(format!("{label} must be a string")),
    }
}

pub(super) fn non_empty<'a>(value: Option<&'a Value>, label: &str) -> Check<&'a JsString> {
    match value {
        Some(Value::String(s)) if !s.as_wtf8().is_empty() => Ok(s),
        _ => Err(format!("{label} must be a non-empty string")),
    }
}

pub(super) fn boolean(value: Option<&Value>, label: &str) -> Check<bool> {
    match value {
        Some(Value::Bool(b)) => Ok(*b),
        _ => Err(format!("{label} must be a boolean")),
    }
}

/// `sessionFormatSafeInteger`: `Number.isSafeInteger`, `-0` excluded.
pub(super) fn safe_integer(value: Option<&Value>, label: &str) -> Check<i64> {
    match value {
        Some(Value::Number(x)) if !is_negative_zero(*x) => crate::json::safe_integer(*x),
        _ => None,
    }
    .ok_or_else(|| format!("{label} must be a safe integer"))
}

/// `sessionFormatCount`: a non-negative safe integer, `-0` excluded.
pub(super) fn count(value: Option<&Value>, label: &str) -> Check<u64> {
    value
        .and_then(Value::as_count)
        .ok_or_else(|| format!("{label} must be a non-negative safe integer"))
}

pub(super) fn positive(value: Option<&Value>, label: &str) -> Check<u64> {
    match count(value, label)? {
        0 => Err(format!("{label} must be positive")),
        n => Ok(n),
    }
}

pub(super) fn finite(value: Option<&Value>, label: &str) -> Check<f64> {
    match value {
        Some(Value::Number(x)) if x.is_finite() && !is_negative_zero(*x) => Ok(*x),
        _ => Err(format!("{label} must be a finite number")),
    }
}

pub(super) fn is_negative_zero(x: f64) -> bool {
    x == 0.0 && x.is_sign_negative()
}

/// `literalValue` over string literals.
pub(super) fn one_of(value: Option<&Value>, allowed: &[&str], label: &str) -> Check {
    if allowed.iter().any(|a| is_str(value, a)) {
        Ok(())
    } else {
        Err(format!("{label} must be one of {}", allowed.join(", ")))
    }
}

/// `literalValue(value, [true], label)`.
pub(super) fn exactly_true(value: Option<&Value>, label: &str) -> Check {
    match value {
        Some(Value::Bool(true)) => Ok(()),
        _ => Err(format!("{label} must be one of true")),
    }
}

/// `literalValue(value, [n], label)` for a small integer literal (`===`, so `-0` equals 0).
pub(super) fn exactly_number(value: Option<&Value>, n: u8, label: &str) -> Check {
    match value {
        Some(Value::Number(x)) if *x == f64::from(n) => Ok(()),
        _ => Err(format!("{label} must be one of {n}")),
    }
}

/// `value === s`.
pub(super) fn is_str(value: Option<&Value>, s: &str) -> bool {
    matches!(value, Some(Value::String(v)) if v.eq_str(s))
}

/// `a === b` between two JSON-parsed members: objects and arrays are distinct references.
pub(super) fn strict_eq(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (None, None) | (Some(Value::Null), Some(Value::Null)) => true,
        (Some(Value::Bool(x)), Some(Value::Bool(y))) => x == y,
        (Some(Value::Number(x)), Some(Value::Number(y))) => x == y,
        (Some(Value::String(x)), Some(Value::String(y))) => x == y,
        _ => false,
    }
}

/// `arrayValue`: an array whose members each pass `each`, labelled `<label>[<index>]`.
pub(super) fn array<'a>(
    value: Option<&'a Value>,
    label: &str,
    mut each: impl FnMut(&'a Value, &str) -> Check,
) -> Check<&'a [Value]> {
    let Some(Value::Array(members)) = value else {
        return Err(format!("{label} must be an array"));
    };
    for (index, member) in members.iter().enumerate() {
        each(member, &format!("{label}[{index}]"))?;
    }
    Ok(members)
}

pub(super) fn coordinates(data: &Object, label: &str) -> Check {
    count(data.get("turn"), &format!("{label} turn"))?;
    count(data.get("step"), &format!("{label} step"))?;
    Ok(())
}

/// `earlierSeq`: a seq before the event's own.
pub(super) fn earlier_seq(value: Option<&Value>, event_seq: u64, label: &str) -> Check<u64> {
    let seq = count(value, label)?;
    if seq >= event_seq {
        return Err(format!("{label} must identify an earlier event"));
    }
    Ok(seq)
}

/// `seqArray`: distinct earlier seqs, non-empty when asked.
pub(super) fn seq_array<'a>(
    value: Option<&'a Value>,
    event_seq: u64,
    label: &str,
    require_non_empty: bool,
) -> Check<&'a [Value]> {
    let mut seen = HashSet::new();
    let values = array(value, label, |member, member_label| {
        let seq = earlier_seq(Some(member), event_seq, member_label)?;
        if !seen.insert(seq) {
            return Err(format!("{label} repeats seq {seq}"));
        }
        Ok(())
    })?;
    if require_non_empty && values.is_empty() {
        return Err(format!("{label} must be non-empty"));
    }
    Ok(values)
}

pub(super) fn llm_failure(value: Option<&Value>, label: &str) -> Check {
    let failure = exact(
        value,
        label,
        &["message", "code"],
        &["status", "providerRetryAfterMs", "requestId"],
    )?;
    non_empty(failure.get("message"), &format!("{label} message"))?;
    non_empty(failure.get("code"), &format!("{label} code"))?;
    if let Some(v) = failure.get("status") {
        let status = safe_integer(Some(v), &format!("{label} status"))?;
        if !(100..=599).contains(&status) {
            return Err(format!("{label} status must be 100 through 599"));
        }
    }
    if let Some(v) = failure.get("providerRetryAfterMs") {
        if finite(Some(v), &format!("{label} providerRetryAfterMs"))? <= 0.0 {
            return Err(format!("{label} providerRetryAfterMs must be positive"));
        }
    }
    if let Some(v) = failure.get("requestId") {
        non_empty(Some(v), &format!("{label} requestId"))?;
    }
    Ok(())
}

pub(super) fn token_usage(value: Option<&Value>, label: &str) -> Check {
    let usage = exact(
        value,
        label,
        &["inputTokens", "outputTokens"],
        &[
            "totalTokens",
            "cacheReadTokens",
            "cacheWriteTokens",
            "reasoningTokens",
        ],
    )?;
    for (key, v) in usage.iter() {
        count(Some(v), &format!("{label} {key}"))?;
    }
    Ok(())
}

/// `contentBlocksValue`. (DSH threads the payload generation through content, but no content
/// rule depends on it.)
pub(super) fn content_blocks(value: Option<&Value>, label: &str) -> Check {
    array(value, label, content_block).map(drop)
}

pub(super) fn content_block(value: &Value, label: &str) -> Check {
    let block = record(Some(value), label)?;
    let ty = block.get("type");
    let member = |m: &str| format!("{label} {m}");
    if is_str(ty, "text") || is_str(ty, "reasoning") {
        keys(block, &["type", "text"], &[], label)?;
        string(block.get("text"), &member("text"))?;
    } else if is_str(ty, "image") {
        keys(block, &["type", "attachment"], &[], label)?;
        image_attachment(block.get("attachment"), &member("attachment"))?;
    } else if is_str(ty, "tool-call") {
        keys(block, &["type", "id", "name", "arguments"], &[], label)?;
        non_empty(block.get("id"), &member("id"))?;
        non_empty(block.get("name"), &member("name"))?;
        string(block.get("arguments"), &member("arguments"))?;
    } else if is_str(ty, "tool-result") {
        keys(
            block,
            &["type", "toolCallId", "content"],
            &["isError"],
            label,
        )?;
        non_empty(block.get("toolCallId"), &member("toolCallId"))?;
        content_blocks(block.get("content"), &member("content"))?;
        if let Some(v) = block.get("isError") {
            boolean(Some(v), &member("isError"))?;
        }
    } else {
        non_empty(ty, &member("type"))?;
    }
    Ok(())
}

pub(super) fn image_attachment(value: Option<&Value>, label: &str) -> Check {
    let attachment = exact(
        value,
        label,
        &["attachmentId", "mediaType", "bytes", "width", "height"],
        &["name", "originalDimensions"],
    )?;
    let member = |m: &str| format!("{label} {m}");
    non_empty(attachment.get("attachmentId"), &member("attachmentId"))?;
    one_of(
        attachment.get("mediaType"),
        &["image/png", "image/jpeg", "image/webp", "image/gif"],
        &member("mediaType"),
    )?;
    count(attachment.get("bytes"), &member("bytes"))?;
    positive(attachment.get("width"), &member("width"))?;
    positive(attachment.get("height"), &member("height"))?;
    if let Some(v) = attachment.get("name") {
        string(Some(v), &member("name"))?;
    }
    if let Some(v) = attachment.get("originalDimensions") {
        let dimensions = exact(
            Some(v),
            &member("originalDimensions"),
            &["width", "height"],
            &[],
        )?;
        positive(dimensions.get("width"), &member("original width"))?;
        positive(dimensions.get("height"), &member("original height"))?;
    }
    Ok(())
}
