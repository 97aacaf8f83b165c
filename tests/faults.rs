//! I/O faults: a full disk during append, import and export (a small tmpfs the test mounts: it
//! needs root, and without it fails under CI and says what it skipped elsewhere), a read-only
//! store directory, and a store already open in this process or locked by another. Each fault
//! gives a clear error; after it the store reopens with every acknowledged batch, without the
//! failed one, and `verify` is clean.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sessionlog::codec::format::event::NewEvent;
use sessionlog::codec::json;
use sessionlog::engine::{
    Durability, Error, ExportFormat, ImportOptions, Options, SourceEncoding, Store,
};
use sessionlog_harness::gen::{session, session_batches, GenOptions};
use sessionlog_harness::requirement::missing;

use crate::crash::worker_command;
use crate::fixtures::{append_feed, export_bytes, listed_ids, temp_store};

/// A tmpfs of a given size mounted for one test, unmounted on drop.
pub struct Tmpfs {
    _parent: tempfile::TempDir,
    pub dir: PathBuf,
}

impl Tmpfs {
    /// Mount one, or `None` where mounting is not permitted: then the calling test fails under
    /// CI and says on stderr what it skipped elsewhere (`requirement::missing`).
    pub fn mount(bytes: u64) -> Option<Tmpfs> {
        let parent = tempfile::tempdir().expect("temp dir");
        let dir = parent.path().join("fs");
        std::fs::create_dir(&dir).expect("mount point");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(&dir)
            .stderr(std::process::Stdio::piped())
            .output();
        let why = match mounted {
            Ok(out) if out.status.success() => None,
            Ok(out) => Some(String::from_utf8_lossy(&out.stderr).trim().to_owned()),
            Err(e) => Some(format!("running mount: {e}")),
        };
        if let Some(why) = why {
            missing("root, to mount a small tmpfs (the full-disk cases)", &why);
            return None;
        }
        Some(Tmpfs {
            _parent: parent,
            dir,
        })
    }

