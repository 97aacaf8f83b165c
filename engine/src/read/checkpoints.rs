//! Projection-unit checkpoints read (`checkpoints` CF, written by `write/indexer.rs`) and
//! `state_at`: a unit's state at any seq from the nearest checkpoint ≤ N plus a fold of the
//! events after it.
//!
//! Key `number ‖ CHECKPOINT_POINTS ‖ seq` → every unit's checkpoint after event `seq`, each
//! `[unit version][JSON.stringify(state)]`, written in the same WriteBatch as the event, so a
//! checkpoint never covers an event the log does not hold. A checkpoint whose version byte is
//! not the unit's current version is never read: the fold starts earlier instead (at worst from
//! the beginning). A unit no event touched since its last whole checkpoint is checkpointed as a
//! reference to it, `[0xFF][unit version][seq]` (`layout/values.rs`): its state is the
//! referenced one's, and the fold starts after the reference. Stores written before point
//! records hold one key per unit, `number ‖ unit index ‖ seq`, with the same values; they are
//! read when no point record serves.

use sessionlog_codec::json::{self, Value};
use sessionlog_codec::rules::projection::{unit_at, unit_in, ProjectionSet, Unit, UNITS};
use sessionlog_codec::rules::surface::SurfaceModel;

use crate::error::{Error, Result};
use crate::layout::keys::{event_key, parse_event_key, CF_CHECKPOINTS, TURNS, TURN_RECORDS};
use crate::layout::meta::SessionMeta;
use crate::layout::values::{truncated_point, CheckpointLayout, StoredCheckpoint};
use crate::read::surface::resolve_at;
use crate::store::Store;

impl Store {
    /// The state (view) of projection unit `unit` after event `at` (default: the last event).
    pub fn state_at(&self, id: &str, unit: &str, at: Option<u64>) -> Result<Value> {
        let meta = self.require_meta(id.as_bytes())?;
        let migrated = self.migrated_events(&meta)?;
        let model = match migrated {
            Some(_) => SurfaceModel::V4,
            None => meta.require_surface_model("projection state")?,
        };
        let (index, u) = unit_in(model, unit).ok_or_else(|| Error::UnknownUnit {
            unit: unit.into(),
            known: UNITS.iter().map(|u| u.key).collect::<Vec<_>>().join(", "),
        })?;
        if let Some(events) = migrated {
            // A V1–V3 session: DSH 0.2's fold over its V4 successor (the cut is its marker).
            let end = crate::read::migrated_view::migrated_at(&meta, &events, at)?;
            let mut state = u.init(0);
            for (seq, e) in events.iter().take(end.map_or(0, |e| e + 1)).enumerate() {
                u.apply(&mut state, seq as u64, e);
            }
            return Ok(u.view(&state));
        }
        let seed = meta.seed_length()?;
        let Some(at) = resolve_at(&meta, at)? else {
            return Ok(u.view(&u.init(seed)));
        };
        let (mut state, from) = self
            .nearest_checkpoint(&meta, index, at)?
            .unwrap_or_else(|| (u.init(seed), 0));
        self.events_of(&meta, from, Some(at), &mut |seq, e| {
            u.apply(&mut state, seq, e);
            Ok(())
        })?;
        if u.key == TURNS {
            // Turns closed up to the checkpoint are records; the fold holds the ones after it.
            let mut turns = match from.checked_sub(1) {
                Some(cp) => self.turn_records(&meta, cp)?,
                None => Vec::new(),
            };
            if let Value::Array(folded) = state {
                turns.extend(folded);
            }
            return Ok(Value::Array(turns));
        }
        Ok(u.view(&state))
    }

    /// The closed-turn records with `turn/end` seq ≤ `upto`, in order (a fork's inherited ones
    /// from its parent's storage).
    fn turn_records(&self, meta: &SessionMeta, upto: u64) -> Result<Vec<Value>> {
        let mut out = Vec::new();
        let records = (CF_CHECKPOINTS, TURN_RECORDS);
        self.scan_records(meta, records, upto, "turns", &mut |_, v| {
            out.push(parse_state(v)?);
            Ok(())
        })?;
        Ok(out)
    }

