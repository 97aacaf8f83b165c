//! `sessionlog export` (one session, exactly) and `export-all` (the whole store as a DSH root).

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use sessionlog_engine::{ExportFormat, Store};

use crate::cli::ExportFormatArg;

/// The engine's format for `format`: `None` (each session as stored) for `stored`.
pub fn engine_format(format: ExportFormatArg) -> Option<ExportFormat> {
    match format {
        ExportFormatArg::Stored => None,
        ExportFormatArg::Jsonl => Some(ExportFormat::Jsonl),
        ExportFormatArg::JsonlZstd => Some(ExportFormat::JsonlZstd),
    }
}

pub fn run(
    store: &Store,
    id: &str,
    format: ExportFormatArg,
    generation: Option<u32>,
    output: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let format = engine_format(format);
    let export = |out: &mut dyn Write| match generation {
        Some(version) => store.export_generation(id, version, format, out),
        None => store.export(id, format, out),
    };
    match output {
        None => {
            let mut out = BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
            export(&mut out)?;
            out.flush()?;
        }
        Some(path) => {
            // Write beside the target and rename, so a failed export never leaves a partial file.
            let tmp = path.with_extension("sessionlog-partial");
            let f = std::fs::File::create(&tmp)
                .with_context(|| format!("creating {}", tmp.display()))?;
            let mut out = BufWriter::with_capacity(1 << 20, f);
            let written = export(&mut out).and_then(|n| {
                out.flush().map_err(|source| sessionlog_engine::Error::Io {
                    path: tmp.clone(),
                    source,
                })?;
                Ok(n)
            });
            if let Err(e) = written {
                let _ = std::fs::remove_file(&tmp);
                return Err(e.into());
            }
            std::fs::rename(&tmp, path)
                .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Export every session into a DSH root, one worker per core.
pub fn run_all(store: &Store, out: &Path, format: ExportFormatArg) -> anyhow::Result<ExitCode> {
    let format = engine_format(format);
    let ids = store.ids()?;
    let bar = crate::cmd::session_bar(ids.len() as u64, "exporting");
    let results = sessionlog_tools_common::par::map(&ids, |id| {
        let r = store
            .export_to_root(out, id, format)
            .map_err(|e| format!("session \"{id}\": {e}"));
        bar.inc(1);
        r
    });
    bar.finish_and_clear();
    let bytes: u64 = results
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|(_, n)| n)
        .sum();
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    for f in &failures {
        eprintln!("failed {f}");
    }
    println!(
        "exported {} sessions ({} bytes) to {}, {} failed",
        ids.len() - failures.len(),
        bytes,
        out.display(),
        failures.len()
    );
    Ok(if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
