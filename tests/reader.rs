//! DSH reader conformance through the engine's public API (persistence-spec §8, cases 17–30,
//! 39, 40): for each hostile or damaged log, the import verdict is DSH's own message (without its
//! `corrupt session log: ` / `corrupt Zstandard session log: ` prefix), the logical events are
//! the valid contiguous prefix DSH would load, export gives back the input byte for byte, strict
//! import agrees with the verdict, and nothing panics. Inputs that are not sessions are refused
//! and leave the store empty.
//!
//! Where DSH would then repair the log, the test checks what the engine hands a repair: the
//! committed prefix (`truncateTo`, seen through the cross-encoding export, which frames only the
//! committed region) and the closers of [`interrupted_turn_closers`] over the exposed events.

use sessionlog::codec::format::zstd::compress_frame;
use sessionlog::codec::json::{parse, Value};
use sessionlog::codec::rules::repair::interrupted_turn_closers;
use sessionlog::engine::{Error, ExportFormat, ImportOptions, Store, Verdict};

use crate::fixtures::{
    assert_empty, events_text, export_as, export_bytes, fixtures, import_bytes, names_ending,
    temp_store,
};

const H: &str =
    r#"{"type":"session","version":0,"id":"r","createdAt":1,"cwd":"/w","delegationDepth":0}"#;

