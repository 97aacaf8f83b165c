//! Rows of V2–V4 files (later-format-spec §2.1, §3.6–3.7): one event per row under an exact
//! envelope, with range-encoded `sourceEventSeqs` and the generation's `surfaceOp` spelling; and
//! V4's row admission, which refuses retired syntax wherever it appears, even past a torn row.
//!
//! The logical event is the row with `sourceEventSeqs` decoded (key position kept); everything
//! else is the row as written, so the raw line remains the only file form.

use crate::format::seq_ranges::{self, Strictness};
use crate::json::{self, JsString, Object, Value};

/// The logical events of one line of a generation-`version` file whose first event has seq
/// `first_seq`: V0/V1 lines are events or packed chunk rows, with DSH 0.1.2's range-encoded
/// `sourceEventSeqs` decoded; V2+ lines are one row each. `Err` is DSH's text.
pub fn decode_line(value: Value, version: u32, first_seq: u64) -> Result<Vec<Value>, String> {
    if version >= 2 {
        return decode_row(value, first_seq).map(|row| vec![Value::Object(row)]);
    }
    let mut events = crate::format::chunk_rows::decode_record(value)?;
    for e in &mut events {
        decode_v0_ranges(e)?;
    }
    Ok(events)
}

/// Decode a V0/V1 event's range-encoded `sourceEventSeqs` in place (lenient: DSH 0.1.2's V0
/// writer).
fn decode_v0_ranges(event: &mut Value) -> Result<(), String> {
    let Value::Object(o) = event else {
        return Ok(());
    };
    let (Some(sources), Some(seq)) = (o.get("sourceEventSeqs"), o.get("seq")) else {
        return Ok(());
    };
    let seq = seq.as_safe_u64().unwrap_or(0);
    if let Some(seqs) = seq_ranges::decode(sources, seq, Strictness::Lenient)? {
        set_sources(o, seqs);
    }
    Ok(())
}

/// Put the decoded `seqs` in place of the event's range-encoded `sourceEventSeqs`.
fn set_sources(event: &mut Object, seqs: Vec<u64>) {
    let array = seqs.into_iter().map(|s| Value::Number(s as f64)).collect();
    event.insert(JsString::from("sourceEventSeqs"), Value::Array(array));
}

/// Append a V2+ event's file form (what DSH's writer puts on the line) as JSON: the event with
/// its `sourceEventSeqs` range-encoded, written in place (the event is not copied).
pub fn write_file_row(out: &mut String, event: &Value) {
    let encoded = match event {
        Value::Object(o) => o
            .get("sourceEventSeqs")
            .and_then(Value::as_array)
            .and_then(|a| {
                a.iter()
                    .map(|v| v.as_safe_u64())
                    .collect::<Option<Vec<u64>>>()
            })
            .map(|seqs| (o, seq_ranges::encode(&seqs))),
        _ => None,
    };
    match encoded {
        Some((o, ranges)) => json::write_object_replacing(out, o, "sourceEventSeqs", &ranges),
        None => json::write_value(out, event),
    }
}

/// A V2+ event's file form as one line of text (without `\n`).
pub fn file_row_text(event: &Value) -> String {
    let mut row = String::new();
    write_file_row(&mut row, event);
    row
}

/// The envelope keys a row must hold, in DSH's check order.
const REQUIRED_KEYS: [&str; 4] = ["type", "seq", "time", "data"];
/// The envelope keys a row may hold besides.
const OPTIONAL_KEYS: [&str; 3] = ["ignorable", "sourceEventSeqs", "surfaceOp"];

