//! Power loss, not just SIGKILL: the store lives on LazyFS, a child process runs every writer
//! (group-commit appends from several threads, create, `.jsonl` and `.jsonl.zstd` imports,
//! torn imports and repair, resume, fork, migrate, delete, undelete, purge, the V4 writer), and
//! the test cuts the power under it (every byte not fsynced dropped), then checks the reopened
//! store against what the child had acknowledged.
//!
//! - `sync`: 20 cuts, nothing acknowledged may be lost, nothing half-applied, no problem.
//! - `buffered` (acknowledged before fsync), the control that shows the harness can fail: most
//!   cuts must lose acknowledged writes, and the store must still reopen consistent.
//!
//! Needs root and /dev/fuse (LazyFS is built once into ~/.cache/sessionlog-lazyfs from
//! ../shared/tools/lazyfs/build.sh); without them each test fails under CI (`CI` set) and
//! elsewhere prints a `SKIPPED` line naming itself and what is missing.
//! `SESSIONLOG_NIGHTLY=1`: 200 sync cuts.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sessionlog_engine::Durability;
use sessionlog_harness::power::worker::{run as run_worker, WorkerSpec};
use sessionlog_harness::power::{freeze_for_cut, lazyfs, power_loop, PowerOptions, PowerReport};
use sessionlog_harness::requirement::missing;

use crate::fixtures::{checkout, worker_test_command};

/// Set (to the worker spec) in the child this test spawns.
const WORKER_ENV: &str = "SESSIONLOG_POWER_WORKER";

/// The child side: runs every writer until frozen and killed. Ignored so that it only runs
/// when spawned.
#[test]
#[ignore = "the power-loss loop's child process; run by power_cuts_*"]
fn power_worker() {
    let Some(spec) = std::env::var_os(WORKER_ENV) else {
        return;
    };
    let spec = WorkerSpec::parse(&spec.to_string_lossy()).expect("worker spec");
    run_worker(&spec).expect("power worker");
}

fn worker_command(spec: &WorkerSpec) -> Command {
    worker_test_command("power::power_worker", WORKER_ENV, spec.to_arg())
}

/// The LazyFS binary, or `None` where power cuts cannot run: then the calling test fails under
/// CI and says on stderr what it skipped elsewhere (`requirement::missing`).
fn lazyfs_binary() -> Option<PathBuf> {
    if let Some(why) = lazyfs::unavailable_reason() {
        missing("root and /dev/fuse (power cuts on LazyFS)", &why);
        return None;
    }
    match lazyfs::locate_or_build(&lazyfs::default_build_dir(), None, &checkout()) {
        Ok(binary) => Some(binary),
        Err(e) => {
            missing("LazyFS (power cuts)", &format!("{e:#}"));
            None
        }
    }
}

/// One run at a time: each mounts its own LazyFS and keeps two cores busy.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The LazyFS binary, with the one-run-at-a-time lock held; `None` where LazyFS cannot run.
fn lazyfs_alone() -> Option<(std::sync::MutexGuard<'static, ()>, PathBuf)> {
    let one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Some((one, lazyfs_binary()?))
}

/// `cycles` cuts of a child whose store runs with `durability` and the knobs `with` sets.
fn run(
    durability: Durability,
    cycles: u64,
    with: impl FnOnce(&mut PowerOptions),
) -> Option<PowerReport> {
    let (_one, binary) = lazyfs_alone()?;
    let tmp = tempfile::tempdir().expect("temp dir");
    // Shorter cycles and stores than the CLI's: CI time stays small.
    let mut opts = PowerOptions {
        durability,
        cut_window_ms: (50, 800),
        cycles_per_store: 5,
        ..PowerOptions::default()
    };
    with(&mut opts);
    let report = power_loop(
        tmp.path(),
        &binary,
        cycles,
        &opts,
        &mut worker_command,
        &mut |_, _| {},
    )
    .unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!(
        "power ({durability:?}, WAL recycling {}, blob files {}): {report:?}",
        opts.wal_recycling, opts.blob_files
    );
    assert_eq!(report.cycles, cycles);
    assert!(
        report.acknowledged > 0,
        "the child acknowledged nothing: the cuts tested nothing"
    );
    assert_eq!(report.half_applied, 0, "{:#?}", report.problems);
    assert!(report.problems.is_empty(), "{:#?}", report.problems);
    Some(report)
}

/// Sync cuts (200 with `SESSIONLOG_NIGHTLY=1`) lose nothing acknowledged.
fn sync_cuts_lose_nothing(with: impl FnOnce(&mut PowerOptions)) {
    let nightly = std::env::var_os("SESSIONLOG_NIGHTLY").is_some_and(|v| v == "1");
    let cycles = if nightly { 200 } else { 20 };
    let Some(report) = run(Durability::Sync, cycles, with) else {
        return;
    };
    assert_eq!(report.lost, 0, "acknowledged writes lost: {report:?}");
}

#[test]
fn power_cuts_lose_no_acknowledged_write_under_sync() {
    sync_cuts_lose_nothing(|_| {});
}

