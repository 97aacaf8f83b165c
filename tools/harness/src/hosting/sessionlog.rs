//! sessionlog as a hosting-benchmark system: every round's batches of one host thread go to
//! [`Store::append_many`], so they are validated and authored together, and committed through
//! the store's group commit with the rounds of every other thread committing at the same moment
//! (one WAL write, one fsync).
//! The host hands sessionlog logical events, as DSH's `Session.append` receives them; sessionlog
//! authors the lines itself (as the JSONL peer does, and DSH's backends). A session is created
//! with its first batch, as DSH's backends publish it (the peers keep its header until then
//! too): the host keeps the header and appends the first batch as an item that creates the
//! session ([`AppendItem::creating`]), one commit for both.

use std::path::Path;

use anyhow::Context;
use sessionlog_codec::format::event::NewEvent;
use sessionlog_codec::json::Value;
use sessionlog_engine::{AppendItem, Metrics, Options, SourceEncoding, Store};

use super::{Host, Item, PendingSessions, SessionStart};
use crate::gen::{host_options, Batch};

/// The store under test.
pub struct SessionlogHost {
    store: Store,
    /// Header lines of created sessions, until their first batch.
    pending: PendingSessions<String>,
}

impl SessionlogHost {
    /// Open a fresh store in `dir` with `options` (their durability is the run's), and the
    /// projections the generated sessions need ([`host_options`]).
    pub fn open(dir: &Path, options: Options) -> anyhow::Result<Self> {
        let store = Store::open(dir, host_options(options))?;
        Ok(SessionlogHost {
            store,
            pending: PendingSessions::new(),
        })
    }

    /// Whether the store flushes and compacts with direct I/O ([`Store::direct_io`]).
    pub fn direct_io(&self) -> bool {
        self.store.direct_io()
    }

    /// The store's metrics ([`Store::metrics`]): what the run appended, as the store counted it.
    pub fn metrics(&self) -> sessionlog_engine::Result<Metrics> {
        self.store.metrics()
    }
}

/// A logged event as the host's `append(type, data, opts)` call would pass it, taking over the
/// event the host built.
fn new_event(event: Value) -> anyhow::Result<NewEvent> {
    NewEvent::from_logged_owned(event).map_err(anyhow::Error::msg)
}

/// The engine's append of one generated batch to session `id`, expecting its first seq; with
/// `header`, the batch creates the `.jsonl` session that header line describes
/// ([`AppendItem::creating`]).
pub(crate) fn append_item(
    id: &str,
    batch: &Batch,
    header: Option<&str>,
) -> anyhow::Result<AppendItem> {
    append_built(id, batch.first_seq, batch.events.clone(), header)
}

/// [`append_item`] of the batch's `events` as the host built them, expecting `first_seq`.
pub fn append_built(
    id: &str,
    first_seq: u64,
    events: Vec<Value>,
    header: Option<&str>,
) -> anyhow::Result<AppendItem> {
    let events = events
        .into_iter()
        .map(new_event)
        .collect::<anyhow::Result<_>>()?;
    let item = AppendItem::new(id, Some(first_seq), events);
    Ok(match header {
        Some(line) => item.creating(line, SourceEncoding::Jsonl),
        None => item,
    })
}

impl Host for SessionlogHost {
    fn name(&self) -> &'static str {
        "sessionlog"
    }

    fn create(&self, start: &SessionStart<'_>) -> anyhow::Result<()> {
        self.pending.hold(start.id, start.header_line.to_owned())
    }

    fn append(&self, items: Vec<Item<'_>>, _acked: &mut dyn FnMut(usize)) -> anyhow::Result<()> {
        let headers = items
            .iter()
            .map(|i| self.pending.take_first(i))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let ids: Vec<&str> = items.iter().map(|i| i.id).collect();
        let batch: Vec<AppendItem> = items
            .into_iter()
            .zip(&headers)
            .map(|(i, header)| append_built(i.id, i.batch.first_seq, i.events, header.as_deref()))
            .collect::<anyhow::Result<_>>()?;
        for (id, result) in ids.into_iter().zip(self.store.append_many(batch)) {
            result.with_context(|| format!("appending to session {id}"))?;
        }
        Ok(())
    }
}
