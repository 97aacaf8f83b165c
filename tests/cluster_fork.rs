//! Fork and import in the fleet, on a real PostgreSQL (a throwaway cluster started here). A fork
//! made on one host is DSH's fork file (the embedded store's fork, header time aside) on every
//! host, an empty disk included; forking a session another host owns only reads it; a refused
//! fork or import writes nothing in PostgreSQL; an imported DSH file comes back byte for byte
//! from another host. V0 and V4, `.jsonl` and `.jsonl.zstd`.
//!
//! Needs PostgreSQL 15's server binaries, as `cluster.rs` does.

use std::path::Path;

use sessionlog::engine::{Error, ExportFormat, ImportOptions, Options, Store};
use sessionlog_cluster::{Config, Fleet, FleetOptions};
use sessionlog_harness::gen::{host_options, session_feed, GenOptions, LogFormat};
use sessionlog_harness::postgres::TempPostgres;

use crate::cluster::{fleet_database, host_url, verified};
use crate::fixtures::{all_events, export_as, temp_host_store};

fn join(pg: &TempPostgres, dir: &Path, host: &str) -> Fleet {
    let config = Config::parse(&host_url(pg, host)).expect("url");
    let options = FleetOptions {
        store: host_options(Options::default()),
        ..FleetOptions::new(host)
    };
    Fleet::open(dir.join(host), config, options).expect("join the fleet")
}

/// One generated session of about `events` events.
fn generated(events: u64, seed: u64) -> GenOptions {
    GenOptions {
        sessions: 1,
        events_per_session: events,
        seed,
        torn_fraction: 0.0,
    }
}

fn exported(fleet: &Fleet, id: &str, format: ExportFormat) -> Vec<u8> {
    export_as(fleet.store(), id, Some(format))
}

/// Land `bytes` (a `.jsonl` or `.jsonl.zstd` file) in the embedded store `store`.
fn land(store: &Store, bytes: &[u8]) -> String {
    let options = ImportOptions::default();
    let report = match bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        true => store.import_zstd("parent", bytes, &options),
        false => store.import_jsonl("parent", bytes, &options, &mut |_| {}),
    };
    report.expect("import into the embedded store").id
}

/// `file`'s `createdAt` (the fork's time, also the time of a V0 end-seed) as text.
fn created_at(file: &[u8]) -> String {
    let text = String::from_utf8_lossy(file);
    let at = text.find("\"createdAt\":").expect("a createdAt") + "\"createdAt\":".len();
    text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect()
}

/// `reference` (the embedded store's fork file) with the fork time `fleet`'s file carries.
fn at_fleet_time(reference: &[u8], fleet: &[u8]) -> Vec<u8> {
    String::from_utf8_lossy(reference)
        .replace(&created_at(reference), &created_at(fleet))
        .into_bytes()
}

/// Rows and batches PostgreSQL holds.
fn counts(pg: &TempPostgres) -> String {
    pg.psql(
        "SELECT (SELECT count(*) FROM sessionlog.sessions) || '/' || \
         (SELECT count(*) FROM sessionlog.batches) || '/' || \
         (SELECT count(*) FROM sessionlog.lineage)",
    )
    .expect("counts")
}

fn root_of(pg: &TempPostgres, id: &str) -> String {
    pg.psql(&format!(
        "SELECT root_id FROM sessionlog.sessions WHERE id = '{id}'"
    ))
    .expect("root")
    .trim()
    .to_owned()
}

fn fork_code(e: &sessionlog_cluster::Error) -> Option<&'static str> {
    match e {
        sessionlog_cluster::Error::Store(Error::Fork { code, .. }) => Some(code),
        _ => None,
    }
}

