//! DSH 0.2's lifecycle relationships, case by case.

use super::V4Relations;
use crate::json::parse;
use crate::rules::open_turn::INTERRUPTED_NOT_STARTED;

fn check(log: &[&str]) -> Result<(), String> {
    let mut r = V4Relations::default();
    for e in log {
        r.accept(&parse(e).expect("JSON"))?;
    }
    Ok(())
}

const T1: &str = r#"{"type":"turn/start","seq":0,"data":{"turn":1}}"#;
const S1: &str = r#"{"type":"step/start","seq":1,"data":{"turn":1,"step":1}}"#;
const CALL: &str = r#"{"type":"assistant/message","seq":2,"data":{"turn":1,"step":1,"message":{"content":[{"type":"tool-call","id":"c","name":"ls","arguments":"{}"}]}},"surfaceOp":"append"}"#;
const STARTED: &str = r#"{"type":"tool/call","seq":3,"data":{"turn":1,"step":1,"callId":"c","name":"ls","arguments":"{}"}}"#;
const RESULT: &str = r#"{"type":"tool/result","seq":4,"data":{"turn":1,"step":1,"message":{"toolCallId":"c"}},"surfaceOp":"append"}"#;
const E1: &str = r#"{"type":"step/end","seq":5,"data":{"turn":1,"step":1}}"#;
const TE: &str = r#"{"type":"turn/end","seq":6,"data":{"turn":1,"reason":{"kind":"completed"}}}"#;

#[test]
fn a_settled_turn_passes_and_an_open_tail_is_allowed() {
    assert_eq!(check(&[T1, S1, CALL, STARTED, RESULT, E1, TE]), Ok(()));
    assert_eq!(check(&[T1, S1, CALL]), Ok(()));
}

#[test]
fn numbering_enclosure_and_settlement_are_dsh_s() {
    let t2 = r#"{"type":"turn/start","seq":0,"data":{"turn":2}}"#;
    assert_eq!(
        check(&[t2]),
        Err("turn/start does not open the expected turn".into())
    );
    assert_eq!(
        check(&[T1, S1, CALL, STARTED, E1]),
        Err("step/end leaves unresolved tool call c".into())
    );
    assert_eq!(
        check(&[T1, S1, CALL, RESULT]),
        Err("not-started error requires an object".into())
    );
    assert_eq!(
        check(&[T1, S1, CALL, STARTED, STARTED]),
        Err("tool/call c does not match one advertised tool call".into())
    );
    assert_eq!(
        check(&[T1, S1, CALL, STARTED, RESULT, RESULT]),
        Err("tool/result c has no advertised tool lifecycle".into())
    );
    let system = r#"{"type":"system/message","seq":2,"data":{"turn":1,"step":2,"message":{}},"surfaceOp":"append"}"#;
    assert_eq!(
        check(&[T1, S1, system]),
        Err("system/message does not match an open turn and step".into())
    );
    let header = r#"{"type":"request/header","seq":0,"data":{"header":{}}}"#;
    assert_eq!(
        check(&[header]),
        Err("request/header is outside an open turn".into())
    );
    assert_eq!(
        check(&[
            T1,
            S1,
            E1.replace("\"seq\":5", "\"seq\":2").as_str(),
            TE.replace("\"seq\":6", "\"seq\":3").as_str()
        ]),
        Ok(())
    );
    assert_eq!(
        check(&[T1, S1, TE]),
        Err("turn/end does not match the open turn with no open step".into())
    );
}

#[test]
fn the_interrupted_repair_form_is_exact() {
    let repair = |text: &str| {
        format!(
            r#"{{"type":"tool/result","seq":3,"data":{{"turn":1,"step":1,"message":{{"id":"interrupted-tool-result-c-3","toolCallId":"c","isError":true,"content":[{{"type":"text","text":"{text}"}}]}},"error":{{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}}}},"surfaceOp":"append"}}"#
        )
    };
    assert_eq!(
        check(&[T1, S1, CALL, &repair(INTERRUPTED_NOT_STARTED)]),
        Ok(())
    );
    assert_eq!(
        check(&[T1, S1, CALL, &repair("other")]),
        Err("tool/result c is not the exact TOOL_NOT_STARTED repair".into())
    );
}

#[test]
fn the_system_head_is_protected_and_titles_cite_human_prompts() {
    let head =
        r#"{"type":"system/message","seq":2,"data":{"turn":1,"step":1},"surfaceOp":"append"}"#;
    let user =
        r#"{"type":"user/message","seq":3,"data":{"source":{"kind":"user"}},"surfaceOp":"append"}"#;
    let compact = r#"{"type":"user/message","seq":4,"data":{"source":{"kind":"compact-checkpoint"}},"sourceEventSeqs":[2,3],"surfaceOp":{"op":"replace","startSeq":2,"endSeq":3}}"#;
    assert_eq!(
        check(&[T1, S1, head, user, compact]),
        Err("surface replacement cannot shadow the protected system head".into())
    );
    let title = |refs: &str, kind: &str| {
        format!(
            r#"{{"type":"session/title","seq":4,"data":{{"title":"t","messageSeqs":{refs},"source":{{"kind":"{kind}"}}}}}}"#
        )
    };
    assert_eq!(
        check(&[T1, S1, head, user, &title("[3]", "fallback")]),
        Ok(())
    );
    assert_eq!(
        check(&[T1, S1, head, user, &title("[2]", "fallback")]),
        Err(
            "session/title messageSeqs must cite distinct earlier human user/message events".into()
        )
    );
    assert_eq!(
        check(&[T1, S1, head, user, &title("[3]", "user")]),
        Err("session/title messageSeqs must be empty exactly for a user title".into())
    );
}