    /// Every unit's state after the session's last event: each from its nearest checkpoint, the
    /// events after the oldest of them folded once.
    pub(crate) fn projection_set(&self, meta: &SessionMeta) -> Result<ProjectionSet> {
        match meta.events.checked_sub(1) {
            Some(at) => self.projection_set_at(meta, at),
            None => Ok(ProjectionSet::for_model(
                meta.seed_length()?,
                meta.fold_model(),
            )),
        }
    }

    /// Every unit's state after event `at`.
    pub(crate) fn projection_set_at(&self, meta: &SessionMeta, at: u64) -> Result<ProjectionSet> {
        let mut set = ProjectionSet::for_model(meta.seed_length()?, meta.fold_model());
        let mut from = Vec::with_capacity(UNITS.len());
        for index in 0..UNITS.len() {
            match self.nearest_checkpoint(meta, index, at)? {
                Some((state, next)) => {
                    set.states[index] = state;
                    from.push(next);
                }
                None => from.push(0),
            }
        }
        let start = from.iter().copied().min().unwrap_or(0);
        self.events_of(meta, start, Some(at), &mut |seq, e| {
            for (i, state) in set.states.iter_mut().enumerate() {
                if seq >= from[i] {
                    unit_at(set.model, i).apply(state, seq, e);
                }
            }
            Ok(())
        })?;
        Ok(set)
    }

    /// The latest readable checkpoint of unit `index` at or before `at`: its state and the seq
    /// to fold from. Point records are searched first; a session (or the part of one) written
    /// before them has per-unit keys, which are searched next.
    fn nearest_checkpoint(
        &self,
        meta: &SessionMeta,
        index: usize,
        at: u64,
    ) -> Result<Option<(Value, u64)>> {
        let unit = unit_at(meta.fold_model(), index);
        for layout in [CheckpointLayout::Points, CheckpointLayout::PerUnit] {
            if let Some(found) = self.nearest_in(meta, unit, index, layout, at)? {
                return Ok(Some(found));
            }
        }
        // A fork before its own first checkpoint starts from its parent's (forks copy none, so
        // a fork costs the same whatever the parent's size). The inbox alone differs: a fork
        // reads splices only from its own seedLength on.
        let Some(base) = &meta.fork_of else {
            return Ok(None);
        };
        if unit.key == "inbox" {
            return Ok(Some((unit.init(base.seed), base.seed.min(at + 1))));
        }
        match base.seed.checked_sub(1) {
            Some(last) => {
                self.nearest_checkpoint(&self.require_meta(&base.id)?, index, at.min(last))
            }
            None => Ok(None),
        }
    }

    /// The latest checkpoint of unit `index` at or before `at` stored in `layout`, skipping
    /// those of another version of the unit.
    fn nearest_in(
        &self,
        meta: &SessionMeta,
        unit: &Unit,
        index: usize,
        layout: CheckpointLayout,
        at: u64,
    ) -> Result<Option<(Value, u64)>> {
        let section = layout.section(index);
        let mut it = self.session_iter_cf(CF_CHECKPOINTS, meta.number)?;
        it.seek_for_prev(event_key(meta.number, section, at));
        while it.valid() {
            let (Some(k), Some(v)) = (it.key(), it.value()) else {
                break;
            };
            let Some((_, s, seq)) = parse_event_key(k) else {
                break;
            };
            if s != section {
                break;
            }
            let state = match layout
                .entry(v, index)
                .map_err(|()| damaged_point(meta, seq))?
            {
                Some(StoredCheckpoint::Whole { version, text }) if version == unit.version => {
                    parse_state(text)?
                }
                Some(StoredCheckpoint::Reference {
                    version,
                    seq: whole,
                }) if version == unit.version => {
                    self.referenced_checkpoint(meta, (unit, index), layout, seq, whole)?
                }
                _ => {
                    it.prev();
                    continue;
                }
            };
            return Ok(Some((state, seq + 1)));
        }
        it.status().map_err(Error::storage(format!(
            "reading checkpoints of \"{}\"",
            meta.id_lossy()
        )))?;
        Ok(None)
    }

