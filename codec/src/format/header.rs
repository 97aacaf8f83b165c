//! The session header line: recognising it, DSH's strict header check, and authoring it.
//!
//! A file is a session log iff its first line parses as a JSON object whose `type` is
//! `"session"`. Whether DSH's strict reader accepts that header is a separate question
//! ([`HeaderCheck`]): damaged headers are still stored byte-exactly, with their verdict.

use crate::json::{self, safe_integer, JsString, Object, Value};

use crate::format::generation::NEWEST_VERSION;

/// The session format version this codec authors (V0: DSH 0.1's `SESSION_FORMAT_VERSION`).
pub const FORMAT_VERSION: f64 = 0.0;

/// A first line recognised as a session header.
#[derive(Clone, Debug)]
pub struct Header {
    /// The parsed header object (JS key order).
    pub object: Object,
    /// The session id (`id`), which is the session's identity in the store.
    pub id: JsString,
    /// The format version, when it is one this codec reads (0 to [`NEWEST_VERSION`]).
    pub version: Option<u32>,
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
    Corrupt(String),
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
                header.check = HeaderCheck::Corrupt("header line is not valid JSON".into());
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
    let version = match object.get("version") {
        Some(Value::Number(v)) => known_version(*v),
        _ => None,
    };
    let check = match version {
        Some(v @ 2..) => check_v2_header(&object, v),
        _ => check_header(&object, &id),
    };
    Ok(Header {
        object,
        id,
        version,
        check,
    })
}

/// `v` as a version this codec reads.
fn known_version(v: f64) -> Option<u32> {
    let v = safe_integer(v)?;
    u32::try_from(v).ok().filter(|v| *v <= NEWEST_VERSION)
}

/// V0 and V1 (one physical layout), in DSH's order: foreign version refusal, then
/// `isHeaderLine`, then retired fields.
fn check_header(h: &Object, id: &JsString) -> HeaderCheck {
    if let Some(Value::Number(v)) = h.get("version") {
        if known_version(*v).is_none() {
            return HeaderCheck::Unsupported(version_refusal(id, *v));
        }
    }
    if !is_header_line(h) {
        return HeaderCheck::Corrupt("first line is not a session header".into());
    }
    if h.contains_key("sandboxMode") || h.contains_key("approvalPolicy") {
        return HeaderCheck::Corrupt("session header uses retired policy baseline fields".into());
    }
    HeaderCheck::Valid
}

/// Keys a V2–V4 header must hold, in DSH's check order.
const V2_REQUIRED: [&str; 6] = [
    "type",
    "version",
    "id",
    "createdAt",
    "isSeeded",
    "delegationDepth",
];
/// Keys a V2–V4 header may hold besides (an exact key set: anything else is refused).
const V2_OPTIONAL: [&str; 4] = ["cwd", "parentSession", "origin", "agentPreset"];

/// The V2–V4 header rules. V4 is read natively (DSH's live scanner: retired fields, then one
/// shape verdict); V2 and V3 through the released-v2 codec, whose texts name the failing field.
fn check_v2_header(h: &Object, version: u32) -> HeaderCheck {
    if version == 4 {
        if h.contains_key("sandboxMode") || h.contains_key("approvalPolicy") {
            return HeaderCheck::Corrupt(
                "session header uses retired policy baseline fields".into(),
            );
        }
        return match released_v2_header(h) {
            Ok(()) => HeaderCheck::Valid,
            Err(_) => HeaderCheck::Corrupt("first line is not a session header".into()),
        };
    }
    match released_v2_header(h) {
        Ok(()) => HeaderCheck::Valid,
        Err(m) => HeaderCheck::Corrupt(m),
    }
}

/// `decodePhysicalHeader` of DSH's released-v2 codec (V3 and V4 headers pass through it too).
fn released_v2_header(h: &Object) -> Result<(), String> {
    const PHYSICAL: &str = "released v2 physical header";
    if let Some(missing) = V2_REQUIRED.iter().find(|k| !h.contains_key(k)) {
        return Err(format!("{PHYSICAL} lacks {missing}"));
    }
    let known = |k: &JsString| V2_REQUIRED.iter().chain(&V2_OPTIONAL).any(|a| k.eq_str(a));
    if let Some((key, _)) = h.iter().find(|(k, _)| !known(k)) {
        return Err(format!("{PHYSICAL} has unexpected field {key}"));
    }
    if !matches!(h.get("id"), Some(Value::String(_))) {
        return Err("released v2 header id must be a string".into());
    }
    for key in ["createdAt", "delegationDepth"] {
        if h.get(key).and_then(Value::as_count).is_none() {
            return Err(format!(
                "released v2 header {key} must be a non-negative safe integer"
            ));
        }
    }
    if !matches!(h.get("isSeeded"), Some(Value::Bool(_))) {
        return Err("released v2 header isSeeded must be boolean".into());
    }
    for key in ["cwd", "parentSession", "agentPreset"] {
        if !matches!(h.get(key), None | Some(Value::String(_))) {
            return Err(format!("released v2 header {key} must be a string"));
        }
    }
    if h.get("origin")
        .is_some_and(|o| o.as_str() != Some("subagent"))
    {
        return Err("released v2 header origin must be \"subagent\"".into());
    }
    if h.get("cwd")
        .and_then(Value::as_str)
        .is_some_and(|cwd| !cwd.starts_with('/'))
    {
        return Err("format v2 header cwd must be absolute".into());
    }
    Ok(())
}

