//! `sessionlog import`: files, directories and DSH session roots (local, or in object storage at
//! an `s3://` URL), in parallel, with progress on a terminal. Every import commits unsynced; one
//! WAL sync makes them all durable before any is reported.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;
use sessionlog_archive::ArchiveRoot;
use sessionlog_cluster::{Host, LocalOnly};
use sessionlog_engine::{Error, ImportOptions, ImportReport};
use sessionlog_tools_common::import::{collect_inputs, import_each};
use sessionlog_tools_common::output::report_line;

use crate::cmd::objects::{ImportFailure, ObjectStorage};

pub fn run(
    host: &Host,
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
    let mut results = import_each(
        &inputs,
        &options,
        &|n| bar.inc(n),
        &|path, options, tick| host.import_path(path, options, tick),
    );
    bar.finish_and_clear();
    let mut all: Vec<(String, Result<ImportReport, ImportFailure>)> = inputs
        .into_iter()
        .map(|i| i.path.display().to_string())
        .zip(results.drain(..).map(|r| r.map_err(ImportFailure::from)))
        .collect();
    all.extend(
        refused
            .into_iter()
            .map(|(p, e)| (p.display().to_string(), Err(ImportFailure::Engine(e)))),
    );
    for url in urls {
        let store = host.local_only(LocalOnly::ImportFromObjectStorage)?;
        all.extend(objects.import(&store, &url.to_string_lossy(), &options)?);
    }
    host.store().sync()?;
    let mut out = std::io::stdout().lock();
    let (mut imported, mut rejected, mut events) = (0u64, 0u64, 0u64);
    let single = all.len() == 1;
    for (name, result) in &all {
        match result {
            Ok(r) => {
                imported += 1;
                events += r.events;
                if json {
                    report_line(&mut out, &ImportLine::imported(name, r))?;
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
                    report_line(&mut out, &ImportLine::rejected(name, e))?;
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

/// One input's line of `import --json`: the file, whether it was imported, and the import's
/// report (`ImportReport`'s rendering, as Node's `importBytes` returns it) or why it was not.
#[derive(Serialize)]
struct ImportLine<'a> {
    file: &'a str,
    status: &'static str,
    #[serde(flatten)]
    report: Stored<'a>,
    error: Option<String>,
}

/// What an input stored, or what is known of a rejected one (its fields `null` otherwise).
#[derive(Serialize)]
#[serde(untagged)]
enum Stored<'a> {
    Imported(&'a ImportReport),
    Rejected {
        id: Option<&'a str>,
        verdict: Option<&'a str>,
        events: Option<u64>,
        lines: Option<u64>,
        bytes: Option<u64>,
    },
}

impl<'a> ImportLine<'a> {
    fn imported(file: &'a str, report: &'a ImportReport) -> Self {
        ImportLine {
            file,
            status: "imported",
            report: Stored::Imported(report),
            error: None,
        }
    }

    fn rejected(file: &'a str, failure: &'a ImportFailure) -> Self {
        let engine = match failure {
            ImportFailure::Engine(e) => Some(e),
            ImportFailure::Other(_) => None,
        };
        ImportLine {
            file,
            status: "rejected",
            report: Stored::Rejected {
                id: engine.and_then(rejected_id),
                verdict: engine.and_then(rejected_verdict),
                events: None,
                lines: None,
                bytes: None,
            },
            error: Some(failure.to_string()),
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
