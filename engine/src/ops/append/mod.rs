//! The live append path: many sessions appending DSH write batches, durably, in parallel.
//!
//! One call appends one DSH batch per session: the events are checked by DSH's append rules
//! (JSON admission, legacy formats, surface metadata and surface transitions), given their seqs,
//! authored exactly as DSH's JSONL writer would write them (envelope key order, chunk runs packed
//! per batch, `JSON.stringify` text) and staged with the session's updated metadata into one
//! batch, which commits through the store's group-commit queue: the batches of every thread
//! appending at the same moment share one WAL write and one fsync. A session is created the same
//! way, with its first batch ([`AppendItem::creating`]), and a host behind DSH's persistence seam
//! marks its items [`AppendItem::as_written`] (`as_written.rs`). Hosts that cannot give a thread
//! to each waiting append hand them to an [`AppendQueue`] (`queue.rs`).
//!
//! Invariants: a rejected batch writes nothing; an append whose expected seq is stale fails and
//! writes nothing; appends to one session are serialized by its write lock
//! (`store/session_cache.rs`); appends to a deleted session are refused (undelete first).

mod admission;
mod as_written;
mod creation;
mod queue;
#[cfg(test)]
mod tests;

pub use queue::{AppendQueue, StoreAccess};

use std::sync::MutexGuard;

use admission::Staged;
use creation::NewHeader;
use sessionlog_codec::format::event::NewEvent;
use sessionlog_codec::format::header::parse_header;

use crate::error::{Error, Result};
use crate::layout::changes::{Change, ChangeKind};
use crate::layout::meta::{SessionMeta, SourceEncoding, Verdict};
use crate::metrics::{AppendTally, RefusalReason};
use crate::ops::migrate::opens_by_migrating;
use crate::store::{
    lock_session, Claim, CreatedSession, ProjectionCheckpoints, RelationRules, Store, WriteState,
};
use crate::write::session_batch::SessionBatch;

/// One session's batch in an append.
#[derive(Clone, Debug)]
pub struct AppendItem {
    /// Session id.
    pub id: String,
    /// The seq the caller believes comes next; `None` skips the check.
    pub expected_next_seq: Option<u64>,
    /// The batch, in order.
    pub events: Vec<NewEvent>,
    /// Create the session with this batch (see [`AppendItem::creating`]).
    pub create: Option<NewSession>,
    /// Keep the batch as DSH's writer writes it even where DSH's append rules refuse it (see
    /// [`AppendItem::as_written`]).
    pub as_written: bool,
    /// The batch given as the bytes it adds to the log file (see [`AppendItem::written_bytes`]),
    /// instead of `events`.
    pub written: Option<Vec<u8>>,
    /// The store's system of record holds the batch already (see [`AppendItem::replicated`]):
    /// it is not offered to the commit hook.
    pub replicated: bool,
}

/// A session an [`AppendItem`] creates: its header line (without `\n`), as DSH's writer authors
/// it, and how its bytes are kept.
#[derive(Clone, Debug)]
pub struct NewSession {
    /// The header line; it must name the item's id (and pass DSH's strict header check, unless
    /// the item is [`AppendItem::as_written`]).
    pub header_line: String,
    /// The session's encoding.
    pub encoding: SourceEncoding,
}

impl AppendItem {
    /// Append `events` to the stored session `id`.
    pub fn new(
        id: impl Into<String>,
        expected_next_seq: Option<u64>,
        events: Vec<NewEvent>,
    ) -> Self {
        AppendItem {
            id: id.into(),
            expected_next_seq,
            events,
            create: None,
            as_written: false,
            written: None,
            replicated: false,
        }
    }

    /// A batch given as the bytes it adds to the log file (its lines for a `.jsonl` log, its
    /// zstd frames, each of whole lines, for a `.jsonl.zstd` one), kept verbatim and read by DSH's reader as
    /// [`AppendItem::as_written`] batches are. Offered to the store's commit hook like any
    /// batch: how a fleet writes bytes authored whole elsewhere (a fork's seed batch, an
    /// imported file's batches) through its system of record.
    pub fn written_bytes(
        id: impl Into<String>,
        expected_next_seq: Option<u64>,
        bytes: Vec<u8>,
    ) -> Self {
        AppendItem {
            written: Some(bytes),
            ..AppendItem::new(id, expected_next_seq, Vec::new())
        }
    }

