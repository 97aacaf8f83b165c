//! Driver and JSONL-peer scenarios: a tiny run counts exactly what was written, and the JSONL
//! peer's files are the bytes DSH would have written.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use super::peers::JsonlPeer;
use super::*;
use crate::gen::{GenOptions, LogFormat};

fn small_pool(slots: usize) -> FeedPool {
    small_pool_in(slots, LogFormat::V0)
}

fn small_pool_in(slots: usize, format: LogFormat) -> FeedPool {
    let opts = GenOptions {
        events_per_session: 300,
        torn_fraction: 0.0,
        seed: 11,
        ..GenOptions::default()
    };
    FeedPool::generate(slots, &opts, format).expect("generates")
}

/// Records everything it is asked to do; acknowledges every other item early.
#[derive(Default)]
struct Recorder {
    created: Mutex<Vec<String>>,
    /// Per session id: the batches' first seqs, in append order.
    appended: Mutex<HashMap<String, Vec<u64>>>,
}

impl Host for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }

    fn create(&self, start: &SessionStart<'_>) -> anyhow::Result<()> {
        assert!(start.header_line.contains(start.id));
        self.created.lock().expect("lock").push(start.id.to_owned());
        Ok(())
    }

    fn append(&self, items: Vec<Item<'_>>, acked: &mut dyn FnMut(usize)) -> anyhow::Result<()> {
        let mut appended = self.appended.lock().expect("lock");
        for (i, item) in items.iter().enumerate() {
            assert_eq!(
                item.events, item.batch.events,
                "the host built the batch's events"
            );
            appended
                .entry(item.id.to_owned())
                .or_default()
                .push(item.batch.first_seq);
            if i % 2 == 0 {
                acked(i);
            }
        }
        std::thread::sleep(Duration::from_micros(200));
        Ok(())
    }
}

#[test]
fn tiny_run_counts_what_was_written() {
    let pool = small_pool(4);
    let host = Recorder::default();
    let workload = Workload {
        sessions: 4,
        threads: 2,
        duration: Duration::from_millis(200),
        ..Workload::default()
    };
    let report = run(&host, &pool, &workload, None).expect("runs");
    let appended = host.appended.lock().expect("lock");
    let created = host.created.lock().expect("lock");
    let written: usize = appended.values().map(Vec::len).sum();
    assert!(report.batches > 0);
    assert_eq!(
        report.batches, written as u64,
        "batches acked = batches written"
    );
    assert_eq!(report.latency.count(), report.batches);
    assert!(
        report.feed_cpu > Duration::ZERO,
        "building the events is counted"
    );
    assert!(report.wall >= workload.duration);
    assert_eq!(created.len() as u64, 4 + report.sessions_started);
    // Every session got its feed's batches in order, from the first; ids end in
    // `slot << 28 | cycle` as 12 hex digits.
    let mut events = 0;
    for (id, seqs) in appended.iter() {
        let tag = u64::from_str_radix(&id[id.len() - 12..], 16).expect("hex tag");
        let feed = pool.feed(usize::try_from(tag >> 28).expect("small slot"));
        assert!(seqs.len() <= feed.batches.len(), "session {id}");
        let want: Vec<u64> = feed.batches[..seqs.len()]
            .iter()
            .map(|b| b.first_seq)
            .collect();
        assert_eq!(seqs, &want, "session {id}");
        events += feed.batches[..seqs.len()]
            .iter()
            .map(|b| b.events.len() as u64)
            .sum::<u64>();
    }
    assert_eq!(report.events, events);
    assert!(report.batches_per_s() > 0.0 && report.events_per_s() > 0.0);
}

