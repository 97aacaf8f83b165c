//! Appends handed over without a waiting thread: for hosts whose callers cannot block a thread
//! each until their batch is durable (an event loop, such as Node's, with thousands of sessions
//! awaiting their appends). [`AppendQueue::submit`] queues an item with a completion and returns
//! at once ([`AppendQueue::submit_json`] with the batch still as JSON text, parsed on the
//! queue's thread, so a host's own thread spends nothing on it); the queue's thread takes
//! everything queued by then and commits it with
//! [`Store::append_many`], so a thousand waiting appends share one write and one fsync (and the
//! fsyncs of any other thread appending meanwhile, through the store's group commit), and calls
//! each completion once the write that holds its batch returned.
//!
//! Invariants: a completion is called exactly once, after the commit that holds its batch (or
//! with the error that refused it); batches of one session commit in the order they were
//! submitted (several queued together go to successive `append_many` calls, each taking the
//! session once); closing commits everything already queued before the thread stops, and later
//! submissions complete with [`Error::Closed`].

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use sessionlog_codec::format::event::NewEvent;
use sessionlog_codec::json::{parse, Value};

use super::{AppendItem, AppendReceipt};
use crate::error::{Error, Result};
use crate::metrics::RefusalReason;
use crate::store::Store;

/// Where an [`AppendQueue`]'s thread finds the store: an `Arc<Store>`, or a host's own handle
/// that may be closed under it.
pub trait StoreAccess: Send + Sync + 'static {
    /// Run `f` with the open store and return `true`; `false`, without running it, when the
    /// store is closed.
    fn with_store(&self, f: &mut dyn FnMut(&Store)) -> bool;
}

impl StoreAccess for Arc<Store> {
    fn with_store(&self, f: &mut dyn FnMut(&Store)) -> bool {
        f(self);
        true
    }
}

/// What is called with an item's outcome.
type Completion = Box<dyn FnOnce(Result<AppendReceipt>) + Send>;

/// One queued append: the item, its batch as JSON text when the queue parses it, and its
/// completion.
struct Entry {
    item: AppendItem,
    json: Option<String>,
    done: Completion,
}

/// A thread committing the appends submitted to it (see the module docs).
pub struct AppendQueue {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<Waiting>,
    wake: Condvar,
}

#[derive(Default)]
struct Waiting {
    entries: Vec<Entry>,
    closing: bool,
}

impl Shared {
    /// The queue. Its lock is held only to move items, which a panic elsewhere cannot leave
    /// half-done, so a poisoned lock still holds a true queue.
    fn waiting(&self) -> MutexGuard<'_, Waiting> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl AppendQueue {
    /// Start the queue's thread, committing into the store `store` gives access to.
    pub fn start(store: impl StoreAccess) -> Result<AppendQueue> {
        let shared = Arc::new(Shared::default());
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("sessionlog-append".into())
                .spawn(move || run(&shared, &store))
                .map_err(|source| Error::Io {
                    path: "the append queue's thread".into(),
                    source,
                })?
        };
        Ok(AppendQueue {
            shared,
            thread: Some(thread),
        })
    }

    /// Queue `item`; `done` is called with its outcome once it is committed (or refused).
    pub fn submit(
        &self,
        item: AppendItem,
        done: impl FnOnce(Result<AppendReceipt>) + Send + 'static,
    ) {
        self.queue(Entry {
            item,
            json: None,
            done: Box::new(done),
        });
    }

    /// [`AppendQueue::submit`] of `item` with its events given as `events_json`, the JSON text
    /// of an array of DSH events (as `JSON.stringify` writes them; their seqs are ignored), parsed
    /// on the queue's thread. Text that is not such an array refuses the item.
    pub fn submit_json(
        &self,
        item: AppendItem,
        events_json: String,
        done: impl FnOnce(Result<AppendReceipt>) + Send + 'static,
    ) {
        self.queue(Entry {
            item,
            json: Some(events_json),
            done: Box::new(done),
        });
    }

    fn queue(&self, entry: Entry) {
        let mut waiting = self.shared.waiting();
        if waiting.closing {
            drop(waiting);
            (entry.done)(Err(Error::Closed));
            return;
        }
        waiting.entries.push(entry);
        self.shared.wake.notify_one();
    }

    /// Commit everything queued, then stop the thread (blocking until it has). Later
    /// submissions complete with [`Error::Closed`].
    pub fn close(&mut self) {
        self.shared.waiting().closing = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            // The thread catches the panics of the appends it runs; one that escaped anyway has
            // nothing left to report here.
            let _ = thread.join();
        }
    }
}

