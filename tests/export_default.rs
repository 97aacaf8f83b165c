//! The round trip a new user tries, through the `sessionlog` binary: a store built through every
//! writer (create and append in both encodings, appends kept as written, imports of `.jsonl` and
//! of `.jsonl.zstd` files framed per batch by DSH, fork, migrate, repair), then `export-all`
//! with its default format into a directory and into a bucket, then `import` of that root into
//! a fresh store. Every session exports the same stored bytes, the same `.jsonl` bytes, the same
//! `.jsonl.zstd` bytes (its own frames when stored as `.jsonl.zstd`, the conversion when stored
//! as `.jsonl`) and every generation the same bytes, before and after.

use std::path::Path;
use std::process::Command;

use sessionlog::codec::format::zstd::{compress_frame, scan_frames};
use sessionlog::codec::json::{parse, stringify, Value};
use sessionlog::engine::{AppendItem, ExportFormat, SourceEncoding, Store, Verdict};
use sessionlog_harness::gen::{session, session_batches, GenOptions, SessionFeed};

use crate::fixtures::{append_feed, ev, fixtures, import_bytes, new_event};
use crate::objects::{assert_verifies, cli, cli_command, options, server_with_bucket};

/// One session's exports: as stored, as `.jsonl`, as `.jsonl.zstd`, then each generation as
/// stored; each the bytes or the refusal's text.
type Exports = Vec<(String, Result<Vec<u8>, String>)>;

fn exports(store: &Store, id: &str) -> Exports {
    let mut out = Vec::new();
    for (name, format) in [
        ("stored", None),
        (".jsonl", Some(ExportFormat::Jsonl)),
        (".jsonl.zstd", Some(ExportFormat::JsonlZstd)),
    ] {
        let mut bytes = Vec::new();
        let result = store.export(id, format, &mut bytes).map(|_| bytes);
        out.push((name.to_owned(), result.map_err(|e| e.to_string())));
    }
    for version in store.summary(id).expect("summary").generations {
        let mut bytes = Vec::new();
        let result = store
            .export_generation(id, version, None, &mut bytes)
            .map(|_| bytes);
        out.push((format!("v{version}"), result.map_err(|e| e.to_string())));
    }
    out
}

fn all_exports(store: &Store) -> Vec<(String, Exports)> {
    let mut ids = store.ids().expect("ids");
    ids.sort();
    ids.into_iter()
        .map(|id| {
            let e = exports(store, &id);
            (id, e)
        })
        .collect()
}

/// Every difference between two stores' exports, one line each (`id: export: before → after`).
fn differences(before: &[(String, Exports)], after: &[(String, Exports)]) -> Vec<String> {
    let shown = |r: Option<&Result<Vec<u8>, String>>| match r {
        None => "absent".to_owned(),
        Some(Ok(b)) => format!("{} bytes", b.len()),
        Some(Err(e)) => format!("refused ({e})"),
    };
    let mut out = Vec::new();
    for (id, exports) in before {
        let Some((_, again)) = after.iter().find(|(i, _)| i == id) else {
            out.push(format!("{id}: missing after the round trip"));
            continue;
        };
        for (name, bytes) in exports {
            let other = again.iter().find(|(n, _)| n == name).map(|(_, b)| b);
            if other != Some(bytes) {
                out.push(format!(
                    "{id}: {name} export: {} → {}",
                    shown(Some(bytes)),
                    shown(other)
                ));
            }
        }
    }
    for (id, _) in after {
        if !before.iter().any(|(i, _)| i == id) {
            out.push(format!("{id}: appeared in the round trip"));
        }
    }
    out
}

/// `feed` as session `id`.
fn renamed(feed: &SessionFeed, id: &str) -> SessionFeed {
    SessionFeed {
        id: id.to_owned(),
        header_line: feed.header_line_for(id),
        batches: feed.batches.clone(),
    }
}

