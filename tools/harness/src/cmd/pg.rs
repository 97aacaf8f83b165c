//! `sessionlog-harness pg`: a throwaway PostgreSQL holding the fleet's schema, for test suites
//! that cannot start one themselves (the Node binding's). The server runs while stdin is open;
//! each line read names a database to create with the schema, so every test can have a fleet
//! of its own on one server.
//!
//! The server does not fsync: what it holds need not survive the machine, only the test.
//!
//! Output: one JSON object per line, `{"url": ...}` (the superuser, no password: the server
//! trusts loopback; it may act as any host, so that the suites name their hosts freely, where a
//! host's own login role acts only as itself) or `{"error": ...}`.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use anyhow::Context;
use sessionlog_cluster::schema;
use sessionlog_codec::json::{stringify, Value};
use sessionlog_harness::postgres::{PgSetup, TempPostgres};

/// Server settings for a server no test cuts the power of: no fsync (a database per test, each a
/// copy of the template, would otherwise be flushed to a disk shared with the rest of the suite).
const THROWAWAY: [&str; 1] = ["fsync = off"];

/// The role the URLs name.
const ROLE: &str = "postgres";

/// Start the server, answer stdin's lines, stop when stdin closes.
pub fn run() -> anyhow::Result<ExitCode> {
    let pg = TempPostgres::start(&PgSetup {
        settings: THROWAWAY.iter().map(|s| (*s).to_owned()).collect(),
        ..PgSetup::default()
    })?;
    let url = with_schema(&pg, "postgres")?;
    say("url", &url)?;
    for line in std::io::stdin().lock().lines() {
        let line = line.context("reading stdin")?;
        let name = line.trim();
        if name.is_empty() {
            continue;
        }
        match create(&pg, name) {
            Ok(url) => say("url", &url)?,
            Err(e) => say("error", &format!("{e:#}"))?,
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Create database `name` with the schema; its host URL.
fn create(pg: &TempPostgres, name: &str) -> anyhow::Result<String> {
    let plain = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    anyhow::ensure!(
        plain,
        "a database name is 1 to 63 of a-z, 0-9 and _, got {name:?}"
    );
    pg.psql(&format!("CREATE DATABASE {name}"))?;
    with_schema(pg, name)
}

/// Create the fleet's schema in database `db`; the URL hosts connect to it with.
fn with_schema(pg: &TempPostgres, db: &str) -> anyhow::Result<String> {
    let mut admin = postgres::Client::connect(&pg.url(ROLE, db), postgres::NoTls)
        .with_context(|| format!("connecting to database {db} as the superuser"))?;
    schema::init(&mut admin, &[])
        .with_context(|| format!("creating the schema in database {db}"))?;
    Ok(pg.url(ROLE, db))
}

/// Print `{"<key>": value}` on its own line, flushed (the reader waits for it).
fn say(key: &str, value: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{{{}:{}}}",
        stringify(&Value::from(key)),
        stringify(&Value::from(value))
    )?;
    out.flush().context("writing stdout")
}
