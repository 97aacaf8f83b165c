//! The session header line: recognising it, DSH's strict header check, and authoring it.
//!
//! A file is a session log iff its first line parses as a JSON object whose `type` is
//! `"session"`. Whether DSH's strict reader accepts that header is a separate question
//! ([`HeaderCheck`]): damaged headers are still stored byte-exactly, with their verdict.

use crate::json::{self, safe_integer, JsString, Object, Value};

/// The session format version this codec reads and writes (DSH `SESSION_FORMAT_VERSION`).
pub const FORMAT_VERSION: f64 = 0.0;

/// A first line recognised as a session header.
#[derive(Clone, Debug)]
pub struct Header {
    /// The parsed header object (JS key order).
    pub object: Object,
    /// The session id (`id`), which is the session's identity in the store.
    pub id: JsString,
    /// What DSH's strict reader says of this header.
    pub check: HeaderCheck,
}

/// DSH's verdict on a header line (`parseHeaderRecord` in the JSONL backend).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeaderCheck {
    /// Loadable.
    Valid,
    /// `version` is a number other than ours: refused before any shape check.
    Unsupported(String),
    /// Shape check failed; the text is DSH's, without the `corrupt session log: ` prefix.
    Corrupt(&'static str),
}

/// Why a first line is not a session header at all (the file is not a session log).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotAHeader {
    /// The file has no newline-terminated first line.
    Empty,
    /// The first line is not JSON.
    NotJson(String),
    /// The first line is JSON but not an object with `"type":"session"`.
    NotSessionType(String),
    /// A session header whose `id` is not a string cannot be keyed.
    NoStringId(String),
}

impl std::fmt::Display for NotAHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotAHeader::Empty => {
                f.write_str("empty or header-less session log (no newline-terminated first line)")
            }
            NotAHeader::NotJson(e) => write!(
                f,
                "first line is not JSON ({e}), so this is not a session log"
            ),
            NotAHeader::NotSessionType(what) => {
                write!(
                    f,
                    "first line is not a session header ({what}), so this is not a session log"
                )
            }
            NotAHeader::NoStringId(what) => {
                write!(
                    f,
                    "session header has no string id ({what}); sessions are stored by id"
                )
            }
        }
    }
}

/// UTF-8 byte order mark. `JSON.parse` refuses it, yet a BOM-prefixed header is plainly a
/// session log: it is recognised (and stored) with DSH's "not valid JSON" verdict.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Recognise and check the header record `line` (without its `\n`).
pub fn parse_header(line: &[u8]) -> Result<Header, NotAHeader> {
    let text = String::from_utf8_lossy(line);
    let value = match json::parse(&text) {
        Ok(v) => v,
        Err(e) => match line.strip_prefix(BOM) {
            Some(rest) if !rest.starts_with(BOM) => {
                let mut header = parse_header(rest)?;
                header.check = HeaderCheck::Corrupt("header line is not valid JSON");
                return Ok(header);
            }
            _ => return Err(NotAHeader::NotJson(e.to_string())),
        },
    };
    let Value::Object(object) = value else {
        return Err(NotAHeader::NotSessionType(format!(
            "it is a JSON {}",
            kind_of(&value)
        )));
    };
    match object.get("type") {
        Some(t) if t.as_str() == Some("session") => {}
        Some(t) => {
            return Err(NotAHeader::NotSessionType(format!(
                "its type is {}",
                json::stringify(t)
            )))
        }
        None => return Err(NotAHeader::NotSessionType("it has no type".into())),
    }
    let id = match object.get("id") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(NotAHeader::NoStringId(format!(
                "id is {}",
                json::stringify(other)
            )))
        }
        None => return Err(NotAHeader::NoStringId("id is missing".into())),
    };
    let check = check_header(&object, &id);
    Ok(Header { object, id, check })
}

/// DSH's order: foreign version refusal, then `isHeaderLine`, then retired fields.
fn check_header(h: &Object, id: &JsString) -> HeaderCheck {
    if let Some(Value::Number(v)) = h.get("version") {
        if *v != FORMAT_VERSION {
            return HeaderCheck::Unsupported(version_refusal(id, *v));
        }
    }
    if !is_header_line(h) {
        return HeaderCheck::Corrupt("first line is not a session header");
    }
    if h.contains_key("sandboxMode") || h.contains_key("approvalPolicy") {
        return HeaderCheck::Corrupt("session header uses retired policy baseline fields");
    }
    HeaderCheck::Valid
}

/// DSH `sessionFormatVersionRefusal`.
fn version_refusal(id: &JsString, version: f64) -> String {
    let mut v = String::new();
    json::number_to_string(version, &mut v);
    if version > FORMAT_VERSION {
        format!("session \"{id}\" uses log format v{v}, but this harness reads only v0: the log was written by a newer harness — upgrade the harness to open it")
    } else {
        format!("session \"{id}\" uses log format v{v}, older than the supported v0, and this build ships no upgrade path for it")
    }
}

/// A non-negative safe integer that is not `-0` (the createdAt / delegationDepth rule).
fn is_count(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Number(n)) => {
            safe_integer(*n).is_some_and(|i| i >= 0) && !(*n == 0.0 && n.is_sign_negative())
        }
        _ => false,
    }
}