/// Run `log` and report the failure DSH would: the first decided one, else a held crossing.
fn verdict(log: &[&str]) -> Result<(), String> {
    let mut r = V4Relations::default();
    for e in log {
        r.accept(&parse(e).expect("JSON"))?;
    }
    r.finish().map_or(Ok(()), Err)
}

#[test]
fn compaction_transactions_and_orphans() {
    let start = r#"{"type":"compaction/start","seq":0,"data":{"compactionId":"k","turn":null}}"#;
    let t1 = r#"{"type":"turn/start","seq":1,"data":{"turn":1}}"#;
    let end_seed = r#"{"type":"session/end-seed","seq":2,"data":{"inherited":true}}"#;
    let end =
        r#"{"type":"compaction/end","seq":2,"data":{"compactionId":"k","turn":null,"error":{}}}"#;
    // A turn crossing an open compaction stands unless an end-seed makes it an orphan.
    assert_eq!(
        verdict(&[start, t1]),
        Err("turn/start crosses an open compaction".into())
    );
    assert_eq!(
        verdict(&[start, t1, end]),
        Err("turn/start crosses an open compaction".into())
    );
    assert_eq!(verdict(&[start, t1, end_seed]), Ok(()));
    let unsummarized =
        r#"{"type":"compaction/end","seq":1,"data":{"compactionId":"k","turn":null}}"#;
    assert_eq!(
        verdict(&[start, unsummarized]),
        Err("successful compaction/end requires one summary".into())
    );
    let stray = r#"{"type":"compaction/end","seq":0,"data":{"compactionId":"k","turn":null}}"#;
    assert_eq!(
        verdict(&[stray]),
        Err("compaction/end has no matching compaction/start".into())
    );
    let in_turn = r#"{"type":"compaction/start","seq":1,"data":{"compactionId":"k","turn":2}}"#;
    assert_eq!(
        verdict(&[T1, in_turn]),
        Err("compaction/start does not match the open turn".into())
    );
}

#[test]
fn retry_chains_and_ptc_dispatches() {
    let header =
        r#"{"type":"request/header","seq":2,"data":{"header":{"config":{"provider":"p"}}}}"#;
    let retry = |seq: u64, n: u64| {
        format!(
            r#"{{"type":"llm/retry","seq":{seq},"data":{{"turn":1,"step":1,"provider":"p","policyKey":"x","retryId":"r","retry":{n}}}}}"#
        )
    };
    assert_eq!(
        verdict(&[T1, S1, header, &retry(3, 1), &retry(4, 2)]),
        Ok(())
    );
    assert_eq!(
        verdict(&[T1, S1, header, &retry(3, 2)]),
        Err("llm/retry skips its policy attempt sequence".into())
    );
    let started = r#"{"type":"llm/retry-started","seq":3,"data":{"turn":1,"step":1,"retryId":"r","retry":1}}"#;
    assert_eq!(
        verdict(&[T1, S1, header, started]),
        Err("llm/retry-started pairs no prior scheduled attempt".into())
    );
    let dispatch = r#"{"type":"tool/ptc-dispatch","seq":2,"data":{"subCallId":"s","rootCallId":"r","parentCallId":"r"}}"#;
    assert_eq!(
        verdict(&[T1, S1, dispatch]),
        Err("PTC dispatch has no unique start".into())
    );
}

#[test]
fn ownership_facts_are_decided_with_the_header_and_the_cut() {
    let mut r = V4Relations::default();
    let marker = |seq: u64, id: &str| {
        format!(
            r#"{{"type":"session-log-deepseek/delivery-accepted","seq":{seq},"data":{{"sessionFormatVersion":4,"throughSeq":0,"sessionId":"{id}"}}}}"#
        )
    };
    let catalog = |seq: u64, child: &str| {
        format!(
            r#"{{"type":"subagent/catalog","seq":{seq},"data":{{"version":0,"childId":"{child}","childCreatedAt":1,"mode":"one-shot"}}}}"#
        )
    };
    for e in [marker(1, "parent"), catalog(2, "c"), catalog(3, "c")] {
        r.owned(&parse(&e).expect("JSON"));
    }
    assert_eq!(r.owner_failure("child", true, 4), None, "all inherited");
    assert_eq!(
        r.owner_failure("child", true, 1),
        Some("current-generation delivery marker names the wrong Session".into())
    );
    assert_eq!(
        r.owner_failure("parent", false, 0),
        Some("duplicate catalog child c".into())
    );
    let mut bad = V4Relations::default();
    bad.owned(&parse(r#"{"type":"subagent/catalog","seq":0,"data":{"version":2,"childId":"c","childCreatedAt":1,"mode":"one-shot"}}"#).expect("JSON"));
    assert_eq!(
        bad.owner_failure("s", false, 0),
        Some("subagent/catalog requires a supported versioned catalog fact".into())
    );
}
