//! The live append path: generated batches appended live export exactly as DSH's JSONL writer
//! would have written them; every DSH append rule rejects with its message and leaves the store
//! unchanged; concurrent appenders never produce a gap or a duplicate seq.

use std::sync::Arc;

use proptest::prelude::*;
use sessionlog::codec::format::zstd::{compress_frame, BODY_FRAME_BYTES};
use sessionlog::codec::json::{self, Value};
use sessionlog::engine::{
    AppendItem, Durability, Error, ExportFormat, Options, SourceEncoding, Store,
};
use sessionlog_harness::gen::{session_batches, session_batches_v4, GenOptions, SessionFeed};

use crate::fixtures::{
    append_feed, ev, events_text, export_bytes, host_feed, listed_ids, new_event, temp_store,
};

const HEADER: &str =
    r#"{"type":"session","version":0,"id":"a","createdAt":1,"cwd":"/w","delegationDepth":0}"#;

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
    /// Live appends of generated batches, after a reopen, export byte-for-byte what DSH's JSONL
    /// backend writes for the same batches (the JSONL peer's file), and as `.jsonl.zstd` what
    /// Node's zlib writes: stored as `.jsonl.zstd`, a header frame plus one frame per batch as
    /// DSH's writer frames it; stored as `.jsonl`, a header frame plus the body (shorter than
    /// one body frame here) in one frame, however it was batched.
    #[test]
    fn live_appends_export_what_dsh_writes(index in 0u64..1000, events in 60u64..600) {
        let opts = GenOptions { sessions: 1, events_per_session: events, seed: 21, torn_fraction: 0.0 };
        let feed = session_batches(index, &opts);
        let dir = tempfile::tempdir().expect("tmp");
        let options = Options { durability: Durability::Buffered, ..Options::default() };
        // Created alone, then appended to; or created by its first batch (`AppendItem::creating`).
        let ways = [SourceEncoding::Jsonl, SourceEncoding::JsonlZstd].into_iter()
            .flat_map(|e| [(e, false), (e, true)]);
        for (encoding, with_first_batch) in ways {
            let path = dir.path().join(format!("{encoding:?}-{with_first_batch}"));
            {
                let store = Store::open(&path, options.clone()).expect("open");
                let mut batches = feed.batches.iter();
                if with_first_batch {
                    let first = batches.next().expect("a first batch");
                    let events = first.events.iter().map(new_event).collect();
                    let item = AppendItem::new(&feed.id, Some(0), events).creating(&feed.header_line, encoding);
                    let r = store.append_many(vec![item]).pop().expect("a result").expect("create with the first batch");
                    prop_assert_eq!(r.count, first.events.len() as u64);
                } else {
                    store.create_session(&feed.header_line, encoding).expect("create");
                }
                for batch in batches {
                    let r = store.append(&feed.id, Some(batch.first_seq), batch.events.iter().map(new_event).collect()).expect("append");
                    prop_assert_eq!(r.first_seq, batch.first_seq);
                }
            }
            let store = Store::open(&path, options.clone()).expect("reopen");
            let mut dsh = format!("{}\n", feed.header_line).into_bytes();
            let mut frames = compress_frame(&dsh).expect("frame");
            let header_len = dsh.len();
            for b in &feed.batches {
                dsh.extend_from_slice(b.text.as_bytes());
                if encoding == SourceEncoding::JsonlZstd {
                    frames.extend(compress_frame(b.text.as_bytes()).expect("frame"));
                }
            }
            if encoding == SourceEncoding::Jsonl {
                prop_assert!(dsh.len() - header_len < BODY_FRAME_BYTES);
                frames.extend(compress_frame(&dsh[header_len..]).expect("frame"));
            }
            let mut plain = Vec::new();
            store.export(&feed.id, Some(ExportFormat::Jsonl), &mut plain).expect("export");
            prop_assert!(plain == dsh, "plain export differs from DSH's bytes");
            let mut zstd = Vec::new();
            store.export(&feed.id, Some(ExportFormat::JsonlZstd), &mut zstd).expect("export");
            prop_assert!(zstd == frames, "zstd export differs from Node's frames");
            let v = store.verify(&[]).expect("verify");
            prop_assert!(v.problems.is_empty(), "{:?}", v.problems);
        }
    }
}

