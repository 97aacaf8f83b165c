//! `verify`: re-check every stored relation against the authoritative bytes.
//!
//! Per session: the metadata crc and the number ↔ id map; the header still names the session;
//! every stored value's crc32; every committed line re-decodes to its recorded member count
//! with seqs continuing the previous line, and they number the recorded events; frames and tail
//! chunks are contiguous; the stored bytes add up to the imported file and its plaintext
//! rendering; for zstd imports DSH would load, the stored frames decode to exactly the stored
//! header and lines; frozen lower generations are complete (chunks in order, crc32s, sizes);
//! every checkpoint reference names a whole checkpoint of its unit and version before it.
//! Store-wide: no `events` key belongs to a session number without metadata, and the session
//! index, when the store has one, agrees with the log (`ops/search/check.rs`).

use sessionlog_codec::format::header::parse_header;
use sessionlog_codec::format::rows::decode_line;
use sessionlog_codec::format::stored::decode_block;
use sessionlog_codec::format::zstd::FrameDecoder;
use sessionlog_codec::json;
use sessionlog_codec::rules::projection::UNITS;

use crate::error::{Error, Result};
use crate::layout::keys::{self, CF_CHECKPOINTS, CF_EVENTS, CF_SESSIONS};
use crate::layout::meta::{SessionMeta, SourceEncoding};
use crate::layout::values::{
    checked_bytes, decode_checkpoint, truncated_point, CheckpointLayout, StoredCheckpoint,
};
use crate::store::{visit, Snapshot, Store};

/// One failed check. Serializes as `{session, detail}`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct VerifyProblem {
    /// The session (its id, or `#number` when only the number is known).
    pub session: String,
    /// What does not hold.
    pub detail: String,
}

/// What `verify` checked and found. Serializes as `{sessions, lines, events, problems}`.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct VerifyReport {
    /// Sessions checked.
    pub sessions: u64,
    /// Stored lines checked.
    pub lines: u64,
    /// Logical events re-decoded.
    pub events: u64,
    /// Failed checks.
    pub problems: Vec<VerifyProblem>,
}

/// What one pass over a session's range found.
#[derive(Default)]
struct Walk {
    problems: Vec<String>,
    next_seq: u64,
    lines: u64,
    frames: u64,
    tail_chunks: u64,
    /// Frame and tail bytes (the file as stored, less the plaintext for `.jsonl` imports).
    stored: u64,
    /// Header plus committed lines outside a torn batch: the plaintext rendering.
    plain: Vec<u8>,
    /// What the stored frames decode to.
    framed_plain: Vec<u8>,
    /// Frozen generations seen: version → (chunks, bytes).
    frozen: std::collections::BTreeMap<u32, (u64, u64)>,
}

impl Store {
    /// Verify the given sessions, or the whole store when `ids` is empty.
    pub fn verify(&self, ids: &[String]) -> Result<VerifyReport> {
        let mut report = VerifyReport::default();
        if ids.is_empty() {
            for id in self.session_ids()? {
                self.verify_session(&id, &mut report)?;
            }
            self.verify_no_orphans(&mut report)?;
            self.verify_search_index(&mut report)?;
        } else {
            for id in ids {
                self.verify_session(id.as_bytes(), &mut report)?;
            }
        }
        Ok(report)
    }

