//! Following a session from a host that does not own it, on a real PostgreSQL (a throwaway
//! cluster started here): host C follows a session while host A appends to it and host B takes
//! it over and appends on; C gets every event once, in order, from the first on, equal line for
//! line to what `events` reads on the last owner at the end, each batch soon after its commit
//! (woken by PostgreSQL's `LISTEN/NOTIFY`, well inside the poll that backs it up). The same
//! with the Patroni leader's node killed once during the appends (C's output then equal to what
//! `sessionlog events` prints from a fourth, empty host), and `sessionlog --cluster URL tail ID
//! --from 0 --follow` run as a child process while a fleet host appends prints exactly the lines
//! `sessionlog events ID` prints. Needs PostgreSQL 15's server binaries, as `cluster.rs` does;
//! the failover test Patroni and etcd, as `cluster_failover.rs` does.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sessionlog::codec::json::{stringify, write_value, Value};
use sessionlog::engine::{AppendItem, SourceEncoding};
use sessionlog_cluster::{schema, Config, Fleet, FleetOptions, FleetSubscription, FLEET_POLL};
use sessionlog_harness::patroni::PatroniCluster;

use crate::cluster::{fleet_database, header, host_url, prompt};
use crate::objects::cli;
use crate::tail::Tail;

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
    create(&a, id);
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

/// Session `id` created on `fleet` with events 0 and 1.
fn create(fleet: &Fleet, id: &str) {
    let created = fleet.append_many(vec![AppendItem::new(
        id,
        Some(0),
        vec![prompt(0), prompt(1)],
    )
    .creating(header(id), SourceEncoding::Jsonl)]);
    assert!(created.iter().all(Result::is_ok), "{created:?}");
}

/// One event as `sessionlog events` and `tail` print it.
fn line(event: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, event);
    out
}

/// Follow `sub` on `fleet` until `total` events came (or `limit` passed): each as `tail`
/// prints it.
fn follow(sub: &mut FleetSubscription, fleet: &Fleet, total: u64, limit: Duration) -> Vec<String> {
    let mut got = Vec::new();
    let give_up = Instant::now() + limit;
    while (got.len() as u64) < total && Instant::now() < give_up {
        match sub.next_within(fleet, Duration::from_secs(5)) {
            Ok(Some((_, e))) => got.push(line(&e)),
            Ok(None) => {}
            Err(e) => panic!("host-c's tail failed after {} events: {e}", got.len()),
        }
    }
    got
}

/// `sessionlog --db DIR/HOST --cluster URL --host HOST ARGS…`.
fn cli_command(dir: &Path, url: &str, host: &str, args: &[&str]) -> Command {
    let mut command = Command::new(cli());
    command
        .arg("--db")
        .arg(dir.join(host))
        .args(["--cluster", url, "--host", host])
        .args(args);
    command
}

