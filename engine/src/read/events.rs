//! Logical events: the committed region decoded line by line (packed rows expanded), by seq or
//! in seq order, across a fork's segments. The one decoder of stored blocks into events.

use sessionlog_codec::format::rows::decode_line;
use sessionlog_codec::format::stored::{decode_block, split_lines, StoredBlock};
use sessionlog_codec::json::{self, Value};

use crate::error::{Error, Result};
use crate::layout::keys;
use crate::layout::meta::SessionMeta;
use crate::store::{visit, Store};

impl Store {
    /// The logical event at `seq` of a session, if the committed region holds it.
    pub(crate) fn event_at(&self, meta: &SessionMeta, seq: u64) -> Result<Option<Value>> {
        Ok(self.events_at(meta, &[seq])?.pop().flatten())
    }

    /// The logical events at `seqs` (any order, repeats allowed), each `None` past the committed
    /// region. Seqs are visited in sorted order so each block is read and verified once.
    pub(crate) fn events_at(&self, meta: &SessionMeta, seqs: &[u64]) -> Result<Vec<Option<Value>>> {
        let mut out: Vec<Option<Value>> = vec![None; seqs.len()];
        for seg in self.segments(meta)? {
            let picked: Vec<usize> = (0..seqs.len())
                .filter(|&i| (seg.from..seg.end).contains(&seqs[i]))
                .collect();
            if picked.is_empty() {
                continue;
            }
            let sub: Vec<u64> = picked.iter().map(|&i| seqs[i]).collect();
            for (i, e) in picked
                .into_iter()
                .zip(self.events_at_in(meta, seg.number, seg.end, &sub)?)
            {
                out[i] = e;
            }
        }
        Ok(out)
    }

    /// [`Store::events_at`] within one stored stretch (`number`, seqs below `end`).
    fn events_at_in(
        &self,
        meta: &SessionMeta,
        number: u64,
        end: u64,
        seqs: &[u64],
    ) -> Result<Vec<Option<Value>>> {
        let mut order: Vec<usize> = (0..seqs.len()).collect();
        order.sort_unstable_by_key(|&i| seqs[i]);
        let mut out: Vec<Option<Value>> = vec![None; seqs.len()];
        let mut it = self.session_iter(number)?;
        // The verified block in hand: its first seq, the seq after its end, members and text.
        let mut held: Option<(u64, u64, Vec<u32>, Vec<u8>)> = None;
        for i in order {
            let seq = seqs[i];
            if seq >= end {
                continue;
            }
            if !held
                .as_ref()
                .is_some_and(|(first, end, _, _)| (*first..*end).contains(&seq))
            {
                it.seek_for_prev(keys::event_key(number, keys::BLOCK, seq));
                let (Some(k), Some(v)) = (it.key(), it.value()) else {
                    continue;
                };
                let Some((_, keys::BLOCK, first)) = keys::parse_event_key(k) else {
                    continue;
                };
                let block = stored_block(meta, first, v)?;
                let end = first
                    + block
                        .meta
                        .members
                        .iter()
                        .map(|&m| u64::from(m))
                        .sum::<u64>();
                held = Some((first, end, block.meta.members, block.text.to_vec()));
            }
            let Some((first, _, members, text)) = &held else {
                continue;
            };
            let mut line_seq = *first;
            for (line, &members) in split_lines(text).zip(members) {
                let end = line_seq + u64::from(members);
                if seq < end {
                    let events = line_events(meta, line, line_seq)?;
                    out[i] = usize::try_from(seq - line_seq)
                        .ok()
                        .and_then(|k| events.into_iter().nth(k));
                    break;
                }
                line_seq = end;
            }
        }
        it.status().map_err(Error::storage(format!(
            "reading session \"{}\"",
            meta.id_lossy()
        )))?;
        Ok(out)
    }

    /// Call `each` with every logical event of `id` whose seq is in `from..=to` (in order).
    /// Events are served for any stored session: the committed region is DSH's valid prefix.
    pub fn events(
        &self,
        id: &str,
        from: u64,
        to: Option<u64>,
        each: &mut dyn FnMut(u64, &Value) -> Result<()>,
    ) -> Result<()> {
        let meta = self.require_meta(id.as_bytes())?;
        self.events_of(&meta, from, to, each)
    }

    /// [`Store::events`] of a session whose metadata is in hand; a fork's inherited prefix is
    /// read from its parent's storage.
    pub(crate) fn events_of(
        &self,
        meta: &SessionMeta,
        from: u64,
        to: Option<u64>,
        each: &mut dyn FnMut(u64, &Value) -> Result<()>,
    ) -> Result<()> {
        self.lines_or_events(meta, from, to, &mut EachEvent(each))
    }

    /// [`Store::events_of`] for a reader that can take some lines' events from their stored
    /// text without decoding them (see [`LineReader`]).
    pub(crate) fn lines_or_events(
        &self,
        meta: &SessionMeta,
        from: u64,
        to: Option<u64>,
        reader: &mut dyn LineReader,
    ) -> Result<()> {
        let end = to.map_or(meta.events, |t| t.saturating_add(1).min(meta.events));
        for seg in self.segments(meta)? {
            let (a, b) = (from.max(seg.from), end.min(seg.end));
            if a < b {
                self.events_in(meta, seg.number, a, b, reader)?;
            }
        }
        Ok(())
    }

