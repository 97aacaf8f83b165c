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

const V1_HEADER: &str =
    r#"{"type":"session","version":1,"id":"s","createdAt":5,"cwd":"/w","delegationDepth":0}"#;

/// A V1 log: turn/start, step/start and three `request/context`s (seqs 0–4), then `tail` from
/// seq 5 on.
fn v1_log(tail: &[String]) -> Vec<String> {
    let mut events = vec![
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#.to_owned(),
        r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#.to_owned(),
        r#"{"type":"request/context","seq":2,"time":1,"data":{"provider":"p","model":"m"}}"#
            .to_owned(),
        r#"{"type":"request/context","seq":3,"time":1,"data":{"provider":"p","model":"m"}}"#
            .to_owned(),
        r#"{"type":"request/context","seq":4,"time":1,"data":{"provider":"p","model":"m"}}"#
            .to_owned(),
    ];
    events.extend_from_slice(tail);
    events
}

fn chunk(seq: u64, text: &str) -> String {
    format!(
        r#"{{"type":"assistant/chunk","seq":{seq},"time":{seq},"data":{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{text}"}}}}}}"#
    )
}

fn run_strings(version: u32, header: &str, events: &[String]) -> Result<Vec<String>, Refusal> {
    migrate(
        version,
        header,
        &events.iter().map(String::as_str).collect::<Vec<_>>(),
        vec![],
    )
}

