//! The hosting driver: `threads` threads, each owning the slots `k` with `k % threads == t`,
//! submitting in rounds until the run's time is up.
//!
//! A round takes the next batch of every slot the thread owns (all are ready: the model is a
//! saturated host), hands them to [`Host::append`] together, and waits until it returns; each
//! batch's latency is measured from the round's submission to its acknowledgement. So every
//! session has exactly one batch in flight and submits its next one only after the previous
//! was acknowledged, as DSH's per-session write coordinator does. After `duration`, threads
//! stop submitting; the rounds in flight finish and count. A `warmup` before that runs the same
//! way and counts nothing.
//!
//! Counted: batches and events acknowledged, their JSONL bytes, sessions started during the
//! run, wall time (first submission to last acknowledgement), process CPU time and the part of
//! it the host threads spent building the events they submitted (the feed: the host's work, the
//! same for every system), and, when the run is inside a [`DiskCgroup`], the device write
//! requests the process issued meanwhile.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};

use super::cpu::{process_cpu_time, thread_cpu_time};
use super::feeds::{session_id, FeedPool, MAX_SLOTS};
use super::histogram::Histogram;
use super::{Host, Item, SessionStart};
use crate::disk_cgroup::DiskCgroup;
use crate::gen::SessionFeed;

/// The shape of a hosting run.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Concurrent sessions (slots). Default: 100.
    pub sessions: usize,
    /// Host threads; slot `k` belongs to thread `k % threads`. Default: 8.
    pub threads: usize,
    /// How long threads keep submitting. Default: 10 s.
    pub duration: Duration,
    /// How long they submit before that, unmeasured: the system's steady state rather than
    /// its start (a WAL that is being reused, a peer's WAL past its first checkpoint).
    /// Default: none.
    pub warmup: Duration,
    /// The run's first slot: it hosts slots `first_slot..first_slot + sessions`. Session ids
    /// are per slot, so runs in several processes given disjoint slot ranges host distinct
    /// sessions. Default: 0.
    pub first_slot: usize,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            sessions: 100,
            threads: 8,
            duration: Duration::from_secs(10),
            warmup: Duration::ZERO,
            first_slot: 0,
        }
    }
}

impl Workload {
    /// Reject shapes the driver cannot run.
    pub fn validate(&self) -> anyhow::Result<()> {
        ensure!(self.sessions >= 1, "sessions must be at least 1");
        ensure!(
            self.first_slot.saturating_add(self.sessions) <= MAX_SLOTS,
            "slots must be at most {MAX_SLOTS}, got {} from slot {}",
            self.sessions,
            self.first_slot
        );
        ensure!(self.threads >= 1, "threads must be at least 1");
        ensure!(
            self.threads <= self.sessions,
            "threads ({}) must not exceed sessions ({}): a thread without a session idles",
            self.threads,
            self.sessions
        );
        Ok(())
    }
}

/// What one system did in a run.
#[derive(Clone, Debug)]
pub struct Report {
    /// The system ([`Host::name`], or a name its caller gave a run of several processes).
    pub system: String,
    /// Batches acknowledged durable.
    pub batches: u64,
    /// Logical events in them.
    pub events: u64,
    /// Their DSH JSONL bytes (what DSH's JSONL backend would append for them).
    pub bytes: u64,
    /// Sessions started inside the run (slots whose feed ran out); excludes the initial ones.
    pub sessions_started: u64,
    /// First submission to last acknowledgement.
    pub wall: Duration,
    /// Process CPU time used meanwhile (user + system), if known.
    pub cpu: Option<Duration>,
    /// CPU time the system's server processes used meanwhile ([`Host::server_cpu_time`]), for a
    /// system with a server.
    pub server_cpu: Option<Duration>,
    /// The host threads' CPU time building the submitted events ([`Item::built`]), part of
    /// `cpu`.
    pub feed_cpu: Duration,
    /// Per-batch latency, submission to durable acknowledgement.
    pub latency: Histogram,
    /// Device write requests issued meanwhile (the disk cgroup's count), if measured.
    pub device_writes: Option<u64>,
}

