//! A session's event kinds at a point in time: how many events of each `type` (`turn/start`,
//! `user/message`, `assistant/message`, `tool/result` …) it held after seq N, from its logical
//! events up to that seq. Read-only.

use std::collections::BTreeMap;

use sessionlog_codec::json::Value;

use crate::error::Result;
use crate::store::Store;

/// How many events of each type a session held after a seq ([`Store::event_kinds`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct EventKinds {
    /// The events counted: seqs 0 up to the seq asked for (or the session's end).
    pub events: u64,
    /// Events per `type`, in type order (an event without a textual `type` counts under "").
    pub kinds: BTreeMap<String, u64>,
}

impl Store {
    /// How many events of each type session `id` held after seq `at` (default: its last
    /// event).
    pub fn event_kinds(&self, id: &str, at: Option<u64>) -> Result<EventKinds> {
        let mut counts = EventKinds::default();
        self.events(id, 0, at, &mut |_, event| {
            let kind = event
                .as_object()
                .and_then(|o| o.get("type"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            match counts.kinds.get_mut(kind) {
                Some(n) => *n += 1,
                None => {
                    counts.kinds.insert(kind.to_owned(), 1);
                }
            }
            counts.events += 1;
            Ok(())
        })?;
        Ok(counts)
    }
}
