//! What `sessionlog bench hosting` prints: one JSON object (raw figures per system and the
//! `ratios` map) or a table, both from the same [`Report`]s.
//!
//! Ratios are sessionlog's durable batches/s over each peer's, taken in the same run (higher is
//! better); they need a report named `"sessionlog"`, and are `null`, with a `note`, without one.

use std::fmt::Write as _;

use sessionlog_codec::json::{Object, Value};

use super::{millis, Durability, FeedPool, Report, Workload};
use crate::gen::LogFormat;

/// Name of sessionlog's report, the numerator of every ratio.
pub const SESSIONLOG: &str = "sessionlog";
/// Printed when no sessionlog report is present.
pub const NO_SESSIONLOG: &str = "sessionlog was not among the reports: peers only, no ratios";

/// The run's figures as one JSON object.
pub fn figures(
    workload: &Workload,
    durability: Durability,
    pool: &FeedPool,
    reports: &[Report],
) -> Object {
    let (batches_per_session, events_per_batch) = pool.shape();
    let mut systems = Object::new();
    for r in reports {
        systems = systems.with(r.system, system(r));
    }
    let mut o = Object::new()
        .with("workload", "hosting")
        .with("sessions", workload.sessions as i64)
        .with("threads", workload.threads as i64)
        .with("seconds", workload.duration.as_secs_f64())
        .with("durability", durability_name(durability))
        .with(
            "feed",
            Object::new()
                .with("pool", pool.len() as i64)
                .with(
                    "format",
                    match pool.format() {
                        LogFormat::V0 => "v0",
                        LogFormat::V4 => "v4",
                    },
                )
                .with("batches_per_session", batches_per_session)
                .with("events_per_batch", events_per_batch),
        )
        .with("systems", systems);
    o = match ratios(reports) {
        Some(r) => o.with("ratios", r),
        None => o.with("ratios", Value::Null).with("note", NO_SESSIONLOG),
    };
    o
}

/// `{"vs_<peer>": sessionlog batches/s ÷ peer batches/s}`, if sessionlog was measured.
pub fn ratios(reports: &[Report]) -> Option<Object> {
    let ours = reports.iter().find(|r| r.system == SESSIONLOG)?;
    let mut o = Object::new();
    for peer in reports.iter().filter(|r| r.system != SESSIONLOG) {
        let ratio = ours.batches_per_s() / peer.batches_per_s().max(1e-9);
        o = o.with(&format!("vs_{}", peer.system), ratio);
    }
    Some(o)
}

fn system(r: &Report) -> Object {
    let secs = r.wall.as_secs_f64().max(1e-9);
    Object::new()
        .with("batches", r.batches as i64)
        .with("events", r.events as i64)
        .with("bytes", r.bytes as i64)
        .with("sessions_started", r.sessions_started as i64)
        .with("wall_seconds", r.wall.as_secs_f64())
        .with(
            "cpu_seconds",
            r.cpu.map_or(Value::Null, |c| Value::from(c.as_secs_f64())),
        )
        .with("batches_per_s", r.batches_per_s())
        .with("events_per_s", r.events_per_s())
        .with("mb_per_s", r.bytes as f64 / 1e6 / secs)
        .with("p50_ms", millis(r.latency.quantile(0.5)))
        .with("p99_ms", millis(r.latency.quantile(0.99)))
        .with("mean_ms", millis(r.latency.mean()))
        .with("max_ms", millis(r.latency.max()))
}

/// The run's figures as a table, one line per system, then the ratios (or the note).
pub fn table(
    workload: &Workload,
    durability: Durability,
    pool: &FeedPool,
    reports: &[Report],
) -> String {
    let (batches_per_session, events_per_batch) = pool.shape();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "hosting: {} sessions, {} threads, {:.1} s, durability {}; {} generated sessions \
         replayed ({batches_per_session:.0} batches each, {events_per_batch:.1} events/batch)",
        workload.sessions,
        workload.threads,
        workload.duration.as_secs_f64(),
        durability_name(durability),
        pool.len(),
    );
    let _ = writeln!(
        s,
        "{:<10} {:>10} {:>11} {:>7} {:>8} {:>8} {:>7} {:>9}",
        "system", "batches/s", "events/s", "MB/s", "p50 ms", "p99 ms", "cpu s", "batches"
    );
    for r in reports {
        let cpu = r
            .cpu
            .map_or_else(|| "-".to_owned(), |c| format!("{:.2}", c.as_secs_f64()));
        let _ = writeln!(
            s,
            "{:<10} {:>10.1} {:>11.1} {:>7.2} {:>8.2} {:>8.2} {:>7} {:>9}",
            r.system,
            r.batches_per_s(),
            r.events_per_s(),
            r.bytes as f64 / 1e6 / r.wall.as_secs_f64().max(1e-9),
            millis(r.latency.quantile(0.5)),
            millis(r.latency.quantile(0.99)),
            cpu,
            r.batches,
        );
    }
    match ratios(reports) {
        Some(r) => {
            for (peer, ratio) in r.iter() {
                if let Some(x) = ratio.as_f64() {
                    let _ = writeln!(s, "sessionlog {peer}: {x:.2}x batches/s");
                }
            }
        }
        None => {
            let _ = writeln!(s, "{NO_SESSIONLOG}");
        }
    }
    s
}

fn durability_name(d: Durability) -> &'static str {
    match d {
        Durability::Sync => "sync",
        Durability::Buffered => "buffered",
    }
}
