//! `sessionlog-harness bench tail --fleet`: how soon a host of a fleet sees a commit another host
//! made. On a throwaway PostgreSQL 15 (`fsync` on), host `a` appends batches to `sessions`
//! sessions in turn from one thread for the run's seconds, each batch committed to PostgreSQL
//! (the fleet's durability); host `c`, which holds none of them, follows each session through
//! [`Fleet::subscribe`] (woken by `LISTEN/NOTIFY`, the events caught up from PostgreSQL), one
//! thread per session. Latency per batch is taken, as the embedded runs take it, from the
//! instant host `a`'s append returned to the instant host `c` holds the batch's last event.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context;
use sessionlog_cluster::{Fleet, FleetOptions};
use sessionlog_engine::{AppendItem, Options};
use sessionlog_harness::gen::host_options;
use sessionlog_harness::hosting::fleet::fleet_postgres;
use sessionlog_harness::hosting::Histogram;

use super::tail_workload::{creations, lock, prompt, OBSERVER_WAIT, PER_BATCH};

/// What the fleet run measured.
pub struct FleetRun {
    pub sessions: usize,
    pub batches: u64,
    pub seconds: f64,
    pub latency: Histogram,
}

/// Run host `a`'s appends to `sessions` sessions for `duration` while host `c` follows them
/// (see the module docs).
pub fn measure(sessions: usize, duration: Duration, options: &Options) -> anyhow::Result<FleetRun> {
    let (_postgres, config) = fleet_postgres()?;
    let work = tempfile::tempdir().context("a scratch directory")?;
    let join = |host: &str| -> anyhow::Result<Fleet> {
        Ok(Fleet::open(
            work.path().join(host),
            config.clone(),
            FleetOptions {
                store: host_options(options.clone()),
                ..FleetOptions::new(host)
            },
        )?)
    };
    let (a, c) = (join("a")?, join("c")?);
    let ids: Vec<String> = (0..sessions).map(|i| format!("tail-fleet-{i}")).collect();
    for r in a.append_many(creations(&ids)) {
        r?;
    }
    let event = prompt()?;
    // Per session, when each batch (by the seq after it) was acknowledged on host `a`.
    let acks: Vec<Mutex<HashMap<u64, Instant>>> = (0..sessions).map(|_| Mutex::default()).collect();
    let stop = AtomicBool::new(false);
    let (a, c, ids, acks, stop, event) = (&a, &c, &ids, &acks, &stop, &event);
    std::thread::scope(|scope| -> anyhow::Result<FleetRun> {
        let observers: Vec<_> = (0..sessions)
            .map(|s| {
                let mut sub = c.subscribe(&ids[s], 0)?;
                Ok(scope.spawn(move || -> anyhow::Result<Histogram> {
                    let mut latency = Histogram::default();
                    while !stop.load(Ordering::SeqCst) {
                        let Some((seq, _)) = sub.next_within(c, OBSERVER_WAIT)? else {
                            continue;
                        };
                        if (seq + 1) % PER_BATCH != 0 {
                            continue;
                        }
                        let seen = Instant::now();
                        let acked = lock(&acks[s]).remove(&(seq + 1));
                        latency.record(
                            acked.map_or(Duration::ZERO, |t| seen.saturating_duration_since(t)),
                        );
                    }
                    Ok(latency)
                }))
            })
            .collect::<anyhow::Result<_>>()?;
        let started = Instant::now();
        let mut next = vec![0u64; sessions];
        let mut batches = 0;
        while started.elapsed() < duration {
            let s = batches as usize % sessions;
            let events = vec![event.clone(); PER_BATCH as usize];
            let item = AppendItem::new(&ids[s], Some(next[s]), events);
            for r in a.append_many(vec![item]) {
                r.with_context(|| format!("appending to {} on host a", ids[s]))?;
            }
            let acked = Instant::now();
            next[s] += PER_BATCH;
            lock(&acks[s]).insert(next[s], acked);
            batches += 1;
        }
        let seconds = started.elapsed().as_secs_f64();
        // The last batches reach host `c` within a wait or two.
        std::thread::sleep(OBSERVER_WAIT * 4);
        stop.store(true, Ordering::SeqCst);
        let mut latency = Histogram::default();
        for o in observers {
            latency.merge(
                &o.join()
                    .map_err(|_| anyhow::anyhow!("a follower on host c panicked"))??,
            );
        }
        Ok(FleetRun {
            sessions,
            batches,
            seconds,
            latency,
        })
    })
}
