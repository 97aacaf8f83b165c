//! The whole-artifact reader: frame-0 rule, check order, torn tails, the listing's header read.

use super::*;
use crate::format::zstd::compress_frame;

fn artifact(plaintexts: &[&[u8]]) -> Result<(Vec<u8>, Vec<usize>)> {
    let mut bytes = Vec::new();
    let mut starts = Vec::new();
    for p in plaintexts {
        starts.push(bytes.len());
        bytes.extend(compress_frame(p)?);
    }
    Ok((bytes, starts))
}

fn message<T: std::fmt::Debug>(result: Result<T>) -> String {
    match result {
        Ok(v) => format!("ok {v:?}"),
        Err(e) => e.to_string(),
    }
}

const HEADER: &[u8] = b"{\"type\":\"session\",\"version\":0}\n";

#[test]
fn frames_and_their_plaintext_come_back_in_order() -> Result<()> {
    let (bytes, starts) = artifact(&[HEADER, b"{\"seq\":0}\n", b"{\"seq\":1}\n"])?;
    let log = read_frames(&bytes)?;
    assert_eq!(log.torn, None);
    let got: Vec<(usize, &[u8])> = log
        .frames
        .iter()
        .map(|f| (f.range.start, f.plaintext.as_slice()))
        .collect();
    assert_eq!(
        got,
        [
            (starts[0], HEADER),
            (starts[1], &b"{\"seq\":0}\n"[..]),
            (starts[2], &b"{\"seq\":1}\n"[..])
        ]
    );
    assert_eq!(log.frames.last().map(|f| f.range.end), Some(bytes.len()));
    Ok(())
}

#[test]
fn no_complete_frame_is_header_less() -> Result<()> {
    assert_eq!(
        message(read_frames(b"")),
        "empty or header-less Zstandard session log"
    );
    let frame = compress_frame(HEADER)?;
    assert_eq!(
        message(read_frames(&frame[..frame.len() - 1])),
        "empty or header-less Zstandard session log"
    );
    Ok(())
}

#[test]
fn frame_zero_must_be_exactly_one_line() -> Result<()> {
    let expected = "corrupt Zstandard session log: first frame is not exactly one header line";
    for bad in [&b""[..], b"{}\n{}\n", b"{}", b"\n{}"] {
        let (bytes, _) = artifact(&[bad, b"{\"seq\":0}\n"])?;
        assert_eq!(message(read_frames(&bytes)), expected, "frame 0 = {bad:?}");
    }
    Ok(())
}

#[test]
fn frame_zero_rule_wins_over_a_later_bad_checksum() -> Result<()> {
    let (mut bytes, _) = artifact(&[b"{}\n{}\n", b"{\"seq\":0}\n"])?;
    let last = bytes.len() - 1;
    bytes[last] ^= 0xFF;
    assert_eq!(
        message(read_frames(&bytes)),
        "corrupt Zstandard session log: first frame is not exactly one header line"
    );
    Ok(())
}

#[test]
fn a_bad_checksum_in_a_middle_or_final_frame_fails_validation() -> Result<()> {
    let (bytes, starts) = artifact(&[HEADER, b"{\"seq\":0}\n", b"{\"seq\":1}\n"])?;
    for (frame, flip_at) in [(1, starts[2] - 1), (2, bytes.len() - 1)] {
        let mut damaged = bytes.clone();
        damaged[flip_at] ^= 0x40;
        assert_eq!(
            message(read_frames(&damaged)),
            format!(
                "corrupt Zstandard session log: frame at byte {} failed validation",
                starts[frame]
            )
        );
    }
    Ok(())
}

#[test]
fn the_reader_stops_after_the_first_error_but_yields_what_preceded_it() -> Result<()> {
    let (mut bytes, starts) = artifact(&[HEADER, b"a\n", b"b\n", b"c\n"])?;
    bytes[starts[3] - 1] ^= 0x01;
    let mut reader = FrameReader::new(&bytes)?;
    assert_eq!(reader.frame_count(), 4);
    assert!(matches!(reader.next(), Some(Ok(_))));
    assert!(matches!(reader.next(), Some(Ok(_))));
    assert!(matches!(reader.next(), Some(Err(_))));
    assert!(reader.next().is_none());
    Ok(())
}

#[test]
fn a_torn_final_frame_reports_its_start_and_recovered_plaintext() -> Result<()> {
    let body = b"{\"seq\":0}\n{\"seq\":1}\n".repeat(30);
    let (bytes, starts) = artifact(&[HEADER, &body])?;
    // Missing only the last checksum byte: everything is recovered.
    let log = read_frames(&bytes[..bytes.len() - 1])?;
    assert_eq!(log.frames.len(), 1);
    assert_eq!(
        log.torn,
        Some(TornFrame {
            start: starts[1],
            recovered: body.clone()
        })
    );
    // Two bytes of magic appended: torn there, nothing recovered.
    let mut appended = bytes.clone();
    appended.extend_from_slice(&[0x28, 0xB5]);
    let log = read_frames(&appended)?;
    assert_eq!(log.frames.len(), 2);
    assert_eq!(
        log.torn,
        Some(TornFrame {
            start: bytes.len(),
            recovered: Vec::new()
        })
    );
    Ok(())
}

#[test]
fn garbage_after_complete_frames_is_corrupt_not_torn() -> Result<()> {
    let (mut bytes, _) = artifact(&[HEADER])?;
    let len = bytes.len();
    bytes.extend_from_slice(&[0; 16]);
    assert_eq!(
        message(read_frames(&bytes)),
        format!("corrupt Zstandard session log: invalid frame magic at byte {len}")
    );
    Ok(())
}

#[test]
fn the_header_line_is_read_from_frame_zero_alone() -> Result<()> {
    let (mut bytes, starts) = artifact(&[HEADER, b"{\"seq\":0}\n"])?;
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01; // a later frame's damage does not matter to listing
    bytes.extend_from_slice(&[0; 8]);
    assert_eq!(
        read_header_line(&bytes)?,
        Some(HEADER[..HEADER.len() - 1].to_vec())
    );
    assert_eq!(read_header_line(&bytes[..starts[1] - 1])?, None);
    assert_eq!(read_header_line(b"")?, None);
    Ok(())
}

#[test]
fn a_damaged_header_frame_fails_the_listing() -> Result<()> {
    let (mut bytes, starts) = artifact(&[HEADER, b"{\"seq\":0}\n"])?;
    bytes[starts[1] - 1] ^= 0x01;
    assert_eq!(
        message(read_header_line(&bytes)),
        "corrupt Zstandard session log: header frame failed validation"
    );
    let (two_lines, _) = artifact(&[b"{}\n{}\n"])?;
    assert_eq!(
        message(read_header_line(&two_lines)),
        "corrupt Zstandard session log: first frame is not exactly one header line"
    );
    Ok(())
}
