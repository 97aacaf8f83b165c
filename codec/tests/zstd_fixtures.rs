//! Scenario: the `.jsonl.zstd` codec against frames written by real Node 22.19 zlib.
//!
//! - every `zstd-frames/*.in` compresses to its `*.node.zst` byte for byte (spec §8 test 5);
//! - every `dsh-zstd/*.single|perturn.jsonl.zstd` vector scans into frames that re-concatenate to
//!   the file, decode to the plaintext fixture in `dsh/`, and re-compress to themselves (test 3);
//! - every `*.torn.jsonl.zstd` vector reports its torn start and recovers a plaintext prefix
//!   (test 25);
//! - corruptions crafted from the vectors give DSH's messages (tests 23, 24, 26–30).
//!
//! Fixtures are read in place from `<repo>/../shared/fixtures` (or `$SESSIONLOG_FIXTURES`). When
//! they are missing the tests note it and pass, unless `CI` is set.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use sessionlog_codec::format::zstd::{
    compress_frame, read_frames, read_header_line, scan_frames, FrameCompressor, ZstdLog,
};
use sessionlog_codec::Result;

fn fixtures() -> Option<PathBuf> {
    common::fixtures_with("dsh-zstd/index.json")
}

fn read(path: &Path) -> Vec<u8> {
    fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// File names in `dir` ending with `suffix`, sorted, with the suffix removed.
fn stems(dir: &Path, suffix: &str) -> Vec<String> {
    let entries =
        fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(suffix).map(str::to_owned))
        .collect();
    names.sort();
    names
}

fn message<T: std::fmt::Debug>(result: Result<T>) -> String {
    match result {
        Ok(v) => format!("ok {v:?}"),
        Err(e) => e.to_string(),
    }
}

fn plaintext_of(log: &ZstdLog) -> Vec<u8> {
    log.frames
        .iter()
        .flat_map(|f| f.plaintext.iter().copied())
        .collect()
}

/// `(vector bytes, plaintext fixture)` for one `dsh-zstd` vector kind.
fn vectors(dir: &Path, kind: &str) -> Vec<(String, Vec<u8>, Vec<u8>)> {
    let zstd_dir = dir.join("dsh-zstd");
    stems(&zstd_dir, &format!(".{kind}.jsonl.zstd"))
        .into_iter()
        .map(|stem| {
            let bytes = read(&zstd_dir.join(format!("{stem}.{kind}.jsonl.zstd")));
            let plain = read(&dir.join("dsh").join(format!("{stem}.jsonl")));
            (stem, bytes, plain)
        })
        .collect()
}

#[test]
fn node_frames_are_reproduced_byte_for_byte() -> Result<()> {
    let Some(dir) = fixtures() else { return Ok(()) };
    let frames_dir = dir.join("zstd-frames");
    let mut compressor = FrameCompressor::new()?;
    let mut matched = 0;
    for stem in stems(&frames_dir, ".in") {
        let input = read(&frames_dir.join(format!("{stem}.in")));
        let node = read(&frames_dir.join(format!("{stem}.node.zst")));
        assert_eq!(compressor.compress(&input)?, node, "{stem}: reused context");
        assert_eq!(
            node[4..6],
            [0x04, 0x58],
            "{stem}: FHD and window descriptor"
        );
        matched += 1;
    }
    // One-shot path too, on the first case, so both entry points are covered.
    let first = stems(&frames_dir, ".in").into_iter().next();
    if let Some(stem) = first {
        let input = read(&frames_dir.join(format!("{stem}.in")));
        assert_eq!(
            compress_frame(&input)?,
            read(&frames_dir.join(format!("{stem}.node.zst")))
        );
    }
    eprintln!("zstd-frames: {matched} frames matched Node");
    assert!(matched >= 90, "only {matched} frame cases found");
    Ok(())
}

