//! Unit tests for the surface folds, one per DSH rule (core-spec §4, §9; §10 cases 6–21, 56–57).

use super::*;
use crate::json::{parse, stringify};
use crate::Error;

fn ev(text: &str) -> Value {
    parse(text).unwrap_or_else(|e| panic!("bad test JSON {text}: {e}"))
}

fn user(seq: u64, op: &str, sources: Option<&str>) -> Value {
    let sources = sources
        .map(|s| format!(",\"sourceEventSeqs\":{s}"))
        .unwrap_or_default();
    ev(&format!(
        r#"{{"type":"user/message","seq":{seq},"time":0,"data":{{"id":"m-{seq}","role":"user","content":[{{"type":"text","text":"u{seq}"}}],"source":{{"kind":"user"}}}}{sources},"surfaceOp":{op}}}"#
    ))
}

fn assistant(seq: u64, content: &str) -> Value {
    ev(&format!(
        r#"{{"type":"assistant/message","seq":{seq},"time":0,"data":{{"turn":1,"step":1,"message":{{"role":"assistant","content":{content},"source":{{"kind":"model","provider":"p","model":"m"}},"id":"a-{seq}"}}}},"sourceEventSeqs":[],"surfaceOp":"append"}}"#
    ))
}

fn tool_result(seq: u64, id: &str, text: &str, op: &str, sources: Option<&str>) -> Value {
    let sources = sources
        .map(|s| format!(",\"sourceEventSeqs\":{s}"))
        .unwrap_or_default();
    ev(&format!(
        r#"{{"type":"tool/result","seq":{seq},"time":0,"data":{{"turn":1,"step":1,"message":{{"source":{{"kind":"tool","callId":"c1"}},"content":[{{"type":"tool-result","toolCallId":"c1","content":[{{"type":"text","text":"{text}"}}]}}],"role":"user","id":"{id}"}}}}{sources},"surfaceOp":{op}}}"#
    ))
}

fn plain(seq: u64, ty: &str) -> Value {
    ev(&format!(
        r#"{{"type":"{ty}","seq":{seq},"time":0,"data":{{"turn":1}}}}"#
    ))
}

/// Fold `events` from seq 0, returning the fold or DSH's message at the first rejection.
fn fold(events: &[Value]) -> std::result::Result<SurfaceFold, String> {
    let mut f = SurfaceFold::new();
    for e in events {
        f.apply(e, |s| usize::try_from(s).ok().and_then(|i| events.get(i)))
            .map_err(rule)?;
    }
    Ok(f)
}

fn rule(e: Error) -> String {
    match e {
        Error::Surface { rule, .. } => rule,
        other => panic!("expected a surface error, got {other}"),
    }
}

fn fold_err(events: &[Value]) -> String {
    match fold(events) {
        Ok(f) => panic!("expected a rejection, folded to {:?}", f.nodes()),
        Err(e) => e,
    }
}

fn abc() -> Vec<Value> {
    (0..3).map(|s| user(s, "\"append\"", None)).collect()
}

fn replace(start: u64, end: u64) -> String {
    format!(r#"{{"op":"replace","start":{start},"end":{end}}}"#)
}

#[test]
fn append_puts_surface_events_on_the_tail() {
    let events = vec![plain(0, "turn/start"), user(1, "\"append\"", None)];
    let f = fold(&events).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f.nodes(), [1]);
    assert_eq!(f.replace_generation(), 0);
    assert_eq!(
        f.to_json(),
        r#"{"nodes":[1],"replaceGeneration":0,"replacements":[]}"#
    );
}

#[test]
fn nested_replace_with_reversed_seq_range() {
    let mut events = abc();
    events.push(user(3, &replace(0, 1), Some("[0,1]")));
    events.push(user(4, &replace(3, 2), Some("[3,2]")));
    let f = fold(&events).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f.nodes(), [4]);
    assert_eq!(f.replace_generation(), 2);
    assert_eq!(
        f.to_json(),
        r#"{"nodes":[4],"replaceGeneration":2,"replacements":[{"seq":3,"start":0,"end":1,"shadowedSeqs":[0,1]},{"seq":4,"start":3,"end":2,"shadowedSeqs":[3,2]}]}"#
    );
}

#[test]
fn overlapping_replaces_collapse_in_surface_order() {
    let mut events: Vec<Value> = (0..4).map(|s| user(s, "\"append\"", None)).collect();
    events.push(user(4, &replace(1, 2), Some("[1,2]")));
    events.push(user(5, &replace(0, 4), Some("[0,4]")));
    let f = fold(&events).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f.nodes(), [5, 3]);
    events.push(user(6, &replace(1, 3), Some("[1,3]")));
    assert_eq!(
        fold_err(&events),
        "surface replace: start seq 1 not found in surface"
    );
}

