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

/// The type a stored line opens with, `{"type":"…"` as DSH's writer writes every line, when it
/// is spelled without escapes. A hint for a reader choosing how to read the line, never a
/// verdict on it: `JSON.parse` takes a later duplicate `type` instead, so a reader that trusts
/// the hint only to read a line in full is never wrong.
pub fn opened_type(line: &[u8]) -> Option<&str> {
    let rest = line.strip_prefix(b"{\"type\":\"")?;
    let end = rest.iter().position(|&b| b == b'"' || b == b'\\')?;
    match rest[end] {
        b'"' => std::str::from_utf8(&rest[..end]).ok(),
        _ => None,
    }
}

/// One event a host asks to append; the store assigns its seq.
///
/// Held as the envelope it will be authored as, so that authoring fills in its seq (and time)
/// in place: an event a host built in DSH's logged shape is taken over whole, with no entry or
/// string copied (rebuilding it took three quarters of authoring's time:
/// docs/PERFORMANCE.md, "Events taken over whole").
///
/// Invariant: `envelope` is `type` (a string), `seq` (a placeholder until authored), `time`
/// (a safe integer, or `null` until authored when the host gave none), `data`, then those of
/// `sourceEventSeqs`, `surfaceOp` and `ignorable` (`true`) it has, in that order: DSH's key
/// order, distinct names, none an array index.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEvent {
    envelope: Vec<(JsString, Value)>,
}

/// Envelope positions fixed by [`NewEvent`]'s invariant.
const TYPE: usize = 0;
const SEQ: usize = 1;
const TIME: usize = 2;
const DATA: usize = 3;
/// The optional envelope members.
const SOURCE_EVENT_SEQS: &str = "sourceEventSeqs";
const SURFACE_OP: &str = "surfaceOp";
const IGNORABLE: &str = "ignorable";
/// The optional envelope members after `data`, in DSH's order.
const OPTIONAL: [&str; 3] = [SOURCE_EVENT_SEQS, SURFACE_OP, IGNORABLE];