#[test]
fn complete_vectors_decode_to_the_fixtures_and_recompress_to_themselves() -> Result<()> {
    let Some(dir) = fixtures() else { return Ok(()) };
    let mut compressor = FrameCompressor::new()?;
    let (mut vectors_seen, mut frames_seen) = (0, 0);
    for kind in ["single", "perturn"] {
        for (stem, bytes, plain) in vectors(&dir, kind) {
            let log = read_frames(&bytes)?;
            assert_eq!(log.torn, None, "{stem}.{kind}");
            assert_eq!(plaintext_of(&log), plain, "{stem}.{kind}: plaintext");
            let mut rebuilt = Vec::with_capacity(bytes.len());
            for frame in &log.frames {
                assert_eq!(
                    frame.range.start,
                    rebuilt.len(),
                    "{stem}.{kind}: ranges contiguous"
                );
                rebuilt.extend_from_slice(&bytes[frame.range.clone()]);
                assert_eq!(
                    compressor.compress(&frame.plaintext)?,
                    bytes[frame.range.clone()],
                    "{stem}.{kind}: frame at {} re-compresses to itself",
                    frame.range.start
                );
                frames_seen += 1;
            }
            assert_eq!(
                rebuilt, bytes,
                "{stem}.{kind}: frames re-concatenate to the file"
            );
            if kind == "single" {
                assert_eq!(log.frames.len(), 2, "{stem}: header frame + one body frame");
            }
            vectors_seen += 1;
        }
    }
    eprintln!("dsh-zstd: {vectors_seen} vectors, {frames_seen} frames round-tripped");
    assert_eq!(vectors_seen, 338);
    Ok(())
}

#[test]
fn torn_vectors_report_their_cut_and_recover_a_prefix() -> Result<()> {
    let Some(dir) = fixtures() else { return Ok(()) };
    let perturn: Vec<_> = vectors(&dir, "perturn");
    let (mut seen, mut recovered_any) = (0, 0);
    for (stem, bytes, plain) in vectors(&dir, "torn") {
        let log = read_frames(&bytes)?;
        let torn = log
            .torn
            .as_ref()
            .unwrap_or_else(|| panic!("{stem}: no torn frame"));
        let full = perturn
            .iter()
            .find(|(s, _, _)| *s == stem)
            .map(|(_, b, _)| read_frames(b))
            .unwrap_or_else(|| panic!("{stem}: no perturn vector"))?;
        let last = full.frames.last().map_or(0, |f| f.range.start);
        assert_eq!(torn.start, last, "{stem}: torn at the last frame's start");
        assert_eq!(
            log.frames,
            full.frames[..full.frames.len() - 1],
            "{stem}: complete frames"
        );
        let committed = plaintext_of(&log);
        assert!(
            plain.starts_with(&committed),
            "{stem}: committed plaintext is a prefix"
        );
        assert!(
            plain[committed.len()..].starts_with(&torn.recovered),
            "{stem}: recovered bytes continue the plaintext"
        );
        seen += 1;
        recovered_any += usize::from(!torn.recovered.is_empty());
    }
    eprintln!("dsh-zstd: {seen} torn vectors, {recovered_any} with recovered plaintext");
    assert_eq!(seen, 23);
    // Every vector's last frame is one compressed block cut in half, and libzstd emits a
    // compressed block only once it is whole: as in DSH, nothing is recovered.
    assert_eq!(recovered_any, 0);
    Ok(())
}

#[test]
fn a_torn_multi_block_frame_recovers_its_whole_blocks() -> Result<()> {
    let Some(dir) = fixtures() else { return Ok(()) };
    let mut plain = Vec::new();
    for (_, _, fixture) in vectors(&dir, "single") {
        plain.extend_from_slice(&fixture);
        if plain.len() > 600 << 10 {
            break;
        }
    }
    let (_, bytes, log) = perturn_with(&dir, 1)?;
    let header_end = log.frames[0].range.end;
    let mut crafted = bytes[..header_end].to_vec();
    crafted.extend(compress_frame(&plain)?);
    let mut recovered_sizes = Vec::new();
    for cut in [
        header_end + 7,
        (header_end + crafted.len()) / 2,
        crafted.len() - 10,
    ] {
        let got = read_frames(&crafted[..cut])?;
        let torn = got
            .torn
            .unwrap_or_else(|| panic!("cut {cut}: no torn tail"));
        assert_eq!(torn.start, header_end);
        assert!(
            plain.starts_with(&torn.recovered),
            "cut {cut}: not a prefix"
        );
        recovered_sizes.push(torn.recovered.len());
    }
    assert_eq!(
        recovered_sizes[0], 0,
        "nothing before the first whole block"
    );
    assert!(
        recovered_sizes[1] >= 128 << 10,
        "whole 128 KiB blocks come back: {recovered_sizes:?}"
    );
    assert!(
        recovered_sizes[2] > recovered_sizes[1],
        "{recovered_sizes:?}"
    );
    Ok(())
}

