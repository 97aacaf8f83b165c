//! Batches written as DSH's writer wrote them: what the strict append refuses is kept with its
//! reader verdict, and a log written batch by batch this way is stored exactly as an import of
//! the resulting file stores it (a property over random batches).

use proptest::prelude::*;
use sessionlog_codec::format::event::NewEvent;
use sessionlog_codec::json::parse;

use crate::error::Error;
use crate::layout::meta::{SessionMeta, SourceEncoding, Verdict};
use crate::ops::append::AppendItem;
use crate::ops::import::ImportOptions;
use crate::store::Store;
use crate::test_support::empty;

fn event(text: &str) -> NewEvent {
    NewEvent::from_logged(&parse(text).expect("json")).expect("event")
}

const HEADER: &str =
    r#"{"type":"session","version":0,"id":"s","createdAt":1,"cwd":"/w","delegationDepth":0}"#;

fn stored_bytes(store: &Store, id: &str) -> Vec<u8> {
    let mut out = Vec::new();
    store.export(id, None, &mut out).expect("export");
    out
}

fn exported(store: &Store, id: &str) -> String {
    String::from_utf8(stored_bytes(store, id)).expect("utf-8")
}

/// Create `id` with `events` as DSH's seam does: header and first batch in one commit.
fn create(store: &Store, header: &str, encoding: SourceEncoding, events: Vec<NewEvent>) {
    let id = sessionlog_codec::format::header::parse_header(header.as_bytes())
        .expect("header")
        .id
        .to_string_lossy();
    let item = AppendItem::new(id, Some(0), events)
        .creating(header, encoding)
        .as_written();
    store
        .append_many(vec![item])
        .pop()
        .expect("one result")
        .expect("created");
}

fn append(
    store: &Store,
    id: &str,
    expected: Option<u64>,
    events: Vec<NewEvent>,
) -> crate::error::Result<crate::ops::append::AppendReceipt> {
    store
        .append_many(vec![AppendItem::new(id, expected, events).as_written()])
        .pop()
        .expect("one result")
}

