//! Format generations (issue #8): session directories holding several generation files, the
//! V2–V4 readers on DSH's raw files and on the conformance cases of later-format-spec §5.1, and
//! the V1–V3 views read through migration, and the honest refusal of what is not modelled.

use std::path::Path;

use sessionlog::codec::format::zstd::compress_frame;
use sessionlog::codec::json::stringify;
use sessionlog::engine::{scan_session_dir, Error, ExportFormat, ImportOptions, Store, Verdict};

use crate::fixtures::{
    all_events, assert_empty, export_bytes, fixtures, import_bytes, temp_host_store, temp_store,
};

/// The raw (seq- and time-bearing) later-generation files of the fixtures.
const RAW_V2: &str = "zsagi1368+deepseek-harness-zDSH__packages__experimental__webworker-runtime__tests__fixtures__vfs-example__home__sessions__--dsh-workspace--__preview-follow-up-builder__session.v2.jsonl";
const RAW_V3: &str = "zsagi1368+deepseek-harness-zDSH__packages__experimental__webworker-runtime__tests__fixtures__vfs-example__home__sessions__--dsh-workspace--__preview-follow-up-builder__session.v3.jsonl";

fn header(version: u32, id: &str, extra: &str) -> String {
    format!(
        r#"{{"type":"session","version":{version},"id":"{id}","createdAt":1787472200000,"isSeeded":false,"delegationDepth":0{extra}}}"#
    )
}

fn row(seq: u64, ty: &str, data: &str) -> String {
    format!(
        r#"{{"type":"{ty}","seq":{seq},"time":{},"data":{data}}}"#,
        1_787_472_200_000 + seq
    )
}

/// A small clean V4 log: header, then `n` log-only rows.
fn v4_log(id: &str, n: u64) -> String {
    let mut text = header(4, id, "") + "\n";
    for seq in 0..n {
        text += &row(seq, "workspace/changes", r#"{"k":1}"#);
        text.push('\n');
    }
    text
}

/// `plain` as DSH's live zstd writer frames it: the header line, then one frame per batch.
fn zstd_frames(plain: &str, batches: &[usize]) -> Vec<u8> {
    let mut lines = plain.split_inclusive('\n');
    let mut out = compress_frame(lines.next().expect("header").as_bytes()).expect("frame");
    for &n in batches {
        let batch: String = lines.by_ref().take(n).collect();
        out.extend(compress_frame(batch.as_bytes()).expect("frame"));
    }
    out
}

fn import_dir(store: &Store, dir: &Path) -> sessionlog::engine::Result<String> {
    let generations = scan_session_dir(dir)?.expect("a session directory");
    let options = ImportOptions {
        generations: Some(generations.clone()),
        ..ImportOptions::default()
    };
    store
        .import_path(&generations.served.path, &options, &mut |_| {})
        .map(|r| r.id)
}

fn generation_bytes(store: &Store, id: &str, version: u32) -> Vec<u8> {
    let mut out = Vec::new();
    store
        .export_generation(id, version, None, &mut out)
        .unwrap_or_else(|e| panic!("export v{version} of {id}: {e}"));
    out
}

#[test]
fn raw_v2_and_v3_files_round_trip_with_their_verdicts() {
    let Some(dir) = fixtures() else { return };
    let dir = dir.join("dsh-later");
    for (name, version) in [(RAW_V2, 2), (RAW_V3, 3)] {
        let bytes = std::fs::read(dir.join(name)).expect("fixture");
        let (_t, store) = temp_store();
        let report = import_bytes(&store, name, &bytes, false).expect("import");
        assert_eq!(export_bytes(&store, &report.id), bytes, "{name}");
        let lines = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
        assert_eq!(report.events, lines - 1, "one event per row in v{version}");
        let summary = &store.list().expect("list")[0];
        assert_eq!(
            (summary.format, summary.generations.clone()),
            (version, vec![version])
        );
        if version == 2 {
            // DSH 0.2 refuses to migrate it: a surface node before the first step.
            assert_eq!(
                report.verdict,
                Verdict::Unsupported("format v2 surface before first step cannot acquire a system head without changing chronology".into())
            );
        }
    }
}

#[test]
fn a_directory_of_two_generations_serves_the_higher_and_exports_both_unchanged() {
    let Some(fx) = fixtures() else { return };
    let v2 = std::fs::read(fx.join("dsh-later").join(RAW_V2)).expect("fixture");
    let v3 = std::fs::read(fx.join("dsh-later").join(RAW_V3)).expect("fixture");
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("session.v2.jsonl"), &v2).expect("write");
    std::fs::write(dir.path().join("session.v3.jsonl"), &v3).expect("write");
    let (_t, store) = temp_store();
    let id = import_dir(&store, dir.path()).expect("import");
    assert_eq!(export_bytes(&store, &id), v3);
    assert_eq!(generation_bytes(&store, &id, 2), v2);
    assert_eq!(generation_bytes(&store, &id, 3), v3);
    let missing = store.export_generation(&id, 1, None, &mut Vec::new());
    assert!(matches!(missing, Err(Error::Generation(m)) if m.contains("holds v3, v2")));
}

