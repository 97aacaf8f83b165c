//! Value framing and encodings shared by every writer and reader:
//!
//! | value                                   | framing                                        |
//! |-----------------------------------------|------------------------------------------------|
//! | tail chunks, frames, generation chunks  | [`checked_value`]: crc32 (BE) ‖ bytes          |
//! | blocks of lines                         | `codec::stored` (its own crc)                  |
//! | surface records (OP, SNAP, REPL)        | bincode ([`encode`], [`decode`]); SNAP is a [`Snapshot`] |
//! | checkpoint points                       | [`PointRecord`]: per unit, length (u32 BE) ‖ its checkpoint |
//! | one unit's checkpoint                   | [`write_whole_checkpoint`] or [`write_checkpoint_reference`] |
//! | session metadata                        | see `meta.rs`                                  |
//!
//! Invariant: a value that fails its check is never returned as data ([`checked_bytes`] is
//! `None`, [`decode`] an error).

use serde::{Deserialize, Serialize};
use sessionlog_codec::json::{self, Value};
use sessionlog_codec::rules::projection::{Unit, UNITS};

use crate::error::{Error, Result};
use crate::layout::keys::{unit_section, CHECKPOINT_POINTS};

/// The fold state after one event, without history (a SNAP record).
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
    pub(crate) fn of(fold: &sessionlog_codec::rules::surface::SurfaceFold) -> Self {
        Snapshot {
            next_seq: fold.next_seq(),
            nodes: fold.nodes().to_vec(),
            replace_generation: fold.replace_generation(),
        }
    }
}

/// bincode with the standard config.
pub(crate) fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>> {
    bincode::serde::encode_to_vec(v, bincode::config::standard()).map_err(|e| Error::Corrupt {
        id: String::new(),
        detail: format!("surface record does not encode: {e}"),
    })
}

/// Decode a surface record of session `id`.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(id: &str, bytes: &[u8]) -> Result<T> {
    bincode::serde::decode_from_slice(bytes, bincode::config::standard())
        .map(|(v, _)| v)
        .map_err(|e| Error::Corrupt {
            id: id.into(),
            detail: format!("surface record does not decode: {e}"),
        })
}

/// A checksummed value: crc32 (BE) then the bytes. Used for tail chunks and frames.
pub(crate) fn checked_value(bytes: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + bytes.len());
    v.extend_from_slice(&crc32fast::hash(bytes).to_be_bytes());
    v.extend_from_slice(bytes);
    v
}

/// The bytes of a checksummed value, if its crc32 matches.
pub(crate) fn checked_bytes(v: &[u8]) -> Option<&[u8]> {
    let (crc, bytes) = v.split_at_checked(4)?;
    (u32::from_be_bytes(crc.try_into().ok()?) == crc32fast::hash(bytes)).then_some(bytes)
}

/// Append a whole checkpoint of `unit`: its version, then its state's `JSON.stringify`.
pub(crate) fn write_whole_checkpoint(out: &mut Vec<u8>, unit: &Unit, state: &Value) {
    out.push(unit.version);
    out.extend_from_slice(json::stringify(state).as_bytes());
}

/// First byte of a checkpoint reference (no unit version is 0xFF).
pub(crate) const CHECKPOINT_REFERENCE: u8 = 0xFF;

/// Append a checkpoint of a unit no event touched since its whole checkpoint at `seq`: the
/// state is that one's. `[0xFF][unit version][seq, 8 bytes big-endian]` (in the per-unit
/// layout, a reader that predates references skipped it as a foreign version).
pub(crate) fn write_checkpoint_reference(out: &mut Vec<u8>, unit: &Unit, seq: u64) {
    out.push(CHECKPOINT_REFERENCE);
    out.push(unit.version);
    out.extend_from_slice(&seq.to_be_bytes());
}

/// The checkpoints of every unit at one checkpoint point, in unit order: each as its length
/// (u32 BE) then its whole or reference bytes, written in place. A reader takes one unit's
/// entry by skipping the lengths before it, parsing nothing else.
#[derive(Default)]
pub(crate) struct PointRecord {
    bytes: Vec<u8>,
}

impl PointRecord {
    /// Append the next unit's whole checkpoint.
    pub(crate) fn push_whole(&mut self, unit: &Unit, state: &Value) -> Result<()> {
        self.push_with(|out| write_whole_checkpoint(out, unit, state))
    }

    /// Append the next unit's reference to its whole checkpoint at `seq`.
    pub(crate) fn push_reference(&mut self, unit: &Unit, seq: u64) -> Result<()> {
        self.push_with(|out| write_checkpoint_reference(out, unit, seq))
    }

    /// Append an entry `write` fills, then its length in front of it.
    fn push_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> Result<()> {
        let at = self.bytes.len();
        self.bytes.extend_from_slice(&[0; 4]);
        write(&mut self.bytes);
        let len = self.bytes.len() - at - 4;
        let len = u32::try_from(len).map_err(|_| {
            Error::Internal(format!(
                "a checkpoint of {len} bytes is past the 4 GiB a point record holds"
            ))
        })?;
        self.bytes[at..at + 4].copy_from_slice(&len.to_be_bytes());
        Ok(())
    }

    /// The stored value.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

/// Each unit's checkpoint bytes in a stored point record, in unit order; an entry running past
/// the end is `Err` (damage).
pub(crate) fn point_entries(value: &[u8]) -> impl Iterator<Item = std::result::Result<&[u8], ()>> {
    let mut rest = value;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let entry = rest
            .split_first_chunk::<4>()
            .and_then(|(len, tail)| tail.split_at_checked(u32::from_be_bytes(*len) as usize));
        Some(match entry {
            Some((entry, tail)) => {
                rest = tail;
                Ok(entry)
            }
            None => {
                rest = &[];
                Err(())
            }
        })
    })
}

