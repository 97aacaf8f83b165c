//! Framing a plain session's body for a `.jsonl.zstd` rendering: a function of the plaintext
//! alone, so a session's conversion never depends on how its lines were batched when written
//! (a `.jsonl` file does not record that, so an export → import round trip could not keep it).
//!
//! Rule: the body is cut into frames at line ends; a frame closes at the first `\n` at or past
//! [`BODY_FRAME_BYTES`] of plaintext, and the last frame holds the rest. Every frame but the last
//! is therefore at least [`BODY_FRAME_BYTES`] long and ends a line; a line longer than that stays
//! whole in one frame. Each frame is authored as Node's `zlib.zstdCompress` writes it
//! ([`FrameCompressor`]).

use super::write::FrameCompressor;
use crate::Result;

/// Plaintext bytes after which a body frame closes at the next line end: 2 MiB, the window of
/// the level-3 frames DSH writes (window descriptor `0x58`). A longer frame cannot reference
/// farther back, so it would compress no better; a shorter one would lose matches across its
/// boundary, and a reader decoding one frame at a time holds at most about this much.
pub const BODY_FRAME_BYTES: usize = 2 << 20;

/// Cuts body plaintext, fed in pieces of any size, into frames by the rule above.
#[derive(Debug)]
pub struct BodyFramer {
    compressor: FrameCompressor,
    /// Plaintext not yet framed.
    pending: Vec<u8>,
    /// Scratch for one compressed frame.
    frame: Vec<u8>,
}

impl BodyFramer {
    /// A framer with its own compression context.
    pub fn new() -> Result<Self> {
        Ok(BodyFramer {
            compressor: FrameCompressor::new()?,
            pending: Vec::new(),
            frame: Vec::new(),
        })
    }

    /// Take `plaintext`; hand every frame it completes to `emit`, in order.
    pub fn feed<E>(
        &mut self,
        plaintext: &[u8],
        emit: &mut impl FnMut(&[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E>
    where
        E: From<crate::Error>,
    {
        self.pending.extend_from_slice(plaintext);
        let mut start = 0;
        while self.pending.len() - start >= BODY_FRAME_BYTES {
            let search = start + BODY_FRAME_BYTES - 1;
            let Some(nl) = memchr::memchr(b'\n', &self.pending[search..]) else {
                break;
            };
            let end = search + nl + 1;
            self.frame.clear();
            self.compressor
                .compress_into(&self.pending[start..end], &mut self.frame)?;
            emit(&self.frame)?;
            start = end;
        }
        self.pending.drain(..start);
        Ok(())
    }

    /// Frame what is left (nothing if the body was empty or ended exactly on a frame).
    pub fn finish<E>(
        mut self,
        emit: &mut impl FnMut(&[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E>
    where
        E: From<crate::Error>,
    {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.frame.clear();
        self.compressor
            .compress_into(&self.pending, &mut self.frame)?;
        emit(&self.frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::zstd::{compress_frame, scan_frames, Decompressor};

    fn framed(pieces: &[&[u8]]) -> Vec<u8> {
        let mut framer = BodyFramer::new().expect("framer");
        let mut out = Vec::new();
        let mut emit = |f: &[u8]| -> Result<()> {
            out.extend_from_slice(f);
            Ok(())
        };
        for p in pieces {
            framer.feed(p, &mut emit).expect("feed");
        }
        framer.finish(&mut emit).expect("finish");
        out
    }

    /// Lines of assorted lengths, some longer than a frame.
    fn body() -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..4000usize {
            let len = if i % 997 == 0 {
                BODY_FRAME_BYTES + 17
            } else {
                i * 13 % 3001
            };
            out.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, len));
            out.push(b'\n');
        }
        out
    }

    #[test]
    fn frames_depend_on_the_plaintext_only_not_on_how_it_is_fed() {
        let body = body();
        let whole = framed(&[&body]);
        let lines: Vec<&[u8]> = body.split_inclusive(|&b| b == b'\n').collect();
        assert_eq!(framed(&lines), whole);
        let odd: Vec<&[u8]> = body.chunks(65_537).collect();
        assert_eq!(framed(&odd), whole);
    }

    #[test]
    fn frames_end_lines_and_only_the_last_is_short() {
        let body = body();
        let out = framed(&[&body]);
        let scan = scan_frames(&out).expect("frames");
        assert!(scan.frames.len() > 3, "{} frames", scan.frames.len());
        let mut plain = Vec::new();
        let last = scan.frames.len() - 1;
        for (i, range) in scan.frames.iter().enumerate() {
            let mut frame_plain = Vec::new();
            Decompressor::new()
                .expect("decompressor")
                .feed(&out[range.clone()], &mut frame_plain);
            assert_eq!(frame_plain.last(), Some(&b'\n'), "frame {i}");
            if i < last {
                assert!(frame_plain.len() >= BODY_FRAME_BYTES, "frame {i}");
                let before_cut = &frame_plain[BODY_FRAME_BYTES - 1..frame_plain.len() - 1];
                assert!(
                    !before_cut.contains(&b'\n'),
                    "frame {i} runs past a line end"
                );
            }
            assert_eq!(
                compress_frame(&frame_plain).expect("frame"),
                &out[range.clone()]
            );
            plain.extend(frame_plain);
        }
        assert_eq!(plain, body);
    }

    #[test]
    fn a_short_or_empty_body_is_one_frame_or_none() {
        assert_eq!(
            framed(&[b"a\n", b"b\n"]),
            compress_frame(b"a\nb\n").expect("frame")
        );
        assert!(framed(&[]).is_empty());
    }
}
