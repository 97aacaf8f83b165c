//! `sessionlog import`: files, directories and DSH session roots, in parallel, with progress on
//! a terminal. Every import commits unsynced; one WAL sync makes them all durable before any is
//! reported.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use sessionlog_codec::json::Object;
use sessionlog_engine::{Error, ImportOptions, ImportReport, Store};
use sessionlog_tools_common::import::{collect_inputs, import_all};
use sessionlog_tools_common::output::{json_line, opt};

pub fn run(store: &Store, paths: &[PathBuf], strict: bool, json: bool) -> anyhow::Result<ExitCode> {
    let (inputs, refused) = collect_inputs(paths)?;
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
    store.sync()?;
    bar.finish_and_clear();
    let mut all: Vec<(PathBuf, Result<ImportReport, Error>)> = inputs
        .into_iter()
        .map(|i| i.path)
        .zip(results.drain(..))
        .collect();
    all.extend(refused.into_iter().map(|(p, e)| (p, Err(e))));
    let mut out = std::io::stdout().lock();
    let (mut imported, mut rejected, mut events) = (0u64, 0u64, 0u64);
    let single = all.len() == 1;
    for (file, result) in &all {
        let name = file.display().to_string();
        match result {
            Ok(r) => {
                imported += 1;
                events += r.events;
                if json {
                    json_line(&mut out, report_json(&name, Ok(r)))?;
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
                    json_line(&mut out, report_json(&name, Err(e)))?;
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
