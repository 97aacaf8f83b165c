//! The power-loss child: every writer of the store at once, each operation journaled before it
//! runs and acknowledged after it returns (see `journal.rs`).
//!
//! - Appending threads: thread `t` owns the live sessions `k ≡ t (mod threads)` — `v0-KKKKK`
//!   (DSH 0.1's format) for even `k`, `v4-KKKKK` (DSH 0.2's V4 writer) for odd `k`, replaying
//!   generator feed `k` — creates them, and appends to a random group of its open sessions in
//!   one `append_many` (group commit; threads share fsyncs too). A restarted child resumes each
//!   session at its stored next seq.
//! - The admin thread: imports (`.jsonl`, `.jsonl.zstd`, torn logs, and bulk imports committed
//!   unsynced then made durable by one `Store::sync`), repair, resume, fork,
//!   migrate, delete, undelete and purge, on sessions no appending thread touches
//!   (`imp-`, `zimp-`, `torn-`, `fork-` ids); it records each touched session's image after
//!   the call returns; and now and then a `Store::sync`, which makes every write acknowledged
//!   before it durable even in a buffered store.

use std::collections::HashMap;
use std::io::Cursor;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use sessionlog_codec::format::zstd::FrameCompressor;
use sessionlog_engine::{ImportOptions, MigrateOptions, SourceEncoding, Store, Verdict};

use super::image::Image;
use super::journal::{self, AppendSpec, Intent, Journal};
use super::{feed_for, live_id, PowerOptions};
use crate::gen::SessionFeed;
use crate::hosting::sessionlog::append_item;
use crate::stress::{child_store_options, Rng};

/// Where one child works.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerSpec {
    /// The store (on the LazyFS mount).
    pub db: PathBuf,
    /// The journal (outside the mount).
    pub journal: PathBuf,
    /// Where image files go (outside the mount).
    pub images: PathBuf,
    /// The cycle number (new ids carry it, so they never repeat).
    pub cycle: u64,
    /// The workload.
    pub options: PowerOptions,
}

impl WorkerSpec {
    /// One command-line argument holding the spec.
    pub fn to_arg(&self) -> String {
        let o = &self.options;
        [
            format!("db={}", self.db.display()),
            format!("journal={}", self.journal.display()),
            format!("images={}", self.images.display()),
            format!("cycle={}", self.cycle),
            format!("durability={}", super::durability_name(o.durability)),
            format!("threads={}", o.threads),
            format!("sessions={}", o.sessions_per_thread),
            format!("events={}", o.events_per_session),
            format!("seed={}", o.seed),
            format!("limit={}", o.worker_limit.as_secs()),
            format!("wal_recycling={}", o.wal_recycling),
            format!("blob_files={}", o.blob_files),
        ]
        .join("\t")
    }

    /// Parse what [`WorkerSpec::to_arg`] wrote.
    pub fn parse(arg: &str) -> anyhow::Result<WorkerSpec> {
        let fields: HashMap<&str, &str> =
            arg.split('\t').filter_map(|f| f.split_once('=')).collect();
        let get = |k: &str| {
            fields
                .get(k)
                .copied()
                .with_context(|| format!("worker spec lacks {k}"))
        };
        let options = PowerOptions {
            durability: super::parse_durability(get("durability")?)?,
            threads: get("threads")?.parse()?,
            sessions_per_thread: get("sessions")?.parse()?,
            events_per_session: get("events")?.parse()?,
            seed: get("seed")?.parse()?,
            worker_limit: std::time::Duration::from_secs(get("limit")?.parse()?),
            wal_recycling: get("wal_recycling")?.parse()?,
            blob_files: get("blob_files")?.parse()?,
            ..PowerOptions::default()
        };
        Ok(WorkerSpec {
            db: get("db")?.into(),
            journal: get("journal")?.into(),
            images: get("images")?.into(),
            cycle: get("cycle")?.parse()?,
            options,
        })
    }
}

