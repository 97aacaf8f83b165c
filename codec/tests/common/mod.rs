//! What the codec's fixture tests share: locating `<repo>/../shared/fixtures` in place (override
//! with `SESSIONLOG_FIXTURES`). When it is missing the tests print a note and pass, except under
//! CI (`CI` set), where a missing fixture directory fails loudly.

use std::path::PathBuf;

/// The codec crate's directory as cargo runs the test (`CARGO_MANIFEST_DIR` at run time), else
/// as compiled: a target directory shared between checkouts may hand this checkout a test
/// binary built in another.
fn crate_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// The fixtures directory when it holds `probe`, else `None` (outside CI).
pub fn fixtures_with(probe: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("SESSIONLOG_FIXTURES")
        .map_or_else(|| crate_dir().join("../../shared/fixtures"), PathBuf::from);
    if dir.join(probe).exists() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "fixtures missing at {}",
        dir.display()
    );
    eprintln!("note: fixtures missing at {}; skipping", dir.display());
    None
}
