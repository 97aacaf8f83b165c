//! Block decoding of single frames: full validation for complete frames, best effort for a torn
//! final frame; and `zstd -dc` of a whole artifact ([`Decompressor`]).
//!
//! Invariants kept here:
//! - a complete frame decodes only if libzstd reaches the frame end with its content checksum
//!   verified and the frame's bytes are consumed exactly; anything else is DSH's
//!   `frame at byte N failed validation`, including a complete final frame with a bad checksum;
//! - a torn frame is decoded like Node's `zstdDecompress(buf, {finishFlush: ZSTD_e_flush})`: every
//!   block that arrived whole (and the available part of a raw block) is emitted, the missing end
//!   and checksum are not required, and *any* decoder error yields no plaintext at all, because
//!   DSH's `catch` replaces the failed result with an empty buffer. Torn plaintext is never
//!   checksum-verified;
//! - a [`Decompressor`] emits every byte `zstd -dc` writes for the same input: all frames in
//!   order, each block as soon as it decodes, up to the first decoder error or the end of the
//!   input, whatever the file's verdict.

use zstd::zstd_safe::{DCtx, InBuffer, OutBuffer, ResetDirective};

use super::corrupt;
use crate::{Error, Result};

/// A reusable decompression context (one per import, like DSH's shared native decoder).
pub struct FrameDecoder {
    dctx: DCtx<'static>,
}

impl std::fmt::Debug for FrameDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameDecoder").finish_non_exhaustive()
    }
}

impl FrameDecoder {
    /// A context with libzstd's defaults (checksums verified, window up to 128 MiB, as in Node).
    pub fn new() -> Result<Self> {
        let dctx = DCtx::try_create().ok_or_else(|| Error::Zstd {
            message: "cannot allocate a Zstandard decoder".to_owned(),
        })?;
        Ok(FrameDecoder { dctx })
    }

    /// Decode the complete frame `frame`, which starts at byte `start` of its file, appending its
    /// plaintext to `out`. On failure `out` keeps its previous length.
    pub fn decode_frame(&mut self, frame: &[u8], start: usize, out: &mut Vec<u8>) -> Result<()> {
        let before = out.len();
        if self.decode_complete(frame, out).is_some() {
            return Ok(());
        }
        out.truncate(before);
        Err(corrupt(format!("frame at byte {start} failed validation")))
    }

    /// Whatever plaintext the available bytes of an incomplete final frame yield (possibly
    /// nothing). Never fails: decoder errors give an empty result, as in DSH.
    pub fn decode_torn(&mut self, partial: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        if self.decode_available(partial, &mut out).is_none() {
            out.clear();
        }
        out
    }

    /// `Some` when the frame ended exactly at the end of `frame` with everything verified.
    fn decode_complete(&mut self, frame: &[u8], out: &mut Vec<u8>) -> Option<()> {
        self.dctx.reset(ResetDirective::SessionOnly).ok()?;
        out.reserve(frame.len().saturating_mul(4));
        let mut input = InBuffer::around(frame);
        loop {
            ensure_spare(out);
            let pos = out.len();
            let mut output = OutBuffer::around_pos(out, pos);
            let hint = self.dctx.decompress_stream(&mut output, &mut input).ok()?;
            let filled = output.pos() == output.capacity();
            if hint == 0 {
                // Frame end reached and checksum verified; trailing bytes would be a second frame.
                return (input.pos() == frame.len()).then_some(());
            }
            if input.pos() == frame.len() && !filled {
                // All input consumed, output not full, yet the frame has not ended.
                return None;
            }
        }
    }

    /// Decode as far as `partial` allows; `None` on a decoder error.
    fn decode_available(&mut self, partial: &[u8], out: &mut Vec<u8>) -> Option<()> {
        self.dctx.reset(ResetDirective::SessionOnly).ok()?;
        let mut input = InBuffer::around(partial);
        loop {
            ensure_spare(out);
            let pos = out.len();
            let mut output = OutBuffer::around_pos(out, pos);
            self.dctx.decompress_stream(&mut output, &mut input).ok()?;
            let filled = output.pos() == output.capacity();
            if input.pos() == partial.len() && !filled {
                return Some(());
            }
        }
    }
}