/// Run the child until killed (or until `worker_limit`).
pub fn run(spec: &WorkerSpec) -> anyhow::Result<()> {
    let store = Store::open(
        &spec.db,
        child_store_options(
            spec.options.durability,
            spec.options.wal_recycling,
            spec.options.blob_files,
        ),
    )
    .with_context(|| format!("opening the store at {}", spec.db.display()))?;
    let stored: HashMap<String, u64> = store
        .list()?
        .into_iter()
        .map(|s| (s.id, s.events))
        .collect();
    let journal = Journal::create(&spec.journal, &spec.images)?;
    let deadline = Instant::now() + spec.options.worker_limit;
    let seed = u64::from(std::process::id()) ^ spec.options.seed.rotate_left(23);
    let ctx = Ctx {
        store: &store,
        journal: &journal,
        spec,
        deadline,
    };
    std::thread::scope(|scope| {
        let appenders: Vec<_> = (0..spec.options.threads)
            .map(|t| {
                let (ctx, stored) = (&ctx, &stored);
                scope.spawn(move || {
                    let mut rng = Rng::new(seed ^ (t as u64).wrapping_mul(0x9e37_79b9));
                    append_thread(ctx, stored, t as u64, &mut rng)
                })
            })
            .collect();
        let admin = scope.spawn(|| admin_thread(&ctx, &mut Rng::new(seed ^ 0xad41)));
        for h in appenders.into_iter().chain([admin]) {
            h.join()
                .map_err(|_| anyhow::anyhow!("a worker thread panicked"))??;
        }
        Ok(())
    })
}

/// What every thread of the child shares.
struct Ctx<'a> {
    store: &'a Store,
    journal: &'a Journal,
    spec: &'a WorkerSpec,
    deadline: Instant,
}

/// A live session an appending thread is writing.
struct Live {
    id: String,
    feed: SessionFeed,
    /// Index of the next batch.
    next: usize,
    /// The header line of a session to be created with its first batch
    /// (`AppendItem::creating`), until that batch is acknowledged.
    header: Option<String>,
}

fn append_thread(
    ctx: &Ctx<'_>,
    stored: &HashMap<String, u64>,
    t: u64,
    rng: &mut Rng,
) -> anyhow::Result<()> {
    let opts = &ctx.spec.options;
    let step = opts.threads as u64;
    let mut next_k = t;
    let mut active: Vec<Live> = Vec::new();
    while Instant::now() < ctx.deadline {
        while active.len() < opts.sessions_per_thread {
            let k = next_k;
            next_k += step;
            if let Some(live) = open_live(ctx, stored, k)? {
                active.push(live);
            }
        }
        let mut picks: Vec<usize> = (0..active.len()).filter(|_| rng.range(0, 2) == 0).collect();
        if picks.is_empty() {
            picks.push(rng.range(0, active.len() as u64) as usize);
        }
        let mut specs = Vec::new();
        let mut items = Vec::new();
        for &i in &picks {
            let a = &active[i];
            let batch = &a.feed.batches[a.next];
            specs.push(AppendSpec {
                id: a.id.clone(),
                first_seq: batch.first_seq,
                count: batch.events.len() as u64,
            });
            items.push(append_item(&a.id, batch, a.header.as_deref())?);
        }
        let op = ctx.journal.intend(&Intent::Append(specs))?;
        for (item, result) in picks.iter().zip(ctx.store.append_many(items)) {
            let a = &active[*item];
            result.with_context(|| format!("appending to {}", a.id))?;
        }
        ctx.journal.ack(op, true, &[])?;
        for &i in &picks {
            active[i].next += 1;
            active[i].header = None;
        }
        active.retain(|a| a.next < a.feed.batches.len());
    }
    Ok(())
}

/// Live session `k` ready for its next batch (created if missing), or `None` when complete.
fn open_live(ctx: &Ctx<'_>, stored: &HashMap<String, u64>, k: u64) -> anyhow::Result<Option<Live>> {
    let id = live_id(k);
    let (feed, header) = feed_for(k, &ctx.spec.options);
    let mut with_first_batch = None;
    let next_seq = match stored.get(&id) {
        Some(&n) => n,
        None => {
            // Of each format's sessions (the format follows `k`'s parity), half are created
            // alone, the others by their first batch (`AppendItem::creating`), as a host behind
            // DSH's seam creates them. Those are journaled only as that append, which takes them
            // from absent to their first batch.
            if (k / 2) % 2 == 1 {
                with_first_batch = Some(header);
            } else {
                let op = ctx.journal.intend(&Intent::Create { id: id.clone() })?;
                ctx.store.create_session(&header, SourceEncoding::Jsonl)?;
                ctx.journal.ack(op, true, &[])?;
            }
            0
        }
    };
    let Some(next) = crate::stress::boundary(&feed, next_seq) else {
        bail!("{id}: stored next seq {next_seq} is not a batch boundary of its feed");
    };
    Ok((next < feed.batches.len()).then_some(Live {
        id,
        feed,
        next,
        header: with_first_batch,
    }))
}

