//! The surface index (`surface` CF): what the model saw at any seq, without replaying the log.
//!
//! Written in the same WriteBatch as the events it derives from (by import and by append), so it
//! never runs ahead of or behind the log. Keys (big-endian):
//!
//! | key                          | value (bincode)                                          |
//! |------------------------------|----------------------------------------------------------|
//! | `number ‖ 0x00 ‖ seq`        | OP: the [`SurfaceChange`] of surface event `seq`         |
//! | `number ‖ 0x01 ‖ seq`        | SNAP: [`Snapshot`] of the fold after event `seq`         |
//! | `number ‖ 0x02 ‖ seq`        | REPL: the [`Replacement`] made by event `seq`            |
//! | `number ‖ 0x03 ‖ seq`        | PROJ: what message-projection event `seq` made (JSON; see `projections.rs`) |
//!
//! Snapshot policy: after every replacement, and after an append run of
//! `max(SNAPSHOT_MIN_OPS, nodes / 4)` ops, so the ops replayed on top of a snapshot never exceed
//! a quarter of the nodes (a query's cost stays proportional to its answer) and snapshots take
//! space linear in the log.
//!
//! [`SurfaceChange`]: sessionlog_codec::surface::SurfaceChange
//! [`Replacement`]: sessionlog_codec::surface::Replacement

mod query;
mod writer;

pub(crate) use query::resolve_at;
pub use query::SurfaceView;
pub(crate) use writer::{SurfaceBuilder, SurfaceIndexer};

use serde::{Deserialize, Serialize};

/// Section byte of per-event ops.
pub(crate) const OP: u8 = 0;
/// Section byte of snapshots.
pub(crate) const SNAP: u8 = 1;
/// Section byte of replacements.
pub(crate) const REPL: u8 = 2;

/// Fewest append ops between two snapshots.
pub(crate) const SNAPSHOT_MIN_OPS: u64 = 256;

/// The fold state after one event, without history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Snapshot {
    /// Seq of the next event.
    pub(crate) next_seq: u64,
    /// Current surface nodes in model order.
    pub(crate) nodes: Vec<u64>,
    /// Replacements so far.
    pub(crate) replace_generation: u64,
}

impl Snapshot {
    /// `fold`'s state, to resume folding at its next seq.
    pub(crate) fn of(fold: &sessionlog_codec::surface::SurfaceFold) -> Self {
        Snapshot {
            next_seq: fold.next_seq(),
            nodes: fold.nodes().to_vec(),
            replace_generation: fold.replace_generation(),
        }
    }
}

/// bincode with the standard config.
pub(crate) fn encode<T: Serialize>(v: &T) -> crate::Result<Vec<u8>> {
    bincode::serde::encode_to_vec(v, bincode::config::standard()).map_err(|e| {
        crate::Error::Corrupt {
            id: String::new(),
            detail: format!("surface record does not encode: {e}"),
        }
    })
}

/// Decode a surface record of session `id`.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(id: &str, bytes: &[u8]) -> crate::Result<T> {
    bincode::serde::decode_from_slice(bytes, bincode::config::standard())
        .map(|(v, _)| v)
        .map_err(|e| crate::Error::Corrupt {
            id: id.into(),
            detail: format!("surface record does not decode: {e}"),
        })
}
