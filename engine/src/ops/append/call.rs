//! One [`Store::append_many`] call, in the steps `docs/design.md` numbers ("The write path"):
//! 1. admission under each session's lock, taken in id order;
//! 2. write-open (the locks released while V1–V3 sessions migrate, then retaken);
//! 3. to 5. checks, authoring and indexing, staged into the call's one batch (`admission.rs`,
//!    `as_written.rs`, `creation.rs`), each item a part of its own under a commit hook;
//! 6. the group commit;
//! 7. publication of each committed session's write state;
//! 8. acknowledgement: each item's result, and the call's metrics.
//!
//! Invariants: the locks are taken in id order and held from step 1 to step 8 (released only
//! inside step 2, and retaken in the same order); a session's cached write state runs ahead of
//! the store only between its staging and step 7, which publishes it or drops it.

use std::sync::MutexGuard;

use super::admission::Staged;
use super::{expected_batch_bytes, record_appended, AppendItem, AppendReceipt};
use crate::error::{Error, Result};
use crate::metrics::AppendTally;
use crate::ops::migrate::opens_by_migrating;
use crate::store::{lock_session, Claim, Recorded, Recording, Store, WriteLock, WriteState};
use crate::write::session_batch::SessionBatch;

/// Each item's result, by the item's position in the call (`None` until it has one).
type Results = Vec<Option<Result<AppendReceipt>>>;

/// A locked session's write state (its lock's guard), by the item's place in the lock order.
type Guards<'h> = Vec<MutexGuard<'h, Option<WriteState>>>;

/// An item staged into the call's batch: its place in the lock order, what it staged, and
/// whether it creates its session.
struct StagedItem {
    slot: usize,
    staged: Staged,
    creates: bool,
}

/// What steps 3–5 leave for the commit.
struct Staging<'s> {
    batch: SessionBatch<'s>,
    items: Vec<StagedItem>,
    /// The ids the call creates, held until it returns.
    claims: Vec<Claim<'s>>,
    /// A failure after part of an item was staged (a storage or encoding fault): the batch is
    /// unfit to commit, and every item without a result fails with it.
    broken: Option<Error>,
    /// Whether each staged item is a part of its own (the store has a commit hook).
    parts: bool,
}

/// What step 6 gives each staged item, in order, and the failure every item not yet answered
/// shares (a broken batch, a failed single-part commit).
struct Committed {
    outcomes: Vec<Result<()>>,
    shared: Option<Error>,
}

impl Store {
    /// [`Store::append_many`] without counting its refusals.
    pub(super) fn append_items(&self, mut items: Vec<AppendItem>) -> Vec<Result<AppendReceipt>> {
        if let Err(e) = self.check_writable() {
            return items.iter().map(|_| Err(e.duplicate())).collect();
        }
        let mut results: Results = items.iter().map(|_| None).collect();
        let order = lock_order(&items, &mut results);
        let handles: Vec<_> = order
            .iter()
            .map(|&i| self.write_states.handle(items[i].id.as_bytes()))
            .collect();
        let guards: Guards<'_> = handles.iter().map(lock_session).collect();
        let (mut guards, opened) = self.write_open_all(&items, &order, &handles, guards);
        let mut tally = AppendTally::default();
        let staging = self.stage_all(
            &mut items,
            &order,
            &mut guards,
            opened,
            &mut results,
            &mut tally,
        );
        let claims = staging.claims;
        let (staged, committed) =
            commit(staging.batch, staging.items, staging.broken, staging.parts);
        publish(
            staged,
            committed.outcomes,
            &order,
            &mut guards,
            &mut results,
            &mut tally,
        );
        self.acknowledge(results, committed.shared, &tally, claims)
    }

