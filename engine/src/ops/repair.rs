//! Crash repair and resume with DSH's semantics (persistence-spec §4.4–4.6).
//!
//! Repair cuts a torn tail (the TAIL keys; for zstd imports also the lines recovered from the
//! torn final frame, which DSH re-serializes) and appends one batch: the recovered events, then
//! the closers of an interrupted turn (V0: DSH 0.1's, `codec::repair`; V4: DSH 0.2's
//! `interrupted` closers, `codec::open_turn`). Bytes before the cut never change.
//! Resume repairs, then appends one `session/end-seed` batch unless the log already ends with
//! one. A tail cut only cuts (and re-appends recovered lines), closing nothing: a live host that
//! still owns the open turn (DSH's adoption) appends its own ends, or its own closers. All run
//! under the session's write lock and drop its cached write state, which reloads from the
//! store on the next append.

use sessionlog_codec::json::Value;
use sessionlog_codec::rules::repair::{end_seed, needs_end_seed, OpenTurn};

use crate::error::{Error, Result};
use crate::layout::changes::{Change, ChangeKind};
use crate::layout::keys;
use crate::layout::meta::{now_ms, SessionMeta, Verdict};
use crate::read::events::stored_block;
use crate::store::{visit, Store};
use crate::write::appended_batch::write_records;
use crate::write::indexer::{fold_batch, Folded};
use crate::write::session_batch::SessionBatch;

/// What a repair or resume did. Serializes as `{cutBytes, recovered, closers, endSeed}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RepairReport {
    /// Bytes cut from the end of the stored file (the torn tail).
    pub cut_bytes: u64,
    /// Events re-appended from a torn zstd frame.
    pub recovered: u64,
    /// Closer events appended for an interrupted turn.
    pub closers: u64,
    /// Whether a `session/end-seed` batch was appended (resume only).
    pub end_seed: bool,
}

/// The blocks of lines recovered from a torn zstd frame.
#[derive(Default)]
struct TornBlocks {
    keys: Vec<[u8; keys::EVENT_KEY_LEN]>,
    lines: u64,
    events: usize,
}

/// How far a repair goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Cut the torn tail, re-append recovered lines; close nothing.
    CutTail,
    /// Also close an interrupted turn.
    Repair,
    /// Also mark the seed boundary.
    Resume,
}

impl Store {
    /// Repair session `id` as DSH does on load: cut a torn tail, close an interrupted turn.
    pub fn repair(&self, id: &str) -> Result<RepairReport> {
        self.repair_to(id, Reach::Repair)
    }

    /// Resume session `id`: repair it, then mark the seed boundary with `session/end-seed`.
    pub fn resume(&self, id: &str) -> Result<RepairReport> {
        self.repair_to(id, Reach::Resume)
    }

    /// Cut session `id`'s torn tail (re-appending the lines recovered from a torn zstd frame),
    /// leaving an open turn open: DSH's truncate-only repair.
    pub fn cut_torn_tail(&self, id: &str) -> Result<RepairReport> {
        self.repair_to(id, Reach::CutTail)
    }

    fn repair_to(&self, id: &str, reach: Reach) -> Result<RepairReport> {
        self.write_open(id)?;
        self.rewrite_session(id, "repairing session", None, |meta, batch| {
            self.stage_repair(id, meta, reach, batch)
        })
    }

    /// Stage the repair of session `id`, as far as `reach` says, into `batch`.
    fn stage_repair(
        &self,
        id: &str,
        mut meta: SessionMeta,
        reach: Reach,
        batch: &mut SessionBatch<'_>,
    ) -> Result<RepairReport> {
        meta.require_undeleted()?;
        let model = meta.require_surface_model("repair")?;
        if !meta.verdict.is_loadable() {
            return Err(Error::NotAppendable {
                id: id.into(),
                reason: format!(
                    "DSH's reader refuses its log ({}); there is nothing it would repair",
                    meta.verdict
                ),
            });
        }
        let mut report = RepairReport::default();
        let (events, torn) = self.events_for_repair(&meta)?;
        let recovered: Vec<Value> = events[events.len().saturating_sub(torn.events)..].to_vec();
        if meta.tail_bytes > 0 || !torn.keys.is_empty() {
            batch.delete_event_records(
                &keys::event_key(meta.number, keys::TAIL, 0),
                &keys::event_key(meta.number, keys::TAIL, u64::MAX),
            )?;
            for key in &torn.keys {
                batch.delete_event_record(key)?;
            }
            report.cut_bytes = meta.tail_bytes;
            report.recovered = recovered.len() as u64;
            meta.total_bytes = less(&meta, "file bytes", meta.total_bytes, meta.tail_bytes)?;
            meta.events = less(&meta, "events", meta.events, report.recovered)?;
            meta.committed_lines =
                less(&meta, "committed lines", meta.committed_lines, torn.lines)?;
            meta.committed_bytes = meta.plaintext_bytes;
            meta.tail_bytes = 0;
            meta.tail_chunks = 0;
            meta.torn_batch = None;
        }
        meta.verdict = Verdict::Clean;
        meta.body_lines = meta.committed_lines;
        let closers = if reach == Reach::CutTail {
            Vec::new()
        } else if meta.version == 4 {
            let mut open = sessionlog_codec::rules::open_turn::OpenTurn::default();
            for e in &events {
                open.observe(e);
            }
            open.closers(sessionlog_codec::rules::open_turn::CloseCause::Interrupted)
        } else {
            v0_closers(id, &events)?
        };
        report.closers = closers.len() as u64;
        let mut repaired: Vec<Value> = recovered;
        repaired.extend(closers);
        let last = repaired.last().or(events.last());
        let seeds = reach == Reach::Resume && needs_end_seed(last);
        // The metadata before the repair's batches (its activity as stored, from which the `A`
        // key moves), for the one write of the metadata below, when the repair writes anything.
        let stored = (!repaired.is_empty() || report.cut_bytes > 0 || seeds).then(|| meta.clone());
        let mut fold = match meta.events {
            0 => sessionlog_codec::rules::surface::SurfaceFold::new().with_model(model),
            n => self.surface_fold_at(&meta, n - 1)?,
        };
        if !repaired.is_empty() {
            let folded = self.fold_for_repair(&meta, &mut fold, &repaired)?;
            meta = write_records(&meta, &repaired, &folded, batch)?.0;
        }
        if seeds {
            let seed = [end_seed(meta.events, now_ms())];
            let folded = self.fold_for_repair(&meta, &mut fold, &seed)?;
            meta = write_records(&meta, &seed, &folded, batch)?.0;
            report.end_seed = true;
        }
        // The repair's own changes (verdict, tail) and its batches' counters, written once.
        if let Some(stored) = stored {
            batch.update_meta(&stored, &meta)?;
            let added = meta.events.saturating_sub(stored.events);
            batch.record_change(
                Change::new(ChangeKind::Repaired, &meta.id, stored.events, added),
                None,
            );
        }
        Ok(report)
    }

