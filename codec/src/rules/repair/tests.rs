//! Unit tests of the repair rules (persistence-spec §4.5, §4.6; conformance cases 31 and 33).

use super::*;

fn ev(text: &str) -> Value {
    parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn log(lines: &[&str]) -> Vec<Value> {
    lines.iter().map(|l| ev(l)).collect()
}

fn texts(events: &[Value]) -> Vec<String> {
    events.iter().map(stringify).collect()
}

const TURN1: &str = r#"{"type":"turn/start","seq":0,"time":10,"data":{"turn":1}}"#;
const STEP1: &str = r#"{"type":"step/start","seq":1,"time":11,"data":{"turn":1,"step":1}}"#;
const CALL_A: &str = r#"{"type":"assistant/message","seq":2,"time":12,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"hi"},{"type":"tool-call","id":"a","name":"x","arguments":"{}"}],"id":"m"}},"surfaceOp":"append"}"#;

fn not_started(call: &str, seq: u64, time: u64, turn: u64, step: u64) -> String {
    format!(
        r#"{{"type":"tool/result","seq":{seq},"time":{time},"data":{{"turn":{turn},"step":{step},"message":{{"id":"interrupted-tool-result-{call}-{seq}","role":"user","source":{{"kind":"tool","callId":"{call}"}},"content":[{{"type":"tool-result","toolCallId":"{call}","isError":true,"content":[{{"type":"text","text":"{NOT_STARTED_TEXT}"}}]}}]}},"error":{{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}}}},"surfaceOp":"append"}}"#
    )
}

fn started(call: &str, seq: u64, time: u64, call_seq: u64) -> String {
    format!(
        r#"{{"type":"tool/result","seq":{seq},"time":{time},"data":{{"turn":1,"step":1,"message":{{"id":"interrupted-tool-result-{call}-{seq}","role":"user","source":{{"kind":"tool","callId":"{call}"}},"content":[{{"type":"tool-result","toolCallId":"{call}","isError":true,"content":[{{"type":"text","text":"{STARTED_TEXT}"}}]}}]}},"error":{{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}}}},"surfaceOp":"append","sourceEventSeqs":[{call_seq}]}}"#
    )
}

fn step_end(seq: u64, time: u64, step: u64) -> String {
    format!(r#"{{"type":"step/end","seq":{seq},"time":{time},"data":{{"turn":1,"step":{step}}}}}"#)
}

fn turn_end(seq: u64, time: u64) -> String {
    format!(
        r#"{{"type":"turn/end","seq":{seq},"time":{time},"data":{{"turn":1,"reason":{{"kind":"interrupted"}}}}}}"#
    )
}

#[test]
fn balanced_and_empty_logs_need_no_closers() {
    assert!(interrupted_turn_closers(&[]).is_empty());
    let closed = log(&[
        TURN1,
        r#"{"type":"turn/end","seq":1,"time":11,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        r#"{"type":"session/title","seq":2,"time":12,"data":{"title":"t"}}"#,
    ]);
    assert!(interrupted_turn_closers(&closed).is_empty());
    let standalone = log(&[r#"{"type":"hook/result","seq":0,"time":1,"data":{}}"#]);
    assert!(interrupted_turn_closers(&standalone).is_empty());
}

#[test]
fn open_turn_without_step_gets_only_turn_end() {
    let closers = interrupted_turn_closers(&log(&[TURN1]));
    assert_eq!(texts(&closers), [turn_end(1, 10)]);
}

#[test]
fn call_without_tool_call_event_is_not_started() {
    let closers = interrupted_turn_closers(&log(&[TURN1, STEP1, CALL_A]));
    assert_eq!(
        texts(&closers),
        [
            not_started("a", 3, 12, 1, 1),
            step_end(4, 12, 1),
            turn_end(5, 12)
        ]
    );
}

#[test]
fn recorded_tool_call_is_outcome_unknown_citing_its_seq() {
    let call = r#"{"type":"tool/call","seq":3,"time":13,"data":{"turn":1,"step":1,"callId":"a","name":"x","arguments":"{}"}}"#;
    let closers = interrupted_turn_closers(&log(&[TURN1, STEP1, CALL_A, call]));
    assert_eq!(
        texts(&closers),
        [started("a", 4, 13, 3), step_end(5, 13, 1), turn_end(6, 13)]
    );
}

#[test]
fn results_steps_and_turns_clear_pending_calls() {
    let result = r#"{"type":"tool/result","seq":3,"time":13,"data":{"turn":1,"step":1,"message":{"id":"r","role":"user","source":{"kind":"tool","callId":"a"},"content":[]}},"surfaceOp":"append"}"#;
    let closers = interrupted_turn_closers(&log(&[TURN1, STEP1, CALL_A, result]));
    assert_eq!(texts(&closers), [step_end(4, 13, 1), turn_end(5, 13)]);

    let end = r#"{"type":"step/end","seq":3,"time":13,"data":{"turn":1,"step":1}}"#;
    let closers = interrupted_turn_closers(&log(&[TURN1, STEP1, CALL_A, end]));
    assert_eq!(texts(&closers), [turn_end(4, 13)]);

    let restart = r#"{"type":"turn/start","seq":3,"time":13,"data":{"turn":1}}"#;
    let closers = interrupted_turn_closers(&log(&[TURN1, STEP1, CALL_A, restart]));
    assert_eq!(texts(&closers), [turn_end(4, 13)]);
}

#[test]
fn orphan_tool_call_produces_no_result() {
    let call = r#"{"type":"tool/call","seq":2,"time":12,"data":{"turn":1,"step":1,"callId":"zz","name":"x","arguments":"{}"}}"#;
    let closers = interrupted_turn_closers(&log(&[TURN1, STEP1, call]));
    assert_eq!(texts(&closers), [step_end(3, 12, 1), turn_end(4, 12)]);
}

#[test]
fn a_new_step_keeps_older_pending_calls_with_their_own_step() {
    let step2 = r#"{"type":"step/start","seq":3,"time":13,"data":{"turn":1,"step":2}}"#;
    let closers = interrupted_turn_closers(&log(&[TURN1, STEP1, CALL_A, step2]));
    assert_eq!(
        texts(&closers),
        [
            not_started("a", 4, 13, 1, 1),
            step_end(5, 13, 2),
            turn_end(6, 13)
        ]
    );
}

#[test]
fn calls_close_in_registration_order_and_re_registration_resets_the_start() {
    let two = r#"{"type":"assistant/message","seq":2,"time":12,"data":{"turn":1,"step":1,"message":{"content":[{"type":"tool-call","id":"b"},{"type":"tool-call","id":"a"}]}}}"#;
    let call_b = r#"{"type":"tool/call","seq":3,"time":13,"data":{"callId":"b"}}"#;
    let again = r#"{"type":"assistant/message","seq":4,"time":14,"data":{"turn":1,"step":1,"message":{"content":[{"type":"tool-call","id":"b"}]}}}"#;
    let closers = interrupted_turn_closers(&log(&[TURN1, STEP1, two, call_b]));
    assert_eq!(
        texts(&closers),
        [
            started("b", 4, 13, 3),
            not_started("a", 5, 13, 1, 1),
            step_end(6, 13, 1),
            turn_end(7, 13)
        ]
    );
    let closers = interrupted_turn_closers(&log(&[TURN1, STEP1, two, call_b, again]));
    assert_eq!(
        texts(&closers),
        [
            not_started("b", 5, 14, 1, 1),
            not_started("a", 6, 14, 1, 1),
            step_end(7, 14, 1),
            turn_end(8, 14)
        ]
    );
}

#[test]
fn missing_fields_are_undefined_and_null_turn_is_closed() {
    // `data.turn` missing: the turn is open with an undefined number, dropped by stringify;
    // a missing `time` on the last event is dropped too.
    let closers = interrupted_turn_closers(&log(&[
        r#"{"type":"turn/start","seq":0,"time":1,"data":{}}"#,
        r#"{"type":"hook/result","seq":1,"data":{}}"#,
    ]));
    assert_eq!(
        texts(&closers),
        [r#"{"type":"turn/end","seq":2,"data":{"reason":{"kind":"interrupted"}}}"#]
    );
    let null_turn = log(&[r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":null}}"#]);
    assert!(interrupted_turn_closers(&null_turn).is_empty());
}

#[test]
fn unreadable_data_is_a_type_error_and_no_closers() {
    let mut open = OpenTurn::new();
    open.observe(&ev(TURN1));
    assert!(open.is_open());
    open.observe(&ev(
        r#"{"type":"assistant/message","seq":1,"time":1,"data":{"turn":1}}"#,
    ));
    assert_eq!(
        open.type_error(),
        Some("TypeError: Cannot read properties of undefined (reading 'content')")
    );
    assert!(!open.is_open());
    assert!(open.closers(2, None).is_empty());
    let mut open = OpenTurn::new();
    open.observe(&ev(r#"{"type":"turn/start","seq":0,"time":1,"data":null}"#));
    assert_eq!(
        open.type_error(),
        Some("TypeError: Cannot read properties of null (reading 'turn')")
    );
}

#[test]
fn incremental_fold_survives_serde_at_every_prefix() {
    let call = r#"{"type":"tool/call","seq":3,"time":13,"data":{"turn":1,"step":1,"callId":"a"}}"#;
    let events = log(&[TURN1, STEP1, CALL_A, call]);
    let config = bincode::config::standard();
    let mut open = OpenTurn::new();
    for (i, e) in events.iter().enumerate() {
        let bytes = bincode::serde::encode_to_vec(&open, config).unwrap_or_default();
        let back: Option<(OpenTurn, usize)> =
            bincode::serde::decode_from_slice(&bytes, config).ok();
        assert_eq!(back.map(|b| b.0).as_ref(), Some(&open), "prefix {i}");
        open.observe(e);
        let time = e.as_object().and_then(|o| o.get("time"));
        assert_eq!(
            open.closers(i as u64 + 1, time),
            interrupted_turn_closers(&events[..=i]),
            "prefix {i}"
        );
    }
}

#[test]
fn end_seed_bytes_and_when_it_is_added() {
    assert_eq!(
        stringify(&end_seed(42, 1_700_000_000_000)),
        r#"{"type":"session/end-seed","seq":42,"time":1700000000000,"data":{}}"#
    );
    assert!(needs_end_seed(None));
    assert!(needs_end_seed(Some(&ev(TURN1))));
    let seed = end_seed(0, 5);
    assert!(!needs_end_seed(Some(&seed)));
    // Resuming again without new events adds nothing; a marker that is not last gets another.
    let log_after = [
        seed.clone(),
        ev(r#"{"type":"turn/start","seq":1,"time":1,"data":{"turn":1}}"#),
    ];
    assert!(needs_end_seed(log_after.last()));
}
