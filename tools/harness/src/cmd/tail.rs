//! `sessionlog-harness bench tail`: what live subscribers cost a host, and how soon they see a
//! commit. `threads` host threads append to `sessions` sessions for `seconds` (each thread's
//! sessions' next batches in one `append_many` per round, as the hosting workload submits them),
//! once with no subscriber and once per subscriber count, in the same run on fresh stores. Each
//! subscriber follows one session (subscriber j: session j mod `sessions`); they are served by
//! `watchers` threads with one [`Watch`] each (subscriber j on thread j mod `watchers`), as a
//! host serving many followers would, not by a thread each.
//!
//! Commit-to-observer latency is taken per batch, from the instant its `append_many` returned
//! (its acknowledgement) to the instant the subscriber holds its last event; a subscriber woken
//! before the appender got the acknowledgement counts 0. Throughput is batches per second, and
//! the ratio is each run's over the run without subscribers (1.0: subscribers cost nothing).
//! Each run also says how many of the events its subscribers got came from their sessions'
//! rings of committed events and how many were read from the store.
//!
//! With `--fleet-sessions N`, a last run measures the same latency across hosts of a fleet
//! (`tail_fleet.rs`): its p50/p99, and the ratio of the 50 ms goal to its p99 (at least 1: met).

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context;
use sessionlog_codec::json::{Object, Value};
use sessionlog_engine::{AppendItem, Options, Store, SubscriptionStats, Watch};
use sessionlog_harness::hosting::Histogram;
use sessionlog_tools_common::output::json_line;

use super::tail_fleet;
use super::tail_workload::{creations, lock, prompt, OBSERVER_WAIT, PER_BATCH};

/// The fleet's cross-host commit-to-observer p99 this benchmark holds itself to.
const FLEET_P99_GOAL: Duration = Duration::from_millis(50);

/// One measured run.
struct Run {
    subscribers: usize,
    batches: u64,
    seconds: f64,
    latency: Histogram,
    /// Where the subscribers' events came from: their sessions' rings, the store.
    taken: SubscriptionStats,
}

impl Run {
    fn batches_per_s(&self) -> f64 {
        self.batches as f64 / self.seconds.max(f64::EPSILON)
    }
}

/// What `bench tail` runs (its command line's figures; see the module docs).
pub struct Workload<'a> {
    pub sessions: usize,
    pub threads: usize,
    pub subscribers: &'a [usize],
    pub watchers: usize,
    pub seconds: f64,
    /// Sessions of the fleet run; 0: none.
    pub fleet_sessions: usize,
}

