//! The database-failover harness behind `sessionlog-harness stress --cluster` and the failover
//! test: a fleet host appends generated DSH sessions from several threads to a PostgreSQL that
//! Patroni keeps highly available ([`crate::patroni`]: a leader and a synchronous standby,
//! `synchronous_mode_strict`, optionally an asynchronous replica), reaching it through a
//! multi-host URL; meanwhile, cycle after cycle, the leader's node is killed (Patroni and
//! PostgreSQL, SIGKILL), the synchronous standby promoted, the killed node restarted until it
//! replicates again and the leader has a synchronous standby.
//!
//! Each cycle measures, from the kill: the standby's promotion, the killed node's return, and
//! the outage (the first acknowledgement of a batch first tried after
//! the kill). At the end, [`check`] compares PostgreSQL's rows with every acknowledgement, and
//! the host's store with PostgreSQL and the feeds.

pub mod check;
mod load;
mod sessions;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use sessionlog_cluster::{schema, Config, Fleet, FleetOptions};
use sessionlog_engine::Options;

use crate::gen::host_options;
use crate::patroni::PatroniCluster;
use check::{check_batches, check_store, read_postgres};
use load::{Ledger, Load};

/// The host's name, and the login role it connects as (a host acts only as its own role).
const ROLE: &str = "failover_host";
/// How long appends may stay stopped after a kill before the run fails.
const OUTAGE_LIMIT: Duration = Duration::from_secs(180);
/// How long past `steady` a cycle waits for the load's first acknowledgement on a healthy
/// cluster before it calls the run broken (a host on a busy machine may still be settling the
/// last failover's refused batches).
const STEADY_LIMIT: Duration = Duration::from_secs(30);

/// What the harness runs.
#[derive(Clone, Debug)]
pub struct FailoverOptions {
    /// Failovers. Default: 10.
    pub cycles: u64,
    /// Patroni nodes: 2 (a leader and its synchronous standby) or 3 (and an asynchronous
    /// replica, which becomes the synchronous standby when the old one is promoted, so writes
    /// need not wait for the killed node). Default: 2.
    pub nodes: usize,
    /// Writer threads on the host. Default: 4.
    pub threads: u64,
    /// Sessions each writer keeps open (one batch of each per group). Default: 4.
    pub sessions_per_thread: usize,
    /// Mean events per generated session. Default: 300.
    pub events_per_session: u64,
    /// Generator seed. Default: 7.
    pub seed: u64,
    /// How long the load runs on a healthy cluster before each kill, and after the last cycle.
    /// Default: 3 s.
    pub steady: Duration,
    /// The host's commit patience (`FleetOptions::commit_patience`). Shorter than a failover,
    /// appends are refused as unavailable during each one (some with their outcome unknown)
    /// and appended again: the path that must neither lose nor duplicate. Default: 5 s.
    pub commit_patience: Duration,
}

impl Default for FailoverOptions {
    fn default() -> Self {
        FailoverOptions {
            cycles: 10,
            nodes: 2,
            threads: 4,
            sessions_per_thread: 4,
            events_per_session: 300,
            seed: 7,
            steady: Duration::from_secs(3),
            commit_patience: Duration::from_secs(5),
        }
    }
}

/// What one failover measured, from the kill of the leader's node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CycleReport {
    /// The node killed.
    pub killed: usize,
    /// The node promoted.
    pub promoted_node: usize,
    /// Until the synchronous standby held the leader lock.
    pub promoted: Duration,
    /// Until the killed node, restarted once the standby led, replicated again and the leader
    /// had a synchronous standby (with two nodes, the killed one).
    pub rejoined: Duration,
    /// Until the first acknowledgement of a batch first tried after the kill.
    pub outage: Duration,
    /// Batches acknowledged so far in the run.
    pub acked: u64,
}

/// The run's totals and the check's findings (all zero in a run that returns).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FailoverReport {
    /// Every cycle, in order.
    pub cycles: Vec<CycleReport>,
    /// Batches the host acknowledged.
    pub acked_batches: u64,
    /// Acknowledged batches missing from PostgreSQL.
    pub lost: u64,
    /// Batches stored or acknowledged twice.
    pub duplicated: u64,
    /// Acknowledged batches PostgreSQL holds with other bytes at their seqs.
    pub unknown_acked: u64,
    /// Rows in PostgreSQL no acknowledgement names (refused as unavailable, committed, not
    /// appended again because the load stopped).
    pub unacknowledged: u64,
    /// Refusals the writers saw, by kind (`unavailable`, `stale`, `fenced`).
    pub refusals: BTreeMap<&'static str, u64>,
    /// Refusals as unavailable whose commit outcome stayed unknown (appended again).
    pub unknown_outcomes: u64,
    /// Sessions in PostgreSQL, each compared with the host's store and its feed.
    pub sessions: u64,
}