/// Decode one parsed V2–V4 row into its logical event (DSH's released-v2 row codec, which V3 and
/// V4 reuse, hence its texts). `row_index` counts the rows handed to the codec from 0. `Err` is
/// DSH's text.
pub fn decode_row(value: Value, row_index: u64) -> Result<Object, String> {
    let subject = format!("released v2 row {row_index}");
    let Value::Object(mut row) = value else {
        return Err(format!("{subject} must be an object"));
    };
    if let Some(missing) = REQUIRED_KEYS.iter().find(|k| !row.contains_key(k)) {
        return Err(format!("{subject} lacks required field {missing}"));
    }
    let known = |k: &JsString| {
        REQUIRED_KEYS
            .iter()
            .chain(&OPTIONAL_KEYS)
            .any(|a| k.eq_str(a))
    };
    if let Some((key, _)) = row.iter().find(|(k, _)| !known(k)) {
        return Err(format!("{subject} has unexpected field {key}"));
    }
    if !matches!(row.get("type"), Some(Value::String(_))) {
        return Err(format!("{subject} type must be a string"));
    }
    let time_ok = row
        .get("time")
        .and_then(Value::as_safe_integer)
        .is_some_and(|_| !is_negative_zero(row.get("time")));
    if !time_ok {
        return Err(format!("{subject} time must be a safe integer"));
    }
    if row
        .get("ignorable")
        .is_some_and(|v| *v != Value::Bool(true))
    {
        return Err(format!("{subject} ignorable must be true when present"));
    }
    if let Some(sources) = row.get("sourceEventSeqs") {
        let seq = row
            .get("seq")
            .and_then(Value::as_safe_u64)
            .filter(|_| !is_negative_zero(row.get("seq")))
            .ok_or_else(|| format!("{subject} seq must be a non-negative safe integer"))?;
        let decoded = seq_ranges::decode(sources, seq, Strictness::Strict)?.unwrap_or_default();
        set_sources(&mut row, decoded);
    }
    Ok(row)
}

fn is_negative_zero(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Number(n)) if *n == 0.0 && n.is_sign_negative())
}

/// The generation's `surfaceOp` spelling: `"append"`, or a replace with exactly
/// `{op,start,end}` (V2) or `{op,startSeq,endSeq}` (V3, V4). `Err` is DSH's text for the
/// generation (V2: the V2→V3 stage; V3: the V3 event check; V4: the surface fold, which leaves
/// an unknown ignorable record's metadata opaque).
pub fn check_surface_op(event: &Value, version: u32) -> Result<(), String> {
    let Some(o) = event.as_object() else {
        return Ok(());
    };
    let Some(op) = o.get("surfaceOp") else {
        return Ok(());
    };
    if version >= 4 && crate::format::known_types::is_opaque_v4(event) {
        return Ok(());
    }
    let (start, end) = if version >= 3 {
        ("startSeq", "endSeq")
    } else {
        ("start", "end")
    };
    let valid = match op {
        Value::String(s) => s.eq_str("append"),
        Value::Object(r) => {
            r.has_exact_keys(&["op", start, end])
                && r.get("op").and_then(Value::as_str) == Some("replace")
        }
        _ => false,
    };
    if valid {
        return Ok(());
    }
    let ty = crate::json::js_string_of(o.get("type").unwrap_or(&Value::Null));
    let seq = crate::json::js_string_of(o.get("seq").unwrap_or(&Value::Null));
    Err(match version {
        2 => format!("format v2 {ty} at seq {seq} requires exact replace fields op/start/end"),
        3 => {
            format!("format v3 {ty} at seq {seq} requires exact replace fields op/startSeq/endSeq")
        }
        _ => format!("session event \"{ty}\" carries an invalid surfaceOp"),
    })
}

/// Why V4 row admission refuses a row: corruption, or (retired event types) a format DSH 0.2
/// does not support.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// `SessionFormatError`: the file is corrupt.
    Corrupt(String),
    /// `SessionFormatUnsupportedError`.
    Unsupported(String),
}