/// A store with session "a" holding a user message at seq 0, an assistant message at 1 and a
/// tool result at 2 (all on the surface).
fn seeded() -> (tempfile::TempDir, Store) {
    let (dir, store) = temp_store();
    store
        .create_session(HEADER, SourceEncoding::Jsonl)
        .expect("create");
    let batch = vec![
        ev(
            r#"{"type":"user/message","time":2,"data":{"content":[],"source":{"kind":"user"},"role":"user","id":"u1"},"surfaceOp":"append"}"#,
        ),
        ev(
            r#"{"type":"assistant/message","time":3,"data":{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","source":{"kind":"model","provider":"p","model":"m"},"content":[{"type":"text","text":"x"}]}},"surfaceOp":"append","sourceEventSeqs":[]}"#,
        ),
        ev(
            r#"{"type":"tool/result","time":4,"data":{"turn":1,"step":1,"message":{"id":"t1","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"out"}],"isError":false}]}},"surfaceOp":"append","sourceEventSeqs":[1]}"#,
        ),
    ];
    store.append("a", Some(0), batch).expect("seed batch");
    (dir, store)
}

/// Sessions created alone (`create_session`, an item with no events) store, list, append and
/// export exactly as DSH's files, survive a reopen, and a creation refuses a stored id and a
/// line that is no header.
#[test]
fn a_creation_alone_refuses_stored_ids_and_non_headers() {
    let opts = GenOptions {
        sessions: 2,
        events_per_session: 300,
        seed: 5,
        torn_fraction: 0.0,
    };
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("db");
    let (synced, deferred) = (session_batches(0, &opts), session_batches(1, &opts));
    {
        let store = Store::open(&path, Options::default()).expect("open");
        for feed in [&synced, &deferred] {
            store
                .create_session(&feed.header_line, SourceEncoding::Jsonl)
                .expect("create");
        }
        let again = store.create_session(&deferred.header_line, SourceEncoding::Jsonl);
        assert!(
            matches!(again, Err(Error::DuplicateSession { .. })),
            "{again:?}"
        );
        let bad = store.create_session(r#"{"type":"session"}"#, SourceEncoding::Jsonl);
        assert!(matches!(bad, Err(Error::Rejected { .. })), "{bad:?}");
        let listed = listed_ids(&store);
        assert!(listed.contains(&deferred.id), "{listed:?}");
        for feed in [&synced, &deferred] {
            append_feed(&store, feed);
        }
    }
    let store = Store::open(&path, Options::default()).expect("reopen");
    for feed in [&synced, &deferred] {
        assert!(
            export_bytes(&store, &feed.id) == feed.dsh_bytes(),
            "{} differs from DSH's bytes",
            feed.id
        );
    }
    let v = store.verify(&[]).expect("verify");
    assert!(v.problems.is_empty(), "{:?}", v.problems);
}

/// A session created by its first batch exists only if that batch is admitted: a refused batch,
/// a stored id, a header naming another session or a second item of the id create nothing, and
/// the call's other items commit as if alone.
#[test]
fn a_creating_item_creates_its_session_only_with_an_admitted_batch() {
    let (_dir, store) = seeded();
    let header = |id: &str| HEADER.replace(r#""id":"a""#, &format!(r#""id":"{id}""#));
    let (good, refused, other) = (header("good"), header("refused"), header("other"));
    let prompt = || {
        ev(
            r#"{"type":"user/message","time":9,"data":{"content":[],"source":{"kind":"user"},"role":"user","id":"u9"},"surfaceOp":"append"}"#,
        )
    };
    let bad = ev(r#"{"type":"hook/result","data":{"x":-0}}"#);
    let jsonl = SourceEncoding::Jsonl;
    let results = store.append_many(vec![
        AppendItem::new("good", Some(0), vec![prompt()]).creating(&good, jsonl),
        AppendItem::new("refused", Some(0), vec![prompt(), bad]).creating(&refused, jsonl),
        AppendItem::new("a", Some(3), vec![prompt()]).creating(HEADER, jsonl),
        AppendItem::new("mismatch", Some(0), vec![prompt()]).creating(&other, jsonl),
        AppendItem::new("good", Some(0), vec![prompt()]).creating(&good, jsonl),
    ]);
    assert_eq!(results[0].as_ref().map(|r| r.count).ok(), Some(1));
    let seq_and_rule = |r: &Result<_, Error>| match r {
        Err(Error::Rejected { seq, rule, .. }) => Some((*seq, rule.clone())),
        _ => None,
    };
    let (seq, rule) = seq_and_rule(&results[1]).expect("the bad batch is refused");
    assert_eq!(seq, Some(1));
    assert!(rule.contains("non-JSON-serializable"), "{rule}");
    assert!(
        matches!(&results[2], Err(Error::DuplicateSession { id, .. }) if id == "a"),
        "{:?}",
        results[2]
    );
    let (_, rule) = seq_and_rule(&results[3]).expect("a header naming another session");
    assert!(rule.contains(r#"names session "other""#), "{rule}");
    let (_, rule) = seq_and_rule(&results[4]).expect("the id's second item");
    assert!(rule.contains("once per append_many call"), "{rule}");
    assert_eq!(listed_ids(&store), ["a", "good"]);
    let mut text = Vec::new();
    store
        .export("good", Some(ExportFormat::Jsonl), &mut text)
        .expect("export");
    let text = String::from_utf8(text).expect("utf-8");
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(text.starts_with(&format!("{good}\n")), "{text}");
    // The refused session's id is free: created with an admitted batch, it exists.
    let retry = AppendItem::new("refused", Some(0), vec![prompt()]).creating(&refused, jsonl);
    let r = store.append_many(vec![retry]).pop().expect("a result");
    assert_eq!(r.expect("created").first_seq, 0);
    // A stored session's item that tries to create it again changes nothing.
    assert_eq!(events_text(&store, "a").expect("events").lines().count(), 3);
    let v = store.verify(&[]).expect("verify");
    assert!(v.problems.is_empty(), "{:?}", v.problems);
}

#[test]
fn every_append_rule_rejects_with_its_message_and_writes_nothing() {
    let cases: &[(&str, &str)] = &[
        (
            r#"{"type":"hook/result","data":{"x":-0}}"#,
            "carries non-JSON-serializable data",
        ),
        (
            r#"{"type":"request/header-delta","data":{}}"#,
            "unsupported legacy request/header-delta format",
        ),
        (
            r#"{"type":"request/header","data":{"reason":"fallback"}}"#,
            "legacy request/header reason \"fallback\"",
        ),
        (
            r#"{"type":"turn/start","data":{"turn":2},"surfaceOp":"append"}"#,
            "is not surface-eligible and cannot carry surfaceOp",
        ),
        (
            r#"{"type":"turn/start","data":{"turn":2},"sourceEventSeqs":[0]}"#,
            "cannot carry sourceEventSeqs",
        ),
        (
            r#"{"type":"user/message","data":{"id":"u2","role":"user","content":[],"source":{"kind":"user"}}}"#,
            "requires a surfaceOp marker",
        ),
        (
            r#"{"type":"user/message","data":{"id":"u2"},"surfaceOp":"prepend"}"#,
            "carries an invalid surfaceOp",
        ),
        (
            r#"{"type":"user/message","data":{"id":"u2"},"surfaceOp":{"op":"replace","start":0}}"#,
            "carries an invalid replace surfaceOp",
        ),
        (
            r#"{"type":"user/message","data":{"id":"u2"},"surfaceOp":{"op":"replace","start":7,"end":7},"sourceEventSeqs":[0]}"#,
            "start seq 7 not found in surface",
        ),
        (
            r#"{"type":"user/message","data":{"id":"u2"},"surfaceOp":{"op":"replace","start":2,"end":0},"sourceEventSeqs":[0,1,2]}"#,
            "is after end seq",
        ),
        (
            r#"{"type":"user/message","data":{"id":"u2"},"surfaceOp":{"op":"replace","start":0,"end":1},"sourceEventSeqs":[0]}"#,
            "must include every shadowed surface node; missing 1",
        ),
        (
            r#"{"type":"user/message","data":{"id":"u2"},"surfaceOp":"append","sourceEventSeqs":[0,0]}"#,
            "must not contain duplicates",
        ),
        (
            r#"{"type":"user/message","data":{"id":"u2"},"surfaceOp":"append","sourceEventSeqs":[9]}"#,
            "must reference earlier events",
        ),
        (
            r#"{"type":"user/message","data":{"id":"u2"},"surfaceOp":"append","sourceEventSeqs":[]}"#,
            "must not be empty except on assistant/message",
        ),
        (
            r#"{"type":"tool/result","data":{"turn":1,"step":1,"message":{"id":"t2","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[],"isError":false}]}},"surfaceOp":{"op":"replace","start":2,"end":2},"sourceEventSeqs":[2]}"#,
            "tool/result surface replacement may change only content",
        ),
        (
            r#"{"type":"tool/result","data":{"turn":1,"step":1,"message":{"id":"t1","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[],"isError":false}]}},"surfaceOp":{"op":"replace","start":1,"end":2},"sourceEventSeqs":[1,2]}"#,
            "tool/result surface replacement must rewrite exactly one current node",
        ),
        (
            r#"{"type":"future/thing","data":{}}"#,
            "unknown to DSH 0.1.0",
        ),
    ];
    for (event, message) in cases {
        let (_d, store) = seeded();
        let before = export_bytes(&store, "a");
        // The offending event rides last in a batch whose first events are valid: all or nothing.
        let batch = vec![ev(r#"{"type":"turn/start","data":{"turn":2}}"#), ev(event)];
        match store.append("a", Some(3), batch) {
            Err(Error::Rejected { id, seq, rule }) => {
                assert_eq!((id.as_str(), seq), ("a", Some(4)), "{event}");
                assert!(
                    rule.contains(message),
                    "{event}: {rule} should say {message}"
                );
            }
            other => panic!("{event}: expected a rejection, got {other:?}"),
        }
        assert_eq!(
            export_bytes(&store, "a"),
            before,
            "{event}: the store changed"
        );
        // The surface is unchanged too: a valid replace over the original nodes still works.
        let replace = ev(
            r#"{"type":"user/message","data":{"id":"s1","role":"user","content":[],"source":{"kind":"compact"}},"surfaceOp":{"op":"replace","start":0,"end":1},"sourceEventSeqs":[0,1]}"#,
        );
        store
            .append("a", Some(3), vec![replace])
            .unwrap_or_else(|e| panic!("{event}: state leaked: {e}"));
    }
}

#[test]
fn a_tool_result_rewrite_keeping_the_id_is_accepted() {
    let (_d, store) = seeded();
    let rewrite = ev(
        r#"{"type":"tool/result","data":{"turn":1,"step":1,"message":{"id":"t1","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"[pruned]"}],"isError":false}]}},"surfaceOp":{"op":"replace","start":2,"end":2},"sourceEventSeqs":[2]}"#,
    );
    let r = store.append("a", Some(3), vec![rewrite]).expect("rewrite");
    assert_eq!(r.first_seq, 3);
}

#[test]
fn stale_expected_seq_and_empty_batches() {
    let (_d, store) = seeded();
    let before = export_bytes(&store, "a");
    match store.append(
        "a",
        Some(2),
        vec![ev(r#"{"type":"turn/start","data":{"turn":2}}"#)],
    ) {
        Err(Error::StaleSeq {
            expected, actual, ..
        }) => assert_eq!((expected, actual), (2, 3)),
        other => panic!("expected StaleSeq, got {other:?}"),
    }
    let r = store.append("a", Some(3), Vec::new()).expect("empty batch");
    assert_eq!((r.first_seq, r.count), (3, 0));
    assert_eq!(
        export_bytes(&store, "a"),
        before,
        "an empty batch writes nothing"
    );
    assert!(matches!(
        store.append("nope", None, Vec::new()),
        Err(Error::UnknownSession { .. })
    ));
}

#[test]
fn appends_to_a_torn_import_are_refused_until_repaired() {
    let (_d, store) = temp_store();
    let text = format!("{HEADER}\n{{\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{{\"turn\":1}}}}\n{{\"type\":");
    crate::fixtures::import_bytes(&store, "torn", text.as_bytes(), false).expect("import");
    match store.append(
        "a",
        None,
        vec![ev(r#"{"type":"turn/start","data":{"turn":2}}"#)],
    ) {
        Err(Error::NotAppendable { reason, .. }) => assert!(reason.contains("torn"), "{reason}"),
        other => panic!("expected NotAppendable, got {other:?}"),
    }
}

#[test]
fn concurrent_appenders_never_leave_gaps_or_duplicates() {
    let (_d, store) = temp_store();
    let store = Arc::new(store);
    for s in 0..4 {
        let header = HEADER.replace("\"id\":\"a\"", &format!("\"id\":\"s{s}\""));
        store
            .create_session(&header, SourceEncoding::Jsonl)
            .expect("create");
    }
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let mut ok = 0;
                for i in 0..200 {
                    let id = format!("s{}", (t + i) % 4);
                    // Racing writers on one session: expected seqs are read, then may be stale.
                    let batch = vec![ev(&format!(
                        r#"{{"type":"hook/result","data":{{"t":{t},"i":{i}}}}}"#
                    ))];
                    if i % 3 == 0 {
                        let items = vec![AppendItem::new(&id, None, batch)];
                        ok += store
                            .append_many(items)
                            .into_iter()
                            .filter(Result::is_ok)
                            .count();
                    } else if store.append(&id, None, batch).is_ok() {
                        ok += 1;
                    }
                }
                ok
            })
        })
        .collect();
    let total: usize = threads.into_iter().map(|t| t.join().expect("thread")).sum();
    assert_eq!(total, 8 * 200);
    let mut events = 0;
    for s in 0..4 {
        let text = events_text(&store, &format!("s{s}")).expect("events");
        for (i, line) in text.lines().enumerate() {
            let v = json::parse(line).expect("event");
            assert_eq!(
                v.as_object()
                    .and_then(|o| o.get("seq"))
                    .and_then(Value::as_safe_integer),
                Some(i as i64)
            );
        }
        events += text.lines().count();
    }
    assert_eq!(events, 8 * 200);
    assert!(store.verify(&[]).expect("verify").problems.is_empty());
}

/// A store in strict mode (DSH's relationship rules checked at every append), of the
/// generator's host (`image/offload` registered: the V4 sessions hold offloads).
fn strict_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("tmp");
    let options = Options {
        durability: Durability::Buffered,
        strict_appends: true,
        ..sessionlog_harness::gen::host_options(Options::default())
    };
    let store = Store::open(dir.path(), options).expect("open");
    (dir, store)
}

/// Host three sessions generated by `batches` (`events` events each, from `seed`), live.
fn host_generated(
    store: &Store,
    batches: fn(u64, &GenOptions) -> SessionFeed,
    events: u64,
    seed: u64,
) {
    let opts = GenOptions {
        sessions: 3,
        events_per_session: events,
        seed,
        torn_fraction: 0.0,
    };
    for i in 0..opts.sessions {
        host_feed(store, &batches(i, &opts));
    }
}

#[test]
fn strict_mode_enforces_dsh_s_invariants_and_generated_sessions_obey_them() {
    let (_dir, store) = strict_store();
    host_generated(&store, session_batches, 400, 31);
    store
        .create_session(HEADER, SourceEncoding::Jsonl)
        .expect("create");
    let before = export_bytes(&store, "a");
    let batch = vec![
        ev(r#"{"type":"turn/start","data":{"turn":1}}"#),
        ev(r#"{"type":"step/start","data":{"turn":1,"step":2}}"#),
    ];
    match store.append("a", Some(0), batch) {
        Err(Error::Rejected { seq, rule, .. }) => {
            assert_eq!(seq, Some(1));
            assert!(
                rule.ends_with("step/start expected step 1 in turn 1, got 2"),
                "{rule}"
            );
        }
        other => panic!("expected an invariant rejection, got {other:?}"),
    }
    assert_eq!(export_bytes(&store, "a"), before);
    let ok = vec![
        ev(r#"{"type":"turn/start","data":{"turn":1}}"#),
        ev(r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}"#),
    ];
    store.append("a", Some(0), ok).expect("a well-formed turn");
}

/// Strict V4 sessions answer to DSH 0.2's lifecycle relationships; generated V4 sessions obey
/// them, and a batch that breaks one is refused whole with DSH's text.
#[test]
fn strict_mode_enforces_dsh_0_2_relationships_on_v4_sessions() {
    let (_dir, store) = strict_store();
    host_generated(&store, session_batches_v4, 3_000, 32);
    let header = r#"{"type":"session","version":4,"id":"v4","createdAt":1,"isSeeded":false,"delegationDepth":0}"#;
    store
        .create_session(header, SourceEncoding::Jsonl)
        .expect("create");
    let bad = vec![
        ev(r#"{"type":"turn/start","data":{"turn":1}}"#),
        ev(r#"{"type":"step/start","data":{"turn":1,"step":2}}"#),
    ];
    match store.append("v4", Some(0), bad) {
        Err(Error::Rejected { seq, rule, .. }) => {
            assert_eq!(seq, Some(1));
            assert_eq!(
                rule,
                "step/start does not match the open turn and next step"
            );
        }
        other => panic!("expected a relationship rejection, got {other:?}"),
    }
    let unsettled = vec![
        ev(r#"{"type":"turn/start","data":{"turn":1}}"#),
        ev(r#"{"type":"step/start","data":{"turn":1,"step":1}}"#),
        ev(
            r#"{"type":"assistant/message","data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":"c","name":"ls","arguments":"{}"}]},"stream":[]},"surfaceOp":"append"}"#,
        ),
        ev(r#"{"type":"step/end","data":{"turn":1,"step":1}}"#),
    ];
    match store.append("v4", Some(0), unsettled) {
        Err(Error::Rejected { seq, rule, .. }) => {
            assert_eq!(
                (seq, rule.as_str()),
                (Some(3), "step/end leaves unresolved tool call c")
            );
        }
        other => panic!("expected a relationship rejection, got {other:?}"),
    }
    assert_eq!(
        store.messages_at("v4", None).expect("messages"),
        Vec::<sessionlog::codec::json::Value>::new()
    );
}
