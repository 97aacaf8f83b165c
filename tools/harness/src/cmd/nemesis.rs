//! `sessionlog-harness stress --fleet-nemesis` (see `sessionlog_harness::nemesis`): the run, its
//! counts and findings as lines or one JSON object; and the hidden `nemesis-host`, one host
//! process of the run, which this binary re-runs as.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use sessionlog_codec::json::{JsString, Object, Value};
use sessionlog_harness::nemesis::check::{Finding, ReadGuarantee};
use sessionlog_harness::nemesis::host::{serve, HostSpec};
use sessionlog_harness::nemesis::{
    run as run_nemesis, NemesisOptions, NemesisReport, FAULTS, KINDS,
};
use sessionlog_tools_common::output::json_line;

use super::work_dir::WorkDir;

/// Findings of each kind printed in full (each with its excerpt); the rest are counted.
const SHOWN_PER_KIND: usize = 3;
/// History lines per finding's excerpt.
const EXCERPT_LINES: usize = 12;

pub fn run(
    nodes: u64,
    minutes: f64,
    seed: u64,
    without_calls: &[String],
    without_faults: &[String],
    dir: Option<PathBuf>,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    if !(minutes > 0.0 && minutes <= 24.0 * 60.0) {
        bail!("--minutes must be more than 0 and at most a day, not {minutes}");
    }
    for (given, known) in [
        (
            without_calls,
            KINDS.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        ),
        (without_faults, FAULTS.to_vec()),
    ] {
        if let Some(bad) = given.iter().find(|g| !known.contains(&g.as_str())) {
            bail!("unknown kind {bad:?} (known: {})", known.join(", "));
        }
    }
    let defaults = NemesisOptions::default();
    let opts = NemesisOptions {
        duration: Duration::from_secs_f64(minutes * 60.0),
        seed,
        nodes: usize::try_from(nodes).unwrap_or(2),
        kinds: defaults
            .kinds
            .iter()
            .copied()
            .filter(|k| !without_calls.iter().any(|w| w == k))
            .collect(),
        faults: defaults
            .faults
            .iter()
            .copied()
            .filter(|k| !without_faults.iter().any(|w| w == k))
            .collect(),
        ..defaults
    };
    let work = WorkDir::create(dir, "nemesis", &["host0"])?;
    // /proc/self/exe still runs this binary if a rebuild replaces its file during the run.
    let exe = match std::path::Path::new("/proc/self/exe") {
        p if p.exists() => p.to_path_buf(),
        _ => std::env::current_exe().context("locating the harness binary")?,
    };
    if !as_json {
        eprintln!(
            "fleet nemesis: {} hosts over {} PostgreSQL node(s) for {minutes} min, seed {seed}, in {}",
            opts.hosts,
            opts.nodes,
            work.path.display()
        );
    }
    let report = run_nemesis(&opts, &exe, &work.path).with_context(|| work.kept())?;
    let mut out = std::io::stdout().lock();
    if as_json {
        json_line(&mut out, report_json(&report, &opts, minutes))?;
    } else {
        print_report(&mut out, &report, &opts)?;
    }
    if report.findings.is_empty() {
        work.finish()?;
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "{} finding(s); the history is in {}",
            report.findings.len(),
            work.path.join("history.txt").display()
        );
        Ok(ExitCode::FAILURE)
    }
}

/// `sessionlog-harness nemesis-host`: serve calls on standard input until it closes.
pub fn host(spec: HostSpec) -> anyhow::Result<ExitCode> {
    serve(&spec, &mut std::io::stdin().lock(), std::io::stdout())?;
    Ok(ExitCode::SUCCESS)
}

fn counts<K: AsRef<str>>(map: impl IntoIterator<Item = (K, u64)>) -> Value {
    let mut o = Object::new();
    for (k, n) in map {
        o.insert(JsString::from(k.as_ref()), Value::from(n as i64));
    }
    Value::Object(o)
}

/// The first [`SHOWN_PER_KIND`] findings of each kind, in the order found.
fn shown(report: &NemesisReport) -> Vec<&Finding> {
    let mut per_kind: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    report
        .findings
        .iter()
        .filter(|f| {
            let n = per_kind.entry(f.kind).or_default();
            *n += 1;
            *n <= SHOWN_PER_KIND
        })
        .collect()
}

fn report_json(report: &NemesisReport, opts: &NemesisOptions, minutes: f64) -> Object {
    let by_kind = counts(report.findings.iter().fold(
        std::collections::BTreeMap::<&str, u64>::new(),
        |mut m, f| {
            *m.entry(f.kind).or_default() += 1;
            m
        },
    ));
    let shown: Vec<Value> = shown(report)
        .into_iter()
        .map(|f| {
            Value::Object(
                Object::new()
                    .with("kind", f.kind)
                    .with("detail", f.detail.as_str())
                    .with(
                        "excerpt",
                        Value::Array(
                            report
                                .excerpt(f, EXCERPT_LINES)
                                .iter()
                                .map(|l| Value::from(l.as_str()))
                                .collect(),
                        ),
                    ),
            )
        })
        .collect();
    Object::new()
        .with("seed", opts.seed as i64)
        .with("minutes", minutes)
        .with("nodes", opts.nodes as i64)
        .with("hosts", opts.hosts as i64)
        .with("clients", opts.clients as i64)
        .with(
            "readBoundMs",
            ReadGuarantee::of(opts.read_bound, opts.lease)
                .bound
                .as_millis() as i64,
        )
        .with(
            "calls",
            Value::Array(opts.kinds.iter().map(|k| Value::from(*k)).collect()),
        )
        .with("operations", counts(report.operations()))
        .with("answers", counts(report.answers()))
        .with("refusals", counts(report.refusals()))
        .with("faults", counts(report.faults()))
        .with("sessions", report.sessions as i64)
        .with(
            "findings",
            Object::new()
                .with("total", report.findings.len() as i64)
                .with("byKind", by_kind)
                .with("first", Value::Array(shown)),
        )
        .with("seconds", report.seconds)
}

fn print_report(
    out: &mut dyn Write,
    report: &NemesisReport,
    opts: &NemesisOptions,
) -> anyhow::Result<()> {
    writeln!(
        out,
        "fleet nemesis, seed {}, {} node(s), {:.0} s: operations {:?}; answers {:?}; refusals \
         {:?}; faults {:?}; {} sessions in PostgreSQL at the end; {} finding(s)",
        opts.seed,
        opts.nodes,
        report.seconds,
        report.operations(),
        report.answers(),
        report.refusals(),
        report.faults(),
        report.sessions,
        report.findings.len()
    )?;
    for f in shown(report) {
        writeln!(out, "{}: {}", f.kind, f.detail)?;
        for l in report.excerpt(f, EXCERPT_LINES) {
            writeln!(out, "    {l}")?;
        }
    }
    Ok(())
}
