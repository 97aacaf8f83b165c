//! The failover harness's load: writer threads on one fleet host, each appending generated DSH
//! batches to its own sessions (one `append_many` group at a time, one batch per session), and
//! the ledger of what the host said: every acknowledged batch (session, seqs, crc32 of its
//! bytes), every refusal by kind, and when appends resumed after a kill.
//!
//! A batch refused as unavailable (PostgreSQL unreachable for the hook's patience, or a commit
//! whose outcome could not be read back) is not acknowledged: its writer appends the very same
//! batch again (with its session's header, when it creates the session) until it is
//! acknowledged. A batch refused as stale or fenced stops its session: the host is its only
//! writer, so such a refusal means the fleet lost track of its own commits, and the check
//! reports it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use anyhow::Context;
use sessionlog_cluster::Fleet;
use sessionlog_engine::{Error, RefusalKind};

use super::check::AckedBatch;
use super::sessions::{feed_for, session_id};
use crate::gen::SessionFeed;
use crate::hosting::sessionlog::append_item;

/// When appends resumed after a kill: the first acknowledgement of a batch first tried after it
/// (a batch tried before, refused and appended again, may be acknowledged by reading it back
/// from the new primary, before any new commit is possible).
#[derive(Default)]
struct Resumption {
    since: Option<Instant>,
    resumed: Option<Instant>,
}

/// What the host said to the writers, once they stopped.
pub(crate) struct Recorded {
    /// Every acknowledged batch.
    pub(crate) acked: Vec<AckedBatch>,
    /// Refusals by kind.
    pub(crate) refusals: BTreeMap<&'static str, u64>,
    /// Refusals as unavailable whose commit outcome the hook could not settle.
    pub(crate) unknown_outcomes: u64,
    /// Batches refused as stale or fenced, with the refusal.
    pub(crate) stuck: Vec<String>,
}

/// What the host said to the writers.
#[derive(Default)]
pub(crate) struct Ledger {
    acked: Mutex<Vec<AckedBatch>>,
    refusals: Mutex<BTreeMap<&'static str, u64>>,
    /// Refusals as unavailable whose commit outcome the hook could not settle.
    unknown_outcomes: Mutex<u64>,
    /// Batches refused as stale or fenced, with the refusal.
    stuck: Mutex<Vec<String>>,
    resumption: Mutex<Resumption>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Ledger {
    /// Watch for the first acknowledgement of a batch first tried at `since` or later.
    pub(crate) fn watch(&self, since: Instant) {
        *locked(&self.resumption) = Resumption {
            since: Some(since),
            resumed: None,
        };
    }

    /// When appends resumed since the last [`Ledger::watch`], if they have.
    pub(crate) fn resumed(&self) -> Option<Instant> {
        locked(&self.resumption).resumed
    }

    /// Acknowledged batches so far.
    pub(crate) fn acked_count(&self) -> usize {
        locked(&self.acked).len()
    }

    /// Everything recorded.
    pub(crate) fn into_recorded(self) -> Recorded {
        fn inner<T>(m: Mutex<T>) -> T {
            m.into_inner().unwrap_or_else(PoisonError::into_inner)
        }
        Recorded {
            acked: inner(self.acked),
            refusals: inner(self.refusals),
            unknown_outcomes: inner(self.unknown_outcomes),
            stuck: inner(self.stuck),
        }
    }

    fn ack(&self, batch: AckedBatch, first_tried: Instant) {
        locked(&self.acked).push(batch);
        let mut r = locked(&self.resumption);
        if r.resumed.is_none() && r.since.is_some_and(|since| first_tried >= since) {
            r.resumed = Some(Instant::now());
        }
    }

    fn refuse(&self, kind: RefusalKind, message: &str) {
        let name = match kind {
            RefusalKind::Unavailable => "unavailable",
            RefusalKind::Stale => "stale",
            RefusalKind::Fenced => "fenced",
            RefusalKind::Unstorable => "unstorable",
        };
        *locked(&self.refusals).entry(name).or_default() += 1;
        if kind == RefusalKind::Unavailable && message.contains("outcome unknown") {
            *locked(&self.unknown_outcomes) += 1;
        }
        if kind != RefusalKind::Unavailable {
            locked(&self.stuck).push(message.to_owned());
        }
    }
}

/// One session a writer appends to.
struct Active {
    id: String,
    feed: SessionFeed,
    header: String,
    /// Index of the next batch to append.
    next: usize,
    /// Whether PostgreSQL and the store hold the session (its creating batch acknowledged).
    created: bool,
    /// When the next batch was first tried (it may have been refused since).
    first_tried: Option<Instant>,
}

/// What the writers do.
pub(crate) struct Load<'a> {
    pub(crate) fleet: &'a Fleet,
    pub(crate) ledger: &'a Ledger,
    pub(crate) stop: &'a AtomicBool,
    pub(crate) threads: u64,
    pub(crate) sessions_per_thread: usize,
    pub(crate) events_per_session: u64,
    pub(crate) seed: u64,
}

impl Load<'_> {
    /// Writer `t`: sessions `k ≡ t (mod threads)`, a few open at a time, until `stop`.
    pub(crate) fn writer(&self, t: u64) -> anyhow::Result<()> {
        let mut next_k = t;
        let mut active: Vec<Active> = Vec::new();
        while !self.stop.load(Ordering::SeqCst) {
            while active.len() < self.sessions_per_thread {
                let (feed, header) = feed_for(next_k, self.events_per_session, self.seed);
                active.push(Active {
                    id: session_id(next_k),
                    feed,
                    header,
                    next: 0,
                    created: false,
                    first_tried: None,
                });
                next_k += self.threads;
            }
            let items = active
                .iter()
                .map(|a| {
                    let header = (!a.created).then_some(a.header.as_str());
                    append_item(&a.id, &a.feed.batches[a.next], header)
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let now = Instant::now();
            for a in &mut active {
                a.first_tried.get_or_insert(now);
            }
            let results = self.fleet.append_many(items);
            let mut stopped = Vec::new();
            for (i, result) in results.into_iter().enumerate() {
                let a = &mut active[i];
                match result {
                    Ok(receipt) => {
                        let batch = &a.feed.batches[a.next];
                        self.ledger.ack(
                            AckedBatch {
                                session: a.id.clone(),
                                first_seq: receipt.first_seq,
                                last_seq: (receipt.first_seq + receipt.count).saturating_sub(1),
                                crc: crc32fast::hash(batch.text.as_bytes()),
                            },
                            a.first_tried.take().unwrap_or(now),
                        );
                        a.created = true;
                        a.next += 1;
                    }
                    // Not acknowledged: the same batch goes again on the next pass.
                    Err(Error::Refused(r)) if r.kind == RefusalKind::Unavailable => {
                        self.ledger.refuse(r.kind, &r.message)
                    }
                    Err(Error::Refused(r)) => {
                        self.ledger.refuse(r.kind, &r.message);
                        stopped.push(i);
                    }
                    Err(e) => {
                        return Err(e).with_context(|| format!("appending to {}", a.id));
                    }
                }
            }
            for i in stopped.into_iter().rev() {
                active.remove(i);
            }
            active.retain(|a| a.next < a.feed.batches.len());
        }
        Ok(())
    }
}
