//! The power-loss harness behind `sessionlog-harness stress --power-loss` and the power test: the
//! store lives on a LazyFS mount; each cycle a child process runs every writer at once, and at a
//! random moment the parent freezes it (SIGSTOP, every thread stopped), reads what it had
//! acknowledged, cuts power (`lazyfs::clear-cache`: every byte not fsynced is gone), SIGKILLs it,
//! reopens the store and checks it (see `model.rs`).
//!
//! Invariant checked after every cut: every acknowledged write is there (`lost` counts those
//! that are not), nothing is half-applied (a batch, a group commit, an import: all or nothing),
//! each session's export equals its acknowledged history byte for byte, live sessions' seqs are
//! contiguous and equal their feed's events, `verify` is clean.
//!
//! Module map: [`lazyfs`] (the mount and the cut), [`journal`] (what the child acknowledged,
//! outside the mount), [`image`] (a session as bytes), [`worker`] (the child), [`model`] (the
//! check); [`host`]: the same cut under an outside host process (DSH's Node host) that reports
//! its acknowledgements on standard output.

pub mod host;
pub mod image;
pub mod journal;
pub mod lazyfs;
pub mod model;
pub mod worker;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use sessionlog_engine::{Durability, Options};

use crate::gen::{session_feed, GenOptions, LogFormat, SessionFeed};
use crate::stress::Rng;
use model::{CycleCheck, FeedCache, Model};
use worker::WorkerSpec;

/// The workload and the cut.
#[derive(Clone, Debug, PartialEq)]
pub struct PowerOptions {
    /// Durability the child opens its store with. Default: `Durability::Sync`.
    pub durability: Durability,
    /// Appending threads in the child. Default: 3.
    pub threads: usize,
    /// Live sessions each appending thread keeps open. Default: 3.
    pub sessions_per_thread: usize,
    /// Mean events per generated session. Default: 120.
    pub events_per_session: u64,
    /// Generator and cut-timing seed. Default: 11.
    pub seed: u64,
    /// A child stops by itself after this long. Default: 120 s.
    pub worker_limit: Duration,
    /// The power is cut at a random moment this long after the child's first
    /// acknowledgement. Default: 100..1500 ms.
    pub cut_window_ms: (u64, u64),
    /// A fresh store every this many cycles (bounds the cost of each check). Default: 10.
    pub cycles_per_store: u64,
    /// The child's store reuses its WAL files ([`crate::stress::child_store_options`]). Checks
    /// open the store without the option, as a later process may. Default: true (the store's
    /// default).
    pub wal_recycling: bool,
    /// The child's store keeps the events' blocks in blob files
    /// ([`crate::stress::child_store_options`]); checks open it without. Default: false.
    pub blob_files: bool,
}

impl Default for PowerOptions {
    fn default() -> Self {
        PowerOptions {
            durability: Durability::Sync,
            threads: 3,
            sessions_per_thread: 3,
            events_per_session: 120,
            seed: 11,
            worker_limit: Duration::from_secs(120),
            cut_window_ms: (100, 1500),
            cycles_per_store: 10,
            wal_recycling: Options::default().wal_recycling,
            blob_files: false,
        }
    }
}

impl PowerOptions {
    /// Reject a workload that cannot run.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.threads == 0 || self.sessions_per_thread == 0 || self.events_per_session == 0 {
            bail!("threads, sessions per thread and events per session must be at least 1");
        }
        if self.cut_window_ms.0 > self.cut_window_ms.1 {
            bail!(
                "the cut window {:?} ends before it starts",
                self.cut_window_ms
            );
        }
        if self.cycles_per_store == 0 {
            bail!("cycles per store must be at least 1");
        }
        Ok(())
    }
}

/// `sync` or `buffered`.
pub fn durability_name(d: Durability) -> &'static str {
    match d {
        Durability::Sync => "sync",
        Durability::Buffered => "buffered",
    }
}

/// The inverse of [`durability_name`].
pub fn parse_durability(s: &str) -> anyhow::Result<Durability> {
    match s {
        "sync" => Ok(Durability::Sync),
        "buffered" => Ok(Durability::Buffered),
        other => bail!("durability {other:?} is neither sync nor buffered"),
    }
}

