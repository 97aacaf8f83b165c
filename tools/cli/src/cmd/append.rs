//! `sessionlog create`, `append`, `repair`, `resume` and `fork`: the write path from the shell.

use std::io::Read;
use std::process::ExitCode;

use anyhow::Context;
use sessionlog_cluster::Host;
use sessionlog_codec::format::event::NewEvent;
use sessionlog_codec::format::header::{author_header, HeaderFields};
use sessionlog_codec::json;
use sessionlog_engine::{ForkReport, SourceEncoding, Store};
use sessionlog_tools_common::args::LogFormatArg;
use sessionlog_tools_common::output::report_line;

use crate::cli::FormatArg;

pub fn create(
    host: &Host,
    id: String,
    cwd: Option<String>,
    created_at: Option<i64>,
    encoding: FormatArg,
    format: LogFormatArg,
) -> anyhow::Result<ExitCode> {
    let created_at = created_at.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    });
    let header = author_header(&HeaderFields {
        id,
        created_at,
        cwd,
        version: if format == LogFormatArg::V4 { 4 } else { 0 },
        ..HeaderFields::default()
    });
    let encoding = match encoding {
        FormatArg::Jsonl => SourceEncoding::Jsonl,
        FormatArg::JsonlZstd => SourceEncoding::JsonlZstd,
    };
    let id = host.create_session(&header, encoding)?;
    println!("created {id}");
    Ok(ExitCode::SUCCESS)
}

pub fn append(
    host: &Host,
    id: &str,
    expect_seq: Option<u64>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .context("reading the batch from standard input")?;
    let mut events = Vec::new();
    for (n, line) in input
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let value = json::parse(line).with_context(|| format!("batch line {}: not JSON", n + 1))?;
        let event = NewEvent::from_value(&value)
            .map_err(|rule| anyhow::anyhow!("batch line {}: {rule}", n + 1))?;
        events.push(event);
    }
    let receipt = host.append(id, expect_seq, events)?;
    if json {
        report_line(&mut std::io::stdout().lock(), &receipt)?;
        return Ok(ExitCode::SUCCESS);
    }
    match receipt.count {
        0 => println!(
            "appended nothing (empty batch); next seq {}",
            receipt.first_seq
        ),
        n => println!(
            "appended seqs {}..={} to {id}",
            receipt.first_seq,
            receipt.first_seq + n - 1
        ),
    }
    Ok(ExitCode::SUCCESS)
}

pub fn repair(store: &Store, id: &str, resume: bool, json: bool) -> anyhow::Result<ExitCode> {
    let r = if resume {
        store.resume(id)?
    } else {
        store.repair(id)?
    };
    if json {
        report_line(&mut std::io::stdout().lock(), &r)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{id}: cut {} torn bytes, re-appended {} recovered events, appended {} closers{}",
        r.cut_bytes,
        r.recovered,
        r.closers,
        if r.end_seed {
            " and a session/end-seed"
        } else {
            ""
        }
    );
    Ok(ExitCode::SUCCESS)
}

pub fn fork(
    host: &Host,
    source: &str,
    new_id: &str,
    at: Option<u64>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    print_fork(source, &host.fork(source, at, new_id)?, json)
}

/// Say what the fork of `source` created (`json`: its report's rendering).
fn print_fork(source: &str, r: &ForkReport, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        report_line(&mut std::io::stdout().lock(), r)?;
        return Ok(ExitCode::SUCCESS);
    }
    let closers = match r.closers {
        0 => String::new(),
        n => format!(", {n} closers of the open turn"),
    };
    println!(
        "forked {source} into {} ({} events inherited{}{closers})",
        r.id,
        r.seed,
        if r.end_seed {
            ", session/end-seed appended"
        } else {
            ""
        }
    );
    Ok(ExitCode::SUCCESS)
}
