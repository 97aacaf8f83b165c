//! `sessionlog-harness bench s3-export`: `export-all --to s3://…` of a generated store, side by
//! side with `aws s3 sync` (PyPI awscli) of the same store already exported to a local DSH root,
//! both to the same SeaweedFS server on loopback, in alternating order round after round. Then
//! what reading an archived session back costs: `messages` of sessions held in the store, and of
//! the same sessions once archived (fetched and imported into a scratch store first).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{bail, Context};
use sessionlog_archive::{
    archive_session, export_all, ArchiveRoot, ArchiveSources, ArchivedView, Bucket, S3Config,
    Transfer,
};
use sessionlog_codec::json::{Object, Value};
use sessionlog_engine::{ImportOptions, Options, Store};
use sessionlog_harness::gen::{generate, session_bytes, GenOptions};
use sessionlog_harness::seaweed::{tool_path, SeaweedServer};
use sessionlog_tools_common::import::{collect_inputs, import_all};
use sessionlog_tools_common::output::json_line;

/// Sessions archived and read back for the read-cost figures.
const READ_BACK_SESSIONS: usize = 20;

/// What the benchmark runs.
pub struct S3ExportBench {
    /// Plaintext corpus size, MB.
    pub mb: u64,
    /// Mean events per generated session.
    pub events: u64,
    /// Rounds of the two exports, alternating which goes first.
    pub rounds: usize,
    /// Working directory (default: a temp dir, removed after).
    pub dir: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    pub as_json: bool,
}

/// Run the benchmark (see the module's steps).
pub fn run(bench: &S3ExportBench) -> anyhow::Result<ExitCode> {
    let (work, remove_after) = crate::cmd::work_dir(bench.dir.clone(), "s3-export");
    let corpus = work.join("corpus");
    let opts = GenOptions {
        events_per_session: bench.events,
        torn_fraction: 0.0,
        ..GenOptions::default()
    };
    // Sessions vary in length: size the corpus by the mean of a sample.
    let sample = 16;
    let estimate = ((0..sample)
        .map(|i| session_bytes(i, &opts).len() as u64)
        .sum::<u64>()
        / sample)
        .max(1);
    let opts = GenOptions {
        sessions: (bench.mb * 1_000_000).div_ceil(estimate) + 1,
        ..opts
    };
    eprintln!(
        "generating ~{} MB ({} sessions) in {}",
        bench.mb,
        opts.sessions,
        corpus.display()
    );
    let plaintext = generate(&corpus, &opts)?.bytes;
    let store = Store::open(work.join("store"), Options::default())?;
    let (inputs, _) = collect_inputs(std::slice::from_ref(&corpus))?;
    let options = ImportOptions {
        defer_sync: true,
        ..ImportOptions::default()
    };
    for r in import_all(&store, &inputs, &options, &|_| {}) {
        r.context("importing the corpus")?;
    }
    store.sync()?;
    let root = work.join("root");
    let ids = store.ids()?;
    for id in &ids {
        store.export_to_root(&root, id, None)?;
    }

    let server = SeaweedServer::start()?;
    server.create_bucket("bench")?;
    let config = server.s3_config();
    let aws = tool_path("aws")?;
    let sources = ArchiveSources::new(config.clone(), Transfer::default());
    let mut rounds = Vec::with_capacity(bench.rounds);
    for round in 0..bench.rounds {
        let ours = |r: usize| -> anyhow::Result<f64> {
            let bucket = open(&format!("s3://bench/r{r}-sessionlog"), &config)?;
            let t = Instant::now();
            let summary = export_all(&store, &bucket, &sources, None, &|_| {})?;
            let seconds = t.elapsed().as_secs_f64();
            if !summary.failures.is_empty() || summary.sessions != ids.len() as u64 {
                bail!("export-all --to failed: {:?}", summary.failures);
            }
            Ok(seconds)
        };
        let theirs = |r: usize| sync(&aws, &server, &root, &format!("s3://bench/r{r}-aws"));
        let (sessionlog_s, aws_s) = if round % 2 == 0 {
            let a = ours(round)?;
            (a, theirs(round)?)
        } else {
            let b = theirs(round)?;
            (ours(round)?, b)
        };
        same_objects(&config, round)?;
        eprintln!("round {round}: sessionlog {sessionlog_s:.2} s, aws s3 sync {aws_s:.2} s");
        rounds.push((sessionlog_s, aws_s));
    }
    let read_back = read_cost(&store, &config, &sources, &ids)?;
    drop(store);
    drop(server);
    if remove_after {
        std::fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    }
    report(bench, plaintext, ids.len(), &rounds, &read_back)
}

fn open(url: &str, config: &S3Config) -> anyhow::Result<Bucket> {
    Ok(Bucket::open(
        ArchiveRoot::parse(url)?,
        config,
        Transfer::default(),
    )?)
}