/// Live session `k`'s id: `v0-KKKKK` (DSH 0.1's format) for even `k`, `v4-KKKKK` for odd.
fn live_id(k: u64) -> String {
    format!("{}-{k:05}", if k.is_multiple_of(2) { "v0" } else { "v4" })
}

/// The inverse of [`live_id`].
fn live_k(id: &str) -> Option<u64> {
    let (format, k) = id.split_once('-')?;
    let k: u64 = k.parse().ok()?;
    (live_id(k) == id && matches!(format, "v0" | "v4")).then_some(k)
}

/// Generator feed `k`, in V0 for even `k` and V4 for odd.
fn feed_of(k: u64, opts: &PowerOptions) -> SessionFeed {
    let gen = GenOptions {
        sessions: 1,
        events_per_session: opts.events_per_session,
        seed: opts.seed,
        torn_fraction: 0.0,
    };
    let format = if k.is_multiple_of(2) {
        LogFormat::V0
    } else {
        LogFormat::V4
    };
    session_feed(k, &gen, format)
}

/// Live session `k`'s feed and header line.
fn feed_for(k: u64, opts: &PowerOptions) -> (SessionFeed, String) {
    let feed = feed_of(k, opts);
    let header = feed.header_line_for(&live_id(k));
    (feed, header)
}

/// Totals of a power-loss run.
#[derive(Clone, Debug, Default)]
pub struct PowerReport {
    /// Cuts survived and checked.
    pub cycles: u64,
    /// Session writes acknowledged before their cut.
    pub acknowledged: u64,
    /// Acknowledged writes missing after their cut.
    pub lost: u64,
    /// Cycles in which at least one acknowledged write was missing.
    pub cycles_with_loss: u64,
    /// Writes found partly applied.
    pub half_applied: u64,
    /// Everything found wrong, one line each, prefixed with its cycle.
    pub problems: Vec<String>,
    /// Admin ops the store refused (with the store unchanged).
    pub rejected: u64,
    /// Session checks over all cycles.
    pub session_checks: u64,
    /// Stores used.
    pub stores: u64,
    /// Times LazyFS itself died or stopped answering (a fault of the test tool, not of the
    /// store): that cycle is void and the next starts a fresh store on a new mount.
    pub lazyfs_restarts: u64,
    /// Whether the mount takes `O_DIRECT`, so the children's stores (`Options::direct_io`, the
    /// default) flushed and compacted with direct I/O under the cuts.
    pub direct_io: bool,
}

/// LazyFS crashes and hangs a run survives before it gives up.
pub(crate) const MAX_LAZYFS_RESTARTS: u64 = 5;

/// How long a cycle may take from starting its child to reaping it: the wait for a first
/// acknowledgement (60 s at most), the cut window, the freeze (10 s) and the cache clear (60 s),
/// with room to spare; past it LazyFS is taken to have stopped answering.
pub(crate) const CUT_LIMIT: Duration = Duration::from_secs(180);

/// How long the check after a cut may take before LazyFS is taken to have stopped answering
/// (a check takes about a second on the stores these runs build).
pub(crate) const CHECK_LIMIT: Duration = Duration::from_secs(60);

/// Where a run keeps its files: `<work>/lazyfs/{root,mnt}` (the store is `mnt/db`), the
/// journals and images outside the mount.
pub struct RunDirs {
    /// The harness directory.
    pub work: PathBuf,
}

impl RunDirs {
    fn journal(&self, cycle: u64) -> PathBuf {
        self.work.join("journal").join(format!("cycle-{cycle}.log"))
    }
    fn images(&self, cycle: u64) -> PathBuf {
        self.work.join("images").join(format!("cycle-{cycle}"))
    }
}

