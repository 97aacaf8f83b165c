//! The kill -9 crash harness behind `sessionlog-harness stress` and the crash test: a worker
//! process appends generated DSH batches durably from several threads and logs every acknowledged
//! batch to a side file; the parent SIGKILLs it at random moments, reopens the store and checks it.
//!
//! Invariant checked after every kill: every acknowledged batch is stored; each session's next
//! seq falls on a batch boundary of its feed (no partial batch), its logical events are exactly
//! the feed's events with contiguous seqs (no gap, no duplicate), its export is byte-identical to
//! what DSH's JSONL writer writes for those batches, and `verify` reports no problem.
//!
//! The side file is appended (one `write` per line) after the append returns; it is not fsynced:
//! the parent reads it after the child is dead, and the page cache survives SIGKILL.
//!
//! Sessions are `stress-NNNNNN`, session `k` replaying feed `k` of the generator. Worker thread
//! `t` owns the sessions `k ≡ t (mod threads)` and keeps a few of them open at a time; when one
//! is complete it moves to the next. A restarted worker resumes every session at its stored next
//! seq, so the kill loop covers create, single appends and multi-session `append_many` groups.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use sessionlog_codec::json::Value;
use sessionlog_engine::{Durability, Options, SourceEncoding, Store};

use crate::gen::{session_batches, GenOptions, SessionFeed};
use crate::hosting::sessionlog::append_item;

/// What the worker writes and the checker expects.
#[derive(Clone, Debug)]
pub struct StressOptions {
    /// Appending threads in the worker. Default: 4.
    pub threads: usize,
    /// Sessions each thread keeps open at once. Default: 4.
    pub sessions_per_thread: usize,
    /// Mean events per generated session. Default: 300.
    pub events_per_session: u64,
    /// Generator seed. Default: 7.
    pub seed: u64,
    /// A worker stops by itself after this long (so a stray child never runs forever).
    /// Default: 120 s.
    pub worker_limit: Duration,
    /// The kill loop starts a fresh store every this many cycles, so a check (which re-reads
    /// the whole store) stays cheap however many cycles run. Default: 10.
    pub cycles_per_store: u64,
    /// The worker's store reuses its WAL files ([`child_store_options`]). Default: true (the
    /// store's default).
    pub wal_recycling: bool,
    /// The worker's store keeps the events' blocks in blob files ([`child_store_options`]).
    /// Default: false.
    pub blob_files: bool,
}

/// A harness child's store options: `durability`, with `wal_recycling` reused WAL files and
/// with `blob_files` blob files; with either, 1 MiB memtables, so that WALs turn over (and are
/// overwritten) and memtables flush (into blob files) between kills or cuts.
pub fn child_store_options(
    durability: Durability,
    wal_recycling: bool,
    blob_files: bool,
) -> Options {
    let defaults = Options::default();
    Options {
        durability,
        wal_recycling,
        blob_files,
        write_buffer_bytes: if wal_recycling || blob_files {
            1 << 20
        } else {
            defaults.write_buffer_bytes
        },
        ..defaults
    }
}

impl Default for StressOptions {
    fn default() -> Self {
        StressOptions {
            threads: 4,
            sessions_per_thread: 4,
            events_per_session: 300,
            seed: 7,
            worker_limit: Duration::from_secs(120),
            cycles_per_store: 10,
            wal_recycling: Options::default().wal_recycling,
            blob_files: false,
        }
    }
}

impl StressOptions {
    fn gen(&self) -> GenOptions {
        GenOptions {
            sessions: 1,
            events_per_session: self.events_per_session,
            seed: self.seed,
            torn_fraction: 0.0,
        }
    }
}

/// The id of stress session `k`.
fn session_id(k: u64) -> String {
    format!("stress-{k:06}")
}

/// Feed `k` of the generator, replayed as session `session_id(k)`.
fn feed_for(k: u64, opts: &StressOptions) -> (SessionFeed, String) {
    let feed = session_batches(k, &opts.gen());
    let header = feed.header_line_for(&session_id(k));
    (feed, header)
}

