//! The event vocabularies DSH reads, and what it refuses outside them (the lists of names are
//! `crate::vocabulary`'s).
//!
//! - DSH 0.1.0 (V0 logs): what its coordinator refuses after a clean scan
//!   (`assertSupportedEvents`, `assertEventsSupported`): legacy event shapes it no longer reads,
//!   and event types unknown to it that are not marked `"ignorable": true`.
//! - DSH 0.2 (V4 logs): `KNOWN_SESSION_EVENT_TYPES`; its V4 reader refuses a log holding an
//!   unknown type not marked ignorable ([`v4_unknown_type`]), and its surface leaves unknown
//!   ignorable records (plugin records) out of history ([`is_opaque_v4`]).

use crate::json::{self, JsString, Value};
use crate::vocabulary::{ADDED_IN_V4, NORMALIZED_LEGACY, RELEASED_V3_EVENT_TYPES, V0_EVENT_TYPES};

/// Whether DSH 0.2 knows `ty`.
pub fn is_known_v4(ty: &str) -> bool {
    RELEASED_V3_EVENT_TYPES.binary_search(&ty).is_ok() || ADDED_IN_V4.contains(&ty)
}

/// An event DSH 0.2 keeps without interpreting: a type it does not know, marked
/// `"ignorable": true` (a plugin record). Its surface metadata never touches the surface.
pub fn is_opaque_v4(event: &Value) -> bool {
    event.as_object().is_some_and(|o| {
        o.get("ignorable") == Some(&Value::Bool(true))
            && !o
                .get("type")
                .and_then(Value::as_str)
                .is_some_and(is_known_v4)
    })
}

/// DSH 0.2's V4 reader refusal (`SessionFormatUnsupportedMigrationError`) of event `index`
/// when its type is unknown and not marked ignorable; `None` otherwise.
pub fn v4_unknown_type(event: &Value, index: u64) -> Option<String> {
    let o = event.as_object()?;
    let ty = o.get("type").unwrap_or(&Value::Null);
    let known = ty.as_str().is_some_and(is_known_v4);
    let ignorable = o.get("ignorable") == Some(&Value::Bool(true));
    (!known && !ignorable).then(|| {
        format!(
            "format v4 contains unknown event type {} at seq {index}",
            json::stringify(ty)
        )
    })
}

/// Whether DSH 0.1.0 knows `ty`.
pub fn is_known(ty: &str) -> bool {
    V0_EVENT_TYPES.binary_search(&ty).is_ok() || NORMALIZED_LEGACY.contains(&ty)
}

/// Collects the first refusal over the committed events of a session, in DSH's order
/// (`assertSupportedEvents`, then the unknown-type check): the first `request/header-delta` of the
/// whole log, else its first `mode/set`, else its first `request/header` with reason
/// `"fallback"`, else its first unknown type not marked ignorable.
#[derive(Debug, Default)]
pub struct SupportCheck {
    /// The first refusal of each legacy kind, in DSH's priority order.
    legacy: [Option<String>; 3],
    unknown: Option<String>,
}

impl SupportCheck {
    /// Observe the next committed event of session `id`.
    pub fn observe(&mut self, id: &JsString, event: &Value) {
        let Some(o) = event.as_object() else { return };
        let ty = o.get("type").and_then(Value::as_str).unwrap_or("");
        // The seq's text only when a refusal names it (most events are known and not legacy).
        let seq = || o.get("seq").map(json::js_string_of).unwrap_or_default();
        let fallback = ty == "request/header"
            && o.get("data")
                .and_then(Value::as_object)
                .and_then(|d| d.get("reason"))
                .and_then(Value::as_str)
                == Some("fallback");
        let legacy = match ty {
            "request/header-delta" => Some((0, format!("legacy {ty} event"))),
            "mode/set" => Some((1, format!("legacy {ty} event"))),
            _ if fallback => Some((2, "legacy request/header reason \"fallback\"".to_owned())),
            _ => None,
        };
        if let Some((rank, what)) = legacy {
            self.legacy[rank].get_or_insert_with(|| {
                format!(
                    "session \"{id}\" contains unsupported {what} at seq {}",
                    seq()
                )
            });
        }
        let ignorable = matches!(o.get("ignorable"), Some(Value::Bool(true)));
        if self.unknown.is_none()
            && !is_known(ty)
            && !ignorable
            && ty != "request/header-delta"
            && ty != "mode/set"
        {
            let shown = o
                .get("type")
                .map(json::js_string_of)
                .unwrap_or_else(|| "undefined".into());
            let seq = seq();
            self.unknown = Some(format!(
                "session \"{id}\" contains event type \"{shown}\" (seq {seq}) unknown to this harness and not marked ignorable; refusing to interpret the log — it was likely written by a newer harness"
            ));
        }
    }

    /// The refusal DSH would raise, if any.
    pub fn refusal(&self) -> Option<&str> {
        self.legacy
            .iter()
            .flatten()
            .next()
            .or(self.unknown.as_ref())
            .map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v4_vocabulary_refuses_unknown_required_types_only() {
        assert!(RELEASED_V3_EVENT_TYPES.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(RELEASED_V3_EVENT_TYPES.len() + ADDED_IN_V4.len(), 60);
        assert!(is_known_v4("developer/message") && is_known_v4("workspace/changes"));
        let event = |t: &str| json::parse(t).expect("json");
        let unknown = event(r#"{"type":"x/y","seq":3,"time":1,"data":{}}"#);
        assert_eq!(
            v4_unknown_type(&unknown, 3).as_deref(),
            Some(r#"format v4 contains unknown event type "x/y" at seq 3"#)
        );
        let record = event(r#"{"type":"plugin:a/b","seq":3,"time":1,"data":{},"ignorable":true}"#);
        assert_eq!(v4_unknown_type(&record, 3), None);
        assert!(is_opaque_v4(&record));
        let known =
            event(r#"{"type":"image/offload","seq":3,"time":1,"data":{},"ignorable":true}"#);
        assert!(v4_unknown_type(&known, 3).is_none() && !is_opaque_v4(&known));
        // Types DSH 0.1 knew but 0.2 does not.
        assert!(v4_unknown_type(&event(r#"{"type":"assistant/chunk","data":{}}"#), 0).is_some());
    }

    #[test]
    fn known_list_is_sorted_so_binary_search_works() {
        assert!(V0_EVENT_TYPES.windows(2).all(|w| w[0] < w[1]));
        assert!(is_known("turn/end") && is_known("steering/message") && !is_known("future/thing"));
    }
}