/// [`cli_command`], which must succeed: its lines.
fn cli_lines(dir: &Path, url: &str, host: &str, args: &[&str]) -> Vec<String> {
    let out = cli_command(dir, url, host, args)
        .output()
        .expect("run sessionlog");
    assert!(
        out.status.success(),
        "sessionlog {} failed:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_host_follows_a_session_across_a_takeover_and_a_failover_of_the_database() {
    if !crate::fixtures::patroni_installed() {
        return;
    }
    let mut cluster = PatroniCluster::start(2).expect("start Patroni");
    let admin = Config::parse(&cluster.url("postgres", "postgres")).expect("url");
    let mut client = admin.connect("creating the schema").expect("connect");
    client
        .batch_execute("CREATE ROLE host LOGIN")
        .expect("the hosts' role");
    schema::init(&mut client, &["host".to_owned()]).expect("schema");
    let hosts = ["host-a", "host-b", "host-c", "host-d"];
    for host in hosts {
        schema::add_host(&mut client, host).expect("the host's login role");
    }
    drop(client);
    let dir = tempfile::tempdir().expect("temp dir");
    let join = |host: &str| {
        let config = Config::parse(&cluster.url(host, "postgres")).expect("url");
        Fleet::open(dir.path().join(host), config, FleetOptions::new(host)).expect("join")
    };
    let (a, b, c) = (join("host-a"), join("host-b"), join("host-c"));
    let id = "followed";
    create(&a, id);
    let (batches, per_batch) = (40u64, 3u64);
    let total = 2 + batches * per_batch;
    let mut sub = c.subscribe(id, 0).expect("follow from host-c");
    let appended = AtomicU64::new(0);
    let (followed, killed) = std::thread::scope(|scope| {
        let follower = scope.spawn(|| follow(&mut sub, &c, total, Duration::from_secs(300)));
        let appender = scope.spawn(|| {
            for n in 0..batches {
                if n == batches / 2 {
                    b.acquire(id, true).expect("host-b takes it over");
                }
                let owner = if n < batches / 2 { &a } else { &b };
                append(owner, id, 2 + n * per_batch, per_batch);
                appended.store(n + 1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        // The leader's node killed while host-a appends; restarted as the standby once the
        // other node leads (with two nodes and `synchronous_mode_strict`, writes wait for it).
        while appended.load(Ordering::SeqCst) < batches / 4 {
            assert!(!appender.is_finished(), "the appender stopped early");
            std::thread::sleep(Duration::from_millis(5));
        }
        let leader = cluster.leader().expect("a leader");
        let kill = cluster.kill(leader).expect("kill the leader's node");
        let at = appended.load(Ordering::SeqCst);
        cluster.wait_new_leader(leader).expect("a new leader");
        cluster.restart(leader).expect("restart");
        cluster.wait_rejoined(leader).expect("rejoined");
        eprintln!(
            "leader node {leader} killed after batch {at} of {batches}; back {:?} later",
            kill.elapsed()
        );
        appender.join().expect("appender");
        (follower.join().expect("follower"), at)
    });
    assert!(
        killed < batches / 2,
        "the kill came after host-a's appends ({killed} of {batches}): nothing was tested"
    );
    let url = cluster.url("host-d", "postgres");
    let events = cli_lines(dir.path(), &url, "host-d", &["events", id]);
    assert_eq!(events.len() as u64, total);
    assert_eq!(
        followed, events,
        "host-c's tail against `sessionlog events`"
    );
}

#[test]
fn the_cli_tails_a_session_a_fleet_host_appends() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let a = join(&pg, dir.path(), "host-a");
    let id = "cli-followed";
    create(&a, id);
    let url = host_url(&pg, "host-c");
    let mut tail = Tail::spawn(&mut cli_command(
        dir.path(),
        &url,
        "host-c",
        &["tail", id, "--from", "0", "--follow"],
    ));
    let mut printed = tail.take(2);
    let mut next = 2;
    for n in 0..10 {
        let count = 1 + n % 3;
        append(&a, id, next, count);
        next += count;
        // Each batch printed before the next is appended, not all at the end.
        printed.extend(tail.take(count as usize));
    }
    drop(tail);
    let events = cli_lines(
        dir.path(),
        &host_url(&pg, "host-d"),
        "host-d",
        &["events", id],
    );
    assert_eq!(events.len() as u64, next);
    assert_eq!(printed, events);
    // Without --follow, what is stored, then the end.
    let stored = cli_lines(dir.path(), &url, "host-c", &["tail", id, "--from", "20"]);
    assert_eq!(stored, events[20..]);
    // Bad input as on a store of its own: a start past the end said so, an unknown session named.
    let past = format!(
        "session \"{id}\" ends at seq {next} (its next event takes that seq): --from 30 is past its end"
    );
    for (args, expected) in [
        ([id, "--from", "30"], past.as_str()),
        (["nope", "--from", "0"], "nope"),
    ] {
        let out = cli_command(
            dir.path(),
            &url,
            "host-c",
            &[&["tail"][..], &args[..]].concat(),
        )
        .output()
        .expect("run sessionlog");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(expected),
            "tail {}: {stderr}",
            args.join(" ")
        );
    }
}