/// later-format-spec §5.1 case 1: `session.jsonl.zstd` + `session.v4.jsonl.zstd` serves V4,
/// keeps the V0 bytes, and a root export writes both files, which re-import identically.
#[test]
fn v0_and_v4_zstd_generations_in_one_directory() {
    let id = "gen-pair";
    let v0_plain = format!(
        "{}\n{}\n",
        r#"{"type":"session","version":0,"id":"gen-pair","createdAt":1787472200000,"cwd":"/w","delegationDepth":0}"#,
        row(0, "turn/start", r#"{"turn":1}"#)
    );
    let mut v4_plain = r#"{"type":"session","version":4,"id":"gen-pair","createdAt":1787472200000,"cwd":"/w","isSeeded":false,"delegationDepth":0}"#.to_owned();
    v4_plain.push('\n');
    for seq in 0..5 {
        v4_plain += &row(seq, "workspace/changes", r#"{"k":1}"#);
        v4_plain.push('\n');
    }
    let v0 = zstd_frames(&v0_plain, &[1]);
    let v4 = zstd_frames(&v4_plain, &[3, 2]);
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("session.jsonl.zstd"), &v0).expect("write");
    std::fs::write(dir.path().join("session.v4.jsonl.zstd"), &v4).expect("write");
    let (_t, store) = temp_store();
    import_dir(&store, dir.path()).expect("import");
    assert_eq!(all_events(&store, id).len(), 5, "the V4 log is served");
    assert_eq!(export_bytes(&store, id), v4);
    assert_eq!(generation_bytes(&store, id, 0), v0);
    let root = tempfile::tempdir().expect("temp dir");
    let (path, bytes) = store.export_to_root(root.path(), id, None).expect("export");
    assert_eq!(bytes, (v0.len() + v4.len()) as u64);
    let session_dir = path.parent().expect("session dir");
    assert_eq!(
        std::fs::read(session_dir.join("session.v4.jsonl.zstd")).expect("v4"),
        v4
    );
    assert_eq!(
        std::fs::read(session_dir.join("session.jsonl.zstd")).expect("v0"),
        v0
    );
    let refused = store.export_to_root(
        tempfile::tempdir().expect("dir").path(),
        id,
        Some(ExportFormat::Jsonl),
    );
    assert!(matches!(refused, Err(Error::Generation(m)) if m.contains("exported only as stored")));
    let (_t2, again) = temp_store();
    import_dir(&again, session_dir).expect("re-import");
    assert_eq!(export_bytes(&again, id), v4);
    assert_eq!(generation_bytes(&again, id, 0), v0);
    let report = again.verify(&[]).expect("verify");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// Cases 2, 3, 4 and 29, and lower generations that are not this session's.
#[test]
fn generation_names_and_headers_must_agree() {
    let (_t, store) = temp_store();
    let write = |dir: &Path, name: &str, text: &str| {
        std::fs::write(dir.join(name), text).expect("write");
    };
    // Case 2: only `session.v2.jsonl` is canonical.
    let d = tempfile::tempdir().expect("dir");
    write(d.path(), "session.v2.jsonl", &(header(2, "a", "") + "\n"));
    write(d.path(), "session.V3.jsonl", &(header(3, "a", "") + "\n"));
    write(d.path(), "session.v03.jsonl", &(header(3, "a", "") + "\n"));
    let scan = scan_session_dir(d.path())
        .expect("scan")
        .expect("generations");
    assert_eq!((scan.served.version, scan.lower.len()), (2, 0));
    // Case 3: the file name says v2, the header v0.
    let d = tempfile::tempdir().expect("dir");
    write(d.path(), "session.v2.jsonl", &(header(0, "b", "") + "\n"));
    let e = import_dir(&store, d.path()).expect_err("mismatch");
    assert!(
        e.to_string()
            .contains("resolved JSONL source filename identifies v2, but its header identifies v0"),
        "{e}"
    );
    // A lower generation of another session, or naming another version.
    let d = tempfile::tempdir().expect("dir");
    write(d.path(), "session.v4.jsonl", &v4_log("c", 1));
    write(
        d.path(),
        "session.v2.jsonl",
        &(header(2, "other", "") + "\n"),
    );
    let e = import_dir(&store, d.path()).expect_err("foreign lower generation");
    assert!(
        e.to_string().contains("belongs to session \"other\""),
        "{e}"
    );
    write(d.path(), "session.v2.jsonl", &(header(3, "c", "") + "\n"));
    let e = import_dir(&store, d.path()).expect_err("lower generation version");
    assert!(
        e.to_string()
            .contains("filename identifies v2, but its header identifies v3"),
        "{e}"
    );
    // Case 29: both encodings in one directory.
    write(d.path(), "session.jsonl.zstd", "x");
    assert!(matches!(
        scan_session_dir(d.path()),
        Err(Error::RootLayout(_))
    ));
    assert_empty(&store);
    // Case 4: a version-5 header is refused as too new, before any shape check.
    let d = tempfile::tempdir().expect("dir");
    write(
        d.path(),
        "session.v5.jsonl",
        r#"{"type":"session","version":5,"id":"e"}
"#,
    );
    import_dir(&store, d.path()).expect("stored with its verdict");
    let summary = &store.list().expect("list")[0];
    assert!(
        matches!(&summary.verdict, Verdict::Unsupported(m) if m.contains("reads only v4: the log was written by a newer harness")),
        "{}",
        summary.verdict
    );
}

fn verdict_of(text: &str) -> Verdict {
    let (_t, store) = temp_store();
    let report = import_bytes(&store, "case", text.as_bytes(), false).expect("import");
    assert_eq!(
        export_bytes(&store, &report.id),
        text.as_bytes(),
        "byte-exact"
    );
    report.verdict
}

/// Cases 5, 6, 7, 9, 10, 13, 15 and 16 through the store: each file is kept byte-exactly with
/// DSH 0.2's verdict.
#[test]
fn later_generation_reader_cases() {
    let corrupt = |m: &str| Verdict::Corrupt(m.into());
    let log = |version: u32, extra_header: &str, rows: &[String]| {
        let mut t = header(version, "s", extra_header) + "\n";
        for r in rows {
            t += r;
            t.push('\n');
        }
        t
    };
    // Case 5.
    assert_eq!(
        verdict_of(&log(2, r#","seedLength":0"#, &[])),
        corrupt("released v2 physical header has unexpected field seedLength")
    );
    assert_eq!(
        verdict_of(&(header(4, "s", r#","owner":"u""#) + "\n")),
        corrupt("first line is not a session header")
    );
    // Case 6: an extra key leaves the row out of the committed region (a torn tail here).
    let extra = r#"{"type":"a/b","seq":0,"time":1,"data":{},"foo":1}"#.to_owned();
    assert_eq!(verdict_of(&log(2, "", &[extra])), Verdict::Torn);
    let extra_then_end = [
        r#"{"type":"a/b","seq":0,"time":1,"data":{},"foo":1}"#.to_owned(),
        row(1, "turn/end", "{}"),
    ];
    assert_eq!(
        verdict_of(&log(4, "", &extra_then_end)),
        corrupt("invalid committed event at line 1: released v2 row 0 has unexpected field foo")
    );
    // Case 7, through the store's logical events.
    let ranged = r#"{"type":"x/y","seq":10,"time":1,"data":{},"ignorable":true,"sourceEventSeqs":[[3,6],9]}"#;
    let rows: Vec<String> = (0..10)
        .map(|s| row(s, "a/b", "{}"))
        .chain([ranged.to_owned()])
        .collect();
    let text = log(4, "", &rows);
    let (_t, store) = temp_store();
    import_bytes(&store, "ranges", text.as_bytes(), false).expect("import");
    let events = all_events(&store, "s");
    assert_eq!(
        sessionlog::codec::json::stringify(&events[10]),
        r#"{"type":"x/y","seq":10,"time":1,"data":{},"ignorable":true,"sourceEventSeqs":[3,4,5,6,9]}"#
    );
    assert_eq!(export_bytes(&store, "s"), text.as_bytes());
    // Case 9.
    let marker = row(0, "session/end-seed", r#"{"inherited":true}"#);
    assert_eq!(
        verdict_of(
            &log(2, "", std::slice::from_ref(&marker))
                .replace(r#""isSeeded":false"#, r#""isSeeded":true"#)
        ),
        Verdict::Clean
    );
    assert_eq!(
        verdict_of(&log(2, "", &[marker])),
        corrupt("released v2 unseeded Session contains an inherited end-seed marker")
    );
    // Case 10: a V4 replace spelled the V2 way.
    let v2_spelling = r#"{"type":"user/message","seq":0,"time":1,"data":{},"surfaceOp":{"op":"replace","start":1,"end":1}}"#;
    assert_eq!(
        verdict_of(&log(4, "", &[v2_spelling.to_owned(), row(1, "turn/end", "{}")])),
        corrupt("invalid committed event at line 1: session event \"user/message\" carries an invalid surfaceOp")
    );
    // Case 13.
    let error_result = r#"{"type":"tool/result","seq":0,"time":1,"data":{"message":{"id":"r","role":"tool","source":{"kind":"tool","callId":"c"},"toolCallId":"c","content":[]},"error":{"name":"E","code":"X"}}}"#;
    assert_eq!(
        verdict_of(&log(4, "", &[error_result.to_owned()])),
        corrupt(
            "format v4 tool/result at seq 0 carries error metadata for a non-error tool result"
        )
    );
    // Case 14: a tool addition names an earlier request/header that defines the tool.
    let header_row = row(
        2,
        "request/header",
        r#"{"header":{"config":{"provider":"p","model":"m"},"tools":[{"name":"t","description":"d","parameters":{}}]},"reason":"initial"}"#,
    );
    let developer = |header_seq: u64| {
        format!(
            r#"{{"type":"developer/message","seq":3,"time":1,"data":{{"turn":1,"step":1,"message":{{"id":"d","role":"developer","content":[{{"type":"tool-addition","toolName":"t"}}],"source":{{"kind":"tool-catalog"}}}},"headerSeq":{header_seq}}},"surfaceOp":"append"}}"#
        )
    };
    let rows = |header_seq| {
        [
            row(0, "turn/start", r#"{"turn":1}"#),
            row(1, "step/start", r#"{"turn":1,"step":1}"#),
            header_row.clone(),
            developer(header_seq),
        ]
    };
    assert_eq!(verdict_of(&log(4, "", &rows(2))), Verdict::Clean);
    assert_eq!(
        verdict_of(&log(4, "", &rows(1))),
        Verdict::Corrupt(
            "developer/message headerSeq must reference an earlier request/header".into()
        )
    );
    // The lifecycle: a step outside its turn is corruption, found once the scan is done.
    assert_eq!(
        verdict_of(&log(
            4,
            "",
            &[row(0, "step/start", r#"{"turn":1,"step":1}"#)]
        )),
        Verdict::Corrupt("step/start does not match the open turn and next step".into())
    );
    // Ownership facts, checked before the lifecycle: a catalog child named twice.
    let catalog = |seq: u64| {
        row(
            seq,
            "subagent/catalog",
            r#"{"version":0,"childId":"c","childCreatedAt":1,"mode":"one-shot"}"#,
        )
    };
    assert_eq!(
        verdict_of(&log(
            4,
            "",
            &[
                catalog(0),
                row(1, "step/start", r#"{"turn":1,"step":1}"#),
                catalog(2)
            ]
        )),
        Verdict::Corrupt("duplicate catalog child c".into())
    );
    // Cases 15 and 16.
    let good: Vec<String> = (0..10).map(|s| row(s, "todo/write", "{}")).collect();
    let with = |tail: &str| {
        let mut rows = good.clone();
        rows.push("{not json".into());
        rows.push(tail.to_owned());
        log(4, "", &rows)
    };
    assert_eq!(
        verdict_of(&with(&row(
            11,
            "request/header",
            r#"{"header":{"system":""}}"#
        ))),
        corrupt("format v4 request/header rejects retired header.system")
    );
    assert_eq!(
        verdict_of(&with(&row(11, "turn/end", "{}"))),
        corrupt("unparsable committed event at line 11")
    );
    let (_t, store) = temp_store();
    let report = import_bytes(
        &store,
        "torn",
        with(&row(11, "c/d", "{}")).as_bytes(),
        false,
    )
    .expect("import");
    assert_eq!((report.verdict, report.events), (Verdict::Torn, 10));
}

/// A V1–V3 session is read as DSH 0.2 reads it, through the migration chain, and written to as
/// DSH's write-open does, after publishing its V4 successor: a log the chain refuses gets its
/// reason on every view, request and write, and stays unchanged.
#[test]
fn older_generations_refused_by_the_chain_are_refused_everywhere() {
    let (_t, store) = temp_store();
    let text = v4_log("v4", 3);
    import_bytes(&store, "v4", text.as_bytes(), false).expect("import");
    assert_eq!(all_events(&store, "v4").len(), 3);
    assert_eq!(store.messages_at("v4", None).expect("messages"), []);
    let v3 = header(3, "v3", "") + "\n" + &row(0, "a/b", "{}") + "\n";
    import_bytes(&store, "v3", v3.as_bytes(), false).expect("import");
    let refused = |r: sessionlog::engine::Result<()>| match r {
        Err(Error::Migration { reason, .. }) => reason,
        other => panic!("expected the migration's refusal, got {other:?}"),
    };
    let reason = r#"format v3 contains unknown event type "a/b" at seq 0; source v3 artifact remains unchanged"#;
    assert_eq!(refused(store.messages_at("v3", None).map(|_| ())), reason);
    assert_eq!(refused(store.transcript("v3", None).map(|_| ())), reason);
    assert_eq!(refused(store.surface_at("v3", None).map(|_| ())), reason);
    assert_eq!(
        refused(store.state_at("v3", "title", None).map(|_| ())),
        reason
    );
    // Writes open the session as DSH's write-open does: through the migration, here refused.
    assert_eq!(refused(store.fork("v3", None, "child").map(|_| ())), reason);
    assert_eq!(refused(store.repair("v3").map(|_| ())), reason);
    let append = store.append(
        "v3",
        None,
        vec![crate::fixtures::ev(
            r#"{"type":"plan/mode","data":{"active":true}}"#,
        )],
    );
    assert_eq!(refused(append.map(|_| ())), reason);
    assert_eq!(export_bytes(&store, "v3"), v3.as_bytes());
    assert_eq!(refused(store.request("v3", 1, 1).map(|_| ())), reason);
    assert!(store
        .create_session(
            &header(3, "new", ""),
            sessionlog::engine::SourceEncoding::Jsonl
        )
        .is_err());
    assert_eq!(export_bytes(&store, "v4"), text.as_bytes());
}

/// Appending to a V3 session first publishes its V4 successor (the V3 file kept as generation 3),
/// then appends in DSH 0.2's model at the successor's next seq.
#[test]
fn a_write_to_an_older_generation_migrates_it_first() {
    let Some(fx) = fixtures() else { return };
    let v3 = std::fs::read(fx.join("dsh-later").join(RAW_V3)).expect("v3 fixture");
    let (_t, store) = temp_store();
    let id = import_bytes(&store, "v3", &v3, false).expect("import").id;
    let successor = store
        .messages_at(&id, None)
        .expect("read through migration");
    let receipt = store
        .append(
            &id,
            None,
            vec![crate::fixtures::ev(
                r#"{"type":"plan/mode","data":{"active":true}}"#,
            )],
        )
        .expect("append");
    let summary = &store.list().expect("list")[0];
    assert_eq!(
        (summary.format, summary.generations.clone()),
        (4, vec![3, 4])
    );
    assert_eq!(receipt.first_seq + 1, summary.events);
    assert_eq!(store.messages_at(&id, None).expect("messages"), successor);
    assert_eq!(generation_bytes(&store, &id, 3), v3);
    assert!(store.verify(&[]).expect("verify").problems.is_empty());
}

/// Reading a V1 or V3 session through the chain in memory answers exactly what its published
/// V4 successor answers from the index, at every seq.
#[test]
fn reads_through_migration_equal_the_published_successor() {
    let Some(fx) = fixtures() else { return };
    let v3 = std::fs::read(fx.join("dsh-later").join(RAW_V3)).expect("v3 fixture");
    let v0 = std::fs::read(
        fx.join("dsh")
            .join("examples__acp-agent__tests__snapshots__hook-cc-posttool-context__session.jsonl"),
    )
    .expect("v0 fixture");
    // A V1 file is a V0 file under version 1 (DSH 0.1.2's rows); the golden's cwd and tools
    // placeholders are made the absolute path and the array DSH's released reader requires.
    let v1 = String::from_utf8(v0)
        .expect("utf8")
        .replacen(r#""version":0"#, r#""version":1"#, 1)
        .replacen("{{cwd}}", "/srv/project", 1)
        .replace(r#""tools":"{{tools}}""#, r#""tools":[]"#)
        .into_bytes();
    for (version, bytes) in [(3, v3), (1, v1)] {
        let (_t, store) = temp_store();
        let id = import_bytes(&store, "older", &bytes, false)
            .expect("import")
            .id;
        let answers = |store: &Store| {
            let mut out = vec![
                stringify(&store.state_at(&id, "title", None).expect("title")),
                stringify(&store.request(&id, 1, 1).expect("request of turn 1 step 1")),
            ];
            let mut at = 0;
            while let Ok(messages) = store.messages_at(&id, Some(at)) {
                out.push(
                    messages
                        .iter()
                        .map(stringify)
                        .collect::<Vec<_>>()
                        .join("\n"),
                );
                out.push(store.surface_at(&id, Some(at)).expect("surface").to_json());
                out.push(format!(
                    "{:?}",
                    store.transcript(&id, Some(at)).expect("transcript")
                ));
                out.push(stringify(
                    &store.state_at(&id, "tokenUsage", Some(at)).expect("usage"),
                ));
                at += 1;
            }
            assert!(at > 5, "{id}: only {at} seqs answered");
            out
        };
        let read = answers(&store);
        store
            .migrate(&id, &sessionlog::engine::MigrateOptions::default())
            .expect("migrate");
        assert_eq!(store.list().expect("list")[0].format, 4);
        assert_eq!(answers(&store), read, "{id}");
        assert_eq!(generation_bytes(&store, &id, version), bytes);
    }
}

/// Generated V4 sessions (system-prompt replacements, compactions, tool-result rewrites,
/// developer tool additions, seeded forks with their inherited marker, image offloads) appended
/// live give DSH's V4 file, byte for byte in both encodings;
/// re-imported they give the same bytes and answers; and every indexed answer equals a naive
/// V4 replay.
#[test]
fn generated_v4_sessions_round_trip_and_answer_like_a_replay() {
    use sessionlog::codec::json::stringify;
    use sessionlog::codec::rules::surface::{replay_with, SurfaceModel};
    use sessionlog::engine::SourceEncoding;
    use sessionlog_harness::gen::{session_batches_v4, GenOptions};

    let opts = GenOptions {
        sessions: 6,
        events_per_session: 2_500,
        seed: 41,
        torn_fraction: 0.0,
    };
    let (mut replaced_heads, mut developer, mut compactions, mut rewrites) = (0, 0, 0, 0);
    let (mut seeded, mut offloads) = (0, 0);
    for i in 0..opts.sessions {
        let feed = session_batches_v4(i, &opts);
        let mut plain = feed.header_line.clone() + "\n";
        let mut frames = compress_frame(plain.as_bytes()).expect("frame");
        for b in &feed.batches {
            plain += &b.text;
            frames.extend(compress_frame(b.text.as_bytes()).expect("frame"));
        }
        for (encoding, file) in [
            (SourceEncoding::Jsonl, plain.as_bytes().to_vec()),
            (SourceEncoding::JsonlZstd, frames.clone()),
        ] {
            let (_t, store) = temp_host_store();
            store
                .create_session(&feed.header_line, encoding)
                .unwrap_or_else(|e| panic!("create {}: {e}", feed.id));
            crate::fixtures::append_feed(&store, &feed);
            assert_eq!(
                export_bytes(&store, &feed.id),
                file,
                "{} as {encoding:?}",
                feed.id
            );
            let mut as_plain = Vec::new();
            store
                .export(&feed.id, Some(ExportFormat::Jsonl), &mut as_plain)
                .expect("export");
            assert_eq!(as_plain, plain.as_bytes());
            let events = all_events(&store, &feed.id);
            let naive = replay_with(SurfaceModel::V4, &events).expect("replay");
            let messages = store.messages_at(&feed.id, None).expect("messages");
            assert_eq!(messages, naive.messages);
            let surface = store.surface_at(&feed.id, None).expect("surface").to_json();
            assert_eq!(surface, naive.surface.to_json());
            for at in (0..events.len()).step_by(97) {
                let upto = replay_with(SurfaceModel::V4, &events[..=at]).expect("replay");
                let got = store
                    .messages_at(&feed.id, Some(at as u64))
                    .expect("messages");
                assert_eq!(got, upto.messages, "{} messages at {at}", feed.id);
            }
            let (_t2, again) = temp_host_store();
            let report = match encoding {
                SourceEncoding::Jsonl => import_bytes(&again, "v4", &file, true),
                SourceEncoding::JsonlZstd => again.import_zstd(
                    "v4",
                    &file,
                    &ImportOptions {
                        strict: true,
                        ..ImportOptions::default()
                    },
                ),
            }
            .unwrap_or_else(|e| panic!("re-import {}: {e}", feed.id));
            assert_eq!(report.verdict, Verdict::Clean);
            seeded += usize::from(feed.header_line.contains(r#""isSeeded":true"#));
            assert_eq!(export_bytes(&again, &feed.id), file);
            assert_eq!(
                again.messages_at(&feed.id, None).expect("messages"),
                messages
            );
            assert_eq!(
                again.surface_at(&feed.id, None).expect("surface").to_json(),
                surface
            );
            for e in &events {
                let text = stringify(e);
                replaced_heads += usize::from(
                    text.starts_with(r#"{"type":"system/message""#)
                        && text.contains(r#""op":"replace""#),
                );
                developer += usize::from(text.starts_with(r#"{"type":"developer/message""#));
                compactions += usize::from(
                    text.starts_with(r#"{"type":"user/message""#)
                        && text.contains(r#""op":"replace""#),
                );
                rewrites += usize::from(
                    text.starts_with(r#"{"type":"tool/result""#)
                        && text.contains(r#""op":"replace""#),
                );
                offloads += usize::from(text.starts_with(r#"{"type":"image/offload""#));
            }
        }
    }
    assert!(
        replaced_heads > 0
            && developer > 0
            && compactions > 0
            && rewrites > 0
            && seeded > 0
            && offloads > 0,
        "{replaced_heads} {developer} {compactions} {rewrites} {seeded} {offloads}"
    );
}

/// Live V4 appends refuse what DSH 0.2 refuses, naming the seq and the rule, and write nothing.
#[test]
fn v4_appends_reject_with_the_rule_and_write_nothing() {
    use sessionlog::engine::SourceEncoding;

    let (_t, store) = temp_store();
    store
        .create_session(&header(4, "live", ""), SourceEncoding::JsonlZstd)
        .expect("create");
    let batch = |lines: &[&str]| -> Vec<sessionlog::codec::format::event::NewEvent> {
        lines.iter().map(|l| crate::fixtures::ev(l)).collect()
    };
    let opening = batch(&[
        r#"{"type":"turn/start","time":1,"data":{"turn":1}}"#,
        r#"{"type":"step/start","time":1,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"system/message","time":1,"data":{"turn":1,"step":1,"message":{"id":"s","role":"system","content":[],"source":{"kind":"system-prompt"}}},"surfaceOp":"append"}"#,
        r#"{"type":"user/message","time":1,"data":{"id":"u","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
    ]);
    store.append("live", Some(0), opening).expect("append");
    let before = export_bytes(&store, "live");
    let refusals = [
        (
            r#"{"type":"assistant/chunk","time":1,"data":{"turn":1,"step":1}}"#,
            "does not exist in format v4",
        ),
        (
            r#"{"type":"assistant/message","time":1,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[]},"stream":[]},"sourceEventSeqs":[3],"surfaceOp":"append"}"#,
            "cannot carry sourceEventSeqs",
        ),
        (
            r#"{"type":"user/message","time":1,"data":{"id":"c","role":"user","content":[],"source":{"kind":"compact-checkpoint"}},"sourceEventSeqs":[2,3],"surfaceOp":{"op":"replace","startSeq":2,"endSeq":3}}"#,
            "node 0 holds the system prompt",
        ),
        (
            r#"{"type":"user/message","time":1,"data":{"id":"c","role":"user","content":[],"source":{"kind":"plugin","plugin":"x"}},"surfaceOp":"append"}"#,
            "producer-owned source kind",
        ),
        (
            r#"{"type":"developer/message","time":1,"data":{"turn":1,"step":1,"message":{"id":"d","role":"developer","content":[{"type":"tool-addition","toolName":"t"}],"source":{"kind":"x"}},"headerSeq":1},"surfaceOp":"append"}"#,
            "must reference an earlier request/header",
        ),
        (
            r#"{"type":"request/header","time":1,"data":{"header":{"system":"x"},"reason":"initial"}}"#,
            "retired header.system",
        ),
    ];
    for (line, rule) in refusals {
        let e = store
            .append("live", Some(4), batch(&[line]))
            .expect_err(rule);
        let text = e.to_string();
        assert!(text.contains("seq 4") && text.contains(rule), "{text}");
        assert_eq!(
            export_bytes(&store, "live"),
            before,
            "nothing written for {rule}"
        );
    }
    assert_eq!(store.list().expect("list")[0].verdict, Verdict::Clean);
}

/// Case 28: the live V4 writer frames each batch (3 events then 2 → header + 2 frames); a log
/// written in one piece, as DSH's migration writer publishes a successor (or as a `.jsonl`
/// import converted), is the header frame and one frame for all its rows.
#[test]
fn v4_zstd_framing_follows_the_writer() {
    use sessionlog::codec::format::zstd::scan_frames;
    use sessionlog::engine::SourceEncoding;

    let (_t, store) = temp_store();
    store
        .create_session(&header(4, "live", ""), SourceEncoding::JsonlZstd)
        .expect("create");
    let batch = |from: u64, n: u64| -> Vec<sessionlog::codec::format::event::NewEvent> {
        (from..from + n)
            .map(|s| {
                let v = sessionlog::codec::json::parse(&row(s, "workspace/changes", "{}"))
                    .expect("JSON");
                crate::fixtures::new_event(&v)
            })
            .collect()
    };
    store.append("live", Some(0), batch(0, 3)).expect("append");
    store.append("live", Some(3), batch(3, 2)).expect("append");
    let file = export_bytes(&store, "live");
    assert_eq!(scan_frames(&file).expect("frames").frames.len(), 3);
    let whole = v4_log("whole", 5);
    import_bytes(&store, "whole", whole.as_bytes(), true).expect("import");
    let mut successor = Vec::new();
    store
        .export("whole", Some(ExportFormat::JsonlZstd), &mut successor)
        .expect("export");
    assert_eq!(scan_frames(&successor).expect("frames").frames.len(), 2);
    let (_t2, again) = temp_store();
    again
        .import_zstd(
            "whole",
            &successor,
            &ImportOptions {
                strict: true,
                ..ImportOptions::default()
            },
        )
        .expect("re-import");
    assert_eq!(all_events(&again, "whole"), all_events(&store, "whole"));
}

/// DSH 0.2's own V4 snapshot logs (normalized upstream: no seq/time, `{{placeholders}}`), with
/// seqs, times and values filled back in: the reader, its admission and relationship checks take
/// them as clean, and the V4 views answer.
#[test]
fn dsh_0_2_snapshot_logs_are_admitted_and_answer() {
    use sessionlog::codec::json::{parse, stringify, Object};

    let Some(fx) = fixtures() else { return };
    let fill = |line: &str| -> String {
        let mut out = String::new();
        let mut rest = line;
        while let Some(at) = rest.find("{{") {
            out.push_str(&rest[..at]);
            let end = rest[at..].find("}}").map_or(rest.len(), |e| at + e);
            let name = &rest[(at + 2).min(end)..end];
            out.push_str(&if name == "cwd" {
                "/srv/project".to_owned()
            } else {
                name.replace(':', "-")
            });
            rest = &rest[(end + 2).min(rest.len())..];
        }
        out + rest
    };
    let mut checked = 0;
    for name in crate::fixtures::names_ending(&fx.join("dsh-later"), &[".v4.jsonl"]) {
        if !name.starts_with("zq0929") {
            continue;
        }
        let text = std::fs::read_to_string(fx.join("dsh-later").join(&name)).expect("fixture");
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let mut file = fill(lines.next().expect("a header")) + "\n";
        for (seq, line) in lines.enumerate() {
            let row = parse(&fill(line)).expect("JSON");
            let mut o = Object::new()
                .with(
                    "type",
                    row.as_object()
                        .and_then(|r| r.get("type"))
                        .cloned()
                        .expect("type"),
                )
                .with("seq", seq as i64)
                .with("time", 1_788_240_666_255 + seq as i64);
            for (k, v) in row
                .as_object()
                .expect("row")
                .iter()
                .filter(|(k, _)| !k.eq_str("type"))
            {
                o.insert(k.clone(), v.clone());
            }
            file += &stringify(&sessionlog::codec::json::Value::Object(o));
            file.push('\n');
        }
        let (_t, store) = temp_store();
        let report = import_bytes(&store, &name, file.as_bytes(), true)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(report.verdict, Verdict::Clean, "{name}");
        let messages = store.messages_at(&report.id, None).expect("messages");
        assert!(messages.len() > 3, "{name}: {} messages", messages.len());
        let turns = store.state_at(&report.id, "turns", None).expect("turns");
        assert!(!stringify(&turns).is_empty());
        let events = all_events(&store, &report.id);
        let naive = sessionlog::codec::rules::surface::replay_with(
            sessionlog::codec::rules::surface::SurfaceModel::V4,
            &events,
        )
        .expect("replay");
        assert_eq!(messages, naive.messages, "{name}");
        checked += 1;
    }
    assert_eq!(checked, 2);
}
