//! Projection units: pure folds over a session's events whose state at any seq the engine
//! checkpoints and serves (`sessionlog state ID UNIT --at N`).
//!
//! Each unit is DSH's fold of the same name where DSH has one (`title`, `todos`, `tokenUsage`,
//! `sessionListMetadata` as `activity`, the request-header fold, `request/context`, the inbox
//! splice fold, `goal`), plus `turns`, a turn list the engine adds. States are JSON values, so a
//! checkpoint is the state's `JSON.stringify` text behind the unit's version: a version change
//! makes old checkpoints unreadable by construction instead of misread.

mod goal;
mod units;

pub use units::{Unit, UNITS, V4_OVERRIDES};

use std::sync::OnceLock;

use crate::format::event::event_type;
use crate::json::by_length::ByLength;
use crate::json::Value;
use crate::rules::surface::SurfaceModel;

/// Unit `index` of [`UNITS`] as `model` folds it (V4 replaces the units whose events it
/// reshaped, see [`V4_OVERRIDES`]).
pub fn unit_at(model: SurfaceModel, index: usize) -> &'static Unit {
    let unit = &UNITS[index];
    match model {
        SurfaceModel::V0 => unit,
        SurfaceModel::V4 => V4_OVERRIDES
            .iter()
            .find(|o| o.key == unit.key)
            .unwrap_or(unit),
    }
}

/// The units (with their indexes, ascending) whose folds `model` runs on an event of type `ty`:
/// one lookup per event in a table built from every unit's [`Unit::touches`], instead of a test
/// of each unit's list (a [`ByLength`] table: `ty` is compared with the types of its length only).
fn units_touched_by(model: SurfaceModel, ty: &str) -> &'static [(usize, &'static Unit)] {
    type Table = ByLength<Vec<(usize, &'static Unit)>>;
    fn table(model: SurfaceModel) -> Table {
        let mut table = Table::new();
        for i in 0..UNITS.len() {
            let unit = unit_at(model, i);
            for &ty in unit.touches {
                table.entry(ty).push((i, unit));
            }
        }
        table
    }
    static TABLES: OnceLock<[Table; 2]> = OnceLock::new();
    let [v0, v4] = TABLES.get_or_init(|| [table(SurfaceModel::V0), table(SurfaceModel::V4)]);
    let table = match model {
        SurfaceModel::V0 => v0,
        SurfaceModel::V4 => v4,
    };
    table
        .get(ty.as_bytes())
        .map_or(&[], |(_, units)| units.as_slice())
}

/// The unit named `key` under `model`, with its index (the same for every model).
pub fn unit_in(model: SurfaceModel, key: &str) -> Option<(usize, &'static Unit)> {
    let index = UNITS.iter().position(|u| u.key == key)?;
    Some((index, unit_at(model, index)))
}

/// The state of every unit after some prefix of a log.
#[derive(Clone, Debug, PartialEq)]
pub struct ProjectionSet {
    /// One state per entry of [`UNITS`], in that order.
    pub states: Vec<Value>,
    /// Whose folds the units apply.
    pub model: SurfaceModel,
}

impl ProjectionSet {
    /// Every unit's initial state for a V0 session whose header carries `seed_length` (the
    /// inbox fold only reads splices from there on, so a fork does not inherit its parent's
    /// queue).
    pub fn new(seed_length: u64) -> Self {
        Self::for_model(seed_length, SurfaceModel::V0)
    }

    /// [`ProjectionSet::new`] under `model`'s folds.
    pub fn for_model(seed_length: u64, model: SurfaceModel) -> Self {
        ProjectionSet {
            states: (0..UNITS.len())
                .map(|i| unit_at(model, i).init(seed_length))
                .collect(),
            model,
        }
    }

    /// Fold one event (seq `seq`) into every unit whose fold reads its type (the others'
    /// states stay as they are: see [`Unit::touches`]).
    pub fn apply(&mut self, seq: u64, event: &Value) {
        self.apply_noting(seq, event, |_| {});
    }

    /// [`ProjectionSet::apply`], calling `touched` with the index of every unit it folded.
    pub fn apply_noting(&mut self, seq: u64, event: &Value, mut touched: impl FnMut(usize)) {
        for &(i, unit) in units_touched_by(self.model, event_type(event)) {
            if let Some(state) = self.states.get_mut(i) {
                unit.apply(state, seq, event);
                touched(i);
            }
        }
    }

    /// The view of unit `key` in this set.
    pub fn view(&self, key: &str) -> Option<Value> {
        let (i, unit) = unit_in(self.model, key)?;
        Some(unit.view(&self.states[i]))
    }

    /// The V0 unit named `key`, with its index.
    pub fn unit(key: &str) -> Option<(usize, &'static Unit)> {
        unit_in(SurfaceModel::V0, key)
    }
}

/// Fold `events` (seqs from 0) into V0 unit `key` naively: the reference the engine is checked
/// against.
pub fn fold(key: &str, seed_length: u64, events: &[Value]) -> Option<Value> {
    fold_in(SurfaceModel::V0, key, seed_length, events)
}

/// [`fold`] under `model`'s folds.
pub fn fold_in(
    model: SurfaceModel,
    key: &str,
    seed_length: u64,
    events: &[Value],
) -> Option<Value> {
    let (_, unit) = unit_in(model, key)?;
    let mut state = unit.init(seed_length);
    for (seq, e) in events.iter().enumerate() {
        unit.apply(&mut state, seq as u64, e);
    }
    Some(unit.view(&state))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The per-type table names exactly the units whose `touches` list the type, in index order,
    /// under each model (and none for a type no unit reads).
    #[test]
    fn the_touch_table_is_every_units_touches() {
        for model in [SurfaceModel::V0, SurfaceModel::V4] {
            let mut types: Vec<&str> = (0..UNITS.len())
                .flat_map(|i| unit_at(model, i).touches.iter().copied())
                .collect();
            types.push("no/such-type");
            for ty in types {
                let expected: Vec<(usize, &str)> = (0..UNITS.len())
                    .map(|i| (i, unit_at(model, i)))
                    .filter(|(_, u)| u.touches(ty))
                    .map(|(i, u)| (i, u.key))
                    .collect();
                let table: Vec<(usize, &str)> = units_touched_by(model, ty)
                    .iter()
                    .map(|&(i, u)| (i, u.key))
                    .collect();
                assert_eq!(table, expected, "{model:?} {ty}");
            }
        }
    }
}
