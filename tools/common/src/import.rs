//! Bulk import: the files, directories and DSH session roots named on a command line expanded
//! into session files, then imported with one worker per core. `sessionlog import` runs it, and
//! the harness's import-export benchmark times it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;
use sessionlog_codec::format::generation::parse_generation_name;
use sessionlog_engine::{
    is_session_root, scan_root, scan_session_dir, Error, ImportOptions, ImportReport, RootLocation,
    SessionDir, Store,
};

/// File name endings searched for inside plain directories.
const SESSION_SUFFIXES: [&str; 2] = [".jsonl", ".jsonl.zstd"];

/// Files DSH's root rules refuse, with the reason.
pub type Refused = Vec<(PathBuf, Error)>;

/// One thing to import: a file, with its place in a DSH root when it came from one, and its
/// session directory's generations when it is the highest of several.
pub struct Input {
    /// The file.
    pub path: PathBuf,
    /// Its place in a DSH session root, when it came from one.
    pub location: Option<RootLocation>,
    /// Its session directory's generations, when it is the highest of several.
    pub generations: Option<SessionDir>,
}

/// Import `inputs` into `store` with one worker per core; results in input order.
pub fn import_all(
    store: &Store,
    inputs: &[Input],
    options: &ImportOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Vec<Result<ImportReport, Error>> {
    import_each(inputs, options, progress, &|path, options, tick| {
        store.import_path(path, options, tick)
    })
}

/// How one file is imported: its path, its options, and what to tell of the bytes read.
pub type ImportOne<'a, E> =
    dyn Fn(&Path, &ImportOptions, &mut dyn FnMut(u64)) -> Result<ImportReport, E> + Sync + 'a;

/// Import `inputs` by `import` (a store's `import_path`, or a host's) with one worker per core;
/// results in input order.
pub fn import_each<E: Send>(
    inputs: &[Input],
    options: &ImportOptions,
    progress: &(dyn Fn(u64) + Sync),
    import: &ImportOne<'_, E>,
) -> Vec<Result<ImportReport, E>> {
    crate::par::map(inputs, |input| {
        let options = ImportOptions {
            location: input.location.clone(),
            generations: input.generations.clone(),
            ..options.clone()
        };
        let reported = AtomicU64::new(0);
        let mut tick = |done: u64| {
            let before = reported.swap(done, Ordering::Relaxed);
            progress(done.saturating_sub(before));
        };
        import(&input.path, &options, &mut tick)
    })
}

/// Expand directories into their session files: a DSH session root by DSH's layout rules (with
/// what DSH refuses reported, not imported), any other directory recursively by file suffix.
/// Files named directly are imported as given.
pub fn collect_inputs(paths: &[PathBuf]) -> anyhow::Result<(Vec<Input>, Refused)> {
    let mut inputs = Vec::new();
    let mut refused = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).with_context(|| format!("reading {}", p.display()))?;
        if meta.is_dir() && is_session_root(p) {
            let scan = scan_root(p)?;
            inputs.extend(scan.sessions.into_iter().map(|(l, dir)| Input {
                path: l.path.clone(),
                location: Some(l),
                generations: Some(dir),
            }));
            refused.extend(scan.refused);
        } else if meta.is_dir() {
            walk(p, &mut inputs, &mut refused)?;
        } else {
            inputs.push(Input {
                path: p.clone(),
                location: None,
                generations: None,
            });
        }
    }
    Ok((inputs, refused))
}

/// Collect session files under `dir`: a directory's canonical generation files
/// (`session[.vN].jsonl[.zstd]`) are one session, its highest generation; any other file with
/// a session suffix is a session of its own.
fn walk(dir: &Path, inputs: &mut Vec<Input>, refused: &mut Refused) -> anyhow::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading directory {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .with_context(|| format!("reading directory {}", dir.display()))?;
    entries.sort();
    match scan_session_dir(dir) {
        Ok(Some(generations)) => inputs.push(Input {
            path: generations.served.path.clone(),
            location: None,
            generations: Some(generations),
        }),
        Ok(None) => {}
        Err(e) => refused.push((dir.to_path_buf(), e)),
    }
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            walk(&path, inputs, refused)?;
        } else if SESSION_SUFFIXES.iter().any(|s| name.ends_with(s))
            && parse_generation_name(name).is_none()
        {
            inputs.push(Input {
                path,
                location: None,
                generations: None,
            });
        }
    }
    Ok(())
}