#[test]
fn a_fork_in_the_fleet_is_dsh_s_fork_file_on_every_host() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let (a, b) = (
        join(&pg, dir.path(), "host-a"),
        join(&pg, dir.path(), "host-b"),
    );
    let opts = generated(400, 52);
    let mut n = 0;
    for format in [LogFormat::V0, LogFormat::V4] {
        for zstd in [false, true] {
            n += 1;
            let (_t, reference) = temp_host_store();
            let feed = session_feed(n, &opts, format);
            let jsonl = feed.dsh_bytes();
            let parent = land(&reference, &jsonl);
            let file = match zstd {
                false => jsonl,
                true => export_as(&reference, &parent, Some(ExportFormat::JsonlZstd)),
            };
            // The parent is host-b's; host-a forks it, reading it only.
            b.import("parent", &file)
                .expect("import the parent on host-b");
            let before = pg
                .psql(&format!(
                    "SELECT owner, owner_epoch, next_seq, next_batch FROM sessionlog.sessions \
                     WHERE id = '{parent}'"
                ))
                .expect("parent row");
            let events = all_events(&reference, &parent);
            let middle = events
                .iter()
                .position(|e| {
                    e.as_object()
                        .and_then(|o| o.get("type"))
                        .and_then(|t| t.as_str())
                        == Some("turn/end")
                })
                .expect("a turn/end") as u64;
            // V4 also inside a turn (the `forked` closers); V0 refuses that (`OPEN_TURN`).
            let inside = match format {
                LogFormat::V0 => None,
                LogFormat::V4 => Some(middle - 2),
            };
            for (k, boundary) in [None, Some(middle), inside].into_iter().enumerate() {
                let child = format!("{parent}-child-{k}");
                let report = a
                    .fork(&parent, boundary, &child)
                    .expect("fork in the fleet");
                let embedded = reference
                    .fork(&parent, boundary, &child)
                    .expect("embedded fork");
                assert_eq!(report, embedded, "{child}");
                if k == 2 && format == LogFormat::V4 {
                    assert!(report.closers > 0, "{child}: forked inside a turn");
                }
                let on_a = exported(&a, &child, ExportFormat::Jsonl);
                let dsh = export_as(&reference, &child, Some(ExportFormat::Jsonl));
                assert_eq!(on_a, at_fleet_time(&dsh, &on_a), "{child}: DSH's fork file");
                assert!(a.holds(&child), "{child}: the forking host holds the child");
                let row = a
                    .sessions()
                    .expect("listing")
                    .into_iter()
                    .find(|r| r.id == child)
                    .expect("the child's row");
                assert_eq!(row.parent.as_deref(), Some(parent.as_str()), "{child}");
                assert_eq!(row.seed, Some(report.seed as i64), "{child}");
                assert_eq!(
                    root_of(&pg, &child),
                    root_of(&pg, &parent),
                    "{child}: one shard"
                );
            }
            let after = pg
                .psql(&format!(
                    "SELECT owner, owner_epoch, next_seq, next_batch FROM sessionlog.sessions \
                     WHERE id = '{parent}'"
                ))
                .expect("parent row");
            assert_eq!(before, after, "the parent is not written by a fork");

            // A fork of a fork stays on the tree's root.
            let grandchild = format!("{parent}-grandchild");
            a.fork(&format!("{parent}-child-1"), None, &grandchild)
                .expect("a fork of a fork");
            assert_eq!(root_of(&pg, &grandchild), root_of(&pg, &parent));

            // An empty disk takes the children over and exports the same bytes.
            let c = join(&pg, dir.path(), &format!("host-c{n}"));
            for child in (0..3)
                .map(|k| format!("{parent}-child-{k}"))
                .filter(|child| a.holds(child))
                .chain([grandchild.clone()])
            {
                let taken = c.acquire(&child, true).expect("taken over");
                assert!(
                    taken.row.parent.is_some(),
                    "{child}: the parent, as acquired"
                );
                for format in [ExportFormat::Jsonl, ExportFormat::JsonlZstd] {
                    assert_eq!(
                        exported(&c, &child, format),
                        exported(&a, &child, format),
                        "{child}"
                    );
                }
            }
            verified(&[&a, &b, &c]);
        }
    }
}

