//! `sessionlog-harness bench console`: the web console's speed in chromium, measured by the
//! browser test's `perf.mjs` (the Performance API in the page) against `sessionlog serve` (the
//! binary beside this one) over the store given. Prints the script's one JSON object.

use std::path::Path;
use std::process::{Command, ExitCode};

use anyhow::{bail, Context};

/// Run the measure on session `id` of the store at `db`.
pub fn run(db: &Path, id: &str, moves: u32, script: &Path) -> anyhow::Result<ExitCode> {
    if !script.is_file() {
        bail!(
            "{}: no such measuring script (run from the checkout, or pass --script)",
            script.display()
        );
    }
    let harness = std::env::current_exe().context("locating the harness binary")?;
    let sessionlog = harness.with_file_name("sessionlog");
    if !sessionlog.is_file() {
        bail!(
            "{}: no sessionlog binary beside the harness (cargo build --release builds both)",
            sessionlog.display()
        );
    }
    let status = Command::new("node")
        .arg(script)
        .arg("--bin")
        .arg(&sessionlog)
        .arg("--db")
        .arg(db)
        .args(["--id", id, "--moves", &moves.to_string()])
        .status()
        .context("running node (Node 22 must be on PATH)")?;
    if !status.success() {
        bail!("{} failed ({status})", script.display());
    }
    Ok(ExitCode::SUCCESS)
}