/// The first perturn vector with at least `frames` frames, and its decoded log.
fn perturn_with(dir: &Path, frames: usize) -> Result<(String, Vec<u8>, ZstdLog)> {
    for (stem, bytes, _) in vectors(dir, "perturn") {
        let log = read_frames(&bytes)?;
        if log.frames.len() >= frames {
            return Ok((stem, bytes, log));
        }
    }
    panic!("no perturn vector with {frames} frames");
}

#[test]
fn frame_zero_that_is_not_one_header_line_is_corrupt() -> Result<()> {
    let Some(dir) = fixtures() else { return Ok(()) };
    let (_, bytes, log) = perturn_with(&dir, 2)?;
    let header = &log.frames[0].plaintext;
    let body = &log.frames[1].plaintext;
    let first_line = body
        .iter()
        .position(|&b| b == b'\n')
        .map_or(body.len(), |i| i + 1);
    let rest = &bytes[log.frames[0].range.end..];
    let expected = "corrupt Zstandard session log: first frame is not exactly one header line";
    // Header plus the first event line in frame 0; then an empty frame 0.
    for frame0 in [
        [header.as_slice(), &body[..first_line]].concat(),
        Vec::new(),
    ] {
        let mut crafted = compress_frame(&frame0)?;
        crafted.extend_from_slice(rest);
        assert_eq!(message(read_frames(&crafted)), expected);
        assert_eq!(message(read_header_line(&crafted)), expected);
    }
    Ok(())
}

#[test]
fn a_damaged_checksum_fails_its_frame_and_only_frame_zero_fails_listing() -> Result<()> {
    let Some(dir) = fixtures() else { return Ok(()) };
    let (stem, bytes, log) = perturn_with(&dir, 3)?;
    let middle = &log.frames[1].range;
    let mut damaged = bytes.clone();
    damaged[middle.end - 1] ^= 0x01;
    assert_eq!(
        message(read_frames(&damaged)),
        format!(
            "corrupt Zstandard session log: frame at byte {} failed validation",
            middle.start
        ),
        "{stem}"
    );
    let header = log.frames[0]
        .plaintext
        .strip_suffix(b"\n")
        .map(<[u8]>::to_vec);
    assert_eq!(
        read_header_line(&damaged)?,
        header,
        "{stem}: listing ignores later frames"
    );

    let mut damaged = bytes.clone();
    damaged[log.frames[0].range.end - 1] ^= 0x01;
    assert_eq!(
        message(read_frames(&damaged)),
        "corrupt Zstandard session log: frame at byte 0 failed validation"
    );
    assert_eq!(
        message(read_header_line(&damaged)),
        "corrupt Zstandard session log: header frame failed validation"
    );
    Ok(())
}

#[test]
fn two_appended_magic_bytes_are_a_torn_tail_with_nothing_recovered() -> Result<()> {
    let Some(dir) = fixtures() else { return Ok(()) };
    let (_, bytes, log) = perturn_with(&dir, 2)?;
    let mut appended = bytes.clone();
    appended.extend_from_slice(&[0x28, 0xB5]);
    let got = read_frames(&appended)?;
    assert_eq!(got.frames, log.frames);
    let torn = got.torn.unwrap_or_else(|| panic!("no torn tail"));
    assert_eq!((torn.start, torn.recovered.len()), (bytes.len(), 0));
    Ok(())
}

