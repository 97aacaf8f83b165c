//! `sessionlog import`: files, directories and DSH session roots (local, or in object storage at
//! an `s3://` URL), in parallel, with progress on a terminal. Every import commits unsynced; one
//! WAL sync makes them all durable before any is reported.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use sessionlog_archive::ArchiveRoot;
use sessionlog_codec::json::Object;
use sessionlog_engine::{Error, ImportOptions, ImportReport, Store};
use sessionlog_tools_common::import::{collect_inputs, import_all};
use sessionlog_tools_common::output::{json_line, opt};

use crate::cmd::objects::{ImportFailure, ObjectStorage};

pub fn run(
    store: &Store,
    objects: &ObjectStorage,
    paths: &[PathBuf],
    strict: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let (urls, paths): (Vec<&PathBuf>, Vec<PathBuf>) = {
        let (urls, local): (Vec<&PathBuf>, Vec<&PathBuf>) = paths
            .iter()
            .partition(|p| p.to_str().is_some_and(ArchiveRoot::is_url));
        (urls, local.into_iter().cloned().collect())
    };
    let (inputs, refused) = collect_inputs(&paths)?;
    let total: u64 = inputs
        .iter()
        .filter_map(|f| f.path.metadata().ok())
        .map(|m| m.len())
        .sum();
    let bar = crate::cmd::progress_bar(total, "importing");
    let options = ImportOptions {
        strict,
        defer_sync: true,
        ..ImportOptions::default()
    };
    let mut results = import_all(store, &inputs, &options, &|n| bar.inc(n));
    bar.finish_and_clear();
    let mut all: Vec<(String, Result<ImportReport, ImportFailure>)> = inputs
        .into_iter()
        .map(|i| i.path.display().to_string())
        .zip(results.drain(..).map(|r| r.map_err(ImportFailure::Engine)))
        .collect();
    all.extend(
        refused
            .into_iter()
            .map(|(p, e)| (p.display().to_string(), Err(ImportFailure::Engine(e)))),
    );
    for url in urls {
        all.extend(objects.import(store, &url.to_string_lossy(), &options)?);
    }
    store.sync()?;
    let mut out = std::io::stdout().lock();
    let (mut imported, mut rejected, mut events) = (0u64, 0u64, 0u64);
    let single = all.len() == 1;
    for (name, result) in &all {
        match result {
            Ok(r) => {
                imported += 1;
                events += r.events;
                if json {
                    json_line(&mut out, report_json(name, Ok(r)))?;
                } else if single {
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
                    json_line(&mut out, report_json(name, Err(e)))?;
                } else {
                    eprintln!("rejected {name}: {e}");
                }
            }
        }
    }
    if !json && !single {
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

fn report_json(file: &str, result: Result<&ImportReport, &ImportFailure>) -> Object {
    let o = Object::new().with("file", file);
    match result {
        Ok(r) => o
            .with("id", r.id.as_str())
            .with("status", "imported")
            .with("verdict", r.verdict.to_string().as_str())
            .with("events", r.events as i64)
            .with("lines", r.lines as i64)
            .with("error", opt::<&str>(None)),
        Err(e) => {
            let engine = match e {
                ImportFailure::Engine(e) => Some(e),
                ImportFailure::Other(_) => None,
            };
            o.with("id", opt(engine.and_then(rejected_id)))
                .with("status", "rejected")
                .with("verdict", opt(engine.and_then(rejected_verdict)))
                .with("events", opt::<i64>(None))
                .with("lines", opt::<i64>(None))
                .with("error", e.to_string().as_str())
        }
    }
}

impl std::fmt::Display for ImportFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImportFailure::Engine(e) => e.fmt(f),
            ImportFailure::Other(text) => f.write_str(text),
        }
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