    /// A [`AppendItem::written_bytes`] batch its system of record already holds: a store that
    /// is the index of a fleet's system of record catches up with these. Not offered to the
    /// store's commit hook (the one write a store with a hook takes without it).
    pub fn replicated(
        id: impl Into<String>,
        expected_next_seq: Option<u64>,
        bytes: Vec<u8>,
    ) -> Self {
        AppendItem {
            replicated: true,
            ..AppendItem::written_bytes(id, expected_next_seq, bytes)
        }
    }

    /// Create the session with this batch as its first, in the same commit: as DSH's backends
    /// publish a session with its first batch, one synced write for both. The session must not
    /// be stored; a batch refused by DSH's rules creates nothing. This is the one way a session
    /// is created.
    pub fn creating(mut self, header_line: impl Into<String>, encoding: SourceEncoding) -> Self {
        self.create = Some(NewSession {
            header_line: header_line.into(),
            encoding,
        });
        self
    }

    /// Write the batch as DSH's writer writes it, whatever DSH's reader will say of the log:
    /// what DSH's append rules refuse (an unknown event type, a malformed legacy message shape,
    /// a header version DSH does not read) is stored anyway, with the verdict DSH's reader
    /// gives the resulting log, as DSH's own JSONL backend keeps it for DSH to judge at load.
    /// For hosts behind DSH's persistence seam; the store's own writers stay strict. A batch the
    /// strict rules take is stored exactly as without this mark.
    pub fn as_written(mut self) -> Self {
        self.as_written = true;
        self
    }
}

/// What an append stored. Serializes as `{firstSeq, count}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppendReceipt {
    /// Seq of the batch's first event.
    pub first_seq: u64,
    /// Number of events appended (the next seq is `first_seq + count`).
    pub count: u64,
}

impl Store {
    /// Create an empty session whose header line is `header_line` (without `\n`), as DSH's
    /// writer authors it; it must pass DSH's strict header check. Its bytes are kept as
    /// `encoding`. Durable when this returns (under [`Durability::Sync`]). The same as an
    /// [`AppendItem::creating`] item with no events.
    ///
    /// [`Durability::Sync`]: crate::Durability::Sync
    pub fn create_session(&self, header_line: &str, encoding: SourceEncoding) -> Result<String> {
        let id = header_of(header_line)?.id.to_string_lossy();
        let item = AppendItem::new(&id, Some(0), Vec::new()).creating(header_line, encoding);
        self.append_many(vec![item])
            .pop()
            .unwrap_or_else(|| Err(Error::Internal("no creation result".into())))?;
        Ok(id)
    }

    /// Append one DSH batch to session `id`.
    pub fn append(
        &self,
        id: &str,
        expected_next_seq: Option<u64>,
        events: Vec<NewEvent>,
    ) -> Result<AppendReceipt> {
        self.append_many(vec![AppendItem::new(id, expected_next_seq, events)])
            .pop()
            .unwrap_or_else(|| Err(Error::Internal("no append result".into())))
    }

    /// Append one batch to each of several distinct sessions, staged into one batch and
    /// committed through the group-commit queue (with the batches of every other thread
    /// committing at the same moment: one WAL write, one fsync). Each item succeeds or fails on
    /// its own rules; a storage failure fails them all. A session may appear once per call (an
    /// [`AppendQueue`] orders several batches of one session into successive calls).
    pub fn append_many(&self, items: Vec<AppendItem>) -> Vec<Result<AppendReceipt>> {
        let results = self.append_items(items);
        if results.iter().any(Result::is_err) {
            for e in results.iter().filter_map(|r| r.as_ref().err()) {
                self.recorder.refused(RefusalReason::of(e), 1);
            }
        }
        results
    }

