//! `sessionlog-harness bench space`: the disk a compacted store takes for a corpus, against the
//! files DSH itself keeps of the same sessions.
//!
//! Per format (V0, V4): generate S sessions, import them into a fresh store, compact it fully,
//! and weigh its live files (SSTs and blob files, every column family) against
//! - DSH's `.jsonl.zstd` root of the same sessions, as `export-all --format jsonl.zstd` writes it
//!   (a header frame plus one frame per write batch: DSH's own zstd files);
//! - `zstd -3` of the whole corpus as one stream (what a compressor does with no per-batch
//!   framing and no index: a floor, not a peer).
//!
//! Then, for V0, the same after `migrate --all`: every session holds its V0 source, frozen, and
//! its V4 successor; DSH's root of it holds both files, and the stream both texts.
//!
//! Ratios are peer bytes ÷ store bytes: higher is better, above 1 the store is the smaller.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context};
use sessionlog_codec::json::{JsString, Object, Value};
use sessionlog_engine::Options;
use sessionlog_engine::{ExportFormat, ImportOptions, MigrateOptions, MigrationOutcome, Store};
use sessionlog_harness::gen::{host_options, session, session_v4_each, GenOptions, LogFormat};
use sessionlog_tools_common::import::{collect_inputs, import_all};
use sessionlog_tools_common::output::json_line;

/// What `bench space` measures.
pub struct SpaceBench {
    /// Sessions per format.
    pub sessions: u64,
    /// Mean events per generated session.
    pub events: u64,
    /// The formats to measure.
    pub formats: Vec<LogFormat>,
    /// The store options (the global flags).
    pub store: Options,
    /// Working directory (default: a temp dir, removed after).
    pub dir: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    pub as_json: bool,
}

