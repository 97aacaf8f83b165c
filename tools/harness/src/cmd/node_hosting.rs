//! `sessionlog-harness bench node-hosting`: DSH's own host (its `SessionStore`, in Node) hosting S
//! sessions, each looping "append one turn, flush", on DSH's JSONL backend (`none` and `zstd`)
//! and on `SessionlogPersistence` through the Node binding; under the same disk model as
//! `bench hosting`.
//!
//! Each backend runs in its own Node process (`bindings/node/bench/hosting.mjs --backend B`),
//! one after the other in this run, inside the disk cgroup; the device write requests each one
//! issued are read from the cgroup before and after it, and the ratios taken here.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context};
use sessionlog_codec::json::{parse, Object, Value};
use sessionlog_harness::disk_cgroup::DiskCgroup;
use sessionlog_tools_common::output::{json_line, opt};

use crate::cmd::bench::disk_model;

/// The backends, in run order; the first is sessionlog, the rest its peers.
const BACKENDS: [&str; 3] = ["sessionlog", "jsonl", "jsonl_zstd"];

/// What to run.
#[derive(Debug)]
pub struct NodeHostingBench {
    /// Concurrent sessions.
    pub sessions: usize,
    /// Seconds each backend runs.
    pub seconds: f64,
    /// The disk's write-IOPS limit, or `None` for the raw disk.
    pub write_iops: Option<u64>,
    /// The Node benchmark script.
    pub script: PathBuf,
    /// Working directory (default: a temp dir, removed after).
    pub dir: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    pub as_json: bool,
}

/// Run every backend, then print the table or the JSON object with its `ratios`.
pub fn run(bench: &NodeHostingBench) -> anyhow::Result<ExitCode> {
    if !bench.script.is_file() {
        bail!(
            "{}: no such benchmark script (run from the checkout, or pass --script)",
            bench.script.display()
        );
    }
    let (work, remove_after) = crate::cmd::work_dir(bench.dir.clone(), "node-hosting");
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let disk = disk_model(&work, bench.write_iops)?;
    let member = disk
        .as_ref()
        .map(|d| d.enter(std::process::id()))
        .transpose()?;
    let mut results = Vec::with_capacity(BACKENDS.len());
    for backend in BACKENDS {
        results.push(run_backend(bench, backend, &work, disk.as_ref())?);
    }
    drop(member);
    let device = disk.as_ref().map(|d| d.device().to_string());
    drop(disk);
    if remove_after {
        std::fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    }
    let mut out = std::io::stdout().lock();
    if bench.as_json {
        json_line(&mut out, figures(bench, device, results))?;
    } else {
        print_table(bench, &results);
    }
    Ok(ExitCode::SUCCESS)
}

/// One backend's run: the script's figures plus the device writes it issued.
fn run_backend(
    bench: &NodeHostingBench,
    backend: &str,
    work: &Path,
    disk: Option<&DiskCgroup>,
) -> anyhow::Result<Object> {
    eprintln!(
        "node-hosting: {backend}, {} session(s), {}s",
        bench.sessions, bench.seconds
    );
    let before = disk.map(DiskCgroup::write_requests).transpose()?;
    let output = Command::new("node")
        .arg(&bench.script)
        .args(["--backend", backend, "--json"])
        .args(["--sessions", &bench.sessions.to_string()])
        .args(["--seconds", &bench.seconds.to_string()])
        .arg("--dir")
        .arg(work)
        .stderr(Stdio::inherit())
        .output()
        .context("running node (Node 22 must be first on PATH; ./x node installs it)")?;
    let after = disk.map(DiskCgroup::write_requests).transpose()?;
    if !output.status.success() {
        bail!("the {backend} run failed ({})", output.status);
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let last = text.lines().last().unwrap_or_default();
    let Ok(Value::Object(mut figures)) = parse(last) else {
        bail!("the {backend} run printed no JSON figures: {last:?}");
    };
    let turns = figures
        .get("turns")
        .and_then(Value::as_safe_integer)
        .unwrap_or(0);
    let writes = before.zip(after).map(|(b, a)| a.saturating_sub(b));
    figures.insert("device_writes".into(), opt(writes.map(|w| w as f64)));
    figures.insert(
        "device_writes_per_turn".into(),
        opt(writes
            .filter(|_| turns > 0)
            .map(|w| w as f64 / turns as f64)),
    );
    Ok(figures)
}

/// A backend's figure `key`.
fn figure(o: &Object, key: &str) -> Option<f64> {
    o.get(key).and_then(Value::as_f64)
}

/// The JSON object: workload, disk, each backend's figures, and `ratios` (sessionlog's
/// advantage over each peer in durable turns/s, `vs_<peer>`, and in CPU per turn,
/// `cpu_vs_<peer>`; higher is better).
fn figures(bench: &NodeHostingBench, device: Option<String>, results: Vec<Object>) -> Object {
    let ours = &results[0];
    let mut ratios = Object::new();
    for peer in &results[1..] {
        let name = peer
            .get("backend")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let speed = figure(ours, "turns_per_s")
            .zip(figure(peer, "turns_per_s"))
            .filter(|(_, p)| *p > 0.0)
            .map(|(o, p)| o / p);
        let cpu = figure(ours, "cpu_us_per_turn")
            .zip(figure(peer, "cpu_us_per_turn"))
            .filter(|(o, _)| *o > 0.0)
            .map(|(o, p)| p / o);
        ratios.insert(format!("vs_{name}").as_str().into(), opt(speed));
        ratios.insert(format!("cpu_vs_{name}").as_str().into(), opt(cpu));
    }
    let mut o = Object::new();
    o.insert("bench".into(), "node-hosting".into());
    o.insert("sessions".into(), Value::from(bench.sessions as f64));
    o.insert("seconds".into(), Value::from(bench.seconds));
    o.insert("write_iops".into(), opt(bench.write_iops.map(|n| n as f64)));
    o.insert("device".into(), opt(device.as_deref()));
    o.insert(
        "results".into(),
        Value::Array(results.into_iter().map(Value::Object).collect()),
    );
    o.insert("ratios".into(), Value::Object(ratios));
    o
}

fn print_table(bench: &NodeHostingBench, results: &[Object]) {
    let limit = bench
        .write_iops
        .map_or_else(|| "raw disk".to_owned(), |n| format!("{n} write IOPS"));
    println!(
        "node-hosting: {} session(s), {}s per backend, {limit}",
        bench.sessions, bench.seconds
    );
    println!("backend       turns/s    events/s   p50 ms   p99 ms  cpu us/turn  dev writes/turn");
    for r in results {
        let f = |k: &str| figure(r, k).unwrap_or(f64::NAN);
        println!(
            "{:<12} {:>9.1} {:>11.0} {:>8.2} {:>8.2} {:>12.0} {:>16.3}",
            r.get("backend").and_then(Value::as_str).unwrap_or("?"),
            f("turns_per_s"),
            f("events_per_s"),
            f("p50_ms"),
            f("p99_ms"),
            f("cpu_us_per_turn"),
            f("device_writes_per_turn"),
        );
    }
}
