//! Object storage, against a real S3-compatible server (SeaweedFS on loopback, started per test):
//! `export-all --to` then `import` from the bucket gives back every session byte for byte (both
//! encodings, every generation, a file large enough to go up in parts); a rerun uploads nothing
//! and a changed session is never overwritten; archive, reads of archived sessions and restore;
//! and no output of the CLI ever shows the secret key.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sessionlog::engine::{Error, ExportFormat, Options, Store};
use sessionlog_archive::{
    archive, export_all, import_root, restore, ArchiveRoot, ArchiveSources, ArchivedView, Bucket,
    S3Config, Transfer,
};
use sessionlog_harness::gen::{session, GenOptions};
use sessionlog_harness::seaweed::SeaweedServer;

use crate::fixtures::{export_as, import_bytes, temp_store};

/// Transfers small enough that a test's files cross part boundaries (S3's smallest part).
pub fn transfer() -> Transfer {
    Transfer {
        sessions_in_flight: 4,
        part_bytes: 5 << 20,
        retry_timeout: Duration::from_secs(5),
        ..Transfer::default()
    }
}

/// The client configuration of `server`.
pub fn config(server: &SeaweedServer) -> S3Config {
    server.s3_config()
}

/// A client of `url` on `server`.
pub fn bucket(server: &SeaweedServer, url: &str) -> Bucket {
    Bucket::open(
        ArchiveRoot::parse(url).expect("url"),
        &config(server),
        transfer(),
    )
    .expect("client")
}

/// A store holding every kind of session an export carries: plain logs (some torn), zstd logs,
/// migrated sessions (a frozen generation beside the served one, in each encoding), and one
/// larger than a part.
pub fn varied_store(dir: &Path) -> Store {
    let store = Store::open(dir.join("db"), options()).expect("open");
    let plain = GenOptions {
        sessions: 6,
        events_per_session: 400,
        seed: 11,
        torn_fraction: 0.3,
    };
    import_generated(&store, &plain);
    let (_scratch_dir, scratch) = temp_store();
    let framed = GenOptions {
        sessions: 3,
        seed: 12,
        torn_fraction: 0.0,
        ..plain.clone()
    };
    for i in 0..framed.sessions {
        let s = session(i, &framed);
        import_bytes(&scratch, &s.id, &s.bytes, false).expect("import");
        let zstd = export_as(&scratch, &s.id, Some(ExportFormat::JsonlZstd));
        store
            .import_zstd(&s.id, &zstd, &Default::default())
            .expect("import zstd");
    }
    let large = GenOptions {
        sessions: 1,
        events_per_session: 150_000,
        seed: 13,
        torn_fraction: 0.0,
    };
    let big = session(0, &large);
    assert!(
        big.bytes.len() > 5 << 20,
        "{} bytes fit one part",
        big.bytes.len()
    );
    import_bytes(&store, &big.id, &big.bytes, false).expect("import large");
    // Migrated: a frozen V0 generation beside the served V4 one, in each encoding.
    for ids in [plain_ids(&plain), plain_ids(&framed)] {
        let migrated = ids.iter().any(|id| {
            store.summary(id).expect("summary").verdict == sessionlog::engine::Verdict::Clean
                && store.migrate(id, &Default::default()).is_ok()
        });
        assert!(migrated, "no session of {ids:?} migrates");
    }
    store
}

/// Import the sessions `opts` generates, as `.jsonl`.
pub fn import_generated(store: &Store, opts: &GenOptions) {
    for i in 0..opts.sessions {
        let s = session(i, opts);
        import_bytes(store, &s.id, &s.bytes, false).expect("import");
    }
}

fn plain_ids(opts: &GenOptions) -> Vec<String> {
    (0..opts.sessions).map(|i| session(i, opts).id).collect()
}

/// The store options of these tests (buffered: nothing here measures fsync).
pub fn options() -> Options {
    Options {
        durability: sessionlog::engine::Durability::Buffered,
        ..Options::default()
    }
}

/// What [`exports`] gives for one session: each export's bytes, or its error's text.
pub type Exports = Vec<Result<Vec<u8>, String>>;

/// Everything a session exports as: kept, as `.jsonl`, as `.jsonl.zstd` (or why not), and each
/// generation as stored.
pub fn exports(store: &Store, id: &str) -> Exports {
    let mut out = Vec::new();
    for format in [
        None,
        Some(ExportFormat::Jsonl),
        Some(ExportFormat::JsonlZstd),
    ] {
        let mut bytes = Vec::new();
        out.push(
            store
                .export(id, format, &mut bytes)
                .map(|_| bytes)
                .map_err(|e| e.to_string()),
        );
    }
    let summary = store.summary(id).expect("summary");
    for version in summary.generations {
        let mut bytes = Vec::new();
        out.push(
            store
                .export_generation(id, version, None, &mut bytes)
                .map(|_| bytes)
                .map_err(|e| e.to_string()),
        );
    }
    out
}

