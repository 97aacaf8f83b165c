//! Projection checkpoints (`checkpoints` CF) and `state_at`: a unit's state at any seq from the
//! nearest checkpoint ≤ N plus a fold of the events after it.
//!
//! Key `number ‖ unit index ‖ seq` → `[unit version][JSON.stringify(state)]`. Every unit is
//! checkpointed after each `turn/end` and after every [`CHECKPOINT_EVERY`]th event (a stateless
//! rule: seq + 1 divisible by it), in the same WriteBatch as the event, so a checkpoint never
//! covers an event the log does not hold. A checkpoint whose version byte is not the unit's
//! current version is never read: the fold starts earlier instead (at worst from the beginning).

use sessionlog_codec::json::{self, Value};
use sessionlog_codec::projection::{unit_at, unit_in, ProjectionSet, UNITS};
use sessionlog_codec::surface::SurfaceModel;

use crate::keys::{event_key, parse_event_key, EVENT_KEY_LEN};
use crate::meta::SessionMeta;
use crate::store::{Store, CF_CHECKPOINTS};
use crate::{Error, Result};

/// The `turns` unit: its state keeps only open turns; each closed turn is a record of its own,
/// keyed by its `turn/end` seq in [`TURN_RECORDS`], so checkpoints do not grow with the log.
const TURNS: &str = "turns";

/// Checkpoint-CF section of closed-turn records (apart from the unit indexes).
const TURN_RECORDS: u8 = 0xF0;

/// A turn entry's `endSeq`, when it is closed.
fn end_seq(turn: &Value) -> Option<u64> {
    turn.as_object()?.get("endSeq")?.as_safe_u64()
}

/// Events between two periodic checkpoints.
pub const CHECKPOINT_EVERY: u64 = 200;

/// Folds committed events into every unit and emits checkpoints by the policy above.
#[derive(Debug)]
pub(crate) struct ProjectionWriter {
    pub(crate) set: ProjectionSet,
}

impl ProjectionWriter {
    pub(crate) fn new(seed_length: u64, model: SurfaceModel) -> Self {
        ProjectionWriter {
            set: ProjectionSet::for_model(seed_length, model),
        }
    }

    /// Fold event `seq`; when it is a checkpoint point, `put` every unit's checkpoint.
    pub(crate) fn apply(
        &mut self,
        number: u64,
        seq: u64,
        event: &Value,
        put: &mut dyn FnMut([u8; EVENT_KEY_LEN], Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        self.set.apply(seq, event);
        if let Some((i, _)) = ProjectionSet::unit(TURNS) {
            // Closed turns leave the state for records of their own, so checkpoints stay small.
            if let Value::Array(list) = &mut self.set.states[i] {
                let (closed, open): (Vec<Value>, Vec<Value>) = std::mem::take(list)
                    .into_iter()
                    .partition(|t| end_seq(t).is_some());
                for t in closed {
                    put(
                        event_key(number, TURN_RECORDS, end_seq(&t).unwrap_or(seq)),
                        json::stringify(&t).into_bytes(),
                    )?;
                }
                *list = open;
            }
        }
        if is_checkpoint_point(seq, event) {
            for (i, state) in self.set.states.iter().enumerate() {
                put(
                    event_key(number, unit_section(i), seq),
                    checkpoint_value(unit_at(self.set.model, i), state),
                )?;
            }
        }
        Ok(())
    }
}

/// Whether every unit is checkpointed after event `seq` (the policy in the module docs).
pub(crate) fn is_checkpoint_point(seq: u64, event: &Value) -> bool {
    (seq + 1) % CHECKPOINT_EVERY == 0
        || event
            .as_object()
            .and_then(|o| o.get("type"))
            .and_then(Value::as_str)
            == Some("turn/end")
}

/// A checkpoint value: the unit's version, then its state's `JSON.stringify`.
pub(crate) fn checkpoint_value(
    unit: &sessionlog_codec::projection::Unit,
    state: &Value,
) -> Vec<u8> {
    let mut value = vec![unit.version];
    value.extend_from_slice(json::stringify(state).as_bytes());
    value
}

/// The checkpoint key section of unit `index`.
pub(crate) fn unit_section(index: usize) -> u8 {
    u8::try_from(index).unwrap_or(u8::MAX)
}

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
            let end = crate::migrated_view::migrated_at(&meta, &events, at)?;
            let mut state = u.init(0);
            for (seq, e) in events.iter().take(end.map_or(0, |e| e + 1)).enumerate() {
                u.apply(&mut state, seq as u64, e);
            }
            return Ok(u.view(&state));
        }
        let seed = meta.seed_length()?;
        let Some(at) = crate::surface::resolve_at(&meta, at)? else {
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
        for seg in self.segments(meta)? {
            let Some(last) = seg.last_upto(upto) else {
                continue;
            };
            let mut it = self
                .db
                .raw_iterator_cf_opt(self.cf(CF_CHECKPOINTS)?, self.bounded(seg.number));
            it.seek(event_key(seg.number, TURN_RECORDS, seg.from));
            while it.valid() {
                let (Some(k), Some(v)) = (it.key(), it.value()) else {
                    break;
                };
                match parse_event_key(k) {
                    Some((_, TURN_RECORDS, seq)) if seq <= last => {
                        out.push(json::parse(&String::from_utf8_lossy(v))?)
                    }
                    _ => break,
                }
                it.next();
            }
            it.status().map_err(Error::storage(format!(
                "reading turns of \"{}\"",
                meta.id_lossy()
            )))?;
        }
        Ok(out)
    }

    /// Every unit's state after the session's last event: each from its nearest checkpoint, the
    /// events after the oldest of them folded once.
    pub(crate) fn projection_set(&self, meta: &SessionMeta) -> Result<ProjectionSet> {
        match meta.events.checked_sub(1) {
            Some(at) => self.projection_set_at(meta, at),
            None => Ok(ProjectionSet::for_model(
                meta.seed_length()?,
                model_of(meta),
            )),
        }
    }

    /// Every unit's state after event `at`.
    pub(crate) fn projection_set_at(&self, meta: &SessionMeta, at: u64) -> Result<ProjectionSet> {
        let mut set = ProjectionSet::for_model(meta.seed_length()?, model_of(meta));
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
    /// to fold from.
    fn nearest_checkpoint(
        &self,
        meta: &SessionMeta,
        index: usize,
        at: u64,
    ) -> Result<Option<(Value, u64)>> {
        let unit = unit_at(model_of(meta), index);
        let version = unit.version;
        let section = unit_section(index);
        let mut it = self
            .db
            .raw_iterator_cf_opt(self.cf(CF_CHECKPOINTS)?, self.bounded(meta.number));
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
            if let Some((&ver, text)) = v.split_first() {
                if ver == version {
                    let state = json::parse(&String::from_utf8_lossy(text))?;
                    return Ok(Some((state, seq + 1)));
                }
            }
            it.prev();
        }
        it.status().map_err(Error::storage(format!(
            "reading checkpoints of \"{}\"",
            meta.id_lossy()
        )))?;
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
}

/// The folds a session's units apply: its surface model's (V0 for a session without one, whose
/// state queries are refused before any fold).
fn model_of(meta: &SessionMeta) -> SurfaceModel {
    SurfaceModel::for_version(meta.version).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use crate::test_support::{edit_meta, seeded};
    use crate::Error;

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