#[test]
fn case_17_a_claimed_attempt_embeds_its_chunks_and_later_seqs_close_up() {
    let mut tail: Vec<String> = (5..10).map(|s| chunk(s, "x")).collect();
    tail.push(r#"{"type":"assistant/message","seq":10,"time":10,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"text","text":"xxxxx"}],"source":{"kind":"model","provider":"p","model":"m"}}},"sourceEventSeqs":[5,6,7,8,9],"surfaceOp":"append"}"#.into());
    tail.push(r#"{"type":"session/title","seq":11,"time":11,"data":{"title":"t","messageSeqs":[10],"source":{"kind":"fallback"}}}"#.into());
    tail.push(r#"{"type":"step/end","seq":12,"time":12,"data":{"turn":1,"step":1}}"#.into());
    let lines = run_strings(1, V1_HEADER, &v1_log(&tail)).expect("migrates");
    // Header, 5 lead events, the system head after step/start, then the message at seq 6 (V2
    // seq 5, +1 for the head).
    let message = &lines[7];
    assert!(
        message.starts_with(
            r#"{"type":"assistant/message","seq":6,"time":10,"data":{"turn":1,"step":1,"message":"#
        ),
        "{message}"
    );
    assert!(message.ends_with(r#""stream":[{"type":"text-chunks","time0":5,"index":0,"dt":[1,1,1,1],"texts":["x","x","x","x","x"]}]},"surfaceOp":"append"}"#), "{message}");
    assert_eq!(
        lines[8],
        r#"{"type":"session/title","seq":7,"time":11,"data":{"title":"t","messageSeqs":[6],"source":{"kind":"fallback"}}}"#
    );
}

#[test]
fn case_18_an_unclaimed_attempt_stays_where_its_last_chunk_was_and_its_chunks_cannot_be_cited() {
    let mut tail: Vec<String> = (5..8).map(|s| chunk(s, "y")).collect();
    tail.push(r#"{"type":"step/end","seq":8,"time":8,"data":{"turn":1,"step":1}}"#.into());
    let lines = run_strings(1, V1_HEADER, &v1_log(&tail)).expect("migrates");
    assert_eq!(
        lines[7],
        r#"{"type":"assistant/attempt","seq":6,"time":7,"data":{"turn":1,"step":1,"stream":[{"type":"text-chunks","time0":5,"index":0,"dt":[1,1],"texts":["y","y","y"]}]}}"#
    );
    assert_eq!(
        lines[8],
        r#"{"type":"step/end","seq":7,"time":8,"data":{"turn":1,"step":1}}"#
    );
    tail.push(r#"{"type":"command/done","seq":9,"time":9,"data":{"commandId":"c","kind":"success","sourceEventSeq":6}}"#.into());
    let refused = run_strings(1, V1_HEADER, &v1_log(&tail)).expect_err("refused");
    assert_eq!(
        refused.message,
        "command/done 9 sourceEventSeq targets consumed assistant/chunk 6"
    );
}

#[test]
fn case_19_a_seeded_v0_end_seed_at_the_cut_becomes_the_inherited_marker() {
    let header = r#"{"type":"session","version":0,"id":"c","createdAt":5,"cwd":"/w","parentSession":"p","seedLength":4,"delegationDepth":1}"#;
    let events: Vec<String> = [
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
        r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"step/end","seq":2,"time":2,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"turn/end","seq":3,"time":2,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        r#"{"type":"session/end-seed","seq":4,"time":3,"data":{}}"#,
    ]
    .map(String::from)
    .to_vec();
    let lines = run_strings(0, header, &events).expect("migrates");
    assert_eq!(
        lines[0],
        r#"{"type":"session","version":4,"id":"c","createdAt":5,"cwd":"/w","parentSession":"p","isSeeded":true,"delegationDepth":1}"#
    );
    // The head after step/start moves the marker to seq 5; it is still the last inherited event.
    assert_eq!(
        lines[6],
        r#"{"type":"session/end-seed","seq":5,"time":3,"data":{"inherited":true}}"#
    );
}

#[test]
fn case_20_a_changed_prompt_replaces_the_empty_head_before_its_header() {
    let header = r#"{"type":"session","version":2,"id":"s","createdAt":5,"cwd":"/w","isSeeded":false,"delegationDepth":0}"#;
    let events: Vec<String> = [
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
        r#"{"type":"request/context","seq":1,"time":1,"data":{"provider":"p","model":"m"}}"#,
        r#"{"type":"request/context","seq":2,"time":1,"data":{"provider":"p","model":"m"}}"#,
        r#"{"type":"step/start","seq":3,"time":3,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"request/context","seq":4,"time":4,"data":{"provider":"p","model":"m"}}"#,
        r#"{"type":"request/header","seq":5,"time":5,"data":{"header":{"config":{"provider":"p","model":"m"},"system":"S","tools":[]},"reason":"initial"}}"#,
    ]
    .map(String::from)
    .to_vec();
    let lines = run_strings(2, header, &events).expect("migrates");
    assert_eq!(
        lines[5],
        r#"{"type":"system/message","seq":4,"time":3,"data":{"turn":1,"step":1,"message":{"id":"v2-to-v3-system-fee9f9045c3b00b0e6866ffb34c3659f74bac00f4394d8a7c0af6467dde19056","role":"system","source":{"kind":"system-prompt"},"content":[]}},"surfaceOp":"append"}"#
    );
    assert_eq!(
        lines[7],
        r#"{"type":"system/message","seq":6,"time":5,"data":{"turn":1,"step":1,"message":{"id":"v2-to-v3-system-3a7d42217f90ab9d9ed64a940088ef18bc2decec366fc380caa9f8ff415dba9d","role":"system","source":{"kind":"system-prompt"},"content":[{"type":"text","text":"S"}]}},"surfaceOp":{"op":"replace","startSeq":4,"endSeq":4},"sourceEventSeqs":[4]}"#
    );
    assert_eq!(
        lines[8],
        r#"{"type":"request/header","seq":7,"time":5,"data":{"header":{"config":{"provider":"p","model":"m"}},"reason":"initial"}}"#
    );
}

#[test]
fn legacy_v0_shapes_are_wrapped_renamed_and_given_deterministic_ids() {
    let header =
        r#"{"type":"session","version":0,"id":"L","createdAt":5,"cwd":"/w","delegationDepth":0}"#;
    let events: Vec<String> = [
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"message"}}}"#,
        r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"user/message","seq":2,"time":1,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
        r#"{"type":"tool/result","seq":3,"time":2,"data":{"turn":1,"step":1,"callId":"c","content":[{"type":"text","text":"r"}],"isError":false},"surfaceOp":"append"}"#,
        r#"{"type":"step/end","seq":4,"time":3,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"turn/end","seq":5,"time":3,"data":{"turn":1,"reason":{"kind":"error","step":1,"message":"boom"}}}"#,
    ]
    .map(String::from)
    .to_vec();
    let lines = run_strings(0, header, &events).expect("migrates");
    assert_eq!(
        lines[1],
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#
    );
    assert_eq!(
        lines[4],
        r#"{"type":"user/message","seq":3,"time":1,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"id":"legacy-message:L:2","role":"user"},"surfaceOp":"append"}"#
    );
    assert_eq!(
        lines[5],
        r#"{"type":"tool/result","seq":4,"time":2,"data":{"turn":1,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":"c"},"toolCallId":"c","content":[{"type":"text","text":"r"}],"isError":false,"id":"legacy-message:L:3"}},"surfaceOp":"append"}"#
    );
    assert_eq!(
        lines[7],
        r#"{"type":"turn/end","seq":6,"time":3,"data":{"turn":1,"reason":{"kind":"error","error":{"message":"boom","code":"UNKNOWN"}}}}"#
    );
    let unknown = [
        events[0].clone(),
        r#"{"type":"x/y","seq":1,"time":1,"data":{},"ignorable":true}"#.into(),
    ];
    assert_eq!(
        run_strings(0, header, &unknown)
            .expect_err("refused")
            .to_string(),
        r#"format v0 contains unknown historical event type "x/y" at seq 1; migration refuses unknown historical events even when ignorable"#
    );
}

mod hostile {
    use super::*;
    use proptest::prelude::*;

    /// Event shapes the edges treat specially, with holes for the generated numbers.
    const TEMPLATES: [&str; 12] = [
        r#"{"type":"turn/start","seq":S,"time":T,"data":{"turn":N}}"#,
        r#"{"type":"turn/end","seq":S,"time":T,"data":{"turn":N,"reason":{"kind":"completed"}}}"#,
        r#"{"type":"step/start","seq":S,"time":T,"data":{"turn":N,"step":N}}"#,
        r#"{"type":"step/end","seq":S,"time":T,"data":{"turn":N,"step":N}}"#,
        r#"{"type":"assistant/chunk","seq":S,"time":T,"data":{"turn":N,"step":N,"chunk":{"type":"text-delta","index":0,"text":"a"}}}"#,
        r#"{"type":"assistant/chunk","seq":S,"time":T,"data":{"turn":N,"step":N,"chunk":{"type":"finish","reason":{"kind":"stop"}}}}"#,
        r#"{"type":"assistant/message","seq":S,"time":T,"data":{"turn":N,"step":N,"message":{"id":"m","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}}},"sourceEventSeqs":[N],"surfaceOp":"append"}"#,
        r#"{"type":"user/message","seq":S,"time":T,"data":{"content":[{"type":"text","text":"u"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
        r#"{"type":"request/header","seq":S,"time":T,"data":{"header":{"config":{"provider":"p","model":"m"},"system":"sN"},"reason":"initial"}}"#,
        r#"{"type":"tool/call","seq":S,"time":T,"data":{"turn":N,"step":N,"callId":"c","name":"x","arguments":"{}"}}"#,
        r#"{"type":"agent/inbox/spliced","seq":S,"time":T,"data":{"target":"next-turn","start":0,"inserted":[{"role":"user","id":"i","content":[],"source":{"kind":"user"}}]}}"#,
        r#"{"type":"session/end-seed","seq":S,"time":T,"data":{}}"#,
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// Any sequence of these shapes, from any version, is migrated or refused without a
        /// panic; a migrated log has dense seqs.
        #[test]
        fn any_log_is_migrated_or_refused_never_a_panic(
            picks in proptest::collection::vec((0..TEMPLATES.len(), 0u8..4, 0i64..5), 0..40),
            version in 0u32..4,
            seeded in any::<bool>(),
        ) {
            let header = match (version, seeded) {
                (0 | 1, false) => format!(r#"{{"type":"session","version":{version},"id":"h","createdAt":0,"cwd":"/w","delegationDepth":0}}"#),
                (0 | 1, true) => format!(r#"{{"type":"session","version":{version},"id":"h","createdAt":0,"cwd":"/w","parentSession":"p","seedLength":3,"delegationDepth":1}}"#),
                (_, s) => format!(r#"{{"type":"session","version":{version},"id":"h","createdAt":0,"cwd":"/w","isSeeded":{s},"delegationDepth":0}}"#),
            };
            let mut time = 0;
            let events: Vec<String> = picks
                .iter()
                .enumerate()
                .map(|(seq, (t, n, dt))| {
                    time += dt;
                    TEMPLATES[*t]
                        .replace("\"seq\":S", &format!("\"seq\":{seq}"))
                        .replace("\"time\":T", &format!("\"time\":{time}"))
                        .replace('N', &n.to_string())
                })
                .collect();
            if let Ok(lines) = run_strings(version, &header, &events) {
                for (i, line) in lines.iter().skip(1).enumerate() {
                    let seq = parse(line).ok().and_then(|v| v.as_object()?.get("seq")?.as_safe_u64());
                    prop_assert_eq!(seq, Some(i as u64), "{}", line);
                }
            }
        }
    }
}

#[test]
fn a_decoded_v1_payload_is_held_to_the_frozen_inventory() {
    let tail = [
        r#"{"type":"step/end","seq":5,"time":5,"data":{"turn":1,"step":1,"tier":"x"}}"#.to_owned(),
    ];
    let refused = run_strings(1, V1_HEADER, &v1_log(&tail)).expect_err("refused");
    assert_eq!(
        refused.to_string(),
        r#"@deepseek-ai/dsh-session-format-v1-to-v2 refuses this format v1 Session: step/end 5 data has unexpected member "tier""#
    );
}

#[test]
fn the_v2_source_audit_refuses_unaudited_members_and_kinds() {
    let header = r#"{"type":"session","version":2,"id":"s","createdAt":5,"cwd":"/w","isSeeded":false,"delegationDepth":0}"#;
    let log = |message: &str| {
        vec![
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#.to_owned(),
            r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#.to_owned(),
            format!(
                r#"{{"type":"user/message","seq":2,"time":1,"data":{message},"surfaceOp":"append"}}"#
            ),
        ]
    };
    let ok = r#"{"id":"u","role":"user","content":[{"type":"text","text":"t"}],"source":{"kind":"user"}}"#;
    assert!(run_strings(2, header, &log(ok)).is_ok());
    let extra = r#"{"id":"u","role":"user","content":[],"source":{"kind":"user"},"foo":1}"#;
    assert_eq!(
        run_strings(2, header, &log(extra)).expect_err("refused").to_string(),
        "@deepseek-ai/dsh-session-format-v2-to-v3 refuses this format v2 Session: user/message data has unexpected field foo"
    );
    let chart = r#"{"id":"u","role":"user","content":[{"type":"chart"}],"source":{"kind":"user"}}"#;
    assert_eq!(
        run_strings(2, header, &log(chart))
            .expect_err("refused")
            .to_string(),
        r#"format v2 user/message at seq 2 data.content[0]: cannot safely transform unclassified message content kind "chart""#
    );
    let textless =
        r#"{"id":"u","role":"user","content":[{"type":"text"}],"source":{"kind":"user"}}"#;
    let refused = run_strings(2, header, &log(textless))
        .expect_err("refused")
        .to_string();
    assert!(
        refused.starts_with(r#"@deepseek-ai/dsh-session-format-v2-to-v3 refuses this format v2 Session: format v2 user/message at seq 2 data.content[0]: invalid message content kind "text": SessionFormatError: "#),
        "{refused}"
    );
    let chunk = [
        r#"{"type":"assistant/chunk","seq":0,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"finish"}}}"#.to_owned(),
    ];
    assert_eq!(
        run_strings(2, header, &chunk)
            .expect_err("refused")
            .to_string(),
        "format v2 to v3 cannot safely transform unclassified event assistant/chunk"
    );
}