/// DSH `sessionFormatVersionRefusal`.
fn version_refusal(id: &JsString, version: f64) -> String {
    let mut v = String::new();
    json::number_to_string(version, &mut v);
    if version > f64::from(NEWEST_VERSION) {
        format!("session \"{id}\" uses log format v{v}, but this harness reads only v{NEWEST_VERSION}: the log was written by a newer harness — upgrade the harness to open it")
    } else {
        format!("session \"{id}\" uses log format v{v}, older than the supported v0, and this build ships no upgrade path for it")
    }
}

/// DSH `isHeaderLine`.
fn is_header_line(h: &Object) -> bool {
    matches!(h.get("version"), Some(Value::Number(_)))
        && matches!(h.get("id"), Some(Value::String(_)))
        && h.get("createdAt").and_then(Value::as_count).is_some()
        && h.get("delegationDepth").and_then(Value::as_count).is_some()
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
    /// The format version to write: 0 (DSH 0.1's layout, `seedLength`) or 2+ (`isSeeded`,
    /// true when `seed_length` is set).
    pub version: u32,
}

/// Author the header line exactly as DSH's `toHeaderLine` / `encodeHeader` + `JSON.stringify`
/// (no `\n`), in the layout of `f.version`.
pub fn author_header(f: &HeaderFields) -> String {
    let version = if f.version == 0 {
        FORMAT_VERSION
    } else {
        f64::from(f.version)
    };
    let mut o = Object::new()
        .with("type", "session")
        .with("version", version)
        .with("id", f.id.as_str())
        .with("createdAt", f.created_at);
    if let Some(cwd) = &f.cwd {
        o = o.with("cwd", cwd.as_str());
    }
    if let Some(p) = &f.parent_session {
        o = o.with("parentSession", p.as_str());
    }
    if f.version >= 2 {
        o = o.with("isSeeded", f.seed_length.is_some());
    } else if let Some(s) = f.seed_length {
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
                HeaderCheck::Corrupt("first line is not a session header".into()),
                "{line}"
            );
        }
        assert_eq!(
            check(
                r#"{"type":"session","version":0,"id":"a","createdAt":0,"delegationDepth":0,"sandboxMode":"x"}"#
            ),
            HeaderCheck::Corrupt("session header uses retired policy baseline fields".into())
        );
    }

    #[test]
    fn foreign_versions_are_unsupported_before_shape() {
        let HeaderCheck::Unsupported(m) = check(r#"{"type":"session","version":5,"id":"a"}"#)
        else {
            panic!("version 5 must be unsupported");
        };
        assert!(m.contains("upgrade the harness"), "{m}");
        let HeaderCheck::Unsupported(m) = check(r#"{"type":"session","version":-1,"id":"a"}"#)
        else {
            panic!("version -1 must be unsupported");
        };
        assert!(m.contains("no upgrade path"), "{m}");
    }

    #[test]
    fn later_generation_headers() {
        let base =
            r#""type":"session","id":"a","createdAt":1,"isSeeded":false,"delegationDepth":0"#;
        let v =
            |version: u32, extra: &str| check(&format!(r#"{{"version":{version},{base}{extra}}}"#));
        for version in 2..=4 {
            assert_eq!(v(version, ""), HeaderCheck::Valid, "v{version}");
            assert_eq!(
                v(version, r#","cwd":"/w","origin":"subagent""#),
                HeaderCheck::Valid
            );
        }
        let corrupt = |m: &str| HeaderCheck::Corrupt(m.into());
        assert_eq!(
            v(2, r#","seedLength":3"#),
            corrupt("released v2 physical header has unexpected field seedLength")
        );
        assert_eq!(
            check(r#"{"type":"session","version":3,"id":"a","createdAt":1,"delegationDepth":0}"#),
            corrupt("released v2 physical header lacks isSeeded")
        );
        assert_eq!(
            v(2, r#","cwd":"w""#),
            corrupt("format v2 header cwd must be absolute")
        );
        assert_eq!(
            v(4, r#","owner":"u""#),
            corrupt("first line is not a session header")
        );
        assert_eq!(
            v(4, r#","sandboxMode":"x""#),
            corrupt("session header uses retired policy baseline fields")
        );
        let HeaderCheck::Unsupported(m) = v(5, "") else {
            panic!("version 5 must be unsupported");
        };
        assert!(m.contains("reads only v4"), "{m}");
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
        let fields = |version| HeaderFields {
            id: "s".into(),
            created_at: 5,
            cwd: Some("/w".into()),
            parent_session: Some("p".into()),
            seed_length: Some(3),
            origin: Some("subagent".into()),
            delegation_depth: 1,
            agent_preset: Some("ptc".into()),
            version,
        };
        assert_eq!(
            author_header(&fields(0)),
            r#"{"type":"session","version":0,"id":"s","createdAt":5,"cwd":"/w","parentSession":"p","seedLength":3,"origin":"subagent","delegationDepth":1,"agentPreset":"ptc"}"#
        );
        let v4 = author_header(&fields(4));
        assert_eq!(
            v4,
            r#"{"type":"session","version":4,"id":"s","createdAt":5,"cwd":"/w","parentSession":"p","isSeeded":true,"origin":"subagent","delegationDepth":1,"agentPreset":"ptc"}"#
        );
        assert_eq!(check(&v4), HeaderCheck::Valid);
    }
}
