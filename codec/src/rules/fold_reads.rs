//! The indexing reader's events: a V0 line built with only the members the import's folds read,
//! found by the skim ([`crate::json::skim`]) instead of a full parse.
//!
//! The folds an import runs over a committed V0 event are the body scanner (the envelope: type,
//! seq, `sourceEventSeqs`), DSH's closed vocabulary (type, seq, `ignorable`, and a
//! `request/header`'s `data.reason`), the listing's activity (a `user/message`'s source), the
//! projection units (each reads the data of the types it names in `touches`) and the surface
//! fold (the envelope; the whole event of a `tool/result`, which a later rewrite compares). So
//! for the types in [`PARTIAL`] every envelope member is built, and of `data` only the members
//! listed: the large payloads (a message's content, a delta's text, a call's arguments) are
//! checked by the skim and never built.
//!
//! Invariants kept here (the differential test `tests/import_reader.rs` imports through both
//! readers and compares every stored byte):
//! - the event is built only from an [`Skim::Indexed`] line, whose indexed keys are unique and
//!   plain, so the members are listed in JS property order and each member's value is the full
//!   parser's;
//! - anything else (a rejected or unusual line, another type, a non-object `data`, V1–V4,
//!   whose migration chain and restore read more) is `None`: the caller parses in full.

use crate::format::event::opened_type;
use crate::json::skim::{skim, Envelope, Kind, Level, Skim, Span};
use crate::json::{JsString, Object, Value};

/// The V0 event types built in part, and the `data` members the folds read of each. A
/// `chunk` member is itself built in part ([`chunk`]).
const PARTIAL: [(&str, &[&str]); 3] = [
    // tokenUsage: `data.chunk` when it is a usage chunk, settled per `data.turn`/`data.step`.
    ("assistant/chunk", &["turn", "step", "chunk"]),
    // tokenUsage: `data.usage`, settled per `data.turn`/`data.step`.
    ("assistant/message", &["turn", "step", "usage"]),
    // No fold reads a tool call's data.
    ("tool/call", &[]),
];

/// The V0 event of `line` (without its `\n`) with only the members the import's folds read, or
/// `None` when the line is not one this reader builds (parse it in full).
pub fn partial_v0_event(line: &[u8]) -> Option<Value> {
    // DSH writes the type first: a line that does not open with one of these types is parsed
    // in full without being skimmed first (a second pass over it). A line that does is still
    // checked in full by the skim, its type read from its span.
    let opened = opened_type(line)?;
    if !PARTIAL.iter().any(|(ty, _)| *ty == opened) {
        return None;
    }
    let Ok(Skim::Indexed(envelope)) = skim(line) else {
        return None;
    };
    let ty = envelope.get(Level::Top, "type")?;
    let ty = envelope.str(ty)?;
    let (_, kept) = PARTIAL.iter().find(|(t, _)| *t == ty)?;
    let mut top = Vec::with_capacity(6);
    for (key, span) in envelope.members(Level::Top) {
        let value = match (key, span.kind) {
            ("data", Kind::Object(_)) => Value::Object(data(&envelope, kept)?),
            ("data", _) => return None,
            _ => envelope.value(span).ok()?,
        };
        top.push((JsString::from(key), value));
    }
    Some(Value::Object(Object::from_distinct_names(top)))
}

/// `data` with only the members in `kept`.
fn data(envelope: &Envelope<'_>, kept: &[&str]) -> Option<Object> {
    let mut members = Vec::with_capacity(kept.len());
    for (key, span) in envelope.members(Level::Data) {
        if !kept.contains(&key) {
            continue;
        }
        let value = match (key, span.kind) {
            ("chunk", Kind::Object(_)) => chunk(envelope, span)?,
            _ => envelope.value(span).ok()?,
        };
        members.push((JsString::from(key), value));
    }
    Some(Object::from_distinct_names(members))
}

/// `data.chunk`: whole when it is a usage chunk (tokenUsage reads its `usage`), else its `type`
/// alone (all a fold reads of it).
fn chunk(envelope: &Envelope<'_>, span: &Span) -> Option<Value> {
    let ty = envelope
        .members(Level::Chunk)
        .find(|(key, _)| *key == "type")
        .map(|(_, span)| envelope.value(span))
        .transpose()
        .ok()?;
    if ty.as_ref().and_then(Value::as_str) == Some("usage") {
        return envelope.value(span).ok();
    }
    let members = ty
        .map(|ty| (JsString::from_static("type"), ty))
        .into_iter()
        .collect();
    Some(Value::Object(Object::from_distinct_names(members)))
}