/// DSH `isHeaderLine`.
fn is_header_line(h: &Object) -> bool {
    matches!(h.get("version"), Some(Value::Number(_)))
        && matches!(h.get("id"), Some(Value::String(_)))
        && is_count(h.get("createdAt"))
        && is_count(h.get("delegationDepth"))
        && match h.get("origin") {
            None => true,
            Some(o) => o.as_str() == Some("subagent"),
        }
        && matches!(h.get("agentPreset"), None | Some(Value::String(_)))
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// What a new session's header says (DSH `SessionHeader`).
#[derive(Clone, Debug, Default)]
pub struct HeaderFields {
    /// Session id.
    pub id: String,
    /// Creation time, epoch ms.
    pub created_at: i64,
    /// Project directory.
    pub cwd: Option<String>,
    /// Fork parent.
    pub parent_session: Option<String>,
    /// Events inherited by a fork.
    pub seed_length: Option<i64>,
    /// `Some("subagent")` for subagent sessions.
    pub origin: Option<String>,
    /// Subagent depth (always written).
    pub delegation_depth: i64,
    /// Composition id.
    pub agent_preset: Option<String>,
}

/// Author the header line exactly as DSH's `toHeaderLine` + `JSON.stringify` (no `\n`).
pub fn author_header(f: &HeaderFields) -> String {
    let mut o = Object::new()
        .with("type", "session")
        .with("version", FORMAT_VERSION)
        .with("id", f.id.as_str())
        .with("createdAt", f.created_at);
    if let Some(cwd) = &f.cwd {
        o = o.with("cwd", cwd.as_str());
    }
    if let Some(p) = &f.parent_session {
        o = o.with("parentSession", p.as_str());
    }
    if let Some(s) = f.seed_length {
        o = o.with("seedLength", s);
    }
    if let Some(origin) = &f.origin {
        o = o.with("origin", origin.as_str());
    }
    o = o.with("delegationDepth", f.delegation_depth);
    if let Some(a) = &f.agent_preset {
        o = o.with("agentPreset", a.as_str());
    }
    json::stringify(&Value::Object(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(line: &str) -> HeaderCheck {
        parse_header(line.as_bytes())
            .map(|h| h.check)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn valid_header() {
        assert_eq!(
            check(
                r#"{"type":"session","version":0,"id":"a","createdAt":1,"cwd":"/x","delegationDepth":0}"#
            ),
            HeaderCheck::Valid
        );
    }

    #[test]
    fn header_shape_rules() {
        let bad = [
            r#"{"type":"session","version":"0","id":"a","createdAt":1,"delegationDepth":0}"#,
            r#"{"type":"session","version":0,"id":"a","createdAt":1}"#,
            r#"{"type":"session","version":0,"id":"a","createdAt":1.5,"delegationDepth":0}"#,
            r#"{"type":"session","version":0,"id":"a","createdAt":-1,"delegationDepth":0}"#,
            r#"{"type":"session","version":0,"id":"a","createdAt":9007199254740992,"delegationDepth":0}"#,
            r#"{"type":"session","version":0,"id":"a","createdAt":-0,"delegationDepth":0}"#,
            r#"{"type":"session","version":0,"id":"a","createdAt":0,"delegationDepth":-0}"#,
            r#"{"type":"session","version":0,"id":"a","createdAt":0,"delegationDepth":0,"origin":"x"}"#,
            r#"{"type":"session","version":0,"id":"a","createdAt":0,"delegationDepth":0,"agentPreset":7}"#,
        ];
        for line in bad {
            assert_eq!(
                check(line),
                HeaderCheck::Corrupt("first line is not a session header"),
                "{line}"
            );
        }
        assert_eq!(
            check(
                r#"{"type":"session","version":0,"id":"a","createdAt":0,"delegationDepth":0,"sandboxMode":"x"}"#
            ),
            HeaderCheck::Corrupt("session header uses retired policy baseline fields")
        );
    }

    #[test]
    fn foreign_versions_are_unsupported_before_shape() {
        let HeaderCheck::Unsupported(m) = check(r#"{"type":"session","version":1,"id":"a"}"#)
        else {
            panic!("version 1 must be unsupported");
        };
        assert!(m.contains("upgrade the harness"), "{m}");
        let HeaderCheck::Unsupported(m) = check(r#"{"type":"session","version":-1,"id":"a"}"#)
        else {
            panic!("version -1 must be unsupported");
        };
        assert!(m.contains("no upgrade path"), "{m}");
    }

    #[test]
    fn non_headers_are_not_sessions() {
        assert!(matches!(
            parse_header(b"{\"jsonrpc\":\"2.0\"}"),
            Err(NotAHeader::NotSessionType(_))
        ));
        assert!(matches!(
            parse_header(b"not json"),
            Err(NotAHeader::NotJson(_))
        ));
        assert!(matches!(
            parse_header(b"[1]"),
            Err(NotAHeader::NotSessionType(_))
        ));
        assert!(matches!(
            parse_header(b"{\"type\":\"session\",\"id\":5}"),
            Err(NotAHeader::NoStringId(_))
        ));
    }

    #[test]
    fn authored_header_key_order() {
        let f = HeaderFields {
            id: "s".into(),
            created_at: 5,
            cwd: Some("/w".into()),
            parent_session: Some("p".into()),
            seed_length: Some(3),
            origin: Some("subagent".into()),
            delegation_depth: 1,
            agent_preset: None,
        };
        assert_eq!(
            author_header(&f),
            r#"{"type":"session","version":0,"id":"s","createdAt":5,"cwd":"/w","parentSession":"p","seedLength":3,"origin":"subagent","delegationDepth":1}"#
        );
    }
}