#[test]
fn a_warmup_writes_but_counts_nothing() {
    let pool = small_pool(2);
    let host = Recorder::default();
    let workload = Workload {
        sessions: 2,
        threads: 1,
        duration: Duration::from_millis(100),
        warmup: Duration::from_millis(150),
        ..Workload::default()
    };
    let started = std::time::Instant::now();
    let report = run(&host, &pool, &workload, None).expect("runs");
    assert!(started.elapsed() >= workload.warmup + workload.duration);
    assert!(report.batches > 0);
    assert!(report.wall < workload.warmup + workload.duration);
    let appended = host.appended.lock().expect("lock");
    let written: u64 = appended.values().map(|seqs| seqs.len() as u64).sum();
    assert!(
        written > report.batches,
        "the warmup's {} batches were counted",
        written - report.batches
    );
    // The measured part goes on from where the warmup stopped: every session's batches are
    // still its feed's, in order, none twice.
    for (id, seqs) in appended.iter() {
        let tag = u64::from_str_radix(&id[id.len() - 12..], 16).expect("hex tag");
        let feed = pool.feed(usize::try_from(tag >> 28).expect("small slot"));
        let want: Vec<u64> = feed.batches[..seqs.len()]
            .iter()
            .map(|b| b.first_seq)
            .collect();
        assert_eq!(seqs, &want, "session {id}");
    }
}

#[test]
fn sessions_roll_over_to_fresh_ids() {
    // One short session per slot so the run has to start new ones.
    let opts = GenOptions {
        events_per_session: 20,
        torn_fraction: 0.0,
        seed: 2,
        ..GenOptions::default()
    };
    let pool = FeedPool::generate(2, &opts, LogFormat::V0).expect("generates");
    let host = Recorder::default();
    let workload = Workload {
        sessions: 2,
        threads: 1,
        duration: Duration::from_millis(100),
        ..Workload::default()
    };
    let report = run(&host, &pool, &workload, None).expect("runs");
    assert!(
        report.sessions_started > 0,
        "feeds of a few batches run out"
    );
    let created = host.created.lock().expect("lock");
    let mut unique = created.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), created.len(), "ids are never reused");
}

/// The peer serializes each batch itself, as DSH's backend does: its files hold exactly the
/// generator's text (DSH's bytes), in both formats.
#[test]
fn jsonl_peer_writes_what_dsh_writes() {
    for format in [LogFormat::V0, LogFormat::V4] {
        jsonl_peer_writes_what_dsh_writes_in(format);
    }
}

fn jsonl_peer_writes_what_dsh_writes_in(format: LogFormat) {
    let dir = tempfile::tempdir().expect("temp dir");
    let peer = JsonlPeer::open(dir.path(), Durability::Sync, format).expect("opens");
    let pool = small_pool_in(4, format);
    let workload = Workload {
        sessions: 4,
        threads: 2,
        duration: Duration::from_millis(200),
        ..Workload::default()
    };
    let report = run(&peer, &pool, &workload, None).expect("runs");
    assert!(report.batches > 0);
    let mut batches = 0;
    let mut body_bytes = 0;
    for entry in std::fs::read_dir(dir.path()).expect("lists") {
        let entry = entry.expect("entry");
        let id = entry.file_name().to_string_lossy().into_owned();
        let bytes = std::fs::read_to_string(peer.log_path(&id)).expect("a session.jsonl");
        let names: Vec<_> = std::fs::read_dir(entry.path())
            .expect("lists")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, ["session.jsonl"], "temp file removed");
        // Which feed: the one whose header, renamed, starts this file.
        let feed = (0..pool.len())
            .map(|k| pool.feed(k))
            .find(|f| bytes.starts_with(&format!("{}\n", f.header_line_for(&id))))
            .expect("file starts with a feed's header under its own id");
        let mut want = format!("{}\n", feed.header_line_for(&id));
        let body_start = want.len();
        for batch in &feed.batches {
            if want.len() >= bytes.len() {
                break;
            }
            want.push_str(&batch.text);
            batches += 1;
        }
        assert_eq!(bytes, want, "session {id}: header + batch texts");
        body_bytes += (want.len() - body_start) as u64;
    }
    assert_eq!(report.batches, batches, "batches acked = batches on disk");
    assert_eq!(report.bytes, body_bytes);
}