    /// Step 2, write-open: a session whose write state is not cached and which is not being
    /// created is opened as DSH's write-open does, a V1–V3 one migrated first. A session whose
    /// write state is cached holds its committed metadata there (the cache's invariant), so
    /// only the others are read. A migration takes the session's lock, so the locks are
    /// released while they are opened and taken again, in the same order. Each item's opening
    /// error, by its position in the call.
    fn write_open_all<'h>(
        &self,
        items: &[AppendItem],
        order: &[usize],
        handles: &'h [WriteLock],
        guards: Guards<'h>,
    ) -> (Guards<'h>, Vec<Option<Error>>) {
        let mut opened: Vec<Option<Error>> = items.iter().map(|_| None).collect();
        let unopened: Vec<usize> = order
            .iter()
            .zip(&guards)
            .filter(|(&i, g)| {
                items[i].create.is_none()
                    && g.as_ref()
                        .is_none_or(|s| opens_by_migrating(s.meta.version))
            })
            .map(|(&i, _)| i)
            .collect();
        if unopened.is_empty() {
            return (guards, opened);
        }
        drop(guards);
        for i in unopened {
            opened[i] = self.write_open(&items[i].id).err();
        }
        (handles.iter().map(lock_session).collect(), opened)
    }

    /// Steps 3–5, checks, authoring and indexing: every item that opened is staged into the
    /// call's one batch (a creating item with its session's keys), in lock order. With a commit
    /// hook each staged item closes a part of its own, with its record for the hook (a
    /// replicated one: the proof that its system of record holds it). A refused item gets its
    /// result here and stages nothing; a failure after part of an item was staged stops the
    /// staging (the batch is broken).
    fn stage_all<'s>(
        &'s self,
        items: &mut [AppendItem],
        order: &[usize],
        guards: &mut Guards<'_>,
        mut opened: Vec<Option<Error>>,
        results: &mut Results,
        tally: &mut AppendTally,
    ) -> Staging<'s> {
        let mut staging = Staging {
            batch: SessionBatch::with_capacity(self, expected_batch_bytes(items, guards, order)),
            items: Vec::new(),
            claims: Vec::new(),
            broken: None,
            parts: self.has_commit_hook(),
        };
        for (slot, &i) in order.iter().enumerate() {
            if let Some(e) = opened[i].take() {
                results[i] = Some(Err(e));
                continue;
            }
            let item = &mut items[i];
            let replicated = item.batch.is_replicated();
            let keys_before = staging.batch.len();
            let outcome = match item.create.take() {
                Some(new) => self
                    .stage_creation(&mut guards[slot], item, &new, &mut staging.batch)
                    .map(|(staged, claim, created)| {
                        staging.claims.push(claim);
                        (staged, Some(created))
                    }),
                None => {
                    match guards[slot].is_some() {
                        true => tally.write_state_hits += 1,
                        false => tally.write_state_misses += 1,
                    }
                    self.stage_loaded(&mut guards[slot], item, &mut staging.batch)
                        .map(|staged| (staged, None))
                }
            };
            match outcome {
                Ok((mut staged, created)) => {
                    let creates = created.is_some();
                    record_appended(&mut staging.batch, &item.id, &mut staged, creates);
                    if staging.parts {
                        let recording = match (guards[slot].as_ref(), replicated) {
                            (_, true) => Recording::Recorded(Recorded::by_the_system_of_record()),
                            (Some(state), false) => staged
                                .record(&item.id, &state.meta, created)
                                .map_or(Recording::Local, Recording::Offered),
                            (None, false) => Recording::Local,
                        };
                        staging.batch.carries_appends(1);
                        staging.batch.end_part(recording);
                    }
                    staging.items.push(StagedItem {
                        slot,
                        staged,
                        creates,
                    });
                }
                // Refusals come before anything is staged.
                Err(e) if staging.batch.len() != keys_before => {
                    staging.broken = Some(e);
                    break;
                }
                Err(e) => results[i] = Some(Err(e)),
            }
        }
        staging
    }

    /// Step 8, acknowledgement: every item still without a result gets the failure they share,
    /// the call's metrics are recorded, and the claims on created ids are released (the
    /// sessions' locks go when the caller's guards drop).
    fn acknowledge(
        &self,
        results: Results,
        shared: Option<Error>,
        tally: &AppendTally,
        claims: Vec<Claim<'_>>,
    ) -> Vec<Result<AppendReceipt>> {
        self.recorder.appended(tally);
        drop(claims);
        results
            .into_iter()
            .map(|r| match (r, &shared) {
                (Some(result), _) => result,
                (None, Some(e)) => Err(e.duplicate()),
                (None, None) => Err(Error::Internal("append produced no result".into())),
            })
            .collect()
    }
}

/// Step 1, admission: the order in which the call's sessions are locked, by item position:
/// by session id, so concurrent calls cannot deadlock, each session once (a session's later
/// items are refused here: locking its lock twice would deadlock).
fn lock_order(items: &[AppendItem], results: &mut Results) -> Vec<usize> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| items[a].id.cmp(&items[b].id));
    order.dedup_by(|later, first| {
        let again = items[*later].id == items[*first].id;
        if again {
            results[*later] = Some(Err(Error::Rejected {
                id: items[*later].id.clone(),
                seq: None,
                rule: "a session may appear once per append_many call".into(),
            }));
        }
        again
    });
    order
}

/// Step 6, the group commit of the call's batch (`store/commit.rs`): one outcome per staged
/// item, from its own part under a commit hook, else from the batch's one part. Nothing is
/// committed when the batch is broken or nothing was staged.
fn commit(
    mut batch: SessionBatch<'_>,
    staged: Vec<StagedItem>,
    broken: Option<Error>,
    parts: bool,
) -> (Vec<StagedItem>, Committed) {
    let shared = |outcome: Result<()>| -> (Vec<Result<()>>, Option<Error>) {
        let outcomes = staged.iter().map(|_| match &outcome {
            Ok(()) => Ok(()),
            Err(e) => Err(e.duplicate()),
        });
        (outcomes.collect(), outcome.err())
    };
    let (outcomes, shared) = match broken {
        Some(e) => shared(Err(e)),
        None if staged.is_empty() => (Vec::new(), None),
        None if parts => (batch.commit_parts("committing appended batches"), None),
        None => {
            batch.carries_appends(staged.len() as u64);
            let outcome = batch.commit("committing appended batches");
            shared(outcome)
        }
    };
    (staged, Committed { outcomes, shared })
}

/// Step 7, publication: each committed item's session takes, in its cached write state, the
/// metadata it now has on disk, and the item its receipt; a session whose batch failed or was
/// refused has its cached state dropped (nothing of the batch was written, but the state ran
/// ahead of the store), so it reloads from the store.
fn publish(
    staged: Vec<StagedItem>,
    outcomes: Vec<Result<()>>,
    order: &[usize],
    guards: &mut Guards<'_>,
    results: &mut Results,
    tally: &mut AppendTally,
) {
    let mut outcomes = outcomes.into_iter();
    for item in staged {
        let outcome = outcomes.next().unwrap_or_else(|| {
            Err(Error::Internal(
                "a staged batch has no commit outcome".into(),
            ))
        });
        let slot = &mut guards[item.slot];
        results[order[item.slot]] = Some(match outcome {
            Ok(()) => {
                tally.appends += 1;
                tally.created += u64::from(item.creates);
                tally.events += item.staged.receipt.count;
                tally.bytes += item.staged.bytes;
                Ok(item.staged.publish(slot))
            }
            Err(e) => {
                **slot = None;
                Err(e)
            }
        });
    }
}
