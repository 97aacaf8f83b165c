//! What both runs of `bench tail` (`tail.rs` on one store, `tail_fleet.rs` across the hosts of a
//! fleet) append and how they observe it: the sessions, the one event every batch repeats, the
//! batch size and the observers' wait.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use sessionlog_codec::format::event::NewEvent;
use sessionlog_engine::{AppendItem, SourceEncoding};

/// Events per appended batch.
pub(super) const PER_BATCH: u64 = 4;

/// How long a subscribers' thread waits for a commit before it looks at the stop flag again.
pub(super) const OBSERVER_WAIT: Duration = Duration::from_millis(50);

/// The map's lock; a panic elsewhere leaves at worst a missing instant, so a poisoned lock is
/// used as it is.
pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The items that create sessions `ids`, empty.
pub(super) fn creations(ids: &[String]) -> Vec<AppendItem> {
    ids.iter()
        .map(|id| {
            AppendItem::new(id, Some(0), Vec::new()).creating(header(id), SourceEncoding::Jsonl)
        })
        .collect()
}

fn header(id: &str) -> String {
    format!(
        r#"{{"type":"session","version":0,"id":"{id}","createdAt":1,"cwd":"/w","delegationDepth":0}}"#
    )
}

/// The one event every batch repeats: a user message of some 200 bytes.
pub(super) fn prompt() -> anyhow::Result<NewEvent> {
    let value = sessionlog_codec::json::parse(
        r#"{"type":"user/message","time":1,"data":{"content":[{"type":"text","text":"a prompt of some length, as a user would type it into a session, to follow live"}],"source":{"kind":"user"},"role":"user","id":"u"},"surfaceOp":"append"}"#,
    )?;
    NewEvent::from_value(&value).map_err(anyhow::Error::msg)
}