/// `aws s3 sync ROOT URL` against `server`; its seconds.
fn sync(aws: &Path, server: &SeaweedServer, root: &Path, url: &str) -> anyhow::Result<f64> {
    let mut c = Command::new(aws);
    c.args(["s3", "sync", "--only-show-errors"])
        .arg(root)
        .arg(url)
        .stdout(Stdio::null());
    for (k, v) in server.env() {
        c.env(k, v);
    }
    let t = Instant::now();
    let status = c
        .status()
        .with_context(|| format!("running {}", aws.display()))?;
    let seconds = t.elapsed().as_secs_f64();
    if !status.success() {
        bail!("aws s3 sync failed: {status}");
    }
    Ok(seconds)
}

/// Both exports of `round` stored the same objects (names and sizes).
fn same_objects(config: &S3Config, round: usize) -> anyhow::Result<()> {
    let ours = open(&format!("s3://bench/r{round}-sessionlog"), config)?.list()?;
    let theirs = open(&format!("s3://bench/r{round}-aws"), config)?.list()?;
    if ours != theirs {
        bail!(
            "round {round}: the two exports differ ({} and {} objects): the benchmark is void",
            ours.len(),
            theirs.len()
        );
    }
    Ok(())
}

/// What reading sessions back costs, held and archived.
struct ReadCost {
    sessions: usize,
    median_bytes: u64,
    held_ms: f64,
    archived_ms: f64,
}

/// `messages` of [`READ_BACK_SESSIONS`] sessions held in the store, then of the same sessions
/// archived (each read fetches its object and imports it into a scratch store): medians.
fn read_cost(
    store: &Store,
    config: &S3Config,
    sources: &ArchiveSources,
    ids: &[String],
) -> anyhow::Result<ReadCost> {
    let picked: Vec<&String> = ids.iter().take(READ_BACK_SESSIONS).collect();
    let mut bytes = Vec::new();
    let mut held = Vec::new();
    for id in &picked {
        bytes.push(store.summary(id)?.bytes);
        let t = Instant::now();
        store.messages_at(id, None)?;
        held.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let cold = open("s3://bench/cold", config)?;
    for id in &picked {
        archive_session(store, &cold, id)?;
    }
    let mut archived = Vec::new();
    for id in &picked {
        let t = Instant::now();
        let view = ArchivedView::open(store, sources, id, Options::default())?;
        view.store().messages_at(id, None)?;
        archived.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(ReadCost {
        sessions: picked.len(),
        median_bytes: median_u64(&mut bytes),
        held_ms: median(&mut held),
        archived_ms: median(&mut archived),
    })
}

/// The median of `v` (sorted in place; the upper one of an even count).
pub(super) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn median_u64(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

fn report(
    bench: &S3ExportBench,
    plaintext: u64,
    sessions: usize,
    rounds: &[(f64, f64)],
    read: &ReadCost,
) -> anyhow::Result<ExitCode> {
    let mbps = |s: f64| plaintext as f64 / 1e6 / s;
    let mut ours: Vec<f64> = rounds.iter().map(|r| r.0).collect();
    let mut theirs: Vec<f64> = rounds.iter().map(|r| r.1).collect();
    let mut ratios: Vec<f64> = rounds.iter().map(|(a, b)| b / a).collect();
    let (ours, theirs, ratio) = (median(&mut ours), median(&mut theirs), median(&mut ratios));
    let mut out = std::io::stdout().lock();
    if bench.as_json {
        let per_round = rounds
            .iter()
            .map(|(a, b)| {
                Object::new()
                    .with("sessionlog_seconds", *a)
                    .with("aws_seconds", *b)
                    .with("ratio", b / a)
                    .into()
            })
            .collect();
        let o = Object::new()
            .with("workload", "s3-export")
            .with("peer", "aws s3 sync")
            .with("plaintext_bytes", plaintext as i64)
            .with("sessions", sessions as i64)
            .with("rounds", Value::Array(per_round))
            .with("sessionlog_seconds", ours)
            .with("aws_seconds", theirs)
            .with("sessionlog_mb_per_s", mbps(ours))
            .with("aws_mb_per_s", mbps(theirs))
            .with(
                "read_back",
                Object::new()
                    .with("sessions", read.sessions as i64)
                    .with("median_bytes", read.median_bytes as i64)
                    .with("held_ms", read.held_ms)
                    .with("archived_ms", read.archived_ms),
            )
            .with("ratios", Object::new().with("export_vs_aws_s3_sync", ratio));
        json_line(&mut out, o)?;
    } else {
        writeln!(out, "{sessions} sessions, {:.1} MB", plaintext as f64 / 1e6)?;
        writeln!(out, "aws s3 sync        {:8.1} MB/s", mbps(theirs))?;
        writeln!(
            out,
            "export-all --to    {:8.1} MB/s  ({ratio:.2}x aws s3 sync, median of {} rounds)",
            mbps(ours),
            rounds.len()
        )?;
        writeln!(
            out,
            "messages of a {} byte session: {:.1} ms held, {:.1} ms archived",
            read.median_bytes, read.held_ms, read.archived_ms
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
