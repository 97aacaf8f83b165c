//! Format generations of one session (later-format-spec §3.1, §3.9): a session directory holds
//! `session.jsonl[.zstd]` (V0) and `session.vN.jsonl[.zstd]` files. The numerically highest
//! canonical one is served (imported as the session's log); the lower ones are frozen: their
//! bytes are stored exactly, in chunks under `GENERATION` keys, and never change.
//!
//! Invariants enforced here, before anything is written:
//! - a directory holds one encoding (DSH reads one per root);
//! - every generation's header names the served one's id, and its `version` is the N of its
//!   file name (DSH's filename/header rule).

use std::path::{Path, PathBuf};

use sessionlog_codec::format::generation::{
    parse_generation_name, version_mismatch, NEWEST_VERSION,
};
use sessionlog_codec::format::header::{parse_header, Header};
use sessionlog_codec::json::Value;

use crate::error::{Error, Result};
use crate::layout::meta::{FrozenGeneration, SessionMeta, SourceEncoding};
use crate::store::Store;
use crate::write::session_writer::SessionWriter;

/// One canonical generation file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenerationFile {
    /// The N of its name (0 for `session.jsonl`).
    pub version: u32,
    /// Whether it is `.jsonl.zstd`.
    pub zstd: bool,
    /// Where it is.
    pub path: PathBuf,
}

/// The generation files of a session directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionDir {
    /// The highest canonical generation: the session's log.
    pub served: GenerationFile,
    /// The others, lowest first: stored frozen.
    pub lower: Vec<GenerationFile>,
}

