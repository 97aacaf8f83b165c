//! Schema 17 of DSH's SQLite backend (persistence-spec §5.1, §5.3): the DDL, connection
//! pragmas, first-open initialization and the schema check DSH repeats inside every append.
//!
//! Invariant: a database this module accepts has `application_id = 1146308688` ("DSHP"),
//! `user_version = 17` and exactly the schema objects of [`SCHEMA`] (SQL compared with
//! whitespace collapsed), as DSH requires; it never migrates.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::Duration;

use anyhow::{bail, ensure, Context};
use rusqlite::{Connection, Transaction, TransactionBehavior};

use super::super::super::Durability;

/// DSH `SCHEMA_VERSION`.
pub const SCHEMA_VERSION: i64 = 17;
/// DSH `SESSION_PERSISTENCE_SQLITE_APPLICATION_ID` (`0x44534850`, "DSHP").
pub const APPLICATION_ID: i64 = 0x4453_4850;
/// DSH's busy timeout.
const BUSY_TIMEOUT: Duration = Duration::from_millis(5_000);

/// `resources/sql/schema.sql`.
pub const SCHEMA: &str = "\
CREATE TABLE persistence_state (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  store_id  TEXT NOT NULL
) STRICT;

CREATE TABLE sessions (
  id               TEXT PRIMARY KEY,
  version          INTEGER NOT NULL,
  created_at       INTEGER NOT NULL,
  cwd              TEXT,
  parent_session   TEXT,
  seed_length      INTEGER,
  origin           TEXT,
  delegation_depth INTEGER,
  agent_preset     TEXT,
  incarnation      TEXT NOT NULL,
  revision         INTEGER NOT NULL
) STRICT;

CREATE TABLE events (
  session_id        TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq               INTEGER NOT NULL,
  type              TEXT NOT NULL,
  time              INTEGER NOT NULL,
  data              ANY NOT NULL,
  source_event_seqs ANY,
  surface_op        TEXT,
  ignorable         INTEGER CHECK (ignorable IS NULL OR ignorable IN (0, 1)),
  PRIMARY KEY (session_id, seq)
) STRICT;
";

/// One `sqlite_schema` row of a user object, SQL whitespace-collapsed.
pub type SchemaObject = (String, String, String, String);

/// Open `path` as DSH does: security pragmas, schema ownership (initializing a pristine file),
/// WAL, then the durability pragma (`FULL`, or `NORMAL` for [`Durability::Buffered`]).
pub fn open(path: &std::path::Path, durability: Durability) -> anyhow::Result<Connection> {
    let mut conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.execute_batch("PRAGMA trusted_schema = OFF; PRAGMA mmap_size = 0;")?;
    let trusted: i64 = conn.query_row("PRAGMA trusted_schema", [], |r| r.get(0))?;
    ensure!(trusted == 0, "trusted_schema stayed {trusted}");
    conn.execute_batch("PRAGMA foreign_keys = ON;")?;
    let reference = reference_schema()?;
    {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let version = user_version(&tx)?;
        let app = application_id(&tx)?;
        let objects: i64 = tx.query_row(
            "SELECT COUNT(*) AS count FROM sqlite_schema WHERE name NOT GLOB 'sqlite_*'",
            [],
            |r| r.get(0),
        )?;
        if version == 0 && (app != 0 || objects > 0) {
            bail!(
                "{} has an unversioned schema or application identity",
                path.display()
            );
        }
        if version != 0 && version != SCHEMA_VERSION {
            bail!(
                "{} has schema version {version}, not {SCHEMA_VERSION}",
                path.display()
            );
        }
        if version == 0 {
            tx.execute_batch(SCHEMA)?;
            tx.execute(
                "INSERT INTO persistence_state (singleton, store_id) VALUES (1, ?)",
                [random_uuid()],
            )?;
            tx.execute_batch(&format!(
                "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {SCHEMA_VERSION};"
            ))?;
        }
        validate(&tx, &reference)?;
        tx.commit()?;
    }
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    ensure!(
        mode.eq_ignore_ascii_case("wal"),
        "journal mode {mode}, expected wal"
    );
    let (pragma, want) = match durability {
        Durability::Sync => ("FULL", 2),
        Durability::Buffered => ("NORMAL", 1),
    };
    conn.execute_batch(&format!("PRAGMA synchronous = {pragma};"))?;
    let got: i64 = conn.query_row("PRAGMA synchronous", [], |r| r.get(0))?;
    ensure!(got == want, "synchronous stayed {got}, expected {want}");
    Ok(conn)
}

/// The schema objects DSH expects, from a fresh in-memory database.
pub fn reference_schema() -> anyhow::Result<Vec<SchemaObject>> {
    let db = Connection::open_in_memory()?;
    db.execute_batch("PRAGMA foreign_keys = ON;")?;
    db.execute_batch(SCHEMA)?;
    schema_objects(&db)
}

/// DSH's `validateSchemaForMutation`: identity, version and schema objects, inside the
/// caller's write transaction.
pub fn validate(tx: &Transaction<'_>, reference: &[SchemaObject]) -> anyhow::Result<()> {
    let version = user_version(tx)?;
    let app = application_id(tx)?;
    ensure!(
        app == APPLICATION_ID,
        "application id is {app}, expected {APPLICATION_ID}"
    );
    ensure!(
        schema_objects(tx)? == reference,
        "the database does not hold schema {SCHEMA_VERSION}'s objects"
    );
    ensure!(
        version == SCHEMA_VERSION,
        "schema version is {version}, expected {SCHEMA_VERSION}"
    );
    Ok(())
}

fn schema_objects(db: &Connection) -> anyhow::Result<Vec<SchemaObject>> {
    let mut stmt = db.prepare(
        "SELECT type, name, tbl_name, sql FROM sqlite_schema \
         WHERE name NOT GLOB 'sqlite_*' ORDER BY type, name",
    )?;
    let rows = stmt.query_map([], |r| {
        let sql: Option<String> = r.get(3)?;
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            sql.unwrap_or_default()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        ))
    })?;
    rows.collect::<Result<_, _>>()
        .context("reading sqlite_schema")
}

/// `PRAGMA user_version`.
pub fn user_version(db: &Connection) -> anyhow::Result<i64> {
    Ok(db.query_row("PRAGMA user_version", [], |r| r.get(0))?)
}

/// `PRAGMA application_id`.
pub fn application_id(db: &Connection) -> anyhow::Result<i64> {
    Ok(db.query_row("PRAGMA application_id", [], |r| r.get(0))?)
}

/// A random version-4 UUID (for `store_id` and session incarnations).
pub fn random_uuid() -> String {
    let state = RandomState::new();
    crate::gen::uuid_from_bits(state.hash_one(0u8), state.hash_one(1u8))
}
