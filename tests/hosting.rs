//! The hosting benchmark's fleet and its PostgreSQL peer, run tiny: `bench hosting --cluster
//! --hosts 1,2 --peers pg-rows` prints every system and every fleet ratio, each system committed
//! batches (the fleet's host processes and PostgreSQL inside the bench's disk cgroup, which the
//! bench checks), and the straightforward PostgreSQL store holds exactly the events it
//! acknowledged.
//!
//! Needs PostgreSQL 15's server binaries (Debian's `postgresql-15`, installed by `./x test`);
//! without them each test fails under CI (`CI` set) and elsewhere prints a `SKIPPED` line.

use std::process::Command;
use std::time::Duration;

use sessionlog::codec::json::{self, Value};
use sessionlog_harness::gen::{GenOptions, LogFormat};
use sessionlog_harness::hosting::peers::PgRowsPeer;
use sessionlog_harness::hosting::{self, Durability, FeedPool, Host, Workload};
use sessionlog_harness::requirement::missing;

use crate::fixtures::built_binary;

fn postgres_installed() -> bool {
    if sessionlog_harness::postgres::available() {
        return true;
    }
    missing(
        "PostgreSQL 15's server binaries (Debian's postgresql-15)",
        "they are not installed",
    );
    false
}

/// `bench hosting --cluster` with pg-rows, 2 threads, 1 s, and `args`: its JSON object.
fn tiny_fleet_bench(args: &[&str]) -> Value {
    let out = Command::new(built_binary("sessionlog-harness"))
        .args([
            "bench",
            "hosting",
            "--json",
            "--cluster",
            "--peers",
            "pg-rows",
        ])
        .args(["--threads", "2", "--seconds", "1"])
        .args(args)
        .output()
        .expect("runs the bench");
    assert!(
        out.status.success(),
        "bench {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    json::parse(String::from_utf8_lossy(&out.stdout).trim()).expect("one JSON object")
}

fn number(v: &Value, path: &[&str]) -> Option<f64> {
    let mut at = Some(v);
    for key in path {
        at = at.and_then(Value::as_object).and_then(|o| o.get(key));
    }
    at.and_then(Value::as_f64)
}

#[test]
fn a_tiny_fleet_run_reports_every_system_and_ratio() {
    if !postgres_installed() {
        return;
    }
    let o = tiny_fleet_bench(&["--hosts", "1,2", "--sessions", "8"]);
    for system in ["sessionlog", "fleet_h1", "fleet_h2", "pg_rows"] {
        let batches = number(&o, &["systems", system, "batches"]).unwrap_or(0.0);
        assert!(batches > 0.0, "{system} committed no batch: {o:?}");
        let latency = number(&o, &["systems", system, "p99_ms"]).unwrap_or(0.0);
        assert!(latency > 0.0, "{system} has no latency");
    }
    for system in ["fleet_h1", "fleet_h2", "pg_rows"] {
        let server = number(&o, &["systems", system, "server_cpu_us_per_batch"]);
        assert!(
            server.is_some_and(|us| us > 0.0),
            "{system}: PostgreSQL's CPU per batch"
        );
        let host = number(&o, &["systems", system, "cpu_us_per_batch"]);
        assert!(
            host.is_some_and(|us| us > 0.0),
            "{system}: the hosts' CPU per batch"
        );
    }
    for ratio in [
        "fleet_h1_vs_pg_rows",
        "fleet_h1_vs_embedded",
        "fleet_h2_vs_pg_rows",
        "fleet_h2_vs_embedded",
        "vs_pg_rows",
    ] {
        let x = number(&o, &["ratios", ratio]).unwrap_or(0.0);
        assert!(x > 0.0, "ratio {ratio} missing: {o:?}");
    }
    let fleet = number(&o, &["systems", "fleet_h2", "batches_per_s"]).unwrap_or(0.0);
    let rows = number(&o, &["systems", "pg_rows", "batches_per_s"]).unwrap_or(1.0);
    let ratio = number(&o, &["ratios", "fleet_h2_vs_pg_rows"]).unwrap_or(0.0);
    assert!((ratio - fleet / rows).abs() < 1e-6 * ratio.max(1.0));
}

/// Under a write-IOPS limit the host processes and PostgreSQL run inside the throttled cgroup
/// (the bench refuses to measure otherwise) and their device writes are counted.
#[test]
fn a_throttled_fleet_run_counts_its_hosts_and_postgres_writes() {
    if !postgres_installed() {
        return;
    }
    let probe = tempfile::tempdir_in(std::env::temp_dir()).expect("temp dir");
    if let Err(e) = sessionlog_harness::disk_cgroup::DiskCgroup::create(
        probe.path(),
        sessionlog_harness::disk_cgroup::Limit::WriteIops(100_000),
    ) {
        missing("root and a block-IO cgroup hierarchy", &format!("{e:#}"));
        return;
    }
    let o = tiny_fleet_bench(&["--hosts", "2", "--sessions", "4", "--write-iops", "100000"]);
    assert_eq!(number(&o, &["disk", "write_iops"]), Some(100_000.0));
    for system in ["fleet_h2", "pg_rows"] {
        let writes = number(&o, &["systems", system, "device_writes"]).unwrap_or(0.0);
        assert!(
            writes > 0.0,
            "{system}: PostgreSQL's commits reach the disk: {o:?}"
        );
    }
}

/// Every event of every acknowledged batch is a row of the peer's events table, and nothing
/// else is (a run without warmup counts every batch it wrote).
#[test]
fn the_pg_rows_peer_holds_exactly_the_acknowledged_events() {
    if !postgres_installed() {
        return;
    }
    let opts = GenOptions {
        events_per_session: 300,
        torn_fraction: 0.0,
        seed: 5,
        ..GenOptions::default()
    };
    let workload = Workload {
        sessions: 6,
        threads: 2,
        duration: Duration::from_millis(700),
        ..Workload::default()
    };
    let pool = FeedPool::generate(workload.sessions, &opts, LogFormat::V0).expect("feeds");
    let peer = PgRowsPeer::start(Durability::Sync).expect("starts PostgreSQL");
    let report = hosting::run(&peer, &pool, &workload, None).expect("runs");
    assert!(report.batches > 0);
    assert_eq!(peer.stored_events().expect("counts"), report.events);
    peer.verify().expect("the rows match what was acknowledged");
    assert!(peer.server_cpu_time().is_some());
}
