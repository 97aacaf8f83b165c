//! DSH session roots: `<root>/--<projectKey(cwd)>--/<encodeSegment(id)>/session.jsonl[.zstd]`
//! (`_no-cwd` when the header has no cwd). Discovery for import, and export of a whole store as
//! a root that DSH can open.
//!
//! Discovery follows DSH's listing: project dirs are the root's directories; a file ending in
//! `.jsonl`/`.jsonl.zstd` directly in a project dir is the refused flat layout; each session dir
//! holds generation files (`session.jsonl`, `session.vN.jsonl`, each maybe `.zstd`): the highest
//! is the session's log, the lower ones are kept frozen (see `generations.rs`); a dir holding
//! both encodings is refused (DSH reads one encoding per root); other files are ignored.

use std::io::BufWriter;
use std::path::{Path, PathBuf};

use sessionlog_codec::format::dsh_path::{log_path_components, NO_CWD_DIR};
use sessionlog_codec::json::JsString;

use crate::error::{Error, Result};
use crate::layout::meta::{SessionMeta, SourceEncoding};
use crate::ops::export::ExportFormat;
use crate::ops::generations::{scan_session_dir, SessionDir};
use crate::ops::import::RootLocation;
use crate::store::Store;

/// What a root holds: session files with their locations, and what DSH would refuse.
#[derive(Debug, Default)]
pub struct RootScan {
    /// Session directories to import: where, and their generation files.
    pub sessions: Vec<(RootLocation, SessionDir)>,
    /// Entries DSH refuses, with DSH's reason.
    pub refused: Vec<(PathBuf, Error)>,
}

/// Whether `dir` looks like a DSH session root (it holds a `--…--` or `_no-cwd` directory).
pub fn is_session_root(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.filter_map(std::result::Result::ok).any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            e.path().is_dir()
                && (name == NO_CWD_DIR
                    || (name.len() >= 4 && name.starts_with("--") && name.ends_with("--")))
        })
    })
}

/// Discover the sessions of a DSH root, sorted by path.
pub fn scan_root(root: &Path) -> Result<RootScan> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    let mut scan = RootScan::default();
    for project in sorted_entries(root).map_err(io(root))? {
        if !project.is_dir() {
            continue;
        }
        let project_dir = file_name(&project);
        for entry in sorted_entries(&project).map_err(io(&project))? {
            let name = file_name(&entry);
            if entry.is_file() && (name.ends_with(".jsonl") || name.ends_with(".jsonl.zstd")) {
                let reason = format!(
                    "session artifact \"{}\" uses the unsupported flat-file layout; use a separate root or move it into a project/session directory before loading",
                    entry.display()
                );
                scan.refused.push((entry, Error::RootLayout(reason)));
                continue;
            }
            if !entry.is_dir() {
                continue;
            }
            let dir = match scan_session_dir(&entry) {
                Ok(Some(dir)) => dir,
                Ok(None) => continue,
                Err(e) => {
                    scan.refused.push((entry, e));
                    continue;
                }
            };
            let location = RootLocation {
                path: dir.served.path.clone(),
                project_dir: project_dir.clone(),
                session_dir: name,
            };
            scan.sessions.push((location, dir));
        }
    }
    Ok(scan)
}

fn sorted_entries(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut v = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<Vec<_>>>()?;
    v.sort();
    Ok(v)
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// One file of a session in a DSH session root, named relative to the root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootFile {
    /// `--<project>--/<session dir>/session[.vN].jsonl[.zstd]`, `/`-separated.
    pub key: String,
    /// The generation's format version (the N of its name).
    pub version: u32,
    /// Whether it is a `.jsonl.zstd` file.
    pub zstd: bool,
}

impl Store {
    /// The files session `id` is in a DSH root, lowest generation first, the served one last
    /// (in `format`, default its source encoding; frozen ones as stored): the names
    /// [`Store::export_to_root`] writes, as object keys.
    pub fn root_files(&self, id: &str, format: Option<ExportFormat>) -> Result<Vec<RootFile>> {
        root_files_of(&self.require_record(id.as_bytes())?, format)
    }

