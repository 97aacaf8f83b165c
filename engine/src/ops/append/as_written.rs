//! Batches appended as DSH's writer wrote them, for hosts behind DSH's persistence seam. DSH's
//! own JSONL backend stores every batch its coordinator hands it and judges the log only when it
//! loads it: the coordinator normalises legacy message shapes then, and refuses unknown event
//! types and foreign format versions with its own errors. A backend behind that seam must keep
//! what DSH wrote in the same way, so an item marked [`AppendItem::as_written`] that the strict
//! append refuses is staged here: its lines authored exactly as DSH's writer writes them, then
//! read on by DSH's reader from where the stored log left it (`SeamReader`), so that the
//! committed region, the indexes and the verdict are exactly what an import of the resulting
//! file gives. The cost is the batch's: the reader state is cached with the session's write
//! state (a clean V0 log's is told by its metadata; any other is read again once, when the
//! session is loaded).
//!
//! Invariants: the lines are the ones the strict path authors (`sessionlog_codec::format::lines`); a
//! torn or deleted session takes no batch here either, and a clean log's stale expected seq is
//! refused; a log that already fails DSH's reader takes the batch at the caller's seq, as DSH's
//! writer numbers it; the cached state runs ahead of the store while staging, and a failure
//! after the first line was read empties it (it is reloaded from the store).
//!
//! [`AppendItem::as_written`]: super::AppendItem::as_written

use sessionlog_codec::format::event::NewEvent;
use sessionlog_codec::format::lines::author_lines;
use sessionlog_codec::format::stored::{encode_block, BlockMeta};
use sessionlog_codec::format::zstd::{
    scan_frames, FrameCompressor, FrameDecoder, TORN_RECORD_IN_COMPLETE_FRAME,
};
use sessionlog_codec::json::Value;
use sessionlog_codec::log_reader::LogReader;
use sessionlog_codec::rules::scanner::LineOutcome;

use super::admission::Staged;
use super::AppendReceipt;
use crate::error::{Error, Result};
use crate::layout::keys;
use crate::layout::meta::{human_prompt_time, now_ms, SessionMeta, SourceEncoding, Verdict};
use crate::layout::values::checked_value;
use crate::ops::import::zstd;
use crate::store::{SeamReader, Store, WriteState};
use crate::write::appended_batch::stage_checkpoints;
use crate::write::indexer::{fold_batch, Refusal};
use crate::write::session_batch::SessionBatch;

/// What a batch written as DSH's writer wrote it is given as.
pub(super) enum Written {
    /// Events, authored here as DSH's writer authors them.
    Events(Vec<NewEvent>),
    /// The bytes the batch adds to the log file: its lines (`.jsonl`), or its zstd frames
    /// (`.jsonl.zstd`), kept verbatim (a fork's or an imported file's batch, or a batch its
    /// system of record already holds).
    Bytes(Vec<u8>),
}

/// Stage `written` for session `id` (its write state in `slot`) as DSH's writer would write it,
/// whatever DSH's reader will say of the result.
pub(super) fn stage(
    store: &Store,
    slot: &mut Option<WriteState>,
    id: &str,
    expected_next_seq: Option<u64>,
    written: Written,
    batch: &mut SessionBatch<'_>,
) -> Result<Staged> {
    let Some(state) = slot.as_mut() else {
        return Err(Error::Internal(
            "staging without a loaded write state".into(),
        ));
    };
    let first_seq = match (&state.meta.verdict, expected_next_seq) {
        (Verdict::Clean, Some(expected)) if expected != state.meta.events => {
            return Err(Error::StaleSeq {
                id: id.into(),
                expected,
                actual: state.meta.events,
            })
        }
        (_, expected) => expected.unwrap_or(state.meta.events),
    };
    let mut staged = Staged {
        receipt: AppendReceipt {
            first_seq,
            count: 0,
        },
        bytes: 0,
        meta: None,
        relations: None,
        reload: false,
        rewrites_record: false,
        file_bytes: None,
        events: None,
    };
    let (text, frames) = match written {
        Written::Events(events) if events.is_empty() => return Ok(staged),
        Written::Events(events) => {
            staged.receipt.count = events.len() as u64;
            (
                authored_lines(id, state.meta.version, first_seq, events)?,
                None,
            )
        }
        Written::Bytes(bytes) if bytes.is_empty() => return Ok(staged),
        Written::Bytes(bytes) => written_lines(id, state.meta.source, bytes)?,
    };
    if state.reader.is_none() {
        state.reader = Some(store.seam_reader(&state.meta)?);
    }
    let events_before = state.meta.events;
    let (meta, file_bytes) = match stage_lines(store, state, &text, frames, batch) {
        Ok(done) => done,
        Err(e) => {
            *slot = None;
            return Err(e);
        }
    };
    if staged.receipt.count == 0 {
        staged.receipt.count = meta.events - events_before;
    }
    Ok(Staged {
        bytes: text.len() as u64,
        meta: Some(meta),
        // The strict store's relationship rules did not see this batch: rebuilt from the log.
        reload: store.options.strict_appends,
        rewrites_record: true,
        file_bytes: store.has_commit_hook().then_some(file_bytes),
        events: None,
        ..staged
    })
}

