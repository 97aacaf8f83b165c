//! Frame authoring identical to DSH's writer (Node `zlib.zstdCompress` with the checksum flag).
//!
//! Invariant kept here: for the pinned libzstd (`zstd-sys =2.1.3+zstd.1.5.7`) every frame this
//! module writes is byte-identical to the frame Node 22/24 writes for the same plaintext. That
//! requires Node's exact recipe (spec §3.5): level 3, checksum on, the whole input fed with
//! `ZSTD_e_continue`, then an *empty* `ZSTD_e_end` — so libzstd never learns the content size and
//! the descriptor is `0x04`, the window descriptor `0x58`. Feeding the input with `ZSTD_e_end`
//! directly, or `ZSTD_compress2`, records the content size and does not match. Output chunking
//! does not affect the bytes.

use zstd::zstd_safe::{CCtx, CParameter, InBuffer, OutBuffer, ResetDirective};
use zstd_sys::ZSTD_EndDirective;

use crate::{Error, Result};

/// Node's default compression level (`ZSTD_CLEVEL_DEFAULT`); DSH exposes no level knob.
pub const NODE_LEVEL: i32 = 3;

/// Frame header + last-block header + checksum of an empty frame; added to the compress bound
/// so the common case never regrows the output.
const FRAME_SLACK: usize = 32;

/// A reusable compression context configured like DSH's writer. Reuse it on hot paths: creating
/// a context allocates several hundred KiB.
pub struct FrameCompressor {
    cctx: CCtx<'static>,
}

impl std::fmt::Debug for FrameCompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameCompressor").finish_non_exhaustive()
    }
}

impl FrameCompressor {
    /// A context at level 3 with the content checksum on.
    pub fn new() -> Result<Self> {
        let mut cctx =
            CCtx::try_create().ok_or_else(|| write_error("cannot allocate a context"))?;
        cctx.set_parameter(CParameter::CompressionLevel(NODE_LEVEL))
            .map_err(zstd_error)?;
        cctx.set_parameter(CParameter::ChecksumFlag(true))
            .map_err(zstd_error)?;
        Ok(FrameCompressor { cctx })
    }

    /// Append one complete, independently decodable frame holding `plaintext` to `out`.
    /// On error `out` keeps its previous length and the context stays usable.
    pub fn compress_into(&mut self, plaintext: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let before = out.len();
        let result = self.run(plaintext, out);
        if result.is_err() {
            out.truncate(before);
            // Abandon the half-written frame; parameters survive a session-only reset.
            self.cctx
                .reset(ResetDirective::SessionOnly)
                .map_err(zstd_error)?;
        }
        result
    }

    /// One complete frame holding `plaintext`.
    pub fn compress(&mut self, plaintext: &[u8]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.compress_into(plaintext, &mut out)?;
        Ok(out)
    }

    fn run(&mut self, plaintext: &[u8], out: &mut Vec<u8>) -> Result<()> {
        out.reserve(zstd::zstd_safe::compress_bound(plaintext.len()) + FRAME_SLACK);
        let mut input = InBuffer::around(plaintext);
        // At least one `ZSTD_e_continue` call, even for empty input: the directive of the first
        // call decides whether libzstd learns the content size (Node's empty frame has none).
        loop {
            ensure_spare(out);
            let pos = out.len();
            let mut output = OutBuffer::around_pos(out, pos);
            self.cctx
                .compress_stream2(&mut output, &mut input, ZSTD_EndDirective::ZSTD_e_continue)
                .map_err(zstd_error)?;
            if input.pos() == plaintext.len() {
                break;
            }
        }
        let mut empty = InBuffer::around(&[]);
        loop {
            ensure_spare(out);
            let pos = out.len();
            let mut output = OutBuffer::around_pos(out, pos);
            let remaining = self
                .cctx
                .compress_stream2(&mut output, &mut empty, ZSTD_EndDirective::ZSTD_e_end)
                .map_err(zstd_error)?;
            if remaining == 0 {
                return Ok(());
            }
        }
    }
}

/// One frame exactly as DSH writes it. Allocates a context; prefer [`FrameCompressor`] in loops.
pub fn compress_frame(plaintext: &[u8]) -> Result<Vec<u8>> {
    FrameCompressor::new()?.compress(plaintext)
}

/// Make sure the vector has room past its length for libzstd to write into.
fn ensure_spare(out: &mut Vec<u8>) {
    if out.capacity() == out.len() {
        out.reserve(CCtx::out_size());
    }
}

fn zstd_error(code: usize) -> Error {
    write_error(zstd::zstd_safe::get_error_name(code))
}

fn write_error(reason: &str) -> Error {
    Error::Zstd {
        message: format!("cannot write Zstandard frame: {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_input_is_a_13_byte_frame_without_content_size() -> Result<()> {
        let frame = compress_frame(b"")?;
        assert_eq!(frame.len(), 13);
        assert_eq!(frame[..6], [0x28, 0xB5, 0x2F, 0xFD, 0x04, 0x58]);
        Ok(())
    }

    #[test]
    fn frames_decode_back_and_carry_a_checksum() -> Result<()> {
        let plaintext = b"{\"type\":\"session\"}\n".repeat(1000);
        let frame = compress_frame(&plaintext)?;
        assert_eq!(
            frame[4], 0x04,
            "checksum on, no content size, not single-segment"
        );
        assert_eq!(frame[5], 0x58, "windowLog 21");
        let decoded =
            zstd::decode_all(frame.as_slice()).map_err(|e| write_error(&e.to_string()))?;
        assert_eq!(decoded, plaintext);
        Ok(())
    }

    #[test]
    fn a_reused_context_writes_the_same_bytes_as_a_fresh_one() -> Result<()> {
        let mut reused = FrameCompressor::new()?;
        let inputs: [&[u8]; 4] = [b"", b"a\n", &[b'x'; 300_000], b"{\"seq\":1}\n"];
        for input in inputs {
            assert_eq!(reused.compress(input)?, compress_frame(input)?);
        }
        Ok(())
    }

    #[test]
    fn compress_into_appends_after_existing_bytes() -> Result<()> {
        let mut compressor = FrameCompressor::new()?;
        let mut out = b"prefix".to_vec();
        compressor.compress_into(b"a\n", &mut out)?;
        assert_eq!(out[..6], *b"prefix");
        assert_eq!(out[6..], compress_frame(b"a\n")?);
        Ok(())
    }
}