    /// Where session `id` goes in a DSH root at `root`, in `format` (default: its source encoding).
    pub fn root_path(
        &self,
        root: &Path,
        id: &str,
        format: Option<ExportFormat>,
    ) -> Result<PathBuf> {
        let meta = self.require_meta(id.as_bytes())?;
        let (project, session) = root_dirs(&meta)?;
        Ok(root
            .join(project)
            .join(session)
            .join(meta.file_name(served_encoding(&meta, format))))
    }

    /// Export session `id` into the DSH root at `root`: every generation under its own name,
    /// frozen ones as stored (directories 0700, files 0600, each written to a temp file then
    /// published without overwriting an existing file). Returns the served file's path and the
    /// bytes written in all.
    pub fn export_to_root(
        &self,
        root: &Path,
        id: &str,
        format: Option<ExportFormat>,
    ) -> Result<(PathBuf, u64)> {
        let path = self.root_path(root, id, format)?;
        let dir = path.parent().unwrap_or(root).to_path_buf();
        create_private_dirs(&dir).map_err(|source| Error::Io {
            path: dir.clone(),
            source,
        })?;
        let meta = self.require_meta(id.as_bytes())?;
        let mut written = 0;
        for frozen in &meta.frozen {
            let at = dir.join(frozen.file_name());
            written += publish(&at, &mut |out| {
                self.export_generation(id, frozen.version, format, out)
            })?;
        }
        written += publish(&path, &mut |out| self.export(id, format, out))?;
        Ok((path, written))
    }
}

/// [`Store::root_files`] of the session `meta` describes.
pub(crate) fn root_files_of(
    meta: &SessionMeta,
    format: Option<ExportFormat>,
) -> Result<Vec<RootFile>> {
    let (project, session) = root_dirs(meta)?;
    let served = served_encoding(meta, format);
    let file = |version, zstd, name: String| RootFile {
        key: format!("{project}/{session}/{name}"),
        version,
        zstd,
    };
    Ok(meta
        .frozen
        .iter()
        .map(|g| file(g.version, g.zstd, g.file_name()))
        .chain([file(
            meta.version,
            served == SourceEncoding::JsonlZstd,
            meta.file_name(served),
        )])
        .collect())
}

/// The project and session directory names of `meta`'s session in a DSH root (DSH's
/// `logPath`).
fn root_dirs(meta: &SessionMeta) -> Result<(String, String)> {
    let id = meta.id_lossy();
    let header = meta.parsed_header()?;
    let cwd = match header.object.get("cwd") {
        None => None,
        Some(sessionlog_codec::json::Value::String(s)) => Some(s.clone()),
        Some(_) => {
            return Err(Error::Identity(format!(
            "session \"{id}\": header cwd is not a string, so it names no DSH project directory"
        )))
        }
    };
    log_path_components(cwd.as_ref(), &JsString::from(id.as_str())).map_err(|e| {
        Error::Identity(format!(
            "session \"{id}\" cannot be placed in a DSH root: {e}"
        ))
    })
}

/// The encoding `format` asks of `meta`'s served generation (default: its source encoding).
fn served_encoding(meta: &SessionMeta, format: Option<ExportFormat>) -> SourceEncoding {
    match format {
        Some(ExportFormat::JsonlZstd) => SourceEncoding::JsonlZstd,
        Some(ExportFormat::Jsonl) => SourceEncoding::Jsonl,
        None => meta.source,
    }
}

/// Write `path` through a private temp file beside it, fsync it, and publish it with a hard link,
/// which never replaces an existing artifact (DSH's rule). Returns the bytes written.
fn publish(
    path: &Path,
    export: &mut dyn FnMut(&mut dyn std::io::Write) -> Result<u64>,
) -> Result<u64> {
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |source| Error::Io { path: p, source }
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".{}.{}.tmp", file_name(path), std::process::id()));
    let file = open_private(&tmp).map_err(io(&tmp))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let written = export(&mut out).and_then(|n| {
        let file = out.into_inner().map_err(|e| Error::Io {
            path: tmp.clone(),
            source: e.into_error(),
        })?;
        file.sync_all().map_err(io(&tmp))?;
        Ok(n)
    });
    let published = written.and_then(|n| {
        std::fs::hard_link(&tmp, path).map_err(io(path))?;
        Ok(n)
    });
    let _ = std::fs::remove_file(&tmp);
    published
}

#[cfg(unix)]
fn create_private_dirs(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dirs(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(unix)]
fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}
