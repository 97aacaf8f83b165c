//! Admitting one session's appended batch: DSH's append checks, seq assignment and authoring,
//! then the batch staged (`write/`) into the shared [`SessionBatch`]. The session's cached write
//! state runs ahead of the store from staging to the commit: its surface and projections fold
//! the batch while staging (the events are freed there, while still hot in cache, and nothing
//! of them is kept until the commit, unless the session is followed: then its subscribers take
//! them once the batch commits). The caller publishes the staged metadata only after the
//! batch committed; a batch that fails to commit drops the cached state, so it is reloaded from
//! the store.

use std::sync::Arc;

use sessionlog_codec::format::event::{event_type, NewEvent};
use sessionlog_codec::format::known_types::is_known;
use sessionlog_codec::format::rows::{check_header_seq, declared_tools};
use sessionlog_codec::json::Value;

use super::AppendReceipt;
use crate::error::{Error, FirstError, Result};
use crate::layout::meta::{now_ms, SessionMeta, Verdict};
use crate::store::{CommitRecord, CreatedSession, RelationRules, Store, WriteState};
use crate::write::appended_batch::{stage_checkpoints, write_records};
use crate::write::indexer::fold_batch;
use crate::write::session_batch::SessionBatch;

/// A batch staged into the session batch, waiting for its commit.
pub(crate) struct Staged {
    pub(super) receipt: AppendReceipt,
    /// The JSONL bytes the batch adds to the session's log (its lines and their newlines).
    pub(super) bytes: u64,
    /// The session's metadata once the batch commits (`None` for an empty batch).
    pub(super) meta: Option<SessionMeta>,
    /// The relationship state after the batch (strict mode).
    pub(super) relations: Option<RelationRules>,
    /// Whether the cached state must be reloaded once the batch commits: a batch written as
    /// DSH's writer wrote it is not checked against the strict store's relationship rules,
    /// whose state is rebuilt from the log instead.
    pub(super) reload: bool,
    /// Whether the batch changes the metadata beyond its counters (a verdict, a tail, a surface
    /// refusal: a batch written as DSH's writer wrote it), so its `S` record is written too.
    pub(super) rewrites_record: bool,
    /// The bytes the batch adds to the log file, kept for the store's commit hook (none
    /// without one, or for an empty batch).
    pub(super) file_bytes: Option<Vec<u8>>,
    /// The batch's events as authored, kept only when the session is followed: its
    /// subscribers take them from memory once the batch commits (`store/feed.rs`).
    pub(super) events: Option<Arc<[Value]>>,
}

impl Staged {
    /// The session's metadata once the batch commits (`None` for an empty batch).
    pub(crate) fn meta(&self) -> Option<&SessionMeta> {
        self.meta.as_ref()
    }

    /// The batch's record for the store's commit hook, as session `id` (its metadata before
    /// the batch: `before`) stages it; `creates`: the session the batch creates. `None` for an
    /// empty batch of a stored session (it writes nothing).
    pub(crate) fn record(
        &mut self,
        id: &str,
        before: &SessionMeta,
        creates: Option<CreatedSession>,
    ) -> Option<CommitRecord> {
        let after = self.meta.as_ref();
        if after.is_none() && creates.is_none() {
            return None;
        }
        Some(CommitRecord {
            session: id.to_owned(),
            first_seq: self.receipt.first_seq,
            events: self.receipt.count,
            batch: before.next_batch,
            bytes: self.file_bytes.take().unwrap_or_default(),
            creates,
            verdict: after.unwrap_or(before).verdict.to_string(),
        })
    }

    /// Stage the change of the stored session's metadata this batch makes, from the cached
    /// state's (its counters, and its activity key when that moved). Not for a session the
    /// call creates: its keys are written whole (`SessionBatch::insert_session`), and moving
    /// keys it never had would leave deletions behind. A failure empties the slot: the
    /// cached state already holds the batch.
    pub(crate) fn advance(
        &self,
        slot: &mut Option<WriteState>,
        batch: &mut SessionBatch<'_>,
    ) -> Result<()> {
        let (Some(state), Some(next)) = (slot.as_ref(), self.meta.as_ref()) else {
            return Ok(());
        };
        let advanced = if self.rewrites_record {
            batch.update_meta(&state.meta, next)
        } else {
            batch.advance(&state.meta, next)
        };
        if advanced.is_err() {
            *slot = None;
        }
        advanced
    }