/// Run the benchmark and print its figures (see the module docs).
pub fn run(workload: &Workload<'_>, options: &Options, as_json: bool) -> anyhow::Result<ExitCode> {
    let &Workload {
        sessions,
        threads,
        subscribers,
        watchers,
        seconds,
        fleet_sessions,
    } = workload;
    anyhow::ensure!(
        sessions > 0 && threads > 0 && watchers > 0 && seconds > 0.0,
        "bench tail needs sessions, threads, watchers and seconds above 0"
    );
    let duration = Duration::from_secs_f64(seconds);
    let mut runs = Vec::new();
    for &count in std::iter::once(&0).chain(subscribers) {
        eprintln!("bench tail: {count} subscribers, {sessions} sessions, {threads} threads");
        runs.push(measure(
            sessions, threads, count, watchers, duration, options,
        )?);
    }
    let fleet = match fleet_sessions {
        0 => None,
        n => {
            eprintln!("bench tail: across the hosts of a fleet, {n} sessions");
            Some(tail_fleet::measure(n, duration, options)?)
        }
    };
    let base = runs.first().map_or(0.0, Run::batches_per_s);
    let mut out = std::io::stdout().lock();
    if as_json {
        let mut ratios = Object::new();
        let figures: Vec<Value> = runs
            .iter()
            .map(|r| {
                Value::Object(
                    Object::new()
                        .with("subscribers", r.subscribers as i64)
                        .with("batches", r.batches as i64)
                        .with("seconds", r.seconds)
                        .with("batches_per_s", r.batches_per_s())
                        .with("observed_batches", r.latency.count() as i64)
                        .with("latency_p50_us", micros(r.latency.quantile(0.5)))
                        .with("latency_p99_us", micros(r.latency.quantile(0.99)))
                        .with("events_from_memory", r.taken.events_from_memory as i64)
                        .with("events_from_store", r.taken.events_from_store as i64),
                )
            })
            .collect();
        for r in runs.iter().skip(1) {
            ratios.insert(
                format!("throughput_{}_subscribers_over_none", r.subscribers).into(),
                Value::from(r.batches_per_s() / base.max(f64::EPSILON)),
            );
        }
        let mut report = Object::new()
            .with("workload", "tail")
            .with("sessions", sessions as i64)
            .with("threads", threads as i64)
            .with("watchers", watchers as i64)
            .with("events_per_batch", PER_BATCH as i64)
            .with("runs", Value::Array(figures));
        if let Some(f) = &fleet {
            ratios.insert(
                "fleet_p99_goal_over_measured".into(),
                Value::from(
                    FLEET_P99_GOAL.as_secs_f64()
                        / f.latency.quantile(0.99).as_secs_f64().max(f64::EPSILON),
                ),
            );
            report.insert(
                "fleet".into(),
                Value::Object(
                    Object::new()
                        .with("sessions", f.sessions as i64)
                        .with("batches", f.batches as i64)
                        .with("seconds", f.seconds)
                        .with("observed_batches", f.latency.count() as i64)
                        .with("latency_p50_us", micros(f.latency.quantile(0.5)))
                        .with("latency_p99_us", micros(f.latency.quantile(0.99))),
                ),
            );
        }
        json_line(&mut out, report.with("ratios", Value::Object(ratios)))?;
    } else {
        for r in &runs {
            writeln!(
                out,
                "{:>5} subscribers: {:>9.0} batches/s ({:.2}x none), commit-to-observer p50 {:.0} us, p99 {:.0} us ({} batches observed)",
                r.subscribers,
                r.batches_per_s(),
                r.batches_per_s() / base.max(f64::EPSILON),
                micros(r.latency.quantile(0.5)),
                micros(r.latency.quantile(0.99)),
                r.latency.count()
            )?;
        }
        if let Some(f) = &fleet {
            writeln!(
                out,
                "fleet, host a to host c: {} batches to {} sessions, commit-to-observer p50 {:.0} us, p99 {:.0} us ({} batches observed)",
                f.batches,
                f.sessions,
                micros(f.latency.quantile(0.5)),
                micros(f.latency.quantile(0.99)),
                f.latency.count()
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// One run on a fresh store: the appenders for `duration`, `subscribers` followers beside them.
fn measure(
    sessions: usize,
    threads: usize,
    subscribers: usize,
    watchers: usize,
    duration: Duration,
    options: &Options,
) -> anyhow::Result<Run> {
    let dir = tempfile::tempdir().context("a scratch directory")?;
    let store = Store::open(dir.path(), options.clone())?;
    let ids: Vec<String> = (0..sessions).map(|i| format!("tail-{i:05}")).collect();
    for r in store.append_many(creations(&ids)) {
        r?;
    }
    let event = prompt()?;
    // For each followed session, when each batch (by the seq after it) was acknowledged.
    let followed: Vec<bool> = (0..sessions).map(|s| s < subscribers).collect();
    let acks: Vec<Mutex<HashMap<u64, Instant>>> = (0..sessions).map(|_| Mutex::default()).collect();
    let stop = AtomicBool::new(false);
    let (store, ids, acks, stop, event, followed) = (&store, &ids, &acks, &stop, &event, &followed);
    std::thread::scope(|scope| -> anyhow::Result<Run> {
        let observers: Vec<_> = (0..watchers.min(subscribers))
            .map(|w| {
                let followed: Vec<usize> = (w..subscribers)
                    .step_by(watchers)
                    .map(|j| j % sessions)
                    .collect();
                scope.spawn(move || observe(store, ids, &followed, acks, stop))
            })
            .collect();
        let started = Instant::now();
        let appenders: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || -> anyhow::Result<u64> {
                    let mine: Vec<usize> = (t..sessions).step_by(threads).collect();
                    let mut next = vec![0u64; mine.len()];
                    let mut batches = 0;
                    while started.elapsed() < duration {
                        let items = mine
                            .iter()
                            .zip(&next)
                            .map(|(&s, &n)| {
                                let events = vec![event.clone(); PER_BATCH as usize];
                                AppendItem::new(&ids[s], Some(n), events)
                            })
                            .collect();
                        let results = store.append_many(items);
                        let acked = Instant::now();
                        for ((&s, n), r) in mine.iter().zip(next.iter_mut()).zip(results) {
                            r?;
                            *n += PER_BATCH;
                            batches += 1;
                            if followed[s] {
                                lock(&acks[s]).insert(*n, acked);
                            }
                        }
                    }
                    Ok(batches)
                })
            })
            .collect();
        let mut batches = 0;
        for a in appenders {
            batches += a
                .join()
                .map_err(|_| anyhow::anyhow!("an appender panicked"))??;
        }
        let seconds = started.elapsed().as_secs_f64();
        stop.store(true, Ordering::SeqCst);
        let mut latency = Histogram::default();
        for o in observers {
            latency.merge(
                &o.join()
                    .map_err(|_| anyhow::anyhow!("a subscribers' thread panicked"))??,
            );
        }
        Ok(Run {
            subscribers,
            batches,
            seconds,
            latency,
            taken: store.subscription_stats(),
        })
    })
}

/// Follow the sessions `followed` names (one subscription each, one watch) until `stop`: the
/// latency of each batch whose last event a subscription got.
fn observe(
    store: &Store,
    ids: &[String],
    followed: &[usize],
    acks: &[Mutex<HashMap<u64, Instant>>],
    stop: &AtomicBool,
) -> anyhow::Result<Histogram> {
    let mut watch = Watch::new();
    for &s in followed {
        watch.add(store, &ids[s], 0)?;
    }
    let mut latency = Histogram::default();
    while !stop.load(Ordering::SeqCst) {
        let Some((key, seq, _)) = watch.next_within(store, OBSERVER_WAIT)? else {
            continue;
        };
        let acks = &acks[followed[key.0]];
        if (seq + 1) % PER_BATCH != 0 {
            continue;
        }
        let seen = Instant::now();
        let acked = lock(acks).remove(&(seq + 1));
        latency.record(acked.map_or(Duration::ZERO, |a| seen.saturating_duration_since(a)));
    }
    Ok(latency)
}