/// Kills the child when dropped (a failed cycle never leaves one running).
pub(crate) struct Running(pub(crate) Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The power-loss loop: mount LazyFS (`lazyfs` is its binary) under `work`, then `cycles`
/// times start a child with `spawn`, cut the power under it and check the store. The mount is
/// removed at the end, also on error.
pub fn power_loop(
    work: &Path,
    lazyfs: &Path,
    cycles: u64,
    opts: &PowerOptions,
    spawn: &mut dyn FnMut(&WorkerSpec) -> Command,
    progress: &mut dyn FnMut(u64, &CycleCheck),
) -> anyhow::Result<PowerReport> {
    opts.validate()?;
    std::fs::create_dir_all(work.join("journal"))?;
    let mut mount = lazyfs::Mount::start(lazyfs, &work.join("lazyfs"))?;
    let db = mount.path().join("db");
    let dirs = RunDirs {
        work: work.to_path_buf(),
    };
    let mut rng = Rng::new(opts.seed ^ 0x0070_6f77_6572);
    let mut feeds = FeedCache::new();
    let mut model = Model::default();
    let mut report = PowerReport {
        direct_io: sessionlog_engine::direct_io_supported(mount.path()),
        ..PowerReport::default()
    };
    let mut fresh = true;
    // `attempt` numbers every cycle started, `report.cycles` those checked; they differ only
    // when LazyFS itself dies (a void cycle, on a store then started afresh).
    let mut in_store = 0;
    let mut attempt = 0;
    while report.cycles < cycles {
        if fresh || in_store == opts.cycles_per_store {
            if db.exists() {
                std::fs::remove_dir_all(&db)
                    .with_context(|| format!("removing {}", db.display()))?;
            }
            model = Model::default();
            report.stores += 1;
            in_store = 0;
        }
        let cycle = attempt;
        attempt += 1;
        let spec = WorkerSpec {
            db: db.clone(),
            journal: dirs.journal(cycle),
            images: dirs.images(cycle),
            cycle,
            options: opts.clone(),
        };
        let outcome = one_cycle(
            &spec, &mut mount, &mut model, &mut feeds, &mut rng, spawn, work,
        );
        let _ = std::fs::remove_dir_all(dirs.images(cycle));
        let c = match outcome {
            Ok(c) => c,
            Err(e) if !mount.is_alive() && report.lazyfs_restarts < MAX_LAZYFS_RESTARTS => {
                eprintln!(
                    "power-loss: LazyFS died or stopped answering during cycle {cycle} ({e:#}); \
                     the cycle is void, LazyFS is mounted again and the next cycle starts a \
                     fresh store"
                );
                report.lazyfs_restarts += 1;
                drop(mount);
                mount = lazyfs::Mount::start(lazyfs, &work.join("lazyfs"))?;
                fresh = true;
                continue;
            }
            Err(e) => return Err(e.context(format!("cycle {cycle}"))),
        };
        in_store += 1;
        report.cycles += 1;
        report.acknowledged += c.acknowledged;
        report.lost += c.lost;
        report.cycles_with_loss += u64::from(c.lost > 0);
        report.half_applied += c.half_applied;
        report.rejected += c.rejected;
        report.session_checks += c.sessions;
        report
            .problems
            .extend(c.problems.iter().map(|p| format!("cycle {cycle}: {p}")));
        // A store found wrong is not built on: the next cycle starts afresh.
        fresh = !c.problems.is_empty();
        progress(cycle, &c);
    }
    Ok(report)
}

fn one_cycle(
    spec: &WorkerSpec,
    mount: &mut lazyfs::Mount,
    model: &mut Model,
    feeds: &mut FeedCache,
    rng: &mut Rng,
    spawn: &mut dyn FnMut(&WorkerSpec) -> Command,
    work: &Path,
) -> anyhow::Result<CycleCheck> {
    let stderr_path = work.join("worker.stderr");
    // Made before the child, so it is dropped after it: it also guards the child's reaping on
    // every error path (a child blocked in an unanswered request cannot be reaped).
    let cut_guard = mount.watchdog(&format!("cycle {}'s run and cut", spec.cycle), CUT_LIMIT);
    let mut child = Running(
        spawn(spec)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&stderr_path)?)
            .spawn()
            .context("starting the power-loss worker")?,
    );
    let exited = |child: &mut Running| -> anyhow::Result<()> {
        if let Some(status) = child.0.try_wait()? {
            let err = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            bail!("the worker exited by itself ({status}): {err}");
        }
        Ok(())
    };
    // Cut at a random moment once the child is acknowledging writes.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !journal_has_ack(&spec.journal) {
        exited(&mut child)?;
        if Instant::now() > deadline {
            bail!("the worker acknowledged nothing within 60 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let (lo, hi) = spec.options.cut_window_ms;
    std::thread::sleep(Duration::from_millis(rng.range(lo, hi.max(lo + 1))));
    exited(&mut child)?;
    freeze_for_cut(child.0.id(), mount)?;
    let ops = journal::read(&spec.journal)?;
    mount.cut_power()?;
    drop(child);
    cut_guard.finish()?;
    let mut c = CycleCheck::default();
    let (acknowledged, rejected) = model.apply(&ops, feeds, &spec.options)?;
    c.acknowledged = acknowledged;
    c.rejected = rejected;
    mount.guarded(
        &format!("the check after cycle {}", spec.cycle),
        CHECK_LIMIT,
        || model.check(&spec.db, feeds, &spec.options, &mut c),
    )??;
    Ok(c)
}

/// Whether the journal holds an acknowledgement yet.
fn journal_has_ack(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| b.windows(2).any(|w| w == b"\nA") || b.starts_with(b"A"))
}

