//! Reading a whole `.jsonl.zstd` artifact the way DSH's `readZstdPrefix` does, minus the JSONL
//! scan (the caller feeds each frame's plaintext to the JSONL scanner).
//!
//! Order of checks, which fixes which error wins when a file has several defects:
//! 1. the structural scan of the whole buffer (`invalid frame magic …`, reserved bits/type);
//! 2. no complete frame → `empty or header-less Zstandard session log`;
//! 3. frame 0 decodes (`frame at byte 0 failed validation`), then must be exactly one header
//!    line (`first frame is not exactly one header line`);
//! 4. frames 1.. decode in order (`frame at byte N failed validation`). DSH feeds each frame to
//!    its JSONL scanner *before* decoding the next, so a scanner error in frame k beats a
//!    validation error in frame k+1: callers that need that precedence iterate a [`FrameReader`]
//!    and scan between frames; [`read_frames`] decodes everything up front;
//! 5. the torn final frame, if any, is decoded best-effort and never fails.

use std::ops::Range;

use super::decode::FrameDecoder;
use super::scan::{scan_frames, scan_frames_limited, FrameScan};
use super::{corrupt, header_less};
use crate::Result;

/// One complete frame: where its bytes lie in the file and what it decodes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedFrame {
    /// The frame's byte range in the artifact (stored verbatim for byte-exact export).
    pub range: Range<usize>,
    /// The verified plaintext.
    pub plaintext: Vec<u8>,
}

/// An incomplete final frame and the plaintext its available bytes yield.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornFrame {
    /// First byte of the torn frame: where a repair truncates the file.
    pub start: usize,
    /// Unverified plaintext from the available blocks (may end mid-record, may be empty).
    pub recovered: Vec<u8>,
}

/// A decoded artifact: every complete frame, plus the torn tail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZstdLog {
    /// Complete frames in file order; frame 0 is exactly the header line.
    pub frames: Vec<DecodedFrame>,
    /// The incomplete final frame, when the file ends inside one.
    pub torn: Option<TornFrame>,
}

/// Scan and decode a whole artifact, eagerly (see the module docs for check order).
pub fn read_frames(bytes: &[u8]) -> Result<ZstdLog> {
    let mut reader = FrameReader::new(bytes)?;
    let mut frames = Vec::with_capacity(reader.frame_count());
    for frame in reader.by_ref() {
        frames.push(frame?);
    }
    let torn = reader.recover_torn();
    Ok(ZstdLog { frames, torn })
}

/// Lazy frame-by-frame decoding: yields each complete frame in order (frame 0 checked to be one
/// header line), stops after the first error, then [`FrameReader::recover_torn`] gives the tail.
#[derive(Debug)]
pub struct FrameReader<'a> {
    bytes: &'a [u8],
    scan: FrameScan,
    next: usize,
    failed: bool,
    decoder: FrameDecoder,
}

impl<'a> FrameReader<'a> {
    /// Scan `bytes` structurally; fails on corruption or when no frame is complete.
    pub fn new(bytes: &'a [u8]) -> Result<Self> {
        let scan = scan_frames(bytes)?;
        if scan.frames.is_empty() {
            return Err(header_less());
        }
        Ok(FrameReader {
            bytes,
            scan,
            next: 0,
            failed: false,
            decoder: FrameDecoder::new()?,
        })
    }

    /// How many complete frames the scan found.
    pub fn frame_count(&self) -> usize {
        self.scan.frames.len()
    }

    /// The structural scan result.
    pub fn scan(&self) -> &FrameScan {
        &self.scan
    }

    /// Decode the available bytes of the torn final frame, if there is one.
    pub fn recover_torn(&mut self) -> Option<TornFrame> {
        let start = self.scan.torn_start?;
        let recovered = self.decoder.decode_torn(self.bytes.get(start..)?);
        Some(TornFrame { start, recovered })
    }

    fn decode_next(&mut self, range: Range<usize>) -> Result<DecodedFrame> {
        let mut plaintext = Vec::new();
        let frame = self.bytes.get(range.clone()).unwrap_or_default();
        self.decoder
            .decode_frame(frame, range.start, &mut plaintext)?;
        if range.start == 0 {
            check_header_frame(&plaintext)?;
        }
        Ok(DecodedFrame { range, plaintext })
    }
}

impl Iterator for FrameReader<'_> {
    type Item = Result<DecodedFrame>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let range = self.scan.frames.get(self.next)?.clone();
        self.next += 1;
        let item = self.decode_next(range);
        self.failed = item.is_err();
        Some(item)
    }
}

/// DSH's `assertZstdHeaderFrame`: frame 0 is non-empty and its only `\n` is its last byte.
pub fn check_header_frame(plaintext: &[u8]) -> Result<()> {
    match plaintext.iter().position(|&b| b == b'\n') {
        Some(at) if at + 1 == plaintext.len() => Ok(()),
        _ => Err(corrupt(
            "first frame is not exactly one header line".to_owned(),
        )),
    }
}

/// The header line (without its `\n`) from an artifact prefix, as DSH's listing reads it
/// (`readFirstZstdLine`): `Ok(None)` while frame 0 is incomplete in `prefix`; a frame 0 that
/// fails to decode is `header frame failed validation`; it must be exactly one line.
/// Only frame 0 is examined, so later frames may be anything.
pub fn read_header_line(prefix: &[u8]) -> Result<Option<Vec<u8>>> {
    let scan = scan_frames_limited(prefix, 1)?;
    let Some(range) = scan.frames.first() else {
        return Ok(None);
    };
    let frame = prefix.get(range.clone()).unwrap_or_default();
    let mut plaintext = Vec::new();
    FrameDecoder::new()?
        .decode_frame(frame, 0, &mut plaintext)
        .map_err(|_| corrupt("header frame failed validation".to_owned()))?;
    check_header_frame(&plaintext)?;
    plaintext.pop();
    Ok(Some(plaintext))
}

#[cfg(test)]
mod tests;