#[test]
fn a_refused_fork_writes_nothing_in_postgresql() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let (a, b) = (
        join(&pg, dir.path(), "host-a"),
        join(&pg, dir.path(), "host-b"),
    );
    for (format, parent) in [(LogFormat::V0, "v0"), (LogFormat::V4, "v4")] {
        let opts = generated(200, 7);
        let feed = session_feed(1, &opts, format);
        let file = feed.dsh_bytes();
        let text = String::from_utf8_lossy(&file).replacen(&feed.id, parent, 1);
        a.import(parent, text.as_bytes()).expect("import");
    }
    // An id host-a's store never saw, taken on host-b.
    b.fork("v0", None, "taken").expect("fork on host-b");
    let events = a.store().summary("v4").expect("summary").events;
    let before = counts(&pg);
    for (parent, boundary, new_id, code) in [
        ("v0", Some(1_000_000), "x", "INVALID_BOUNDARY"),
        ("v4", Some(events), "x", "INVALID_BOUNDARY"),
        ("v4", None, "taken", "SESSION_ALREADY_EXISTS"),
        ("v0", None, "v4", "SESSION_ALREADY_EXISTS"),
        ("nobody", None, "x", "SESSION_NOT_FOUND"),
    ] {
        let e = a.fork(parent, boundary, new_id).expect_err("refused");
        assert_eq!(fork_code(&e), Some(code), "{parent} → {new_id}: {e}");
        assert_eq!(counts(&pg), before, "{parent} → {new_id}: nothing written");
    }
    assert!(!a.holds("x") && !a.holds("taken"));
}

#[test]
fn an_imported_file_comes_back_byte_for_byte_from_another_host() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let (a, b) = (
        join(&pg, dir.path(), "host-a"),
        join(&pg, dir.path(), "host-b"),
    );
    let fixtures = Path::new("../shared/fixtures");
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    for (sub, suffix) in [
        ("dsh", "__session.jsonl"),
        ("dsh-zstd", ".perturn.jsonl.zstd"),
        ("dsh-zstd", ".single.jsonl.zstd"),
        ("dsh-later", ".v4.jsonl"),
    ] {
        let mut found: Vec<_> = std::fs::read_dir(fixtures.join(sub))
            .expect("fixtures")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.to_string_lossy().ends_with(suffix))
            .collect();
        found.sort();
        files.extend(found.into_iter().take(2));
    }
    assert!(files.len() >= 7, "{files:?}");
    let mut ids = std::collections::HashSet::new();
    for path in &files {
        let bytes = std::fs::read(path).expect("read");
        let name = path.display().to_string();
        let imported = match a.import(&name, &bytes) {
            Ok(i) => i,
            // Fixtures of one session in both encodings: the second is refused as existing.
            Err(e) if !ids.insert(name.clone()) => panic!("{name}: {e}"),
            Err(e) => {
                assert!(e.to_string().contains("already exists"), "{name}: {e}");
                continue;
            }
        };
        if !ids.insert(imported.id.clone()) {
            continue;
        }
        b.acquire(&imported.id, true).expect("taken over");
        let kept = match name.ends_with(".zstd") {
            true => ExportFormat::JsonlZstd,
            false => ExportFormat::Jsonl,
        };
        assert_eq!(exported(&b, &imported.id, kept), bytes, "{name}");
        assert_eq!(exported(&a, &imported.id, kept), bytes, "{name}");
    }

    // Refused whole: a torn file, and an id the fleet holds; nothing written.
    let before = counts(&pg);
    let torn =
        std::fs::read(fixtures.join(
            "dsh-zstd/apps__web__tests__snapshots__cordis-tool-round__session.torn.jsonl.zstd",
        ))
        .expect("torn fixture");
    let e = a.import("torn", &torn).expect_err("a torn frame");
    assert!(e.to_string().contains("torn"), "{e}");
    let whole = std::fs::read(&files[0]).expect("read");
    let e = a
        .import("cut", &whole[..whole.len() - 2])
        .expect_err("a torn line");
    assert!(e.to_string().contains("torn tail"), "{e}");
    let e = b.import("again", &whole).expect_err("exists");
    assert!(e.to_string().contains("already exists"), "{e}");
    // A damaged frame in the middle of a file of many refuses all of it.
    let frames_of = |bytes: &[u8]| {
        sessionlog::codec::format::zstd::scan_frames(bytes)
            .expect("frames")
            .frames
    };
    let mut damaged = std::fs::read_dir(fixtures.join("dsh-zstd"))
        .expect("fixtures")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".perturn.jsonl.zstd"))
        .map(|p| std::fs::read(p).expect("read"))
        .max_by_key(|bytes| frames_of(bytes).len())
        .expect("a per-turn file");
    let frames = frames_of(&damaged);
    assert!(frames.len() > 3, "{} frames", frames.len());
    let middle = frames[frames.len() / 2].clone();
    damaged[middle.start + (middle.end - middle.start) / 2] ^= 0x55;
    // On a host that never saw the session, so the frames are read before PostgreSQL is asked.
    let d = join(&pg, dir.path(), "host-d");
    let e = d.import("damaged", &damaged).expect_err("a damaged frame");
    assert!(e.to_string().contains("does not decode"), "{e}");
    assert_eq!(counts(&pg), before);
    verified(&[&a, &b]);
}

