//! `sessionlog-harness pg`: a throwaway PostgreSQL holding the fleet's schema, for test suites
//! that cannot start one themselves (the Node binding's). The server runs while stdin is open;
//! each line read names a database to create with the schema, so every test can have a fleet
//! of its own on one server.
//!
//! The server does not fsync: what it holds need not survive the machine, only the test.
//!
//! Output: one JSON object per line, `{"url": ...}` (the login role `host`, a member of the
//! fleet's host role, no password: the server trusts loopback) or `{"error": ...}`.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use anyhow::Context;
use sessionlog_cluster::schema;
use sessionlog_codec::json::{stringify, Value};
use sessionlog_harness::postgres::{PgSetup, TempPostgres};

/// Server settings for a server no test cuts the power of: no fsync (a database per test, each a
/// copy of the template, would otherwise be flushed to a disk shared with the rest of the suite).
const THROWAWAY: [&str; 1] = ["fsync = off"];

/// The login role the URLs name.
const HOST_ROLE: &str = "host";

/// Start the server, answer stdin's lines, stop when stdin closes.
pub fn run() -> anyhow::Result<ExitCode> {
    let pg = TempPostgres::start(&PgSetup {
        settings: THROWAWAY.iter().map(|s| (*s).to_owned()).collect(),
        ..PgSetup::default()
    })?;
    pg.psql(&format!("CREATE ROLE {HOST_ROLE} LOGIN"))?;
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

/// Create the fleet's schema in database `db`, granting it to the host role; its host URL.
fn with_schema(pg: &TempPostgres, db: &str) -> anyhow::Result<String> {
    let mut admin = postgres::Client::connect(&pg.url("postgres", db), postgres::NoTls)
        .with_context(|| format!("connecting to database {db} as the superuser"))?;
    schema::init(&mut admin, &[HOST_ROLE.to_owned()])
        .with_context(|| format!("creating the schema in database {db}"))?;
    Ok(pg.url(HOST_ROLE, db))
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