    fn remount(&self, mode: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,{mode}")])
            .arg(&self.dir)
            .status()
            .expect("mount");
        assert!(status.success(), "remount {mode} failed");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

/// Fill the file system holding `dir` with `dir/filler` until ENOSPC.
pub fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = File::create(&path).expect("filler");
    let chunk = vec![0x5a_u8; 4096];
    while f.write_all(&chunk).is_ok() {}
    let _ = f.sync_all();
    path
}

fn durable() -> Options {
    Options {
        durability: Durability::Sync,
        write_buffer_bytes: 1 << 20,
        import_batch_bytes: 256 << 10,
        ..Options::default()
    }
}

/// A batch of one large `hook/result` event (about `kib` KiB of data).
fn big_batch(kib: usize) -> Vec<NewEvent> {
    let text = format!(
        r#"{{"type":"hook/result","data":{{"s":"{}"}}}}"#,
        "x".repeat(kib << 10)
    );
    vec![NewEvent::from_value(&json::parse(&text).expect("json")).expect("event")]
}

fn is_disk_full(e: &Error) -> bool {
    let text = e.to_string();
    text.contains("No space left on device") || matches!(e, Error::Poisoned)
}

#[test]
fn full_disk_during_append_loses_nothing_acknowledged() {
    let Some(fs) = Tmpfs::mount(24 << 20) else {
        return;
    };
    let db = fs.dir.join("db");
    let feed = session_batches(
        3,
        &GenOptions {
            events_per_session: 200,
            ..GenOptions::default()
        },
    );
    let (acked_seq, failed) = {
        let store = Store::open(&db, durable()).expect("open");
        store
            .create_session(&feed.header_line, SourceEncoding::Jsonl)
            .expect("create");
        store.create_session(
            r#"{"type":"session","version":0,"id":"big","createdAt":1,"cwd":"/w","delegationDepth":0}"#,
            SourceEncoding::Jsonl,
        ).expect("create big");
        append_feed(&store, &feed);
        fill(&fs.dir);
        let mut acked = 0;
        let mut failed = None;
        for _ in 0..200 {
            match store.append("big", Some(acked), big_batch(64)) {
                Ok(r) => acked = r.first_seq + r.count,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        let failed = failed.expect("appends kept succeeding on a full disk");
        assert!(is_disk_full(&failed), "unclear error: {failed}");
        let again = store
            .append("big", Some(acked), big_batch(1))
            .expect_err("a write after the failure");
        assert!(
            matches!(again, Error::Poisoned) || is_disk_full(&again),
            "{again}"
        );
        (acked, failed.to_string())
    };
    std::fs::remove_file(fs.dir.join("filler")).expect("free the disk");
    let store =
        Store::open(&db, durable()).unwrap_or_else(|e| panic!("reopen after {failed}: {e}"));
    assert_eq!(export_bytes(&store, &feed.id), feed.dsh_bytes());
    let big = store
        .list()
        .expect("list")
        .into_iter()
        .find(|s| s.id == "big")
        .expect("session big");
    assert_eq!(
        big.events, acked_seq,
        "the failed batch must be absent and every acknowledged one present"
    );
    let r = store.verify(&[]).expect("verify");
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    store
        .append("big", Some(acked_seq), big_batch(1))
        .expect("appends work again once there is space");
}

#[test]
fn full_disk_during_import_writes_nothing() {
    let Some(fs) = Tmpfs::mount(24 << 20) else {
        return;
    };
    let db = fs.dir.join("db");
    let opts = GenOptions {
        events_per_session: 4000,
        torn_fraction: 0.0,
        ..GenOptions::default()
    };
    let small = session(
        1,
        &GenOptions {
            events_per_session: 100,
            ..opts.clone()
        },
    );
    let large = session(2, &opts);
    let outside = tempfile::tempdir().expect("temp dir");
    let large_path = outside.path().join("large.jsonl");
    std::fs::write(&large_path, &large.bytes).expect("write input");
    let failed = {
        let store = Store::open(&db, durable()).expect("open");
        store
            .import_jsonl(
                "small",
                &small.bytes[..],
                &ImportOptions::default(),
                &mut |_| {},
            )
            .expect("import before the disk fills");
        fill(&fs.dir);
        // Free a little so the import gets under way before the disk is full again.
        let filler = fs.dir.join("filler");
        let len = std::fs::metadata(&filler).expect("filler").len();
        File::options()
            .write(true)
            .open(&filler)
            .and_then(|f| f.set_len(len.saturating_sub(512 << 10)))
            .expect("shrink filler");
        let mut bigger = large.bytes.clone();
        while bigger.len() < (24 << 20) {
            bigger.extend_from_slice(
                &large.bytes[large
                    .bytes
                    .iter()
                    .position(|&b| b == b'\n')
                    .expect("header")
                    + 1..],
            );
        }
        let e = store
            .import_jsonl("large", &bigger[..], &ImportOptions::default(), &mut |_| {})
            .expect_err("an import larger than the disk");
        assert!(is_disk_full(&e), "unclear error: {e}");
        e.to_string()
    };
    std::fs::remove_file(fs.dir.join("filler")).expect("free the disk");
    let store =
        Store::open(&db, durable()).unwrap_or_else(|e| panic!("reopen after {failed}: {e}"));
    let ids = listed_ids(&store);
    assert_eq!(
        ids,
        vec![small.id.clone()],
        "the failed import left a session"
    );
    assert_eq!(export_bytes(&store, &small.id), small.bytes);
    let r = store.verify(&[]).expect("verify");
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    store
        .import_path(&large_path, &ImportOptions::default(), &mut |_| {})
        .expect("the import works once there is space");
}

#[test]
fn full_disk_during_export_is_a_clear_error() {
    let Some(fs) = Tmpfs::mount(64 << 10) else {
        return;
    };
    let (_tmp, store) = temp_store();
    let s = session(
        5,
        &GenOptions {
            events_per_session: 8000,
            torn_fraction: 0.0,
            ..GenOptions::default()
        },
    );
    assert!(
        s.bytes.len() > 256 << 10,
        "the session must not fit the disk"
    );
    let report = store
        .import_jsonl("s", &s.bytes[..], &ImportOptions::default(), &mut |_| {})
        .expect("import");
    for format in [ExportFormat::Jsonl, ExportFormat::JsonlZstd] {
        let path = fs.dir.join("out");
        let result = File::create(&path)
            .map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })
            .and_then(|f| {
                let mut out = BufWriter::new(f);
                store.export(&report.id, Some(format), &mut out)?;
                out.flush().map_err(|source| Error::Io {
                    path: path.clone(),
                    source,
                })
            });
        let e = result.expect_err("an export larger than the disk");
        assert!(is_disk_full(&e), "unclear error: {e}");
        assert!(
            e.to_string().contains(&report.id),
            "the error names no session: {e}"
        );
        std::fs::remove_file(&path).expect("remove partial output");
    }
    assert_eq!(export_bytes(&store, &report.id), s.bytes);
}

#[test]
fn read_only_store_directory_is_a_clear_error() {
    let Some(fs) = Tmpfs::mount(8 << 20) else {
        return;
    };
    let db = fs.dir.join("db");
    drop(Store::open(&db, durable()).expect("create the store"));
    fs.remount("ro");
    let e = Store::open(&db, durable()).expect_err("opening a store on a read-only file system");
    let text = e.to_string();
    assert!(
        text.contains("Read-only file system"),
        "unclear error: {text}"
    );
    assert!(
        text.contains(&db.display().to_string()),
        "the error names no path: {text}"
    );
    fs.remount("rw");
    drop(Store::open(&db, durable()).expect("opens again once writable"));
}

#[test]
fn second_open_in_this_process_is_refused_clearly() {
    let (tmp, store) = temp_store();
    let e = Store::open(tmp.path().join("db"), Options::default())
        .expect_err("a second handle on an open store");
    assert!(matches!(e, Error::Locked { .. }), "unexpected error: {e}");
    assert!(e.to_string().contains("in use"), "unclear error: {e}");
    drop(store);
    drop(Store::open(tmp.path().join("db"), Options::default()).expect("opens once released"));
}

#[test]
fn store_locked_by_another_process_is_refused_clearly() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut child = worker_command(tmp.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start a process holding the store");
    let acks = tmp.path().join("acks.log");
    let start = Instant::now();
    while std::fs::metadata(&acks).map_or(true, |m| m.len() == 0) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the other process never wrote"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let e = Store::open(tmp.path().join("db"), Options::default());
    child.kill().expect("kill");
    child.wait().expect("wait");
    let e = e.expect_err("a store another process holds");
    assert!(matches!(e, Error::Locked { .. }), "unexpected error: {e}");
    assert!(e.to_string().contains("in use"), "unclear error: {e}");
    let store =
        Store::open(tmp.path().join("db"), Options::default()).expect("opens once released");
    assert!(!store.list().expect("list").is_empty());
}

/// A migration that runs out of disk while publishing leaves the source session as it was:
/// still V0, byte-exact, `verify` clean after a reopen; with space it then migrates.
#[test]
fn full_disk_during_migration_keeps_the_source_session() {
    let Some(fs) = Tmpfs::mount(24 << 20) else {
        return;
    };
    let db = fs.dir.join("db");
    let opts = GenOptions {
        events_per_session: 6000,
        torn_fraction: 0.0,
        ..GenOptions::default()
    };
    let migratable = (0..8)
        .map(|i| session(i, &opts))
        .find(|s| {
            let (_dir, probe) = temp_store();
            probe
                .import_jsonl(
                    "probe",
                    &s.bytes[..],
                    &ImportOptions::default(),
                    &mut |_| {},
                )
                .expect("probe import");
            probe
                .migrate(&s.id, &sessionlog::engine::MigrateOptions { dry_run: true })
                .is_ok()
        })
        .expect("a generated session DSH can migrate");
    let failed = {
        let store = Store::open(&db, durable()).expect("open");
        store
            .import_jsonl(
                "v0",
                &migratable.bytes[..],
                &ImportOptions::default(),
                &mut |_| {},
            )
            .expect("import");
        store.sync().expect("sync");
        fill(&fs.dir);
        let e = store
            .migrate(
                &migratable.id,
                &sessionlog::engine::MigrateOptions::default(),
            )
            .expect_err("a migration larger than the free space");
        assert!(is_disk_full(&e), "unclear error: {e}");
        e.to_string()
    };
    std::fs::remove_file(fs.dir.join("filler")).expect("free the disk");
    let store =
        Store::open(&db, durable()).unwrap_or_else(|e| panic!("reopen after {failed}: {e}"));
    assert_eq!(store.list().expect("list")[0].format, 0);
    assert_eq!(export_bytes(&store, &migratable.id), migratable.bytes);
    let r = store.verify(&[]).expect("verify");
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    store
        .migrate(
            &migratable.id,
            &sessionlog::engine::MigrateOptions::default(),
        )
        .expect("the migration works once there is space");
    assert_eq!(store.list().expect("list")[0].format, 4);
}
