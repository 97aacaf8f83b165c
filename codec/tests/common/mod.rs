//! What the codec's fixture tests share: locating `<repo>/../shared/fixtures` in place (override
//! with `SESSIONLOG_FIXTURES`), and what a test does when they are missing: under CI (`CI` set)
//! it fails with the reason; elsewhere it writes one line naming itself and the missing fixtures
//! to stderr (past the test harness's capture) and passes. The workspace's other tests do the
//! same through `sessionlog_harness::requirement`, which the codec's tests cannot depend on.

use std::io::Write;
use std::path::PathBuf;

/// The codec crate's directory as cargo runs the test (`CARGO_MANIFEST_DIR` at run time), else
/// as compiled: a target directory shared between checkouts may hand this checkout a test
/// binary built in another.
fn crate_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// The fixtures directory when it holds `probe`, else `None` (outside CI, with a `SKIPPED` line).
pub fn fixtures_with(probe: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("SESSIONLOG_FIXTURES")
        .map_or_else(|| crate_dir().join("../../shared/fixtures"), PathBuf::from);
    if dir.join(probe).exists() {
        return Some(dir);
    }
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    let why = format!("{} is missing", dir.join(probe).display());
    assert!(
        std::env::var_os("CI").is_none(),
        "CI: {test} needs the shared DSH fixtures: {why}"
    );
    // One write of the whole line: `./x test` counts the tests these lines name (.ci/tally).
    let line = format!("SKIPPED {test}: needs the shared DSH fixtures: {why}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    None
}
