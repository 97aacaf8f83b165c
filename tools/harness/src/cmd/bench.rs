//! `sessionlog-harness bench`: workloads measured side by side with their peers in the same run.
//!
//! Absolute times on shared machines swing by large factors; the figures that count are the
//! `ratios` (sessionlog's advantage over the peer, higher is better), taken in one run.
//!
//! Workloads: `import-export` (against `cat`) and `hosting` (many sessions appending durably,
//! against DSH's JSONL and SQLite backends).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{bail, Context};
use sessionlog_codec::json::{JsString, Object, Value};
use sessionlog_engine::{ImportOptions, Options, Store};
use sessionlog_harness::disk_cgroup::{DiskCgroup, Limit};
use sessionlog_harness::gen::{generate, session_batches, session_bytes, GenOptions, LogFormat};
use sessionlog_harness::hosting::fleet::processes;
use sessionlog_harness::hosting::fleet::worker::{self, WorkerSpec};
use sessionlog_harness::hosting::sessionlog::SessionlogHost;
use sessionlog_harness::hosting::{self, output, peers::Peer, FeedPool, Host, Workload};
use sessionlog_tools_common::export::export_stream;
use sessionlog_tools_common::import::{collect_inputs, import_all};
use sessionlog_tools_common::output::json_line;

/// Files per `cat` invocation (keeps argument lists short).
const CAT_BATCH: usize = 512;