/// `zstd -dc` over an artifact handed over in pieces: every frame's plaintext, in order, block by
/// block; at the first decoder error (bad magic, a failed checksum, a malformed block) it stops
/// and takes no more input, keeping what it already emitted, as `zstd -dc` does before it exits.
pub struct Decompressor {
    dctx: DCtx<'static>,
    stopped: bool,
}

impl std::fmt::Debug for Decompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decompressor")
            .field("stopped", &self.stopped)
            .finish_non_exhaustive()
    }
}

impl Decompressor {
    /// A decompressor at the start of an artifact.
    pub fn new() -> Result<Self> {
        let dctx = DCtx::try_create().ok_or_else(|| Error::Zstd {
            message: "cannot allocate a Zstandard decoder".to_owned(),
        })?;
        Ok(Decompressor {
            dctx,
            stopped: false,
        })
    }

    /// Decode the next piece of the artifact, appending the plaintext it completes to `out`.
    pub fn feed(&mut self, piece: &[u8], out: &mut Vec<u8>) {
        let mut input = InBuffer::around(piece);
        while !self.stopped {
            ensure_spare(out);
            let pos = out.len();
            let mut output = OutBuffer::around_pos(out, pos);
            self.stopped = self
                .dctx
                .decompress_stream(&mut output, &mut input)
                .is_err();
            let filled = output.pos() == output.capacity();
            if input.pos() == piece.len() && !filled {
                return;
            }
        }
    }

    /// Whether the decoder refused something (the rest of the input is ignored).
    pub fn stopped(&self) -> bool {
        self.stopped
    }
}

/// Make sure the vector has room past its length for libzstd to write into.
fn ensure_spare(out: &mut Vec<u8>) {
    if out.capacity() == out.len() {
        out.reserve(DCtx::out_size());
    }
}

#[cfg(test)]
mod tests {
    use super::super::write::compress_frame;
    use super::*;

