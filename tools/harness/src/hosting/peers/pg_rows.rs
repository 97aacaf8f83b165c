//! The straightforward PostgreSQL store agent frameworks ship, as a hosting peer: DSH's SQLite
//! schema as it would be on PostgreSQL, one row per event, one transaction per batch.
//!
//! Tables: `sessions (id PRIMARY KEY, header, next_seq, revision)` and
//! `events (session_id, seq, json, PRIMARY KEY (session_id, seq))`, the event's JSON text as
//! DSH's `JSON.stringify` writes it. Per batch: `BEGIN`; one `INSERT` of all the batch's event
//! rows (a multi-row insert from two arrays, `unnest($seqs, $jsons)`); on the session's first
//! batch `INSERT` its `sessions` row, on later ones `UPDATE` it (next seq and revision, checked
//! against the expected next seq); `COMMIT`. Statements are prepared once per connection.
//!
//! Each host thread has a connection of its own (taken from a pool for the length of its
//! `append`), so sessions of different threads commit in parallel, as PostgreSQL allows;
//! batches are never combined across sessions. Durability: `synchronous_commit = on` (the
//! default) under `Sync`, `off` under `Buffered`. The server is a throwaway PostgreSQL 15
//! (`fsync` on, default settings) started for the peer in the system's temp directory and
//! stopped when it is dropped.
//!
//! Invariant, checked by [`Host::verify`]: the events table holds exactly the events of the
//! batches acknowledged, and each session row's next seq counts its events.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use anyhow::{ensure, Context};
use postgres::{Client, NoTls, Statement};
use sessionlog_codec::json;

use super::super::{Durability, Host, Item, PendingSessions, SessionStart};
use crate::postgres::{PgSetup, TempPostgres};

const SCHEMA: &str = "CREATE TABLE sessions (
        id text PRIMARY KEY,
        header text NOT NULL,
        next_seq bigint NOT NULL,
        revision bigint NOT NULL
    );
    CREATE TABLE events (
        session_id text NOT NULL,
        seq bigint NOT NULL,
        json text NOT NULL,
        PRIMARY KEY (session_id, seq)
    );";
const INSERT_EVENTS: &str = "INSERT INTO events (session_id, seq, json) \
     SELECT $1, t.seq, t.json FROM unnest($2::bigint[], $3::text[]) AS t(seq, json)";
const INSERT_SESSION: &str =
    "INSERT INTO sessions (id, header, next_seq, revision) VALUES ($1, $2, $3, 1)";
const UPDATE_SESSION: &str = "UPDATE sessions SET next_seq = $2, revision = revision + 1 \
     WHERE id = $1 AND next_seq = $3";

/// One host thread's connection and its prepared statements.
struct Connection {
    client: Client,
    insert_events: Statement,
    insert_session: Statement,
    update_session: Statement,
}

/// The peer (see the module docs).
pub struct PgRowsPeer {
    url: String,
    durability: Durability,
    /// Connections not in use by a host thread now.
    idle: Mutex<Vec<Connection>>,
    /// Header lines of created sessions, until their first batch.
    pending: PendingSessions<String>,
    /// Events in the batches acknowledged so far.
    acknowledged: AtomicU64,
    /// Declared last, so dropped last: the server stops once every connection is closed.
    postgres: TempPostgres,
}

impl PgRowsPeer {
    /// Start its PostgreSQL and create the tables.
    pub fn start(durability: Durability) -> anyhow::Result<Self> {
        let postgres = TempPostgres::start(&PgSetup::default())?;
        postgres.psql(SCHEMA)?;
        Ok(PgRowsPeer {
            url: postgres.url("postgres", "postgres"),
            durability,
            idle: Mutex::new(Vec::new()),
            pending: PendingSessions::new(),
            acknowledged: AtomicU64::new(0),
            postgres,
        })
    }

    /// Events the events table holds.
    pub fn stored_events(&self) -> anyhow::Result<u64> {
        let mut c = self.connection()?;
        let n: i64 = c
            .client
            .query_one("SELECT count(*) FROM events", &[])?
            .get(0);
        self.release(c);
        Ok(u64::try_from(n)?)
    }

    /// An idle connection, or a new one.
    fn connection(&self) -> anyhow::Result<Connection> {
        if let Some(c) = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
        {
            return Ok(c);
        }
        let mut client = Client::connect(&self.url, NoTls).context("connecting to PostgreSQL")?;
        if self.durability == Durability::Buffered {
            client.batch_execute("SET synchronous_commit = off")?;
        }
        Ok(Connection {
            insert_events: client.prepare(INSERT_EVENTS)?,
            insert_session: client.prepare(INSERT_SESSION)?,
            update_session: client.prepare(UPDATE_SESSION)?,
            client,
        })
    }

    fn release(&self, c: Connection) {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(c);
    }

    /// `item` in one transaction on `c`.
    fn append_one(&self, c: &mut Connection, item: &Item<'_>) -> anyhow::Result<()> {
        let first = i64::try_from(item.batch.first_seq)?;
        let next = first + i64::try_from(item.events.len())?;
        let seqs: Vec<i64> = (first..next).collect();
        let jsons: Vec<String> = item.events.iter().map(json::stringify).collect();
        let header = self.pending.take_first(item)?;
        let mut tx = c.client.transaction()?;
        tx.execute(&c.insert_events, &[&item.id, &seqs, &jsons])?;
        match header {
            Some(header) => {
                tx.execute(&c.insert_session, &[&item.id, &header, &next])?;
            }
            None => {
                let updated = tx.execute(&c.update_session, &[&item.id, &next, &first])?;
                ensure!(
                    updated == 1,
                    "session {}: no session row continues at seq {first}",
                    item.id
                );
            }
        }
        tx.commit()?;
        self.acknowledged
            .fetch_add(item.events.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

impl Host for PgRowsPeer {
    fn name(&self) -> &'static str {
        "pg_rows"
    }

    fn create(&self, start: &SessionStart<'_>) -> anyhow::Result<()> {
        self.pending.hold(start.id, start.header_line.to_owned())
    }

    fn append(&self, items: Vec<Item<'_>>, acked: &mut dyn FnMut(usize)) -> anyhow::Result<()> {
        let mut c = self.connection()?;
        for (i, item) in items.iter().enumerate() {
            self.append_one(&mut c, item).with_context(|| {
                format!("session {}, batch at seq {}", item.id, item.batch.first_seq)
            })?;
            acked(i);
        }
        self.release(c);
        Ok(())
    }

    fn server_cpu_time(&self) -> Option<std::time::Duration> {
        self.postgres.cpu_time()
    }

    fn verify(&self) -> anyhow::Result<()> {
        let stored = self.stored_events()?;
        let acknowledged = self.acknowledged.load(Ordering::Relaxed);
        ensure!(
            stored == acknowledged,
            "pg_rows: the events table holds {stored} events, {acknowledged} were acknowledged"
        );
        let mut c = self.connection()?;
        let counted: i64 = c
            .client
            .query_one(
                "SELECT coalesce(sum(next_seq), 0)::bigint FROM sessions",
                &[],
            )?
            .get(0);
        self.release(c);
        ensure!(
            u64::try_from(counted)? == stored,
            "pg_rows: the session rows count {counted} events, the events table holds {stored}"
        );
        Ok(())
    }
}
