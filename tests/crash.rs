//! Crash consistency under kill -9: a child process (this test binary, re-run in worker mode)
//! appends durably to many sessions from several threads and logs each acknowledged batch; the
//! test SIGKILLs it at random moments, reopens the store and checks that every acknowledged
//! batch is there, seqs have no gap or duplicate, `verify` is clean and export equals DSH's bytes.
//! 12 cycles normally; 200 with `SESSIONLOG_NIGHTLY=1`.

use std::path::Path;
use std::process::Command;

use sessionlog_harness::stress::{kill_loop, worker, StressOptions};

use crate::fixtures::worker_test_command;

/// Set (to the harness directory) in the child this test spawns.
const WORKER_ENV: &str = "SESSIONLOG_CRASH_WORKER";

fn options() -> StressOptions {
    StressOptions {
        threads: 3,
        sessions_per_thread: 3,
        ..StressOptions::default()
    }
}

/// A command that runs this test binary as the worker on `dir` (store `dir/db`, acks
/// `dir/acks.log`). Self-contained: no other binary needs to be built.
pub fn worker_command(dir: &Path) -> Command {
    worker_test_command("crash::crash_worker", WORKER_ENV, dir)
}

/// The child side: appends until killed. Ignored so that it only runs when spawned.
#[test]
#[ignore = "the kill loop's child process; run by kill_loop_keeps_every_acknowledged_batch"]
fn crash_worker() {
    let Some(dir) = std::env::var_os(WORKER_ENV) else {
        return;
    };
    let dir = Path::new(&dir);
    worker(&dir.join("db"), &dir.join("acks.log"), &options()).expect("stress worker");
}

#[test]
fn kill_loop_keeps_every_acknowledged_batch() {
    let nightly = std::env::var_os("SESSIONLOG_NIGHTLY").is_some_and(|v| v == "1");
    let cycles = if nightly { 200 } else { 12 };
    let tmp = tempfile::tempdir().expect("temp dir");
    let report = kill_loop(
        tmp.path(),
        cycles,
        400,
        &options(),
        &mut || worker_command(tmp.path()),
        &mut |_, _| {},
    )
    .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(report.cycles, cycles);
    assert!(
        report.acked_batches > 0,
        "the worker acknowledged nothing: the loop tested nothing"
    );
    eprintln!("crash: {report:?}");
}