    /// [`Store::append_many`] without counting its refusals.
    fn append_items(&self, mut items: Vec<AppendItem>) -> Vec<Result<AppendReceipt>> {
        if let Err(e) = self.check_writable() {
            return items.iter().map(|_| Err(e.duplicate())).collect();
        }
        let mut results: Vec<Option<Result<AppendReceipt>>> = items.iter().map(|_| None).collect();
        // Lock sessions in id order so concurrent group appends cannot deadlock, each once: a
        // session's later items are refused (locking its lock twice would deadlock).
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
        let handles: Vec<_> = order
            .iter()
            .map(|&i| self.write_states.handle(items[i].id.as_bytes()))
            .collect();
        let mut guards: Vec<_> = handles.iter().map(lock_session).collect();
        // A V1–V3 session is migrated before it is written to, as DSH's write-open does. A
        // session whose write state is cached holds its committed metadata there (the cache's
        // invariant), so only the others read theirs; a migration takes the session's lock, so
        // the locks are released while they are opened and taken again, in the same order.
        // Sessions being created are not stored, so not opened.
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
        if !unopened.is_empty() {
            drop(guards);
            for i in unopened {
                opened[i] = self.write_open(&items[i].id).err();
            }
            guards = handles.iter().map(lock_session).collect();
        }
        let mut staged: Vec<(usize, Staged, bool)> = Vec::new();
        let mut tally = AppendTally::default();
        let mut claims = Vec::new();
        let mut batch =
            SessionBatch::with_capacity(self, expected_batch_bytes(&items, &guards, &order));
        // With a commit hook, each staged batch is a part of its own, which the hook (the
        // system of record) accepts or refuses alone.
        let parts = self.has_commit_hook();
        let mut broken = None;
        for (slot, &i) in order.iter().enumerate() {
            if let Some(e) = opened[i].take() {
                results[i] = Some(Err(e));
                continue;
            }
            let item = &mut items[i];
            // A replicated batch is its system of record's already: the hook never sees it.
            let replicated = item.replicated;
            let keys_before = batch.len();
            let outcome = match item.create.take() {
                Some(new) => self
                    .stage_creation(&mut guards[slot], item, &new, &mut batch)
                    .map(|(staged, claim, created)| {
                        claims.push(claim);
                        (staged, Some(created))
                    }),
                None => {
                    match guards[slot].is_some() {
                        true => tally.write_state_hits += 1,
                        false => tally.write_state_misses += 1,
                    }
                    self.stage_loaded(&mut guards[slot], item, &mut batch)
                        .map(|staged| (staged, None))
                }
            };
            match outcome {
                Ok((mut s, created)) => {
                    let creates = created.is_some();
                    record_appended(&mut batch, &item.id, &s, creates);
                    if parts {
                        let record = match (guards[slot].as_ref(), replicated) {
                            (Some(state), false) => s.record(&item.id, &state.meta, created),
                            _ => None,
                        };
                        batch.carries_appends(1);
                        batch.end_part(record);
                    }
                    staged.push((slot, s, creates));
                }
                // Refusals come before anything is staged. A failure after part of an item was
                // staged (a storage or encoding fault) leaves the batch unfit to commit.
                Err(e) if batch.len() != keys_before => {
                    broken = Some(e);
                    break;
                }
                Err(e) => results[i] = Some(Err(e)),
            }
        }
        // One outcome for every staged batch (`single`), or, with parts, one each.
        let (single, mut outcomes) = match broken {
            Some(e) => (Some(Err(e)), Vec::new().into_iter()),
            None if staged.is_empty() => (None, Vec::new().into_iter()),
            None => {
                if !parts {
                    batch.carries_appends(staged.len() as u64);
                }
                let mut outcomes = batch
                    .commit_parts("committing appended batches")
                    .into_iter();
                match parts {
                    true => (None, outcomes),
                    false => (outcomes.next(), outcomes),
                }
            }
        };
        for (slot, s, creates) in staged {
            let outcome = match &single {
                Some(Err(e)) => Err(e.duplicate()),
                Some(Ok(())) => Ok(()),
                None => outcomes.next().unwrap_or_else(|| {
                    Err(Error::Internal(
                        "a staged batch has no commit outcome".into(),
                    ))
                }),
            };
            results[order[slot]] = Some(match outcome {
                Ok(()) => {
                    tally.appends += 1;
                    tally.created += u64::from(creates);
                    tally.events += s.receipt.count;
                    tally.bytes += s.bytes;
                    Ok(s.publish(&mut guards[slot]))
                }
                Err(e) => {
                    // Nothing of the batch was written, but the session's cached state ran
                    // ahead of the store: dropped, it is reloaded from the store.
                    *guards[slot] = None;
                    Err(e)
                }
            });
        }
        if let Some(Err(e)) = &single {
            for result in results.iter_mut().filter(|r| r.is_none()) {
                *result = Some(Err(e.duplicate()));
            }
        }
        self.recorder.appended(&tally);
        drop(claims);
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::Internal("append produced no result".into()))))
            .collect()
    }

    /// Stage `item`, appended to a stored session, loading its write state into `slot` first
    /// when it is not in memory.
    fn stage_loaded(
        &self,
        slot: &mut Option<WriteState>,
        item: &mut AppendItem,
        batch: &mut SessionBatch<'_>,
    ) -> Result<Staged> {
        self.load_write_state(&item.id, slot)?;
        let staged = self.stage_item(slot, item, batch)?;
        staged.advance(slot, batch)?;
        Ok(staged)
    }

    /// Stage `item`'s batch against its session's loaded state: by DSH's append rules, or, for
    /// an item written as DSH's writer wrote it, as that writer would store it where the rules
    /// refuse it (`as_written.rs`).
    fn stage_item(
        &self,
        slot: &mut Option<WriteState>,
        item: &mut AppendItem,
        batch: &mut SessionBatch<'_>,
    ) -> Result<Staged> {
        if let Some(bytes) = item.written.take() {
            let written = as_written::Written::Bytes(bytes);
            return as_written::stage(self, slot, &item.id, item.expected_next_seq, written, batch);
        }
        let events = std::mem::take(&mut item.events);
        if !item.as_written {
            return admission::stage(self, slot, &item.id, item.expected_next_seq, events, batch);
        }
        // The strict path consumes the events; an as-written item keeps a copy for the fallback
        // (refusals are rare, but the seam's batches are small).
        match admission::stage(
            self,
            slot,
            &item.id,
            item.expected_next_seq,
            events.clone(),
            batch,
        ) {
            Err(Error::Rejected { .. } | Error::NotAppendable { .. }) => {
                let written = as_written::Written::Events(events);
                as_written::stage(self, slot, &item.id, item.expected_next_seq, written, batch)
            }
            outcome => outcome,
        }
    }

    /// Stage `item`, which creates its session with its batch: the header checked, the id
    /// claimed, the batch staged against the empty session, then the session's keys (see
    /// `creation.rs`). The claim is held until the commit.
    fn stage_creation(
        &self,
        slot: &mut Option<WriteState>,
        item: &mut AppendItem,
        new: &NewSession,
        batch: &mut SessionBatch<'_>,
    ) -> Result<(Staged, Claim<'_>, CreatedSession)> {
        let written = item.as_written || item.written.is_some();
        let header = NewHeader::check(&new.header_line, new.encoding, written)?;
        let named = header.id();
        if named != item.id {
            return Err(Error::Rejected {
                id: item.id.clone(),
                seq: None,
                rule: format!("header: it names session \"{named}\", not the appended one"),
            });
        }
        // A stored session is refused here, so `slot` holds no state (the cache's invariant).
        let claim = header.claim(self)?;
        let empty = header.empty_meta(self, written);
        let mut state = self.write_state_of(empty.clone())?;
        if written {
            state.reader = Some(header.seam_reader());
        }
        *slot = Some(state);
        let staged = self.stage_item(slot, item, batch).and_then(|staged| {
            header.stage(staged.meta().unwrap_or(&empty), batch)?;
            Ok(staged)
        });
        if staged.is_err() {
            *slot = None;
        }
        Ok((staged?, claim, header.created()))
    }

    /// Fill an empty write-state slot from the store.
    fn load_write_state<'g>(
        &self,
        id: &str,
        slot: &'g mut Option<WriteState>,
    ) -> Result<&'g mut WriteState> {
        if slot.is_none() {
            let meta = self.require_meta(id.as_bytes())?;
            *slot = Some(self.write_state_of(meta)?);
        }
        slot.as_mut()
            .ok_or_else(|| Error::Internal("a loaded write state vanished".into()))
    }

    /// The write state of the session `meta` describes (as committed, or empty and about to be
    /// created). Refuses sessions no batch may be appended to: deleted ones, and torn ones (DSH
    /// cuts the tail before it appends). Which batches the others take is each path's rule
    /// (`admission.rs`, `as_written.rs`).
    fn write_state_of(&self, meta: SessionMeta) -> Result<WriteState> {
        meta.require_undeleted()?;
        if meta.verdict == Verdict::Torn {
            return Err(Error::NotAppendable {
                id: meta.id_lossy(),
                reason: "its log has a torn tail; repair it first (sessionlog repair)".into(),
            });
        }
        let model = sessionlog_codec::rules::surface::SurfaceModel::for_version(meta.version);
        let surface = match (model, &meta.surface_error) {
            (Some(model), None) => Some(match meta.events {
                0 => sessionlog_codec::rules::surface::SurfaceFold::new().with_model(model),
                n => self.surface_fold_at(&meta, n - 1)?,
            }),
            _ => None,
        };
        let projections = match model {
            Some(_) => Some(ProjectionCheckpoints::resume(self.projection_set(&meta)?)),
            None => None,
        };
        let relations = if self.options.strict_appends && meta.verdict == Verdict::Clean {
            Some(self.relation_rules(&meta)?)
        } else {
            None
        };
        Ok(WriteState {
            meta,
            surface,
            projections,
            relations,
            reader: None,
        })
    }

    /// DSH's relationship rules over the stored log; a log that already breaks them takes no
    /// strict appends.
    fn relation_rules(&self, meta: &SessionMeta) -> Result<RelationRules> {
        let mut trace = RelationRules::for_version(meta.version);
        if meta.events == 0 {
            return Ok(trace);
        }
        let mut failure = None;
        self.events(&meta.id_lossy(), 0, None, &mut |seq, e| {
            if failure.is_none() {
                if let Err(m) = trace.check(e) {
                    failure = Some(format!(
                        "its log already violates DSH's invariants at seq {seq}: {m}"
                    ));
                }
            }
            Ok(())
        })?;
        match failure {
            Some(reason) => Err(Error::NotAppendable {
                id: meta.id_lossy(),
                reason,
            }),
            None => Ok(trace),
        }
    }
}