/// The admin writers, in proportion.
const ADMIN_OPS: &[(&str, u64)] = &[
    ("import", 3),
    ("import-zstd", 2),
    ("import-torn", 1),
    (journal::BULK_IMPORT, 1),
    ("repair", 2),
    ("resume", 1),
    ("fork", 3),
    ("migrate", 2),
    ("delete", 2),
    ("undelete", 1),
    ("purge", 1),
    (journal::SYNC, 1),
];

/// Whether `id` belongs to the admin thread.
pub(crate) fn is_admin_id(id: &str) -> bool {
    ["imp-", "zimp-", "torn-", "fork-"]
        .iter()
        .any(|p| id.starts_with(p))
}

fn admin_thread(ctx: &Ctx<'_>, rng: &mut Rng) -> anyhow::Result<()> {
    let total: u64 = ADMIN_OPS.iter().map(|(_, w)| w).sum();
    let mut n = 0u64;
    while Instant::now() < ctx.deadline {
        let mut pick = rng.range(0, total);
        let kind = ADMIN_OPS
            .iter()
            .find(|(_, w)| {
                let hit = pick < *w;
                pick = pick.saturating_sub(*w);
                hit
            })
            .map_or("import", |(k, _)| *k);
        n += 1;
        admin_op(ctx, kind, n, rng).with_context(|| format!("admin op {kind}"))?;
    }
    Ok(())
}

/// The admin sessions, with what the ops choose by.
struct Target {
    id: String,
    deleted: bool,
    verdict: Verdict,
    format: u32,
    events: u64,
}

fn targets(store: &Store) -> anyhow::Result<Vec<Target>> {
    Ok(store
        .list()?
        .into_iter()
        .filter(|s| is_admin_id(&s.id))
        .map(|s| Target {
            deleted: s.deleted_at_ms.is_some(),
            verdict: s.verdict,
            format: s.format,
            events: s.events,
            id: s.id,
        })
        .collect())
}

fn choose<'t>(
    rng: &mut Rng,
    targets: &'t [Target],
    want: impl Fn(&Target) -> bool,
) -> Option<&'t Target> {
    let fit: Vec<&Target> = targets.iter().filter(|t| want(t)).collect();
    (!fit.is_empty()).then(|| fit[rng.range(0, fit.len() as u64) as usize])
}

