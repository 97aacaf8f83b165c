//! The live append path: many sessions appending DSH write batches, durably, in parallel.
//!
//! One call appends one DSH batch per session: the events are checked by DSH's append rules
//! (JSON admission, legacy formats, surface metadata and surface transitions), given their seqs,
//! authored exactly as DSH's JSONL writer would write them (envelope key order, chunk runs packed
//! per batch, `JSON.stringify` text) and staged with the session's updated metadata into one
//! batch, which commits through the store's group-commit queue: the batches of every thread
//! appending at the same moment share one WAL write and one fsync. A session is created the same
//! way, with its first batch ([`AppendItem::creating`]), and a host behind DSH's persistence seam
//! marks its items [`AppendItem::as_written`] (`as_written.rs`). What an item is lives in
//! `item.rs`; the steps of one call, in `call.rs`. Hosts that cannot give a thread to each
//! waiting append hand them to an [`AppendQueue`] (`queue.rs`).
//!
//! Invariants: a rejected batch writes nothing; an append whose expected seq is stale fails and
//! writes nothing; appends to one session are serialized by its write lock
//! (`store/session_cache.rs`); appends to a deleted session are refused (undelete first).

mod admission;
mod as_written;
mod call;
mod creation;
mod item;
mod queue;
#[cfg(test)]
mod tests;

pub use item::{AppendBatch, AppendItem, NewSession};
pub use queue::{AppendQueue, StoreAccess};

use std::sync::MutexGuard;

use admission::Staged;
use creation::NewHeader;
use sessionlog_codec::format::event::NewEvent;
use sessionlog_codec::format::header::parse_header;

use crate::error::{Error, Result};
use crate::layout::changes::{Change, ChangeKind};
use crate::layout::meta::{SessionMeta, SourceEncoding, Verdict};
use crate::metrics::RefusalReason;
use crate::store::{
    Claim, CreatedSession, ProjectionCheckpoints, RelationRules, Store, WriteState,
};
use crate::write::session_batch::SessionBatch;

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
        self.create(header_line, encoding, Vec::new())?;
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
        let (id, expected) = (item.id.as_str(), item.expected_next_seq);
        let events = match item.batch.take() {
            AppendBatch::Bytes(bytes) | AppendBatch::Replicated(bytes) => {
                let written = as_written::Written::Bytes(bytes);
                return as_written::stage(self, slot, id, expected, written, batch);
            }
            AppendBatch::Events(events) => {
                return admission::stage(self, slot, id, expected, events, batch)
            }
            AppendBatch::AsWritten(events) => events,
        };
        // The strict path consumes the events; an as-written item keeps a copy for the fallback
        // (refusals are rare, but the seam's batches are small).
        match admission::stage(self, slot, id, expected, events.clone(), batch) {
            Err(Error::Rejected { .. } | Error::NotAppendable { .. }) => {
                let written = as_written::Written::Events(events);
                as_written::stage(self, slot, id, expected, written, batch)
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
        let written = item.batch.is_written();
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
/// change log and the session's subscribers, with its events when they were kept for them; an
/// empty batch of a stored session makes none.
pub(super) fn record_appended(
    batch: &mut SessionBatch<'_>,
    id: &str,
    staged: &mut Staged,
    creates: bool,
) {
    let kind = match (creates, staged.receipt.count) {
        (true, _) => ChangeKind::Created,
        (false, 0) => return,
        (false, _) => ChangeKind::Appended,
    };
    let receipt = staged.receipt;
    batch.record_change(
        Change::new(kind, id.as_bytes(), receipt.first_seq, receipt.count),
        staged.events.take(),
    );
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
        let events = items[i].batch.given_events() as u64;
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
