//! DSH's payload rules, case by case, with their exact texts.
use super::*;
use crate::json::parse;

/// Check `data` as the payload of a `ty` event at `seq`, generation `version`.
fn check(version: u32, ty: &str, seq: u64, data: &str) -> Result<(), String> {
    let data = parse(data).expect("JSON");
    let event = Object::new()
        .with("type", ty)
        .with("seq", Value::Number(seq as f64))
        .with("data", data);
    check_semantics(version, ty, &event, seq).map_err(|r| {
        assert!(r.wrapped, "a format rule, not a migration refusal");
        assert_eq!(r.from, version);
        r.message
    })
}

fn refused(version: u32, ty: &str, seq: u64, data: &str) -> String {
    match check(version, ty, seq, data) {
        Err(message) => message,
        Ok(()) => panic!("{ty} {data} was admitted"),
    }
}

const TEXT: &str = r#"[{"type":"text","text":"hi"}]"#;

fn user_message(id: &str, content: &str, source: &str) -> String {
    format!(r#"{{"role":"user","id":"{id}","content":{content},"source":{source}}}"#)
}

const HEADER: &str = r#"{"config":{"provider":"deepseek","model":"chat","maxTokens":8,"stop":["x"]},"adapterDefaults":{"maxTokens":true},"system":"s","tools":[{"name":"bash","description":"","parameters":{}}]}"#;

#[test]
fn valid_events_of_several_types_pass() {
    let header = format!(r#"{{"header":{HEADER},"reason":"initial","startsSeries":true}}"#);
    let failure = r#"{"message":"m","code":"c","status":429,"providerRetryAfterMs":5}"#;
    let cases: Vec<(&str, u64, String)> = vec![
        ("request/header", 6, header),
        ("turn/start", 0, r#"{"turn":1}"#.into()),
        ("turn/end", 9, r#"{"turn":1,"reason":{"kind":"completed"}}"#.into()),
        (
            "turn/end",
            9,
            r#"{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"hook","reason":"r"}}}"#
                .into(),
        ),
        ("turn/end", 9, r#"{"turn":1,"reason":{"kind":"future"}}"#.into()),
        (
            "llm/retry",
            5,
            format!(
                r#"{{"retryId":"r","turn":1,"step":1,"provider":"p","mode":"normal","policyKey":"k","retry":3,"maxRetries":3,"delayMs":0,"failure":{failure}}}"#
            ),
        ),
        (
            "llm/retry",
            5,
            format!(
                r#"{{"retryId":"r","turn":1,"step":1,"provider":"p","mode":"always","policyKey":"k","retry":9,"delayMs":1.5,"failure":{failure}}}"#
            ),
        ),
        (
            "session/title",
            4,
            r#"{"title":"t","messageSeqs":[],"source":{"kind":"provider","provider":"p","model":{"provider":"p","model":"m"}}}"#.into(),
        ),
        (
            "session/title",
            4,
            r#"{"title":"t","messageSeqs":[3,0],"source":{"kind":"user"}}"#.into(),
        ),
        (
            "user/message",
            2,
            user_message("m1", TEXT, r#"{"kind":"user","rpcId":"r"}"#),
        ),
        (
            "user/message",
            2,
            user_message("m1", "[]", r#"{"kind":"some-future-kind","x":1}"#),
        ),
        (
            "tool/result",
            3,
            r#"{"turn":1,"step":1,"message":{"id":"m","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[{"type":"chart"}]}],"source":{"kind":"tool","callId":"c"}}}"#.into(),
        ),
        (
            "compaction/summary",
            7,
            format!(
                r#"{{"compactionId":"k","summary":{TEXT},"shadowedRange":{{"start":1,"end":4}},"shadowedSeqs":[1,2,4],"shadowedTokenCount":0,"provider":"p","model":"m","rawOutput":[],"llmStreamCall":true}}"#
            ),
        ),
        (
            "schedule/change",
            1,
            r#"{"version":1,"operation":"create","schedule":{"id":"s","kind":"every","prompt":"p","everySeconds":300,"scheduledAt":"2024-02-29T23:59:59.999Z"}}"#.into(),
        ),
        ("compaction/start", 1, r#"{"compactionId":"k","turn":null}"#.into()),
        ("session/end-seed", 1, "{}".into()),
    ];
    for (ty, seq, data) in cases {
        assert_eq!(check(0, ty, seq, &data), Ok(()), "{ty} {data}");
    }
}

#[test]
fn request_header_tools_must_be_an_array_of_schemas() {
    let with_tools = |tools: &str| {
        format!(
            r#"{{"header":{{"config":{{"provider":"p","model":"m"}},"tools":{tools}}},"reason":"initial"}}"#
        )
    };
    assert_eq!(
        refused(0, "request/header", 6, &with_tools("{}")),
        "request/header 6 header tools must be an array"
    );
    assert_eq!(
        refused(0, "request/header", 6, &with_tools("[1]")),
        "request/header 6 header tools[0] must be a JSON object"
    );
    assert_eq!(
        refused(
            0,
            "request/header",
            6,
            &with_tools(
                r#"[{"name":"a","description":"","parameters":{}},{"name":"","description":"","parameters":{}}]"#
            )
        ),
        "request/header 6 header tools[1] name must be a non-empty string"
    );
    assert_eq!(
        refused(
            1,
            "request/header",
            6,
            r#"{"header":{"config":{"provider":"p","model":"m"},"adapterDefaults":{"maxTokens":true}},"reason":"initial"}"#
        ),
        "request/header 6 header adapter default maxTokens lacks config value"
    );
    assert_eq!(
        refused(
            0,
            "request/header",
            6,
            r#"{"header":{"config":{"provider":"p","model":"m","te\"mp":1}},"reason":"initial"}"#
        ),
        r#"request/header 6 header config has unexpected member "te\"mp""#
    );
}

#[test]
fn turn_end_reasons() {
    let end = |reason: &str| format!(r#"{{"turn":1,"reason":{reason}}}"#);
    assert_eq!(
        refused(0, "turn/end", 3, &end(r#""completed""#)),
        "turn/end 3 reason must be a JSON object"
    );
    assert_eq!(
        refused(0, "turn/end", 3, &end(r#"{"kind":"completed","x":1}"#)),
        r#"turn/end 3 reason has unexpected member "x""#
    );
    assert_eq!(
        refused(0, "turn/end", 3, &end(r#"{"kind":"aborted"}"#)),
        r#"turn/end 3 reason lacks required member "reason""#
    );
    assert_eq!(
        refused(
            0,
            "turn/end",
            3,
            &end(r#"{"kind":"aborted","reason":{"kind":"timeout"}}"#)
        ),
        "turn/end 3 reason abort kind must be one of user, parent, disposed, legacy"
    );
    assert_eq!(
        refused(
            0,
            "turn/end",
            3,
            &end(r#"{"kind":"error","error":{"message":"m","code":"c","status":600}}"#)
        ),
        "turn/end 3 reason error status must be 100 through 599"
    );
    assert_eq!(
        refused(0, "turn/end", 3, &end(r#"{"kind":7}"#)),
        "turn/end 3 reason kind must be a non-empty string"
    );
    assert_eq!(
        refused(
            0,
            "turn/end",
            3,
            r#"{"turn":-0,"reason":{"kind":"completed"}}"#
        ),
        "turn/end 3 turn must be a non-negative safe integer"
    );
}

#[test]
fn llm_retry_max_retries_follows_the_mode() {
    let retry = |mode: &str, tail: &str| {
        format!(
            r#"{{"retryId":"r","turn":1,"step":1,"provider":"p","mode":"{mode}","policyKey":"k","retry":4,"delayMs":10,"failure":{{"message":"m","code":"c"}}{tail}}}"#
        )
    };
    assert_eq!(
        refused(0, "llm/retry", 5, &retry("normal", r#","maxRetries":3"#)),
        "llm/retry 5 retry exceeds maxRetries"
    );
    assert_eq!(
        refused(0, "llm/retry", 5, &retry("normal", "")),
        "llm/retry 5 maxRetries must be a non-negative safe integer"
    );
    assert_eq!(
        refused(0, "llm/retry", 5, &retry("normal", r#","maxRetries":0"#)),
        "llm/retry 5 maxRetries must be positive"
    );
    assert_eq!(
        refused(0, "llm/retry", 5, &retry("always", r#","maxRetries":9"#)),
        "llm/retry 5 always mode must omit maxRetries"
    );
    assert_eq!(
        refused(0, "llm/retry", 5, &retry("sometimes", "")),
        "llm/retry 5 mode must be one of normal, always"
    );
}

#[test]
fn session_title_message_seqs_are_distinct_earlier_seqs() {
    let title = |seqs: &str| {
        format!(r#"{{"title":"t","messageSeqs":{seqs},"source":{{"kind":"fallback"}}}}"#)
    };
    assert_eq!(
        refused(0, "session/title", 4, &title("[1,2,1]")),
        "session/title 4 messageSeqs repeats seq 1"
    );
    assert_eq!(
        refused(0, "session/title", 4, &title("[1,4]")),
        "session/title 4 messageSeqs[1] must identify an earlier event"
    );
    assert_eq!(
        refused(0, "session/title", 4, &title("[-0]")),
        "session/title 4 messageSeqs[0] must be a non-negative safe integer"
    );
    assert_eq!(
        refused(0, "session/title", 4, &title("3")),
        "session/title 4 messageSeqs must be an array"
    );
    assert_eq!(
        refused(
            0,
            "session/title",
            4,
            r#"{"title":"t","messageSeqs":[],"source":{"kind":"llm"}}"#
        ),
        "session/title 4 source kind must be one of fallback, user"
    );
}

#[test]
fn user_message_shape() {
    let user = r#"{"kind":"user"}"#;
    assert_eq!(
        refused(0, "user/message", 2, &user_message("", TEXT, user)),
        "user/message 2 id must be a non-empty string"
    );
    assert_eq!(
        refused(
            0,
            "user/message",
            2,
            r#"{"role":"assistant","id":"m","content":[],"source":{"kind":"user"}}"#
        ),
        "user/message 2 role must be one of user"
    );
    assert_eq!(
        refused(0, "user/message", 2, &user_message("m", r#""hi""#, user)),
        "user/message 2 content must be an array"
    );
    assert_eq!(
        refused(
            0,
            "user/message",
            2,
            &user_message("m", r#"[{"type":"text"}]"#, user)
        ),
        r#"user/message 2 content[0] lacks required member "text""#
    );
    assert_eq!(
        refused(0, "user/message", 2, &user_message("m", TEXT, "null")),
        "user/message 2 source must be a JSON object"
    );
    assert_eq!(
        refused(
            0,
            "user/message",
            2,
            &user_message("m", TEXT, r#"{"kind":"user","form":"x"}"#)
        ),
        r#"user/message 2 source has unexpected member "form""#
    );
    assert_eq!(
        refused(
            0,
            "user/message",
            2,
            &user_message(
                "m",
                TEXT,
                r#"{"kind":"plugin","plugin":"p","form":"notice"}"#
            )
        ),
        "user/message 2 source summary must be a string"
    );
}

#[test]
fn tool_result_message_must_hold_its_call_result() {
    let result = |call: &str| {
        format!(
            r#"{{"turn":1,"step":1,"message":{{"id":"m","role":"user","content":[{{"type":"tool-result","toolCallId":"{call}","content":[]}}],"source":{{"kind":"tool","callId":"c"}}}}}}"#
        )
    };
    assert_eq!(
        refused(0, "tool/result", 3, &result("d")),
        "tool/result 3 message must contain exactly one tool-result block"
    );
    assert_eq!(check(0, "tool/result", 3, &result("c")), Ok(()));
}

#[test]
fn generation_dependent_rules() {
    // A delivery marker of another generation is not checked.
    let marker = r#"{"sessionId":"","throughSeq":9,"sessionFormatVersion":1}"#;
    assert_eq!(
        check(0, "session-log-deepseek/delivery-accepted", 2, marker),
        Ok(())
    );
    assert_eq!(
        refused(1, "session-log-deepseek/delivery-accepted", 2, marker),
        "session-log-deepseek/delivery-accepted 2 sessionId must be a non-empty string"
    );
    // V0 recalls cannot carry a captured format version; V1 ones up to 1.
    let recall = |extra: &str| {
        user_message(
            "m",
            TEXT,
            &format!(
                r#"{{"kind":"session-reference","form":"recall","version":1,"references":[{{"sessionId":"s","label":"","capturedThroughSeq":null,"compacted":false,"originalMessages":2,"retainedMessages":2,"omittedMessages":0,"omittedBytes":0,"truncated":false,"inputIndex":0{extra}}}]}}"#
            ),
        )
    };
    assert_eq!(check(0, "user/message", 2, &recall("")), Ok(()));
    assert_eq!(
        refused(
            0,
            "user/message",
            2,
            &recall(r#","capturedFormatVersion":1"#)
        ),
        r#"user/message 2 source references[0] has unexpected member "capturedFormatVersion""#
    );
    assert_eq!(
        check(
            1,
            "user/message",
            2,
            &recall(r#","capturedFormatVersion":1"#)
        ),
        Ok(())
    );
    assert_eq!(
        refused(
            1,
            "user/message",
            2,
            &recall(r#","capturedFormatVersion":2"#)
        ),
        "user/message 2 source references[0] capturedFormatVersion must be between 1 and 1"
    );
}

#[test]
fn legacy_goal_messages_must_render_their_change() {
    let change = r#"{"kind":"goal/change","version":1,"operation":"clear","cleared":{"id":"g","revision":2},"clearedAt":5}"#;
    let source =
        format!(r#"{{"kind":"goal","goalId":"g","revision":2,"round":0,"change":{change}}}"#);
    let rendered =
        r#"<goal_state>{\"cleared\":{\"id\":\"g\",\"revision\":2},\"clearedAt\":5}</goal_state>"#;
    let content = format!(r#"[{{"text":"{rendered}","type":"text"}}]"#);
    assert_eq!(
        check(0, "user/message", 2, &user_message("m", &content, &source)),
        Ok(())
    );
    assert_eq!(
        refused(0, "user/message", 2, &user_message("m", TEXT, &source)),
        "user/message 2 legacy goal content does not match its change"
    );
    // From V2 on the same source is an ordinary goal source, which has no `change`.
    assert_eq!(
        refused(2, "user/message", 2, &user_message("m", &content, &source)),
        r#"user/message 2 source has unexpected member "change""#
    );
}

#[test]
fn instants_and_schedule_ids() {
    for ok in ["2024-02-29T00:00:00.000Z", "0001-01-01T23:59:59.999Z"] {
        assert!(is_canonical_instant(ok), "{ok}");
    }
    for bad in [
        "2023-02-29T00:00:00.000Z",
        "0000-01-01T00:00:00.000Z",
        "2024-04-31T00:00:00.000Z",
        "2024-01-01T24:00:00.000Z",
        "2024-01-01T00:00:00Z",
        "2024-01-01T00:00:00.000+00:00",
        "2024-01-01 00:00:00.000Z",
    ] {
        assert!(!is_canonical_instant(bad), "{bad}");
    }
    assert_eq!(
        refused(
            0,
            "schedule/change",
            1,
            r#"{"version":1,"operation":"dispatch","id":"\ufeffs","acceptedAt":"2024-01-01T00:00:00.000Z"}"#
        ),
        "schedule/change 1 id must not have surrounding whitespace"
    );
    // U+0085 is Unicode whitespace but not JS whitespace.
    assert_eq!(
        check(
            0,
            "schedule/change",
            1,
            r#"{"version":1,"operation":"delete","id":"s\u0085"}"#
        ),
        Ok(())
    );
    assert_eq!(
        refused(
            0,
            "schedule/change",
            1,
            r#"{"version":1,"operation":"delete","id":"s","acceptedAt":"2024-01-01T00:00:00.000Z"}"#
        ),
        r#"schedule/change 1 data has unexpected member "acceptedAt""#
    );
}

#[test]
fn refusals_reach_the_chain_as_the_edges_format_errors() {
    let event = Object::new()
        .with("type", "turn/end")
        .with("seq", Value::Number(3.0))
        .with(
            "data",
            parse(r#"{"turn":1,"reason":{"kind":""}}"#).expect("JSON"),
        );
    let refusal =
        super::super::inventory::check_payload(0, "turn/end", &event, 3).expect_err("refused");
    assert_eq!(
        refusal.to_string(),
        "@deepseek-ai/dsh-session-format-v0-to-v1 refuses this format v0 Session: turn/end 3 reason kind must be a non-empty string"
    );
}

/// A decoded V1 event's payload is checked before the V1→V2 edge transforms it, so a bad
/// `command/done` kind is refused ahead of its consumed-chunk citation.
#[test]
fn decoded_v1_payloads_are_checked_before_the_edge_transforms_them() {
    let header = parse(
        r#"{"type":"session","version":1,"id":"s","createdAt":5,"cwd":"/w","delegationDepth":0}"#,
    )
    .expect("JSON");
    let Value::Object(header) = header else {
        panic!("header")
    };
    let run = |kind: &str| {
        let mut events = vec![
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#.to_owned(),
            r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#.to_owned(),
        ];
        for seq in 2..5 {
            events.push(format!(
                r#"{{"type":"assistant/chunk","seq":{seq},"time":{seq},"data":{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"y"}}}}}}"#
            ));
        }
        events
            .push(r#"{"type":"step/end","seq":5,"time":8,"data":{"turn":1,"step":1}}"#.to_owned());
        events.push(format!(
            r#"{{"type":"command/done","seq":6,"time":9,"data":{{"commandId":"c","kind":"{kind}","sourceEventSeq":3}}}}"#
        ));
        super::super::Chain::from_version(1, vec![])
            .run(
                header.clone(),
                events.iter().map(|e| parse(e).expect("JSON")),
            )
            .map(drop)
            .expect_err("refused")
            .message
    };
    assert_eq!(
        run("x"),
        "command/done 6 kind must be one of success, error"
    );
    assert_eq!(
        run("success"),
        "command/done 6 sourceEventSeq targets consumed assistant/chunk 3"
    );
}