/// A small deterministic PRNG (splitmix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `lo..hi` (`lo` when the range is empty).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.next_u64() % (hi - lo)
        }
    }
}

/// One session a worker thread is appending to.
struct Active {
    id: String,
    feed: SessionFeed,
    /// Index of the next batch to append.
    next: usize,
}

/// The worker: open the store durably, resume or create sessions, append until killed (or
/// until `opts.worker_limit`), logging `id first_seq count` to `acks` after each acknowledgement.
pub fn worker(db: &Path, acks: &Path, opts: &StressOptions) -> anyhow::Result<()> {
    let store = Store::open(
        db,
        child_store_options(Durability::Sync, opts.wal_recycling, opts.blob_files),
    )
    .with_context(|| format!("opening the store at {}", db.display()))?;
    let stored: HashMap<String, u64> = store
        .list()?
        .into_iter()
        .map(|s| (s.id, s.events))
        .collect();
    let log = Mutex::new(
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(acks)
            .with_context(|| format!("opening {}", acks.display()))?,
    );
    let deadline = Instant::now() + opts.worker_limit;
    let seed = std::process::id() as u64 ^ opts.seed.rotate_left(17);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..opts.threads)
            .map(|t| {
                let (store, stored, log) = (&store, &stored, &log);
                scope.spawn(move || {
                    let mut rng = Rng::new(seed ^ (t as u64).wrapping_mul(0x9e37));
                    worker_thread(store, stored, log, t as u64, opts, deadline, &mut rng)
                })
            })
            .collect();
        for h in handles {
            h.join()
                .map_err(|_| anyhow::anyhow!("a worker thread panicked"))??;
        }
        Ok(())
    })
}

