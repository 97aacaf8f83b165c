//! `sessionlog import`: files and directories, in parallel, with progress on a terminal.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::Context;
use sessionlog_codec::json::Object;
use sessionlog_engine::{Error, ImportOptions, ImportReport, Store};

use crate::output::{json_line, opt};

/// File name endings searched for inside directories.
const SESSION_SUFFIXES: [&str; 2] = [".jsonl", ".jsonl.zstd"];

pub fn run(store: &Store, paths: &[PathBuf], strict: bool, json: bool) -> anyhow::Result<ExitCode> {
    let files = collect_inputs(paths)?;
    let total: u64 = files
        .iter()
        .filter_map(|f| f.metadata().ok())
        .map(|m| m.len())
        .sum();
    let bar = crate::cmd::progress_bar(total, "importing");
    let results = import_all(store, &files, ImportOptions { strict }, &|n| bar.inc(n));
    bar.finish_and_clear();
    let mut out = std::io::stdout().lock();
    let (mut imported, mut rejected, mut events) = (0u64, 0u64, 0u64);
    for (file, result) in files.iter().zip(&results) {
        let name = file.display().to_string();
        match result {
            Ok(r) => {
                imported += 1;
                events += r.events;
                if json {
                    json_line(&mut out, report_json(&name, Ok(r)))?;
                } else if files.len() == 1 {
                    writeln!(
                        out,
                        "imported {}: {}, {} events, {} lines, {} bytes",
                        r.id, r.verdict, r.events, r.lines, r.bytes
                    )?;
                }
            }
            Err(e) => {
                rejected += 1;
                if json {
                    json_line(&mut out, report_json(&name, Err(e)))?;
                } else {
                    eprintln!("rejected {e}");
                }
            }
        }
    }
    if !json && files.len() != 1 {
        writeln!(
            out,
            "imported {imported} sessions ({events} events), rejected {rejected} files"
        )?;
    }
    Ok(if rejected == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Import `files` with one worker per core; results in input order.
pub fn import_all(
    store: &Store,
    files: &[PathBuf],
    options: ImportOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Vec<Result<ImportReport, Error>> {
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Result<ImportReport, Error>>>> =
        files.iter().map(|_| Mutex::new(None)).collect();
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(files.len())
        .max(1);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(file) = files.get(i) else { break };
                let result = import_one(store, file, options, progress);
                if let Ok(mut slot) = slots[i].lock() {
                    *slot = Some(result);
                }
            });
        }
    });
    slots
        .into_iter()
        .map(|s| {
            s.into_inner().ok().flatten().unwrap_or_else(|| {
                Err(Error::Options(
                    "an import worker stopped without a result".into(),
                ))
            })
        })
        .collect()
}

fn import_one(
    store: &Store,
    file: &Path,
    options: ImportOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<ImportReport, Error> {
    let reported = AtomicU64::new(0);
    let mut tick = |done: u64| {
        let before = reported.swap(done, Ordering::Relaxed);
        progress(done.saturating_sub(before));
    };
    store.import_path(file, options, &mut tick)
}

fn report_json(file: &str, result: Result<&ImportReport, &Error>) -> Object {
    let o = Object::new().with("file", file);
    match result {
        Ok(r) => o
            .with("id", r.id.as_str())
            .with("status", "imported")
            .with("verdict", r.verdict.to_string().as_str())
            .with("events", r.events as i64)
            .with("lines", r.lines as i64)
            .with("error", opt::<&str>(None)),
        Err(e) => o
            .with("id", opt(rejected_id(e)))
            .with("status", "rejected")
            .with("verdict", opt(rejected_verdict(e)))
            .with("events", opt::<i64>(None))
            .with("lines", opt::<i64>(None))
            .with("error", e.to_string().as_str()),
    }
}

fn rejected_id(e: &Error) -> Option<&str> {
    match e {
        Error::DuplicateSession { id, .. }
        | Error::StrictRejected { id, .. }
        | Error::Unstorable { id, .. } => Some(id),
        _ => None,
    }
}

fn rejected_verdict(e: &Error) -> Option<&str> {
    match e {
        Error::StrictRejected { verdict, .. } => Some(verdict),
        _ => None,
    }
}

/// Expand directories (recursively, sorted) into their session files; keep files as given.
pub fn collect_inputs(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).with_context(|| format!("reading {}", p.display()))?;
        if meta.is_dir() {
            walk(p, &mut files)?;
        } else {
            files.push(p.clone());
        }
    }
    Ok(files)
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading directory {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .with_context(|| format!("reading directory {}", dir.display()))?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, files)?;
        } else if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| SESSION_SUFFIXES.iter().any(|s| n.ends_with(s)))
        {
            files.push(path);
        }
    }
    Ok(())
}
