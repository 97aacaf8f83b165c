//! Appends from JavaScript: each call's batch (the JSON text of an array of DSH events) becomes
//! an engine append item, handed to the store's [`AppendQueue`], which parses it off the JS
//! thread, commits every waiting append of every session together (the engine's group commit:
//! one write, one fsync) and settles each promise once the write holding its batch returned.
//! A session DSH creates is an item carrying its header, committed with its first batch.
//!
//! Invariants (the queue's): a resolved append is durable; appends to one session commit in the
//! order they were issued; closing commits everything already queued.

use sessionlog_engine::{AppendItem, AppendQueue, SourceEncoding, Store, StoreAccess};

use crate::reply::Pending;
use crate::workers::Shared;

/// One append from JavaScript.
pub struct AppendRequest {
    /// Session id.
    pub id: String,
    /// The seq the caller expects its batch to start at.
    pub expected_next_seq: Option<u64>,
    /// The batch, as the JSON text of an array of DSH events.
    pub events_json: String,
    /// Through DSH's seam: kept as DSH's writer writes it even where DSH's append rules refuse
    /// it (`AppendItem::as_written`).
    pub as_written: bool,
    /// When the batch is a new session's first: the session's header.
    pub create: Option<Creation>,
    /// Settled with the receipt once committed.
    pub pending: Pending,
}

/// A new session's header, for an [`AppendRequest`] that creates it.
pub struct Creation {
    /// The header line (JSON text, no newline).
    pub header_line: String,
    /// Keep the session's bytes as `.jsonl.zstd`.
    pub zstd: bool,
}

/// The store as the append queue reaches it: the handle's slot, empty once closed.
struct Slot(Shared);

impl StoreAccess for Slot {
    fn with_store(&self, f: &mut dyn FnMut(&Store)) -> bool {
        match self.0.read() {
            Ok(slot) => slot.as_ref().map(|host| f(&host.store())).is_some(),
            Err(_) => false,
        }
    }
}

/// Start the append queue of the store in `shared`.
pub fn start(shared: &Shared) -> Option<AppendQueue> {
    AppendQueue::start(Slot(std::sync::Arc::clone(shared))).ok()
}

/// Hand `request` to `queue`; its promise settles with the receipt once committed.
pub fn submit(queue: &AppendQueue, request: AppendRequest) {
    let mut item = AppendItem::new(request.id, request.expected_next_seq, Vec::new());
    if let Some(c) = request.create {
        let encoding = if c.zstd {
            SourceEncoding::JsonlZstd
        } else {
            SourceEncoding::Jsonl
        };
        item = item.creating(c.header_line, encoding);
    }
    if request.as_written {
        item = item.as_written();
    }
    let pending = request.pending;
    queue.submit_json(item, request.events_json, move |result| {
        pending.settle(crate::reply::report(result));
    });
}