/// Import and export a generated corpus of at least `mb` MB (of plaintext), side by side with
/// `cat` of the same files, or with `zstd -dc` when the corpus is `.jsonl.zstd` (header frame plus
/// one Node-identical frame per write batch, as DSH writes them). Both run one worker per core,
/// as the CLI's `import` and `export-all` do; the export writes one stream, the sessions in
/// import order, which must equal the files `cat` reads.
pub fn import_export(
    mb: u64,
    events: u64,
    zstd: bool,
    dir: Option<PathBuf>,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let (work, remove_after) = crate::cmd::work_dir(dir, "bench");
    let corpus = work.join("corpus");
    let target = mb * 1_000_000;
    let opts = GenOptions {
        events_per_session: events,
        torn_fraction: 0.0,
        ..GenOptions::default()
    };
    let estimate = session_bytes(0, &opts).len().max(1) as u64;
    let sessions = target.div_ceil(estimate) + 1;
    let opts = GenOptions { sessions, ..opts };
    eprintln!(
        "generating ~{mb} MB ({sessions} sessions) in {}",
        corpus.display()
    );
    let bytes = if zstd {
        generate_zstd(&corpus, &opts)?
    } else {
        generate(&corpus, &opts)?.bytes
    };
    let (inputs, _) = collect_inputs(std::slice::from_ref(&corpus))?;
    let files: Vec<PathBuf> = inputs.iter().map(|i| i.path.clone()).collect();
    let peer = if zstd {
        ["zstd", "-dcq"].as_slice()
    } else {
        ["cat"].as_slice()
    };

    // The files as stored (the export must reproduce them), which also warms the page cache so
    // both sides read the same cached files.
    let reference = work.join("reference.out");
    run_peer(&["cat"], &files, &reference)?;
    let cat_out = work.join("peer.out");
    let t = Instant::now();
    run_peer(peer, &files, &cat_out)?;
    let cat_s = t.elapsed().as_secs_f64();

    let store_dir = work.join("store");
    let store = Store::open(&store_dir, Options::default())?;
    let t = Instant::now();
    let options = ImportOptions {
        defer_sync: true,
        ..ImportOptions::default()
    };
    let results = import_all(&store, &inputs, &options, &|_| {});
    store.sync()?;
    let import_s = t.elapsed().as_secs_f64();
    let mut ids = Vec::with_capacity(results.len());
    for (f, r) in files.iter().zip(results) {
        ids.push(r.with_context(|| format!("importing {}", f.display()))?.id);
    }

    // Exported twice: at once, as an export right after a bulk import meets the store (its
    // files written past the page cache, its last flushes and compactions running), and again
    // once the store is at rest, its files read from the page cache as the peer reads the
    // corpus.
    let export_out = work.join("export.out");
    let export = || -> anyhow::Result<(f64, bool)> {
        let t = Instant::now();
        {
            let mut out = BufWriter::with_capacity(1 << 20, File::create(&export_out)?);
            export_stream(&store, &ids, None, &mut out)?;
            out.flush()?;
        }
        let took = t.elapsed().as_secs_f64();
        Ok((took, files_equal(&reference, &export_out)?))
    };
    let (export_first_s, identical_first) = export()?;
    let t = Instant::now();
    store.settle()?;
    let settle_s = t.elapsed().as_secs_f64();
    let (export_s, identical_at_rest) = export()?;
    let identical = identical_first && identical_at_rest;
    drop(store);
    if remove_after {
        std::fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    }
    if !identical {
        bail!("exported bytes differ from the corpus: the benchmark is void");
    }

    let mbps = |s: f64| bytes as f64 / 1e6 / s;
    let peer_name = peer[0];
    let figures = Object::new()
        .with(
            "workload",
            if zstd {
                "import-export-zstd"
            } else {
                "import-export"
            },
        )
        .with("peer", peer.join(" ").as_str())
        .with("plaintext_bytes", bytes as i64)
        .with("files", files.len() as i64)
        .with("peer_seconds", cat_s)
        .with("import_seconds", import_s)
        .with("export_first_seconds", export_first_s)
        .with("settle_seconds", settle_s)
        .with("export_seconds", export_s)
        .with("peer_mb_per_s", mbps(cat_s))
        .with("import_mb_per_s", mbps(import_s))
        .with("export_first_mb_per_s", mbps(export_first_s))
        .with("export_mb_per_s", mbps(export_s))
        .with("export_identical", true)
        .with(
            "ratios",
            Value::Object({
                let mut ratios = Object::new();
                ratios.insert(
                    JsString::from(format!("export_vs_{peer_name}")),
                    (mbps(export_s) / mbps(cat_s)).into(),
                );
                ratios.insert(
                    JsString::from(format!("export_first_vs_{peer_name}")),
                    (mbps(export_first_s) / mbps(cat_s)).into(),
                );
                ratios.insert(
                    JsString::from(format!("import_vs_{peer_name}")),
                    (mbps(import_s) / mbps(cat_s)).into(),
                );
                ratios
            }),
        );
    let mut out = std::io::stdout().lock();
    if as_json {
        json_line(&mut out, figures)?;
    } else {
        writeln!(out, "{} files, {:.1} MB", files.len(), bytes as f64 / 1e6)?;
        writeln!(out, "{peer_name:<7} {:8.1} MB/s (plaintext)", mbps(cat_s))?;
        writeln!(
            out,
            "import  {:8.1} MB/s  ({:.2}x peer)",
            mbps(import_s),
            mbps(import_s) / mbps(cat_s)
        )?;
        writeln!(
            out,
            "export  {:8.1} MB/s  ({:.2}x peer) right after the import",
            mbps(export_first_s),
            mbps(export_first_s) / mbps(cat_s)
        )?;
        writeln!(
            out,
            "export  {:8.1} MB/s  ({:.2}x peer) at rest, from the page cache ({settle_s:.1} s to settle)",
            mbps(export_s),
            mbps(export_s) / mbps(cat_s)
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What `sessionlog-harness bench hosting` runs.
pub struct HostingBench {
    /// Sessions, threads and duration.
    pub workload: Workload,
    /// Mean events per generated session.
    pub events: u64,
    /// The hosted sessions' log format.
    pub format: LogFormat,
    /// sessionlog's store options (the global flags); their durability is every system's.
    pub store: Options,
    /// The global flags that open sessionlog's stores with `store` (passed to host processes).
    pub global_flags: Vec<String>,
    /// The host-process counts to run sessionlog as a fleet on PostgreSQL with, after
    /// sessionlog (none: no fleet).
    pub fleet_hosts: Vec<usize>,
    /// The peers run after sessionlog.
    pub peers: Vec<Peer>,
    /// The disk's write-IOPS limit, or `None` for the raw disk.
    pub write_iops: Option<u64>,
    /// Working directory (default: a temp dir, removed after).
    pub dir: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    pub as_json: bool,
    /// Times the whole sequence (sessionlog, then the peers) runs; figures and ratios are
    /// reported per round and as medians over the rounds.
    pub rounds: usize,
    /// Where to write sessionlog's metrics (Prometheus text) after its run.
    pub metrics: Option<PathBuf>,
}

/// The multi-session hosting benchmark: each system in turn (sessionlog, then a fleet of H host
/// processes on PostgreSQL for each H of `fleet_hosts`, then the peers) runs the same workload on
/// the same generated sessions (in `format`), in its own subdirectory of the work dir; `rounds`
/// times over, each round in fresh directories.
///
/// The whole benchmark runs inside a disk cgroup on the work dir's disk: with `write_iops`, one
/// limiting the disk to that many write requests per second (refused, never run unthrottled,
/// where it cannot be set); without, one that only counts the writes, when it can be made.
pub fn hosting(bench: HostingBench) -> anyhow::Result<ExitCode> {
    let HostingBench {
        ref workload,
        events,
        format,
        ref store,
        ref global_flags,
        ref fleet_hosts,
        ref peers,
        write_iops,
        dir,
        as_json,
        rounds,
        ref metrics,
    } = bench;
    workload.validate()?;
    anyhow::ensure!(rounds >= 1, "rounds must be at least 1");
    let durability = match store.durability {
        sessionlog_engine::Durability::Sync => hosting::Durability::Sync,
        sessionlog_engine::Durability::Buffered => hosting::Durability::Buffered,
    };
    let (work, remove_after) = crate::cmd::work_dir(dir, "hosting");
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let disk = disk_model(&work, write_iops)?;
    let model = disk.as_ref().map(|d| output::DiskModel {
        device: d.device().to_string(),
        cgroup: d.hierarchy().name(),
        write_iops,
    });
    for &hosts in fleet_hosts {
        // Checked before anything runs, not after the embedded store's run.
        processes::shares(workload, hosts)?;
    }
    let pool = hosting_pool(workload.sessions, events, format)?;
    let member = disk
        .as_ref()
        .map(|d| d.enter(std::process::id()))
        .transpose()?;
    if let Some(m) = &model {
        eprintln!(
            "disk {} in a cgroup {} block throttle: {}",
            m.device,
            m.cgroup,
            write_iops.map_or_else(
                || "writes counted, no limit".to_owned(),
                |n| { format!("{n} write IOPS") }
            )
        );
    }
    let mut all = Vec::with_capacity(rounds);
    let mut direct_io = false;
    for round in 0..rounds {
        let dir = |name: &str| match rounds {
            1 => fresh_dir(&work, name),
            _ => fresh_dir(&work, &format!("round-{round}-{name}")),
        };
        let mut reports = Vec::with_capacity(peers.len() + 1);
        let host = SessionlogHost::open(&dir("sessionlog")?, store.clone())?;
        direct_io = host.direct_io();
        reports.push(run_host(&host, &pool, workload, &work, disk.as_ref())?);
        if let Some(path) = metrics {
            std::fs::write(path, host.metrics()?.to_prometheus())
                .with_context(|| format!("writing the metrics to {}", path.display()))?;
        }
        drop(host);
        for &hosts in fleet_hosts {
            let name = processes::system_name(hosts);
            eprintln!(
                "{name}: {hosts} host process(es) sharing {} sessions and {} threads, {:.1} s after \
                 {:.1} s unmeasured, on one PostgreSQL",
                workload.sessions,
                workload.threads,
                workload.duration.as_secs_f64(),
                workload.warmup.as_secs_f64(),
            );
            let fleet = processes::FleetRun {
                hosts,
                workload,
                dir: &dir(&name)?,
                disk: disk.as_ref(),
            };
            let spawn = |spec: &WorkerSpec| {
                fleet_host_command(spec, workload.sessions, events, format, global_flags)
            };
            reports.push(processes::run(&fleet, &spawn)?);
        }
        for peer in peers {
            // Each system runs alone: opened just before its run, closed right after.
            let host = peer.open(&dir(peer.name())?, durability, pool.format())?;
            reports.push(run_host(
                host.as_ref(),
                &pool,
                workload,
                &work,
                disk.as_ref(),
            )?);
        }
        all.push(reports);
    }
    drop(member);
    drop(disk);
    if remove_after {
        std::fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    }
    let mut out = std::io::stdout().lock();
    if as_json {
        json_line(
            &mut out,
            output::figures_over_rounds(workload, durability, &pool, model.as_ref(), &all)
                .with("wal_recycling", store.recycles_wal())
                .with("blob_files", store.blob_files)
                .with("direct_io", direct_io),
        )?;
    } else {
        let table = output::table_over_rounds(workload, durability, &pool, model.as_ref(), &all);
        out.write_all(table.as_bytes())?;
        if !store.recycles_wal() {
            writeln!(
                out,
                "sessionlog creates a new WAL file per memtable (--no-wal-recycling, or buffered)"
            )?;
        }
        if store.blob_files {
            writeln!(
                out,
                "sessionlog keeps the events' blocks in blob files (--blob-files)"
            )?;
        }
        if !direct_io {
            writeln!(
                out,
                "sessionlog flushes and compacts through the page cache (--no-direct-io, or a \
                 filesystem without O_DIRECT)"
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The disk cgroup a benchmark runs in: limiting the disk holding `work` to `write_iops` write
/// requests per second (refused, never run unthrottled, where that cannot be set), or, without
/// a limit, only counting its writes where a cgroup can be made.
pub fn disk_model(work: &Path, write_iops: Option<u64>) -> anyhow::Result<Option<DiskCgroup>> {
    Ok(match write_iops {
        Some(n) => Some(
            DiskCgroup::create(work, Limit::WriteIops(n)).with_context(|| {
                format!(
                    "--write-iops {n}: cannot limit the write IOPS of the disk holding {}; \
                     refusing to run unthrottled",
                    work.display()
                )
            })?,
        ),
        None => DiskCgroup::create(work, Limit::CountOnly)
            .inspect_err(|e| eprintln!("device writes not counted: {e:#}"))
            .ok(),
    })
}

/// `work/name`, which must not hold data from an earlier run (sessions would collide).
fn fresh_dir(work: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let dir = work.join(name);
    if dir
        .read_dir()
        .is_ok_and(|mut entries| entries.next().is_some())
    {
        bail!(
            "{} holds an earlier run's data: remove it or pick another --dir",
            dir.display()
        );
    }
    Ok(dir)
}

/// Run one system of the hosting benchmark, saying so on stderr.
fn run_host(
    host: &dyn Host,
    pool: &FeedPool,
    workload: &Workload,
    work: &Path,
    disk: Option<&DiskCgroup>,
) -> anyhow::Result<hosting::Report> {
    eprintln!(
        "{}: {} sessions, {} threads, {:.1} s after {:.1} s unmeasured, in {}",
        host.name(),
        workload.sessions,
        workload.threads,
        workload.duration.as_secs_f64(),
        workload.warmup.as_secs_f64(),
        work.display()
    );
    let report = hosting::run(host, pool, workload, disk)?;
    host.verify()?;
    Ok(report)
}

/// The sessions a hosting run of `sessions` slots replays (the same in every process of a run).
fn hosting_pool(sessions: usize, events: u64, format: LogFormat) -> anyhow::Result<FeedPool> {
    let opts = GenOptions {
        events_per_session: events,
        torn_fraction: 0.0,
        ..GenOptions::default()
    };
    FeedPool::generate(sessions, &opts, format)
}

/// The command running this binary as host process `spec` of a fleet run (the hidden
/// `bench fleet-host`) of `sessions` slots in all.
fn fleet_host_command(
    spec: &WorkerSpec,
    sessions: usize,
    events: u64,
    format: LogFormat,
    global_flags: &[String],
) -> Command {
    // /proc/self/exe still runs this binary if a rebuild replaces its file during the run.
    let exe = Path::new("/proc/self/exe");
    let mut c = Command::new(exe);
    c.args(global_flags)
        .args([
            "bench",
            "fleet-host",
            "--url",
            &spec.url,
            "--host",
            &spec.host,
        ])
        .arg("--dir")
        .arg(&spec.dir)
        .args([
            "--pool-sessions",
            &sessions.to_string(),
            "--first-slot",
            &spec.workload.first_slot.to_string(),
            "--sessions",
            &spec.workload.sessions.to_string(),
            "--threads",
            &spec.workload.threads.to_string(),
            "--seconds",
            &spec.workload.duration.as_secs_f64().to_string(),
            "--warmup",
            &spec.workload.warmup.as_secs_f64().to_string(),
            "--events",
            &events.to_string(),
            "--format",
            match format {
                LogFormat::V0 => "v0",
                LogFormat::V4 => "v4",
            },
        ]);
    c
}

/// `sessionlog-harness bench fleet-host`: one host process of a fleet run, talking to its
/// parent on standard input and output ([`worker::serve`]).
pub fn fleet_host(
    spec: &WorkerSpec,
    pool_sessions: usize,
    events: u64,
    format: LogFormat,
    store: Options,
) -> anyhow::Result<ExitCode> {
    let pool = hosting_pool(pool_sessions, events, format)?;
    worker::serve(
        spec,
        &pool,
        store,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Write a `.jsonl.zstd` corpus as a DSH session root
/// (`<dir>/--<project>--/<id>/session.jsonl.zstd`): per session a header frame and one frame per
/// write batch. Returns the plaintext size.
fn generate_zstd(dir: &Path, opts: &GenOptions) -> anyhow::Result<u64> {
    let mut compressor = sessionlog_codec::format::zstd::FrameCompressor::new()?;
    let mut plain = 0u64;
    for i in 0..opts.sessions {
        let feed = session_batches(i, opts);
        let header = format!("{}\n", feed.header_line);
        let mut bytes = compressor.compress(header.as_bytes())?;
        plain += header.len() as u64;
        for b in &feed.batches {
            compressor.compress_into(b.text.as_bytes(), &mut bytes)?;
            plain += b.text.len() as u64;
        }
        let header_value = sessionlog_codec::json::parse(&feed.header_line)?;
        let cwd = header_value
            .as_object()
            .and_then(|o| o.get("cwd"))
            .and_then(Value::as_str);
        let (project, session) =
            sessionlog_codec::format::dsh_path::log_path_components(cwd, feed.id.as_str())?;
        let session_dir = dir.join(project).join(session);
        std::fs::create_dir_all(&session_dir)?;
        std::fs::write(
            session_dir.join(sessionlog_codec::format::dsh_path::ZSTD_FILE_NAME),
            bytes,
        )?;
    }
    Ok(plain)
}

/// `PEER FILES > out` (`cat` or `zstd -dc`), in batches of files.
fn run_peer(peer: &[&str], files: &[PathBuf], out: &Path) -> anyhow::Result<()> {
    let sink = File::create(out)?;
    for batch in files.chunks(CAT_BATCH) {
        let status = Command::new(peer[0])
            .args(&peer[1..])
            .args(batch)
            .stdout(Stdio::from(sink.try_clone()?))
            .status()
            .with_context(|| format!("running {}", peer[0]))?;
        if !status.success() {
            bail!("{} failed: {status}", peer[0]);
        }
    }
    Ok(())
}

fn files_equal(a: &Path, b: &Path) -> anyhow::Result<bool> {
    use std::io::Read;
    let (mut fa, mut fb) = (File::open(a)?, File::open(b)?);
    if fa.metadata()?.len() != fb.metadata()?.len() {
        return Ok(false);
    }
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let n = fa.read(&mut ba)?;
        if n == 0 {
            return Ok(true);
        }
        fb.read_exact(&mut bb[..n])?;
        if ba[..n] != bb[..n] {
            return Ok(false);
        }
    }
}
