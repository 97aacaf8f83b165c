//! `sessionlog-harness stress`: the kill -9 crash loop (see `sessionlog_harness::stress`). The
//! parent re-runs this same binary with `--worker` as the child it kills.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::Context;
use sessionlog_codec::json::Object;
use sessionlog_harness::stress::{kill_loop, worker, StressOptions};
use sessionlog_tools_common::output::json_line;

use super::work_dir::WorkDir;

pub fn run(
    opts: &StressOptions,
    cycles: u64,
    max_kill_ms: u64,
    dir: Option<PathBuf>,
    as_json: bool,
    is_worker: bool,
) -> anyhow::Result<ExitCode> {
    if is_worker {
        let dir = dir.context("--worker needs --dir")?;
        worker(&dir.join("db"), &dir.join("acks.log"), opts)?;
        return Ok(ExitCode::SUCCESS);
    }
    let work_dir = WorkDir::create(dir, "stress", &["db"])?;
    let work = work_dir.path.clone();
    // /proc/self/exe still runs this binary if a rebuild replaces its file during the run.
    let exe = match std::path::Path::new("/proc/self/exe") {
        p if p.exists() => p.to_path_buf(),
        _ => std::env::current_exe().context("locating the sessionlog binary")?,
    };
    let mut spawn = || {
        let mut c = Command::new(&exe);
        c.arg("stress")
            .arg("--worker")
            .arg("--dir")
            .arg(&work)
            .arg("--threads")
            .arg(opts.threads.to_string())
            .arg("--sessions-per-thread")
            .arg(opts.sessions_per_thread.to_string())
            .arg("--events")
            .arg(opts.events_per_session.to_string())
            .arg("--seed")
            .arg(opts.seed.to_string());
        if !opts.wal_recycling {
            c.arg("--no-wal-recycling");
        }
        if opts.blob_files {
            c.arg("--blob-files");
        }
        c
    };
    let start = Instant::now();
    let mut progress = |cycle: u64, c: &sessionlog_harness::stress::CheckReport| {
        if !as_json {
            eprintln!(
                "cycle {}/{cycles}: {} sessions, {} acknowledged batches present, {} events checked",
                cycle + 1,
                c.sessions,
                c.acked_batches,
                c.events
            );
        }
    };
    let report = kill_loop(&work, cycles, max_kill_ms, opts, &mut spawn, &mut progress)
        .with_context(|| work_dir.kept())?;
    let secs = start.elapsed().as_secs_f64();
    let mut out = std::io::stdout().lock();
    if as_json {
        let o = Object::new()
            .with("cycles", report.cycles as i64)
            .with("ackedBatches", report.acked_batches as i64)
            .with("ackedChecks", report.acked_checks as i64)
            .with("sessions", report.sessions as i64)
            .with("events", report.events as i64)
            .with("stores", report.stores as i64)
            .with("seconds", secs);
        json_line(&mut out, o)?;
    } else {
        writeln!(
            out,
            "survived {} kill -9 cycles in {secs:.1} s: {} acknowledged batches all present \
             ({} batch checks over all cycles), {} sessions, {} events in {} stores, no gap, \
             no duplicate, verify clean, exports match",
            report.cycles,
            report.acked_batches,
            report.acked_checks,
            report.sessions,
            report.events,
            report.stores
        )?;
    }
    work_dir.finish()?;
    Ok(ExitCode::SUCCESS)
}