    /// The state a reference at `seq` names: unit `unit`'s whole checkpoint at `whole`, which
    /// the writer made before it in the same layout (a missing or foreign one is damage, never a
    /// guess).
    fn referenced_checkpoint(
        &self,
        meta: &SessionMeta,
        (unit, index): (&Unit, usize),
        layout: CheckpointLayout,
        seq: u64,
        whole: u64,
    ) -> Result<Value> {
        let damaged = |what: &str| Error::Corrupt {
            id: meta.id_lossy(),
            detail: format!(
                "the \"{}\" checkpoint at seq {seq} refers to one at seq {whole}, which {what}",
                unit.key
            ),
        };
        if whole >= seq {
            return Err(damaged("does not precede it"));
        }
        let key = event_key(meta.number, layout.section(index), whole);
        let value = self
            .get_at(CF_CHECKPOINTS, &key, None, || {
                format!("reading checkpoints of \"{}\"", meta.id_lossy())
            })?
            .ok_or_else(|| damaged("is missing"))?;
        match layout.entry(&value, index) {
            Ok(Some(StoredCheckpoint::Whole { version, text })) if version == unit.version => {
                parse_state(text)
            }
            _ => Err(damaged("is not a whole checkpoint of this unit's version")),
        }
    }
}

/// A point record whose entries run past its end.
fn damaged_point(meta: &SessionMeta, seq: u64) -> Error {
    Error::Corrupt {
        id: meta.id_lossy(),
        detail: truncated_point(seq),
    }
}

/// A stored state's JSON text (a checkpoint's or a closed-turn record's) as a value.
fn parse_state(text: &[u8]) -> Result<Value> {
    Ok(json::parse(&String::from_utf8_lossy(text))?)
}

#[cfg(test)]
mod tests {
    use crate::error::Error;
    use crate::layout::keys::{event_key, unit_section, CF_CHECKPOINTS, CHECKPOINT_POINTS};
    use crate::layout::values::{
        decode_checkpoint, point_entries, point_entry, write_checkpoint_reference,
        write_whole_checkpoint, StoredCheckpoint,
    };
    use crate::store::Store;
    use crate::test_support::{edit_meta, ev, seeded};
    use sessionlog_codec::json::Value;
    use sessionlog_codec::rules::projection::ProjectionSet;