/// A batch DSH's reader refuses (an unknown, non-ignorable type) is refused by the strict
/// append, and kept as written: the bytes are DSH's, the verdict is its reader's.
#[test]
fn a_batch_dsh_refuses_at_load_is_kept_with_its_verdict() {
    let (_t, store) = empty();
    let turn = event(r#"{"type":"turn/start","time":5,"data":{"turn":1}}"#);
    create(&store, HEADER, SourceEncoding::Jsonl, vec![turn]);
    assert_eq!(store.summary("s").expect("summary").verdict, Verdict::Clean);
    let future = event(r#"{"type":"future/event","time":6,"data":{"payload":1}}"#);
    let strict = store.append("s", Some(1), vec![future.clone()]);
    assert!(matches!(strict, Err(Error::Rejected { .. })), "{strict:?}");
    let receipt = append(&store, "s", Some(1), vec![future]).expect("as written");
    assert_eq!((receipt.first_seq, receipt.count), (1, 1));
    assert_eq!(
        exported(&store, "s"),
        format!(
            "{HEADER}\n{}\n{}\n",
            r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}"#,
            r#"{"type":"future/event","seq":1,"time":6,"data":{"payload":1}}"#
        )
    );
    let summary = store.summary("s").expect("summary");
    assert!(
        matches!(summary.verdict, Verdict::Unsupported(_)),
        "{:?}",
        summary.verdict
    );
    assert_eq!(summary.body_lines, 2);
    // The strict path refuses the log now; the seam goes on appending to it.
    let again = event(r#"{"type":"turn/end","time":7,"data":{"turn":1}}"#);
    assert!(matches!(
        store.append("s", Some(2), vec![again.clone()]),
        Err(Error::NotAppendable { .. })
    ));
    append(&store, "s", Some(2), vec![again]).expect("as written again");
    assert_matches_import(&store, "s");
}

/// A header with a version DSH refuses is kept too, under zstd as one frame per write.
#[test]
fn a_foreign_version_is_kept_under_zstd() {
    let (_t, store) = empty();
    let header = r#"{"type":"session","version":99,"id":"v99","createdAt":1,"cwd":"/w"}"#;
    let turn = event(r#"{"type":"turn/start","time":5,"data":{"turn":1}}"#);
    create(
        &store,
        header,
        SourceEncoding::JsonlZstd,
        vec![turn.clone()],
    );
    append(&store, "v99", Some(1), vec![turn]).expect("append");
    let mut plain = Vec::new();
    store
        .export(
            "v99",
            Some(crate::ops::export::ExportFormat::Jsonl),
            &mut plain,
        )
        .expect("export");
    let text = String::from_utf8(plain).expect("utf-8");
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.starts_with(header));
    let summary = store.summary("v99").expect("summary");
    assert!(matches!(summary.verdict, Verdict::Unsupported(_)));
    assert_eq!(store.meta(b"v99").expect("meta").map(|m| m.frames), Some(3));
    assert_matches_import(&store, "v99");
}

/// The seam keeps the store's own rules on seqs and torn tails: a stale seq on a clean log and
/// a deleted session write nothing.
#[test]
fn stale_seqs_and_deleted_sessions_are_still_refused() {
    let (_t, store) = empty();
    let turn = event(r#"{"type":"turn/start","time":5,"data":{"turn":1}}"#);
    create(&store, HEADER, SourceEncoding::Jsonl, vec![turn.clone()]);
    let before = exported(&store, "s");
    let stale = append(&store, "s", Some(7), vec![turn.clone()]);
    assert!(matches!(stale, Err(Error::StaleSeq { .. })), "{stale:?}");
    store.delete("s").expect("delete");
    let deleted = append(&store, "s", Some(1), vec![turn]);
    assert!(
        matches!(deleted, Err(Error::NotAppendable { .. })),
        "{deleted:?}"
    );
    store.undelete("s").expect("undelete");
    assert_eq!(exported(&store, "s"), before);
}

/// The metadata fields an import of the same bytes must agree on (the session's number, its
/// import time and its batch numbering are the store's own).
fn comparable(m: &SessionMeta) -> impl PartialEq + std::fmt::Debug {
    (
        (
            m.verdict.clone(),
            m.events,
            m.body_lines,
            m.committed_lines,
            m.committed_bytes,
            m.total_bytes,
            m.plaintext_bytes,
        ),
        (
            m.tail_bytes,
            m.frames,
            m.surface_error.clone(),
            m.surface_since_snapshot,
            m.activity_ms,
            m.inherited_cut,
            m.version,
        ),
    )
}

/// Every logical event of `id`, as text, or the error reading them gives.
fn events_of(store: &Store, id: &str) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    store
        .events(id, 0, None, &mut |seq, e| {
            out.push(format!("{seq} {}", sessionlog_codec::json::stringify(e)));
            Ok(())
        })
        .map_err(|e| e.to_string())?;
    Ok(out)
}

/// Session `id` as stored equals an import of its exported bytes into a fresh store: the same
/// metadata, the same logical events, and both stores verify clean.
fn assert_matches_import(store: &Store, id: &str) {
    let meta = store.require_meta(id.as_bytes()).expect("meta");
    let mut bytes = Vec::new();
    store.export(id, None, &mut bytes).expect("export");
    let (_t, fresh) = empty();
    let options = ImportOptions::default();
    match meta.source {
        SourceEncoding::Jsonl => fresh
            .import_jsonl("exported", &bytes[..], &options, &mut |_| {})
            .expect("import"),
        SourceEncoding::JsonlZstd => fresh
            .import_zstd("exported", &bytes, &options)
            .expect("import"),
    };
    let imported = fresh.require_meta(id.as_bytes()).expect("imported meta");
    assert_eq!(comparable(&meta), comparable(&imported));
    assert_eq!(events_of(store, id), events_of(&fresh, id));
    for (which, s) in [("appended", store), ("imported", &fresh)] {
        let report = s.verify(&[]).expect("verify");
        assert!(report.problems.is_empty(), "{which}: {:?}", report.problems);
    }
}

/// One event of a generated batch.
#[derive(Clone, Debug)]
enum Kind {
    /// A tool-kind user message on the surface.
    Message,
    /// A streamed assistant chunk (runs of them pack into one line).
    Chunk,
    /// A type DSH 0.1's reader refuses.
    Unknown,
    /// A type DSH 0.1's reader refuses, marked ignorable (V0's closed vocabulary still does).
    IgnorableUnknown,
    /// A tool result rewriting a seq that is not a tool result (the surface fold refuses it).
    BadRewrite,
    /// A turn end (after a seq gap it makes the reader's issue fatal).
    TurnEnd,
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        6 => Just(Kind::Message),
        4 => Just(Kind::Chunk),
        1 => Just(Kind::Unknown),
        1 => Just(Kind::IgnorableUnknown),
        1 => Just(Kind::BadRewrite),
        2 => Just(Kind::TurnEnd),
    ]
}

fn make(kind: &Kind, n: usize) -> NewEvent {
    event(&match kind {
        Kind::Message => format!(
            r#"{{"type":"user/message","time":{n},"data":{{"content":[{{"type":"text","text":"m{n}"}}],"source":{{"kind":"tool"}},"role":"user","id":"u{n}"}},"surfaceOp":"append"}}"#
        ),
        Kind::Chunk => format!(
            r#"{{"type":"assistant/chunk","time":{n},"data":{{"turn":1,"step":1,"kind":"text-delta","delta":"d{n}"}}}}"#
        ),
        Kind::Unknown => format!(r#"{{"type":"future/event","time":{n},"data":{{"n":{n}}}}}"#),
        Kind::IgnorableUnknown => {
            format!(r#"{{"type":"future/note","time":{n},"data":{{"n":{n}}},"ignorable":true}}"#)
        }
        Kind::BadRewrite => format!(
            r#"{{"type":"tool/result","time":{n},"data":{{"turn":1,"step":1,"message":{{"id":"t{n}","role":"user","source":{{"kind":"tool","callId":"c{n}"}},"content":[{{"type":"tool-result","toolCallId":"c{n}","content":[],"isError":false}}]}}}},"surfaceOp":{{"op":"replace","start":0,"end":0}},"sourceEventSeqs":[0]}}"#
        ),
        Kind::TurnEnd => format!(r#"{{"type":"turn/end","time":{n},"data":{{"turn":1}}}}"#),
    })
}

/// A generated batch: its events, and how far its expected seq misses the stored count
/// (a log DSH's reader already refuses takes it at the caller's seq).
fn batch() -> impl Strategy<Value = (Vec<Kind>, u8)> {
    (
        prop::collection::vec(kind(), 0..6),
        prop_oneof![8 => Just(0u8), 1 => 1u8..3],
    )
}

/// Cases of the property: 32 normally, 1,000 with `SESSIONLOG_NIGHTLY=1`.
fn cases() -> u32 {
    if std::env::var_os("SESSIONLOG_NIGHTLY").is_some_and(|v| v == "1") {
        1000
    } else {
        32
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// A log written batch by batch through the seam, whatever its batches, is stored as an
    /// import of the resulting file stores it (and a stale seq on a clean log writes nothing).
    #[test]
    fn a_log_written_batch_by_batch_equals_its_import(
        zstd in any::<bool>(),
        batches in prop::collection::vec(batch(), 1..8),
    ) {
        let (_t, store) = empty();
        let encoding = if zstd { SourceEncoding::JsonlZstd } else { SourceEncoding::Jsonl };
        let mut n = 0;
        let mut first = true;
        for (kinds, miss) in batches {
            let events: Vec<NewEvent> = kinds.iter().map(|k| { n += 1; make(k, n) }).collect();
            if first {
                create(&store, HEADER, encoding, events);
                first = false;
                continue;
            }
            let meta = store.require_meta(b"s").expect("meta");
            let expected = meta.events + u64::from(miss);
            let before = stored_bytes(&store, "s");
            match append(&store, "s", Some(expected), events) {
                Ok(_) => {}
                Err(Error::StaleSeq { .. }) => {
                    prop_assert!(miss > 0 && meta.verdict == Verdict::Clean);
                    prop_assert_eq!(stored_bytes(&store, "s"), before);
                }
                Err(e) => prop_assert!(false, "{e}"),
            }
            assert_matches_import(&store, "s");
        }
    }
}
