//! Fetching an archived session's files into a temporary session directory, each checked
//! against its recorded size and SHA-256 as it arrives: what a restore imports, and what a
//! read of an archived session imports into a scratch store.

use std::io::BufWriter;

use sessionlog_engine::{scan_session_dir, ArchivedFile, SessionDir};
use tempfile::TempDir;

use crate::error::{Error, Result};
use crate::sources::ArchiveSources;

/// An archived session's files in a temporary directory, removed when this drops.
pub struct FetchedSession {
    /// The session directory, as `scan_session_dir` found it.
    pub dir: SessionDir,
    _tmp: TempDir,
}

/// Fetch `files` of archive root `root` into a new temporary session directory.
pub fn fetch_session(
    sources: &ArchiveSources,
    root: &str,
    files: &[ArchivedFile],
) -> Result<FetchedSession> {
    let tmp = tempfile::Builder::new()
        .prefix("sessionlog-archived-")
        .tempdir()
        .map_err(Error::io("creating a temporary directory"))?;
    for file in files {
        let name = file.key.rsplit('/').next().unwrap_or(&file.key);
        let path = tmp.path().join(name);
        let what = || format!("writing {}", path.display());
        let out = std::fs::File::create(&path).map_err(Error::io(what()))?;
        let mut out = BufWriter::with_capacity(1 << 20, out);
        sources.fetch_file(root, file, &mut out)?;
        std::io::Write::flush(&mut out).map_err(Error::io(what()))?;
    }
    let dir = scan_session_dir(tmp.path())?.ok_or_else(|| {
        Error::Location(format!(
            "the archived files {:?} of {root} hold no session generation",
            files.iter().map(|f| f.key.as_str()).collect::<Vec<_>>()
        ))
    })?;
    Ok(FetchedSession { dir, _tmp: tmp })
}