    /// Session "a" after a `session/title` (seq 3) and two turns whose `turn/end`s (seqs 5 and
    /// 7) are checkpoint points; its number and the `title` unit's index.
    fn two_turns_after_a_title() -> (tempfile::TempDir, Store, u64, usize) {
        let (t, store) = seeded();
        let turn = |n: u32| {
            vec![
                ev(&format!(
                    r#"{{"type":"turn/start","time":5,"data":{{"turn":{n}}}}}"#
                )),
                ev(&format!(
                    r#"{{"type":"turn/end","time":6,"data":{{"turn":{n},"reason":"done"}}}}"#
                )),
            ]
        };
        let title = ev(r#"{"type":"session/title","time":5,"data":{"title":"T"}}"#);
        store.append("a", Some(3), vec![title]).expect("title");
        store.append("a", Some(4), turn(1)).expect("turn 1");
        store.append("a", Some(6), turn(2)).expect("turn 2");
        let number = store.require_meta(b"a").expect("meta").number;
        let (title, _) = ProjectionSet::unit("title").expect("unit");
        (t, store, number, title)
    }

    fn problems(store: &Store) -> Vec<String> {
        let report = store.verify(&[]).expect("verify");
        report.problems.into_iter().map(|p| p.detail).collect()
    }

    /// The second `turn/end` checkpoints the untouched title as a reference to the first one's,
    /// both in one point record per point; the state reads through it, and a reference whose
    /// record is gone is reported as damage, by the reader and by `verify`.
    #[test]
    fn an_untouched_unit_is_checkpointed_as_a_reference() {
        let (_t, store, number, title) = two_turns_after_a_title();
        let key = |seq| event_key(number, CHECKPOINT_POINTS, seq);
        let record = |seq| store.raw_get(CF_CHECKPOINTS, &key(seq)).expect("record");
        let referred = |seq| {
            let record = record(seq);
            let entry = point_entry(&record, title)
                .expect("intact")
                .expect("title entry");
            match decode_checkpoint(entry) {
                Some(StoredCheckpoint::Reference { seq, .. }) => Some(seq),
                _ => None,
            }
        };
        assert_eq!(referred(5), None, "the first is whole");
        assert_eq!(referred(7), Some(5));
        assert!(
            store
                .raw_get(CF_CHECKPOINTS, &event_key(number, unit_section(title), 5))
                .is_none(),
            "no per-unit keys are written"
        );
        let title_at = |seq| store.state_at("a", "title", Some(seq));
        assert_eq!(title_at(7).expect("state").as_str(), Some("T"));
        assert!(problems(&store).is_empty());
        let references_to_5 = point_entries(&record(7))
            .filter(|e| {
                matches!(
                    e.ok().and_then(decode_checkpoint),
                    Some(StoredCheckpoint::Reference { seq: 5, .. })
                )
            })
            .count();
        store.raw_delete(CF_CHECKPOINTS, &key(5));
        let e = title_at(7).expect_err("dangling reference");
        assert!(matches!(e, Error::Corrupt { .. }), "{e}");
        assert!(e.to_string().contains("seq 5"), "{e}");
        let found = problems(&store);
        assert_eq!(found.len(), references_to_5, "{found:?}");
        assert!(
            found.iter().all(|p| p.contains("at seq 7 refers to seq 5")),
            "{found:?}"
        );
        assert!(
            found.iter().any(|p| p.contains("\"title\" checkpoint")),
            "{found:?}"
        );
    }

    /// A store written before point records holds one key per unit and point: those are still
    /// read (whole and reference), and checked by `verify`.
    #[test]
    fn per_unit_checkpoints_of_older_stores_are_read() {
        let (_t, store, number, title) = two_turns_after_a_title();
        for seq in [5, 7] {
            store.raw_delete(CF_CHECKPOINTS, &event_key(number, CHECKPOINT_POINTS, seq));
        }
        let (_, unit) = ProjectionSet::unit("title").expect("unit");
        let legacy = |seq| event_key(number, unit_section(title), seq);
        // A state no fold gives ("L"), so reading it proves the per-unit key was used.
        let mut whole = Vec::new();
        write_whole_checkpoint(&mut whole, unit, &Value::String("L".into()));
        store.raw_put(CF_CHECKPOINTS, &legacy(5), &whole);
        let mut reference = Vec::new();
        write_checkpoint_reference(&mut reference, unit, 5);
        store.raw_put(CF_CHECKPOINTS, &legacy(7), &reference);
        let title_at = |seq| store.state_at("a", "title", Some(seq));
        assert_eq!(title_at(6).expect("state").as_str(), Some("L"));
        assert_eq!(title_at(7).expect("state").as_str(), Some("L"));
        assert!(problems(&store).is_empty());
        store.raw_delete(CF_CHECKPOINTS, &legacy(5));
        let found = problems(&store);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("\"title\" checkpoint at seq 7 refers to seq 5"),
            "{found:?}"
        );
    }

    /// A stored header that no longer parses is corrupt data, not a `seedLength` of 0.
    #[test]
    fn an_unparsable_stored_header_is_corrupt() {
        let (_t, store) = seeded();
        assert!(store.state_at("a", "inbox", None).is_ok());
        edit_meta(&store, |m| m.header = b"not a header\n".to_vec());
        let e = store.state_at("a", "inbox", None).expect_err("unparsable");
        assert!(matches!(e, Error::Corrupt { .. }), "{e}");
    }
}