/// A `.jsonl.zstd` batch's frames as given: each frame's bytes and the length of its text.
type Frames = Vec<(Vec<u8>, usize)>;

/// The lines of a batch given as the bytes it adds to a log kept as `source` (and its frames,
/// for `.jsonl.zstd`); refused unless they are whole lines of text (each frame's too).
fn written_lines(
    id: &str,
    source: SourceEncoding,
    bytes: Vec<u8>,
) -> Result<(String, Option<Frames>)> {
    let refuse = |rule: String| Error::Rejected {
        id: id.into(),
        seq: None,
        rule,
    };
    let (plain, frames) = match source {
        SourceEncoding::Jsonl => (bytes, None),
        SourceEncoding::JsonlZstd => {
            let scan = scan_frames(&bytes)
                .map_err(|e| refuse(format!("the batch's frames do not scan: {e}")))?;
            if scan.torn_start.is_some() {
                return Err(refuse("the batch ends inside a frame".into()));
            }
            let mut decoder = FrameDecoder::new()?;
            let mut plain = Vec::new();
            let mut frames = Vec::with_capacity(scan.frames.len());
            for (k, range) in scan.frames.into_iter().enumerate() {
                let before = plain.len();
                decoder
                    .decode_frame(&bytes[range.clone()], range.start, &mut plain)
                    .map_err(|e| refuse(format!("the batch's frame {k} does not decode: {e}")))?;
                if plain.last() != Some(&b'\n') {
                    return Err(refuse(format!(
                        "the batch's frame {k} does not end with a whole line"
                    )));
                }
                frames.push((bytes[range].to_vec(), plain.len() - before));
            }
            (plain, Some(frames))
        }
    };
    if plain.last() != Some(&b'\n') {
        return Err(refuse(
            "the batch's bytes do not end with a whole line".into(),
        ));
    }
    let text =
        String::from_utf8(plain).map_err(|e| refuse(format!("the batch is not text: {e}")))?;
    Ok((text, frames))
}

/// The lines of `events` written from seq `first_seq` into a log of format `version`, with
/// DSH's envelope and its context-free append checks (the ones DSH's writer itself makes).
fn authored_lines(id: &str, version: u32, first_seq: u64, events: Vec<NewEvent>) -> Result<String> {
    let now = now_ms();
    let authored = events
        .into_iter()
        .enumerate()
        .map(|(k, event)| {
            let seq = first_seq + k as u64;
            event.author(seq, now).map_err(|rule| Error::Rejected {
                id: id.into(),
                seq: Some(seq),
                rule,
            })
        })
        .collect::<Result<Vec<Value>>>()?;
    let mut text = String::new();
    author_lines(version, &authored, &mut text, &mut Vec::new());
    Ok(text)
}

/// What DSH's reader made of one batch's lines.
#[derive(Default)]
struct ReadBatch {
    /// The committed lines' text, each with its `\n`, and their member counts.
    committed: Vec<u8>,
    members: Vec<u32>,
    /// Their logical events.
    events: Vec<Value>,
    /// The lines past the committed region (kept as tail in a `.jsonl` log).
    tail: Vec<u8>,
}