impl Drop for AppendQueue {
    fn drop(&mut self) {
        self.close();
    }
}

impl std::fmt::Debug for AppendQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppendQueue").finish_non_exhaustive()
    }
}

/// The queue's thread: take what is queued, commit it, complete it; until closed and empty.
fn run(shared: &Shared, store: &dyn StoreAccess) {
    loop {
        let group = {
            let mut waiting = shared.waiting();
            while waiting.entries.is_empty() && !waiting.closing {
                waiting = shared
                    .wake
                    .wait(waiting)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if waiting.entries.is_empty() {
                return;
            }
            std::mem::take(&mut waiting.entries)
        };
        let mut ready = Vec::with_capacity(group.len());
        let mut unparsed = 0;
        for mut entry in group {
            match entry
                .json
                .take()
                .map(|text| parse_batch(&entry.item.id, &text))
            {
                Some(Err(e)) => {
                    unparsed += 1;
                    (entry.done)(Err(e));
                }
                Some(Ok(events)) => match entry.item.batch.events_mut() {
                    Some(slot) => {
                        *slot = events;
                        ready.push(entry);
                    }
                    None => {
                        unparsed += 1;
                        (entry.done)(Err(Error::Rejected {
                            id: entry.item.id,
                            seq: None,
                            rule: "a batch given as bytes takes no events JSON".into(),
                        }));
                    }
                },
                None => ready.push(entry),
            }
        }
        if unparsed > 0 {
            store.with_store(&mut |s| s.recorder.refused(RefusalReason::Rejected, unparsed));
        }
        for round in rounds(ready) {
            commit_round(round, store);
        }
    }
}

/// The events of a batch given as the JSON text of an array of DSH events.
fn parse_batch(id: &str, text: &str) -> Result<Vec<NewEvent>> {
    let refuse = |rule: String| Error::Rejected {
        id: id.into(),
        seq: None,
        rule,
    };
    let value = parse(text).map_err(|e| refuse(format!("the batch is not JSON: {e}")))?;
    let Value::Array(items) = value else {
        return Err(refuse("the batch must be an array of events".into()));
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, v)| NewEvent::from_logged_owned(v).map_err(|e| refuse(format!("event {i}: {e}"))))
        .collect()
}

/// Split a group into rounds in which each session appears once, keeping each session's order.
fn rounds(group: Vec<Entry>) -> Vec<Vec<Entry>> {
    let mut out: Vec<Vec<Entry>> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for entry in group {
        let n = seen.entry(entry.item.id.clone()).or_insert(0);
        if out.len() <= *n {
            out.push(Vec::new());
        }
        out[*n].push(entry);
        *n += 1;
    }
    out
}