/// Every session's [`exports`], by id.
pub fn all_exports(store: &Store) -> Vec<(String, Exports)> {
    store
        .ids()
        .expect("ids")
        .into_iter()
        .map(|id| {
            let e = exports(store, &id);
            (id, e)
        })
        .collect()
}

/// Assert `store` verifies clean.
pub fn assert_verifies(store: &Store) {
    let report = store.verify(&[]).expect("verify");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// A server with bucket `name`.
pub fn server_with_bucket(name: &str) -> SeaweedServer {
    let server = SeaweedServer::start().unwrap_or_else(|e| panic!("{e:#}"));
    server.create_bucket(name).expect("bucket");
    server
}

/// The `sessionlog` binary beside this test binary (`cargo build --release` builds it; `./x
/// test` does so first).
pub fn cli() -> PathBuf {
    crate::fixtures::built_binary("sessionlog")
}

pub fn cli_command(server: &SeaweedServer, db: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(cli());
    // Short retries: the kill tests take the server down under runs that must then fail.
    c.arg("--db")
        .arg(db)
        .args(["--s3-retry-timeout", "5"])
        .args(args);
    for (k, v) in server.env() {
        c.env(k, v);
    }
    c
}

#[test]
fn export_to_a_bucket_and_import_back_is_byte_identical() {
    let server = server_with_bucket("exports");
    let dir = tempfile::tempdir().expect("temp dir");
    let store = varied_store(dir.path());
    let sources = ArchiveSources::new(config(&server), transfer());
    let target = bucket(&server, "s3://exports/root");
    let first = export_all(&store, &target, &sources, None, &|_| {}).expect("export");
    assert!(first.failures.is_empty(), "{:?}", first.failures);
    let files: u64 = store
        .ids()
        .expect("ids")
        .iter()
        .map(|id| store.root_files(id, None).expect("files").len() as u64)
        .sum();
    assert_eq!(
        (first.sessions, first.created, first.already_there),
        (store.ids().expect("ids").len() as u64, files, 0)
    );
    assert!(files > first.sessions, "no session has two generations");

    // A rerun finds every object there with the same bytes and uploads nothing.
    let again = export_all(&store, &target, &sources, None, &|_| {}).expect("rerun");
    assert_eq!((again.created, again.already_there), (0, files));
    assert!(again.failures.is_empty(), "{:?}", again.failures);

    let (_fresh_dir, fresh) = temp_store();
    let imported = import_root(&fresh, &target, &Default::default(), &|_| {}).expect("import");
    for (name, outcome) in &imported {
        assert!(outcome.is_ok(), "{name}: {outcome:?}");
    }
    assert_eq!(all_exports(&fresh), all_exports(&store));
    assert_verifies(&fresh);

    // A session changed since: its object is never replaced, and the failure says so.
    let id = store.ids().expect("ids").remove(0);
    let header = store.summary(&id).expect("summary").header;
    let changed = {
        let (_d, other) = temp_store();
        let text = format!("{header}\n");
        import_bytes(&other, &id, text.as_bytes(), false).expect("import");
        let mut bytes = Vec::new();
        other.export(&id, None, &mut bytes).expect("export");
        bytes
    };
    drop(store);
    let store = Store::open(dir.path().join("other"), options()).expect("open");
    import_bytes(&store, &id, &changed, false).expect("import");
    let conflict = export_all(&store, &target, &sources, None, &|_| {}).expect("export");
    assert_eq!(conflict.failures.len(), 1, "{conflict:?}");
    assert!(
        conflict.failures[0].1.contains("is never overwritten"),
        "{:?}",
        conflict.failures
    );
    let (_d, check) = temp_store();
    import_root(&check, &target, &Default::default(), &|_| {}).expect("import");
    assert_ne!(
        export_as(&check, &id, None),
        changed,
        "the object was replaced"
    );
}

#[test]
fn archived_sessions_are_read_through_the_archive_and_restored_whole() {
    let server = server_with_bucket("cold");
    let dir = tempfile::tempdir().expect("temp dir");
    let store = varied_store(dir.path());
    // A fork and its parent stay: the fork reads its prefix from its parent's storage.
    let parent = store
        .list()
        .expect("list")
        .into_iter()
        .find(|s| s.verdict == sessionlog::engine::Verdict::Clean && s.format == 0)
        .expect("a clean V0 session")
        .id;
    store.fork(&parent, None, "a-fork").expect("fork");
    let before = all_exports(&store);
    let messages_before: Vec<_> = store
        .ids()
        .expect("ids")
        .into_iter()
        .map(|id| {
            (
                id.clone(),
                store.messages_at(&id, None).map_err(|e| e.to_string()),
            )
        })
        .collect();

    let target = bucket(&server, "s3://cold/archive");
    let summary = archive(&store, &target, 0, &|_| {}).expect("archive");
    assert!(summary.failures.is_empty(), "{:?}", summary.failures);
    let mut kept: Vec<&str> = summary.kept.iter().map(|(id, _)| id.as_str()).collect();
    kept.sort_unstable();
    let mut expected = [parent.as_str(), "a-fork"];
    expected.sort_unstable();
    assert_eq!(kept, expected, "{:?}", summary.kept);
    assert_eq!(summary.archived.len(), before.len() - 2);
    assert_verifies(&store);

    let sources = ArchiveSources::new(config(&server), transfer());
    for (id, _) in &summary.archived {
        let listed = store.summary(id).expect("summary");
        assert!(listed.archived.is_some(), "{id} is not listed as archived");
        assert!(
            matches!(
                store.export(id, None, &mut Vec::new()),
                Err(Error::Archived { .. })
            ),
            "{id}'s emptied ranges were read"
        );
        let prompt = r#"{"type":"user/message","data":{"id":"u9","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}"#;
        let appended = store.append(id, None, vec![crate::fixtures::ev(prompt)]);
        assert!(
            matches!(appended, Err(Error::Archived { .. })),
            "{appended:?}"
        );
        let view = ArchivedView::open(&store, &sources, id, options()).expect("view");
        let expected = &before.iter().find(|(i, _)| i == id).expect("before").1;
        assert_eq!(
            &exports(view.store(), id),
            expected,
            "{id} reads differently"
        );
        let messages = view
            .store()
            .messages_at(id, None)
            .map_err(|e| e.to_string());
        let expected = &messages_before
            .iter()
            .find(|(i, _)| i == id)
            .expect("before")
            .1;
        assert_eq!(&messages, expected, "{id}'s messages differ");
    }

    for (id, _) in &summary.archived {
        let restored = restore(&store, &sources, id).expect("restore");
        assert!(
            restored.not_deleted.is_empty(),
            "{:?}",
            restored.not_deleted
        );
    }
    assert_eq!(all_exports(&store), before);
    assert_verifies(&store);
    // The objects went with the restore, so the sessions archive again.
    let again = archive(&store, &target, 0, &|_| {}).expect("archive again");
    assert!(again.failures.is_empty(), "{:?}", again.failures);
    assert_eq!(again.archived.len(), summary.archived.len());
}

#[test]
fn no_output_of_the_cli_shows_the_secret_key() {
    let mut server = server_with_bucket("secrets");
    let dir = tempfile::tempdir().expect("temp dir");
    {
        let store = Store::open(dir.path().join("db"), options()).expect("open");
        let s = session(0, &GenOptions::default());
        import_bytes(&store, &s.id, &s.bytes, false).expect("import");
    }
    let db = dir.path().join("db");
    let wrong = format!("{}-wrong", server.secret_access_key);
    let mut outputs = Vec::new();
    let mut run = |server: &SeaweedServer, secret: &str, args: &[&str]| {
        let out = cli_command(server, &db, args)
            .env("AWS_SECRET_ACCESS_KEY", secret)
            .output()
            .expect("run sessionlog");
        outputs.push((
            args.join(" "),
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        ));
    };
    let right = server.secret_access_key.clone();
    run(
        &server,
        &wrong,
        &["export-all", "--to", "s3://secrets/x", "--json"],
    );
    run(
        &server,
        &wrong,
        &[
            "archive",
            "--older-than",
            "0s",
            "--to",
            "s3://secrets/a",
            "--json",
        ],
    );
    run(&server, &wrong, &["import", "s3://secrets/x"]);
    run(
        &server,
        &right,
        &["export-all", "--to", "s3://secrets/x", "--json"],
    );
    run(
        &server,
        &right,
        &["archive", "--older-than", "0s", "--to", "s3://secrets/a"],
    );
    run(&server, &right, &["ls", "--json"]);
    server.kill();
    run(&server, &right, &["verify", "--objects", "--json"]);
    run(
        &server,
        &right,
        &["export-all", "--to", "s3://secrets/y", "--json"],
    );
    let successes: Vec<bool> = outputs.iter().map(|(_, ok, _)| *ok).collect();
    assert_eq!(
        successes,
        [false, false, false, true, true, true, false, false],
        "{outputs:#?}"
    );
    for (args, _, text) in &outputs {
        assert!(
            !text.contains(&right) && !text.contains(&wrong),
            "`sessionlog {args}` showed a secret key:\n{text}"
        );
    }
    // The refusals name what failed.
    assert!(outputs[0].2.contains("s3://secrets"), "{}", outputs[0].2);
}
