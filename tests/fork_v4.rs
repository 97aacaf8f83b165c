//! Fork of V4 sessions (DSH 0.2's `buildForkSeed`): no `OPEN_TURN` refusal; the child is the
//! shared prefix, the `{inherited:true}` marker and the `forked` closers.

use sessionlog::codec::json::{parse, stringify, Value};
use sessionlog::codec::rules::surface::{replay_with, SurfaceModel};
use sessionlog::engine::{ExportFormat, Verdict};
use sessionlog_harness::gen::{session_batches_v4, GenOptions};

use crate::fixtures::{all_events, export_bytes, import_bytes, temp_host_store, temp_store};

const HEADER: &str = r#"{"type":"session","version":4,"id":"parent","createdAt":1,"cwd":"/w","isSeeded":false,"delegationDepth":0}"#;

/// A turn left open inside its first step, with one assistant tool call (`c1`).
const OPEN_STEP: [&str; 3] = [
    r#"{"type":"turn/start","seq":0,"time":10,"data":{"turn":1}}"#,
    r#"{"type":"step/start","seq":1,"time":11,"data":{"turn":1,"step":1}}"#,
    r#"{"type":"assistant/message","seq":2,"time":12,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"read","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}},"stream":[]},"surfaceOp":"append"}"#,
];

/// later-format-spec §5.1 case 25, byte for byte (the child's `createdAt` is the fork's time).
#[test]
fn a_fork_inside_a_step_writes_dsh_s_child_file() {
    let rows = OPEN_STEP;
    let parent = format!("{HEADER}\n{}\n", rows.join("\n"));
    let (_t, store) = temp_store();
    import_bytes(&store, "parent", parent.as_bytes(), true).expect("import");
    let report = store.fork("parent", Some(2), "child").expect("fork");
    assert_eq!((report.seed, report.closers), (3, 3));
    let child = String::from_utf8(export_bytes(&store, "child")).expect("UTF-8");
    let (header, body) = child.split_once('\n').expect("a header line");
    let header = parse(header).expect("JSON");
    let created_at = header
        .as_object()
        .and_then(|h| h.get("createdAt"))
        .expect("createdAt");
    assert_eq!(
        stringify(&header),
        format!(
            r#"{{"type":"session","version":4,"id":"child","createdAt":{},"cwd":"/w","parentSession":"parent","isSeeded":true,"delegationDepth":0}}"#,
            stringify(created_at)
        )
    );
    let not_started = "The history inherited by this branch has no record of this tool call starting. The parent session may have executed it after the fork point. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";
    let expected = [
        rows[0].to_owned(),
        rows[1].to_owned(),
        rows[2].to_owned(),
        r#"{"type":"session/end-seed","seq":3,"time":12,"data":{"inherited":true}}"#.to_owned(),
        format!(
            r#"{{"type":"tool/result","seq":4,"time":12,"data":{{"turn":1,"step":1,"message":{{"id":"forked-tool-result-c1-4","role":"tool","toolCallId":"c1","isError":true,"source":{{"kind":"tool","callId":"c1"}},"content":[{{"type":"text","text":"{not_started}"}}]}},"error":{{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}}}},"surfaceOp":"append"}}"#
        ),
        r#"{"type":"step/end","seq":5,"time":12,"data":{"turn":1,"step":1}}"#.to_owned(),
        r#"{"type":"turn/end","seq":6,"time":12,"data":{"turn":1,"reason":{"kind":"forked"}}}"#
            .to_owned(),
    ];
    assert_eq!(body, expected.join("\n") + "\n");
    let summary = store
        .list()
        .expect("list")
        .into_iter()
        .find(|s| s.id == "child")
        .expect("child listed");
    assert_eq!((summary.verdict, summary.events), (Verdict::Clean, 7));
    let messages = store.messages_at("child", None).expect("messages");
    assert_eq!(
        messages.len(),
        2,
        "the assistant call and its forked result"
    );
    // The child file is a valid V4 log: it re-imports cleanly with the same answers.
    let (_t2, again) = temp_store();
    import_bytes(&again, "child", child.as_bytes(), true).expect("re-import");
    assert_eq!(
        again.messages_at("child", None).expect("messages"),
        messages
    );
}

/// Forks of generated V4 sessions at many boundaries, in and out of turns: the child's answers
/// equal a naive V4 replay of its log, its file re-imports cleanly, and forks of forks work.
#[test]
fn forks_of_generated_v4_sessions_answer_like_a_replay() {
    let opts = GenOptions {
        sessions: 2,
        events_per_session: 3_000,
        seed: 5,
        torn_fraction: 0.0,
    };
    let mut mid_turn = 0;
    for i in 0..opts.sessions {
        let feed = session_batches_v4(i, &opts);
        let (_t, store) = temp_host_store();
        crate::fixtures::host_feed(&store, &feed);
        let events = all_events(&store, &feed.id);
        for (k, at) in (0..events.len() as u64).step_by(29).enumerate() {
            let child = format!("{}-fork-{k}", feed.id);
            store.fork(&feed.id, Some(at), &child).expect("fork");
            let child_events = all_events(&store, &child);
            let closers = child_events.len() as u64 - at - 2;
            mid_turn += usize::from(closers > 0);
            let naive = replay_with(SurfaceModel::V4, &child_events).expect("replay");
            assert_eq!(
                store.messages_at(&child, None).expect("messages"),
                naive.messages,
                "{child}"
            );
            assert_eq!(
                store.surface_at(&child, None).expect("surface").to_json(),
                naive.surface.to_json(),
                "{child}"
            );
            let file = export_bytes(&store, &child);
            let (_t2, again) = temp_host_store();
            let report = import_bytes(&again, &child, &file, true).expect("re-import");
            assert_eq!(report.events, child_events.len() as u64);
            assert_eq!(all_events(&again, &child), child_events);
            let mut frames = Vec::new();
            store
                .export(&child, Some(ExportFormat::JsonlZstd), &mut frames)
                .expect("zstd export");
            let (_t3, zstd) = temp_host_store();
            zstd.import_zstd(&child, &frames, &Default::default())
                .expect("zstd re-import");
            assert_eq!(export_bytes(&zstd, &child), frames);
            if k == 3 {
                let grandchild = format!("{child}-again");
                store
                    .fork(&child, None, &grandchild)
                    .expect("fork of a fork");
                let g = all_events(&store, &grandchild);
                assert_eq!(&g[..child_events.len()], &child_events[..]);
                let naive = replay_with(SurfaceModel::V4, &g).expect("replay");
                assert_eq!(
                    store.messages_at(&grandchild, None).expect("messages"),
                    naive.messages
                );
            }
        }
    }
    assert!(mid_turn > 10, "boundaries inside turns: {mid_turn}");
}