fn worker_thread(
    store: &Store,
    stored: &HashMap<String, u64>,
    log: &Mutex<File>,
    t: u64,
    opts: &StressOptions,
    deadline: Instant,
    rng: &mut Rng,
) -> anyhow::Result<()> {
    let step = opts.threads as u64;
    let mut next_k = t;
    let mut active: Vec<Active> = Vec::new();
    while Instant::now() < deadline {
        while active.len() < opts.sessions_per_thread {
            let k = next_k;
            next_k += step;
            if let Some(a) = resume_or_create(store, stored, k, opts)? {
                active.push(a);
            }
        }
        // Mostly single appends; one pass in four, one group commit over all open sessions.
        let picks: Vec<usize> = if rng.range(0, 4) == 0 {
            (0..active.len()).collect()
        } else {
            vec![rng.range(0, active.len() as u64) as usize]
        };
        let items = picks
            .iter()
            .map(|&i| {
                let a = &active[i];
                append_item(&a.id, &a.feed.batches[a.next], None)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let results = store.append_many(items);
        let mut lines = String::new();
        for (&i, result) in picks.iter().zip(results) {
            let a = &mut active[i];
            let r = result.with_context(|| format!("appending to {}", a.id))?;
            lines.push_str(&format!("{} {} {}\n", a.id, r.first_seq, r.count));
            a.next += 1;
        }
        log.lock()
            .map_err(|_| anyhow::anyhow!("ack log lock poisoned"))?
            .write_all(lines.as_bytes())
            .context("writing the ack log")?;
        active.retain(|a| a.next < a.feed.batches.len());
    }
    Ok(())
}

/// Session `k` ready for its next batch, or `None` when it is complete.
fn resume_or_create(
    store: &Store,
    stored: &HashMap<String, u64>,
    k: u64,
    opts: &StressOptions,
) -> anyhow::Result<Option<Active>> {
    let (feed, header) = feed_for(k, opts);
    let id = session_id(k);
    let next_seq = match stored.get(&id) {
        Some(&n) => n,
        None => {
            store.create_session(&header, SourceEncoding::Jsonl)?;
            0
        }
    };
    let Some(next) = boundary(&feed, next_seq) else {
        bail!("{id}: stored next seq {next_seq} is not a batch boundary of its feed");
    };
    Ok((next < feed.batches.len()).then_some(Active { id, feed, next }))
}

/// The index of the batch starting at `seq` (`batches.len()` at the end), if any.
pub(crate) fn boundary(feed: &SessionFeed, seq: u64) -> Option<usize> {
    if seq == feed.events() {
        return Some(feed.batches.len());
    }
    feed.batches.iter().position(|b| b.first_seq == seq)
}

/// Compare stored session `id` (holding `stored_events` events) with the first `batches`
/// batches of its feed and header line: its logical events (contiguous seqs, equal to the
/// feed's) and its export (DSH's bytes for those batches). One line per difference goes to
/// `problems`; returns the logical events read.
pub(crate) fn check_against_feed(
    store: &Store,
    id: &str,
    stored_events: u64,
    (feed, header): (&SessionFeed, &str),
    batches: usize,
    problems: &mut Vec<String>,
) -> anyhow::Result<u64> {
    let want: Vec<&Value> = feed.batches[..batches]
        .iter()
        .flat_map(|b| b.events.iter())
        .collect();
    let mut got = 0u64;
    let mut mismatch = None;
    store.events(id, 0, None, &mut |seq, event| {
        if mismatch.is_none() && (seq != got || want.get(seq as usize) != Some(&event)) {
            mismatch = Some(seq);
        }
        got += 1;
        Ok(())
    })?;
    if let Some(seq) = mismatch.or((got != stored_events).then_some(got)) {
        problems.push(format!(
            "{id}: logical event at seq {seq} differs from the feed (gap or duplicate)"
        ));
    }
    let mut expected = format!("{header}\n").into_bytes();
    for b in &feed.batches[..batches] {
        expected.extend_from_slice(b.text.as_bytes());
    }
    let mut exported = Vec::new();
    store.export(id, None, &mut exported)?;
    if exported != expected {
        problems.push(format!(
            "{id}: export differs from DSH's bytes for its {batches} batches"
        ));
    }
    Ok(got)
}

/// `verify`'s findings on `store`, one line each (`verify: <session>: <detail>`).
pub(crate) fn verify_problems(store: &Store) -> anyhow::Result<Vec<String>> {
    Ok(store
        .verify(&[])?
        .problems
        .into_iter()
        .map(|p| format!("verify: {}: {}", p.session, p.detail))
        .collect())
}

/// What one check of a reopened store covered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Sessions checked.
    pub sessions: u64,
    /// Acknowledged batches found stored (all acknowledgements so far).
    pub acked_batches: u64,
    /// Logical events compared with the feed.
    pub events: u64,
}

/// Feeds by session, generated once per run.
pub type FeedCache = HashMap<u64, (SessionFeed, String)>;

/// Reopen the store at `db` and check it against the ack log (see the module invariant).
pub fn check(
    db: &Path,
    acks: &Path,
    opts: &StressOptions,
    feeds: &mut FeedCache,
) -> anyhow::Result<CheckReport> {
    let store = Store::open(db, Options::default())
        .with_context(|| format!("reopening the store at {} after a kill", db.display()))?;
    let text = match std::fs::read_to_string(acks) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", acks.display())),
    };
    let mut acked: HashMap<String, u64> = HashMap::new();
    let mut report = CheckReport::default();
    // A line cut by the kill (no "\n") acknowledges nothing the parent can rely on.
    for line in text.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
        let mut f = line.split_whitespace();
        let (Some(id), Some(first), Some(count)) = (f.next(), f.next(), f.next()) else {
            bail!("malformed ack line {line:?}");
        };
        let end = first.parse::<u64>()? + count.parse::<u64>()?;
        let e = acked.entry(id.to_owned()).or_default();
        *e = (*e).max(end);
        report.acked_batches += 1;
    }
    let mut problems = Vec::new();
    for s in store.list()? {
        report.sessions += 1;
        let Some(k) =
            s.id.strip_prefix("stress-")
                .and_then(|n| n.parse::<u64>().ok())
        else {
            problems.push(format!("{}: not a stress session", s.id));
            continue;
        };
        let (feed, header) = feeds.entry(k).or_insert_with(|| feed_for(k, opts));
        let acked_end = acked.remove(&s.id).unwrap_or(0);
        if s.events < acked_end {
            problems.push(format!(
                "{}: acknowledged seqs up to {} but only {} events are stored",
                s.id,
                acked_end - 1,
                s.events
            ));
        }
        let Some(batches) = boundary(feed, s.events) else {
            problems.push(format!(
                "{}: next seq {} cuts a batch (partial batch stored)",
                s.id, s.events
            ));
            continue;
        };
        report.events += check_against_feed(
            &store,
            &s.id,
            s.events,
            (feed, header),
            batches,
            &mut problems,
        )?;
    }
    for (id, end) in acked {
        problems.push(format!(
            "{id}: acknowledged seqs up to {end} but the session is gone"
        ));
    }
    problems.extend(verify_problems(&store)?);
    if !problems.is_empty() {
        bail!("after a kill: {}", problems.join("; "));
    }
    Ok(report)
}