    fn message(result: Result<()>) -> String {
        match result {
            Ok(()) => "ok".to_owned(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn complete_frames_round_trip_through_one_context() -> Result<()> {
        let mut decoder = FrameDecoder::new()?;
        for plaintext in [b"".to_vec(), b"x\n".to_vec(), vec![b'q'; 400_000]] {
            let frame = compress_frame(&plaintext)?;
            let mut out = Vec::new();
            decoder.decode_frame(&frame, 0, &mut out)?;
            assert_eq!(out, plaintext);
        }
        Ok(())
    }

    #[test]
    fn a_bad_checksum_fails_validation_and_leaves_out_untouched() -> Result<()> {
        let mut frame = compress_frame(b"hello\n")?;
        let last = frame.len() - 1;
        frame[last] ^= 0x01;
        let mut out = b"kept".to_vec();
        let got = message(FrameDecoder::new()?.decode_frame(&frame, 77, &mut out));
        assert_eq!(
            got,
            "corrupt Zstandard session log: frame at byte 77 failed validation"
        );
        assert_eq!(out, b"kept");
        Ok(())
    }

    #[test]
    fn a_frame_missing_bytes_fails_validation() -> Result<()> {
        let frame = compress_frame(b"hello\n")?;
        let mut out = Vec::new();
        let got =
            message(FrameDecoder::new()?.decode_frame(&frame[..frame.len() - 1], 0, &mut out));
        assert_eq!(
            got,
            "corrupt Zstandard session log: frame at byte 0 failed validation"
        );
        Ok(())
    }

    #[test]
    fn a_frame_followed_by_extra_bytes_fails_validation() -> Result<()> {
        let mut bytes = compress_frame(b"a\n")?;
        bytes.extend(compress_frame(b"b\n")?);
        let mut out = Vec::new();
        let got = message(FrameDecoder::new()?.decode_frame(&bytes, 0, &mut out));
        assert_eq!(
            got,
            "corrupt Zstandard session log: frame at byte 0 failed validation"
        );
        Ok(())
    }

    #[test]
    fn torn_frame_missing_only_its_checksum_recovers_everything() -> Result<()> {
        let plaintext = b"{\"seq\":1}\n{\"seq\":2}\n".repeat(50);
        let frame = compress_frame(&plaintext)?;
        let mut decoder = FrameDecoder::new()?;
        assert_eq!(decoder.decode_torn(&frame[..frame.len() - 1]), plaintext);
        assert_eq!(decoder.decode_torn(&frame[..frame.len() - 4]), plaintext);
        Ok(())
    }

    #[test]
    fn torn_frame_prefixes_yield_prefixes_of_the_plaintext() -> Result<()> {
        // Mostly incompressible so blocks are raw and large: several blocks, partial raw output.
        let plaintext: Vec<u8> = (0u32..300_000)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let frame = compress_frame(&plaintext)?;
        let mut decoder = FrameDecoder::new()?;
        for cut in [0, 3, 6, 9, 1000, frame.len() / 2, frame.len() - 5] {
            let got = decoder.decode_torn(&frame[..cut]);
            assert!(plaintext.starts_with(&got), "cut {cut}: not a prefix");
        }
        assert!(!decoder.decode_torn(&frame[..frame.len() / 2]).is_empty());
        Ok(())
    }

    fn decompress(pieces: &[&[u8]]) -> Result<(Vec<u8>, bool)> {
        let mut d = Decompressor::new()?;
        let mut out = Vec::new();
        for piece in pieces {
            d.feed(piece, &mut out);
        }
        Ok((out, d.stopped()))
    }

    #[test]
    fn decompressor_emits_every_frame_across_piece_boundaries() -> Result<()> {
        let a = compress_frame(b"header\n")?;
        let b = compress_frame(&b"{\"seq\":0}\n".repeat(3000))?;
        let mut whole = a.clone();
        whole.extend_from_slice(&b);
        let mut expected = b"header\n".to_vec();
        expected.extend(b"{\"seq\":0}\n".repeat(3000));
        for cut in [0, 3, a.len(), a.len() + 5, whole.len() - 1, whole.len()] {
            let (got, stopped) = decompress(&[&whole[..cut], &whole[cut..]])?;
            assert_eq!(got, expected, "cut at {cut}");
            assert!(!stopped);
        }
        Ok(())
    }

    #[test]
    fn decompressor_keeps_what_decoded_before_an_error_or_the_end() -> Result<()> {
        let good = compress_frame(b"kept\n")?;
        let plaintext: Vec<u8> = (0u32..300_000)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let big = compress_frame(&plaintext)?;
        // Torn: a prefix of the second frame's plaintext follows the first frame's.
        let (got, stopped) = decompress(&[&good, &big[..big.len() / 2]])?;
        assert!(!stopped);
        assert!(got.starts_with(b"kept\n") && got.len() > 5);
        assert!(plaintext.starts_with(&got[5..]));
        // Garbage after a frame: the frame's bytes stay, nothing after the error is read.
        let (got, stopped) = decompress(&[&good, b"not a frame", &good])?;
        assert_eq!((got, stopped), (b"kept\n".to_vec(), true));
        // A failed checksum on a one-block frame: `zstd -dc` writes none of it, and stops.
        let mut bad = good.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        let (got, stopped) = decompress(&[&good, &bad, &good])?;
        assert_eq!((got, stopped), (b"kept\n".to_vec(), true));
        Ok(())
    }

    #[test]
    fn torn_frame_with_a_decoder_error_recovers_nothing() -> Result<()> {
        let plaintext = b"abcdefgh\n".repeat(100);
        let mut bytes = compress_frame(&plaintext)?;
        bytes.extend(compress_frame(&plaintext)?);
        // Corrupt the window descriptor of a frame: the decoder rejects it outright.
        bytes[5] = 0xFF;
        assert!(FrameDecoder::new()?
            .decode_torn(&bytes[..bytes.len() - 3])
            .is_empty());
        Ok(())
    }
}