#[test]
fn start_after_end_in_surface_order_is_rejected() {
    let mut events = abc();
    events.push(user(3, &replace(2, 0), Some("[0,1,2]")));
    assert_eq!(
        fold_err(&events),
        "surface replace: start seq 2 (index 2) is after end seq 0 (index 0)"
    );
}

#[test]
fn shadowed_and_non_surface_targets_are_not_found() {
    let mut events = abc();
    events.push(user(3, &replace(0, 1), Some("[0,1]")));
    events.push(user(4, &replace(0, 0), Some("[0]")));
    assert_eq!(
        fold_err(&events),
        "surface replace: start seq 0 not found in surface"
    );
    let events = vec![
        plain(0, "turn/start"),
        user(1, "\"append\"", None),
        user(2, &replace(1, 0), Some("[0,1]")),
    ];
    assert_eq!(
        fold_err(&events),
        "surface replace: end seq 0 not found in surface"
    );
}

#[test]
fn provenance_superset_ok_missing_rejected() {
    let mut events = abc();
    events.push(user(3, &replace(1, 1), Some("[0,1,2]")));
    assert_eq!(fold(&events).map(|f| f.nodes().to_vec()), Ok(vec![0, 3, 2]));
    let mut events = abc();
    events.push(user(3, &replace(0, 1), Some("[0]")));
    assert_eq!(
        fold_err(&events),
        "surface replace: sourceEventSeqs must include every shadowed surface node; missing 1"
    );
    let mut events = abc();
    events.push(user(3, &replace(0, 2), None));
    assert!(fold_err(&events).ends_with("missing 0, 1, 2"));
}

#[test]
fn provenance_rules_and_order() {
    let pad: Vec<Value> = (0..7).map(|s| plain(s, "x/y")).collect();
    let at7 = |sources: &str| {
        let mut events = pad.clone();
        events.push(user(7, "\"append\"", Some(sources)));
        fold(&events).map(|f| f.nodes().to_vec())
    };
    let earlier = |x: u64| {
        Err(format!(
            "sourceEventSeqs must reference earlier events: {x} >= current seq 7"
        ))
    };
    assert_eq!(at7("[999]"), earlier(999));
    assert_eq!(at7("[7]"), earlier(7));
    assert_eq!(
        at7("[0,0]"),
        Err("sourceEventSeqs must not contain duplicates".into())
    );
    assert_eq!(
        at7("[0,-0]"),
        Err("sourceEventSeqs must not contain duplicates".into())
    );
    let dense = Err("session event \"user/message\" sourceEventSeqs must densely contain non-negative safe integers".into());
    assert_eq!(at7("[1.5]"), dense);
    assert_eq!(
        at7("[9, \"x\"]"),
        dense,
        "a bad element wins over an earlier too-large one"
    );
    assert_eq!(
        at7("[]"),
        Err("sourceEventSeqs must not be empty except on assistant/message".into())
    );
    assert_eq!(
        at7("{}"),
        Err("sourceEventSeqs on event at seq 7 must be an array when present".into())
    );
    assert_eq!(at7("[3,1]"), Ok(vec![7]));
}

#[test]
fn surface_markers_are_checked() {
    let marked =
        ev(r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1},"surfaceOp":"append"}"#);
    assert_eq!(
        fold_err(&[marked]),
        "session event \"turn/start\" is not surface-eligible and cannot carry surfaceOp"
    );
    let cited =
        ev(r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1},"sourceEventSeqs":null}"#);
    assert_eq!(
        fold_err(&[cited]),
        "session event \"turn/start\" is not surface-eligible and cannot carry sourceEventSeqs"
    );
    let unmarked = ev(r#"{"type":"user/message","seq":0,"time":0,"data":{}}"#);
    assert_eq!(
        fold_err(&[unmarked]),
        "session event \"user/message\" is surface-eligible and requires a surfaceOp marker"
    );
    for op in ["null", "[\"append\"]", "\"prepend\"", "7"] {
        assert_eq!(
            fold_err(&[user(0, op, None)]),
            "session event \"user/message\" carries an invalid surfaceOp",
            "{op}"
        );
    }
    for op in [
        r#"{"op":"replace","start":0,"end":0,"x":1}"#,
        r#"{"op":"replace","start":-1,"end":0}"#,
        r#"{"op":"replace","start":0.5,"end":0}"#,
        r#"{"op":"Replace","start":0,"end":0}"#,
        r#"{"op":"replace","start":0}"#,
    ] {
        let msg = "session event \"user/message\" carries an invalid replace surfaceOp";
        assert_eq!(fold_err(&[user(0, op, None)]), msg, "{op}");
    }
}

