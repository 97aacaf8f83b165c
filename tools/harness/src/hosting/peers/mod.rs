//! The peers sessionlog is measured against: DSH's own storage backends, modelled in Rust so
//! they run in the same process on the same workload.
//!
//! - [`JsonlPeer`]: DSH's default JSONL backend: one file per session, materialized with the
//!   first batch, every later batch appended and synced before it is acknowledged.
//! - [`SqlitePeer`]: DSH's opt-in SQLite backend: schema 17, WAL, `synchronous = FULL`, one
//!   `BEGIN IMMEDIATE … COMMIT` per batch on one connection.
//! - [`PgRowsPeer`]: the straightforward PostgreSQL store agent frameworks ship: that schema on
//!   PostgreSQL, one row per event, one transaction per batch, a connection per host thread.
//!
//! All write batch by batch: none can combine sessions' batches.

mod jsonl;
mod pg_rows;
mod sqlite;

pub use jsonl::JsonlPeer;
pub use pg_rows::PgRowsPeer;
pub use sqlite::SqlitePeer;

use std::path::Path;

use super::{Durability, Host};
use crate::gen::LogFormat;

/// A peer to run, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// [`JsonlPeer`].
    Jsonl,
    /// [`SqlitePeer`].
    Sqlite,
    /// [`PgRowsPeer`].
    PgRows,
}

impl Peer {
    /// Every peer, in report order.
    pub const ALL: [Peer; 3] = [Peer::Jsonl, Peer::Sqlite, Peer::PgRows];

    /// The name its reports carry ([`Host::name`]).
    pub fn name(self) -> &'static str {
        match self {
            Peer::Jsonl => "jsonl",
            Peer::Sqlite => "sqlite",
            Peer::PgRows => "pg_rows",
        }
    }

    /// Open this peer with its data, sessions of `format`, under `dir` (a directory of its own;
    /// [`PgRowsPeer`] keeps its data in its own PostgreSQL's directory instead).
    pub fn open(
        self,
        dir: &Path,
        durability: Durability,
        format: LogFormat,
    ) -> anyhow::Result<Box<dyn Host>> {
        Ok(match self {
            Peer::Jsonl => Box::new(JsonlPeer::open(dir, durability, format)?),
            Peer::Sqlite => Box::new(SqlitePeer::open(&dir.join("sessions.db"), durability)?),
            Peer::PgRows => Box::new(PgRowsPeer::start(durability)?),
        })
    }
}