fn report(system: &'static str, batches: u64) -> Report {
    let mut latency = Histogram::default();
    latency.record(Duration::from_millis(2));
    Report {
        system: system.to_owned(),
        batches,
        events: batches * 10,
        bytes: batches * 1000,
        sessions_started: 0,
        wall: Duration::from_secs(2),
        cpu: None,
        server_cpu: None,
        feed_cpu: Duration::ZERO,
        latency,
        device_writes: None,
    }
}

#[test]
fn ratios_need_sessionlog_and_divide_batch_rates() {
    let pool = small_pool(1);
    let workload = Workload::default();
    let peers = [report("jsonl", 100), report("sqlite", 50)];
    let o = output::figures(&workload, Durability::Sync, &pool, None, &peers);
    assert_eq!(o.get("ratios"), Some(&sessionlog_codec::json::Value::Null));
    assert!(o.get("note").is_some());
    assert!(
        output::table(&workload, Durability::Sync, &pool, None, &peers)
            .contains(output::NO_SESSIONLOG)
    );

    let all = [
        report("sessionlog", 400),
        report("jsonl", 100),
        report("sqlite", 50),
    ];
    let ratios = output::ratios(&all).expect("sessionlog measured");
    assert_eq!(ratios.get("vs_jsonl").and_then(|v| v.as_f64()), Some(4.0));
    assert_eq!(ratios.get("vs_sqlite").and_then(|v| v.as_f64()), Some(8.0));
    let o = output::figures(&workload, Durability::Sync, &pool, None, &all);
    assert!(o.get("note").is_none());
    let jsonl = o
        .get("systems")
        .and_then(|s| s.as_object())
        .and_then(|s| s.get("jsonl"))
        .and_then(|s| s.as_object())
        .expect("per-system figures");
    assert_eq!(
        jsonl.get("batches_per_s").and_then(|v| v.as_f64()),
        Some(50.0)
    );
    assert_eq!(
        jsonl.get("cpu_seconds"),
        Some(&sessionlog_codec::json::Value::Null)
    );
}

#[test]
fn cpu_and_device_writes_are_per_durable_batch() {
    let pool = small_pool(1);
    let workload = Workload::default();
    let measured = |system, batches, cpu_ms, feed_ms, writes| Report {
        cpu: Some(Duration::from_millis(cpu_ms)),
        feed_cpu: Duration::from_millis(feed_ms),
        device_writes: Some(writes),
        ..report(system, batches)
    };
    let all = [
        measured("sessionlog", 400, 40, 20, 100),
        measured("jsonl", 100, 30, 5, 300),
        Report {
            server_cpu: Some(Duration::from_millis(50)),
            ..measured("fleet", 200, 30, 10, 100)
        },
    ];
    assert_eq!(all[2].server_cpu_us_per_batch(), Some(250.0));
    assert_eq!(all[0].server_cpu_us_per_batch(), None);
    assert_eq!(all[0].cpu_us_per_batch(), Some(100.0));
    assert_eq!(all[0].feed_cpu_us_per_batch(), 50.0);
    assert_eq!(all[0].store_cpu_us_per_batch(), Some(50.0));
    assert_eq!(all[0].cpu_us_per_event(), Some(10.0));
    assert_eq!(all[1].device_writes_per_batch(), Some(3.0));
    assert_eq!(all[1].device_writes_per_s(), Some(150.0));
    let ratios = output::ratios(&all).expect("sessionlog measured");
    assert_eq!(
        ratios.get("cpu_vs_jsonl").and_then(|v| v.as_f64()),
        Some(3.0)
    );
    assert_eq!(
        ratios.get("store_cpu_vs_jsonl").and_then(|v| v.as_f64()),
        Some(5.0)
    );
    let disk = output::DiskModel {
        device: "254:0".into(),
        cgroup: "v1",
        write_iops: Some(3000),
    };
    let o = output::figures(&workload, Durability::Sync, &pool, Some(&disk), &all);
    let iops = o
        .get("disk")
        .and_then(|d| d.as_object())
        .and_then(|d| d.get("write_iops"))
        .and_then(|v| v.as_f64());
    assert_eq!(iops, Some(3000.0));
    let server = o
        .get("systems")
        .and_then(|s| s.as_object())
        .and_then(|s| s.get("fleet"))
        .and_then(|f| f.as_object())
        .and_then(|f| f.get("server_cpu_us_per_batch"))
        .and_then(|v| v.as_f64());
    assert_eq!(server, Some(250.0));
    let table = output::table(&workload, Durability::Sync, &pool, Some(&disk), &all);
    assert!(
        table.contains("fleet: its server processes used 250.0 µs of CPU per batch"),
        "{table}"
    );
    assert!(table.contains("limited to 3000 write IOPS"), "{table}");
    assert!(table.contains("3.00"), "{table}");
    assert!(
        table.contains("vs_jsonl: 5.00x less CPU per batch beyond the host's feed"),
        "{table}"
    );
}

