//! Staging one session's batch: DSH's append checks, seq assignment, authoring, packing, and the
//! keys it adds to the shared WriteBatch. Nothing here touches the store's state: the caller
//! publishes the staged change only after the WriteBatch committed, or rolls it back.

use rocksdb::WriteBatch;
use sessionlog_codec::chunk_rows::pack_runs;
use sessionlog_codec::event::NewEvent;
use sessionlog_codec::json::{self, Value};
use sessionlog_codec::known_types::is_known;
use sessionlog_codec::projection::ProjectionSet;
use sessionlog_codec::rows::{check_header_seq, declared_tools};
use sessionlog_codec::stored::{encode_block, BlockMeta};
use sessionlog_codec::surface::{SurfaceChange, SurfaceFold};
use sessionlog_codec::zstd::FrameCompressor;

use super::hot::HotSession;
use super::AppendReceipt;
use crate::import::{checked_value, now_ms};
use crate::meta::{SessionMeta, SourceEncoding};
use crate::projection::{is_checkpoint_point, ProjectionWriter};
use crate::projections::{Projected, ProjectionState};
use crate::store::{Store, CF_CHECKPOINTS, CF_EVENTS, CF_SESSIONS, CF_SURFACE};
use crate::surface::SurfaceIndexer;
use crate::{keys, Error, Result};

/// A batch staged into the WriteBatch, waiting for its commit.
pub(crate) struct Staged {
    receipt: AppendReceipt,
    changes: Vec<SurfaceChange>,
    meta: Option<(SessionMeta, Projections)>,
    /// The relationship state after the batch (strict mode).
    invariants: Option<super::hot::Companion>,
}

/// How the hot projection state catches up once the batch commits.
enum Projections {
    /// Already folded (the batch held a checkpoint point): replace the hot state.
    Folded(ProjectionSet),
    /// These events, first seq = the batch's, still to be folded into the hot state.
    Pending(Vec<Value>),
}

impl Staged {
    /// The commit succeeded: make the hot state match the store.
    pub(crate) fn publish(self, hot: &mut HotSession) -> AppendReceipt {
        if let Some((meta, projections)) = self.meta {
            match projections {
                Projections::Folded(set) => hot.projections = set,
                Projections::Pending(events) => {
                    for (k, e) in events.iter().enumerate() {
                        hot.projections.apply(self.receipt.first_seq + k as u64, e);
                    }
                }
            }
            hot.meta = meta;
        }
        if self.invariants.is_some() {
            hot.invariants = self.invariants;
        }
        self.receipt
    }

    /// The commit failed: undo the surface changes folded while staging.
    pub(crate) fn roll_back(self, hot: &mut HotSession) {
        for change in self.changes.iter().rev() {
            hot.surface.undo(change);
        }
    }
}

/// Check, author and stage `item` against `hot`, adding its keys to `batch`.
pub(crate) fn stage(
    store: &Store,
    hot: &mut HotSession,
    id: &str,
    expected_next_seq: Option<u64>,
    events: Vec<NewEvent>,
    batch: &mut WriteBatch,
) -> Result<Staged> {
    let next = hot.meta.events;
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
            changes: Vec::new(),
            meta: None,
            invariants: None,
        });
    }
    let reject = |seq: u64, rule: String| Error::Rejected {
        id: id.into(),
        seq: Some(seq),
        rule,
    };
    let now = now_ms();
    let mut authored = Vec::with_capacity(events.len());
    let v4 = hot.meta.version == 4;
    for (k, event) in events.into_iter().enumerate() {
        let seq = next + k as u64;
        // The type is copied only for the refusal of an unknown one (rare).
        let unknown = (!v4 && !is_known(&event.ty) && !event.ignorable).then(|| event.ty.clone());
        let authored_event = event.author(seq, now).map_err(|rule| reject(seq, rule))?;
        if let Some(ty) = unknown {
            return Err(reject(seq, format!("event type \"{ty}\" is unknown to DSH 0.1.0, whose reader refuses a log holding it; mark it \"ignorable\": true")));
        }
        if v4 {
            check_v4_event(&authored_event).map_err(|rule| reject(seq, rule))?;
            let header_tools = |s: u64| match s.checked_sub(next) {
                Some(i) => authored
                    .get(usize::try_from(i).ok()?)
                    .and_then(declared_tools),
                None => store
                    .event_at(&hot.meta, s)
                    .ok()
                    .flatten()
                    .as_ref()
                    .and_then(declared_tools),
            };
            check_header_seq(&authored_event, header_tools).map_err(|rule| reject(seq, rule))?;
        }
        authored.push(authored_event);
    }
    let invariants = match &hot.invariants {
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
    let folded = fold_batch(store, &hot.meta, &mut hot.surface, &authored)
        .map_err(|(seq, rule)| reject(seq, rule))?;
    let first = hot.meta.events;
    let written = write_records(store, &hot.meta, &authored, &folded, batch).and_then(|meta| {
        // Checkpoints are needed only at checkpoint points (rare): only then is the projection
        // state copied and folded here; otherwise the hot state folds the events on publish.
        let checkpoint = authored
            .iter()
            .enumerate()
            .any(|(k, e)| is_checkpoint_point(first + k as u64, e));
        let projections = if checkpoint {
            let mut writer = ProjectionWriter {
                set: hot.projections.clone(),
            };
            let cf = store.cf(CF_CHECKPOINTS)?;
            for (k, event) in authored.iter().enumerate() {
                writer.apply(meta.number, first + k as u64, event, &mut |key, value| {
                    batch.put_cf(cf, key, value);
                    Ok(())
                })?;
            }
            Projections::Folded(writer.set)
        } else {
            Projections::Pending(Vec::new())
        };
        Ok((meta, projections))
    });
    match written {
        Ok((meta, projections)) => Ok(Staged {
            receipt,
            changes: folded.changes,
            invariants,
            meta: Some((
                meta,
                match projections {
                    Projections::Pending(_) => Projections::Pending(authored),
                    folded => folded,
                },
            )),
        }),
        Err(e) => {
            for change in folded.changes.iter().rev() {
                hot.surface.undo(change);
            }
            Err(e)
        }
    }
}