/// Commit one round and complete each of its items.
fn commit_round(round: Vec<Entry>, store: &dyn StoreAccess) {
    let (items, completions): (Vec<AppendItem>, Vec<Completion>) =
        round.into_iter().map(|e| (e.item, e.done)).unzip();
    let mut items = Some(items);
    let mut results = None;
    let open = store.with_store(&mut |s| {
        if let Some(items) = items.take() {
            let count = items.len();
            // A panic in an append (a faulty message projection, say) fails the round's items;
            // the sessions' cached states are reloaded (`lock_session`), and the queue goes on.
            results = Some(
                catch_unwind(AssertUnwindSafe(|| s.append_many(items))).unwrap_or_else(|_| {
                    (0..count)
                        .map(|_| Err(Error::Internal("an append panicked".into())))
                        .collect()
                }),
            );
        }
    });
    let results = match (open, results) {
        (true, Some(results)) => results,
        _ => completions.iter().map(|_| Err(Error::Closed)).collect(),
    };
    for (done, result) in completions.into_iter().zip(results) {
        done(result);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::channel;
    use std::sync::Arc;

    use super::AppendQueue;
    use crate::error::Error;
    use crate::ops::append::AppendItem;
    use crate::test_support::{ev, seeded};

    fn prompt(n: u64) -> sessionlog_codec::format::event::NewEvent {
        ev(&format!(
            r#"{{"type":"user/message","data":{{"content":[],"source":{{"kind":"tool"}},"role":"user","id":"q{n}"}},"surfaceOp":"append"}}"#
        ))
    }

    /// Batches of one session submitted together commit in order, each completion called once
    /// with its own receipt; after close, a submission completes with `Closed`.
    #[test]
    fn batches_of_one_session_commit_in_submission_order() {
        let (_dir, store) = seeded();
        let store = Arc::new(store);
        let next = store.require_meta(b"a").expect("meta").events;
        let mut queue = AppendQueue::start(Arc::clone(&store)).expect("start");
        let (tx, rx) = channel();
        for k in 0..20u64 {
            let tx = tx.clone();
            queue.submit(
                AppendItem::new("a", Some(next + k), vec![prompt(k)]),
                move |r| tx.send((k, r)).expect("send"),
            );
        }
        drop(tx);
        let mut outcomes: Vec<_> = rx.iter().collect();
        outcomes.sort_by_key(|(k, _)| *k);
        assert_eq!(outcomes.len(), 20);
        for (k, r) in outcomes {
            assert_eq!(r.expect("appended").first_seq, next + k);
        }
        assert_eq!(store.require_meta(b"a").expect("meta").events, next + 20);
        queue.close();
        let (tx, rx) = channel();
        queue.submit(AppendItem::new("a", None, vec![prompt(99)]), move |r| {
            tx.send(r).expect("send")
        });
        let late = rx.recv().expect("completed");
        assert!(matches!(late, Err(Error::Closed)), "{late:?}");
    }

    /// Events given as JSON fill an item's batch of events; an item whose batch is bytes takes
    /// none, and is refused with nothing written (the bytes are not stored with events dropped).
    #[test]
    fn events_json_is_refused_for_a_batch_given_as_bytes() {
        let (_dir, store) = seeded();
        let store = Arc::new(store);
        let next = store.require_meta(b"a").expect("meta").events;
        let mut queue = AppendQueue::start(Arc::clone(&store)).expect("start");
        let json = r#"[{"type":"user/message","data":{"content":[],"source":{"kind":"tool"},"role":"user","id":"j"},"surfaceOp":"append"}]"#;
        let line = format!("{{\"type\":\"turn/start\",\"seq\":{next}}}\n");
        let (tx, rx) = channel();
        let bytes = AppendItem::written_bytes("a", Some(next), line.into_bytes());
        queue.submit_json(bytes, json.to_owned(), move |r| tx.send(r).expect("send"));
        match rx.recv().expect("completed") {
            Err(Error::Rejected { id, rule, .. }) => {
                assert_eq!(id, "a");
                assert!(rule.contains("given as bytes"), "{rule}");
            }
            other => panic!("bytes with events JSON: {other:?}"),
        }
        assert_eq!(store.require_meta(b"a").expect("meta").events, next);
        let (tx, rx) = channel();
        let events = AppendItem::new("a", Some(next), Vec::new());
        queue.submit_json(events, json.to_owned(), move |r| tx.send(r).expect("send"));
        let receipt = rx.recv().expect("completed").expect("appended");
        assert_eq!((receipt.first_seq, receipt.count), (next, 1));
        queue.close();
    }
}
