//! What the engine keeps of committed lines: blocks of consecutive lines of one write batch.
//!
//! A block's text is exactly the file's bytes for those lines, each with its `\n`, so export
//! copies blocks without touching lines. Grouping lines keeps the number of stored keys (and so
//! per-key costs on import, append and scan) low: an appended DSH batch is one block; an
//! imported body is cut into blocks of bounded size. Layout of a block value (integers
//! big-endian):
//!
//! | offset | size | field                                                        |
//! |--------|------|--------------------------------------------------------------|
//! | 0      | 4    | crc32 of everything after this field                         |
//! | 4      | 4    | `meta_len`: length of the bincode [`BlockMeta`] that follows |
//! | 8      | n    | bincode [`BlockMeta`] (standard config)                      |
//! | 8 + n  | rest | the lines' exact bytes, each followed by `\n`                |
//!
//! Invariants: `members` has one entry per line; a line holds no `\n` (lines are split on it);
//! the crc covers metadata and text, so a flipped bit anywhere is detected before anything is
//! served.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

const CRC_AT: usize = 0;
const META_LEN_AT: usize = 4;
const META_AT: usize = 8;
/// The longest bincode varint (standard config) of a `u64`.
const MAX_VARINT_BYTES: usize = 9;

/// Per-block metadata stored before the text.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockMeta {
    /// The write batch (zstd frame) these lines were written in.
    pub batch: u64,
    /// Logical events per line (1, or N for a packed row), in line order.
    pub members: Vec<u32>,
}

/// Encode a block from its metadata and text (`\n`-terminated lines).
///
/// One allocation: the metadata is encoded in place, into room sized for it (a varint per
/// member is at most [`MAX_VARINT_BYTES`]).
pub fn encode_block(meta: &BlockMeta, text: &[u8]) -> Result<Vec<u8>> {
    let meta_room = MAX_VARINT_BYTES * (2 + meta.members.len());
    let mut out = Vec::with_capacity(META_AT + meta_room + text.len());
    out.extend_from_slice(&[0; META_AT]);
    bincode::serde::encode_into_std_write(meta, &mut out, bincode::config::standard())
        .map_err(|e| Error::StoredRecord(format!("block metadata does not encode: {e}")))?;
    let meta_len = u32::try_from(out.len() - META_AT)
        .map_err(|_| Error::StoredRecord("block metadata exceeds 4 GiB".into()))?;
    out[META_LEN_AT..META_AT].copy_from_slice(&meta_len.to_be_bytes());
    out.extend_from_slice(text);
    let crc = crc32fast::hash(&out[META_LEN_AT..]);
    out[CRC_AT..META_LEN_AT].copy_from_slice(&crc.to_be_bytes());
    Ok(out)
}

/// A decoded view of a stored block.
#[derive(Debug)]
pub struct StoredBlock<'a> {
    /// The metadata.
    pub meta: BlockMeta,
    /// The lines' exact bytes, each with its `\n`.
    pub text: &'a [u8],
}

impl<'a> StoredBlock<'a> {
    /// The lines (without `\n`) with their member counts. A block whose line count disagrees with
    /// its metadata yields what it has; [`decode_block`] has already refused such a block.
    pub fn lines(&self) -> impl Iterator<Item = (&'a [u8], u32)> + '_ {
        let text: &'a [u8] = self.text;
        text.split(|&b| b == b'\n')
            .zip(self.meta.members.iter().copied())
    }
}

/// The lines of a block's text, without their `\n`.
pub fn split_lines(text: &[u8]) -> impl Iterator<Item = &[u8]> + '_ {
    let mut start = 0;
    memchr::memchr_iter(b'\n', text).map(move |end| {
        let line = &text[start..end];
        start = end + 1;
        line
    })
}

/// Verify a block and return its text, without decoding the metadata (the export path: one
/// crc32 pass, no allocation).
pub fn block_text(value: &[u8]) -> Result<&[u8]> {
    Ok(&value[verified_meta_end(value)?..])
}

