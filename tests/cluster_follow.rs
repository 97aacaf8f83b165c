//! Following a session from a host that does not own it, on a real PostgreSQL (a throwaway
//! cluster started here): host C follows a session while host A appends to it and host B takes
//! it over and appends on; C gets every event once, in order, from the first on, equal line for
//! line to what `events` reads on the last owner at the end, each batch soon after its commit
//! (woken by PostgreSQL's `LISTEN/NOTIFY`, well inside the poll that backs it up). Needs
//! PostgreSQL 15's server binaries, as `cluster.rs` does.

use std::path::Path;
use std::time::{Duration, Instant};

use sessionlog::codec::json::{stringify, Value};
use sessionlog::engine::{AppendItem, SourceEncoding};
use sessionlog_cluster::{Config, Fleet, FleetOptions, FLEET_POLL};

use crate::cluster::{fleet_database, header, host_url, prompt};

fn join(pg: &sessionlog_harness::postgres::TempPostgres, dir: &Path, host: &str) -> Fleet {
    let config = Config::parse(&host_url(pg, host)).expect("url");
    Fleet::open(dir.join(host), config, FleetOptions::new(host)).expect("join the fleet")
}

/// Append events `at..at + n` to `id` on `fleet`.
fn append(fleet: &Fleet, id: &str, at: u64, n: u64) {
    let events = (at..at + n).map(prompt).collect();
    fleet
        .append_many(vec![AppendItem::new(id, Some(at), events)])
        .pop()
        .expect("an outcome")
        .expect("append");
}

/// Every event `fleet`'s store holds of `id`, as `sessionlog events` prints them.
fn events_text(fleet: &Fleet, id: &str) -> Vec<String> {
    let mut out = Vec::new();
    fleet
        .store()
        .events(id, 0, None, &mut |seq, e| {
            out.push(format!("{seq} {}", stringify(e)));
            Ok(())
        })
        .expect("events");
    out
}

#[test]
fn a_host_follows_a_session_across_a_takeover_event_for_event() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let (a, b, c) = (
        join(&pg, dir.path(), "host-a"),
        join(&pg, dir.path(), "host-b"),
        join(&pg, dir.path(), "host-c"),
    );
    let id = "followed";
    let created = a.append_many(vec![AppendItem::new(
        id,
        Some(0),
        vec![prompt(0), prompt(1)],
    )
    .creating(header(id), SourceEncoding::Jsonl)]);
    assert!(created.iter().all(Result::is_ok), "{created:?}");
    let (batches, per_batch) = (24u64, 3u64);
    let total = 2 + batches * per_batch;
    let mut sub = c.subscribe(id, 0).expect("follow from host-c");
    let (got, latencies) = std::thread::scope(|scope| {
        let follower = scope.spawn(|| {
            let mut got: Vec<(u64, Value)> = Vec::new();
            let mut seen = Vec::new();
            let give_up = Instant::now() + Duration::from_secs(120);
            while (got.len() as u64) < total && Instant::now() < give_up {
                if let Some(e) = sub.next_within(&c, Duration::from_secs(5)).expect("next") {
                    got.push(e);
                    seen.push(Instant::now());
                }
            }
            (got, seen)
        });
        let mut committed = Vec::new();
        for n in 0..batches {
            let at = 2 + n * per_batch;
            if n == batches / 2 {
                b.acquire(id, true).expect("host-b takes it over");
            }
            let owner = if n < batches / 2 { &a } else { &b };
            append(owner, id, at, per_batch);
            committed.push((at + per_batch - 1, Instant::now()));
            // Paced, so each batch is announced alone.
            std::thread::sleep(Duration::from_millis(20));
        }
        let (got, seen) = follower.join().expect("follower");
        let latencies: Vec<Duration> = committed
            .iter()
            .filter_map(|&(last, at)| {
                let k = usize::try_from(last).ok()?;
                Some(seen.get(k)?.saturating_duration_since(at))
            })
            .collect();
        (got, latencies)
    });
    let followed: Vec<String> = got
        .iter()
        .map(|(seq, e)| format!("{seq} {}", stringify(e)))
        .collect();
    assert_eq!(
        followed,
        events_text(&b, id),
        "host-c's tail against host-b's events"
    );
    assert_eq!(followed.len() as u64, total);
    let mut sorted = latencies.clone();
    sorted.sort();
    let median = sorted[sorted.len() / 2];
    eprintln!(
        "cross-host commit-to-follower: p50 {:?}, max {:?} over {} batches",
        median,
        sorted.last().copied().unwrap_or_default(),
        sorted.len()
    );
    assert!(
        median < FLEET_POLL / 4,
        "half the batches reached host-c later than {median:?} after their commit: woken by the \
         poll ({FLEET_POLL:?}), not by the commit's notification"
    );
}