    /// The commit succeeded: make the cached write state match the store.
    pub(crate) fn publish(self, slot: &mut Option<WriteState>) -> AppendReceipt {
        if self.reload {
            *slot = None;
        } else if let Some(state) = slot.as_mut() {
            if let Some(meta) = self.meta {
                state.meta = meta;
                if !self.rewrites_record {
                    // DSH's reader did not read this batch: it is read again when needed.
                    state.reader = None;
                }
            }
            if self.relations.is_some() {
                state.relations = self.relations;
            }
        }
        self.receipt
    }
}

/// Check, author and stage `item` against the cached state in `slot`, adding its keys to
/// `batch`. A rejected batch leaves the state as it was; a failure staging an admitted batch
/// empties the slot (the state may have run ahead of the store).
pub(crate) fn stage(
    store: &Store,
    slot: &mut Option<WriteState>,
    id: &str,
    expected_next_seq: Option<u64>,
    events: Vec<NewEvent>,
    batch: &mut SessionBatch<'_>,
) -> Result<Staged> {
    let Some(state) = slot.as_mut() else {
        return Err(Error::Internal(
            "staging without a loaded write state".into(),
        ));
    };
    require_appendable(&state.meta)?;
    let (Some(surface), Some(_)) = (state.surface.as_mut(), state.projections.as_ref()) else {
        return Err(Error::NotAppendable {
            id: id.into(),
            reason: "its log has no surface index to check appends against".into(),
        });
    };
    let next = state.meta.events;
    if let Some(expected) = expected_next_seq.filter(|&e| e != next) {
        return Err(Error::StaleSeq {
            id: id.into(),
            expected,
            actual: next,
        });
    }
    let receipt = AppendReceipt {
        first_seq: next,
        count: events.len() as u64,
    };
    if events.is_empty() {
        // DSH writes nothing for an empty batch: no line, no frame, no newline.
        return Ok(Staged {
            receipt,
            bytes: 0,
            meta: None,
            relations: None,
            reload: false,
            rewrites_record: false,
            file_bytes: None,
            events: None,
        });
    }
    let reject = |seq: u64, rule: String| Error::Rejected {
        id: id.into(),
        seq: Some(seq),
        rule,
    };
    let now = now_ms();
    let mut authored = Vec::with_capacity(events.len());
    let v4 = state.meta.version == 4;
    // Consecutive events mostly share a type (chunk runs): a type equal to the previous event's,
    // which was known, is not looked up again.
    let mut previous_known = false;
    for (k, event) in events.into_iter().enumerate() {
        let seq = next + k as u64;
        let known = v4
            || (previous_known && authored.last().map(event_type) == Some(event.ty()))
            || is_known(event.ty());
        previous_known = known;
        // The type is copied only for the refusal of an unknown one (rare).
        let unknown = (!known && !event.ignorable()).then(|| event.ty().to_owned());
        let authored_event = event.author(seq, now).map_err(|rule| reject(seq, rule))?;
        if let Some(ty) = unknown {
            return Err(reject(seq, format!("event type \"{ty}\" is unknown to DSH 0.1.0, whose reader refuses a log holding it; mark it \"ignorable\": true")));
        }
        if v4 {
            check_v4_event(&authored_event).map_err(|rule| reject(seq, rule))?;
            let failure = FirstError::default();
            let header_tools = |s: u64| match s.checked_sub(next) {
                Some(i) => authored
                    .get(usize::try_from(i).ok()?)
                    .and_then(declared_tools),
                None => failure
                    .keep(store.event_at(&state.meta, s))
                    .as_ref()
                    .and_then(declared_tools),
            };
            let checked = check_header_seq(&authored_event, header_tools);
            failure.check()?;
            checked.map_err(|rule| reject(seq, rule))?;
        }
        authored.push(authored_event);
    }
    let relations = match &state.relations {
        Some(trace) => {
            let mut trace = trace.clone();
            for (k, event) in authored.iter().enumerate() {
                trace
                    .check(event)
                    .map_err(|rule| reject(next + k as u64, rule))?;
            }
            Some(trace)
        }
        None => None,
    };
    let folded = fold_batch(store, &state.meta, surface, &authored)?
        .map_err(|r| reject(r.seq, r.message))?;
    let (meta, file_bytes) = match write_records(&state.meta, &authored, &folded, batch) {
        Ok(written) => written,
        Err(e) => {
            for change in folded.changes.iter().rev() {
                surface.undo(change);
            }
            return Err(e);
        }
    };
    let checkpointed = match state.projections.as_mut() {
        Some(writer) => stage_checkpoints(writer, meta.number, next, &authored, batch),
        None => Ok(()),
    };
    // The events are freed here, while still hot in cache, unless subscribers take them.
    let events = match store.is_followed(id.as_bytes()) {
        true => Some(Arc::from(authored)),
        false => None,
    };
    match checkpointed {
        Ok(()) => Ok(Staged {
            receipt,
            bytes: meta
                .plaintext_bytes
                .saturating_sub(state.meta.plaintext_bytes),
            meta: Some(meta),
            relations,
            reload: false,
            rewrites_record: false,
            file_bytes: store.has_commit_hook().then_some(file_bytes),
            events,
        }),
        Err(e) => {
            *slot = None;
            Err(e)
        }
    }
}