/// Each fleet is compared with the straightforward PostgreSQL store and with the embedded
/// store, fleet over peer; the table prints the same.
#[test]
fn fleet_ratios_divide_the_fleets_rate_by_each_peers() {
    let pool = small_pool(1);
    let workload = Workload::default();
    let all = [
        report("sessionlog", 400),
        report("fleet_h1", 200),
        report("fleet_h4", 300),
        report("pg_rows", 50),
    ];
    let ratios = output::ratios(&all).expect("sessionlog measured");
    let ratio = |k: &str| ratios.get(k).and_then(|v| v.as_f64());
    assert_eq!(ratio("fleet_h1_vs_pg_rows"), Some(4.0));
    assert_eq!(ratio("fleet_h1_vs_embedded"), Some(0.5));
    assert_eq!(ratio("fleet_h4_vs_pg_rows"), Some(6.0));
    assert_eq!(ratio("fleet_h4_vs_embedded"), Some(0.75));
    assert_eq!(ratio("vs_fleet_h4"), Some(400.0 / 300.0));
    let table = output::table(&workload, Durability::Sync, &pool, None, &all);
    assert!(
        table.contains("\nfleet_h4_vs_pg_rows: 6.00x batches/s\n"),
        "{table}"
    );
    let without_peer = output::ratios(&all[..3]).expect("sessionlog measured");
    assert!(without_peer.get("fleet_h1_vs_pg_rows").is_none());
    assert!(without_peer.get("fleet_h1_vs_embedded").is_some());
}

/// Over several rounds each ratio is taken within its round and the median of those is
/// reported (here 4, 2 and 8 → 4, while the medians of the raw rates would give 300 / 100 = 3),
/// every figure is its median, and every round is kept.
#[test]
fn rounds_report_medians_of_same_round_ratios() {
    let pool = small_pool(1);
    let workload = Workload::default();
    let rounds = [
        vec![report("sessionlog", 400), report("jsonl", 100)],
        vec![report("sessionlog", 300), report("jsonl", 150)],
        vec![report("sessionlog", 200), report("jsonl", 25)],
    ];
    let o = output::figures_over_rounds(&workload, Durability::Sync, &pool, None, &rounds);
    let number = |section: &str, path: &[&str]| {
        let mut v = o.get(section);
        for key in path {
            v = v.and_then(|v| v.as_object()).and_then(|o| o.get(key));
        }
        v.and_then(|v| v.as_f64())
    };
    assert_eq!(number("ratios", &["vs_jsonl"]), Some(4.0));
    assert_eq!(
        number("systems", &["sessionlog", "batches_per_s"]),
        Some(150.0)
    );
    assert_eq!(number("systems", &["jsonl", "batches_per_s"]), Some(50.0));
    let kept = o.get("rounds").and_then(|r| r.as_array()).expect("rounds");
    assert_eq!(kept.len(), 3);
    let one = output::figures_over_rounds(&workload, Durability::Sync, &pool, None, &rounds[..1]);
    assert!(one.get("rounds").is_none(), "one round prints as before");
    let table = output::table_over_rounds(&workload, Durability::Sync, &pool, None, &rounds);
    assert!(table.contains("round 3/3"), "{table}");
    assert!(
        table.contains("sessionlog vs_jsonl: 4.00x batches/s (median of 3 rounds)"),
        "{table}"
    );
}