/// Read `text` (the batch's lines) on from the cached reader and stage what it stores: the
/// committed lines as a block with their indexes, the rest as tail, a `.jsonl.zstd` log's frames
/// (`frames`, whose texts make up `text`, or one compressed here). Returns the session's
/// metadata once the batch commits, and the bytes the batch adds to the log file.
fn stage_lines(
    store: &Store,
    state: &mut WriteState,
    text: &str,
    frames: Option<Frames>,
    batch: &mut SessionBatch<'_>,
) -> Result<(SessionMeta, Vec<u8>)> {
    let mut next = state.meta.clone();
    let seam = state
        .reader
        .as_mut()
        .ok_or_else(|| Error::Internal("no reader state".into()))?;
    let zstd = next.source == SourceEncoding::JsonlZstd;
    let first = seam.reader.scanner.events();
    let lines_before = seam.reader.scanner.lines();
    let mut read = ReadBatch::default();
    // The texts of the batch's frames (one, when it is compressed here), in order.
    let mut pieces = Vec::new();
    let mut at = 0;
    for (_, len) in frames.iter().flatten() {
        pieces.push(
            text.get(at..at + len).ok_or_else(|| {
                Error::Internal("a frame's text is not within the batch's".into())
            })?,
        );
        at += len;
    }
    if pieces.is_empty() {
        pieces.push(text);
    }
    for piece in pieces {
        // DSH stops reading a `.jsonl.zstd` log after the frame in which its reader turned fatal.
        let feed = !(zstd && seam.reader.scanner.is_fatal());
        for line in piece.split_terminator('\n') {
            let whole = match std::mem::take(&mut seam.fragment) {
                fragment if fragment.is_empty() => line.as_bytes().to_vec(),
                mut fragment => {
                    fragment.extend_from_slice(line.as_bytes());
                    fragment
                }
            };
            let outcome = if feed {
                seam.reader
                    .push_line(&whole)
                    .map_err(|e| next.corrupt(format!("an appended line cannot be read: {e}")))?
            } else {
                LineOutcome::Tail
            };
            match outcome {
                LineOutcome::Committed(events) => {
                    read.committed.extend_from_slice(line.as_bytes());
                    read.committed.push(b'\n');
                    read.members
                        .push(u32::try_from(events.len()).unwrap_or(u32::MAX));
                    read.events.extend(events);
                }
                LineOutcome::Tail => {
                    read.tail.extend_from_slice(line.as_bytes());
                    read.tail.push(b'\n');
                }
            }
        }
    }
    if !read.events.is_empty() {
        index_committed(store, state, first, &read, batch, &mut next)?;
    }
    let seam = state
        .reader
        .as_mut()
        .ok_or_else(|| Error::Internal("no reader state".into()))?;
    let text = text.as_bytes();
    let file_bytes = match next.source {
        SourceEncoding::Jsonl => {
            next.total_bytes += text.len() as u64;
            if !read.tail.is_empty() {
                let key = keys::event_key(next.number, keys::TAIL, next.tail_chunks);
                batch.put_event_record(&key, &checked_value(&read.tail))?;
                next.tail_chunks += 1;
                next.tail_bytes += read.tail.len() as u64;
            }
            text.to_vec()
        }
        SourceEncoding::JsonlZstd => {
            let frames = match frames {
                Some(frames) => frames.into_iter().map(|(frame, _)| frame).collect(),
                None => {
                    let mut frame = Vec::new();
                    FrameCompressor::new()?.compress_into(text, &mut frame)?;
                    vec![frame]
                }
            };
            let mut bytes = Vec::new();
            for frame in frames {
                let key = keys::event_key(next.number, keys::FRAME, next.frames);
                batch.put_event_record(&key, &checked_value(&frame))?;
                next.frames += 1;
                next.total_bytes += frame.len() as u64;
                bytes.extend_from_slice(&frame);
            }
            bytes
        }
    };
    let scanner = &seam.reader.scanner;
    next.events = scanner.events();
    next.body_lines += scanner.lines() - lines_before;
    next.committed_lines += read.members.len() as u64;
    next.committed_bytes += read.committed.len() as u64;
    next.plaintext_bytes += read.committed.len() as u64;
    next.inherited_cut = scanner.cut();
    next.next_batch += 1;
    let (container, body_len) = if zstd {
        // Inside complete frames, a line the reader leaves out is the file's defect.
        let defect = scanner.has_issue() && !scanner.is_fatal();
        (
            defect.then(|| zstd::strip(TORN_RECORD_IN_COMPLETE_FRAME.to_owned())),
            scanner.committed_bytes(),
        )
    } else {
        // The whole file: every line read, and a fragment no line ended yet.
        (None, seam.reader.plain_end + seam.fragment.len() as u64)
    };
    next.verdict = seam
        .reader
        .verdict(&seam.header, container, body_len)
        .into();
    next.legacy_record = false;
    Ok((next, file_bytes))
}

