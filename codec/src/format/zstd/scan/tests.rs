//! The scanner on crafted byte sequences, one rule at a time.
#![expect(
    clippy::single_range_in_vec_init,
    reason = "a frame list holding one range is what these tests compare against"
)]

use super::*;
use crate::format::zstd::compress_frame;

const MAGIC_BYTES: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// A frame with the given descriptor, header tail, blocks `(type, size, last)` and checksum.
fn craft(fhd: u8, header_tail: &[u8], blocks: &[(u32, u32, bool)]) -> Vec<u8> {
    let mut out = MAGIC_BYTES.to_vec();
    out.push(fhd);
    out.extend_from_slice(header_tail);
    for &(block_type, size, last) in blocks {
        let header = (size << 3) | (block_type << 1) | u32::from(last);
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        let payload = if block_type == BLOCK_TYPE_RLE {
            1
        } else {
            size as usize
        };
        out.extend(std::iter::repeat_n(b'z', payload));
    }
    if fhd & FHD_CHECKSUM != 0 {
        out.extend_from_slice(&[1, 2, 3, 4]);
    }
    out
}

fn message(result: Result<FrameScan>) -> String {
    match result {
        Ok(scan) => format!("ok {scan:?}"),
        Err(e) => e.to_string(),
    }
}

fn torn_at(start: usize, frames: Vec<Range<usize>>) -> FrameScan {
    FrameScan {
        frames,
        torn_start: Some(start),
    }
}

#[test]
fn empty_input_has_no_frames_and_no_torn_start() -> Result<()> {
    assert_eq!(scan_frames(b"")?, FrameScan::default());
    Ok(())
}

#[test]
fn dsh_frames_scan_back_to_back() -> Result<()> {
    let a = compress_frame(b"{\"type\":\"session\"}\n")?;
    let b = compress_frame(&b"{\"seq\":0}\n".repeat(20_000))?;
    let mut bytes = a.clone();
    bytes.extend_from_slice(&b);
    let scan = scan_frames(&bytes)?;
    assert_eq!(scan.frames, [0..a.len(), a.len()..bytes.len()]);
    assert_eq!(scan.torn_start, None);
    Ok(())
}

#[test]
fn every_truncation_of_the_second_frame_is_torn_at_its_start() -> Result<()> {
    let a = compress_frame(b"h\n")?;
    let b = compress_frame(&b"line\n".repeat(100))?;
    let mut bytes = a.clone();
    bytes.extend_from_slice(&b);
    for cut in a.len() + 1..bytes.len() {
        let scan = scan_frames(&bytes[..cut])?;
        assert_eq!(scan, torn_at(a.len(), vec![0..a.len()]), "cut {cut}");
    }
    Ok(())
}

#[test]
fn fewer_than_four_bytes_are_torn_even_if_not_magic() -> Result<()> {
    assert_eq!(scan_frames(&[0x28, 0xB5])?, torn_at(0, vec![]));
    assert_eq!(scan_frames(&[0, 0, 0])?, torn_at(0, vec![]));
    Ok(())
}

#[test]
fn four_bytes_of_wrong_magic_are_corrupt() {
    let mut bytes = craft(0x04, &[0x58], &[(0, 2, true)]);
    let frame_len = bytes.len();
    bytes.extend_from_slice(&[0, 0, 0, 0]);
    assert_eq!(
        message(scan_frames(&bytes)),
        format!("corrupt Zstandard session log: invalid frame magic at byte {frame_len}")
    );
}

#[test]
fn a_skippable_frame_is_corrupt() {
    let skippable = [0x50, 0x2A, 0x4D, 0x18, 0, 0, 0, 0];
    assert_eq!(
        message(scan_frames(&skippable)),
        "corrupt Zstandard session log: invalid frame magic at byte 0"
    );
}

#[test]
fn missing_descriptor_is_torn() -> Result<()> {
    assert_eq!(scan_frames(&MAGIC_BYTES)?, torn_at(0, vec![]));
    Ok(())
}

