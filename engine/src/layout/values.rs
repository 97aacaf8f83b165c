//! Value framing and encodings shared by every writer and reader:
//!
//! | value                                   | framing                                        |
//! |-----------------------------------------|------------------------------------------------|
//! | tail chunks, frames, generation chunks  | [`checked_value`]: crc32 (BE) ‖ bytes          |
//! | blocks of lines                         | `codec::stored` (its own crc)                  |
//! | surface records (OP, SNAP, REPL)        | bincode ([`encode`], [`decode`]); SNAP is a [`Snapshot`] |
//! | checkpoint points                       | [`PointRecord`]: per unit, length (u32 BE) ‖ its checkpoint |
//! | one unit's checkpoint                   | [`checkpoint_value`] or [`checkpoint_reference`] |
//! | session metadata                        | see `meta.rs`                                  |
//!
//! Invariant: a value that fails its check is never returned as data ([`checked_bytes`] is
//! `None`, [`decode`] an error).

use serde::{Deserialize, Serialize};
use sessionlog_codec::json::{self, Value};

use crate::error::{Error, Result};

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
    pub(crate) fn of(fold: &sessionlog_codec::surface::SurfaceFold) -> Self {
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

/// A checkpoint value: the unit's version, then its state's `JSON.stringify`.
pub(crate) fn checkpoint_value(
    unit: &sessionlog_codec::projection::Unit,
    state: &Value,
) -> Vec<u8> {
    let mut value = vec![unit.version];
    value.extend_from_slice(json::stringify(state).as_bytes());
    value
}

/// First byte of a checkpoint reference (no unit version is 0xFF).
pub(crate) const CHECKPOINT_REFERENCE: u8 = 0xFF;

/// A checkpoint of a unit no event touched since its checkpoint at `seq`: the state is that
/// one's. `[0xFF][unit version][seq, 8 bytes big-endian]`, so a reader that knows no
/// references skips it as a foreign version and folds from an earlier checkpoint.
pub(crate) fn checkpoint_reference(unit: &sessionlog_codec::projection::Unit, seq: u64) -> Vec<u8> {
    let mut value = Vec::with_capacity(10);
    value.push(CHECKPOINT_REFERENCE);
    value.push(unit.version);
    value.extend_from_slice(&seq.to_be_bytes());
    value
}

/// The checkpoints of every unit at one checkpoint point, in unit order: each as its length
/// (u32 BE) then its [`checkpoint_value`] or [`checkpoint_reference`] bytes. A reader takes one
/// unit's entry by skipping the lengths before it, parsing nothing else.
#[derive(Default)]
pub(crate) struct PointRecord {
    bytes: Vec<u8>,
}

impl PointRecord {
    /// Append the next unit's checkpoint.
    pub(crate) fn push(&mut self, entry: &[u8]) -> Result<()> {
        let len = u32::try_from(entry.len()).map_err(|_| {
            Error::Internal(format!(
                "a checkpoint of {} bytes is past the 4 GiB a point record holds",
                entry.len()
            ))
        })?;
        self.bytes.extend_from_slice(&len.to_be_bytes());
        self.bytes.extend_from_slice(entry);
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

    /// A point record gives back each unit's entry in order; a record with fewer units has no
    /// entry for the later ones; one whose entry runs past its end is damage, for that entry and
    /// every one after it.
    #[test]
    fn point_records_hold_each_units_entry_in_order() {
        let mut record = PointRecord::default();
        for entry in [&b"\x01{}"[..], b"", b"\xff\x01\0\0\0\0\0\0\0\x05"] {
            record.push(entry).expect("push");
        }
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
