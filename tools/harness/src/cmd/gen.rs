//! `sessionlog-harness gen`: the generator's front end, a corpus of session files in a directory.

use std::path::Path;
use std::process::ExitCode;

use sessionlog_harness::gen::{generate, GenOptions};

pub fn run(out: &Path, sessions: u64, seed: u64, events: Option<u64>) -> anyhow::Result<ExitCode> {
    let mut opts = GenOptions {
        sessions,
        seed,
        ..GenOptions::default()
    };
    if let Some(e) = events {
        opts.events_per_session = e;
    }
    let report = generate(out, &opts)?;
    println!(
        "wrote {} sessions, {} events, {} bytes to {}",
        report.files,
        report.events,
        report.bytes,
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}
