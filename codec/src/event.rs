//! Authoring live events exactly as DSH's `Session.append` builds them.
//!
//! A [`NewEvent`] is what a host asks to append; [`NewEvent::author`] runs DSH's append-site
//! checks that need no log context, in DSH's order (JSON admission of `data`, legacy-format
//! rejection, admission of the surface metadata), and builds the envelope with DSH's key order
//! `type, seq, time, data[, sourceEventSeqs][, surfaceOp]`. Surface validation needs the
//! current surface and is the engine's job (it folds the authored event).

use crate::json::{admit, JsString, Object, Value};

/// The `type` of a logged event; `""` when it has none (no DSH type is empty, so no rule keyed
/// on a type matches it).
pub fn event_type(event: &Value) -> &str {
    event
        .as_object()
        .and_then(|o| o.get("type"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// One event a host asks to append; the store assigns its seq.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEvent {
    /// Event type, e.g. `user/message`.
    pub ty: String,
    /// Epoch ms; `None` means now.
    pub time: Option<i64>,
    /// The payload.
    pub data: Value,
    /// `"append"` or `{"op":"replace","start":S,"end":E}` (surface types only).
    pub surface_op: Option<Value>,
    /// Provenance seqs (surface types only).
    pub source_event_seqs: Option<Value>,
    /// `"ignorable": true` marks a type readers may skip when they do not know it.
    pub ignorable: bool,
}

impl NewEvent {
    /// Read the CLI/API batch shape `{"type","time"?,"data","surfaceOp"?,"sourceEventSeqs"?,
    /// "ignorable"?}`. `Err` says which rule the object breaks.
    pub fn from_value(v: &Value) -> Result<NewEvent, String> {
        let Value::Object(o) = v else {
            return Err("an event must be a JSON object".into());
        };
        const KEYS: [&str; 6] = [
            "type",
            "time",
            "data",
            "surfaceOp",
            "sourceEventSeqs",
            "ignorable",
        ];
        if let Some((k, _)) = o.iter().find(|(k, _)| !KEYS.iter().any(|x| k.eq_str(x))) {
            return Err(format!("unknown key \"{k}\" (allowed: type, time, data, surfaceOp, sourceEventSeqs, ignorable)"));
        }
        let ty = o
            .get("type")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .ok_or("\"type\" must be a non-empty string")?;
        let time = match o.get("time") {
            None => None,
            Some(t) => Some(
                t.as_safe_integer()
                    .ok_or("\"time\" must be a safe integer (epoch ms)")?,
            ),
        };
        let data = o.get("data").cloned().ok_or("\"data\" is required")?;
        let ignorable = match o.get("ignorable") {
            None => false,
            Some(Value::Bool(true)) => true,
            Some(_) => return Err("\"ignorable\" may only be true".into()),
        };
        Ok(NewEvent {
            ty: ty.to_owned(),
            time,
            data,
            surface_op: o.get("surfaceOp").cloned(),
            source_event_seqs: o.get("sourceEventSeqs").cloned(),
            ignorable,
        })
    }

    /// The event a logged event was appended as: its type, time, data, surface metadata and
    /// `ignorable` marker, without its seq (replaying a log into another session or store).
    pub fn from_logged(event: &Value) -> Result<NewEvent, String> {
        Self::from_logged_owned(event.clone())
    }

    /// [`NewEvent::from_logged`] of an event the caller gives up: its data and surface metadata
    /// move in uncopied (a host handing over events it built, a batch just parsed).
    pub fn from_logged_owned(event: Value) -> Result<NewEvent, String> {
        let Value::Object(mut o) = event else {
            return Err("a logged event must be a JSON object".into());
        };
        let ty = o
            .get("type")
            .and_then(Value::as_str)
            .ok_or("a logged event needs a string type")?
            .to_owned();
        let data = o.remove("data").ok_or("a logged event needs data")?;
        Ok(NewEvent {
            ty,
            time: o.get("time").and_then(Value::as_safe_integer),
            data,
            surface_op: o.remove("surfaceOp"),
            source_event_seqs: o.remove("sourceEventSeqs"),
            ignorable: matches!(o.get("ignorable"), Some(Value::Bool(true))),
        })
    }

    /// Run DSH's context-free append checks and build the envelope at `seq`, with `now` used
    /// when the event has no time. `Err` is DSH's message.
    pub fn author(self, seq: u64, now: i64) -> Result<Value, String> {
        let ty = self.ty.as_str();
        if admit(&self.data).is_err() {
            return Err(format!(
                "session event \"{ty}\" carries non-JSON-serializable data"
            ));
        }
        if ty == "request/header-delta" {
            return Err("session event \"request/header-delta\" uses unsupported legacy request/header-delta format".into());
        }
        let fallback = self
            .data
            .as_object()
            .and_then(|d| d.get("reason"))
            .and_then(Value::as_str)
            == Some("fallback");
        if ty == "request/header" && fallback {
            return Err("session event \"request/header\" uses unsupported legacy request/header reason \"fallback\"".into());
        }
        let meta_ok = [&self.surface_op, &self.source_event_seqs]
            .into_iter()
            .flatten()
            .all(|v| admit(v).is_ok());
        if !meta_ok {
            return Err(format!(
                "session event \"{ty}\" carries non-JSON-serializable surface metadata"
            ));
        }
        let seq = i64::try_from(seq).map_err(|_| format!("seq {seq} is not a safe integer"))?;
        // The envelope's keys are distinct and none is an array index, so its entries are built
        // in their final order in one allocation; the type string moves in uncopied.
        let NewEvent {
            ty,
            time,
            data,
            surface_op,
            source_event_seqs,
            ignorable,
        } = self;
        let mut entries: Vec<(JsString, Value)> = Vec::with_capacity(7);
        entries.push((
            JsString::from_static("type"),
            Value::String(JsString::from(ty)),
        ));
        entries.push((JsString::from_static("seq"), Value::from(seq)));
        entries.push((
            JsString::from_static("time"),
            Value::from(time.unwrap_or(now)),
        ));
        entries.push((JsString::from_static("data"), data));
        if let Some(s) = source_event_seqs {
            entries.push((JsString::from_static("sourceEventSeqs"), s));
        }
        if let Some(op) = surface_op {
            entries.push((JsString::from_static("surfaceOp"), op));
        }
        if ignorable {
            entries.push((JsString::from_static("ignorable"), Value::Bool(true)));
        }
        Ok(Value::Object(Object::from_distinct_names(entries)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{parse, stringify};

    fn event(text: &str) -> NewEvent {
        NewEvent::from_value(&parse(text).expect("json")).expect("event")
    }

    /// The envelope is built as an object of distinct non-index names; it equals what parsing
    /// its own text gives, with every optional member present or absent.
    #[test]
    fn the_envelope_is_the_object_its_text_parses_to() {
        for text in [
            r#"{"type":"a/b","data":{"2":1,"x":[1]}}"#,
            r#"{"type":"a/b","data":null,"time":3,"surfaceOp":{"op":"append"},"sourceEventSeqs":[0,1],"ignorable":true}"#,
        ] {
            let authored = event(text).author(4, 9).expect("authored");
            assert_eq!(parse(&stringify(&authored)).expect("json"), authored);
        }
    }

    #[test]
    fn envelope_key_order_is_dsh_s() {
        let e = event(
            r#"{"surfaceOp":"append","sourceEventSeqs":[1],"data":{"b":1,"a":2},"type":"user/message","time":7}"#,
        );
        assert_eq!(
            stringify(&e.author(3, 99).expect("authored")),
            r#"{"type":"user/message","seq":3,"time":7,"data":{"b":1,"a":2},"sourceEventSeqs":[1],"surfaceOp":"append"}"#
        );
        let e = event(r#"{"type":"x/y","data":{},"ignorable":true}"#);
        assert_eq!(
            stringify(&e.author(0, 5).expect("authored")),
            r#"{"type":"x/y","seq":0,"time":5,"data":{},"ignorable":true}"#
        );
    }

    #[test]
    fn dsh_append_rules_in_order() {
        let e = event(r#"{"type":"a/b","data":{"x":-0}}"#);
        assert_eq!(
            e.author(0, 0).expect_err("-0"),
            "session event \"a/b\" carries non-JSON-serializable data"
        );
        let e = event(r#"{"type":"request/header-delta","data":{}}"#);
        assert!(e
            .author(0, 0)
            .expect_err("legacy")
            .contains("legacy request/header-delta format"));
        let e = event(r#"{"type":"request/header","data":{"reason":"fallback"}}"#);
        assert!(e
            .author(0, 0)
            .expect_err("fallback")
            .contains("reason \"fallback\""));
        let e = event(r#"{"type":"user/message","data":{},"sourceEventSeqs":[-0]}"#);
        assert!(e
            .author(0, 0)
            .expect_err("meta")
            .contains("non-JSON-serializable surface metadata"));
    }

    /// A logged event re-authored at its own seq is the event again, whether it is lent or
    /// given up; a logged event without an object shape, a string type or data is refused.
    #[test]
    fn a_logged_event_re_authors_to_itself() {
        let text = r#"{"type":"a/b","seq":4,"time":9,"data":{"k":[1,"x"]},"sourceEventSeqs":[0],"surfaceOp":"append","ignorable":true}"#;
        let logged = parse(text).expect("json");
        let lent = NewEvent::from_logged(&logged).expect("lent");
        let given = NewEvent::from_logged_owned(logged).expect("given");
        assert_eq!(lent, given);
        assert_eq!(stringify(&given.author(4, 0).expect("authored")), text);
        let bad = |t: &str| NewEvent::from_logged_owned(parse(t).expect("json")).expect_err("bad");
        assert!(bad("[]").contains("object"));
        assert!(bad(r#"{"type":1,"data":{}}"#).contains("string type"));
        assert!(bad(r#"{"type":"a/b"}"#).contains("data"));
    }

    #[test]
    fn batch_shape_errors_name_the_rule() {
        let bad = |t: &str| NewEvent::from_value(&parse(t).expect("json")).expect_err("bad");
        assert!(bad("[]").contains("object"));
        assert!(bad(r#"{"data":{}}"#).contains("type"));
        assert!(bad(r#"{"type":"a"}"#).contains("data"));
        assert!(bad(r#"{"type":"a","data":1,"seq":3}"#).contains("unknown key \"seq\""));
        assert!(bad(r#"{"type":"a","data":1,"time":1.5}"#).contains("time"));
        assert!(bad(r#"{"type":"a","data":1,"ignorable":false}"#).contains("ignorable"));
    }
}