    fn verify_session(&self, id_bytes: &[u8], report: &mut VerifyReport) -> Result<()> {
        report.sessions += 1;
        let id = String::from_utf8_lossy(id_bytes).into_owned();
        // One snapshot for the metadata and every read, so appends running meanwhile are not
        // mistaken for disagreements between the metadata and the blocks.
        let snap = self.snapshot();
        // Metadata that cannot be read (a damaged record, or a checksum failure in the block
        // holding it) is this session's problem too.
        let meta = &match self.record_at(id_bytes, &snap) {
            Ok(meta) => meta,
            Err(e @ (Error::Storage { .. } | Error::Corrupt { .. })) => {
                report.problems.push(VerifyProblem {
                    session: id,
                    detail: format!("its metadata cannot be read: {e}"),
                });
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let mut w = Walk {
            plain: meta.header.clone(),
            // A fork's own lines start after the prefix it shares with its parent.
            next_seq: meta.fork_of.as_ref().map_or(0, |b| b.seed),
            ..Walk::default()
        };
        // Unreadable data (a RocksDB checksum failure) is this session's problem: report it
        // under its name and go on with the other sessions.
        let mapped = match self.get_at(CF_SESSIONS, &keys::number_key(meta.number), None, || {
            "reading the number map".into()
        }) {
            Ok(m) => m.map(|v| v.to_vec()),
            Err(e) => {
                w.problems
                    .push(format!("its number map cannot be read: {e}"));
                None
            }
        };
        if mapped.as_deref() != Some(meta.id.as_slice()) {
            w.problems.push(format!(
                "session number {} does not map back to this id",
                meta.number
            ));
        }
        match meta.header.split_last().map(|(_, h)| parse_header(h)) {
            Some(Ok(h)) if h.id.as_wtf8() == meta.id.as_slice() => {}
            _ => w
                .problems
                .push("stored header does not name this session".into()),
        }
        if let Some(copy) = &meta.archived {
            self.check_archived(meta, copy, &snap, &mut w.problems)?;
            report
                .problems
                .extend(w.problems.into_iter().map(|detail| VerifyProblem {
                    session: id.clone(),
                    detail,
                }));
            return Ok(());
        }
        let mut decoder = FrameDecoder::new()?;
        let mut it = self.scan_iter_at(meta.number, Some(&snap))?;
        it.seek(keys::session_start(meta.number));
        // Unreadable data ends the walk as this session's problem (see `verify`), not an error.
        let walked = visit(&mut it, String::new(), &mut |k, v| {
            match keys::parse_event_key(k) {
                Some((_, keys::BLOCK, first)) => self.check_block(meta, &mut w, first, v, report),
                Some((_, keys::FRAME, n)) => {
                    check_ordinal(&mut w.problems, "frame", n, &mut w.frames);
                    match checked_bytes(v) {
                        Some(b) => {
                            w.stored += b.len() as u64;
                            // A frame failing validation can be a corrupt log's verdict
                            // itself; the crc32 above still guards its stored bytes.
                            let decoded = decoder.decode_frame(b, 0, &mut w.framed_plain);
                            if let (Err(e), true) = (decoded, meta.verdict.is_loadable()) {
                                w.problems.push(format!("frame {n} no longer decodes: {e}"));
                            }
                        }
                        None => w.problems.push(format!("frame {n} fails its crc32")),
                    }
                }
                Some((_, keys::TAIL, n)) => {
                    check_ordinal(&mut w.problems, "tail chunk", n, &mut w.tail_chunks);
                    match checked_bytes(v) {
                        Some(b) => w.stored += b.len() as u64,
                        None => w.problems.push(format!("tail chunk {n} fails its crc32")),
                    }
                }
                Some((_, keys::GENERATION, n)) => {
                    let version = u32::try_from(n >> 32).unwrap_or(u32::MAX);
                    let seen = w.frozen.entry(version).or_default();
                    if n & 0xFFFF_FFFF != seen.0 {
                        w.problems.push(format!(
                            "generation v{version} chunk {} is out of order (expected {})",
                            n & 0xFFFF_FFFF,
                            seen.0
                        ));
                    }
                    seen.0 += 1;
                    match checked_bytes(v) {
                        Some(b) => seen.1 += b.len() as u64,
                        None => w.problems.push(format!(
                            "generation v{version} chunk {} fails its crc32",
                            n & 0xFFFF_FFFF
                        )),
                    }
                }
                // Read with the metadata (its crc32 checked there); `compare_counts` checks
                // what it holds against this walk.
                Some((_, keys::COUNTERS, 0)) => {}
                _ => w.problems.push(format!("unexpected key {k:02x?}")),
            }
            Ok(true)
        });
        let walked = walked.and_then(|()| self.check_references(meta, &snap, &mut w.problems));
        let listed: std::collections::BTreeMap<u32, (u64, u64)> = meta
            .frozen
            .iter()
            .map(|g| (g.version, (g.chunks, g.bytes)))
            .collect();
        if listed != w.frozen {
            w.problems.push(format!(
                "frozen generations stored {:?} differ from the metadata's {listed:?} (version: (chunks, bytes))",
                w.frozen
            ));
        }
        match walked {
            Ok(()) => compare_counts(meta, &mut w),
            Err(Error::Storage { source, .. }) => w
                .problems
                .push(format!("its stored data cannot be read: {source}")),
            Err(e) => return Err(e),
        }
        report
            .problems
            .extend(w.problems.into_iter().map(|detail| VerifyProblem {
                session: id.clone(),
                detail,
            }));
        Ok(())
    }

    /// An archived session: its record names one object per generation the metadata lists,
    /// and its ranges hold nothing but its counters record (its bytes went with the archive).
    /// The objects themselves are checked by the host that reads them (`sessionlog verify
    /// --objects`).
    fn check_archived(
        &self,
        meta: &SessionMeta,
        copy: &crate::layout::meta::ArchivedCopy,
        snap: &Snapshot<'_>,
        problems: &mut Vec<String>,
    ) -> Result<()> {
        let held: Vec<u32> = meta
            .frozen
            .iter()
            .map(|g| g.version)
            .chain([meta.version])
            .collect();
        let named: Vec<u32> = copy.files.iter().map(|f| f.version).collect();
        if held != named {
            problems.push(format!(
                "its archive record names generations {named:?}, its metadata {held:?}"
            ));
        }
        for cf in keys::SESSION_RANGE_CFS {
            let mut it = self.scan_iter_cf_at(cf, meta.number, Some(snap))?;
            it.seek(keys::session_start(meta.number));
            visit(
                &mut it,
                format!("verifying archived session \"{}\"", meta.id_lossy()),
                &mut |k, _| {
                    if !(cf == CF_EVENTS
                        && keys::parse_event_key(k)
                            .is_some_and(|(_, s, n)| s == keys::COUNTERS && n == 0))
                    {
                        problems.push(format!(
                            "it is archived at {}, but {cf} still holds key {k:02x?}",
                            copy.location()
                        ));
                    }
                    Ok(true)
                },
            )?;
        }
        Ok(())
    }

    /// One block: crc, line count, and per line decode, member count and seq continuity.
    fn check_block(
        &self,
        meta: &SessionMeta,
        w: &mut Walk,
        first: u64,
        value: &[u8],
        report: &mut VerifyReport,
    ) {
        if first != w.next_seq {
            w.problems.push(format!(
                "block keyed at seq {first} but the previous block ends before seq {}",
                w.next_seq
            ));
        }
        let block = match decode_block(value) {
            Ok(block) => block,
            Err(e) => return w.problems.push(format!("block at seq {first}: {e}")),
        };
        if Some(block.meta.batch) != meta.torn_batch {
            w.plain.extend_from_slice(block.text);
        }
        let mut line_seq = first;
        for (line, members) in block.lines() {
            w.lines += 1;
            report.lines += 1;
            let decoded = json::parse(&String::from_utf8_lossy(line))
                .map_err(|e| e.to_string())
                .and_then(|value| decode_line(value, meta.version, line_seq));
            let events = match decoded {
                Ok(events) => events,
                Err(e) => {
                    w.problems
                        .push(format!("line at seq {line_seq} no longer decodes: {e}"));
                    line_seq += u64::from(members);
                    continue;
                }
            };
            report.events += events.len() as u64;
            if events.len() as u64 != u64::from(members) {
                w.problems.push(format!(
                    "line at seq {line_seq} holds {} events, the index says {members}",
                    events.len()
                ));
            }
            for (k, e) in events.iter().enumerate() {
                let want = line_seq + k as u64;
                let seq = e
                    .as_object()
                    .and_then(|o| o.get("seq"))
                    .and_then(json::Value::as_safe_integer);
                if seq != i64::try_from(want).ok() {
                    w.problems.push(format!(
                        "event {k} of the line at seq {line_seq} has seq {seq:?}, expected {want}"
                    ));
                }
            }
            line_seq += events.len() as u64;
        }
        w.next_seq = line_seq;
    }

    /// Every checkpoint reference of the session names a whole checkpoint of its unit, at an
    /// earlier seq, of the version the reference carries, in the same layout (keys come in
    /// order, so the whole one has been seen when its reference is); every point record is
    /// intact.
    fn check_references(
        &self,
        meta: &SessionMeta,
        snap: &Snapshot<'_>,
        problems: &mut Vec<String>,
    ) -> Result<()> {
        let mut whole = std::collections::HashSet::new();
        let mut it = self.scan_iter_cf_at(CF_CHECKPOINTS, meta.number, Some(snap))?;
        it.seek(keys::session_start(meta.number));
        visit(&mut it, String::new(), &mut |k, v| {
            let Some((_, section, seq)) = keys::parse_event_key(k) else {
                return Ok(true);
            };
            let Some(layout) = CheckpointLayout::of_section(section) else {
                return Ok(true);
            };
            for (index, entry) in layout.entries(section, v) {
                let Ok(entry) = entry else {
                    problems.push(truncated_point(seq));
                    continue;
                };
                let name = UNITS.get(index).map_or("?", |u| u.key);
                match decode_checkpoint(entry) {
                    Some(StoredCheckpoint::Reference {
                        version,
                        seq: target,
                    }) => {
                        if !whole.contains(&(section, index, target, version)) {
                            problems.push(format!(
                                "the \"{name}\" checkpoint at seq {seq} refers to seq {target}, which holds no whole checkpoint of version {version}"
                            ));
                        }
                    }
                    Some(StoredCheckpoint::Whole { version, .. }) => {
                        whole.insert((section, index, seq, version));
                    }
                    None => problems.push(format!("an empty \"{name}\" checkpoint at seq {seq}")),
                }
            }
            Ok(true)
        })
    }

    /// Every session number present in `events` must have metadata, and every session number
    /// in use must be below the stored session counter (`layout::counter`), or a later open could
    /// hand it out again.
    fn verify_no_orphans(&self, report: &mut VerifyReport) -> Result<()> {
        let counter = self.read_counter()?;
        // The highest `N` key bounds every session's number; lines under a number without one
        // are orphans, reported below.
        if let Some(highest) = self.highest_session_number()? {
            report
                .problems
                .extend(beyond_counter(highest, counter, "a session holds"));
        }
        let mut it = self.iter_all(CF_EVENTS)?;
        it.seek_to_first();
        while it.valid() {
            let Some(k) = it.key() else { break };
            let Some((number, _, _)) = keys::parse_event_key(k) else {
                report.problems.push(VerifyProblem {
                    session: "?".into(),
                    detail: format!("malformed events key {k:02x?}"),
                });
                it.next();
                continue;
            };
            let known = self.get_at(CF_SESSIONS, &keys::number_key(number), None, || {
                "verifying session numbers".into()
            })?;
            if known.is_none() {
                report.problems.push(VerifyProblem {
                    session: format!("#{number}"),
                    detail: "stored lines belong to no session".into(),
                });
            }
            it.seek(keys::session_end(number));
        }
        // Damaged blocks are named per session by `verify_session`; here they only cut the scan.
        if let Err(e) = it.status() {
            report.problems.push(VerifyProblem {
                session: "?".into(),
                detail: format!("the session-number scan stopped at unreadable data: {e}"),
            });
        }
        Ok(())
    }
}

/// The problem of a session number in use that is not below the stored session counter.
fn beyond_counter(number: u64, counter: u64, what: &str) -> Option<VerifyProblem> {
    (number >= counter).then(|| VerifyProblem {
        session: format!("#{number}"),
        detail: format!("{what} number {number}, which is not below the session counter {counter}"),
    })
}

/// Ordinals (frames, tail chunks) must run 0, 1, 2, …
fn check_ordinal(problems: &mut Vec<String>, what: &str, n: u64, next: &mut u64) {
    if n != *next {
        problems.push(format!("{what} {n} found where {what} {next} was expected"));
    }
    *next = n + 1;
}

/// Compare what the walk found with what the metadata promises.
fn compare_counts(meta: &SessionMeta, w: &mut Walk) {
    let mut pairs = vec![
        ("committed lines", w.lines, meta.committed_lines),
        ("events", w.next_seq, meta.events),
        ("frames", w.frames, meta.frames),
        ("tail chunks", w.tail_chunks, meta.tail_chunks),
    ];
    if meta.fork_of.is_some() {
        // A fork's file sizes include its re-serialized seed, known only when exported.
        for (what, found, recorded) in pairs {
            if found != recorded {
                w.problems.push(format!(
                    "{found} {what} stored, the metadata says {recorded}"
                ));
            }
        }
        return;
    }
    pairs.push((
        "plaintext bytes",
        w.plain.len() as u64,
        meta.plaintext_bytes,
    ));
    for (what, found, recorded) in pairs {
        if found != recorded {
            w.problems.push(format!(
                "{found} {what} stored, the metadata says {recorded}"
            ));
        }
    }
    let file_bytes = match meta.source {
        SourceEncoding::Jsonl => w.plain.len() as u64 + w.stored,
        SourceEncoding::JsonlZstd => w.stored,
    };
    if file_bytes != meta.total_bytes {
        w.problems.push(format!(
            "{file_bytes} bytes stored, {} were imported",
            meta.total_bytes
        ));
    }
    if meta.source == SourceEncoding::JsonlZstd
        && meta.verdict.is_loadable()
        && w.framed_plain != w.plain
    {
        w.problems
            .push("the stored frames do not decode to the stored header and lines".into());
    }
}