/// Refuse a session DSH's append would not take: one whose log DSH's reader refuses, or whose
/// surface DSH's fold refused. A log DSH's writer made that way takes batches only as DSH's
/// writer writes them (`as_written.rs`).
fn require_appendable(meta: &SessionMeta) -> Result<()> {
    let reason = match (&meta.verdict, &meta.surface_error) {
        (Verdict::Clean, None) => return Ok(()),
        (Verdict::Clean, Some((seq, reason))) => {
            format!("its log fails DSH's surface validation at seq {seq}: {reason}")
        }
        (v, _) => format!("DSH's reader refuses its log ({v})"),
    };
    Err(Error::NotAppendable {
        id: meta.id_lossy(),
        reason,
    })
}

/// The append-site checks of a V4 event that its surface fold does not make: V4 row admission
/// and the types V4 no longer has.
fn check_v4_event(event: &Value) -> std::result::Result<(), String> {
    let ty = event
        .as_object()
        .and_then(|o| o.get("type"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if ty == "assistant/chunk" || sessionlog_codec::format::chunk_rows::is_row_tag(ty) {
        return Err(format!(
            "event type \"{ty}\" does not exist in format v4: streams are embedded in assistant/message and assistant/attempt"
        ));
    }
    match sessionlog_codec::format::rows::admit_v4_row(event) {
        Ok(()) => Ok(()),
        Err(
            sessionlog_codec::format::rows::Admission::Corrupt(m)
            | sessionlog_codec::format::rows::Admission::Unsupported(m),
        ) => Err(m),
    }
}

#[cfg(test)]
mod tests {
    use crate::error::Error;
    use crate::layout::keys::CF_SESSIONS;
    use crate::layout::meta::SourceEncoding;
    use crate::ops::append::AppendItem;
    use crate::test_support::{damage_first_block, empty, ev, seeded};

    /// A session created with its first batch has its keys written whole: moving the activity
    /// key of metadata it never stored would leave a deletion behind. A stored session's next
    /// prompt does move it, one deletion, which shows the count sees them.
    #[test]
    fn a_creating_append_leaves_no_deletion_behind() {
        let (_t, store) = empty();
        let header = r#"{"type":"session","version":0,"id":"c","createdAt":1,"cwd":"/w","delegationDepth":0}"#;
        let prompt = |time: u64| {
            ev(&format!(
                r#"{{"type":"user/message","time":{time},"data":{{"content":[],"source":{{"kind":"user"}},"role":"user","id":"u{time}"}},"surfaceOp":"append"}}"#
            ))
        };
        let deletions = || store.raw_property(CF_SESSIONS, "rocksdb.num-deletes-active-mem-table");
        let created = store
            .append_many(vec![AppendItem::new("c", Some(0), vec![prompt(2)])
                .creating(header, SourceEncoding::Jsonl)]);
        assert!(created.iter().all(Result::is_ok), "{created:?}");
        assert_eq!(store.require_meta(b"c").expect("meta").activity_ms, Some(2));
        assert_eq!(deletions(), 0);
        store.append("c", Some(1), vec![prompt(3)]).expect("append");
        assert_eq!(store.require_meta(b"c").expect("meta").activity_ms, Some(3));
        assert_eq!(deletions(), 1);
    }

    /// A failure reading an earlier event (here a block failing its checksum) is reported as
    /// the storage fault it is, never as the caller's broken rule.
    #[test]
    fn an_unreadable_earlier_event_is_not_blamed_on_the_append() {
        let (_t, store) = seeded();
        damage_first_block(&store);
        let rewrite = ev(
            r#"{"type":"tool/result","data":{"turn":1,"step":1,"message":{"id":"t1","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"[pruned]"}],"isError":false}]}},"surfaceOp":{"op":"replace","start":2,"end":2},"sourceEventSeqs":[2]}"#,
        );
        let e = store
            .append("a", Some(3), vec![rewrite])
            .expect_err("the rewritten event cannot be read");
        assert!(matches!(e, Error::Corrupt { .. }), "{e}");
    }
}