/// V4 row admission (`assertV4RowAdmission`), applied to every parsable row before tail
/// recovery: retired or malformed first-class syntax refuses the whole file wherever it sits.
pub fn admit_v4_row(row: &Value) -> Result<(), Admission> {
    let Some(o) = row.as_object() else {
        return Ok(());
    };
    let ty = o.get("type").and_then(Value::as_str).unwrap_or("");
    let seq = crate::json::js_string_of(o.get("seq").unwrap_or(&Value::Null));
    let data = o.get("data").and_then(Value::as_object);
    let ignorable = o.get("ignorable") == Some(&Value::Bool(true));
    let corrupt = |m: String| Err(Admission::Corrupt(m));
    let message = data
        .and_then(|d| d.get("message"))
        .and_then(Value::as_object);
    if ty == "developer/message" && !ignorable {
        let role = message.and_then(|m| m.get("role")).and_then(Value::as_str);
        if data.is_none() {
            return corrupt("format v4 developer/message data must be an object".into());
        }
        if role != Some("developer") {
            return corrupt(
                "format v4 developer/message requires turn, step, and a developer message".into(),
            );
        }
        let additions = content_blocks(message)
            .iter()
            .any(|b| block_type(b) == Some("tool-addition"));
        let header_seq = data.and_then(|d| d.get("headerSeq"));
        if additions
            && header_seq
                .and_then(Value::as_safe_integer)
                .is_none_or(|n| n < 0)
        {
            return corrupt(
                "developer/message headerSeq must be a non-negative safe integer".into(),
            );
        }
        if !additions && header_seq.is_some() {
            return corrupt(
                "format v4 developer/message must omit headerSeq without tool additions".into(),
            );
        }
    } else if message.and_then(|m| m.get("role")).and_then(Value::as_str) == Some("developer") {
        return corrupt(
            "format v4 developer/message and developer role must occur together".into(),
        );
    }
    let source_kind = |m: Option<&Object>| {
        m.and_then(|m| m.get("source"))
            .and_then(Value::as_object)
            .and_then(|s| s.get("kind"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let slot = if ty == "user/message" { data } else { message };
    if source_kind(slot).as_deref() == Some("plugin") {
        return corrupt("format v4 message requires a producer-owned source kind".into());
    }
    match ty {
        "tool/code-dispatch-start" | "tool/code-dispatch" if !ignorable => {
            return Err(Admission::Unsupported(format!(
                "format v4 rejects retired event type {ty}"
            )));
        }
        "request/header" => {
            let header = data
                .and_then(|d| d.get("header"))
                .and_then(Value::as_object);
            let Some(header) = header else {
                return corrupt("format v4 request/header requires data and header objects".into());
            };
            if header.contains_key("system") {
                return corrupt("format v4 request/header rejects retired header.system".into());
            }
            let tools = header.get("tools").and_then(Value::as_array).unwrap_or(&[]);
            let deferred_not_true = tools.iter().filter_map(Value::as_object).any(|tool| {
                tool.get("deferLoading")
                    .is_some_and(|d| *d != Value::Bool(true))
            });
            if deferred_not_true {
                return corrupt("format v4 tool deferLoading must be true when present".into());
            }
        }
        "system/message" => {
            let Some(m) = message else {
                return corrupt("format v4 system message requires an object".into());
            };
            if m.get("id")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                return corrupt(
                    "format v4 system message id requires a string with content".into(),
                );
            }
            if m.get("role").and_then(Value::as_str) != Some("system") {
                return corrupt("format v4 system message requires system role".into());
            }
            if !matches!(m.get("content"), Some(Value::Array(_))) {
                return corrupt("format v4 system message requires content array".into());
            }
            if content_blocks(Some(m))
                .iter()
                .any(|b| block_type(b) == Some("tool-result"))
            {
                return corrupt(
                    "format v4 system content rejects retired tool-result wrappers".into(),
                );
            }
        }
        "tool/result" => return admit_tool_result(data, &seq).map_err(Admission::Corrupt),
        _ => {}
    }
    let content_slot = if ty == "user/message" { data } else { message };
    if content_blocks(content_slot)
        .iter()
        .any(|b| block_type(b) == Some("tool-result"))
    {
        return corrupt(format!(
            "format v4 {ty} at seq {seq} content must not contain a released tool-result wrapper"
        ));
    }
    Ok(())
}

/// The tool names a V4 `developer/message` adds (its `tool-addition` blocks), or `None` for any
/// other event.
pub fn added_tools(event: &Value) -> Option<Vec<String>> {
    let o = event.as_object()?;
    if o.get("type").and_then(Value::as_str) != Some("developer/message") {
        return None;
    }
    let message = o
        .get("data")?
        .as_object()?
        .get("message")
        .and_then(Value::as_object);
    Some(
        content_blocks(message)
            .iter()
            .filter(|b| block_type(b) == Some("tool-addition"))
            .filter_map(|b| b.as_object()?.get("toolName")?.as_str().map(str::to_owned))
            .collect(),
    )
}

/// The tool definitions a `request/header` declares: name → whether each definition with that
/// name is complete (a string `description` and an object `parameters`); `None` for any other
/// event.
pub fn declared_tools(event: &Value) -> Option<std::collections::HashMap<String, Vec<bool>>> {
    let o = event.as_object()?;
    if o.get("type").and_then(Value::as_str) != Some("request/header") {
        return None;
    }
    let tools = o
        .get("data")
        .and_then(Value::as_object)
        .and_then(|d| d.get("header"))
        .and_then(Value::as_object)
        .and_then(|h| h.get("tools"))
        .and_then(Value::as_array)
        .unwrap_or(&[]);
    let mut names: std::collections::HashMap<String, Vec<bool>> = std::collections::HashMap::new();
    for tool in tools.iter().filter_map(Value::as_object) {
        let complete = matches!(tool.get("description"), Some(Value::String(_)))
            && matches!(tool.get("parameters"), Some(Value::Object(_)));
        if let Some(name) = tool.get("name").and_then(Value::as_str) {
            names.entry(name.to_owned()).or_default().push(complete);
        }
    }
    Some(names)
}

/// The V4 relationship of a `developer/message` to its `headerSeq` (DSH's
/// `Relationships.developer`): an earlier `request/header` whose tools define each added tool
/// exactly once, completely (string `description`, object `parameters`). `header_tools(seq)`
/// gives the declared tools of the event at `seq` ([`declared_tools`]), `None` when it is not a
/// `request/header`. `Err` is DSH's text.
pub fn check_header_seq(
    event: &Value,
    header_tools: impl FnOnce(u64) -> Option<std::collections::HashMap<String, Vec<bool>>>,
) -> Result<(), String> {
    let Some(o) = event.as_object() else {
        return Ok(());
    };
    if o.get("type").and_then(Value::as_str) != Some("developer/message") {
        return Ok(());
    }
    let data = o.get("data").and_then(Value::as_object);
    let Some(header_seq) = data.and_then(|d| d.get("headerSeq")) else {
        return Ok(());
    };
    let seq = o.get("seq").and_then(Value::as_safe_integer).unwrap_or(0);
    let header_seq = header_seq
        .as_safe_integer()
        .filter(|n| {
            *n >= 0 && !matches!(header_seq, Value::Number(z) if *z == 0.0 && z.is_sign_negative())
        })
        .ok_or("developer/message headerSeq must be a non-negative safe integer")?;
    if header_seq >= seq {
        return Err("developer/message headerSeq must name an earlier event".into());
    }
    let declared = u64::try_from(header_seq)
        .ok()
        .and_then(header_tools)
        .ok_or("developer/message headerSeq must reference an earlier request/header")?;
    for name in added_tools(event).unwrap_or_default() {
        match declared.get(&name).map(Vec::as_slice) {
            Some([true]) => {}
            Some([false]) => {
                return Err(format!(
                    "developer/message tool-addition \"{name}\" requires a complete tool definition in headerSeq {header_seq}"
                ))
            }
            _ => {
                return Err(format!(
                    "developer/message tool-addition \"{name}\" must name exactly one tool in headerSeq {header_seq}"
                ))
            }
        }
    }
    Ok(())
}

/// `assertV4ToolResultMessage`: a first-class tool-role message.
fn admit_tool_result(data: Option<&Object>, seq: &str) -> Result<(), String> {
    let subject = format!("format v4 tool/result at seq {seq}");
    let data = data.ok_or_else(|| format!("{subject} data must be an object"))?;
    let m = data
        .get("message")
        .and_then(Value::as_object)
        .ok_or_else(|| format!("{subject} message must be an object"))?;
    if m.get("id")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err(format!(
            "{subject} requires a first-class message with a string id"
        ));
    }
    if m.get("role").and_then(Value::as_str) != Some("tool") {
        return Err(format!("{subject} requires a tool-role message"));
    }
    let source = m.get("source").and_then(Value::as_object);
    let call_id = m
        .get("toolCallId")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    if call_id.is_none() || source.and_then(|s| s.get("callId")).and_then(Value::as_str) != call_id
    {
        return Err(format!(
            "{subject} requires toolCallId matching its tool source"
        ));
    }
    if source.and_then(|s| s.get("kind")).and_then(Value::as_str) != Some("tool") {
        return Err(format!("{subject} requires a tool source"));
    }
    if !matches!(m.get("content"), Some(Value::Array(_))) {
        return Err(format!("{subject} requires array content"));
    }
    if content_blocks(Some(m))
        .iter()
        .any(|b| block_type(b) == Some("tool-result"))
    {
        return Err(format!(
            "{subject} content must not contain a released tool-result wrapper"
        ));
    }
    if !matches!(m.get("isError"), None | Some(Value::Bool(_))) {
        return Err(format!("{subject} isError must be boolean when present"));
    }
    if data.contains_key("error") && m.get("isError") != Some(&Value::Bool(true)) {
        return Err(format!(
            "{subject} carries error metadata for a non-error tool result"
        ));
    }
    Ok(())
}

/// The `content` array of a message object, or nothing.
fn content_blocks(message: Option<&Object>) -> &[Value] {
    message
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array)
        .unwrap_or(&[])
}