/// A batch folded into the surface: the changes (for rollback) and the surface-index records.
pub(crate) struct Folded {
    changes: Vec<SurfaceChange>,
    puts: Vec<(Vec<u8>, Vec<u8>)>,
    since_snapshot: u64,
}

/// Fold `authored` (seqs from `meta.events` on) into `fold` by DSH's surface rules, collecting
/// the surface-index records. On a refusal the fold is rolled back and the offending seq and
/// DSH's message are returned.
pub(crate) fn fold_batch(
    store: &Store,
    meta: &SessionMeta,
    fold: &mut SurfaceFold,
    authored: &[Value],
) -> std::result::Result<Folded, (u64, String)> {
    let next = meta.events;
    let mut indexer = SurfaceIndexer {
        since_snapshot: meta.surface_since_snapshot,
    };
    let mut folded = Folded {
        changes: Vec::with_capacity(authored.len()),
        puts: Vec::new(),
        since_snapshot: 0,
    };
    // V4: the projection state, loaded only when the batch holds a projection event, and the
    // messages this batch's projections made.
    let mut projections: Option<ProjectionState> = None;
    let mut projected: std::collections::HashMap<u64, Value> = std::collections::HashMap::new();
    for (k, event) in authored.iter().enumerate() {
        let seq = next + k as u64;
        let lookup = |s: u64| match s.checked_sub(next) {
            Some(i) => usize::try_from(i)
                .ok()
                .and_then(|i| authored.get(i))
                .cloned(),
            None => store.event_at(meta, s).ok().flatten(),
        };
        let outcome = fold
            .apply(event, lookup)
            .map_err(|e| e.to_string())
            .and_then(|change| {
                let mut put = |key: [u8; keys::EVENT_KEY_LEN], value| {
                    folded.puts.push((key.to_vec(), value));
                    Ok(())
                };
                let recorded = indexer
                    .record(meta.number, seq, &change, fold, &mut put)
                    .map_err(|e| e.to_string());
                folded.changes.push(change);
                recorded
            })
            .and_then(|()| {
                if meta.version != 4 {
                    return Ok(());
                }
                project_batch_event(
                    store,
                    meta,
                    (fold, seq, event),
                    &lookup,
                    (&mut projections, &mut projected),
                    &mut folded.puts,
                )
            });
        if let Err(rule) = outcome {
            for change in folded.changes.iter().rev() {
                fold.undo(change);
            }
            return Err((seq, rule));
        }
    }
    folded.since_snapshot = indexer.since_snapshot;
    Ok(folded)
}