/// A DSH fixture's header line made placeable in a DSH root: id `id` and an absolute cwd (the
/// snapshot goldens normalise both to placeholders).
fn fixture_header(line: &[u8], id: &str) -> String {
    let Ok(Value::Object(mut header)) = parse(std::str::from_utf8(line).expect("utf-8")) else {
        panic!("a fixture header is not an object");
    };
    header.insert("id".into(), Value::from(id));
    header.insert("cwd".into(), Value::from("/srv/project"));
    stringify(&Value::Object(header))
}

/// The DSH fixture `<stem>.jsonl` as session `id`.
fn dsh_jsonl(dir: &Path, stem: &str, id: &str) -> Vec<u8> {
    let bytes = std::fs::read(dir.join("dsh").join(format!("{stem}.jsonl"))).expect("fixture");
    let end = bytes.iter().position(|&b| b == b'\n').expect("header line");
    let mut out = fixture_header(&bytes[..end], id).into_bytes();
    out.extend_from_slice(&bytes[end..]);
    out
}

/// The DSH fixture `<name>` (a `.jsonl.zstd` as DSH's writer framed it) as session `id`: its
/// header frame replaced by one of the new header line, every other frame and byte as DSH wrote
/// them.
fn dsh_zstd(dir: &Path, name: &str, stem: &str, id: &str) -> Vec<u8> {
    let bytes = std::fs::read(dir.join("dsh-zstd").join(name)).expect("fixture");
    let plain = std::fs::read(dir.join("dsh").join(format!("{stem}.jsonl"))).expect("plaintext");
    let end = plain.iter().position(|&b| b == b'\n').expect("header line") + 1;
    let scan = scan_frames(&bytes).expect("frames");
    let frame0 = scan.frames[0].clone();
    assert_eq!(
        compress_frame(&plain[..end]).expect("frame"),
        &bytes[frame0.clone()],
        "{name}: frame 0 is not the header line alone"
    );
    let header = format!("{}\n", fixture_header(&plain[..end - 1], id));
    let mut out = compress_frame(header.as_bytes()).expect("frame");
    out.extend_from_slice(&bytes[frame0.end..]);
    out
}

/// `bytes` as DSH's live zstd writer frames a log written one event per batch: a frame a line.
fn frame_per_line(bytes: &[u8]) -> Vec<u8> {
    bytes
        .split_inclusive(|&b| b == b'\n')
        .flat_map(|line| compress_frame(line).expect("frame"))
        .collect()
}