/// Unit `index`'s checkpoint in a stored point record: `Ok(None)` when the record holds fewer
/// units (written before the unit existed), `Err` when it is damaged.
pub(crate) fn point_entry(value: &[u8], index: usize) -> std::result::Result<Option<&[u8]>, ()> {
    let mut entries = point_entries(value);
    for _ in 0..index {
        if entries.next().transpose()?.is_none() {
            return Ok(None);
        }
    }
    entries.next().transpose()
}

/// What a point record whose entries run past its end is reported as.
pub(crate) fn truncated_point(seq: u64) -> String {
    format!("the checkpoint point record at seq {seq} is truncated")
}

/// Where a unit's checkpoints are stored: in point records (every unit's in one value), or,
/// in stores written before them, one key per unit. The one place that maps a `checkpoints`
/// key's section and value to units' checkpoints, for the reader and `verify`.
#[derive(Clone, Copy)]
pub(crate) enum CheckpointLayout {
    Points,
    PerUnit,
}

impl CheckpointLayout {
    /// The layout of a `checkpoints` key's section, if it holds unit checkpoints (closed-turn
    /// records do not).
    pub(crate) fn of_section(section: u8) -> Option<Self> {
        if section == CHECKPOINT_POINTS {
            Some(CheckpointLayout::Points)
        } else {
            (usize::from(section) < UNITS.len()).then_some(CheckpointLayout::PerUnit)
        }
    }

    /// The key section holding unit `index`'s checkpoints.
    pub(crate) fn section(self, index: usize) -> u8 {
        match self {
            CheckpointLayout::Points => CHECKPOINT_POINTS,
            CheckpointLayout::PerUnit => unit_section(index),
        }
    }

    /// Unit `index`'s checkpoint in a stored value of this layout: `Ok(None)` when a point
    /// record predates the unit, `Err` when the record is damaged.
    pub(crate) fn entry(
        self,
        value: &[u8],
        index: usize,
    ) -> std::result::Result<Option<StoredCheckpoint<'_>>, ()> {
        let bytes = match self {
            CheckpointLayout::Points => point_entry(value, index)?,
            CheckpointLayout::PerUnit => Some(value),
        };
        Ok(bytes.and_then(decode_checkpoint))
    }

    /// Every unit checkpoint a stored value of `section` (of this layout) holds: its unit
    /// index and bytes, or `Err` where a point record is damaged.
    pub(crate) fn entries(
        self,
        section: u8,
        value: &[u8],
    ) -> Vec<(usize, std::result::Result<&[u8], ()>)> {
        match self {
            CheckpointLayout::Points => point_entries(value).enumerate().collect(),
            CheckpointLayout::PerUnit => vec![(usize::from(section), Ok(value))],
        }
    }
}

/// A stored checkpoint value, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StoredCheckpoint<'a> {
    /// A unit's state: its version and `JSON.stringify` text.
    Whole { version: u8, text: &'a [u8] },
    /// The state of the unit's whole checkpoint at `seq`, of `version`.
    Reference { version: u8, seq: u64 },
}

/// Decode a checkpoint value; `None` when it is empty (never written: damage).
pub(crate) fn decode_checkpoint(value: &[u8]) -> Option<StoredCheckpoint<'_>> {
    match value {
        [CHECKPOINT_REFERENCE, version, seq @ ..] if seq.len() == 8 => {
            Some(StoredCheckpoint::Reference {
                version: *version,
                seq: u64::from_be_bytes(seq.try_into().ok()?),
            })
        }
        [version, text @ ..] => Some(StoredCheckpoint::Whole {
            version: *version,
            text,
        }),
        [] => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{point_entries, point_entry, PointRecord};
    use sessionlog_codec::json::{Object, Value};
    use sessionlog_codec::rules::projection::ProjectionSet;

    /// A point record gives back each unit's entry in order; a record with fewer units has no
    /// entry for the later ones; one whose entry runs past its end is damage, for that entry and
    /// every one after it.
    #[test]
    fn point_records_hold_each_units_entry_in_order() {
        let (_, unit) = ProjectionSet::unit("title").expect("unit");
        let mut record = PointRecord::default();
        record
            .push_whole(unit, &Value::Object(Object::new()))
            .expect("whole");
        record.push_with(|_| {}).expect("empty");
        record.push_reference(unit, 5).expect("reference");
        let bytes = record.into_bytes();
        assert_eq!(point_entry(&bytes, 0), Ok(Some(&b"\x01{}"[..])));
        assert_eq!(point_entry(&bytes, 1), Ok(Some(&b""[..])));
        assert_eq!(
            point_entry(&bytes, 2),
            Ok(Some(&b"\xff\x01\0\0\0\0\0\0\0\x05"[..]))
        );
        assert_eq!(point_entry(&bytes, 3), Ok(None));
        let truncated = &bytes[..bytes.len() - 1];
        assert_eq!(point_entry(truncated, 1), Ok(Some(&b""[..])));
        assert_eq!(point_entry(truncated, 2), Err(()));
        assert_eq!(point_entry(&bytes[..2], 0), Err(()));
        assert_eq!(point_entry(&bytes[..2], 3), Err(()));
        let read: Vec<_> = point_entries(truncated).collect();
        assert_eq!(read.len(), 3);
        assert_eq!(read[2], Err(()));
    }
}
