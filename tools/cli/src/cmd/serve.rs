//! `serve`: the web console (the `sessionlog-console` crate), until interrupted.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;

use sessionlog_console::Config;
use sessionlog_engine::Options;

use crate::cmd::objects::ObjectStorage;

/// Serve the console over the store at `db` (archived sessions fetched through `objects`); the
/// address is printed (and flushed) once bound.
pub fn run(
    db: &Path,
    options: &Options,
    objects: &ObjectStorage,
    listen: SocketAddr,
    token: Option<String>,
) -> anyhow::Result<ExitCode> {
    let config = Config { listen, token };
    sessionlog_console::serve(db, options.clone(), Some(objects.sources()), config, |at| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{at}");
        let _ = out.flush();
    })?;
    Ok(ExitCode::SUCCESS)
}