#[test]
fn a_final_frame_missing_its_last_checksum_byte_is_fully_recovered() -> Result<()> {
    let Some(dir) = fixtures() else { return Ok(()) };
    let (_, bytes, log) = perturn_with(&dir, 3)?;
    let got = read_frames(&bytes[..bytes.len() - 1])?;
    let last = log.frames.last().unwrap_or_else(|| panic!("no frames"));
    assert_eq!(got.frames, log.frames[..log.frames.len() - 1]);
    let torn = got.torn.unwrap_or_else(|| panic!("no torn tail"));
    assert_eq!(torn.start, last.range.start);
    assert_eq!(torn.recovered, last.plaintext);
    Ok(())
}

#[test]
fn records_split_or_cut_inside_complete_frames_still_decode_exactly() -> Result<()> {
    let Some(dir) = fixtures() else { return Ok(()) };
    let (_, bytes, log) = perturn_with(&dir, 2)?;
    let header_end = log.frames[0].range.end;
    let body = plaintext_of(&log)[log.frames[0].plaintext.len()..].to_vec();
    // Test 30: one record split across two complete frames; the frames decode, in order, to the
    // same bytes, and the split is visible to the JSONL scanner through the frame boundaries.
    let cut = body.iter().position(|&b| b == b'"').map_or(1, |i| i + 1);
    let mut crafted = bytes[..header_end].to_vec();
    crafted.extend(compress_frame(&body[..cut])?);
    crafted.extend(compress_frame(&body[cut..])?);
    let got = read_frames(&crafted)?;
    assert_eq!(got.frames.len(), 3);
    assert_eq!(plaintext_of(&got), plaintext_of(&log));
    assert!(!got.frames[1].plaintext.ends_with(b"\n"));
    // Test 28 (zstd side): a complete frame ending mid-record decodes; its plaintext does not end
    // in `\n`, which the JSONL reader turns into `complete frame contains a torn JSONL record`.
    let mut crafted = bytes[..header_end].to_vec();
    crafted.extend(compress_frame(b"{\"type\":\"turn/start\"")?);
    let got = read_frames(&crafted)?;
    assert_eq!(got.frames[1].plaintext, b"{\"type\":\"turn/start\"");
    Ok(())
}

#[test]
fn structural_corruption_is_reported_at_its_byte() -> Result<()> {
    let Some(dir) = fixtures() else { return Ok(()) };
    let (_, bytes, log) = perturn_with(&dir, 3)?;
    let len = bytes.len();
    let invalid_magic = format!("corrupt Zstandard session log: invalid frame magic at byte {len}");
    // Zero padding of ≥ 4 bytes, and a skippable frame, after the last frame.
    for tail in [
        &[0u8; 4][..],
        &[0; 64],
        &[0x50, 0x2A, 0x4D, 0x18, 0, 0, 0, 0],
    ] {
        let mut crafted = bytes.clone();
        crafted.extend_from_slice(tail);
        assert_eq!(message(read_frames(&crafted)), invalid_magic);
    }
    // Fewer than 4 bytes of padding: torn, not corrupt.
    let mut crafted = bytes.clone();
    crafted.extend_from_slice(&[0, 0, 0]);
    assert_eq!(scan_frames(&crafted)?.torn_start, Some(len));

    let middle = log.frames[1].range.start;
    for bit in [0x08, 0x10] {
        let mut crafted = bytes.clone();
        crafted[middle + 4] |= bit;
        assert_eq!(
            message(read_frames(&crafted)),
            format!(
                "corrupt Zstandard session log: reserved frame-header bit at byte {}",
                middle + 4
            )
        );
    }
    // DSH frames have a 6-byte header, so the first block header is at +6.
    let mut crafted = bytes.clone();
    crafted[middle + 6] |= 0x06;
    assert_eq!(
        message(read_frames(&crafted)),
        format!(
            "corrupt Zstandard session log: reserved block type at byte {}",
            middle + 6
        )
    );
    Ok(())
}
