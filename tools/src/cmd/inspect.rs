//! Read-only commands (`events`, `ls`, `verify`) and the generator front end (`gen`).

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

use sessionlog_codec::json::{self, Object};
use sessionlog_engine::Store;
use sessionlog_tools::gen::{generate, GenOptions};

use crate::output::{json_line, opt};

pub fn events(store: &Store, id: &str, from: u64, to: Option<u64>) -> anyhow::Result<ExitCode> {
    let mut out = BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    let mut line = String::new();
    store.events(id, from, to, &mut |_, event| {
        line.clear();
        json::write_value(&mut line, event);
        line.push('\n');
        out.write_all(line.as_bytes())
            .map_err(|source| sessionlog_engine::Error::Io {
                path: "standard output".into(),
                source,
            })
    })?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

pub fn surface(
    store: &Store,
    id: &str,
    at: Option<u64>,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let view = store.surface_at(id, at)?;
    if as_json {
        println!("{}", view.to_json());
    } else {
        let nodes: Vec<String> = view.nodes.iter().map(u64::to_string).collect();
        println!("nodes: {}", nodes.join(" "));
        println!("replaceGeneration: {}", view.replace_generation);
        for r in &view.replacements {
            println!(
                "replacement at seq {}: {}..={} shadowed {:?}",
                r.seq, r.start, r.end, r.shadowed_seqs
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Print values as JSONL, one `JSON.stringify` per line.
pub fn values(values: &[json::Value]) -> anyhow::Result<ExitCode> {
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut line = String::new();
    for v in values {
        line.clear();
        json::write_value(&mut line, v);
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

pub fn check_request(store: &Store, id: &str, turn: i64, step: i64) -> anyhow::Result<ExitCode> {
    let mut input = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut input)?;
    let recorded = json::parse(input.trim())?;
    store.check_request(id, turn, step, &recorded)?;
    println!("request of turn {turn} step {step} matches the log");
    Ok(ExitCode::SUCCESS)
}

pub fn ls(store: &Store, as_json: bool) -> anyhow::Result<ExitCode> {
    let mut out = BufWriter::new(std::io::stdout().lock());
    for s in store.list()? {
        if as_json {
            let o = Object::new()
                .with("id", s.id.as_str())
                .with("createdAt", opt(s.created_at))
                .with("cwd", opt(s.cwd.as_deref()))
                .with("verdict", s.verdict.to_string().as_str())
                .with("events", s.events as i64)
                .with("bytes", s.bytes as i64);
            json_line(&mut out, o)?;
        } else {
            writeln!(
                out,
                "{}\t{}\t{} events\t{} bytes",
                s.id, s.verdict, s.events, s.bytes
            )?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

pub fn verify(store: &Store, ids: &[String], as_json: bool) -> anyhow::Result<ExitCode> {
    let report = store.verify(ids)?;
    let mut out = std::io::stdout().lock();
    if as_json {
        let problems = report
            .problems
            .iter()
            .map(|p| {
                Object::new()
                    .with("session", p.session.as_str())
                    .with("problem", p.detail.as_str())
                    .into()
            })
            .collect();
        let o = Object::new()
            .with("sessions", report.sessions as i64)
            .with("lines", report.lines as i64)
            .with("events", report.events as i64)
            .with("problems", json::Value::Array(problems));
        json_line(&mut out, o)?;
    } else {
        for p in &report.problems {
            writeln!(out, "session \"{}\": {}", p.session, p.detail)?;
        }
        writeln!(
            out,
            "verified {} sessions, {} lines, {} events: {} problems",
            report.sessions,
            report.lines,
            report.events,
            report.problems.len()
        )?;
    }
    Ok(if report.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

pub fn gen(out: &Path, sessions: u64, seed: u64, events: Option<u64>) -> anyhow::Result<ExitCode> {
    let mut opts = GenOptions {
        sessions,
        seed,
        ..GenOptions::default()
    };
    if let Some(e) = events {
        opts.events_per_session = e;
    }
    let report = generate(out, &opts)?;
    println!(
        "wrote {} sessions, {} events, {} bytes to {}",
        report.files,
        report.events,
        report.bytes,
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}