impl Report {
    /// Durable batches per second of wall time.
    pub fn batches_per_s(&self) -> f64 {
        self.batches as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// Durable events per second of wall time.
    pub fn events_per_s(&self) -> f64 {
        self.events as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// Process CPU microseconds per durable batch, if CPU time is known.
    pub fn cpu_us_per_batch(&self) -> Option<f64> {
        self.cpu
            .map(|c| c.as_secs_f64() * 1e6 / self.batches.max(1) as f64)
    }

    /// Microseconds of the system's server processes' CPU per durable batch, for a system with
    /// a server.
    pub fn server_cpu_us_per_batch(&self) -> Option<f64> {
        self.server_cpu
            .map(|c| c.as_secs_f64() * 1e6 / self.batches.max(1) as f64)
    }

    /// Microseconds of the host's feed per durable batch (part of [`Report::cpu_us_per_batch`]).
    pub fn feed_cpu_us_per_batch(&self) -> f64 {
        self.feed_cpu.as_secs_f64() * 1e6 / self.batches.max(1) as f64
    }

    /// Process CPU microseconds per durable batch beyond the host's feed: what the system under
    /// test spent, if CPU time is known.
    pub fn store_cpu_us_per_batch(&self) -> Option<f64> {
        self.cpu_us_per_batch()
            .map(|all| (all - self.feed_cpu_us_per_batch()).max(0.0))
    }

    /// Process CPU microseconds per durable event, if CPU time is known.
    pub fn cpu_us_per_event(&self) -> Option<f64> {
        self.cpu
            .map(|c| c.as_secs_f64() * 1e6 / self.events.max(1) as f64)
    }

    /// Device write requests per durable batch, if counted.
    pub fn device_writes_per_batch(&self) -> Option<f64> {
        self.device_writes
            .map(|w| w as f64 / self.batches.max(1) as f64)
    }

    /// Device write requests per second of wall time, if counted.
    pub fn device_writes_per_s(&self) -> Option<f64> {
        self.device_writes
            .map(|w| w as f64 / self.wall.as_secs_f64().max(1e-9))
    }
}

/// Per-thread tallies.
#[derive(Default)]
struct Tally {
    batches: u64,
    events: u64,
    bytes: u64,
    sessions_started: u64,
    feed_cpu: Duration,
    latency: Histogram,
}

/// One slot as its owning thread sees it.
struct Slot<'p> {
    slot: usize,
    feed: &'p SessionFeed,
    cycle: u64,
    id: String,
    /// Index of the next batch in `feed`.
    next: usize,
}

impl<'p> Slot<'p> {
    fn new(slot: usize, feed: &'p SessionFeed) -> Self {
        Slot {
            slot,
            feed,
            cycle: 0,
            id: session_id(feed, slot, 0),
            next: 0,
        }
    }

    fn create(&self, host: &dyn Host) -> anyhow::Result<()> {
        let header_line = self.feed.header_line_for(&self.id);
        let start = SessionStart {
            slot: self.slot,
            id: &self.id,
            header_line: &header_line,
        };
        host.create(&start)
            .with_context(|| format!("{}: creating session {}", host.name(), self.id))
    }

