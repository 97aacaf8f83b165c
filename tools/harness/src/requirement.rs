//! Tests whose requirement the machine may lack (root and /dev/fuse for LazyFS's power cuts,
//! root for a tmpfs or a block-IO cgroup, the shared DSH fixtures) never pass without testing
//! under CI, and never skip quietly elsewhere: [`missing`] fails the test under CI (`CI` set) with
//! the reason, and otherwise writes one line naming the test and the requirement to the process's
//! stderr, past the test harness's output capture, so that it shows in every run.

use std::io::Write;

/// The test running on this thread cannot run here: `requirement` is missing, because `why`.
/// Under CI this panics with the reason (the test fails); elsewhere it prints
/// `SKIPPED <test>: needs <requirement>: <why>` to stderr and returns, and the caller returns.
#[track_caller]
pub fn missing(requirement: &str, why: &str) {
    let thread = std::thread::current();
    // The test harness names each test's thread after the test.
    let test = thread.name().unwrap_or("a test");
    if std::env::var_os("CI").is_some() {
        panic!("CI: {test} needs {requirement}: {why}");
    }
    // Written to the stream itself: `eprintln!` output of a passing test is captured and dropped.
    // One write of the whole line, so that no other output lands inside it: `./x test` counts
    // the tests these lines name as skipped (.ci/tally).
    let line = format!("SKIPPED {test}: needs {requirement}: {why}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