/// Record the change a staged item makes (its events, or its session's creation) for the
/// change log and the session's subscribers; an empty batch of a stored session makes none.
fn record_appended(batch: &mut SessionBatch<'_>, id: &str, staged: &Staged, creates: bool) {
    let kind = match (creates, staged.receipt.count) {
        (true, _) => ChangeKind::Created,
        (false, 0) => return,
        (false, _) => ChangeKind::Appended,
    };
    let receipt = staged.receipt;
    batch.record_change(Change::new(
        kind,
        id.as_bytes(),
        receipt.first_seq,
        receipt.count,
    ));
}

/// Bytes per event assumed for a session with no events stored yet.
const NEW_SESSION_EVENT_BYTES: u64 = 256;
/// Bytes per item for its records besides its lines: the block's key and metadata, surface
/// records, the counters record and the session's index keys.
const ITEM_RECORD_BYTES: u64 = 512;
/// The most an append's WriteBatch is sized ahead.
const MAX_BATCH_PRESIZE: u64 = 16 << 20;

/// The WriteBatch bytes an append of `items` (locked as `guards`, in `order`) is expected to
/// stage: each item's events at its session's bytes per event so far. The batch is sized to it
/// up front, as RocksDB's WriteBatch otherwise grows by doubling, copying itself each time (a
/// V4 round of 31 sessions' batches is some 150 KB).
fn expected_batch_bytes(
    items: &[AppendItem],
    guards: &[MutexGuard<'_, Option<WriteState>>],
    order: &[usize],
) -> usize {
    let bytes = order.iter().zip(guards).fold(0u64, |total, (&i, state)| {
        let per_event = state
            .as_ref()
            .map(|s| s.meta.bytes_per_event())
            .unwrap_or(NEW_SESSION_EVENT_BYTES);
        let events = items[i].events.len() as u64;
        total.saturating_add(
            per_event
                .saturating_mul(events)
                .saturating_add(ITEM_RECORD_BYTES),
        )
    });
    usize::try_from(bytes.min(MAX_BATCH_PRESIZE)).unwrap_or(0)
}

/// The parsed header of a session a caller creates; a line that is not one is refused.
pub(crate) fn header_of(header_line: &str) -> Result<sessionlog_codec::format::header::Header> {
    parse_header(header_line.as_bytes()).map_err(|e| Error::Rejected {
        id: String::new(),
        seq: None,
        rule: format!("header: {e}"),
    })
}
