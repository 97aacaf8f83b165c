//! The V4 surface rules (later-format-spec §2.1–2.3, §5.1 cases 11, 12 and 27).

use super::*;
use crate::json::{parse, stringify};

fn ev(text: &str) -> Value {
    parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn system(seq: u64, op: &str, text: &str) -> Value {
    let content = if text.is_empty() {
        "[]".to_owned()
    } else {
        format!(r#"[{{"type":"text","text":"{text}"}}]"#)
    };
    ev(&format!(
        r#"{{"type":"system/message","seq":{seq},"time":1,"data":{{"turn":1,"step":1,"message":{{"id":"s{seq}","role":"system","content":{content},"source":{{"kind":"system-prompt"}}}}}},{op}}}"#
    ))
}

fn user(seq: u64, op: &str) -> Value {
    ev(&format!(
        r#"{{"type":"user/message","seq":{seq},"time":1,"data":{{"id":"u{seq}","role":"user","content":[{{"type":"text","text":"hi"}}],"source":{{"kind":"user"}}}},{op}}}"#
    ))
}

fn replace(start: u64, end: u64, sources: &str) -> String {
    format!(
        r#""sourceEventSeqs":{sources},"surfaceOp":{{"op":"replace","startSeq":{start},"endSeq":{end}}}"#
    )
}

fn fold(events: &[Value]) -> std::result::Result<SurfaceFold, String> {
    let mut f = SurfaceFold::new().with_model(SurfaceModel::V4);
    let lookup = |s: u64| usize::try_from(s).ok().and_then(|i| events.get(i));
    for e in events {
        f.apply(e, lookup).map_err(|e| e.to_string())?;
    }
    Ok(f)
}

#[test]
fn five_surface_types_and_the_v4_replace_spelling() {
    let log = [
        system(0, r#""surfaceOp":"append""#, "be brief"),
        user(1, r#""surfaceOp":"append""#),
        ev(
            r#"{"type":"developer/message","seq":2,"time":1,"data":{"turn":1,"step":1,"message":{"id":"d","role":"developer","content":[{"type":"text","text":"x"}],"source":{"kind":"goal"}}},"surfaceOp":"append"}"#,
        ),
        user(3, &replace(1, 2, "[1,2]")),
    ];
    let f = fold(&log).expect("fold");
    assert_eq!(f.nodes(), [0, 3]);
    assert_eq!(
        f.to_json(),
        r#"{"nodes":[0,3],"replaceGeneration":1,"contentGeneration":1,"replacements":[{"seq":3,"startSeq":1,"endSeq":2,"shadowedSeqs":[1,2]}]}"#
    );
    let v0_spelling = user(
        2,
        r#""sourceEventSeqs":[1],"surfaceOp":{"op":"replace","start":1,"end":1}"#,
    );
    assert!(fold(&[log[0].clone(), log[1].clone(), v0_spelling]).is_err());
}

#[test]
fn node_zero_holds_the_system_prompt() {
    let head = system(0, r#""surfaceOp":"append""#, "a");
    let u = user(1, r#""surfaceOp":"append""#);
    let by_user = user(2, &replace(0, 1, "[0,1]"));
    let e = fold(&[head.clone(), u.clone(), by_user]).expect_err("protected");
    assert!(e.contains("node 0 holds the system prompt"), "{e}");
    let by_system = system(2, &replace(0, 0, "[0]"), "b");
    assert_eq!(
        fold(&[head.clone(), u.clone(), by_system])
            .expect("ok")
            .nodes(),
        [2, 1]
    );
    let wide = system(2, &replace(0, 1, "[0,1]"), "b");
    assert!(fold(&[head.clone(), u.clone(), wide]).is_err());
    // A later system node has no protection: compaction may shadow it.
    let later = system(2, r#""surfaceOp":"append""#, "c");
    let compaction = user(3, &replace(1, 2, "[1,2]"));
    assert_eq!(
        fold(&[head, u, later, compaction]).expect("ok").nodes(),
        [0, 3]
    );
}

#[test]
fn assistant_messages_carry_no_sources_and_empty_nodes_derive_nothing() {
    let assistant = ev(
        r#"{"type":"assistant/message","seq":1,"time":1,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[]},"stream":[]},"sourceEventSeqs":[0],"surfaceOp":"append"}"#,
    );
    let e = fold(&[system(0, r#""surfaceOp":"append""#, ""), assistant]).expect_err("sources");
    assert!(e.contains("cannot carry sourceEventSeqs"), "{e}");
    let log = [
        system(0, r#""surfaceOp":"append""#, ""),
        user(1, r#""surfaceOp":"append""#),
        ev(
            r#"{"type":"assistant/message","seq":2,"time":1,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[]},"stream":[]},"surfaceOp":"append"}"#,
        ),
    ];
    let r = replay_with(SurfaceModel::V4, &log).expect("replay");
    assert_eq!(r.surface.nodes(), [0, 1, 2]);
    assert_eq!(
        r.messages.len(),
        1,
        "empty system and assistant nodes derive no message"
    );
    assert_eq!(
        stringify(&r.messages[0]),
        r#"{"id":"u1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}"#
    );
}

#[test]
fn a_tool_result_rewrite_may_change_only_message_content() {
    let result = |seq: u64, text: &str, op: &str| {
        ev(&format!(
            r#"{{"type":"tool/result","seq":{seq},"time":1,"data":{{"turn":1,"step":1,"message":{{"id":"r","role":"tool","source":{{"kind":"tool","callId":"c"}},"toolCallId":"c","content":[{{"type":"text","text":"{text}"}}]}}}},{op}}}"#
        ))
    };
    let original = result(0, "long", r#""surfaceOp":"append""#);
    let shorter = result(1, "short", &replace(0, 0, "[0]"));
    assert_eq!(fold(&[original.clone(), shorter]).expect("ok").nodes(), [1]);
    let other_id = ev(
        r#"{"type":"tool/result","seq":1,"time":1,"data":{"turn":1,"step":1,"message":{"id":"other","role":"tool","source":{"kind":"tool","callId":"c"},"toolCallId":"c","content":[]}},"sourceEventSeqs":[0],"surfaceOp":{"op":"replace","startSeq":0,"endSeq":0}}"#,
    );
    let e = fold(&[original, other_id]).expect_err("id changed");
    assert!(e.contains("may change only content"), "{e}");
}