impl NewEvent {
    /// An event of type `ty` (epoch-ms `time`, `None` for the append's time) with `data`, its
    /// surface metadata (surface types only) and DSH's `"ignorable": true` marker.
    pub fn new(
        ty: &str,
        time: Option<i64>,
        data: Value,
        surface_op: Option<Value>,
        source_event_seqs: Option<Value>,
        ignorable: bool,
    ) -> NewEvent {
        let mut envelope: Vec<(JsString, Value)> = Vec::with_capacity(7);
        envelope.push((JsString::from_static("type"), Value::from(ty)));
        envelope.push((JsString::from_static("seq"), Value::Null));
        envelope.push((
            JsString::from_static("time"),
            time.map_or(Value::Null, Value::from),
        ));
        envelope.push((JsString::from_static("data"), data));
        if let Some(s) = source_event_seqs {
            envelope.push((JsString::from_static(SOURCE_EVENT_SEQS), s));
        }
        if let Some(op) = surface_op {
            envelope.push((JsString::from_static(SURFACE_OP), op));
        }
        if ignorable {
            envelope.push((JsString::from_static(IGNORABLE), Value::Bool(true)));
        }
        NewEvent { envelope }
    }

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
        Ok(NewEvent::new(
            ty,
            time,
            data,
            o.get("surfaceOp").cloned(),
            o.get("sourceEventSeqs").cloned(),
            ignorable,
        ))
    }

    /// The event a logged event was appended as: its type, time, data, surface metadata and
    /// `ignorable` marker, without its seq (replaying a log into another session or store).
    pub fn from_logged(event: &Value) -> Result<NewEvent, String> {
        Self::from_logged_owned(event.clone())
    }

    /// [`NewEvent::from_logged`] of an event the caller gives up: its data and surface metadata
    /// move in uncopied (a host handing over events it built, a batch just parsed). An event
    /// already in the envelope's shape (what DSH logs) becomes the envelope itself.
    pub fn from_logged_owned(event: Value) -> Result<NewEvent, String> {
        let Value::Object(mut o) = event else {
            return Err("a logged event must be a JSON object".into());
        };
        if o.get("type").and_then(Value::as_str).is_none() {
            return Err("a logged event needs a string type".into());
        }
        if o.get("data").is_none() {
            return Err("a logged event needs data".into());
        }
        if let Some(time) = envelope_time(o.entries()) {
            let mut envelope = o.into_entries();
            // The logged seq is not the event's: the placeholder keeps equal events equal. The
            // time is the integer it stands for (a logged `-0` is the time 0, as when rebuilt).
            envelope[SEQ].1 = Value::Null;
            envelope[TIME].1 = Value::from(time);
            return Ok(NewEvent { envelope });
        }
        let time = o.get("time").and_then(Value::as_safe_integer);
        let ignorable = matches!(o.get("ignorable"), Some(Value::Bool(true)));
        let data = o.remove("data").unwrap_or(Value::Null);
        let surface_op = o.remove("surfaceOp");
        let source_event_seqs = o.remove("sourceEventSeqs");
        Ok(NewEvent::new(
            o.get("type").and_then(Value::as_str).unwrap_or_default(),
            time,
            data,
            surface_op,
            source_event_seqs,
            ignorable,
        ))
    }

    /// The event's type, e.g. `user/message`.
    pub fn ty(&self) -> &str {
        self.envelope[TYPE].1.as_str().unwrap_or_default()
    }

    /// The payload.
    pub fn data(&self) -> &Value {
        &self.envelope[DATA].1
    }

    /// Whether it carries DSH's `"ignorable": true` marker (readers may skip a type they do not
    /// know).
    pub fn ignorable(&self) -> bool {
        self.member(IGNORABLE).is_some()
    }

    /// An optional member after `data`.
    fn member(&self, name: &str) -> Option<&Value> {
        self.envelope[DATA + 1..]
            .iter()
            .find(|(k, _)| k.eq_str(name))
            .map(|(_, v)| v)
    }

    /// Run DSH's context-free append checks and build the envelope at `seq`, with `now` used
    /// when the event has no time. `Err` is DSH's message.
    pub fn author(self, seq: u64, now: i64) -> Result<Value, String> {
        let ty = self.ty();
        if admit(self.data()).is_err() {
            return Err(format!(
                "session event \"{ty}\" carries non-JSON-serializable data"
            ));
        }
        if ty == "request/header-delta" {
            return Err("session event \"request/header-delta\" uses unsupported legacy request/header-delta format".into());
        }
        let fallback = self
            .data()
            .as_object()
            .and_then(|d| d.get("reason"))
            .and_then(Value::as_str)
            == Some("fallback");
        if ty == "request/header" && fallback {
            return Err("session event \"request/header\" uses unsupported legacy request/header reason \"fallback\"".into());
        }
        let meta_ok = [self.member(SURFACE_OP), self.member(SOURCE_EVENT_SEQS)]
            .into_iter()
            .flatten()
            .all(|v| admit(v).is_ok());
        if !meta_ok {
            return Err(format!(
                "session event \"{ty}\" carries non-JSON-serializable surface metadata"
            ));
        }
        let seq = i64::try_from(seq).map_err(|_| format!("seq {seq} is not a safe integer"))?;
        let mut envelope = self.envelope;
        envelope[SEQ].1 = Value::from(seq);
        if matches!(envelope[TIME].1, Value::Null) {
            envelope[TIME].1 = Value::from(now);
        }
        Ok(Value::Object(Object::from_distinct_names(envelope)))
    }
}