/// Run the harness (see the module docs) with the host's store in `dir`, calling `progress`
/// after each cycle. Fails with every finding when the check finds any.
pub fn run(
    opts: &FailoverOptions,
    dir: &Path,
    progress: &mut dyn FnMut(u64, &CycleReport),
) -> anyhow::Result<FailoverReport> {
    let mut cluster = PatroniCluster::start(opts.nodes)?;
    let admin = Config::parse(&cluster.url("postgres", "postgres"))?;
    let mut client = admin.connect("creating the fleet's schema")?;
    client.batch_execute(&format!("CREATE ROLE {ROLE} LOGIN"))?;
    schema::init(&mut client, &[ROLE.to_owned()])?;
    let fleet = Fleet::open(
        dir,
        Config::parse(&cluster.url(ROLE, "postgres"))?,
        FleetOptions {
            store: host_options(Options::default()),
            commit_patience: opts.commit_patience,
            ..FleetOptions::new(ROLE)
        },
    )?;
    let ledger = Ledger::default();
    let stop = AtomicBool::new(false);
    let load = Load {
        fleet: &fleet,
        ledger: &ledger,
        stop: &stop,
        threads: opts.threads.max(1),
        sessions_per_thread: opts.sessions_per_thread.max(1),
        events_per_session: opts.events_per_session,
        seed: opts.seed,
    };
    let mut report = FailoverReport::default();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let writers: Vec<_> = (0..load.threads)
            .map(|t| {
                let load = &load;
                scope.spawn(move || load.writer(t))
            })
            .collect();
        let cycled = cycles(opts, &mut cluster, &ledger, &writers, progress);
        stop.store(true, Ordering::SeqCst);
        if cycled.is_err() {
            // A commit waiting for a standby that never comes would hold its writer forever:
            // with the servers gone, it fails once the hook's patience runs out.
            cluster.kill_all();
        }
        // Every error is kept: a cycle's (which carries the cluster's logs) and each writer's.
        let failed: Vec<String> = writers
            .into_iter()
            .filter_map(|writer| match writer.join() {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(format!("a writer failed: {e:#}")),
                Err(_) => Some("a writer thread panicked".to_owned()),
            })
            .collect();
        match cycled {
            Ok(done) if failed.is_empty() => report.cycles = done,
            Ok(_) => bail!("{}", failed.join("\n")),
            Err(e) if failed.is_empty() => return Err(e),
            Err(e) => return Err(e.context(failed.join("\n"))),
        }
        Ok(())
    })?;
    let recorded = ledger.into_recorded();
    let mut client = admin.connect("reading the batches back")?;
    let held = read_postgres(&mut client)?;
    let found = check_batches(&recorded.acked, &held.stored);
    let mut problems = found.problems;
    problems.extend(
        recorded
            .stuck
            .into_iter()
            .map(|r| format!("refused as stale or fenced (the host is the only writer): {r}")),
    );
    report.sessions = check_store(
        fleet.store(),
        &held,
        (opts.events_per_session, opts.seed),
        &mut problems,
    )?;
    if !problems.is_empty() {
        bail!(
            "{} finding(s) after {} failovers: {}",
            problems.len(),
            report.cycles.len(),
            problems.join("; ")
        );
    }
    report.acked_batches = recorded.acked.len() as u64;
    report.lost = found.lost;
    report.duplicated = found.duplicated;
    report.unknown_acked = found.unknown_acked;
    report.unacknowledged = found.unacknowledged;
    report.refusals = recorded.refusals;
    report.unknown_outcomes = recorded.unknown_outcomes;
    Ok(report)
}

/// The failover cycles, while the writers run; stops early when a writer has failed.
fn cycles(
    opts: &FailoverOptions,
    cluster: &mut PatroniCluster,
    ledger: &Ledger,
    writers: &[std::thread::ScopedJoinHandle<'_, anyhow::Result<()>>],
    progress: &mut dyn FnMut(u64, &CycleReport),
) -> anyhow::Result<Vec<CycleReport>> {
    let writer_failed = || writers.iter().any(|w| w.is_finished());
    let mut done = Vec::new();
    for cycle in 0..opts.cycles {
        let before = ledger.acked_count();
        std::thread::sleep(opts.steady);
        let steady = Instant::now();
        while ledger.acked_count() == before {
            if writer_failed() {
                bail!("a writer stopped (its error follows)");
            }
            if steady.elapsed() > STEADY_LIMIT {
                bail!(
                    "cycle {cycle}: no batch was acknowledged in {:?} on a healthy cluster",
                    opts.steady + STEADY_LIMIT
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if writer_failed() {
            bail!("a writer stopped (its error follows)");
        }
        let killed = cluster
            .leader()
            .with_context(|| format!("cycle {cycle}: no node leads\n{}", cluster.logs()))?;
        let kill = cluster.kill(killed)?;
        ledger.watch(kill);
        let promoted_node = cluster.wait_new_leader(killed)?;
        let promoted = kill.elapsed();
        cluster.restart(killed)?;
        cluster.wait_rejoined(killed)?;
        let rejoined = kill.elapsed();
        let resumed = loop {
            if let Some(at) = ledger.resumed() {
                break at;
            }
            if writer_failed() {
                bail!("a writer stopped (its error follows)");
            }
            if kill.elapsed() > OUTAGE_LIMIT {
                bail!(
                    "cycle {cycle}: no append acknowledged {OUTAGE_LIMIT:?} after the kill\n{}",
                    cluster.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let c = CycleReport {
            killed,
            promoted_node,
            promoted,
            rejoined,
            outage: resumed.saturating_duration_since(kill),
            acked: ledger.acked_count() as u64,
        };
        progress(cycle, &c);
        done.push(c);
    }
    std::thread::sleep(opts.steady);
    Ok(done)
}