/// Run the message projection of appended V4 event `seq` (if its type has one) against the
/// fold's surface, staging its records into `puts`. The state before the batch is loaded on
/// first need; `projected` holds what this batch's projections made.
fn project_batch_event(
    store: &Store,
    meta: &SessionMeta,
    (fold, seq, event): (&SurfaceFold, u64, &Value),
    lookup: &dyn Fn(u64) -> Option<Value>,
    (state, projected): (
        &mut Option<ProjectionState>,
        &mut std::collections::HashMap<u64, Value>,
    ),
    puts: &mut Vec<(Vec<u8>, Vec<u8>)>,
) -> std::result::Result<(), String> {
    if !store.is_projection_event(event) {
        return Ok(());
    }
    let before = match state.take() {
        Some(s) => s,
        None => match meta.events.checked_sub(1) {
            Some(at) => store
                .projection_state_at(meta, at)
                .map_err(|e| e.to_string())?,
            None => ProjectionState::default(),
        },
    };
    let last = meta.events.checked_sub(1);
    let earlier = |s: u64| {
        projected
            .get(&s)
            .cloned()
            .or_else(|| last.and_then(|at| store.projected_message(meta, s, at).ok().flatten()))
    };
    let outcome = store.project_event(event, fold.nodes(), lookup, &earlier);
    let after = match outcome {
        Ok(Projected::None) => before,
        Ok(Projected::Messages(ty, messages)) => {
            let after = before
                .put(meta.number, seq, &ty, &messages, &mut |k, v| {
                    puts.push((k, v));
                    Ok(())
                })
                .map_err(|e| e.to_string())?;
            projected.extend(messages);
            after
        }
        Err(rule) => {
            *state = Some(before);
            return Err(rule);
        }
    };
    *state = Some(after);
    Ok(())
}

/// Pack and serialize the batch as DSH's writer would, stage its lines (and frame), and return
/// the session metadata as it will be once the batch commits.
pub(crate) fn write_records(
    store: &Store,
    meta: &SessionMeta,
    authored: &[Value],
    surface: &Folded,
    batch: &mut WriteBatch,
) -> Result<SessionMeta> {
    let events_cf = store.cf(CF_EVENTS)?;
    let surface_cf = store.cf(CF_SURFACE)?;
    for (key, value) in &surface.puts {
        batch.put_cf(surface_cf, key, value);
    }
    let mut text = String::new();
    let mut block = BlockMeta {
        batch: meta.next_batch,
        members: Vec::with_capacity(authored.len()),
    };
    if meta.version == 0 {
        for packed in &pack_runs(authored) {
            json::write_value(&mut text, packed.value());
            text.push('\n');
            block
                .members
                .push(u32::try_from(packed.members()).unwrap_or(u32::MAX));
        }
    } else {
        // V2+: one row per event, `sourceEventSeqs` range-encoded in the file form.
        for event in authored {
            json::write_value(&mut text, &sessionlog_codec::rows::file_row(event));
            text.push('\n');
            block.members.push(1);
        }
    }
    let lines = block.members.len() as u64;
    let text = text.into_bytes();
    let seq = meta.events + block.members.iter().map(|&m| u64::from(m)).sum::<u64>();
    let key = keys::event_key(meta.number, keys::BLOCK, meta.events);
    batch.put_cf(events_cf, key, encode_block(&block, &text)?);
    let mut next = meta.clone();
    next.events = seq;
    if let Some(t) = last_human_prompt(authored) {
        let sessions = store.cf(CF_SESSIONS)?;
        batch.delete_cf(sessions, keys::activity_key(meta.activity_ms, meta.number));
        batch.put_cf(sessions, keys::activity_key(Some(t), meta.number), &meta.id);
        next.activity_ms = Some(t);
    }
    next.surface_since_snapshot = surface.since_snapshot;
    next.committed_lines += lines;
    next.body_lines += lines;
    next.committed_bytes += text.len() as u64;
    next.plaintext_bytes += text.len() as u64;
    next.next_batch += 1;
    match meta.source {
        SourceEncoding::Jsonl => next.total_bytes += text.len() as u64,
        SourceEncoding::JsonlZstd => {
            let mut frame = Vec::new();
            FrameCompressor::new()?.compress_into(&text, &mut frame)?;
            batch.put_cf(
                events_cf,
                keys::event_key(meta.number, keys::FRAME, meta.frames),
                checked_value(&frame),
            );
            next.frames += 1;
            next.total_bytes += frame.len() as u64;
        }
    }
    batch.put_cf(
        store.cf(CF_SESSIONS)?,
        keys::meta_key(&meta.id),
        next.encode()?,
    );
    Ok(next)
}

/// The append-site checks of a V4 event that its surface fold does not make: V4 row admission
/// and the types V4 no longer has.
fn check_v4_event(event: &Value) -> std::result::Result<(), String> {
    let ty = event
        .as_object()
        .and_then(|o| o.get("type"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if ty == "assistant/chunk" || sessionlog_codec::chunk_rows::is_row_tag(ty) {
        return Err(format!(
            "event type \"{ty}\" does not exist in format v4: streams are embedded in assistant/message and assistant/attempt"
        ));
    }
    match sessionlog_codec::rows::admit_v4_row(event) {
        Ok(()) => Ok(()),
        Err(
            sessionlog_codec::rows::Admission::Corrupt(m)
            | sessionlog_codec::rows::Admission::Unsupported(m),
        ) => Err(m),
    }
}

/// The time of the batch's last `user/message` a human wrote (`source.kind == "user"`).
fn last_human_prompt(events: &[Value]) -> Option<i64> {
    events.iter().rev().find_map(crate::list::human_prompt_time)
}
