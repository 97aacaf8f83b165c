//! Group commit: one thread commits every append that is waiting, of any number of sessions, in
//! one `Store::append_many` call (one RocksDB write, one fsync under `sync` durability). Sessions
//! created with their first batch in the same round are committed unsynced, one commit each, and
//! made durable together by one WAL sync after the round's appends.
//!
//! Invariants: each append's promise settles only after the write that holds it returned, so a
//! resolved append is durable; appends to one session commit in the order they were issued (a
//! group holding two batches of one session commits them in successive rounds, since
//! `append_many` takes a session once per call); a creation settles only after the WAL sync
//! that covers it; closing commits everything already queued before the thread stops.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use sessionlog_codec::format::event::NewEvent;
use sessionlog_codec::json::{parse, Value};
use sessionlog_engine::{AppendItem, AppendReceipt, Durability, Error, SourceEncoding, Store};

use crate::reply::{Pending, Reply};
use crate::workers::{closed, Shared};

/// One append waiting for the commit thread.
pub struct AppendRequest {
    /// Session id.
    pub id: String,
    /// The seq the caller expects its batch to start at.
    pub expected_next_seq: Option<u64>,
    /// The batch, as the JSON text of an array of DSH events.
    pub events_json: String,
    /// Through DSH's seam: a batch the strict append refuses is stored as DSH's writer would
    /// store it (`Store::append_as_written`), for DSH's reader to judge at load.
    pub as_written: bool,
    /// When the batch is a new session's first: the session's header; the session is created
    /// with the batch in one commit (`Store::create_as_written`).
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

#[derive(Default)]
struct Queue {
    waiting: Vec<AppendRequest>,
    closing: bool,
}

/// Counters that show the grouping: appends committed and writes that committed them.
#[derive(Default)]
pub struct CommitStats {
    /// `append_many` calls made.
    pub writes: AtomicU64,
    /// Appends they carried.
    pub appends: AtomicU64,
}

/// The commit thread of one store.
pub struct Committer {
    queue: Arc<(Mutex<Queue>, Condvar)>,
    thread: Option<JoinHandle<()>>,
    /// See [`CommitStats`].
    pub stats: Arc<CommitStats>,
}

impl Committer {
    /// Start the thread committing into `shared`.
    pub fn start(shared: &Shared) -> Committer {
        let queue = Arc::new((Mutex::new(Queue::default()), Condvar::new()));
        let stats = Arc::new(CommitStats::default());
        let thread = {
            let (queue, stats, shared) =
                (Arc::clone(&queue), Arc::clone(&stats), Arc::clone(shared));
            std::thread::Builder::new()
                .name("sessionlog-commit".into())
                .spawn(move || run(&queue, &stats, &shared))
                .ok()
        };
        Committer {
            queue,
            thread,
            stats,
        }
    }

    /// Queue an append; it joins the next group.
    pub fn submit(&self, request: AppendRequest) {
        if self.thread.is_none() {
            request.pending.settle(Reply::failed(
                "SESSIONLOG_THREADS",
                "the store's commit thread could not be started",
            ));
            return;
        }
        let (lock, wake) = &*self.queue;
        match lock.lock() {
            Ok(mut q) if !q.closing => {
                q.waiting.push(request);
                wake.notify_one();
            }
            _ => request.pending.settle(closed()),
        }
    }