    /// Fold repair events into the surface; DSH's own closers never break its rules, so a
    /// refusal means the stored log is inconsistent.
    fn fold_for_repair(
        &self,
        meta: &SessionMeta,
        fold: &mut sessionlog_codec::rules::surface::SurfaceFold,
        events: &[Value],
    ) -> Result<Folded> {
        fold_batch(self, meta, fold, events)?.map_err(|r| {
            meta.corrupt(format!(
                "repair event at seq {} breaks the surface: {}",
                r.seq, r.message
            ))
        })
    }

    /// Every committed event, and the blocks holding lines recovered from a torn zstd frame
    /// (DSH cuts and re-serializes those; they are the log's last events).
    fn events_for_repair(&self, meta: &SessionMeta) -> Result<(Vec<Value>, TornBlocks)> {
        let mut events = Vec::new();
        self.events(&meta.id_lossy(), 0, None, &mut |_, e| {
            events.push(e.clone());
            Ok(())
        })?;
        let mut recovered = TornBlocks::default();
        if let Some(torn) = meta.torn_batch {
            let mut it = self.session_iter(meta.number)?;
            it.seek(keys::event_key(meta.number, keys::BLOCK, 0));
            visit(&mut it, "reading a torn session".into(), &mut |k, v| {
                let Some((_, keys::BLOCK, first)) = keys::parse_event_key(k) else {
                    return Ok(false);
                };
                let block = stored_block(meta, first, v)?;
                if block.meta.batch == torn {
                    recovered
                        .keys
                        .push(keys::event_key(meta.number, keys::BLOCK, first));
                    recovered.lines += block.meta.members.len() as u64;
                    recovered.events += block
                        .meta
                        .members
                        .iter()
                        .map(|&m| m as usize)
                        .sum::<usize>();
                }
                Ok(true)
            })?;
        }
        Ok((events, recovered))
    }
}

/// DSH 0.1's closers of an interrupted turn (`codec::repair`), after `events`.
fn v0_closers(id: &str, events: &[Value]) -> Result<Vec<Value>> {
    let mut open = OpenTurn::new();
    for e in events {
        open.observe(e);
    }
    if let Some(e) = open.type_error() {
        return Err(Error::NotAppendable {
            id: id.into(),
            reason: format!("DSH's closer scan fails on its log: {e}"),
        });
    }
    let last_time = events
        .last()
        .and_then(Value::as_object)
        .and_then(|o| o.get("time"));
    Ok(open.closers(events.len() as u64, last_time))
}

/// `total - cut` of a stored counter; a cut larger than the counter means the stored metadata
/// contradicts its own data (never a wrapped counter written back).
fn less(meta: &SessionMeta, what: &str, total: u64, cut: u64) -> Result<u64> {
    total.checked_sub(cut).ok_or_else(|| {
        meta.corrupt(format!(
            "the metadata counts {total} {what}, but the repair would cut {cut}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use crate::error::Error;
    use crate::layout::meta::Verdict;
    use crate::test_support::{edit_meta, seeded};

    /// Stored counters that contradict each other fail the repair as corrupt metadata; a
    /// counter is never wrapped and written back.
    #[test]
    fn a_cut_larger_than_the_stored_counter_is_corrupt_not_wrapped() {
        let (_t, store) = seeded();
        edit_meta(&store, |m| {
            m.verdict = Verdict::Torn;
            m.tail_bytes = m.total_bytes + 1;
            m.tail_chunks = 1;
        });
        let e = store.repair("a").expect_err("inconsistent counters");
        assert!(matches!(e, Error::Corrupt { .. }), "{e}");
        assert_eq!(
            store.require_meta(b"a").expect("meta").tail_bytes,
            store.require_meta(b"a").expect("meta").total_bytes + 1,
            "nothing was written"
        );
    }
}