#[test]
fn reserved_and_unused_descriptor_bits_are_corrupt() {
    for fhd in [0x04 | 0x08, 0x04 | 0x10] {
        let mut bytes = craft(0x04, &[0x58], &[(0, 1, true)]);
        let second = bytes.len();
        bytes.extend(craft(fhd, &[0x58], &[(0, 1, true)]));
        assert_eq!(
            message(scan_frames(&bytes)),
            format!(
                "corrupt Zstandard session log: reserved frame-header bit at byte {}",
                second + FHD_OFFSET
            )
        );
    }
}

#[test]
fn header_lengths_follow_the_descriptor() -> Result<()> {
    // (fhd, header bytes after the descriptor)
    let cases: [(u8, usize); 8] = [
        (0x00, 1),     // window only
        (0x20, 1),     // single-segment: 1-byte content size, no window
        (0x01, 1 + 1), // 1-byte dictionary id
        (0x02, 1 + 2), // 2-byte dictionary id
        (0x03, 1 + 4), // 4-byte dictionary id
        (0x40, 1 + 2), // 2-byte content size
        (0x80, 1 + 4), // 4-byte content size
        (0xE3, 4 + 8), // single-segment, 4-byte dict id, 8-byte content size
    ];
    for (fhd, tail) in cases {
        let bytes = craft(fhd, &vec![0; tail], &[(0, 3, true)]);
        assert_eq!(
            scan_frames(&bytes)?.frames,
            [0..bytes.len()],
            "fhd {fhd:#04x}"
        );
        // One header byte short: the frame is torn, not corrupt.
        let header_only = &bytes[..FHD_OFFSET + tail];
        assert_eq!(
            scan_frames(header_only)?,
            torn_at(0, vec![]),
            "fhd {fhd:#04x}"
        );
    }
    Ok(())
}

#[test]
fn block_payloads_rle_is_one_byte_raw_and_compressed_are_sized() -> Result<()> {
    let bytes = craft(
        0x00,
        &[0x58],
        &[(1, 1000, false), (0, 5, false), (2, 7, true)],
    );
    assert_eq!(bytes.len(), 6 + (3 + 1) + (3 + 5) + (3 + 7));
    assert_eq!(scan_frames(&bytes)?.frames, [0..bytes.len()]);
    for cut in FHD_OFFSET + 1..bytes.len() {
        assert_eq!(scan_frames(&bytes[..cut])?, torn_at(0, vec![]), "cut {cut}");
    }
    Ok(())
}

#[test]
fn block_type_three_is_corrupt_at_its_header() {
    let bytes = craft(0x00, &[0x58], &[(0, 2, false), (3, 0, true)]);
    let block_at = 6 + 3 + 2;
    assert_eq!(
        message(scan_frames(&bytes)),
        format!("corrupt Zstandard session log: reserved block type at byte {block_at}")
    );
}

#[test]
fn checksum_bytes_are_required_only_when_flagged() -> Result<()> {
    let with = craft(0x04, &[0x58], &[(0, 2, true)]);
    assert_eq!(scan_frames(&with)?.frames, [0..with.len()]);
    assert_eq!(scan_frames(&with[..with.len() - 1])?, torn_at(0, vec![]));
    let without = craft(0x00, &[0x58], &[(0, 2, true)]);
    assert_eq!(scan_frames(&without)?.frames, [0..without.len()]);
    Ok(())
}

#[test]
fn two_bytes_of_magic_after_complete_frames_are_torn() -> Result<()> {
    let mut bytes = compress_frame(b"h\n")?;
    let len = bytes.len();
    bytes.extend_from_slice(&[0x28, 0xB5]);
    assert_eq!(scan_frames(&bytes)?, torn_at(len, vec![0..len]));
    Ok(())
}

#[test]
fn the_limit_stops_before_later_corruption() -> Result<()> {
    let mut bytes = compress_frame(b"h\n")?;
    let len = bytes.len();
    bytes.extend_from_slice(&[0, 0, 0, 0]);
    assert_eq!(
        scan_frames_limited(&bytes, 1)?,
        FrameScan {
            frames: vec![0..len],
            torn_start: None
        }
    );
    assert!(scan_frames(&bytes).is_err());
    Ok(())
}