#[test]
fn a_fork_of_an_empty_v4_session_holds_only_the_marker() {
    let (_t, store) = temp_store();
    store
        .create_session(HEADER, sessionlog::engine::SourceEncoding::Jsonl)
        .expect("create");
    store.fork("parent", None, "child").expect("fork");
    let events = all_events(&store, "child");
    assert_eq!(events.len(), 1);
    let o = events[0].as_object().expect("object");
    assert_eq!(
        o.get("type").and_then(Value::as_str),
        Some("session/end-seed")
    );
    assert_eq!(
        stringify(o.get("data").expect("data")),
        r#"{"inherited":true}"#
    );
}

/// V4 crash repair: the torn tail is cut, the interrupted turn is closed with DSH 0.2's
/// `interrupted` closers, and the repaired file re-imports clean; resume adds the end-seed.
#[test]
fn repair_closes_an_interrupted_v4_turn() {
    let call = r#"{"type":"tool/call","seq":3,"time":13,"data":{"turn":1,"step":1,"callId":"c1","name":"read","arguments":"{}"}}"#;
    let rows = [OPEN_STEP[0], OPEN_STEP[1], OPEN_STEP[2], call];
    let committed = format!("{HEADER}\n{}\n", rows.join("\n"));
    let torn = format!("{committed}{{\"type\":\"tool/res");
    let (_t, store) = temp_store();
    let report = import_bytes(&store, "parent", torn.as_bytes(), false).expect("import");
    assert_eq!(report.verdict, Verdict::Torn);
    let repaired = store.resume("parent").expect("resume");
    assert_eq!((repaired.closers, repaired.end_seed), (3, true));
    let file = String::from_utf8(export_bytes(&store, "parent")).expect("UTF-8");
    let added = file
        .strip_prefix(&committed)
        .expect("the committed bytes are kept");
    let lines: Vec<&str> = added.lines().collect();
    assert_eq!(lines.len(), 4);
    assert!(lines[0].starts_with(r#"{"type":"tool/result","seq":4,"time":13,"data":{"turn":1,"step":1,"message":{"id":"interrupted-tool-result-c1-4","role":"tool","toolCallId":"c1","isError":true"#), "{}", lines[0]);
    assert!(lines[0].ends_with(r#""error":{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}},"surfaceOp":"append","sourceEventSeqs":[3]}"#), "{}", lines[0]);
    assert_eq!(
        lines[1],
        r#"{"type":"step/end","seq":5,"time":13,"data":{"turn":1,"step":1}}"#
    );
    assert_eq!(
        lines[2],
        r#"{"type":"turn/end","seq":6,"time":13,"data":{"turn":1,"reason":{"kind":"interrupted"}}}"#
    );
    assert!(
        lines[3].starts_with(r#"{"type":"session/end-seed","seq":7,"#),
        "{}",
        lines[3]
    );
    let (_t2, again) = temp_store();
    let report = import_bytes(&again, "parent", file.as_bytes(), true).expect("re-import");
    assert_eq!(report.events, 8);
    assert_eq!(
        again.messages_at("parent", None).expect("messages"),
        store.messages_at("parent", None).expect("messages")
    );
}

/// A V4 fork's listing activity is its inherited prefix's last human prompt: what an import of
/// the child's own file computes from its events.
#[test]
fn a_v4_fork_inherits_the_listing_activity_of_its_prefix() {
    let opts = GenOptions {
        sessions: 1,
        events_per_session: 3_000,
        seed: 5,
        torn_fraction: 0.0,
    };
    let feed = session_batches_v4(0, &opts);
    let (_t, store) = temp_host_store();
    crate::fixtures::host_feed(&store, &feed);
    let activity = |store: &sessionlog::engine::Store, id: &str| {
        let listed = store.list().expect("list");
        listed
            .iter()
            .find(|s| s.id == id)
            .expect("listed")
            .activity_ms
    };
    let events = all_events(&store, &feed.id).len() as u64;
    let mut prompted = 0;
    for (k, at) in (0..events).step_by(29).chain([events - 1]).enumerate() {
        let child = format!("{}-fork-{k}", feed.id);
        store.fork(&feed.id, Some(at), &child).expect("fork");
        let (_t2, again) = temp_host_store();
        import_bytes(&again, &child, &export_bytes(&store, &child), true).expect("re-import");
        let inherited = activity(&store, &child);
        assert_eq!(inherited, activity(&again, &child), "{child}");
        prompted += usize::from(inherited.is_some());
    }
    assert!(prompted > 1, "forks after a human prompt: {prompted}");
}
