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

pub use units::{Unit, UNITS};

use crate::json::Value;

/// The state of every unit after some prefix of a log.
#[derive(Clone, Debug, PartialEq)]
pub struct ProjectionSet {
    /// One state per entry of [`UNITS`], in that order.
    pub states: Vec<Value>,
}

impl ProjectionSet {
    /// Every unit's initial state for a session whose header carries `seed_length` (the inbox
    /// fold only reads splices from there on, so a fork does not inherit its parent's queue).
    pub fn new(seed_length: u64) -> Self {
        ProjectionSet {
            states: UNITS.iter().map(|u| u.init(seed_length)).collect(),
        }
    }

    /// Fold one event (seq `seq`) into every unit.
    pub fn apply(&mut self, seq: u64, event: &Value) {
        for (unit, state) in UNITS.iter().zip(&mut self.states) {
            unit.apply(state, seq, event);
        }
    }

    /// The view of unit `key` in this set.
    pub fn view(&self, key: &str) -> Option<Value> {
        let (i, unit) = Self::unit(key)?;
        Some(unit.view(&self.states[i]))
    }

    /// The unit named `key`, with its index.
    pub fn unit(key: &str) -> Option<(usize, &'static Unit)> {
        UNITS.iter().enumerate().find(|(_, u)| u.key == key)
    }
}

/// Fold `events` (seqs from 0) into unit `key` naively: the reference the engine is checked
/// against.
pub fn fold(key: &str, seed_length: u64, events: &[Value]) -> Option<Value> {
    let (_, unit) = ProjectionSet::unit(key)?;
    let mut state = unit.init(seed_length);
    for (seq, e) in events.iter().enumerate() {
        unit.apply(&mut state, seq as u64, e);
    }
    Some(unit.view(&state))
}