fn ev(seq: u64, ty: &str, data: &str) -> String {
    format!(r#"{{"type":"{ty}","seq":{seq},"time":5,"data":{data}}}"#)
}

fn start(seq: u64) -> String {
    ev(seq, "turn/start", r#"{"turn":1}"#)
}

fn end(seq: u64) -> String {
    ev(
        seq,
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
    )
}

fn hook(seq: u64) -> String {
    ev(seq, "hook/result", "{}")
}

/// `H` then each line with `\n`, then `tail` verbatim.
fn jsonl(lines: &[String], tail: &str) -> Vec<u8> {
    let mut text = format!("{H}\n");
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    text.push_str(tail);
    text.into_bytes()
}

fn frame(plain: &str) -> Vec<u8> {
    compress_frame(plain.as_bytes()).unwrap_or_else(|e| panic!("compress: {e}"))
}

/// A DSH-shaped `.jsonl.zstd`: the header frame, then one frame per part.
fn zstd_log(parts: &[String]) -> Vec<u8> {
    let mut bytes = frame(&format!("{H}\n"));
    for p in parts {
        bytes.extend(frame(p));
    }
    bytes
}

/// Lines joined with `\n` after each, as one frame's plaintext.
fn batch(lines: &[String]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// Import `bytes` (text or zstd) in preserve mode and check the verdict, the logical events,
/// byte-identical export, verify, and that strict import agrees. Returns the store.
fn check(
    bytes: &[u8],
    zstd: bool,
    verdict: &Verdict,
    events: &[String],
) -> (tempfile::TempDir, Store) {
    let import = |store: &Store, strict: bool| {
        if zstd {
            let options = ImportOptions {
                strict,
                ..Default::default()
            };
            store.import_zstd("input", bytes, &options)
        } else {
            import_bytes(store, "input", bytes, strict)
        }
    };
    let (tmp, store) = temp_store();
    let report = import(&store, false).unwrap_or_else(|e| panic!("import failed: {e}"));
    assert_eq!(&report.verdict, verdict);
    assert_eq!(report.events, events.len() as u64);
    assert_eq!(
        export_bytes(&store, "r"),
        bytes,
        "export is not byte-identical"
    );
    let expected: String = events.iter().map(|e| format!("{e}\n")).collect();
    assert_eq!(events_text(&store, "r").expect("events"), expected);
    let problems = store.verify(&[]).expect("verify").problems;
    assert!(problems.is_empty(), "{problems:?}");

    let (_strict_tmp, strict_store) = temp_store();
    match (import(&strict_store, true), verdict) {
        (Ok(r), Verdict::Clean) => assert_eq!(r.verdict, Verdict::Clean),
        (Err(Error::StrictRejected { verdict: v, .. }), _) if *verdict != Verdict::Clean => {
            assert_eq!(v, verdict.to_string());
            assert_empty(&strict_store);
        }
        (other, _) => panic!("strict import of a {verdict} log: {other:?}"),
    }
    (tmp, store)
}

/// The committed prefix of a stored `.jsonl` session (what DSH truncates to): its cross-encoding
/// export frames only the committed region; decoded back, it is that prefix of the file.
fn committed_prefix(store: &Store) -> Vec<u8> {
    let framed = export_as(store, "r", Some(ExportFormat::JsonlZstd));
    let (_tmp, other) = temp_store();
    other
        .import_zstd("framed", &framed, &ImportOptions::default())
        .unwrap_or_else(|e| panic!("re-import of the framed export: {e}"));
    export_as(&other, "r", Some(ExportFormat::Jsonl))
}

fn closers_for(store: &Store) -> Vec<Value> {
    let text = events_text(store, "r").expect("events");
    let events: Vec<Value> = text
        .lines()
        .map(|l| parse(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    interrupted_turn_closers(&events)
}

fn refused(bytes: &[u8], zstd: bool, why: &str) {
    let (_tmp, store) = temp_store();
    let result = if zstd {
        store.import_zstd("input", bytes, &ImportOptions::default())
    } else {
        import_bytes(&store, "input", bytes, false)
    };
    match result {
        Err(Error::NotASession { reason, .. }) => {
            assert!(reason.contains(why), "{reason:?} should say {why:?}")
        }
        other => panic!("expected NotASession ({why}), got {other:?}"),
    }
    assert_empty(&store);
}

// 17
#[test]
fn raw_torn_tail_after_an_open_turn_keeps_the_prefix() {
    let lines: Vec<String> = std::iter::once(start(0)).chain((1..8).map(hook)).collect();
    let bytes = jsonl(&lines, r#"{"type":"assistant/chunk","seq":8,"ti"#);
    let (_tmp, store) = check(&bytes, false, &Verdict::Torn, &lines);
    assert_eq!(committed_prefix(&store), jsonl(&lines, ""));
    let closers = closers_for(&store);
    assert_eq!(
        closers
            .iter()
            .map(sessionlog::codec::json::stringify)
            .collect::<Vec<_>>(),
        [
            r#"{"type":"turn/end","seq":8,"time":5,"data":{"turn":1,"reason":{"kind":"interrupted"}}}"#
        ]
    );
}

// 18
#[test]
fn raw_unparsable_line_is_tail_after_the_last_turn_end_and_fatal_before_one() {
    let prefix = [start(0), hook(1), end(2)];
    let bytes = jsonl(&prefix, &format!("{{not json\n{}\n", hook(3)));
    let (_tmp, store) = check(&bytes, false, &Verdict::Torn, &prefix);
    assert_eq!(committed_prefix(&store), jsonl(&prefix, ""));
    assert!(closers_for(&store).is_empty());

    let bytes = jsonl(&[start(0), hook(1), "{not json".into(), end(2)], "");
    let verdict = Verdict::Corrupt("unparsable committed event at line 3".into());
    check(&bytes, false, &verdict, &[start(0), hook(1)]);
    // An empty line is unparsable too.
    let bytes = jsonl(&[start(0), String::new(), end(1)], "");
    let verdict = Verdict::Corrupt("unparsable committed event at line 2".into());
    check(&bytes, false, &verdict, &[start(0)]);
}

// 19
#[test]
fn raw_seq_gap_is_tail_after_the_last_turn_end_and_fatal_before_one() {
    let prefix = [start(0), end(1)];
    let bytes = jsonl(&[start(0), end(1), hook(5)], "");
    let (_tmp, store) = check(&bytes, false, &Verdict::Torn, &prefix);
    assert_eq!(committed_prefix(&store), jsonl(&prefix, ""));

    let bytes = jsonl(&[start(0), hook(5), end(6)], "");
    let verdict =
        Verdict::Corrupt("seq gap in committed region at line 2 (expected 1, got 5)".into());
    check(&bytes, false, &verdict, &[start(0)]);
    // The gap row itself holds the turn/end: thrown at once.
    let bytes = jsonl(&[start(0), end(3)], "");
    let verdict =
        Verdict::Corrupt("seq gap in committed region at line 2 (expected 1, got 3)".into());
    check(&bytes, false, &verdict, &[start(0)]);
}

// 20
#[test]
fn packed_rows_arity_mismatch_is_fatal_and_a_skipping_row_is_dropped_whole() {
    let bad_dt = r#"{"type":"text-chunks","seq0":1,"time0":5,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b","c"]}}"#;
    let bytes = jsonl(&[start(0), bad_dt.into(), end(4)], "");
    let verdict = Verdict::Corrupt("unparsable committed event at line 2".into());
    check(&bytes, false, &verdict, &[start(0)]);

    let skipping = r#"{"type":"text-chunks","seq0":3,"time0":5,"data":{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["a","b","c"]}}"#;
    let prefix = [start(0), end(1)];
    let bytes = jsonl(&[start(0), end(1), skipping.into()], "");
    let (_tmp, store) = check(&bytes, false, &Verdict::Torn, &prefix);
    assert_eq!(committed_prefix(&store), jsonl(&prefix, ""));
}

// 21
#[test]
fn header_only_is_clean_and_headerless_input_is_refused() {
    let bytes = jsonl(&[], "");
    let (_tmp, store) = check(&bytes, false, &Verdict::Clean, &[]);
    assert_eq!(committed_prefix(&store), bytes);
    refused(b"", false, "empty or header-less session log");
    refused(H.as_bytes(), false, "empty or header-less session log");
}

// 22
#[test]
fn header_checks_give_dsh_verdicts() {
    let header = |fields: &str| format!(r#"{{"type":"session","version":0,"id":"r",{fields}}}"#);
    // DSH 0.2 reads v0 to v4 (v1 has v0's layout); v5 is a newer harness's.
    let newer = r#"{"type":"session","version":5,"id":"r","createdAt":1,"delegationDepth":0}"#;
    let v1 = r#"{"type":"session","version":1,"id":"r","createdAt":1,"delegationDepth":0}"#;
    let older = r#"{"type":"session","version":-1,"id":"r","createdAt":1,"delegationDepth":0}"#;
    let cases: Vec<(String, Verdict)> = vec![
        (newer.into(), Verdict::Unsupported("session \"r\" uses log format v5, but this harness reads only v4: the log was written by a newer harness — upgrade the harness to open it".into())),
        (v1.into(), Verdict::Clean),
        (older.into(), Verdict::Unsupported("session \"r\" uses log format v-1, older than the supported v0, and this build ships no upgrade path for it".into())),
        (r#"{"type":"session","version":"0","id":"r","createdAt":1,"delegationDepth":0}"#.into(), not_header()),
        (header(r#""createdAt":1"#), not_header()),
        (header(r#""createdAt":1.5,"delegationDepth":0"#), not_header()),
        (header(r#""createdAt":-1,"delegationDepth":0"#), not_header()),
        (header(r#""createdAt":9007199254740992,"delegationDepth":0"#), not_header()),
        (header(r#""createdAt":-0,"delegationDepth":0"#), not_header()),
        (header(r#""createdAt":1,"delegationDepth":-0"#), not_header()),
        (header(r#""createdAt":1,"delegationDepth":0,"origin":"x""#), not_header()),
        (header(r#""createdAt":1,"delegationDepth":0,"agentPreset":7"#), not_header()),
        (header(r#""createdAt":1,"delegationDepth":0,"sandboxMode":"x""#), Verdict::Corrupt("session header uses retired policy baseline fields".into())),
        (header(r#""createdAt":1,"delegationDepth":0,"origin":"subagent","agentPreset":"p""#), Verdict::Clean),
    ];
    for (line, verdict) in cases {
        let bytes = format!("{line}\n{}\n{}\n", start(0), end(1)).into_bytes();
        let (_tmp, store) = temp_store();
        let report =
            import_bytes(&store, "h", &bytes, false).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(report.verdict, verdict, "{line}");
        assert_eq!(export_bytes(&store, "r"), bytes, "{line}");
    }
}

fn not_header() -> Verdict {
    Verdict::Corrupt("first line is not a session header".into())
}

// 23
#[test]
fn zstd_header_frame_must_be_exactly_one_line() {
    let mut bytes = frame(&format!("{H}\n{}\n", start(0)));
    bytes.extend(frame(&batch(&[end(1)])));
    let verdict = Verdict::Corrupt("first frame is not exactly one header line".into());
    check(&bytes, true, &verdict, &[]);
    // An empty header frame names no session: nothing to store it under.
    let mut bytes = frame("");
    bytes.extend(frame(&batch(&[start(0), end(1)])));
    refused(&bytes, true, "not JSON");
    // No complete frame at all.
    refused(
        &frame(&format!("{H}\n"))[..9],
        true,
        "empty or header-less Zstandard session log",
    );
}

// 24
#[test]
fn zstd_bad_checksum_in_a_complete_frame_is_fatal() {
    let parts = [
        batch(&[start(0), end(1)]),
        batch(&[start(2), end(3)]),
        batch(&[hook(4)]),
    ];
    let mut bytes = zstd_log(&parts);
    let third_start =
        frame(&format!("{H}\n")).len() + frame(&parts[0]).len() + frame(&parts[1]).len();
    // The middle frame (second body frame) ends where the third starts: flip its checksum.
    bytes[third_start - 1] ^= 0x01;
    let second_start = third_start - frame(&parts[1]).len();
    let verdict = Verdict::Corrupt(format!("frame at byte {second_start} failed validation"));
    check(&bytes, true, &verdict, &[start(0), end(1)]);

    // Frame 0's checksum: the header cannot be trusted, so there is no session to store.
    let mut bytes = zstd_log(&parts);
    let header_len = frame(&format!("{H}\n")).len();
    bytes[header_len - 1] ^= 0x01;
    refused(&bytes, true, "header frame");
}

// 25
#[test]
fn zstd_torn_vectors_recover_the_decodable_prefix() {
    let Some(dir) = fixtures() else { return };
    let names = names_ending(&dir.join("dsh-zstd"), &[".torn.jsonl.zstd"]);
    assert!(!names.is_empty());
    for name in &names {
        let stem = name.trim_end_matches(".torn.jsonl.zstd");
        let bytes = std::fs::read(dir.join("dsh-zstd").join(name)).expect("vector");
        let plain = std::fs::read(dir.join("dsh").join(format!("{stem}.jsonl"))).expect("plain");
        let (_t, store) = temp_store();
        let report = store
            .import_zstd(name, &bytes, &ImportOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(export_as(&store, &report.id, None), bytes, "{name}");
        let (_t2, plain_store) = temp_store();
        let plain_report = import_bytes(&plain_store, stem, &plain, false).expect("plain");
        if !matches!(plain_report.verdict, Verdict::Clean) {
            continue;
        }
        assert_eq!(report.verdict, Verdict::Torn, "{name}");
        // Complete frames' plaintext (readRaw) holds fewer events than the recovered view, which
        // is a prefix of the whole log.
        let raw = export_as(&store, &report.id, Some(ExportFormat::Jsonl));
        assert!(plain.starts_with(&raw), "{name}: readRaw is not a prefix");
        let (_t3, raw_store) = temp_store();
        let raw_report = import_bytes(&raw_store, "raw", &raw, false).expect("raw");
        assert!(raw_report.events <= report.events, "{name}");
        let full = events_text(&plain_store, &plain_report.id).expect("events");
        let got = events_text(&store, &report.id).expect("events");
        assert!(
            full.starts_with(&got),
            "{name}: recovered events are not a prefix"
        );
    }
}

// 26
#[test]
fn zstd_two_bytes_of_magic_are_a_torn_tail() {
    let lines = [start(0), end(1)];
    let mut bytes = zstd_log(&[batch(&lines)]);
    bytes.extend_from_slice(&[0x28, 0xB5]);
    let (_tmp, store) = check(&bytes, true, &Verdict::Torn, &lines);
    assert_eq!(export_as(&store, "r", Some(ExportFormat::JsonlZstd)), bytes);
    assert!(
        closers_for(&store).is_empty(),
        "a balanced log needs no closers"
    );
}

// 27
#[test]
fn zstd_final_frame_missing_its_last_checksum_byte_is_recovered_whole() {
    let first = [start(0), end(1)];
    let last = [start(2), hook(3), hook(4)];
    let mut bytes = zstd_log(&[batch(&first), batch(&last)]);
    bytes.pop();
    let all: Vec<String> = first.iter().chain(&last).cloned().collect();
    let (_tmp, store) = check(&bytes, true, &Verdict::Torn, &all);
    assert_eq!(
        closers_for(&store).len(),
        1,
        "the open turn gets its turn/end"
    );
}

// 28
#[test]
fn zstd_complete_frame_with_a_torn_or_bad_record_is_fatal() {
    let torn = Verdict::Corrupt("complete frame contains a torn JSONL record".into());
    let bytes = zstd_log(&[format!(
        "{}{{\"type\":\"turn/start\"",
        batch(&[start(0), end(1)])
    )]);
    check(&bytes, true, &torn, &[start(0), end(1)]);
    let bytes = zstd_log(&[batch(&[start(0), end(1), "{not json".into()])]);
    check(&bytes, true, &torn, &[start(0), end(1)]);
    let bytes = zstd_log(&[batch(&[start(0), end(1)]), batch(&[hook(7)])]);
    check(&bytes, true, &torn, &[start(0), end(1)]);
}

// 29
#[test]
fn zstd_structural_defects_are_corrupt_not_torn() {
    let lines = [start(0), end(1)];
    let good = zstd_log(&[batch(&lines)]);
    let at = good.len();
    let magic = |at: usize| Verdict::Corrupt(format!("invalid frame magic at byte {at}"));

    let mut padded = good.clone();
    padded.extend_from_slice(&[0; 4]);
    check(&padded, true, &magic(at), &[]);

    let mut skippable = good.clone();
    skippable.extend_from_slice(&[0x50, 0x2A, 0x4D, 0x18, 2, 0, 0, 0, 0xAA, 0xBB]);
    check(&skippable, true, &magic(at), &[]);

    let header_len = frame(&format!("{H}\n")).len();
    let mut reserved = good.clone();
    reserved[header_len + 4] |= 0x08;
    let verdict = Verdict::Corrupt(format!(
        "reserved frame-header bit at byte {}",
        header_len + 4
    ));
    check(&reserved, true, &verdict, &[]);

    let mut block = good;
    block[header_len + 6] |= 0x06;
    let verdict = Verdict::Corrupt(format!("reserved block type at byte {}", header_len + 6));
    check(&block, true, &verdict, &[]);
}

// 30
#[test]
fn zstd_record_split_across_two_frames_is_accepted_and_preserved() {
    let whole = batch(&[start(0), hook(1), end(2)]);
    let cut = whole.len() / 2;
    let bytes = zstd_log(&[whole[..cut].to_owned(), whole[cut..].to_owned()]);
    let (_tmp, store) = check(&bytes, true, &Verdict::Clean, &[start(0), hook(1), end(2)]);
    assert_eq!(
        export_as(&store, "r", Some(ExportFormat::Jsonl)),
        jsonl(&[start(0), hook(1), end(2)], "")
    );
}

// 39
#[test]
fn unknown_types_are_unsupported_unless_ignorable() {
    let unknown = ev(1, "future/thing", "{}");
    let bytes = jsonl(&[start(0), unknown.clone(), end(2)], "");
    let verdict = Verdict::Unsupported("session \"r\" contains event type \"future/thing\" (seq 1) unknown to this harness and not marked ignorable; refusing to interpret the log — it was likely written by a newer harness".into());
    check(&bytes, false, &verdict, &[start(0), unknown, end(2)]);

    let ignorable = r#"{"type":"future/thing","seq":1,"time":5,"data":{"x":1.0},"ignorable":true}"#;
    let bytes = jsonl(&[start(0), ignorable.into(), end(2)], "");
    let logical = r#"{"type":"future/thing","seq":1,"time":5,"data":{"x":1},"ignorable":true}"#;
    check(
        &bytes,
        false,
        &Verdict::Clean,
        &[start(0), logical.into(), end(2)],
    );
}

// 40
#[test]
fn legacy_events_are_refused_in_dsh_order() {
    let legacy = |ty: &str, seq| {
        Verdict::Unsupported(format!(
            "session \"r\" contains unsupported legacy {ty} event at seq {seq}"
        ))
    };
    let delta = ev(1, "request/header-delta", "{}");
    let mode = ev(1, "mode/set", "{}");
    let fallback = ev(1, "request/header", r#"{"reason":"fallback"}"#);
    for (line, verdict) in [
        (&delta, legacy("request/header-delta", 1)),
        (&mode, legacy("mode/set", 1)),
        (&fallback, Verdict::Unsupported("session \"r\" contains unsupported legacy request/header reason \"fallback\" at seq 1".into())),
    ] {
        let lines = [start(0), line.clone(), end(2)];
        check(&jsonl(&lines, ""), false, &verdict, &lines);
    }
    // DSH looks for request/header-delta over the whole log first, then mode/set, then fallback.
    let lines = [
        start(0),
        fallback,
        ev(2, "mode/set", "{}"),
        ev(3, "request/header-delta", "{}"),
        end(4),
    ];
    check(
        &jsonl(&lines, ""),
        false,
        &legacy("request/header-delta", 3),
        &lines,
    );
    // A legacy turn/start trigger is normalized when read; the bytes stay as written.
    let trigger = ev(0, "turn/start", r#"{"turn":1,"trigger":"user"}"#);
    let lines = [trigger, end(1)];
    check(&jsonl(&lines, ""), false, &Verdict::Clean, &lines);
}
