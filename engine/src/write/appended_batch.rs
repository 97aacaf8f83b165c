//! A batch of authored events appended to a stored session (append, repair, resume): its lines
//! as DSH writes them, its frame for a `.jsonl.zstd` session, the surface records folded for it,
//! and the session's metadata as it will be once the batch commits.
//!
//! Invariant: everything a batch changes is staged into one [`SessionBatch`], so it commits with
//! the metadata that counts it, or not at all.

use sessionlog_codec::format::stored::{encode_block, BlockMeta};
use sessionlog_codec::format::zstd::FrameCompressor;
use sessionlog_codec::json::Value;

use crate::error::Result;
use crate::layout::keys;
use crate::layout::meta::{human_prompt_time, SessionMeta, SourceEncoding};
use crate::layout::values::checked_value;
use crate::store::ProjectionCheckpoints;
use crate::write::indexer::{is_checkpoint_point, Folded};
use crate::write::session_batch::SessionBatch;
use sessionlog_codec::format::lines::author_lines;

/// The most a batch's text buffer is sized ahead (a huge first guess is not worth reserving).
const MAX_PRESIZE: u64 = 1 << 20;

/// Author and stage `authored` (seqs from `meta.events` on, folded into `surface`) as the
/// session's next batch, and return the session metadata as it will be once `batch` commits,
/// with the bytes the batch adds to the log file (its lines, or its zstd frame).
/// The caller stages that metadata once: [`SessionBatch::advance`] from `meta` for a stored
/// session's append (the batch moves only its counters), [`SessionBatch::insert_session`] for a
/// session the batch creates, which has no stored keys to move, [`SessionBatch::update_meta`]
/// after a repair's batches, which changes more than the counters.
pub(crate) fn write_records(
    meta: &SessionMeta,
    authored: &[Value],
    surface: &Folded,
    batch: &mut SessionBatch<'_>,
) -> Result<(SessionMeta, Vec<u8>)> {
    for (key, value) in &surface.puts {
        batch.put_surface(key, value)?;
    }
    // Sized from the session's bytes per event so far: one allocation, no regrowth copies.
    let estimate = meta
        .bytes_per_event()
        .saturating_mul(authored.len() as u64 + 1);
    let mut text = String::with_capacity(usize::try_from(estimate.min(MAX_PRESIZE)).unwrap_or(0));
    let mut block = BlockMeta {
        batch: meta.next_batch,
        members: Vec::with_capacity(authored.len()),
    };
    author_lines(meta.version, authored, &mut text, &mut block.members);
    let lines = block.members.len() as u64;
    let text = text.into_bytes();
    let key = keys::event_key(meta.number, keys::BLOCK, meta.events);
    batch.put_event_record(&key, &encode_block(&block, &text)?)?;
    let mut next = meta.clone();
    next.events = meta.events + block.members.iter().map(|&m| u64::from(m)).sum::<u64>();
    if let Some(t) = authored.iter().rev().find_map(human_prompt_time) {
        next.activity_ms = Some(t);
    }
    next.surface_since_snapshot = surface.since_snapshot;
    next.committed_lines += lines;
    next.body_lines += lines;
    next.committed_bytes += text.len() as u64;
    next.plaintext_bytes += text.len() as u64;
    next.next_batch += 1;
    let file_bytes = match meta.source {
        SourceEncoding::Jsonl => {
            next.total_bytes += text.len() as u64;
            text
        }
        SourceEncoding::JsonlZstd => {
            let mut frame = Vec::new();
            FrameCompressor::new()?.compress_into(&text, &mut frame)?;
            let key = keys::event_key(meta.number, keys::FRAME, meta.frames);
            batch.put_event_record(&key, &checked_value(&frame))?;
            next.frames += 1;
            next.total_bytes += frame.len() as u64;
            frame
        }
    };
    // Whatever the caller writes of the `S` record is version 6.
    next.legacy_record = false;
    Ok((next, file_bytes))
}

/// Fold `events` (seqs from `first` on) into the session's projection state, staging the
/// checkpoints of any checkpoint point among them (`indexer.rs`). Checkpoints are written only at
/// checkpoint points (rare): only a batch holding one goes through the writer's `apply`, which
/// also moves closed turns into records; the others are folded without a record.
pub(crate) fn stage_checkpoints(
    writer: &mut ProjectionCheckpoints,
    number: u64,
    first: u64,
    events: &[Value],
    batch: &mut SessionBatch<'_>,
) -> Result<()> {
    let checkpoint = events
        .iter()
        .enumerate()
        .any(|(k, e)| is_checkpoint_point(first + k as u64, e));
    for (k, event) in events.iter().enumerate() {
        let seq = first + k as u64;
        if checkpoint {
            writer.apply(number, seq, event, &mut |key, value| {
                batch.put_checkpoint(&key, &value)
            })?;
        } else {
            writer.fold(seq, event);
        }
    }
    Ok(())
}
