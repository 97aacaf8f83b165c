//! `sessionlog-harness stress --cluster`: the database-failover harness (see
//! `sessionlog_harness::failover`), its progress on stderr and its totals as a line or one JSON
//! object.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use sessionlog_codec::json::{Object, Value};
use sessionlog_harness::failover::{run as run_failover, CycleReport, FailoverOptions};
use sessionlog_tools_common::output::json_line;

use super::work_dir::WorkDir;

pub fn run(
    opts: &FailoverOptions,
    dir: Option<PathBuf>,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let work = WorkDir::create(dir, "failover", &["host"])?;
    let store = work.path.join("host");
    let start = Instant::now();
    let cycles = opts.cycles;
    let mut progress = |cycle: u64, c: &CycleReport| {
        if !as_json {
            eprintln!(
                "failover {}/{cycles}: node{} killed; node{} promoted after {} ms, killed node \
                 replicating again (and a synchronous standby) after {} ms, appends resumed \
                 after {} ms; {} batches acknowledged so far",
                cycle + 1,
                c.killed,
                c.promoted_node,
                ms(c.promoted),
                ms(c.rejoined),
                ms(c.outage),
                c.acked
            );
        }
    };
    let report = run_failover(opts, &store, &mut progress).with_context(|| work.kept())?;
    let secs = start.elapsed().as_secs_f64();
    let series = |f: fn(&CycleReport) -> Duration| -> Value {
        Value::Array(
            report
                .cycles
                .iter()
                .map(|c| Value::from(ms(f(c))))
                .collect(),
        )
    };
    let refusals = report
        .refusals
        .iter()
        .fold(Object::new(), |o, (&kind, &n)| o.with(kind, n as i64));
    let mut out = std::io::stdout().lock();
    if as_json {
        let o = Object::new()
            .with("cycles", report.cycles.len() as i64)
            .with("nodes", opts.nodes as i64)
            .with("ackedBatches", report.acked_batches as i64)
            .with("lost", report.lost as i64)
            .with("duplicated", report.duplicated as i64)
            .with("unknownAcked", report.unknown_acked as i64)
            .with("unacknowledgedInPostgres", report.unacknowledged as i64)
            .with("unknownOutcomes", report.unknown_outcomes as i64)
            .with("refusals", refusals)
            .with("outagesMs", series(|c| c.outage))
            .with("promotedMs", series(|c| c.promoted))
            .with("rejoinedMs", series(|c| c.rejoined))
            .with("sessions", report.sessions as i64)
            .with("seconds", secs);
        json_line(&mut out, o)?;
    } else {
        let outages: Vec<String> = report
            .cycles
            .iter()
            .map(|c| ms(c.outage).to_string())
            .collect();
        let refused: Vec<String> = report
            .refusals
            .iter()
            .map(|(kind, n)| format!("{n} {kind}"))
            .collect();
        writeln!(
            out,
            "survived {} database failovers ({} Patroni nodes) in {secs:.1} s: {} acknowledged \
             batches, lost {}, duplicated {}, unknown outcomes acknowledged {}; outages (ms) \
             [{}]; refusals: {} ({} of unknown outcome, appended again); {} sessions in \
             PostgreSQL equal to the host's exports, verify clean",
            report.cycles.len(),
            opts.nodes,
            report.acked_batches,
            report.lost,
            report.duplicated,
            report.unknown_acked,
            outages.join(", "),
            if refused.is_empty() {
                "none".to_owned()
            } else {
                refused.join(", ")
            },
            report.unknown_outcomes,
            report.sessions
        )?;
    }
    work.finish()?;
    Ok(ExitCode::SUCCESS)
}

/// `d` in whole milliseconds.
fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