/// The bytes of one store state and of its peers.
struct Weighed {
    /// What was weighed (`v0`, `v0_migrated`, `v4`).
    name: String,
    /// The sessions' plaintext (every generation's).
    plaintext: u64,
    /// The compacted store's live files.
    store: u64,
    /// The same by column family.
    column_families: Vec<(&'static str, u64)>,
    /// DSH's `.jsonl.zstd` root of the same sessions.
    dsh_zstd_root: u64,
    /// `zstd -3` of the plaintext as one stream.
    zstd_3: u64,
    /// The seconds `Store::compact` took to bring the store to this state.
    compact_seconds: f64,
}

impl Weighed {
    fn json(&self) -> Value {
        let mut cfs = Object::new();
        for (name, bytes) in &self.column_families {
            cfs.insert(JsString::from(*name), (*bytes as i64).into());
        }
        Value::Object(
            Object::new()
                .with("plaintext_bytes", self.plaintext as i64)
                .with("store_bytes", self.store as i64)
                .with("store_bytes_by_column_family", Value::Object(cfs))
                .with("dsh_zstd_root_bytes", self.dsh_zstd_root as i64)
                .with("zstd_3_stream_bytes", self.zstd_3 as i64)
                .with("compact_seconds", self.compact_seconds)
                .with(
                    "store_over_dsh_zstd_root",
                    self.store as f64 / self.dsh_zstd_root as f64,
                ),
        )
    }
}

pub fn run(bench: SpaceBench) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(bench.sessions >= 1, "--sessions must be at least 1");
    let (work, remove_after) = crate::cmd::work_dir(bench.dir.clone(), "space");
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let mut rows = Vec::new();
    for &format in &bench.formats {
        rows.extend(weigh_format(
            &bench,
            format,
            &work.join(format_name(format)),
        )?);
    }
    if remove_after {
        std::fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    }
    let mut out = std::io::stdout().lock();
    if bench.as_json {
        let mut figures = Object::new();
        let mut ratios = Object::new();
        for w in &rows {
            figures.insert(JsString::from(w.name.as_str()), w.json());
            ratios.insert(
                JsString::from(format!("{}_vs_dsh_zstd_root", w.name)),
                (w.dsh_zstd_root as f64 / w.store as f64).into(),
            );
            ratios.insert(
                JsString::from(format!("{}_vs_zstd_3_stream", w.name)),
                (w.zstd_3 as f64 / w.store as f64).into(),
            );
        }
        let o = Object::new()
            .with("workload", "space")
            .with("sessions", bench.sessions as i64)
            .with("events_per_session", bench.events as i64)
            .with("results", Value::Object(figures))
            .with("ratios", Value::Object(ratios));
        json_line(&mut out, o)?;
    } else {
        let mb = |b: u64| b as f64 / 1e6;
        for w in &rows {
            writeln!(
                out,
                "{:<12} plaintext {:8.1} MB  store {:7.2} MB  DSH .jsonl.zstd root {:7.2} MB ({:.2}x the store)  zstd -3 stream {:7.2} MB ({:.2}x)",
                w.name,
                mb(w.plaintext),
                mb(w.store),
                mb(w.dsh_zstd_root),
                w.dsh_zstd_root as f64 / w.store as f64,
                mb(w.zstd_3),
                w.zstd_3 as f64 / w.store as f64,
            )?;
            let cfs: Vec<String> = w
                .column_families
                .iter()
                .map(|(name, bytes)| format!("{name} {:.2} MB", mb(*bytes)))
                .collect();
            writeln!(
                out,
                "{:<12} store by column family: {}; compacted in {:.1} s",
                "",
                cfs.join(", "),
                w.compact_seconds
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn format_name(format: LogFormat) -> &'static str {
    match format {
        LogFormat::V0 => "v0",
        LogFormat::V4 => "v4",
    }
}

/// Generate, import, compact and weigh one format's corpus in `work`; for V0, again after
/// `migrate --all`.
fn weigh_format(
    bench: &SpaceBench,
    format: LogFormat,
    work: &Path,
) -> anyhow::Result<Vec<Weighed>> {
    let name = format_name(format);
    let corpus = work.join("corpus");
    let opts = GenOptions {
        sessions: bench.sessions,
        events_per_session: bench.events,
        torn_fraction: 0.0,
        ..GenOptions::default()
    };
    eprintln!(
        "space: generating {} {name} sessions in {}",
        bench.sessions,
        corpus.display()
    );
    let files = write_corpus(&corpus, &opts, format)?;
    let store = Store::open(work.join("store"), host_options(bench.store.clone()))?;
    let (inputs, refused) = collect_inputs(std::slice::from_ref(&corpus))?;
    if let Some((path, e)) = refused.first() {
        bail!("{}: {e}", path.display());
    }
    let options = ImportOptions {
        defer_sync: true,
        ..ImportOptions::default()
    };
    let mut ids = Vec::with_capacity(inputs.len());
    for (input, r) in inputs
        .iter()
        .zip(import_all(&store, &inputs, &options, &|_| {}))
    {
        let report = r.with_context(|| format!("importing {}", input.path.display()))?;
        anyhow::ensure!(
            report.verdict == sessionlog_engine::Verdict::Clean,
            "{}: verdict {}",
            input.path.display(),
            report.verdict
        );
        ids.push(report.id);
    }
    store.sync()?;
    let compact_seconds = timed_compact(&store)?;
    let root = work.join("dsh-root");
    let mut dsh_zstd_root = 0;
    for id in &ids {
        dsh_zstd_root += store
            .export_to_root(&root, id, Some(ExportFormat::JsonlZstd))?
            .1;
    }
    let mut rows = vec![weigh(&store, name, &files, dsh_zstd_root, compact_seconds)?];
    if format == LogFormat::V0 {
        eprintln!("space: migrating {} sessions to V4", ids.len());
        store.migrate_all(&MigrateOptions::default(), &mut |outcome| {
            if let MigrationOutcome::Refused(id, reason) = outcome {
                eprintln!("space: migration of \"{id}\" refused: {reason}");
            }
        })?;
        let compact_seconds = timed_compact(&store)?;
        // DSH's root after its own migration: the V0 files it had, and beside each its V4
        // successor as DSH's migration writes it (a header frame, then one frame).
        let successors = work.join("successors");
        std::fs::create_dir_all(&successors)?;
        let mut texts = files.clone();
        let mut dsh_migrated = dsh_zstd_root;
        for id in &ids {
            dsh_migrated +=
                store.export(id, Some(ExportFormat::JsonlZstd), &mut std::io::sink())?;
            let path = successors.join(format!("{id}.v4.jsonl"));
            let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
            store.export(id, Some(ExportFormat::Jsonl), &mut out)?;
            out.flush()?;
            texts.push(path);
        }
        rows.push(weigh(
            &store,
            &format!("{name}_migrated"),
            &texts,
            dsh_migrated,
            compact_seconds,
        )?);
    }
    Ok(rows)
}

/// `Store::compact`, and the seconds it took.
fn timed_compact(store: &Store) -> anyhow::Result<f64> {
    let started = std::time::Instant::now();
    store.compact()?;
    Ok(started.elapsed().as_secs_f64())
}

/// Weigh the compacted `store` beside DSH's zstd root of its sessions (`dsh_zstd_root` bytes)
/// and `zstd -3` of their `texts`.
fn weigh(
    store: &Store,
    name: &str,
    texts: &[PathBuf],
    dsh_zstd_root: u64,
    compact_seconds: f64,
) -> anyhow::Result<Weighed> {
    let column_families = store.column_family_bytes()?;
    let mut plaintext = 0;
    for f in texts {
        plaintext += std::fs::metadata(f)?.len();
    }
    Ok(Weighed {
        name: name.to_owned(),
        plaintext,
        store: column_families.iter().map(|(_, n)| n).sum(),
        column_families,
        dsh_zstd_root,
        zstd_3: zstd_stream_bytes(texts)?,
        compact_seconds,
    })
}

/// Write the corpus's sessions as `<id>.jsonl` (V0) or `<id>.v4.jsonl` (V4) in `dir`; their
/// paths, in order.
fn write_corpus(dir: &Path, opts: &GenOptions, format: LogFormat) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut files = Vec::new();
    for index in 0..opts.sessions {
        let (id, bytes) = match format {
            LogFormat::V0 => {
                let s = session(index, opts);
                (format!("{}.jsonl", s.id), s.bytes)
            }
            LogFormat::V4 => {
                let mut body = Vec::new();
                let (id, header) = session_v4_each(index, opts, &mut |b| {
                    body.extend_from_slice(b.text.as_bytes())
                });
                let mut bytes = header.into_bytes();
                bytes.push(b'\n');
                bytes.extend_from_slice(&body);
                (format!("{id}.v4.jsonl"), bytes)
            }
        };
        let path = dir.join(id);
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        files.push(path);
    }
    Ok(files)
}

/// The size of `zstd -3` of `files` concatenated into one stream.
fn zstd_stream_bytes(files: &[PathBuf]) -> anyhow::Result<u64> {
    let mut child = Command::new("zstd")
        .args(["-3", "-c", "-q"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("running zstd")?;
    let mut stdin = child.stdin.take().context("zstd's stdin")?;
    let mut stdout = child.stdout.take().context("zstd's stdout")?;
    let counter = std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    for f in files {
        let mut input =
            std::fs::File::open(f).with_context(|| format!("reading {}", f.display()))?;
        std::io::copy(&mut input, &mut stdin).context("feeding zstd")?;
    }
    drop(stdin);
    let bytes = counter
        .join()
        .map_err(|_| anyhow::anyhow!("the zstd reader panicked"))?
        .context("reading zstd's output")?;
    let status = child.wait().context("waiting for zstd")?;
    if !status.success() {
        bail!("zstd failed: {status}");
    }
    Ok(bytes)
}