/// The generations in `dir`, or `None` when it holds no canonical generation file. Other files
/// (locks, temps, non-canonical names such as `session.v03.jsonl`) are not generations.
pub fn scan_session_dir(dir: &Path) -> Result<Option<SessionDir>> {
    let entries = std::fs::read_dir(dir).map_err(|source| Error::Io {
        path: dir.into(),
        source,
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| Error::Io {
            path: dir.into(),
            source,
        })?;
        let name = entry.file_name();
        let Some(g) = name.to_str().and_then(parse_generation_name) else {
            continue;
        };
        if entry.path().is_file() {
            files.push(GenerationFile {
                version: g.version,
                zstd: g.zstd,
                path: entry.path(),
            });
        }
    }
    files.sort_by_key(|f| (f.version, f.zstd));
    if let (Some(first), Some(other)) = (
        files.first(),
        files.iter().find(|f| f.zstd != files[0].zstd),
    ) {
        let (plain, zstd) = if first.zstd {
            (other, first)
        } else {
            (first, other)
        };
        return Err(Error::RootLayout(format!(
            "session directory \"{}\" holds both {} and {}; DSH reads one encoding per root",
            dir.display(),
            file_name(&plain.path),
            file_name(&zstd.path),
        )));
    }
    let Some(served) = files.pop() else {
        return Ok(None);
    };
    Ok(Some(SessionDir {
        served,
        lower: files,
    }))
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// DSH's filename/header rule for the served generation: a header whose `version` is a number
/// must name the version in the file name. Below V4 DSH reads the file through migration
/// (`resolved JSONL source filename identifies …`); a V4 file is read natively, where a foreign
/// version is refused as too old or too new.
pub(crate) fn check_served_version(file: &GenerationFile, header: &Header) -> Result<()> {
    let Some(Value::Number(v)) = header.object.get("version") else {
        return Ok(());
    };
    if *v == f64::from(file.version) {
        return Ok(());
    }
    let shown = sessionlog_codec::json::js_string_of(&Value::Number(*v));
    let reason = if file.version < NEWEST_VERSION {
        version_mismatch(file.version, &shown)
    } else if *v > f64::from(NEWEST_VERSION) {
        format!("session \"{}\" uses log format v{shown}, but this harness reads only v{NEWEST_VERSION}: the log was written by a newer harness — upgrade the harness to open it", header.id)
    } else {
        format!("session \"{}\" uses log format v{shown}, older than the supported v{NEWEST_VERSION}, and this build ships no upgrade path for it", header.id)
    };
    Err(Error::Generation(format!(
        "{}: {reason}",
        file.path.display()
    )))
}

/// A lower generation's bytes, ready to be stored frozen.
#[derive(Clone, Debug)]
pub(crate) struct LowerGeneration {
    /// The N of its name.
    pub(crate) version: u32,
    /// Whether it is `.jsonl.zstd`.
    pub(crate) zstd: bool,
    /// Where it came from, for messages.
    pub(crate) shown: String,
    /// Its exact bytes.
    pub(crate) bytes: Vec<u8>,
}

impl Store {
    /// Session `meta`'s generations `versions`, as stored (its encoding), to land again with an
    /// import that replaces it.
    pub(crate) fn generation_files(
        &self,
        meta: &SessionMeta,
        versions: &[u32],
    ) -> Result<Vec<LowerGeneration>> {
        let id = meta.id_lossy();
        let zstd = meta.source == SourceEncoding::JsonlZstd;
        versions
            .iter()
            .map(|&version| {
                let mut bytes = Vec::new();
                self.export_generation(&id, version, None, &mut bytes)?;
                Ok(LowerGeneration {
                    version,
                    zstd,
                    shown: format!("generation v{version} of \"{id}\""),
                    bytes,
                })
            })
            .collect()
    }
}

impl LowerGeneration {
    /// Read `file`.
    pub(crate) fn read(file: &GenerationFile) -> Result<LowerGeneration> {
        let bytes = std::fs::read(&file.path).map_err(|source| Error::Io {
            path: file.path.clone(),
            source,
        })?;
        Ok(LowerGeneration {
            version: file.version,
            zstd: file.zstd,
            shown: file.path.display().to_string(),
            bytes,
        })
    }
}

/// Store `file`, a lower generation of the session whose header is `served`, frozen: check its
/// header (same id, version = its name's N) and write its bytes in chunks of `chunk_bytes`.
pub(crate) fn stage_frozen(
    w: &mut SessionWriter<'_>,
    file: &LowerGeneration,
    served: &Header,
    chunk_bytes: usize,
) -> Result<FrozenGeneration> {
    let shown = &file.shown;
    let bytes = &file.bytes;
    let line = if file.zstd {
        sessionlog_codec::format::zstd::read_header_line(bytes)
            .ok()
            .flatten()
    } else {
        bytes
            .iter()
            .position(|&b| b == b'\n')
            .map(|at| bytes[..at].to_vec())
    };
    let header = line
        .and_then(|l| parse_header(&l).ok())
        .ok_or_else(|| {
            Error::Generation(format!(
                "generation file \"{shown}\" has no readable session header; a lower generation is kept only when it is this session's"
            ))
        })?;
    if header.id != served.id {
        return Err(Error::Generation(format!(
            "generation file \"{shown}\" belongs to session \"{}\", not \"{}\"",
            header.id, served.id
        )));
    }
    let declared = match header.object.get("version") {
        Some(Value::Number(v)) => Some(*v),
        _ => None,
    };
    if declared != Some(f64::from(file.version)) {
        let shown_version = header
            .object
            .get("version")
            .map_or_else(|| "undefined".into(), sessionlog_codec::json::js_string_of);
        return Err(Error::Generation(format!(
            "generation file \"{shown}\": session generation filename identifies v{}, but its header identifies v{shown_version}",
            file.version
        )));
    }
    let mut chunks = 0u32;
    for chunk in bytes.chunks(chunk_bytes.max(1)) {
        w.put_generation_chunk(file.version, chunks, chunk)?;
        chunks += 1;
    }
    Ok(FrozenGeneration {
        version: file.version,
        zstd: file.zstd,
        bytes: bytes.len() as u64,
        chunks: u64::from(chunks),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_serves_its_highest_canonical_generation() {
        let dir = tempfile::tempdir().expect("temp dir");
        for name in [
            "session.v2.jsonl",
            "session.V3.jsonl",
            "session.v03.jsonl",
            "session.jsonl",
            "session.lock",
        ] {
            std::fs::write(dir.path().join(name), b"x\n").expect("write");
        }
        let found = scan_session_dir(dir.path())
            .expect("scan")
            .expect("generations");
        assert_eq!(found.served.version, 2);
        assert_eq!(
            found.lower.iter().map(|f| f.version).collect::<Vec<_>>(),
            [0]
        );
        std::fs::write(dir.path().join("session.v4.jsonl.zstd"), b"x").expect("write");
        let mixed = scan_session_dir(dir.path());
        assert!(matches!(mixed, Err(Error::RootLayout(m)) if m.contains("one encoding")));
        let empty = tempfile::tempdir().expect("temp dir");
        assert!(scan_session_dir(empty.path()).expect("scan").is_none());
    }
}