#[test]
fn power_cuts_lose_buffered_writes_and_the_harness_says_so() {
    let Some(report) = run(Durability::Buffered, 20, |_| {}) else {
        return;
    };
    assert!(
        report.cycles_with_loss * 2 > report.cycles,
        "the buffered control lost acknowledged writes in only {} of {} cuts: the harness \
         cannot see a missing fsync",
        report.cycles_with_loss,
        report.cycles
    );
}

/// The default cuts above run with reused WAL files, which hold their previous life's records
/// past the new tail (1 MiB memtables turn them over between cuts); these run with a new WAL
/// file per memtable, the store's other WAL policy.
#[test]
fn power_cuts_lose_no_acknowledged_write_without_wal_recycling() {
    sync_cuts_lose_nothing(|o| o.wal_recycling = false);
}

/// With blob files, memtable flushes write blob files beside the SSTs (1 MiB memtables, so
/// several per cut); a cut during one must lose nothing acknowledged either.
#[test]
fn power_cuts_lose_no_acknowledged_write_with_blob_files() {
    sync_cuts_lose_nothing(|o| o.blob_files = true);
}

/// SIGSTOP or SIGCONT `pid`.
fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("running kill");
    assert!(status.success(), "kill {sig} {pid}");
}

/// Wait until process `pid` waits on a FUSE request (its kernel stack or wait channel names
/// FUSE's request path): with the file system stopped, a request that is never answered.
fn wait_blocked_in_fuse(pid: u32) {
    let started = Instant::now();
    loop {
        let read = |what: &str| std::fs::read_to_string(format!("/proc/{pid}/{what}"));
        let waits = format!(
            "{}\n{}",
            read("stack").unwrap_or_default(),
            read("wchan").unwrap_or_default()
        );
        if waits.contains("fuse") || waits.contains("request_wait_answer") {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "process {pid} did not block on the stopped mount in 30 s; it waits in:\n{waits}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The mount table names mount points by their canonical paths: a mount under a relative
/// directory (`stress --power-loss --dir D`) must be found there too.
#[test]
fn a_mount_under_a_relative_directory_is_seen_mounted() {
    let Some((_one, binary)) = lazyfs_alone() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("temp dir");
    let cwd = std::env::current_dir().expect("working directory");
    let up = "../".repeat(cwd.components().count().saturating_sub(1));
    let absolute = tmp.path().join("rel");
    let relative = Path::new(&up).join(absolute.strip_prefix("/").expect("an absolute temp dir"));
    assert!(relative.is_relative());
    let mount = lazyfs::Mount::start(&binary, &relative).expect("mount under a relative dir");
    assert!(mount
        .path()
        .starts_with(std::fs::canonicalize(&absolute).expect("resolved")));
    std::fs::write(mount.path().join("f"), b"through the mount\n").expect("a write");
    assert_eq!(
        std::fs::read(mount.path().join("f")).expect("a read"),
        b"through the mount\n"
    );
}

/// LazyFS now and then deadlocks on its own locks, and a thread in a request it has taken can
/// then be neither stopped nor killed (CI once hung on it for an hour). A stopped LazyFS stands
/// in for the deadlock: nothing sent into the mount is answered. Freezing a child blocked there
/// for a cut, and file-system work under a watchdog, must both kill LazyFS and fail, never wait.
#[test]
fn a_lazyfs_that_stops_answering_is_killed_not_waited_on() {
    let Some((_one, binary)) = lazyfs_alone() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("temp dir");

    let mut mount = lazyfs::Mount::start(&binary, &tmp.path().join("a")).expect("mount");
    let file = mount.path().join("f");
    std::fs::write(&file, b"answered\n").expect("a write LazyFS answers");
    signal(mount.pid(), "-STOP");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("echo unanswered >> '{}'", file.display()))
        .spawn()
        .expect("spawn sh");
    wait_blocked_in_fuse(child.id());
    let err = freeze_for_cut(child.id(), &mut mount).expect_err("the child cannot stop");
    assert!(
        format!("{err:#}").contains("LazyFS stopped answering"),
        "{err:#}"
    );
    assert!(!mount.is_alive(), "LazyFS was killed");
    child.kill().expect("kill the child");
    child
        .wait()
        .expect("the child is reaped once LazyFS is gone");

    let mut mount = lazyfs::Mount::start(&binary, &tmp.path().join("b")).expect("mount again");
    signal(mount.pid(), "-STOP");
    let start = Instant::now();
    let watchdog = mount.watchdog("a create on the stopped mount", Duration::from_secs(2));
    let created = std::fs::write(mount.path().join("g"), b"unanswered");
    assert!(watchdog.fired(), "the watchdog killed LazyFS");
    let overran = watchdog
        .finish()
        .expect_err("finishing an overrun guard is an error");
    assert!(
        format!("{overran:#}").contains("during a create on the stopped mount"),
        "{overran:#}"
    );
    assert!(created.is_err(), "the create failed once LazyFS was gone");
    assert!(!mount.is_alive());
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "{:?}",
        start.elapsed()
    );
}
