//! `serve`: the web console (the `sessionlog-console` crate), until interrupted, over a store
//! of its own or, with `--cluster`, the fleet's sessions.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;

use sessionlog_console::Config;

use crate::cmd::objects::ObjectStorage;
use crate::cmd::open::Opener;

/// Serve the console over the host `opener` names (archived sessions fetched through
/// `objects`); the address is printed (and flushed) once bound.
pub fn run(
    opener: &Opener,
    objects: &ObjectStorage,
    listen: SocketAddr,
    token: Option<String>,
) -> anyhow::Result<ExitCode> {
    let config = Config { listen, token };
    // Refused before the store or the fleet is opened.
    sessionlog_console::check_listen(&config)?;
    let host = opener.console_host()?;
    let options = opener.options().clone();
    sessionlog_console::serve(host, options, Some(objects.sources()), config, |at| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{at}");
        let _ = out.flush();
    })?;
    Ok(ExitCode::SUCCESS)
}
