//! `serve`: the web console (the `sessionlog-console` crate), until interrupted.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;

use sessionlog_console::Config;
use sessionlog_engine::Options;

/// Serve the console over the store at `db`; the address is printed (and flushed) once bound.
pub fn run(
    db: &Path,
    options: &Options,
    listen: SocketAddr,
    token: Option<String>,
) -> anyhow::Result<ExitCode> {
    sessionlog_console::serve(db, options.clone(), Config { listen, token }, |at| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{at}");
        let _ = out.flush();
    })?;
    Ok(ExitCode::SUCCESS)
}