#[test]
fn an_id_is_created_once_across_lineage_roots() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let a = join(&pg, dir.path(), "host-a");
    a.import("s", crate::cluster::header("s").as_bytes())
        .expect_err("no newline after the header");
    a.import("s", format!("{}\n", crate::cluster::header("s")).as_bytes())
        .expect("an empty session");
    let mut host = postgres::Client::connect(&host_url(&pg, "host-b"), postgres::NoTls)
        .expect("connect as host-b's role");
    let row = host
        .query_one(
            "SELECT outcome FROM sessionlog.append_batches('host-b', 30, ARRAY['another-root'], \
             ARRAY['s'], ARRAY[1]::bigint[], ARRAY[1]::bigint[], ARRAY[0]::bigint[], \
             ARRAY[0]::bigint[], ARRAY[''::bytea], ARRAY[0]::bigint[], ARRAY['clean'], \
             ARRAY['h'::bytea], ARRAY[false], ARRAY[0], ARRAY[NULL]::text[], \
             ARRAY[NULL]::bigint[])",
            &[],
        )
        .expect("append_batches");
    assert_eq!(row.get::<_, String>(0), "exists");
    assert_eq!(
        pg.psql("SELECT count(*) FROM sessionlog.sessions WHERE id = 's'")
            .expect("count")
            .trim(),
        "1"
    );
}

#[test]
fn cluster_init_upgrades_a_version_1_schema_and_a_host_refuses_another_version() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    // Version 1's shape: no fork columns.
    pg.psql(
        "ALTER TABLE sessionlog.sessions DROP COLUMN parent_id, DROP COLUMN seed; \
         UPDATE sessionlog.schema_version SET version = 1",
    )
    .expect("a version-1 schema");
    let config = Config::parse(&host_url(&pg, "h")).expect("url");
    let e = Fleet::open(dir.path().join("h"), config, FleetOptions::new("h"))
        .expect_err("another version");
    assert!(
        e.to_string().contains(&format!(
            "is version 1; this build uses version {}; run `sessionlog cluster init`",
            sessionlog_cluster::schema::VERSION
        )),
        "{e}"
    );
    let mut admin = postgres::Client::connect(&pg.url("postgres", "postgres"), postgres::NoTls)
        .expect("connect as the superuser");
    sessionlog_cluster::schema::init(&mut admin, &["host".to_owned()]).expect("upgraded");
    let a = join(&pg, dir.path(), "host-a");
    a.import("p", format!("{}\n", crate::cluster::header("p")).as_bytes())
        .expect("a session");
    a.fork("p", None, "q")
        .expect("a fork on the upgraded schema");
    let rows = a.sessions().expect("listing");
    let q = rows.iter().find(|r| r.id == "q").expect("q");
    assert_eq!((q.parent.as_deref(), q.seed), (Some("p"), Some(0)));
}

