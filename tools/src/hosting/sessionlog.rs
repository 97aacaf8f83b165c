//! sessionlog as a hosting-benchmark system: every round's batches of one host thread go to
//! [`Store::append_many`], so they are validated, authored and committed together (one
//! WriteBatch, one fsync), and concurrent threads share fsyncs through RocksDB's group commit.
//! The host hands sessionlog logical events, as DSH's `Session.append` receives them; sessionlog
//! authors the lines itself (as the JSONL peer does, and DSH's backends). A session is created
//! durable with its first batch, as DSH's backends publish it (the peers keep its header until
//! then): its creation is not fsynced on its own, and the first append's fsync covers it.

use std::path::Path;

use anyhow::Context;
use sessionlog_codec::event::NewEvent;
use sessionlog_codec::json::Value;
use sessionlog_engine::{AppendItem, Options, SourceEncoding, Store};

use super::{Host, Item, SessionStart};
use crate::gen::Batch;

/// The store under test.
pub struct SessionlogHost {
    store: Store,
}

impl SessionlogHost {
    /// Open a fresh store in `dir` with `options` (their durability is the run's).
    pub fn open(dir: &Path, options: Options) -> anyhow::Result<Self> {
        let store = Store::open(dir, options)?;
        Ok(SessionlogHost { store })
    }
}

/// A logged event as the host's `append(type, data, opts)` call would pass it.
fn new_event(event: &Value) -> anyhow::Result<NewEvent> {
    NewEvent::from_logged(event).map_err(anyhow::Error::msg)
}

/// The engine's append of one generated batch to session `id`, expecting its first seq.
pub(crate) fn append_item<'a>(id: &'a str, batch: &Batch) -> anyhow::Result<AppendItem<'a>> {
    Ok(AppendItem {
        id,
        expected_next_seq: Some(batch.first_seq),
        events: batch
            .events
            .iter()
            .map(new_event)
            .collect::<anyhow::Result<_>>()?,
    })
}

impl Host for SessionlogHost {
    fn name(&self) -> &'static str {
        "sessionlog"
    }

    fn create(&self, start: &SessionStart<'_>) -> anyhow::Result<()> {
        self.store
            .create_session_deferred(start.header_line, SourceEncoding::Jsonl)?;
        Ok(())
    }

    fn append(&self, items: &[Item<'_>], _acked: &mut dyn FnMut(usize)) -> anyhow::Result<()> {
        let batch: Vec<AppendItem<'_>> = items
            .iter()
            .map(|i| append_item(i.id, i.batch))
            .collect::<anyhow::Result<_>>()?;
        for (item, result) in items.iter().zip(self.store.append_many(batch)) {
            result.with_context(|| format!("appending to session {}", item.id))?;
        }
        Ok(())
    }
}
