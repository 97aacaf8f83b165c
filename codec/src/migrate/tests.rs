//! The migration conformance cases of later-format-spec §5.1 (17–23) and the edges' refusals.

use super::*;
use crate::json::{parse, stringify};

fn object(text: &str) -> Object {
    match parse(text).expect("JSON") {
        Value::Object(o) => o,
        other => panic!("not an object: {other:?}"),
    }
}

/// Migrate `header` + `events` (one JSON text each) from `version`.
fn migrate(
    version: u32,
    header: &str,
    events: &[&str],
    children: Vec<ChildFacts>,
) -> Result<Vec<String>, Refusal> {
    let m = Chain::from_version(version, children).run(
        object(header),
        events.iter().map(|e| Value::Object(object(e))),
    )?;
    let mut lines = vec![stringify(&Value::Object(m.header))];
    lines.extend(m.events.into_iter().map(|e| stringify(&Value::Object(e))));
    Ok(lines)
}

const V3_HEADER: &str =
    r#"{"type":"session","version":3,"id":"p","createdAt":5,"cwd":"/w","isSeeded":false}"#;

#[test]
fn case_22_tool_results_lift_to_the_tool_role_and_unknown_names_are_namespaced() {
    let lines = migrate(
        3,
        V3_HEADER,
        &[
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
            r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#,
            r#"{"type":"tool/call","seq":2,"time":1,"data":{"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{}"}}"#,
            r#"{"type":"tool/result","seq":3,"time":2,"data":{"turn":1,"step":1,"message":{"source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"ok"},{"type":"chart","v":1}],"isError":false,"foo":7}],"role":"user","id":"m1","bar":1}},"sourceEventSeqs":[2],"surfaceOp":"append"}"#,
            r#"{"type":"x/y","seq":4,"time":3,"data":{"a":1},"ignorable":true}"#,
            r#"{"type":"user/message","seq":5,"time":3,"data":{"role":"user","content":[{"type":"text","text":"t"}],"source":{"kind":"plugin","plugin":"tools-code-mode","form":"snapshot"},"id":"m2"},"surfaceOp":"append"}"#,
            r#"{"type":"step/end","seq":6,"time":4,"data":{"turn":1,"step":1}}"#,
        ],
        vec![],
    )
    .expect("migrates");
    assert_eq!(
        lines[0],
        r#"{"type":"session","version":4,"id":"p","createdAt":5,"cwd":"/w","isSeeded":false}"#
    );
    assert_eq!(
        lines[4],
        r#"{"type":"tool/result","seq":3,"time":2,"data":{"turn":1,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":"c1"},"toolCallId":"c1","content":[{"type":"text","text":"ok"},{"type":"plugin:chart","v":1}],"isError":false,"id":"m1","plugin:message:bar":1,"plugin:result:foo":7}},"sourceEventSeqs":[2],"surfaceOp":"append"}"#
    );
    assert_eq!(
        lines[5],
        r#"{"type":"plugin:x/y","seq":4,"time":3,"data":{"a":1},"ignorable":true}"#
    );
    assert!(
        lines[6].contains(r#""source":{"kind":"ptc-mode","form":"snapshot"}"#),
        "{}",
        lines[6]
    );
    let unknown = migrate(
        3,
        V3_HEADER,
        &[r#"{"type":"x/y","seq":0,"time":1,"data":{}}"#],
        vec![],
    );
    assert_eq!(
        unknown.expect_err("refused").message,
        r#"format v3 contains unknown event type "x/y" at seq 0"#
    );
}

#[test]
fn case_23_a_child_without_a_catalog_entry_is_backfilled_after_the_last_event() {
    let child = |id: &str, at: f64| ChildFacts {
        child_id: id.into(),
        child_created_at: at,
        descriptors: vec![],
    };
    let events = [r#"{"type":"turn/start","seq":0,"time":9,"data":{"turn":1}}"#];
    let lines = migrate(
        3,
        V3_HEADER,
        &events,
        vec![child("b", 20.0), child("a", 10.0)],
    )
    .expect("migrates");
    assert_eq!(
        &lines[2..],
        [
            r#"{"type":"subagent/catalog","seq":1,"time":9,"data":{"version":1,"childId":"a","childCreatedAt":10,"mode":"unknown"}}"#,
            r#"{"type":"subagent/catalog","seq":2,"time":9,"data":{"version":1,"childId":"b","childCreatedAt":20,"mode":"unknown"}}"#,
        ]
    );
    let conflicting = [
        events[0],
        r#"{"type":"subagent/catalog","seq":1,"time":9,"data":{"version":1,"childId":"a","childCreatedAt":11,"mode":"unknown"}}"#,
    ];
    let refused = migrate(3, V3_HEADER, &conflicting, vec![child("a", 10.0)]).expect_err("refused");
    assert_eq!(
        refused.message,
        "Session a conflicts with its parent catalog"
    );
}

#[test]
fn a_started_tool_without_a_result_gets_an_outcome_unknown_result_and_needs_an_error_turn_end() {
    let events = |end: &str| {
        vec![
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#.to_owned(),
            r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#.to_owned(),
            r#"{"type":"tool/call","seq":2,"time":1,"data":{"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{}"}}"#.to_owned(),
            r#"{"type":"step/end","seq":3,"time":2,"data":{"turn":1,"step":1}}"#.to_owned(),
            format!(r#"{{"type":"turn/end","seq":4,"time":3,"data":{{"turn":1,"reason":{{"kind":"{end}"}}}}}}"#),
        ]
    };
    let error = events("error");
    let lines = migrate(
        3,
        V3_HEADER,
        &error.iter().map(String::as_str).collect::<Vec<_>>(),
        vec![],
    )
    .expect("migrates");
    assert!(lines[4].starts_with(r#"{"type":"tool/result","seq":3,"time":2,"surfaceOp":"append","sourceEventSeqs":[2],"data":{"turn":1,"step":1,"message":{"id":"interrupted-tool-result-c1-3","role":"tool","toolCallId":"c1","source":{"kind":"tool","callId":"c1"},"isError":true,"content":[{"type":"text","text":"The tool call was interrupted"#), "{}", lines[4]);
    assert!(lines[4].ends_with(
        r#""error":{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}}}"#
    ));
    assert_eq!(
        lines[5],
        r#"{"type":"step/end","seq":4,"time":2,"data":{"turn":1,"step":1}}"#
    );
    let completed = events("completed");
    let refused = migrate(
        3,
        V3_HEADER,
        &completed.iter().map(String::as_str).collect::<Vec<_>>(),
        vec![],
    )
    .expect_err("refused");
    assert_eq!(
        refused.message,
        "V3 tool result repair requires an error turn/end for the same turn"
    );
}