#[test]
fn the_cli_forks_and_imports_in_the_fleet() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let run = |host: &str, args: &[&str]| {
        let out = std::process::Command::new(crate::objects::cli())
            .arg("--db")
            .arg(dir.path().join(host))
            .args(["--cluster", &host_url(&pg, host), "--host", host])
            .args(args)
            .output()
            .expect("run sessionlog");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Import `path` on `host`; the id it printed (`imported ID: …`).
    let import = |host: &str, path: &str| {
        let (ok, out, err) = run(host, &["import", path]);
        assert!(ok && out.contains("imported"), "{out}{err}");
        out.split_whitespace()
            .nth(1)
            .expect("the imported id")
            .trim_end_matches(':')
            .to_owned()
    };
    let opts = generated(300, 3);
    let bytes = session_feed(0, &opts, LogFormat::V0).dsh_bytes();
    let file = dir.path().join("parent.jsonl");
    std::fs::write(&file, &bytes).expect("write");
    let path = file.to_str().expect("a UTF-8 path");
    let id = import("h1", path);
    let (ok, out, err) = run("h1", &["fork", &id, "cli-child"]);
    assert!(ok && out.contains("forked"), "{out}{err}");
    // Another host, an empty disk: the same bytes.
    let exported = dir.path().join("out.jsonl");
    let (ok, out, err) = run(
        "h2",
        &["export", &id, "-o", exported.to_str().expect("UTF-8")],
    );
    assert!(ok, "{out}{err}");
    assert_eq!(std::fs::read(&exported).expect("exported"), bytes);
    let (ok, out, err) = run("h2", &["export", "cli-child"]);
    assert!(ok && out.contains("\"parentSession\""), "{out}{err}");
    // Refused: the same file again, and a write the fleet does not carry.
    let (ok, _, err) = run("h2", &["import", path]);
    assert!(!ok && err.contains("already exists"), "{err}");
    let (ok, _, err) = run("h2", &["repair", &id]);
    assert!(
        !ok && err.contains("repair is not carried by the fleet"),
        "{err}"
    );
    let (ok, _, err) = run("h2", &["purge", "--dry-run"]);
    assert!(
        !ok && err.contains("a dry run of purge is not carried by the fleet"),
        "{err}"
    );
    // A query needs no fleet code of its own: a third host, an empty disk, reads it caught up,
    // and lists the fleet's sessions.
    let (ok, out, err) = run("h3", &["kinds", "cli-child"]);
    assert!(ok && out.contains("\"session/end-seed\":1"), "{out}{err}");
    let (ok, out, err) = run("h3", &["ls"]);
    assert!(
        ok && out.contains(&id) && out.contains("cli-child"),
        "{out}{err}"
    );
    // A search on an empty host finds the sessions two other hosts wrote.
    let second = dir.path().join("second.jsonl");
    std::fs::write(&second, session_feed(1, &opts, LogFormat::V0).dsh_bytes()).expect("write");
    let second_id = import("h2", second.to_str().expect("UTF-8"));
    let (ok, out, err) = run("h4", &["search", "--json"]);
    let found: Vec<String> = out
        .lines()
        .filter_map(|l| match sessionlog::codec::json::parse(l) {
            Ok(sessionlog::codec::json::Value::Object(o)) => match o.get("id") {
                Some(sessionlog::codec::json::Value::String(id)) => Some(id.to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert!(ok, "{out}{err}");
    for expected in [&id, &second_id, &"cli-child".to_owned()] {
        assert!(
            found.contains(expected),
            "{expected} not in {found:?}: {out}{err}"
        );
    }
}