/// Decode and verify a stored block.
pub fn decode_block(value: &[u8]) -> Result<StoredBlock<'_>> {
    let meta_end = verified_meta_end(value)?;
    let (meta, _): (BlockMeta, usize) =
        bincode::serde::decode_from_slice(&value[META_AT..meta_end], bincode::config::standard())
            .map_err(|e| Error::StoredRecord(format!("block metadata does not decode: {e}")))?;
    let text = &value[meta_end..];
    let lines = memchr::memchr_iter(b'\n', text).count();
    if lines != meta.members.len() || text.last().is_some_and(|&b| b != b'\n') {
        return Err(Error::StoredRecord(format!(
            "block holds {lines} lines but its metadata lists {}",
            meta.members.len()
        )));
    }
    Ok(StoredBlock { meta, text })
}

/// Check the crc32 and the metadata length; return where the text starts.
fn verified_meta_end(value: &[u8]) -> Result<usize> {
    if value.len() < META_AT {
        return Err(Error::StoredRecord(format!(
            "stored block is {} bytes, shorter than its 8-byte prefix",
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
            Error::StoredRecord(format!("metadata length {meta_len} overruns the block"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_bit_flip_is_detected() {
        let meta = BlockMeta {
            batch: 7,
            members: vec![1, 3],
        };
        let text = b"{\"a\":1}\n{\"b\":2}\n";
        let enc = encode_block(&meta, text).expect("encodes");
        let dec = decode_block(&enc).expect("decodes");
        assert_eq!(dec.meta, meta);
        assert_eq!(dec.text, text);
        assert_eq!(
            dec.lines().collect::<Vec<_>>(),
            [(&b"{\"a\":1}"[..], 1), (&b"{\"b\":2}"[..], 3)]
        );
        assert_eq!(block_text(&enc).expect("text"), text);
        for i in 0..enc.len() * 8 {
            let mut bad = enc.clone();
            bad[i / 8] ^= 1 << (i % 8);
            assert!(
                decode_block(&bad).is_err(),
                "flip of bit {i} went unnoticed"
            );
        }
        for cut in 0..enc.len() {
            assert!(
                decode_block(&enc[..cut]).is_err(),
                "truncation at {cut} went unnoticed"
            );
        }
    }

    proptest::proptest! {
        /// The layout is the one stores were written with (the metadata's bincode, then the
        /// text, under one crc), and the room sized for the metadata always holds it: the
        /// block is encoded without regrowing.
        #[test]
        fn blocks_keep_their_layout_in_one_allocation(
            batch in proptest::prelude::any::<u64>(),
            members in proptest::collection::vec(proptest::prelude::any::<u32>(), 0..300),
            text in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
        ) {
            let meta = BlockMeta { batch, members };
            let enc = encode_block(&meta, &text).expect("encodes");
            let meta_bytes = bincode::serde::encode_to_vec(&meta, bincode::config::standard())
                .expect("encodes");
            let mut body = (meta_bytes.len() as u32).to_be_bytes().to_vec();
            body.extend_from_slice(&meta_bytes);
            body.extend_from_slice(&text);
            proptest::prop_assert_eq!(&enc[..4], &crc32fast::hash(&body).to_be_bytes()[..]);
            proptest::prop_assert_eq!(&enc[4..], &body[..]);
            let room = META_AT + MAX_VARINT_BYTES * (2 + meta.members.len()) + text.len();
            proptest::prop_assert!(enc.capacity() <= room, "regrown: {} > {room}", enc.capacity());
        }
    }

    #[test]
    fn line_count_must_match_the_metadata() {
        let enc = encode_block(
            &BlockMeta {
                batch: 1,
                members: vec![1],
            },
            b"a\nb\n",
        )
        .expect("encodes");
        assert!(decode_block(&enc).is_err());
    }
}