fn admin_op(ctx: &Ctx<'_>, kind: &str, n: u64, rng: &mut Rng) -> anyhow::Result<()> {
    let store = ctx.store;
    let fresh = |prefix: &str| format!("{prefix}-c{}-{n}", ctx.spec.cycle);
    if kind.starts_with("import") {
        return import_op(ctx, kind, &fresh, rng);
    }
    if kind == journal::SYNC {
        let op = ctx.journal.intend(&Intent::Admin {
            kind: kind.into(),
            ids: Vec::new(),
        })?;
        store.sync()?;
        return ctx.journal.ack(op, true, &[]);
    }
    let all = targets(store)?;
    let clean = |t: &Target| !t.deleted && t.verdict == Verdict::Clean;
    let (ids, call): (
        Vec<String>,
        Box<dyn FnOnce() -> sessionlog_engine::Result<()>>,
    ) = match kind {
        "repair" => match choose(rng, &all, |t| t.verdict == Verdict::Torn && !t.deleted) {
            Some(t) => (
                vec![t.id.clone()],
                Box::new(|| store.repair(&t.id).map(drop)),
            ),
            None => return Ok(()),
        },
        "resume" => match choose(rng, &all, clean) {
            Some(t) => (
                vec![t.id.clone()],
                Box::new(|| store.resume(&t.id).map(drop)),
            ),
            None => return Ok(()),
        },
        "fork" => match choose(rng, &all, clean) {
            Some(t) => {
                let child = fresh("fork");
                let at = (t.events > 1 && rng.range(0, 2) == 0).then(|| rng.range(0, t.events));
                let (src, new) = (t.id.clone(), child.clone());
                (
                    vec![t.id.clone(), child],
                    Box::new(move || store.fork(&src, at, &new).map(drop)),
                )
            }
            None => return Ok(()),
        },
        "migrate" => match choose(rng, &all, |t| clean(t) && t.format == 0) {
            Some(t) => (
                vec![t.id.clone()],
                Box::new(|| {
                    store
                        .migrate(&t.id, &MigrateOptions { dry_run: false })
                        .map(drop)
                }),
            ),
            None => return Ok(()),
        },
        "delete" => match choose(rng, &all, |t| !t.deleted) {
            Some(t) => (vec![t.id.clone()], Box::new(|| store.delete(&t.id))),
            None => return Ok(()),
        },
        "undelete" => match choose(rng, &all, |t| t.deleted) {
            Some(t) => (vec![t.id.clone()], Box::new(|| store.undelete(&t.id))),
            None => return Ok(()),
        },
        "purge" => {
            let doomed: Vec<String> = all
                .iter()
                .filter(|t| t.deleted)
                .map(|t| t.id.clone())
                .collect();
            if doomed.is_empty() {
                return Ok(());
            }
            (doomed, Box::new(|| store.purge(0, false).map(drop)))
        }
        other => bail!("unknown admin op {other}"),
    };
    let op = ctx.journal.intend(&Intent::Admin {
        kind: kind.into(),
        ids: ids.iter().map(|id| (id.clone(), None)).collect(),
    })?;
    let outcome = call();
    if let Err(e) = &outcome {
        eprintln!("power worker: {kind} {ids:?} rejected: {e}");
    }
    let images = ids
        .into_iter()
        .map(|id| {
            let image = Image::of(store, &id)?;
            Ok((id, ctx.journal.save_image(&image)?))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    ctx.journal.ack(op, outcome.is_ok(), &images)
}

/// An import: one file (`.jsonl`, `.jsonl.zstd` or torn), or a bulk import of several files
/// committed without fsync and made durable together by one [`Store::sync`] before they are
/// acknowledged (what `sessionlog import DIR` does). The image each must leave is known before
/// the call: the file's bytes.
fn import_op(
    ctx: &Ctx<'_>,
    kind: &str,
    fresh: &dyn Fn(&str) -> String,
    rng: &mut Rng,
) -> anyhow::Result<()> {
    let (prefix, zstd, torn, files) = match kind {
        "import-zstd" => ("zimp", true, false, 1),
        "import-torn" => ("torn", false, true, 1),
        journal::BULK_IMPORT => ("imp", false, false, 3),
        _ => ("imp", false, false, 1),
    };
    let mut inputs = Vec::new();
    for i in 0..files {
        let id = format!("{}-{i}", fresh(prefix));
        let bytes = import_bytes(&id, rng, &ctx.spec.options, zstd, torn)?;
        let expected = ctx.journal.save_image(&Image::exported(bytes.clone()))?;
        inputs.push((id, bytes, expected));
    }
    let op = ctx.journal.intend(&Intent::Admin {
        kind: kind.into(),
        ids: inputs
            .iter()
            .map(|(id, _, img)| (id.clone(), Some(img.clone())))
            .collect(),
    })?;
    let options = ImportOptions {
        defer_sync: files > 1,
        ..ImportOptions::default()
    };
    for (id, bytes, _) in &inputs {
        if zstd {
            ctx.store.import_zstd(id, bytes, &options)?;
        } else {
            ctx.store
                .import_jsonl(id, Cursor::new(bytes), &options, &mut |_| {})?;
        }
    }
    if options.defer_sync {
        ctx.store.sync()?;
    }
    let acked: Vec<(String, PathBuf)> = inputs.into_iter().map(|(id, _, img)| (id, img)).collect();
    ctx.journal.ack(op, true, &acked)
}

/// A generated log for import `id`: a prefix of a feed (V0 or V4, so it may end inside a turn),
/// as `.jsonl`, as `.jsonl.zstd` (one frame per write batch), or torn (its last line cut).
fn import_bytes(
    id: &str,
    rng: &mut Rng,
    opts: &PowerOptions,
    zstd: bool,
    torn: bool,
) -> anyhow::Result<Vec<u8>> {
    // Feeds far from the live sessions' indexes, either format.
    let feed = super::feed_of(1_000_000 + rng.range(0, 1_000_000), opts);
    let header = feed.header_line_for(id);
    let batches = rng.range(1, feed.batches.len() as u64 + 1) as usize;
    let mut texts: Vec<Vec<u8>> = vec![format!("{header}\n").into_bytes()];
    texts.extend(
        feed.batches[..batches]
            .iter()
            .map(|b| b.text.clone().into_bytes()),
    );
    if zstd {
        let mut c = FrameCompressor::new()?;
        let mut out = Vec::new();
        for t in &texts {
            c.compress_into(t, &mut out)?;
        }
        return Ok(out);
    }
    let mut out = texts.concat();
    if torn && out.len() > texts[0].len() + 2 {
        // Cut the last line part-way: its "\n" and a few bytes before it go.
        let cut = 1 + rng.range(1, (out.len() - texts[0].len()).min(40) as u64) as usize;
        out.truncate(out.len() - cut);
    }
    Ok(out)
}