    /// Commit what is queued, then stop the thread (blocking until it has).
    pub fn stop(&mut self) {
        let (lock, wake) = &*self.queue;
        if let Ok(mut q) = lock.lock() {
            q.closing = true;
            wake.notify_one();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(queue: &(Mutex<Queue>, Condvar), stats: &CommitStats, shared: &Shared) {
    let (lock, wake) = queue;
    loop {
        let group = {
            let Ok(mut q) = lock.lock() else { return };
            while q.waiting.is_empty() && !q.closing {
                q = match wake.wait(q) {
                    Ok(q) => q,
                    Err(_) => return,
                };
            }
            if q.waiting.is_empty() {
                return;
            }
            std::mem::take(&mut q.waiting)
        };
        for round in rounds(group) {
            commit_round(round, stats, shared);
        }
    }
}

/// Split a group into rounds in which each session appears once, keeping each session's order.
fn rounds(group: Vec<AppendRequest>) -> Vec<Vec<AppendRequest>> {
    let mut out: Vec<Vec<AppendRequest>> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for request in group {
        let n = seen.entry(request.id.clone()).or_insert(0);
        if out.len() <= *n {
            out.push(Vec::new());
        }
        out[*n].push(request);
        *n += 1;
    }
    out
}

/// Where a request's reply comes from.
enum Slot {
    /// Settled before any write (a malformed batch).
    Early(Reply),
    /// A creation, in round order.
    Created,
    /// An append, in round order.
    Appended,
}

/// Parse each request's batch; create the new sessions, commit the appends in one write, sync
/// once for the creations; settle every promise.
fn commit_round(round: Vec<AppendRequest>, stats: &CommitStats, shared: &Shared) {
    let mut parsed: Vec<Batch> = Vec::with_capacity(round.len());
    let mut creations: Vec<(Creation, Vec<NewEvent>)> = Vec::new();
    let mut settles: Vec<(Pending, Slot)> = Vec::with_capacity(round.len());
    for request in round {
        match (
            parse_batch(&request.id, &request.events_json),
            request.create,
        ) {
            (Ok(events), Some(creation)) => {
                creations.push((creation, events));
                settles.push((request.pending, Slot::Created));
            }
            (Ok(events), None) => {
                parsed.push(Batch {
                    id: request.id,
                    expected_next_seq: request.expected_next_seq,
                    events,
                    as_written: request.as_written.then_some(request.events_json),
                });
                settles.push((request.pending, Slot::Appended));
            }
            (Err(reply), _) => settles.push((request.pending, Slot::Early(reply))),
        }
    }
    let guard = shared.read().ok();
    let (created, appended) = match guard.as_deref().and_then(Option::as_ref) {
        Some(store) => (create(store, creations), append(store, parsed, stats)),
        // No open store: every request settles as closed (below).
        None => (Vec::new(), Vec::new()),
    };
    drop(guard);
    let (mut created, mut appended) = (created.into_iter(), appended.into_iter());
    for (pending, slot) in settles {
        let reply = match slot {
            Slot::Early(reply) => Some(reply),
            Slot::Created => created.next(),
            Slot::Appended => appended.next(),
        };
        pending.settle(reply.unwrap_or_else(closed));
    }
}

/// Create each new session with its first batch, unsynced, then make them durable with one WAL
/// sync (under `sync` durability); a failed sync fails every creation it was to cover.
fn create(store: &Store, creations: Vec<(Creation, Vec<NewEvent>)>) -> Vec<Reply> {
    let results: Vec<_> = creations
        .into_iter()
        .map(|(c, events)| {
            let encoding = if c.zstd {
                SourceEncoding::JsonlZstd
            } else {
                SourceEncoding::Jsonl
            };
            store.create_as_written(&c.header_line, encoding, events, true)
        })
        .collect();
    let synced = if store.durability() == Durability::Sync && results.iter().any(Result::is_ok) {
        store.sync()
    } else {
        Ok(())
    };
    results
        .into_iter()
        .map(|r| match (r, &synced) {
            (Ok(report), Ok(())) => crate::ops::created_json(&report),
            (Ok(_), Err(e)) => e.duplicate().into(),
            (Err(e), _) => e.into(),
        })
        .collect()
}

/// One batch of one session, parsed.
struct Batch {
    id: String,
    expected_next_seq: Option<u64>,
    events: Vec<NewEvent>,
    /// For an append through DSH's seam: the batch's JSON text, parsed again if the strict
    /// append refuses it.
    as_written: Option<String>,
}

fn append(store: &Store, mut parsed: Vec<Batch>, stats: &CommitStats) -> Vec<Reply> {
    if parsed.is_empty() {
        return Vec::new();
    }
    let items = parsed
        .iter_mut()
        .map(|b| AppendItem::new(&b.id, b.expected_next_seq, std::mem::take(&mut b.events)))
        .collect();
    let results = store.append_many(items);
    stats.writes.fetch_add(1, Ordering::Relaxed);
    stats
        .appends
        .fetch_add(parsed.len() as u64, Ordering::Relaxed);
    results
        .into_iter()
        .zip(&parsed)
        .map(|(result, batch)| match (result, &batch.as_written) {
            (Err(Error::Rejected { .. } | Error::NotAppendable { .. }), Some(text)) => {
                as_written(store, batch, text)
            }
            (result, _) => crate::reply::reply(result, |r| Reply::Json(receipt_json(r))),
        })
        .collect()
}

/// The batch the strict append refused, stored as DSH's writer would store it (its own commit).
fn as_written(store: &Store, batch: &Batch, text: &str) -> Reply {
    match parse_batch(&batch.id, text) {
        Ok(events) => crate::reply::reply(
            store.append_as_written(&batch.id, batch.expected_next_seq, events),
            |r| Reply::Json(receipt_json(r)),
        ),
        Err(reply) => reply,
    }
}

fn receipt_json(r: AppendReceipt) -> String {
    format!("{{\"firstSeq\":{},\"count\":{}}}", r.first_seq, r.count)
}

/// A batch's events from the JSON text of an array of DSH events (their seqs are ignored: the
/// store assigns seqs, checked against the expected next seq).
pub fn parse_batch(id: &str, text: &str) -> Result<Vec<NewEvent>, Reply> {
    let bad = |rule: String| {
        Reply::failed(
            "SESSIONLOG_BAD_ARGUMENT",
            format!("session \"{id}\": {rule}; nothing was appended"),
        )
    };
    let value = parse(text).map_err(|e| bad(format!("the batch is not JSON: {e}")))?;
    let Value::Array(items) = value else {
        return Err(bad("the batch must be an array of events".into()));
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, v)| NewEvent::from_logged_owned(v).map_err(|e| bad(format!("event {i}: {e}"))))
        .collect()
}
