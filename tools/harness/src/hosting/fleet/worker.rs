//! One host process of a fleet run (`bench hosting --cluster`, started by [`super::processes`]):
//! it joins the fleet, creates its sessions and warms up, prints [`READY`], waits for [`GO`] on
//! its standard input, runs the measured part, and prints its [`Report`] as one JSON line
//! ([`report_json`]), which the parent reads back with [`parse_report`]; it then keeps its
//! connections until its standard input closes.
//!
//! The report line carries the raw figures, not rates: batches, events, bytes, nanoseconds of
//! wall, process CPU and feed CPU, and the whole latency histogram, so the parent's sums and
//! merged quantiles are exact.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, ensure, Context};
use sessionlog_cluster::Config;
use sessionlog_codec::json::{self, Object, Value};
use sessionlog_engine::Options;

use super::FleetHost;
use crate::hosting::{prepare, FeedPool, Histogram, Report, Workload};

/// What a worker prints once its sessions exist and its warmup is over.
pub const READY: &str = "ready";
/// What the parent writes to every worker's standard input to start the measured part.
pub const GO: &str = "go";

/// What one host process runs.
#[derive(Clone, Debug)]
pub struct WorkerSpec {
    /// The fleet's PostgreSQL, as a host connects to it.
    pub url: String,
    /// Its host name in the fleet.
    pub host: String,
    /// Its store's directory.
    pub dir: PathBuf,
    /// Its share of the run: its slots, threads, duration and warmup.
    pub workload: Workload,
}

/// Run host `spec` with feeds from `pool` and store `options`: [`READY`] on `output` after the
/// warmup, then, on [`GO`] from `input`, the measured part and its report line.
pub fn serve(
    spec: &WorkerSpec,
    pool: &FeedPool,
    options: Options,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    let config = Config::parse(&spec.url)?;
    let host = FleetHost::join(&spec.dir, config, &spec.host, options)
        .with_context(|| format!("host {} joining the fleet", spec.host))?;
    let prepared = prepare(&host, pool, &spec.workload)
        .with_context(|| format!("host {} preparing its sessions", spec.host))?;
    writeln!(output, "{READY}")?;
    output.flush()?;
    let mut line = String::new();
    input.read_line(&mut line)?;
    ensure!(
        line.trim() == GO,
        "host {}: expected \"{GO}\" on standard input, got {line:?}",
        spec.host
    );
    let report = prepared.measure(None)?;
    let mut text = json::stringify(&Value::Object(report_json(&report)));
    text.push('\n');
    output.write_all(text.as_bytes())?;
    output.flush()?;
    // Stay connected until the parent has read every host's report and PostgreSQL's CPU time:
    // a backend that exits meanwhile would take its CPU time out of the server's process tree.
    line.clear();
    input.read_line(&mut line)?;
    Ok(())
}

/// `report`'s raw figures as the object a worker prints.
pub fn report_json(report: &Report) -> Object {
    let nanos = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    Object::new()
        .with("batches", count(report.batches))
        .with("events", count(report.events))
        .with("bytes", count(report.bytes))
        .with("sessions_started", count(report.sessions_started))
        .with("wall_ns", nanos(report.wall))
        .with(
            "cpu_ns",
            report.cpu.map_or(Value::Null, |c| nanos(c).into()),
        )
        .with("feed_cpu_ns", nanos(report.feed_cpu))
        .with("latency", report.latency.to_json())
}

/// The report of system `system` a worker printed as `line` ([`report_json`]); an error names
/// the field that is missing or not a count.
pub fn parse_report(system: &str, line: &str) -> anyhow::Result<Report> {
    let value = json::parse(line.trim()).map_err(|e| anyhow!("{e}"))?;
    let o = value
        .as_object()
        .ok_or_else(|| anyhow!("a worker's report is a JSON object, got {line:?}"))?;
    let count = |key: &str| {
        o.get(key)
            .and_then(Value::as_safe_u64)
            .ok_or_else(|| anyhow!("a worker's report has no count \"{key}\": {line:?}"))
    };
    let cpu = match o.get("cpu_ns") {
        Some(Value::Null) => None,
        _ => Some(Duration::from_nanos(count("cpu_ns")?)),
    };
    Ok(Report {
        system: system.to_owned(),
        batches: count("batches")?,
        events: count("events")?,
        bytes: count("bytes")?,
        sessions_started: count("sessions_started")?,
        wall: Duration::from_nanos(count("wall_ns")?),
        cpu,
        server_cpu: None,
        feed_cpu: Duration::from_nanos(count("feed_cpu_ns")?),
        latency: Histogram::from_json(o.get("latency").unwrap_or(&Value::Null))?,
        device_writes: None,
    })
}
