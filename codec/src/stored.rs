//! What the engine keeps per stored line, and its on-disk encoding.
//!
//! Layout of one stored line value (all integers big-endian):
//!
//! | offset | size | field                                                        |
//! |--------|------|--------------------------------------------------------------|
//! | 0      | 4    | crc32 of everything after this field                         |
//! | 4      | 4    | `meta_len`: length of the bincode [`LineMeta`] that follows  |
//! | 8      | n    | bincode [`LineMeta`] (standard config)                       |
//! | 8 + n  | rest | the line's exact bytes, without its `\n`                     |
//!
//! The raw bytes come last so export can slice them out without copying; the crc covers the
//! metadata and the bytes, so a flipped bit anywhere is detected before anything is served.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

const CRC_AT: usize = 0;
const META_LEN_AT: usize = 4;
const META_AT: usize = 8;

/// Per-line metadata stored beside the exact bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineMeta {
    /// Logical events this line holds (1, or N for a packed row).
    pub members: u32,
    /// The write batch (zstd frame) this line was written in.
    pub batch: u64,
    /// The record's `type` (event type or row tag).
    pub type_tag: String,
}

/// Encode a stored line.
pub fn encode_line(meta: &LineMeta, bytes: &[u8]) -> Result<Vec<u8>> {
    let meta_bytes = bincode::serde::encode_to_vec(meta, bincode::config::standard())
        .map_err(|e| Error::StoredRecord(format!("line metadata does not encode: {e}")))?;
    let mut out = Vec::with_capacity(META_AT + meta_bytes.len() + bytes.len());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(
        &u32::try_from(meta_bytes.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    out.extend_from_slice(&meta_bytes);
    out.extend_from_slice(bytes);
    let crc = crc32fast::hash(&out[META_LEN_AT..]);
    out[CRC_AT..META_LEN_AT].copy_from_slice(&crc.to_be_bytes());
    Ok(out)
}

/// A decoded view of a stored line value.
#[derive(Debug)]
pub struct StoredLine<'a> {
    /// The metadata.
    pub meta: LineMeta,
    /// The exact line bytes (no `\n`).
    pub bytes: &'a [u8],
}

/// Verify a stored line value and return its exact bytes, without decoding the metadata (the
/// export path: one crc32 pass, no allocation).
pub fn line_bytes(value: &[u8]) -> Result<&[u8]> {
    let meta_end = verified_meta_end(value)?;
    Ok(&value[meta_end..])
}

/// Check the crc32 and the metadata length; return where the line bytes start.
fn verified_meta_end(value: &[u8]) -> Result<usize> {
    if value.len() < META_AT {
        return Err(Error::StoredRecord(format!(
            "stored line is {} bytes, shorter than its 8-byte prefix",
            value.len()
        )));
    }
    let stored_crc = u32::from_be_bytes([value[0], value[1], value[2], value[3]]);
    let actual = crc32fast::hash(&value[META_LEN_AT..]);
    if stored_crc != actual {
        return Err(Error::StoredRecord(format!(
            "crc32 mismatch (stored {stored_crc:08x}, computed {actual:08x})"
        )));
    }
    let meta_len = u32::from_be_bytes([value[4], value[5], value[6], value[7]]) as usize;
    META_AT
        .checked_add(meta_len)
        .filter(|&e| e <= value.len())
        .ok_or_else(|| {
            Error::StoredRecord(format!("metadata length {meta_len} overruns the record"))
        })
}

/// Decode and verify a stored line value.
pub fn decode_line(value: &[u8]) -> Result<StoredLine<'_>> {
    let meta_end = verified_meta_end(value)?;
    let (meta, _) =
        bincode::serde::decode_from_slice(&value[META_AT..meta_end], bincode::config::standard())
            .map_err(|e| Error::StoredRecord(format!("line metadata does not decode: {e}")))?;
    Ok(StoredLine {
        meta,
        bytes: &value[meta_end..],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_bit_flip_is_detected() {
        let meta = LineMeta {
            members: 3,
            batch: 7,
            type_tag: "text-chunks".into(),
        };
        let enc = encode_line(&meta, b"{\"a\":1}").expect("encodes");
        let dec = decode_line(&enc).expect("decodes");
        assert_eq!(dec.meta, meta);
        assert_eq!(dec.bytes, b"{\"a\":1}");
        for i in 0..enc.len() * 8 {
            let mut bad = enc.clone();
            bad[i / 8] ^= 1 << (i % 8);
            assert!(decode_line(&bad).is_err(), "flip of bit {i} went unnoticed");
        }
        for cut in 0..enc.len() {
            assert!(
                decode_line(&enc[..cut]).is_err(),
                "truncation at {cut} went unnoticed"
            );
        }
    }
}