/// Totals of a kill loop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoopReport {
    /// Kill/reopen cycles survived.
    pub cycles: u64,
    /// Distinct acknowledged batches (each checked after every later kill of its store too).
    pub acked_batches: u64,
    /// Sum over cycles of the acknowledged batches checked.
    pub acked_checks: u64,
    /// Sessions written, over all stores.
    pub sessions: u64,
    /// Logical events written, over all stores.
    pub events: u64,
    /// Stores used (see [`StressOptions::cycles_per_store`]).
    pub stores: u64,
}

/// The kill loop: `cycles` times, start a worker with `spawn` (its stderr goes to
/// `<dir>/worker.stderr`), SIGKILL it after a random 50..`max_kill_ms` ms, then [`check`].
/// The store is `<dir>/db`, the ack log `<dir>/acks.log`; `spawn` must start a worker on them.
/// Every `opts.cycles_per_store` cycles both are removed and the next worker starts afresh.
pub fn kill_loop(
    dir: &Path,
    cycles: u64,
    max_kill_ms: u64,
    opts: &StressOptions,
    spawn: &mut dyn FnMut() -> Command,
    progress: &mut dyn FnMut(u64, &CheckReport),
) -> anyhow::Result<LoopReport> {
    let (db, acks) = (dir.join("db"), dir.join("acks.log"));
    let stderr_path = dir.join("worker.stderr");
    let mut rng = Rng::new(opts.seed ^ 0x6b69_6c6c);
    let mut feeds = FeedCache::new();
    let mut report = LoopReport::default();
    let mut last = CheckReport::default();
    for cycle in 0..cycles {
        if cycle > 0 && cycle % opts.cycles_per_store.max(1) == 0 {
            std::fs::remove_dir_all(&db).with_context(|| format!("removing {}", db.display()))?;
            std::fs::remove_file(&acks)?;
            report.acked_batches += last.acked_batches;
            report.sessions += last.sessions;
            report.events += last.events;
        }
        let stderr = File::create(&stderr_path)?;
        let mut child = spawn()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .context("starting the stress worker")?;
        std::thread::sleep(Duration::from_millis(rng.range(50, max_kill_ms.max(51))));
        if let Some(status) = child.try_wait()? {
            let err = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            bail!("cycle {cycle}: the worker exited by itself ({status}): {err}");
        }
        child.kill().context("killing the worker")?;
        child.wait()?;
        let c = check(&db, &acks, opts, &mut feeds).with_context(|| format!("cycle {cycle}"))?;
        if cycle % opts.cycles_per_store.max(1) == 0 {
            report.stores += 1;
        }
        report.cycles += 1;
        report.acked_checks += c.acked_batches;
        last = c;
        progress(cycle, &c);
    }
    report.acked_batches += last.acked_batches;
    report.sessions += last.sessions;
    report.events += last.events;
    Ok(report)
}