#[test]
fn seqs_must_be_contiguous() {
    assert_eq!(
        fold_err(&[plain(0, "a/b"), plain(2, "a/b")]),
        "session event seq 2 is not contiguous; expected 1"
    );
    assert_eq!(
        fold_err(&[plain(1, "a/b")]),
        "session event seq 1 is not contiguous; expected 0"
    );
    let no_seq = ev(r#"{"type":"a/b","data":1}"#);
    assert_eq!(
        fold_err(&[no_seq]),
        "session event seq undefined is not contiguous; expected 0"
    );
    assert_eq!(
        fold_err(&[ev(r#"{"seq":"0"}"#)]),
        "session event seq 0 is not contiguous; expected 0"
    );
}

#[test]
fn windowed_fold_starts_at_its_base() {
    let mut f = SurfaceFold::starting_at(400_000);
    let events = [
        user(400_000, "\"append\"", None),
        user(400_001, "\"append\"", None),
        user(400_002, &replace(400_000, 400_000), Some("[400000]")),
    ];
    for e in &events {
        assert!(f.apply(e, |_| None::<&Value>).is_ok());
    }
    assert_eq!(f.nodes(), [400_002, 400_001]);
    assert_eq!(f.replace_generation(), 1);
    let reach_back = user(400_003, &replace(399_999, 400_001), Some("[399999,400001]"));
    let err = f.apply(&reach_back, |_| None::<&Value>).map_err(rule);
    assert_eq!(
        err,
        Err("surface replace: start seq 399999 not found in surface".into())
    );
}

#[test]
fn a_rejected_event_leaves_the_fold_untouched() {
    let mut f = SurfaceFold::new();
    let events = abc();
    for e in &events {
        assert!(f.apply(e, |_| None::<&Value>).is_ok());
    }
    let before = f.clone();
    assert!(f
        .apply(
            &user(3, &replace(2, 0), Some("[0,1,2]")),
            |_| None::<&Value>
        )
        .is_err());
    assert_eq!(f, before);
    assert_eq!(f.next_seq(), 3);
}

fn rewrite_case(replacement: Value) -> std::result::Result<Vec<u64>, String> {
    let events = vec![
        tool_result(0, "r1", "long output", "\"append\"", None),
        replacement,
    ];
    fold(&events).map(|f| f.nodes().to_vec())
}

#[test]
fn tool_result_rewrite_may_change_only_content() {
    let same_id = tool_result(1, "r1", "[pruned]", &replace(0, 0), Some("[0]"));
    assert_eq!(rewrite_case(same_id.clone()), Ok(vec![1]));
    let only_content = "tool/result surface replacement may change only content";
    let new_id = tool_result(1, "r2", "[pruned]", &replace(0, 0), Some("[0]"));
    assert_eq!(rewrite_case(new_id), Err(only_content.into()));
    let with_meta = stringify(&same_id).replace(r#""step":1,"#, r#""step":1,"meta":{},"#);
    assert_eq!(rewrite_case(ev(&with_meta)), Err(only_content.into()));
    let is_error = stringify(&same_id).replace(
        r#""toolCallId":"c1","#,
        r#""toolCallId":"c1","isError":true,"#,
    );
    assert_eq!(rewrite_case(ev(&is_error)), Err(only_content.into()));
    // Key order inside data does not matter; extra content blocks are not compared (DSH loophole).
    let reordered = stringify(&same_id).replace(r#""turn":1,"step":1"#, r#""step":1,"turn":1"#);
    assert_eq!(rewrite_case(ev(&reordered)), Ok(vec![1]));
    let extra = stringify(&same_id).replace(
        r#"}]}],"role""#,
        r#"}]},{"type":"text","text":"x"}],"role""#,
    );
    assert_eq!(rewrite_case(ev(&extra)), Ok(vec![1]));
    // A user/message may replace a tool/result.
    assert_eq!(
        rewrite_case(user(1, &replace(0, 0), Some("[0]"))),
        Ok(vec![1])
    );
}

#[test]
fn tool_result_rewrite_targets_one_current_tool_result() {
    let events = vec![
        tool_result(0, "r1", "a", "\"append\"", None),
        tool_result(1, "r2", "b", "\"append\"", None),
        tool_result(2, "r1", "x", &replace(0, 1), Some("[0,1]")),
    ];
    assert_eq!(
        fold_err(&events),
        "tool/result surface replacement must rewrite exactly one current node"
    );
    let events = vec![
        user(0, "\"append\"", None),
        tool_result(1, "r1", "x", &replace(0, 0), Some("[0]")),
    ];
    assert_eq!(
        fold_err(&events),
        "tool/result surface replacement must target a current tool/result"
    );
}

#[test]
fn tool_result_rewrite_of_malformed_data_throws_type_error() {
    let original = ev(
        r#"{"type":"tool/result","seq":0,"time":0,"data":{"message":{"id":"r"}},"surfaceOp":"append"}"#,
    );
    let events = vec![
        original,
        tool_result(1, "r1", "x", &replace(0, 0), Some("[0]")),
    ];
    assert_eq!(
        fold_err(&events),
        "TypeError: Cannot read properties of undefined (reading '0')"
    );
    let bad = ev(
        r#"{"type":"tool/result","seq":1,"time":0,"data":null,"sourceEventSeqs":[0],"surfaceOp":{"op":"replace","start":0,"end":0}}"#,
    );
    let events = vec![tool_result(0, "r1", "a", "\"append\"", None), bad];
    assert_eq!(
        fold_err(&events),
        "TypeError: Cannot read properties of null (reading 'message')"
    );
}

#[test]
fn derived_messages_skip_non_surface_and_empty_assistant() {
    let events = vec![
        plain(0, "turn/start"),
        user(1, "\"append\"", None),
        ev(r#"{"type":"assistant/chunk","seq":2,"time":0,"data":{"turn":1,"step":1,"chunk":{}}}"#),
        assistant(
            3,
            r#"[{"type":"text","text":"hi"},{"type":"tool-call","id":"c1","name":"n","arguments":"{}"}]"#,
        ),
        tool_result(4, "r1", "out", "\"append\"", None),
        assistant(5, "[]"),
        plain(6, "turn/end"),
    ];
    let r = replay(&events).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.surface.nodes(), [1, 3, 4, 5]);
    let roles: Vec<_> = r
        .messages
        .iter()
        .filter_map(|m| m.as_object()?.get("role")?.as_str())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    assert_eq!(derive_event_message(&events[5]).ok().flatten(), None);
    assert_eq!(derive_event_message(&events[2]).ok().flatten(), None);
    let user_data = events[1].as_object().and_then(|o| o.get("data"));
    assert_eq!(derive_event_message(&events[1]).ok().flatten(), user_data);
    assert_eq!(r.transcript.len(), 4);
}

#[test]
fn derive_follows_js_truthiness_and_throws_where_dsh_does() {
    let falsy_user =
        ev(r#"{"type":"user/message","seq":0,"time":0,"data":"","surfaceOp":"append"}"#);
    assert_eq!(
        derive_event_message(&falsy_user).ok().flatten(),
        Some(&Value::from(""))
    );
    let no_message =
        ev(r#"{"type":"tool/result","seq":1,"time":0,"data":{},"surfaceOp":"append"}"#);
    assert_eq!(derive_event_message(&no_message).ok().flatten(), None);
    let events = vec![falsy_user, no_message];
    assert_eq!(replay(&events).map(|r| r.messages.len()).ok(), Some(0));
    // An object content with own `length: 0` counts as empty; a string content as non-empty.
    let len0 =
        ev(r#"{"type":"assistant/message","seq":0,"data":{"message":{"content":{"length":0}}}}"#);
    assert_eq!(derive_event_message(&len0).ok().flatten(), None);
    let text = ev(r#"{"type":"assistant/message","seq":0,"data":{"message":{"content":"x"}}}"#);
    assert!(matches!(derive_event_message(&text), Ok(Some(_))));
    let legacy = ev(
        r#"{"type":"assistant/message","seq":9,"time":0,"data":{"content":[]},"surfaceOp":"append"}"#,
    );
    let err = derive_event_message(&legacy).map_err(|e| e.to_string());
    assert_eq!(
        err,
        Err("surface fold refused the event at seq 9: TypeError: Cannot read properties of undefined (reading 'content')".into())
    );
    let nodes = derive_messages(&[0], |_| None::<&Value>).map_err(rule);
    assert_eq!(
        nodes,
        Err("TypeError: Cannot read properties of undefined (reading 'type')".into())
    );
}

#[test]
fn transcript_and_replacement_predicates() {
    assert!(is_append_surface_event(&user(0, "\"append\"", None)));
    assert!(!is_replacement_surface_event(&user(0, "\"append\"", None)));
    let replacing = user(3, &replace(0, 1), Some("[0,1]"));
    assert!(is_replacement_surface_event(&replacing) && !is_append_surface_event(&replacing));
    // Any defined non-"append" marker counts as a replacement, even an invalid one.
    assert!(is_replacement_surface_event(&user(0, "null", None)));
    assert!(!is_surface_event(&plain(0, "turn/start")));
    assert!(!is_surface_event(&ev(r#"{"type":"user/message","seq":0}"#)));
}

fn header(json: &str) -> std::result::Result<String, String> {
    let h = ev(json);
    canonical_header(Some(&h))
        .map(|v| stringify(&v))
        .map_err(rule)
}

#[test]
fn canonical_header_keeps_only_meaningful_fields_in_order() {
    let cfg = r#"{"provider":"p","model":"m"}"#;
    let full = format!(r#"{{"tools":[],"system":"","adapterDefaults":{{}},"config":{cfg}}}"#);
    assert_eq!(header(&full), Ok(format!(r#"{{"config":{cfg}}}"#)));
    let kept = format!(
        r#"{{"messagePrefix":[1],"tools":[{{"name":"t"}}],"system":"s","adapterDefaults":{{"maxTokens":true,"x":1}},"config":{cfg}}}"#
    );
    assert_eq!(
        header(&kept),
        Ok(format!(
            r#"{{"config":{cfg},"adapterDefaults":{{"maxTokens":true,"x":1}},"system":"s","tools":[{{"name":"t"}}]}}"#
        ))
    );
    // JS `.length > 0` on what is there: strings count, numbers do not, `null` throws.
    assert_eq!(
        header(r#"{"tools":"{{tools}}","system":5}"#),
        Ok(r#"{"tools":"{{tools}}"}"#.into())
    );
    assert_eq!(
        header(r#"{"system":{"length":"2"}}"#),
        Ok(r#"{"system":{"length":"2"}}"#.into())
    );
    assert_eq!(
        header(r#"{"adapterDefaults":{"maxTokens":1}}"#),
        Ok("{}".into())
    );
    assert_eq!(header(r#"{"adapterDefaults":null}"#), Ok("{}".into()));
    assert_eq!(
        header(r#"{"system":null}"#),
        Err("TypeError: Cannot read properties of null (reading 'length')".into())
    );
    let none = canonical_header(None).map_err(rule);
    assert_eq!(
        none,
        Err("TypeError: Cannot read properties of undefined (reading 'adapterDefaults')".into())
    );
}

#[test]
fn request_header_fold_latest_wins() {
    let h = |seq: u64, model: &str, tools: &str| {
        ev(&format!(
            r#"{{"type":"request/header","seq":{seq},"time":0,"data":{{"header":{{"config":{{"provider":"p","model":"{model}"}},"tools":{tools}}},"reason":"change"}}}}"#
        ))
    };
    let events = vec![
        h(0, "a", r#"[{"n":1}]"#),
        plain(1, "turn/start"),
        h(2, "b", "[]"),
    ];
    let folded = fold_request_header(&events).map(|h| h.map(|v| stringify(&v)));
    assert_eq!(
        folded.ok().flatten(),
        Some(r#"{"config":{"provider":"p","model":"b"}}"#.into())
    );
    let mut from = RequestHeaderFold::from_header(Some(Value::from("kept")));
    assert_eq!(from.apply(&plain(0, "turn/start")).ok(), Some(false));
    assert_eq!(from.header(), Some(&Value::from("kept")));
    assert_eq!(RequestHeaderFold::new().to_json(), "null");
    let broken = ev(r#"{"type":"request/header","seq":4,"data":{}}"#);
    let err = from.apply(&broken).map_err(|e| e.to_string());
    assert_eq!(
        err,
        Err("surface fold refused the event at seq 4: TypeError: Cannot read properties of undefined (reading 'adapterDefaults')".into())
    );
    assert_eq!(from.header(), Some(&Value::from("kept")));
}

#[test]
fn fold_state_survives_a_bincode_round_trip() {
    let mut events = abc();
    events.push(user(3, &replace(0, 1), Some("[0,1]")));
    let f = fold(&events).unwrap_or_else(|e| panic!("{e}"));
    let config = bincode::config::standard();
    let bytes = bincode::serde::encode_to_vec(&f, config).unwrap_or_default();
    let back: Option<(SurfaceFold, usize)> = bincode::serde::decode_from_slice(&bytes, config).ok();
    assert_eq!(back.map(|(b, _)| b), Some(f));
}