/// The time of a logged event whose entries already are an envelope as [`NewEvent`] holds it
/// (DSH's own logged events are): `type`, `seq`, `time` (a safe integer), `data`, then optional
/// members in order, `ignorable` only as `true`, nothing else; `None` for any other shape. (The
/// type and data were checked.)
fn envelope_time(entries: &[(JsString, Value)]) -> Option<i64> {
    let [(t, _), (s, _), (tm, time), (d, _), rest @ ..] = entries else {
        return None;
    };
    if !(t.eq_str("type") && s.eq_str("seq") && tm.eq_str("time") && d.eq_str("data")) {
        return None;
    }
    let mut allowed = OPTIONAL.iter();
    let in_order = rest.iter().all(|(k, v)| {
        allowed.any(|name| k.eq_str(name))
            && (!k.eq_str(IGNORABLE) || matches!(v, Value::Bool(true)))
    });
    time.as_safe_integer().filter(|_| in_order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::roundtrip_tests::value;
    use crate::json::{parse, stringify};
    use proptest::prelude::*;

    fn event(text: &str) -> NewEvent {
        NewEvent::from_value(&parse(text).expect("json")).expect("event")
    }

    /// A line's opening type is read only when it is spelled plainly, right at the start.
    #[test]
    fn the_opened_type_is_read_only_from_a_plain_first_member() {
        assert_eq!(
            opened_type(br#"{"type":"tool/call","seq":1}"#),
            Some("tool/call")
        );
        assert_eq!(opened_type(br#"{"type":"","seq":1}"#), Some(""));
        assert_eq!(opened_type(br#"{"type":"tool\/call"}"#), None);
        assert_eq!(opened_type(br#"{"seq":1,"type":"tool/call"}"#), None);
        assert_eq!(opened_type(br#"{ "type":"tool/call"}"#), None);
        assert_eq!(opened_type(br#"{"type":"tool/call"#), None);
        assert_eq!(opened_type(b"{\"type\":\"\xff\"}"), None);
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

    /// A logged event's members: each present or not, with any value or the shape DSH logs
    /// (mostly: so that most events are envelopes already).
    fn logged_members() -> impl Strategy<Value = Vec<(&'static str, Value)>> {
        use proptest::option::weighted;
        let safe = (-(1i64 << 53) + 1..1i64 << 53).prop_map(Value::from);
        (
            prop_oneof![Just("a/b"), Just("user/message"), Just("assistant/chunk")],
            weighted(0.9, value()),
            weighted(0.9, prop_oneof![safe, value()]),
            weighted(0.9, value()),
            proptest::option::of(value()),
            proptest::option::of(value()),
            proptest::option::of(prop_oneof![Just(Value::Bool(true)), value()]),
            weighted(0.1, value()),
        )
            .prop_map(|(ty, seq, time, data, seqs, op, ignorable, extra)| {
                let named = [
                    ("seq", seq),
                    ("time", time),
                    ("data", data),
                    ("sourceEventSeqs", seqs),
                    ("surfaceOp", op),
                    ("ignorable", ignorable),
                    ("extra", extra),
                ];
                std::iter::once(("type", Value::from(ty)))
                    .chain(named.into_iter().filter_map(|(k, v)| Some((k, v?))))
                    .collect()
            })
    }

    /// The event's members in DSH's order half the time (the envelope taken over whole), in
    /// any order otherwise.
    fn logged_event() -> impl Strategy<Value = Object> {
        (logged_members(), any::<bool>())
            .prop_flat_map(|(members, ordered)| {
                let shuffled = Just(members.clone()).prop_shuffle();
                (Just(members), shuffled, Just(ordered))
            })
            .prop_map(|(members, shuffled, ordered)| {
                let mut o = Object::new();
                for (k, v) in if ordered { members } else { shuffled } {
                    o.insert(JsString::from_static(k), v);
                }
                o
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// A logged event taken over whole (already an envelope) is the event its members
        /// make, and authors to the same line; so is one rebuilt from its members.
        #[test]
        fn a_logged_event_is_the_event_its_members_make(o in logged_event(), seq in 0u64..1 << 60) {
            let member = |k: &str| o.get(k).cloned();
            let expected = member("data").map(|data| {
                NewEvent::new(
                    o.get("type").and_then(Value::as_str).unwrap_or_default(),
                    o.get("time").and_then(Value::as_safe_integer),
                    data,
                    member("surfaceOp"),
                    member("sourceEventSeqs"),
                    matches!(o.get("ignorable"), Some(Value::Bool(true))),
                )
            });
            let given = NewEvent::from_logged_owned(Value::Object(o.clone()));
            // Compared by their debug form: a NaN in the data is unequal to itself.
            let shape = |e: Option<&NewEvent>| format!("{e:?}");
            prop_assert_eq!(shape(given.as_ref().ok()), shape(expected.as_ref()));
            if let (Ok(given), Some(expected)) = (given, expected) {
                let text = |r: Result<Value, String>| r.map(|v| stringify(&v));
                prop_assert_eq!(text(given.author(seq, 7)), text(expected.author(seq, 7)));
            }
        }
    }
}
