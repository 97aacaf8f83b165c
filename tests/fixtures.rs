//! Locating `../shared/fixtures` in place (never copied into the repo), and small helpers.

use std::path::{Path, PathBuf};
use std::process::Command;

use sessionlog::engine::{Options, Store};
use sessionlog_harness::requirement::missing;

/// The checkout cargo runs these tests for (its `CARGO_MANIFEST_DIR` at run time), else the one
/// they were compiled in: a target directory shared between checkouts may hand this checkout a
/// test binary built in another, whose compile-time path would point there.
pub fn checkout() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// `<repo>/../shared/fixtures`, or `None` where it is missing: then the calling test fails under
/// CI (`CI` set) and says on stderr what it skipped elsewhere (`requirement::missing`).
#[track_caller]
pub fn fixtures() -> Option<PathBuf> {
    let dir = checkout().join("../shared/fixtures");
    if dir.is_dir() {
        return Some(dir);
    }
    missing(
        "the shared DSH fixtures",
        &format!("{} is missing", dir.display()),
    );
    None
}

/// A batch-shape event (`{"type","data",…}`, as the CLI reads it) as an append input.
pub fn ev(text: &str) -> sessionlog::codec::format::event::NewEvent {
    sessionlog::codec::format::event::NewEvent::from_value(
        &sessionlog::codec::json::parse(text).expect("json"),
    )
    .expect("event")
}

/// A generated (already logged) event as an append input.
pub fn new_event(v: &sessionlog::codec::json::Value) -> sessionlog::codec::format::event::NewEvent {
    sessionlog::codec::format::event::NewEvent::from_logged(v).expect("a generated event")
}

/// Create the generated session `feed` and append all its batches live, as DSH would write them.
pub fn host_feed(store: &Store, feed: &sessionlog_harness::gen::SessionFeed) {
    store
        .create_session(&feed.header_line, sessionlog::engine::SourceEncoding::Jsonl)
        .unwrap_or_else(|e| panic!("create {}: {e}", feed.id));
    append_feed(store, feed);
}

/// Append every batch of the generated session `feed`, at its expected seq.
pub fn append_feed(store: &Store, feed: &sessionlog_harness::gen::SessionFeed) {
    for b in &feed.batches {
        store
            .append(
                &feed.id,
                Some(b.first_seq),
                b.events.iter().map(new_event).collect(),
            )
            .unwrap_or_else(|e| panic!("append {} at seq {}: {e}", feed.id, b.first_seq));
    }
}

/// The sorted names of the files in `dir` that end with one of `suffixes`.
pub fn names_ending(dir: &Path, suffixes: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("entry").file_name().into_string().expect("utf8"))
        .filter(|n| suffixes.iter().any(|s| n.ends_with(s)))
        .collect();
    names.sort();
    names
}

/// A fresh store in a temp dir (buffered durability: tests do not measure fsync).
pub fn temp_store() -> (tempfile::TempDir, Store) {
    temp_store_with(Options::default())
}

/// A fresh store of the generator's host: `image/offload` registered, as a DSH 0.2 host that
/// loads its image-offload plugin has it (`sessionlog_harness::gen::host_options`). Generated
/// V4 sessions hold `image/offload` events.
pub fn temp_host_store() -> (tempfile::TempDir, Store) {
    temp_store_with(sessionlog_harness::gen::host_options(Options::default()))
}

/// A fresh store in a temp dir opened with `options`, under buffered durability.
pub fn temp_store_with(options: Options) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("temp dir");
    let options = Options {
        durability: sessionlog::engine::Durability::Buffered,
        ..options
    };
    let store = Store::open(dir.path().join("db"), options).expect("open store");
    (dir, store)
}

/// Import bytes held in memory.
pub fn import_bytes(
    store: &Store,
    name: &str,
    bytes: &[u8],
    strict: bool,
) -> sessionlog::engine::Result<sessionlog::engine::ImportReport> {
    store.import_jsonl(
        name,
        bytes,
        &sessionlog::engine::ImportOptions {
            strict,
            ..Default::default()
        },
        &mut |_| {},
    )
}

/// The ids `Store::list` shows.
pub fn listed_ids(store: &Store) -> Vec<String> {
    store
        .list()
        .expect("list")
        .into_iter()
        .map(|s| s.id)
        .collect()
}

/// Export to memory, the bytes as kept.
pub fn export_bytes(store: &Store, id: &str) -> Vec<u8> {
    store
        .export_bytes(id)
        .unwrap_or_else(|e| panic!("export {id}: {e}"))
}

/// Export to memory as `format` (`None`: the bytes as kept).
pub fn export_as(
    store: &Store,
    id: &str,
    format: Option<sessionlog::engine::ExportFormat>,
) -> Vec<u8> {
    let mut out = Vec::new();
    store
        .export(id, format, &mut out)
        .unwrap_or_else(|e| panic!("export {id}: {e}"));
    out
}

/// `sessionlog events` output, in memory.
pub fn events_text(store: &Store, id: &str) -> sessionlog::engine::Result<String> {
    let mut out = String::new();
    store.events(id, 0, None, &mut |_, e| {
        sessionlog::codec::json::write_value(&mut out, e);
        out.push('\n');
        Ok(())
    })?;
    Ok(out)
}

/// Assert the store holds no session and no stray line.
pub fn assert_empty(store: &Store) {
    assert!(
        store.list().expect("list").is_empty(),
        "store should hold no session"
    );
    let report = store.verify(&[]).expect("verify");
    assert!(
        report.problems.is_empty(),
        "stray data: {:?}",
        report.problems
    );
}

/// Every logical event of a stored session, by a full scan.
pub fn all_events(store: &Store, id: &str) -> Vec<sessionlog::codec::json::Value> {
    store.read_events(id, 0, None).expect("events")
}

/// The workspace binary `name` beside this test binary (`cargo build --release` builds it; `./x
/// test` does so first).
pub fn built_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join(name))
        .expect("target dir");
    assert!(
        bin.exists(),
        "{} is not built: run `cargo build --release` first (./x test does)",
        bin.display()
    );
    bin
}

/// A command that runs this test binary's ignored test `test` alone, as a child worker process
/// (with `env` set to `value`). /proc/self/exe still runs this binary if a rebuild replaced its
/// file meanwhile.
pub fn worker_test_command(test: &str, env: &str, value: impl AsRef<std::ffi::OsStr>) -> Command {
    let exe = match Path::new("/proc/self/exe") {
        p if p.exists() => p.to_path_buf(),
        _ => std::env::current_exe().expect("the test binary's path"),
    };
    let mut c = Command::new(exe);
    c.args([
        test,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(env, value);
    c
}

/// Copy the files of the flat directory `from` (a store) into `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read dir") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), to.join(e.file_name())).expect("copy");
    }
}

/// Whether Patroni, etcd and PostgreSQL 15 are installed, for the tests that start a Patroni
/// cluster; when they are not, says so (and fails under `CI`) as `missing` does.
pub fn patroni_installed() -> bool {
    let installed = sessionlog_harness::patroni::available();
    if !installed {
        sessionlog_harness::requirement::missing(
            "patroni, etcd and PostgreSQL 15 (Debian's patroni, etcd-server, postgresql-15)",
            "they are not installed",
        );
    }
    installed
}