fn block_type(block: &Value) -> Option<&str> {
    block.as_object()?.get("type")?.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{parse, stringify};

    fn row(text: &str) -> Result<String, String> {
        decode_row(parse(text).expect("test rows are JSON"), 0)
            .map(|o| stringify(&Value::Object(o)))
    }

    #[test]
    fn file_row_range_encodes_source_seqs_in_place_and_leaves_the_rest() {
        let text = |event: &str| file_row_text(&parse(event).expect("JSON"));
        assert_eq!(
            text(r#"{"type":"x","sourceEventSeqs":[1,2,3,7],"seq":9,"data":{"a":"\n"}}"#),
            r#"{"type":"x","sourceEventSeqs":[[1,3],7],"seq":9,"data":{"a":"\n"}}"#
        );
        // Not a list of safe seqs, or no such key: the event as it is.
        for same in [
            r#"{"type":"x","sourceEventSeqs":[1,-2],"seq":9}"#,
            r#"{"type":"x","seq":9,"data":{"sourceEventSeqs":[1,2]}}"#,
            r#"[{"sourceEventSeqs":[1,2]}]"#,
        ] {
            assert_eq!(text(same), same);
        }
        // The file form decodes back to the event.
        let event = r#"{"type":"x","seq":20,"time":1,"data":{},"sourceEventSeqs":[4,5,6,8,9]}"#;
        assert_eq!(row(&text(event)), Ok(event.to_string()));
    }

    #[test]
    fn v4_admission_refuses_a_tool_whose_defer_loading_is_not_true() {
        let header = |tool: &str| {
            parse(&format!(
                r#"{{"type":"request/header","seq":2,"time":1,"data":{{"header":{{"config":{{}},"tools":[{{"name":"a"}},{tool}]}},"reason":"initial"}}}}"#
            ))
            .expect("JSON")
        };
        let refused = Err(Admission::Corrupt(
            "format v4 tool deferLoading must be true when present".into(),
        ));
        for bad in [
            r#"{"name":"b","deferLoading":false}"#,
            r#"{"deferLoading":null}"#,
        ] {
            assert_eq!(admit_v4_row(&header(bad)), refused, "{bad}");
        }
        for good in [
            r#"{"name":"b","deferLoading":true}"#,
            r#"{"name":"b"}"#,
            "7",
        ] {
            assert_eq!(admit_v4_row(&header(good)), Ok(()), "{good}");
        }
    }

    #[test]
    fn exact_envelope() {
        assert!(row(r#"{"type":"a","seq":0,"time":1,"data":{}}"#).is_ok());
        let extra = row(r#"{"type":"a","seq":0,"time":1,"data":{},"foo":1}"#);
        assert_eq!(
            extra,
            Err("released v2 row 0 has unexpected field foo".into())
        );
        assert_eq!(
            row(r#"{"type":"a","seq":0,"time":1,"data":{},"ignorable":false}"#),
            Err("released v2 row 0 ignorable must be true when present".into())
        );
        assert_eq!(
            row(r#"{"type":"a","seq":0,"time":1.5,"data":{}}"#),
            Err("released v2 row 0 time must be a safe integer".into())
        );
        assert_eq!(
            row(r#"{"type":"a","seq":0,"time":1}"#),
            Err("released v2 row 0 lacks required field data".into())
        );
    }

    #[test]
    fn ranges_decode_in_place() {
        let r = row(
            r#"{"type":"user/message","seq":10,"time":1,"data":{},"sourceEventSeqs":[[3,6],9],"surfaceOp":"append"}"#,
        );
        assert_eq!(
            r,
            Ok(r#"{"type":"user/message","seq":10,"time":1,"data":{},"sourceEventSeqs":[3,4,5,6,9],"surfaceOp":"append"}"#.into())
        );
        for bad in ["[[6,3]]", "[[3,6],5]", "[3,3]", "3"] {
            let text =
                format!(r#"{{"type":"x","seq":10,"time":1,"data":{{}},"sourceEventSeqs":{bad}}}"#);
            assert!(row(&text).is_err(), "{bad}");
        }
    }

    #[test]
    fn replace_spelling_follows_the_generation() {
        let op = |o: &str| {
            parse(&format!(
                r#"{{"type":"user/message","seq":3,"time":1,"data":{{}},"surfaceOp":{o}}}"#
            ))
            .expect("JSON")
        };
        let v2 = op(r#"{"op":"replace","start":1,"end":1}"#);
        let v4 = op(r#"{"op":"replace","startSeq":1,"endSeq":1}"#);
        let extra = op(r#"{"op":"replace","startSeq":1,"endSeq":1,"x":0}"#);
        assert!(check_surface_op(&v2, 2).is_ok());
        assert!(check_surface_op(&v2, 4).is_err());
        assert!(check_surface_op(&v4, 3).is_ok());
        assert_eq!(
            check_surface_op(&v4, 2),
            Err(
                "format v2 user/message at seq 3 requires exact replace fields op/start/end".into()
            )
        );
        assert!(check_surface_op(&extra, 4).is_err());
        assert!(check_surface_op(&op(r#""append""#), 4).is_ok());
    }

    #[test]
    fn v4_admission() {
        let admit = |text: &str| admit_v4_row(&parse(text).expect("JSON"));
        let corrupt = |m: &str| Err(Admission::Corrupt(m.into()));
        assert_eq!(
            admit(r#"{"type":"request/header","data":{"header":{"system":""}}}"#),
            corrupt("format v4 request/header rejects retired header.system")
        );
        assert!(admit(r#"{"type":"request/header","data":{"header":{}}}"#).is_ok());
        assert_eq!(
            admit(r#"{"type":"tool/code-dispatch","data":{}}"#),
            Err(Admission::Unsupported(
                "format v4 rejects retired event type tool/code-dispatch".into()
            ))
        );
        assert!(admit(r#"{"type":"tool/code-dispatch","data":{},"ignorable":true}"#).is_ok());
        let result = |extra: &str| {
            format!(
                r#"{{"type":"tool/result","seq":4,"data":{{"message":{{"id":"r","role":"tool","source":{{"kind":"tool","callId":"c"}},"toolCallId":"c","content":[]{extra}}},"error":{{"name":"E","code":"X"}}}}}}"#
            )
        };
        assert_eq!(
            admit(&result("")),
            corrupt(
                "format v4 tool/result at seq 4 carries error metadata for a non-error tool result"
            )
        );
        assert!(admit(&result(r#","isError":true"#)).is_ok());
        assert_eq!(
            admit(r#"{"type":"developer/message","data":{"message":{"role":"user"}}}"#),
            corrupt("format v4 developer/message requires turn, step, and a developer message")
        );
        assert_eq!(
            admit(r#"{"type":"user/message","seq":2,"data":{"content":[{"type":"tool-result"}]}}"#),
            corrupt("format v4 user/message at seq 2 content must not contain a released tool-result wrapper")
        );
        let tool_addition = r#"{"type":"developer/message","data":{"message":{"role":"developer","content":[{"type":"tool-addition","toolName":"t"}]}}}"#;
        assert_eq!(
            admit(tool_addition),
            corrupt("developer/message headerSeq must be a non-negative safe integer")
        );
        let removal = r#"{"type":"developer/message","data":{"headerSeq":1,"message":{"role":"developer","content":[{"type":"tool-removal","toolName":"t"}]}}}"#;
        assert_eq!(
            admit(removal),
            corrupt("format v4 developer/message must omit headerSeq without tool additions")
        );
    }

    #[test]
    fn a_tool_addition_names_an_earlier_header_defining_it_once() {
        let header = parse(r#"{"type":"request/header","seq":1,"data":{"header":{"tools":[{"name":"t","description":"d","parameters":{}},{"name":"u","description":"d","parameters":{}},{"name":"u","description":"d","parameters":{}}]}}}"#).expect("JSON");
        let tools = |s: u64| (s == 1).then(|| declared_tools(&header)).flatten();
        let dev = |seq: u64, header_seq: u64, tool: &str| {
            parse(&format!(r#"{{"type":"developer/message","seq":{seq},"data":{{"headerSeq":{header_seq},"message":{{"role":"developer","content":[{{"type":"tool-addition","toolName":"{tool}"}}]}}}}}}"#)).expect("JSON")
        };
        assert_eq!(check_header_seq(&dev(5, 1, "t"), tools), Ok(()));
        assert!(
            check_header_seq(&dev(5, 1, "u"), tools).is_err(),
            "defined twice"
        );
        assert!(
            check_header_seq(&dev(5, 1, "x"), tools).is_err(),
            "not defined"
        );
        assert!(
            check_header_seq(&dev(5, 2, "t"), tools).is_err(),
            "not a request/header"
        );
        assert!(
            check_header_seq(&dev(1, 3, "t"), tools).is_err(),
            "a later seq"
        );
    }
}
