//! `sessionlog-harness stress --power-loss`: the power-cut loop on LazyFS (see
//! `sessionlog_harness::power`). The parent re-runs this binary with `--power-worker SPEC` as the
//! child it freezes and kills; with a host command after `--`, that command is the child.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::Context;
use sessionlog_codec::json::Object;
use sessionlog_engine::Durability;
use sessionlog_harness::power::host::{host_power_loop, HostCycle, HostRun};
use sessionlog_harness::power::worker::{self as power_worker, WorkerSpec};
use sessionlog_harness::power::{durability_name, lazyfs, power_loop, PowerOptions};
use sessionlog_tools_common::output::json_line;

use super::work_dir::WorkDir;

/// The child side.
pub fn worker(spec: &str) -> anyhow::Result<ExitCode> {
    power_worker::run(&WorkerSpec::parse(spec)?)?;
    Ok(ExitCode::SUCCESS)
}

/// LazyFS's binary (built once) and the run's working directory: `dir`, else a temp dir.
fn prepare(
    dir: Option<PathBuf>,
    build_script: Option<&Path>,
) -> anyhow::Result<(PathBuf, WorkDir)> {
    if let Some(why) = lazyfs::unavailable_reason() {
        anyhow::bail!("power-loss runs need LazyFS, which cannot run here: {why}");
    }
    // The checkout this binary was built from: LazyFS's build.sh is beside it.
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let binary = lazyfs::locate_or_build(&lazyfs::default_build_dir(), build_script, &checkout)?;
    let work = WorkDir::create(dir, "power-loss", &["journal", "lazyfs"])?;
    Ok((binary, work))
}

/// Power cuts under an outside host command (see `sessionlog_harness::power::host`).
pub fn run_host(
    host: &[String],
    durability: Durability,
    cycles: u64,
    seed: u64,
    dir: Option<PathBuf>,
    build_script: Option<PathBuf>,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let (binary, work) = prepare(dir, build_script.as_deref())?;
    let start = Instant::now();
    let mut progress = |cycle: u64, c: &HostCycle| {
        if !as_json {
            eprintln!(
                "cut {}/{cycles}: {} acks read, {} sessions checked, {} short, {} problems",
                cycle + 1,
                c.acknowledged,
                c.sessions,
                c.short.len(),
                c.problems.len()
            );
        }
    };
    let run = HostRun {
        host,
        cycles,
        seed,
        cut_window_ms: PowerOptions::default().cut_window_ms,
        durability: durability_name(durability),
    };
    let report =
        host_power_loop(&work.path, &binary, &run, &mut progress).with_context(|| work.kept())?;
    let secs = start.elapsed().as_secs_f64();
    let lost = report.short.len() as u64;
    let json = Object::new()
        .with("cycles", report.cycles as i64)
        .with("acknowledged", report.acknowledged as i64)
        .with("lost", lost as i64)
        .with("cycles_with_loss", report.cycles_with_loss as i64)
        .with("problems", report.problems.len() as i64)
        .with("durability", durability_name(durability))
        .with("session_checks", report.session_checks as i64)
        .with("lazyfs_restarts", report.lazyfs_restarts as i64)
        .with("seconds", secs);
    let text = format!(
        "{} power cuts under the host ({}) in {secs:.1} s: {} acknowledged flushes, {lost} \
         sessions short of their acknowledged events (in {} cycles), {} other problems; {} \
         session checks, {} LazyFS restarts",
        report.cycles,
        durability_name(durability),
        report.acknowledged,
        report.cycles_with_loss,
        report.problems.len(),
        report.session_checks,
        report.lazyfs_restarts
    );
    let failed = !report.problems.is_empty() || (durability == Durability::Sync && lost > 0);
    let problems: Vec<&String> = report.short.iter().chain(&report.problems).collect();
    finish(&problems, json, &text, as_json, failed, &work)
}

pub fn run(
    opts: &PowerOptions,
    cycles: u64,
    dir: Option<PathBuf>,
    build_script: Option<PathBuf>,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let (binary, work) = prepare(dir, build_script.as_deref())?;
    let exe = match Path::new("/proc/self/exe") {
        p if p.exists() => p.to_path_buf(),
        _ => std::env::current_exe().context("locating the sessionlog binary")?,
    };
    let mut spawn = |spec: &WorkerSpec| {
        let mut c = Command::new(&exe);
        c.args(["stress", "--power-worker", &spec.to_arg()]);
        c
    };
    let start = Instant::now();
    let mut progress = |cycle: u64, c: &sessionlog_harness::power::model::CycleCheck| {
        if !as_json {
            eprintln!(
                "cycle {}/{cycles}: {} acknowledged, {} lost, {} half-applied, {} problems, \
                 {} sessions checked",
                cycle + 1,
                c.acknowledged,
                c.lost,
                c.half_applied,
                c.problems.len(),
                c.sessions
            );
        }
    };
    let report = power_loop(&work.path, &binary, cycles, opts, &mut spawn, &mut progress)
        .with_context(|| work.kept())?;
    let secs = start.elapsed().as_secs_f64();
    let json = Object::new()
        .with("cycles", report.cycles as i64)
        .with("acknowledged", report.acknowledged as i64)
        .with("lost", report.lost as i64)
        .with("half_applied", report.half_applied as i64)
        .with("problems", report.problems.len() as i64)
        .with("durability", durability_name(opts.durability))
        .with("cycles_with_loss", report.cycles_with_loss as i64)
        .with("rejected", report.rejected as i64)
        .with("session_checks", report.session_checks as i64)
        .with("stores", report.stores as i64)
        .with("lazyfs_restarts", report.lazyfs_restarts as i64)
        .with("direct_io", report.direct_io)
        .with("seconds", secs);
    let text = format!(
        "{} power cuts ({}) in {secs:.1} s: {} acknowledged session writes, {} lost \
         (in {} cycles), {} half-applied, {} problems; {} session checks, {} stores, {} \
         admin ops refused, {} LazyFS restarts; flushes and compactions {}",
        report.cycles,
        durability_name(opts.durability),
        report.acknowledged,
        report.lost,
        report.cycles_with_loss,
        report.half_applied,
        report.problems.len(),
        report.session_checks,
        report.stores,
        report.rejected,
        report.lazyfs_restarts,
        if report.direct_io {
            "with direct I/O"
        } else {
            "buffered (the mount refuses O_DIRECT)"
        }
    );
    let failed = report.half_applied > 0
        || !report.problems.is_empty()
        || (opts.durability == Durability::Sync && report.lost > 0);
    let problems: Vec<&String> = report.problems.iter().collect();
    finish(&problems, json, &text, as_json, failed, &work)
}

/// The end of a run: every problem on stderr, the totals on stdout (`json` or `text`), and the
/// exit: failure when `failed` (the directory kept for inspection), else success, the directory
/// removed when it was a temp one.
fn finish(
    problems: &[&String],
    json: Object,
    text: &str,
    as_json: bool,
    failed: bool,
    work: &WorkDir,
) -> anyhow::Result<ExitCode> {
    for p in problems {
        eprintln!("problem: {p}");
    }
    let mut out = std::io::stdout().lock();
    if as_json {
        json_line(&mut out, json)?;
    } else {
        writeln!(out, "{text}")?;
    }
    if failed {
        return Ok(ExitCode::FAILURE);
    }
    work.finish()?;
    Ok(ExitCode::SUCCESS)
}