/// Freeze the child for its cut ([`freeze`]). A thread of it that never stops is blocked in a
/// request LazyFS does not answer (see [`lazyfs`]); such a thread cannot be killed either, so
/// LazyFS is killed, which fails the request and lets the child die, and the cycle fails with
/// the mount gone (the callers void it).
pub fn freeze_for_cut(pid: u32, mount: &mut lazyfs::Mount) -> anyhow::Result<()> {
    freeze(pid).map_err(|e| {
        let blocked = lazyfs::blocked_threads();
        mount.abort();
        e.context(format!(
            "LazyFS stopped answering and was killed; threads blocked then:\n{blocked}"
        ))
    })
}

/// SIGSTOP `pid` and wait until every one of its threads is stopped, so no write of it is in
/// flight when the power goes.
fn freeze(pid: u32) -> anyhow::Result<()> {
    let status = Command::new("kill")
        .args(["-STOP", &pid.to_string()])
        .status()
        .context("running kill -STOP")?;
    if !status.success() {
        bail!("kill -STOP {pid} failed");
    }
    // A thread in a file-system request stops once it returns: milliseconds, unless the file
    // system has stopped answering.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))?;
        let mut all_stopped = true;
        for t in tasks {
            let state = lazyfs::task_state(&t?.path().join("stat"));
            all_stopped &= matches!(state, Some('T' | 't') | None);
        }
        if all_stopped {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the child's threads did not all stop within 10 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_ids_name_their_feed_and_format() {
        assert_eq!(live_id(4), "v0-00004");
        assert_eq!(live_id(7), "v4-00007");
        assert_eq!(live_k("v4-00007"), Some(7));
        assert_eq!(live_k("v0-00007"), None, "odd feeds are V4");
        assert_eq!(live_k("imp-c1-2"), None);
    }

    #[test]
    fn a_workload_that_cannot_run_is_refused() {
        assert!(PowerOptions::default().validate().is_ok());
        for bad in [
            PowerOptions {
                threads: 0,
                ..PowerOptions::default()
            },
            PowerOptions {
                cut_window_ms: (9, 3),
                ..PowerOptions::default()
            },
            PowerOptions {
                cycles_per_store: 0,
                ..PowerOptions::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn worker_specs_survive_the_command_line() {
        let spec = WorkerSpec {
            db: "/m/db".into(),
            journal: "/w/j.log".into(),
            images: "/w/img".into(),
            cycle: 3,
            options: PowerOptions {
                durability: Durability::Buffered,
                threads: 2,
                wal_recycling: false,
                blob_files: true,
                ..PowerOptions::default()
            },
        };
        assert_eq!(WorkerSpec::parse(&spec.to_arg()).expect("parse"), spec);
    }
}
