//! sessionlog as a fleet: many hosts, each serving the sessions it owns from its own embedded
//! store, over PostgreSQL as the system of record (as Temporal's history service keeps workflow
//! histories in SQL, each shard owned by a host fenced by its `range_id`).
//!
//! - PostgreSQL holds every session's exact bytes, a row per committed batch, and a row per
//!   session with its owner and owner epoch ([`schema`]: the tables, the fenced functions hosts
//!   run, and the grants).
//! - A host acquires a session by bumping its owner epoch ([`ownership`]); every batch it
//!   commits names that epoch, checked in the statement that advances the session, so a host
//!   whose session was taken over can never write it again. Leases only decide when a takeover
//!   needs no force.
//! - Appends are the engine's group commit with one more step ([`commit`]): the group's batches
//!   go to PostgreSQL in one transaction before the local write, each refused alone; a commit
//!   whose outcome is unknown (the connection dropped) is read back before anything is said.
//! - A fork is created as DSH's fork file, its seed batch committed like any batch, under its
//!   parent's lineage root ([`Fleet::fork`]); an imported file's batches are committed the same
//!   way ([`Fleet::import`]).
//! - Each host's store is the index: on acquire it catches up from PostgreSQL ([`catch_up`]), so
//!   a host that restarts with an empty disk loses nothing; its own fsync is not needed.
//!   Deletion, restoration and purges reach it the same way, and reads are read-your-writes on
//!   the owner, as of the last catch-up elsewhere, within a stated bound ([`lifecycle`]).
//! - Any host follows any session as it commits ([`Fleet::subscribe`], `follow.rs`): woken by
//!   PostgreSQL's `LISTEN/NOTIFY` on each committed batch, caught up from the fenced rows.
//!
//! [`Fleet`] ties them together; [`Config`] says how to reach PostgreSQL (URL, TLS, password
//! sources, with the password never shown). [`Host`] is what a front end calls, on a store of
//! its own or as a host of a fleet: it decides in one place how each operation runs in a fleet.

mod catch_up;
mod commit;
mod config;
mod conninfo;
mod error;
mod fleet;
mod follow;
mod fork;
mod host;
mod import;
mod lifecycle;
mod ownership;
mod pg;
pub mod schema;
mod tls;

pub use config::Config;
pub use error::{Error, Result};
pub use fleet::{Acquired, Fleet, FleetOptions, LeaseKeeper, SessionRow};
pub use follow::{FleetSubscription, CHANNEL, FLEET_POLL};
pub use host::{Followed, Host, LocalOnly, Tenure};
pub use import::Imported;