/// Create `feed`'s session in `encoding` and append its batches; with `as_written`, through
/// DSH's persistence seam (every batch kept as written), ending with a batch of an event type
/// DSH's strict append refuses.
fn write_feed(store: &Store, feed: &SessionFeed, encoding: SourceEncoding, as_written: bool) {
    if !as_written {
        store
            .create_session(&feed.header_line, encoding)
            .unwrap_or_else(|e| panic!("create {}: {e}", feed.id));
        append_feed(store, feed);
        return;
    }
    let mut next = 0;
    for (i, b) in feed.batches.iter().enumerate() {
        let events = b.events.iter().map(new_event).collect();
        let mut item = AppendItem::new(&feed.id, Some(b.first_seq), events).as_written();
        if i == 0 {
            item = item.creating(feed.header_line.clone(), encoding);
        }
        let receipt = store.append_many(vec![item]).pop().expect("one result");
        let receipt = receipt.unwrap_or_else(|e| panic!("append {}: {e}", feed.id));
        next = receipt.first_seq + receipt.count;
    }
    let future = ev(r#"{"type":"future/event","time":6,"data":{"payload":1}}"#);
    let item = AppendItem::new(&feed.id, Some(next), vec![future]).as_written();
    let receipt = store.append_many(vec![item]).pop().expect("one result");
    receipt.unwrap_or_else(|e| panic!("append a future event to {}: {e}", feed.id));
}

/// A store at `db` holding sessions written by every writer; `None` without the DSH fixtures.
fn every_writer_store(db: &Path) -> Option<Store> {
    let dir = fixtures()?;
    let store = Store::open(db, options()).expect("open");
    let opts = GenOptions {
        sessions: 8,
        events_per_session: 120,
        seed: 63,
        torn_fraction: 0.0,
    };
    // Created, then appended batch by batch, in each encoding; the same through DSH's seam.
    let feed = session_batches(0, &opts);
    write_feed(
        &store,
        &renamed(&feed, "appended"),
        SourceEncoding::Jsonl,
        false,
    );
    let zstd = renamed(&session_batches(1, &opts), "appended-zstd");
    write_feed(&store, &zstd, SourceEncoding::JsonlZstd, false);
    let written = renamed(&session_batches(2, &opts), "as-written");
    write_feed(&store, &written, SourceEncoding::Jsonl, true);
    let written = renamed(&session_batches(3, &opts), "as-written-zstd");
    write_feed(&store, &written, SourceEncoding::JsonlZstd, true);

    // Imported `.jsonl`: generated, one torn, and DSH's own.
    let plain = session(4, &opts);
    import_bytes(&store, &plain.id, &plain.bytes, false).expect("import");
    let torn = session(
        5,
        &GenOptions {
            torn_fraction: 1.0,
            ..opts.clone()
        },
    );
    let report = import_bytes(&store, &torn.id, &torn.bytes, false).expect("import torn");
    assert_eq!(report.verdict, Verdict::Torn);
    let stems = [
        "examples__acp-agent__tests__snapshots__max-tokens-continue__session",
        "examples__acp-agent__tests__snapshots__multi-turn__session",
        "examples__acp-agent__tests__snapshots__session-title-after-turn__session",
    ];
    let bytes = dsh_jsonl(&dir, stems[0], "dsh-plain");
    import_bytes(&store, "dsh-plain", &bytes, false).expect("import DSH .jsonl");

    // Imported `.jsonl.zstd` as DSH framed them: per turn, one frame, and torn.
    let zstd_fixtures = [
        ("dsh-perturn", format!("{}.perturn.jsonl.zstd", stems[0])),
        ("dsh-perturn-2", format!("{}.perturn.jsonl.zstd", stems[1])),
        ("dsh-single", format!("{}.single.jsonl.zstd", stems[1])),
        ("dsh-torn", format!("{}.torn.jsonl.zstd", stems[2])),
        ("dsh-torn-repaired", format!("{}.torn.jsonl.zstd", stems[1])),
    ];
    for (id, name) in &zstd_fixtures {
        let stem = name.split('.').next().expect("stem");
        let bytes = dsh_zstd(&dir, name, stem, id);
        store
            .import_zstd(name, &bytes, &Default::default())
            .unwrap_or_else(|e| panic!("import {name}: {e}"));
    }
    let verdict = |id: &str| store.summary(id).expect("summary").verdict;
    assert_eq!(verdict("dsh-perturn"), Verdict::Clean);
    assert_eq!(verdict("dsh-torn"), Verdict::Torn);

    // Repaired: a torn `.jsonl` and a torn `.jsonl.zstd`.
    store.repair(&torn.id).expect("repair .jsonl");
    let repaired = store
        .repair("dsh-torn-repaired")
        .expect("repair .jsonl.zstd");
    assert!(repaired.cut_bytes > 0, "{repaired:?}");

    // Forks: of a zstd session framed by DSH, of an appended one, and a fork of a fork.
    store.fork("dsh-perturn", None, "fork-zstd").expect("fork");
    store.fork("appended", None, "fork-plain").expect("fork");
    store
        .fork("fork-plain", None, "fork-of-fork")
        .expect("fork");

    // Migrated to V4 (the V0 source stays a frozen generation), in each encoding: the first
    // generated session of each that DSH's migration takes.
    for (encoding, first) in [(SourceEncoding::Jsonl, 10), (SourceEncoding::JsonlZstd, 30)] {
        let migrated = (first..first + 20).any(|i| {
            let s = session(i, &opts);
            match encoding {
                SourceEncoding::Jsonl => {
                    import_bytes(&store, &s.id, &s.bytes, false).expect("import");
                }
                SourceEncoding::JsonlZstd => {
                    store
                        .import_zstd(&s.id, &frame_per_line(&s.bytes), &Default::default())
                        .expect("import");
                }
            }
            store.migrate(&s.id, &Default::default()).is_ok()
        });
        assert!(migrated, "no generated {encoding:?} session migrates");
    }
    assert_verifies(&store);
    Some(store)
}

/// `sessionlog --db DB ARGS…` on no object storage; the run must succeed.
fn sessionlog(db: &Path, args: &[&str]) {
    succeed(Command::new(cli()).arg("--db").arg(db).args(args), args);
}

/// Run `command`; fail the test with its output unless it succeeds.
fn succeed(command: &mut Command, args: &[&str]) {
    let out = command.output().expect("run sessionlog");
    assert!(
        out.status.success(),
        "sessionlog {} failed:\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// How the store at `db` exports differently from `before`, each line prefixed with `through`.
fn round_trip_differences(db: &Path, before: &[(String, Exports)], through: &str) -> Vec<String> {
    let store = Store::open(db, options()).expect("open");
    assert_verifies(&store);
    differences(before, &all_exports(&store))
        .into_iter()
        .map(|d| format!("through {through}: {d}"))
        .collect()
}

/// Assert no difference is left.
fn assert_none(differ: &[String]) {
    assert!(
        differ.is_empty(),
        "the round trip changed {} exports:\n{}",
        differ.len(),
        differ.join("\n")
    );
}

/// A `.jsonl` file carries no batch boundaries, so a plain session written in several batches
/// comes back as one batch; its `.jsonl.zstd` conversion is framed by its plaintext alone, so it
/// is compared like every other export.
#[test]
fn the_default_export_all_round_trips_every_writers_sessions_byte_for_byte() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("db");
    let Some(store) = every_writer_store(&db) else {
        return;
    };
    let before = all_exports(&store);
    assert!(before.len() >= 17, "{} sessions", before.len());
    drop(store);

    // Through a directory.
    let root = dir.path().join("root");
    let root_arg = root.to_str().expect("utf-8 path");
    sessionlog(&db, &["export-all", "--out", root_arg]);
    let fresh = dir.path().join("from-root");
    sessionlog(&fresh, &["import", root_arg]);
    let mut differ = round_trip_differences(&fresh, &before, "a directory");

    // Through a bucket.
    let server = server_with_bucket("round-trip");
    let url = "s3://round-trip/root";
    let args = ["export-all", "--to", url];
    succeed(&mut cli_command(&server, &db, &args), &args);
    let fresh = dir.path().join("from-bucket");
    let args = ["import", url];
    succeed(&mut cli_command(&server, &fresh, &args), &args);
    differ.extend(round_trip_differences(&fresh, &before, "a bucket"));
    assert_none(&differ);
}

#[test]
fn export_all_takes_format_stored_and_says_it_is_the_default() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("db");
    let out = Command::new(cli())
        .args(["export-all", "-h"])
        .output()
        .expect("run sessionlog");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{help}");
    assert!(help.contains("[default: stored]"), "{help}");
    assert!(
        help.contains("possible values: stored, jsonl, jsonl.zstd"),
        "{help}"
    );
    {
        let store = Store::open(&db, options()).expect("open");
        let s = session(0, &GenOptions::default());
        import_bytes(&store, &s.id, &s.bytes, false).expect("import");
    }
    let root = dir.path().join("root");
    let root_arg = root.to_str().expect("utf-8 path");
    sessionlog(
        &db,
        &["export-all", "--out", root_arg, "--format", "stored"],
    );
    let fresh = dir.path().join("fresh");
    sessionlog(&fresh, &["import", root_arg]);
    let before = all_exports(&Store::open(&db, options()).expect("open"));
    assert_none(&round_trip_differences(&fresh, &before, "--format stored"));
}