/// Index the batch's committed events (seqs from `first` on): the surface (stopping at the
/// first event DSH's fold refuses, as an import does), the projection checkpoints and the
/// listing activity, and stage their block.
fn index_committed(
    store: &Store,
    state: &mut WriteState,
    first: u64,
    read: &ReadBatch,
    batch: &mut SessionBatch<'_>,
    next: &mut SessionMeta,
) -> Result<()> {
    let meta = &state.meta;
    let mut refused: Option<Refusal> = None;
    if let Some(fold) = state.surface.as_mut() {
        let at = SessionMeta {
            events: first,
            ..meta.clone()
        };
        let folded = match fold_batch(store, &at, fold, &read.events)? {
            Ok(folded) => folded,
            Err(refusal) => {
                let before = usize::try_from(refusal.seq - first).unwrap_or(usize::MAX);
                let prefix = read.events.get(..before).unwrap_or_default();
                let folded = fold_batch(store, &at, fold, prefix)?.map_err(|r| {
                    meta.corrupt(format!(
                        "the surface fold refused seq {} after refusing seq {}",
                        r.seq, refusal.seq
                    ))
                })?;
                next.surface_error = Some((refusal.seq, refusal.message.clone()));
                refused = Some(refusal);
                folded
            }
        };
        for (key, value) in &folded.puts {
            batch.put_surface(key, value)?;
        }
        next.surface_since_snapshot = folded.since_snapshot;
    }
    if refused.is_some() {
        // The surface index stops at the refusal, as an import's does.
        state.surface = None;
    }
    let seam = state
        .reader
        .as_mut()
        .ok_or_else(|| Error::Internal("no reader state".into()))?;
    for (k, event) in read.events.iter().enumerate() {
        let seq = first + k as u64;
        seam.reader.observe(seq, event);
        if let Some(r) = refused.as_ref().filter(|r| r.seq == seq) {
            seam.reader.surface_refused(seq, &r.rule);
        }
        if let Some(t) = human_prompt_time(event) {
            next.activity_ms = Some(t);
        }
    }
    if let Some(writer) = state.projections.as_mut() {
        stage_checkpoints(writer, meta.number, first, &read.events, batch)?;
    }
    let block = BlockMeta {
        batch: meta.next_batch,
        members: read.members.clone(),
    };
    let key = keys::event_key(meta.number, keys::BLOCK, first);
    batch.put_event_record(&key, &encode_block(&block, &read.committed)?)
}

impl Store {
    /// DSH's reader as session `meta`'s stored log leaves it: told by the metadata for a clean
    /// V0 log with nothing past its committed region, otherwise read again from the stored
    /// bytes (once per load of the session's write state).
    fn seam_reader(&self, meta: &SessionMeta) -> Result<SeamReader> {
        let header = meta.parsed_header()?;
        let clean_v0 = meta.version == 0
            && meta.fork_of.is_none()
            && meta.verdict == Verdict::Clean
            && meta.tail_bytes == 0
            && meta.committed_bytes == meta.plaintext_bytes;
        if clean_v0 {
            return Ok(SeamReader {
                reader: LogReader::resume_clean_v0(
                    &header,
                    meta.body_lines,
                    meta.events,
                    meta.committed_bytes,
                ),
                header,
                fragment: Vec::new(),
            });
        }
        let mut seam = SeamReader {
            reader: LogReader::new(&header, meta.header.len() as u64),
            header,
            fragment: Vec::new(),
        };
        let read = |plain: &[u8], seam: &mut SeamReader| -> Result<()> {
            let mut rest = plain;
            while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
                let mut line = std::mem::take(&mut seam.fragment);
                line.extend_from_slice(&rest[..nl]);
                seam.reader
                    .push_line(&line)
                    .map_err(|e| meta.corrupt(format!("its log cannot be read again: {e}")))?;
                rest = &rest[nl + 1..];
            }
            seam.fragment.extend_from_slice(rest);
            Ok(())
        };
        match meta.source {
            SourceEncoding::Jsonl => {
                let mut file = Vec::with_capacity(usize::try_from(meta.total_bytes).unwrap_or(0));
                self.export(&meta.id_lossy(), None, &mut file)?;
                read(file.get(meta.header.len()..).unwrap_or_default(), &mut seam)?;
            }
            SourceEncoding::JsonlZstd => {
                let mut decoder = FrameDecoder::new()?;
                let mut plain = Vec::new();
                let mut frame = 0u64;
                self.for_each_frame(meta, &mut |bytes| {
                    plain.clear();
                    decoder
                        .decode_frame(bytes, 0, &mut plain)
                        .map_err(|e| meta.corrupt(format!("frame {frame} does not decode: {e}")))?;
                    // The header frame's text is the header itself; DSH stops reading after
                    // the frame in which its reader turned fatal.
                    if frame > 0 && !seam.reader.scanner.is_fatal() {
                        read(&plain, &mut seam)?;
                    }
                    frame += 1;
                    Ok(())
                })?;
            }
        }
        Ok(seam)
    }
}

#[cfg(test)]
mod tests;
