//! The multi-session hosting benchmark (`sessionlog-harness bench hosting`): a host process running
//! `sessions` agent sessions on `threads` threads, each session with at most one write batch in
//! flight (DSH's per-session write coordinator) and appending its next batch as soon as the
//! previous one is acknowledged durable.
//!
//! A [`Host`] is one storage system under test. The driver ([`run`]) hands it, per thread and
//! per round, the next batch of every session that thread owns, and measures each batch from
//! submission to durable acknowledgement. That submission model lets a system commit many
//! sessions' batches together (group commit) while a peer writes them one by one; both see the
//! same sessions, the same batches, in the same order.
//!
//! Module map: [`driver`] (threads, rounds, counting), [`feeds`] (the generated sessions and how
//! slots replay them), [`histogram`] (latency), [`cpu`] (process CPU time), [`peers`] (DSH's JSONL
//! and SQLite backends, modelled, and the straightforward PostgreSQL store), [`fleet`] (sessionlog
//! as a fleet of host processes on PostgreSQL), [`output`] (the JSON object and the table).

mod cpu;
mod driver;
mod feeds;
pub mod fleet;
mod histogram;
pub mod output;
pub mod peers;
pub mod sessionlog;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

pub use driver::{prepare, run, Prepared, Report, Workload};
pub use feeds::{session_id, FeedPool};
pub use histogram::Histogram;

use sessionlog_codec::json::Value;

use crate::gen::Batch;

/// How durable an acknowledged batch must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// On stable storage (fsync/fdatasync or the system's equivalent) before the ack.
    Sync,
    /// Handed to the OS (or the system's log) before the ack; no fsync.
    Buffered,
}

/// A session starting in a slot: the slot's previous session (if any) is finished for good.
#[derive(Clone, Copy, Debug)]
pub struct SessionStart<'a> {
    /// The slot (0..sessions); one thread owns it for the whole run.
    pub slot: usize,
    /// The new session's id, unique in the run.
    pub id: &'a str,
    /// Its DSH header line, without `"\n"`.
    pub header_line: &'a str,
}

/// One batch submitted for durable append.
#[derive(Debug)]
pub struct Item<'a> {
    /// The slot it belongs to.
    pub slot: usize,
    /// The session id (as given to [`Host::create`]).
    pub id: &'a str,
    /// The batch; `batch.first_seq` is the session's next seq (0 for its first batch).
    pub batch: &'a Batch,
    /// The batch's events as the host built them for this append, the system's to keep.
    pub events: Vec<Value>,
}

impl<'a> Item<'a> {
    /// `batch` of session `id` in `slot`, with its events built as a host builds them. DSH's
    /// `Session` builds each event object once and hands it to its backend, so every system
    /// under test receives a fresh copy of the generated events per batch; the driver builds
    /// them (and counts their CPU apart: [`Report::feed_cpu`]) before it submits the round.
    pub fn built(slot: usize, id: &'a str, batch: &'a Batch) -> Self {
        Item {
            slot,
            id,
            batch,
            events: batch.events.clone(),
        }
    }
}

/// A storage system under test, shared by all host threads.
pub trait Host: Sync {
    /// Short name used in reports (`"sessionlog"`, `"jsonl"`, `"sqlite"`).
    fn name(&self) -> &'static str;

    /// Start a session. Called by the thread owning `start.slot`, before that session's first
    /// batch; for the initial sessions before the clock starts, for later ones (a slot whose
    /// feed ran out starts a fresh session) inside the measured run. The system may make the
    /// session durable here or with its first batch, as the system it models does.
    fn create(&self, start: &SessionStart<'_>) -> anyhow::Result<()>;

    /// Append every item durably (to the run's [`Durability`]) and return once all are. Items
    /// belong to distinct sessions of one thread; each is that session's only batch in flight.
    /// A system that learns of an item's durability before returning may call `acked(i)` for
    /// `items[i]` (at most once); items not reported are acknowledged when this returns.
    fn append(&self, items: Vec<Item<'_>>, acked: &mut dyn FnMut(usize)) -> anyhow::Result<()>;

    /// CPU time used so far by the system's server processes outside this process (a database
    /// server's), or `None` for a system that has none.
    fn server_cpu_time(&self) -> Option<Duration> {
        None
    }

    /// Check, after a run, that the system holds what it acknowledged; the benchmark fails
    /// otherwise. A system without a cheap check of its own passes.
    fn verify(&self) -> anyhow::Result<()> {
        Ok(())
    }
}

/// Created sessions whose first batch has not been written, by id. DSH's backends publish a
/// session with its first batch, so every system keeps what [`Host::create`] gave it here and
/// writes it with that batch.
#[derive(Debug)]
pub struct PendingSessions<T>(Mutex<HashMap<String, T>>);

impl<T> PendingSessions<T> {
    /// No session pending.
    pub fn new() -> Self {
        PendingSessions(Mutex::new(HashMap::new()))
    }

    /// Keep `value` for session `id` until its first batch.
    pub fn hold(&self, id: &str, value: T) -> anyhow::Result<()> {
        self.table()?.insert(id.to_owned(), value);
        Ok(())
    }

    /// What was kept for `item`'s session when `item` is its first batch, else `None`.
    pub fn take_first(&self, item: &Item<'_>) -> anyhow::Result<Option<T>> {
        if item.batch.first_seq != 0 {
            return Ok(None);
        }
        Ok(self.table()?.remove(item.id))
    }

    fn table(&self) -> anyhow::Result<std::sync::MutexGuard<'_, HashMap<String, T>>> {
        self.0
            .lock()
            .map_err(|_| anyhow::anyhow!("pending-session table poisoned"))
    }
}

impl<T> Default for PendingSessions<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// `d` in milliseconds, as a float.
pub fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