    /// The events with seqs in `from..end` stored under session number `number`, each whole
    /// line offered to `reader` first (see [`LineReader`]). Invariant: each seq of
    /// the range is yielded or taken once, in order; a seq the store does not hold (a block
    /// missing, or the blocks ending short of the session's end) is an error naming it, never
    /// a gap a reader would pass over.
    fn events_in(
        &self,
        meta: &SessionMeta,
        number: u64,
        from: u64,
        end: u64,
        reader: &mut dyn LineReader,
    ) -> Result<()> {
        let mut it = self.session_iter(number)?;
        // The block holding `from` is the last block whose first seq is ≤ from.
        it.seek_for_prev(keys::event_key(number, keys::BLOCK, from));
        if !it.valid() {
            it.seek(keys::session_start(number));
        }
        let context = format!("reading session \"{}\"", meta.id_lossy());
        // The seq the next event yielded must have.
        let mut next = from;
        visit(&mut it, context, &mut |k, v| {
            let Some((_, keys::BLOCK, first)) = keys::parse_event_key(k) else {
                return Ok(false);
            };
            if first >= end {
                return Ok(false);
            }
            if first > next {
                return Err(meta.corrupt(format!(
                    "seq {next} is missing: the next stored block starts at seq {first}"
                )));
            }
            let block = stored_block(meta, first, v)?;
            let mut line_seq = first;
            for (line, members) in block.lines() {
                let line_end = line_seq + u64::from(members);
                let whole = line_seq >= from && line_end <= end && members > 0;
                if whole && reader.line(line_seq, members, line)? {
                    next = line_end;
                } else if line_end > from && line_seq < end {
                    for (k, event) in line_events(meta, line, line_seq)?.iter().enumerate() {
                        let seq = line_seq + k as u64;
                        if seq >= from && seq < end {
                            reader.event(seq, event)?;
                            next = seq + 1;
                        }
                    }
                }
                line_seq = line_end;
            }
            Ok(true)
        })?;
        match next < end {
            true => Err(meta.corrupt(format!(
                "seqs {next} to {} are missing: the stored blocks end before the session's end",
                end - 1
            ))),
            false => Ok(()),
        }
    }
}

/// A reader of a session's events that can take some whole stored lines' events from their
/// text, so that only the other lines are decoded. Invariant (kept by
/// [`Store::lines_or_events`]): each seq of the range read is in one line the reader took or
/// given to [`LineReader::event`], once, in order; only lines whose events all lie in the range
/// are offered.
pub(crate) trait LineReader {
    /// Whether the reader took the events of stored line `line` (`members` events from seq
    /// `first`) from its text; if not, they are decoded and given to [`LineReader::event`].
    fn line(&mut self, first: u64, members: u32, line: &[u8]) -> Result<bool>;
    /// One decoded event.
    fn event(&mut self, seq: u64, event: &Value) -> Result<()>;
}

/// A [`LineReader`] that takes every event decoded.
struct EachEvent<'a>(&'a mut dyn FnMut(u64, &Value) -> Result<()>);

impl LineReader for EachEvent<'_> {
    fn line(&mut self, _: u64, _: u32, _: &[u8]) -> Result<bool> {
        Ok(false)
    }

    fn event(&mut self, seq: u64, event: &Value) -> Result<()> {
        (self.0)(seq, event)
    }
}

/// The stored block keyed at seq `first`, its checksum verified.
pub(crate) fn stored_block<'v>(
    meta: &SessionMeta,
    first: u64,
    value: &'v [u8],
) -> Result<StoredBlock<'v>> {
    decode_block(value).map_err(|e| meta.corrupt(format!("block at seq {first}: {e}")))
}

/// The events of stored line `line`, whose first event has seq `line_seq`.
fn line_events(meta: &SessionMeta, line: &[u8], line_seq: u64) -> Result<Vec<Value>> {
    let value = json::parse(&String::from_utf8_lossy(line))?;
    decode_line(value, meta.version, line_seq)
        .map_err(|e| meta.corrupt(format!("line at seq {line_seq}: {e}")))
}

#[cfg(test)]
mod tests {
    use crate::error::Error;
    use crate::layout::keys::{self, CF_EVENTS};
    use crate::test_support::{ev, seeded};

    /// A seq the store does not hold is an error naming it, wherever it is missing: a reader
    /// never passes over it as if the next event followed on.
    #[test]
    fn a_missing_block_is_an_error_naming_its_first_seq_never_a_gap() {
        let (_t, store) = seeded();
        let more = ev(
            r#"{"type":"user/message","time":5,"data":{"content":[],"source":{"kind":"user"},"role":"user","id":"u2"},"surfaceOp":"append"}"#,
        );
        store.append("a", Some(3), vec![more]).expect("append");
        let number = store.require_meta(b"a").expect("meta").number;
        let block = |first| keys::event_key(number, keys::BLOCK, first);
        let first = store
            .raw_get(CF_EVENTS, &block(0))
            .expect("a block at seq 0");
        assert!(
            store.raw_get(CF_EVENTS, &block(3)).is_some(),
            "a block at seq 3"
        );
        let seqs = |store: &crate::Store| {
            let mut seqs = Vec::new();
            store
                .events("a", 0, None, &mut |seq, _| {
                    seqs.push(seq);
                    Ok(())
                })
                .map(|()| seqs)
        };
        assert_eq!(seqs(&store).expect("whole"), [0, 1, 2, 3]);
        store.raw_delete(CF_EVENTS, &block(0));
        let e = seqs(&store).expect_err("the first block is missing");
        assert!(matches!(e, Error::Corrupt { .. }), "{e}");
        assert!(e.to_string().contains("seq 0 is missing"), "{e}");
        store.raw_put(CF_EVENTS, &block(0), &first);
        store.raw_delete(CF_EVENTS, &block(3));
        let e = seqs(&store).expect_err("the last block is missing");
        assert!(e.to_string().contains("seqs 3 to 3 are missing"), "{e}");
    }
}
