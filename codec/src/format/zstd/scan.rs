//! Structural frame scanner: DSH's `scanZstdFrames`, which splits a `.jsonl.zstd` buffer into
//! complete frames without decoding a single block.
//!
//! Invariants kept here:
//! - every returned range starts with the Zstandard magic and ends exactly after the frame's
//!   last block (plus its checksum when the descriptor announces one); ranges are contiguous
//!   from byte 0, so `frames[i].end == frames[i + 1].start`;
//! - end of input inside a frame is never an error: it yields `torn_start` (the frame's first
//!   byte), which is also the offset a repair truncates to;
//! - anything structurally wrong that is *complete* (wrong magic with ≥ 4 bytes present, reserved
//!   descriptor bits, block type 3) is corruption with DSH's exact text and byte offset.
//!
//! Frame layout (RFC 8878 §3.1.1), as walked by [`scan_frames`]:
//!
//! | offset                | size        | field                                                    |
//! |-----------------------|-------------|----------------------------------------------------------|
//! | [`MAGIC_OFFSET`] = 0  | 4           | `Magic_Number` `0xFD2FB528`, little-endian `28 B5 2F FD` |
//! | [`FHD_OFFSET`] = 4    | 1           | `Frame_Header_Descriptor` (bits below)                   |
//! | 5                     | 0 or 1      | `Window_Descriptor`, absent when single-segment          |
//! | …                     | 0, 1, 2, 4  | `Dictionary_ID` (FHD bits 1–0: 0, 1, 2, 4 bytes)         |
//! | …                     | 0, 1, 2, 4, 8 | `Frame_Content_Size` (FHD bits 7–6: 0→ 1 if single-segment else 0; 1→2, 2→4, 3→8) |
//! | header end            | 3 per block | `Block_Header` LE: bit 0 `Last_Block`, bits 2–1 `Block_Type`, bits 23–3 `Block_Size` |
//! | …                     | n           | `Block_Content`: 1 byte for RLE, else `Block_Size` bytes; blocks repeat until `Last_Block` |
//! | frame end − 4         | 0 or 4      | `Content_Checksum` (low 32 bits of XXH64) when FHD bit 2 |
//!
//! `Frame_Header_Descriptor` bits: 7–6 content-size flag, 5 single-segment, 4 unused, 3 reserved
//! (both must be 0: [`FHD_RESERVED_MASK`]), 2 checksum, 1–0 dictionary-id flag. DSH writes
//! `0x04` followed by Window_Descriptor `0x58`.

use std::ops::Range;

use super::corrupt;
use crate::Result;

/// Offset of the 4-byte magic number within a frame.
pub const MAGIC_OFFSET: usize = 0;
/// The Zstandard frame magic number (read little-endian).
pub const MAGIC: u32 = 0xFD2F_B528;
/// Length of the magic number.
pub const MAGIC_LEN: usize = 4;
/// The magic number as the first bytes of a file: how an input announces `.jsonl.zstd`.
pub const MAGIC_BYTES: [u8; MAGIC_LEN] = MAGIC.to_le_bytes();
/// Offset of the Frame_Header_Descriptor byte within a frame.
pub const FHD_OFFSET: usize = MAGIC_OFFSET + MAGIC_LEN;
/// FHD bits that must be zero: bit 4 (unused) and bit 3 (reserved).
pub const FHD_RESERVED_MASK: u8 = 0x18;
/// FHD bit: the frame is single-segment (no Window_Descriptor).
pub const FHD_SINGLE_SEGMENT: u8 = 0x20;
/// FHD bit: a 4-byte content checksum follows the last block.
pub const FHD_CHECKSUM: u8 = 0x04;
/// FHD bits 1–0: dictionary-id field size flag.
pub const FHD_DICT_ID_MASK: u8 = 0x03;
/// FHD bits 7–6 hold the content-size flag; shift right by this much to read it.
pub const FHD_CONTENT_SIZE_SHIFT: u32 = 6;
/// Length of a block header.
pub const BLOCK_HEADER_LEN: usize = 3;
/// Block type 1: RLE, whose content is one byte regardless of `Block_Size`.
pub const BLOCK_TYPE_RLE: u32 = 1;
/// Block type 3: reserved, always corruption.
pub const BLOCK_TYPE_RESERVED: u32 = 3;
/// Length of the content checksum.
pub const CHECKSUM_LEN: usize = 4;

