//! `sessionlog export`: the stored bytes, exactly.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use sessionlog_engine::{ExportFormat, Store};

use crate::cli::FormatArg;

pub fn run(
    store: &Store,
    id: &str,
    format: Option<FormatArg>,
    output: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let format = format.map(|f| match f {
        FormatArg::Jsonl => ExportFormat::Jsonl,
        FormatArg::JsonlZstd => ExportFormat::JsonlZstd,
    });
    match output {
        None => {
            let mut out = BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
            store.export(id, format, &mut out)?;
            out.flush()?;
        }
        Some(path) => {
            // Write beside the target and rename, so a failed export never leaves a partial file.
            let tmp = path.with_extension("sessionlog-partial");
            let f = std::fs::File::create(&tmp)
                .with_context(|| format!("creating {}", tmp.display()))?;
            let mut out = BufWriter::with_capacity(1 << 20, f);
            let written = store.export(id, format, &mut out).and_then(|n| {
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