    /// Move to a fresh session if the feed is used up; returns whether it did.
    fn roll_over(&mut self, host: &dyn Host) -> anyhow::Result<bool> {
        if self.next < self.feed.batches.len() {
            return Ok(false);
        }
        self.cycle += 1;
        self.next = 0;
        self.id = session_id(self.feed, self.slot, self.cycle);
        self.create(host)?;
        Ok(true)
    }
}

/// Run `workload` against `host` with sessions from `pool`: [`prepare`], then
/// [`Prepared::measure`].
pub fn run(
    host: &dyn Host,
    pool: &FeedPool,
    workload: &Workload,
    disk: Option<&DiskCgroup>,
) -> anyhow::Result<Report> {
    prepare(host, pool, workload)?.measure(disk)
}

/// A run whose initial sessions are created and whose warmup is over: what is left is the
/// measured part.
pub struct Prepared<'h, 'p> {
    host: &'h dyn Host,
    per_thread: Vec<Vec<Slot<'p>>>,
    duration: Duration,
}

/// Create the initial sessions of `workload` on `host`, with feeds from `pool`, and run its
/// warmup. Stops early, with the error, if any append or create fails.
pub fn prepare<'h, 'p>(
    host: &'h dyn Host,
    pool: &'p FeedPool,
    workload: &Workload,
) -> anyhow::Result<Prepared<'h, 'p>> {
    workload.validate()?;
    let mut per_thread: Vec<Vec<Slot<'_>>> = (0..workload.threads).map(|_| Vec::new()).collect();
    for k in 0..workload.sessions {
        let at = workload.first_slot + k;
        let slot = Slot::new(at, pool.feed(at));
        slot.create(host)?;
        per_thread[k % workload.threads].push(slot);
    }
    if !workload.warmup.is_zero() {
        let failed = AtomicBool::new(false);
        phase(
            host,
            &mut per_thread,
            Instant::now() + workload.warmup,
            &failed,
        )
        .context("warming up")?;
    }
    Ok(Prepared {
        host,
        per_thread,
        duration: workload.duration,
    })
}

impl Prepared<'_, '_> {
    /// Run the measured part, from now. With `disk`, the device write requests meanwhile are
    /// read from it (the caller has put the process inside).
    pub fn measure(mut self, disk: Option<&DiskCgroup>) -> anyhow::Result<Report> {
        let host = self.host;
        let failed = AtomicBool::new(false);
        let writes_before = disk.map(DiskCgroup::write_requests).transpose()?;
        let cpu_before = process_cpu_time();
        let server_cpu_before = host.server_cpu_time();
        let start = Instant::now();
        let tallies = phase(host, &mut self.per_thread, start + self.duration, &failed);
        let wall = start.elapsed();
        let cpu = cpu_before
            .zip(process_cpu_time())
            .map(|(before, after)| after.saturating_sub(before));
        let server_cpu = server_cpu_before
            .zip(host.server_cpu_time())
            .map(|(before, after)| after.saturating_sub(before));
        let writes_after = disk.map(DiskCgroup::write_requests).transpose()?;
        let device_writes = writes_before
            .zip(writes_after)
            .map(|(before, after)| after.saturating_sub(before));
        let mut total = Tally::default();
        for t in tallies? {
            total.batches += t.batches;
            total.events += t.events;
            total.bytes += t.bytes;
            total.sessions_started += t.sessions_started;
            total.feed_cpu += t.feed_cpu;
            total.latency.merge(&t.latency);
        }
        Ok(Report {
            system: host.name().to_owned(),
            batches: total.batches,
            events: total.events,
            bytes: total.bytes,
            sessions_started: total.sessions_started,
            wall,
            cpu,
            server_cpu,
            feed_cpu: total.feed_cpu,
            latency: total.latency,
            device_writes,
        })
    }
}

/// Every thread drives its slots until `deadline`; their tallies, or the first error.
fn phase(
    host: &dyn Host,
    per_thread: &mut [Vec<Slot<'_>>],
    deadline: Instant,
    failed: &AtomicBool,
) -> anyhow::Result<Vec<Tally>> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = per_thread
            .iter_mut()
            .map(|slots| {
                scope.spawn(move || {
                    let result = drive(host, slots, deadline, failed);
                    if result.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    result
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a host thread panicked")))
            })
            .collect()
    })
}

/// One host thread: rounds over its slots until `deadline` (or another thread failed).
fn drive(
    host: &dyn Host,
    slots: &mut [Slot<'_>],
    deadline: Instant,
    failed: &AtomicBool,
) -> anyhow::Result<Tally> {
    let mut tally = Tally::default();
    let mut acked_at: Vec<Option<Instant>> = Vec::with_capacity(slots.len());
    while Instant::now() < deadline && !failed.load(Ordering::Relaxed) {
        for slot in slots.iter_mut() {
            tally.sessions_started += u64::from(slot.roll_over(host)?);
        }
        let building = thread_cpu_time();
        let items: Vec<Item<'_>> = slots
            .iter()
            .map(|s| Item::built(s.slot, &s.id, &s.feed.batches[s.next]))
            .collect();
        tally.feed_cpu += thread_cpu_time().saturating_sub(building);
        let count = items.len();
        acked_at.clear();
        acked_at.resize(count, None);
        let submitted = Instant::now();
        host.append(items, &mut |i| {
            if let Some(slot @ None) = acked_at.get_mut(i) {
                *slot = Some(Instant::now());
            }
        })
        .with_context(|| format!("{}: appending {count} batches", host.name()))?;
        let returned = Instant::now();
        for (slot, at) in slots.iter().zip(&acked_at) {
            let batch = &slot.feed.batches[slot.next];
            tally
                .latency
                .record(at.unwrap_or(returned).saturating_duration_since(submitted));
            tally.batches += 1;
            tally.events += batch.events.len() as u64;
            tally.bytes += batch.text.len() as u64;
        }
        for slot in slots.iter_mut() {
            slot.next += 1;
        }
    }
    Ok(tally)
}