/// Where the complete frames of a buffer lie, and where an interrupted final frame starts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrameScan {
    /// Structurally complete frames, in file order, contiguous from byte 0.
    pub frames: Vec<Range<usize>>,
    /// First byte of an incomplete final frame, when the input ends inside one.
    pub torn_start: Option<usize>,
}

/// Scan the whole buffer (DSH `scanZstdFrames(buffer)`).
pub fn scan_frames(bytes: &[u8]) -> Result<FrameScan> {
    scan_frames_limited(bytes, usize::MAX)
}

/// Scan until `max_frames` complete frames are found (DSH `scanZstdFrames(buffer, maxFrames)`,
/// used by metadata readers that only need frame 0). Reaching the limit reports no torn start,
/// and bytes after the limit are not examined.
pub fn scan_frames_limited(bytes: &[u8], max_frames: usize) -> Result<FrameScan> {
    let mut frames = Vec::new();
    let mut offset = 0;
    while offset < bytes.len() {
        let start = offset;
        match frame_end(bytes, start)? {
            Some(end) => {
                frames.push(start..end);
                offset = end;
                if frames.len() == max_frames {
                    break;
                }
            }
            None => {
                return Ok(FrameScan {
                    frames,
                    torn_start: Some(start),
                })
            }
        }
    }
    Ok(FrameScan {
        frames,
        torn_start: None,
    })
}

/// The end of the frame starting at `start`, `None` when the input ends first.
fn frame_end(bytes: &[u8], start: usize) -> Result<Option<usize>> {
    let Some(magic) = read_le(bytes, start, MAGIC_LEN) else {
        return Ok(None);
    };
    if magic != MAGIC {
        return Err(corrupt(format!("invalid frame magic at byte {start}")));
    }
    let fhd_at = start + FHD_OFFSET;
    let Some(&fhd) = bytes.get(fhd_at) else {
        return Ok(None);
    };
    if fhd & FHD_RESERVED_MASK != 0 {
        return Err(corrupt(format!(
            "reserved frame-header bit at byte {fhd_at}"
        )));
    }
    let mut offset = fhd_at + 1 + header_tail_len(fhd);
    if offset > bytes.len() {
        return Ok(None);
    }
    loop {
        let Some(block_header) = read_le(bytes, offset, BLOCK_HEADER_LEN) else {
            return Ok(None);
        };
        let block_at = offset;
        offset += BLOCK_HEADER_LEN;
        let last = block_header & 1 != 0;
        let block_type = (block_header >> 1) & 0x03;
        let block_size = (block_header >> 3) as usize;
        if block_type == BLOCK_TYPE_RESERVED {
            return Err(corrupt(format!("reserved block type at byte {block_at}")));
        }
        offset += if block_type == BLOCK_TYPE_RLE {
            1
        } else {
            block_size
        };
        if offset > bytes.len() {
            return Ok(None);
        }
        if last {
            break;
        }
    }
    if fhd & FHD_CHECKSUM != 0 {
        offset += CHECKSUM_LEN;
        if offset > bytes.len() {
            return Ok(None);
        }
    }
    Ok(Some(offset))
}

/// Bytes of the frame header after the descriptor: window descriptor, dictionary id, content size.
fn header_tail_len(fhd: u8) -> usize {
    let single_segment = fhd & FHD_SINGLE_SEGMENT != 0;
    let window = usize::from(!single_segment);
    let dictionary = match fhd & FHD_DICT_ID_MASK {
        3 => 4,
        flag => usize::from(flag),
    };
    let content_size = match fhd >> FHD_CONTENT_SIZE_SHIFT {
        0 => usize::from(single_segment),
        flag => 1 << flag,
    };
    window + dictionary + content_size
}

/// The `len`-byte (≤ 4) little-endian integer at `at`, `None` when the input is shorter.
fn read_le(bytes: &[u8], at: usize, len: usize) -> Option<u32> {
    let field = bytes.get(at..at.checked_add(len)?)?;
    Some(
        field
            .iter()
            .rev()
            .fold(0, |acc, &b| (acc << 8) | u32::from(b)),
    )
}

#[cfg(test)]
mod tests;
