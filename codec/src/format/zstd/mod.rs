//! The `.jsonl.zstd` container: a concatenation of independent, checksummed Zstandard frames,
//! frame 0 holding exactly the header line and each later frame one durable batch (spec §3).
//!
//! - `scan`: the structural frame scanner ([`scan_frames`]: frame ranges and the torn start, no
//!   decoding), with the byte layout of a frame;
//! - `decode`: block decoding of one frame ([`FrameDecoder`]), strict for complete frames,
//!   best-effort for a torn final frame; [`Decompressor`], `zstd -dc` of a whole artifact;
//! - `read`: the whole-artifact reader in DSH's check order ([`read_frames`], [`FrameReader`]),
//!   and the listing's header read ([`read_header_line`]);
//! - `write`: frame authoring byte-identical to Node's `zlib.zstdCompress` ([`compress_frame`],
//!   [`FrameCompressor`]);
//! - `body_frames`: the line-aligned framing of a plain session's body when it is rendered as
//!   `.jsonl.zstd` ([`BodyFramer`]), a function of the plaintext alone.
//!
//! Invariant: every refusal is an [`Error::Zstd`] whose message is DSH's own text, so the engine
//! reports what DSH would report. No file I/O happens here.

mod body_frames;
mod decode;
mod read;
mod scan;
mod write;

pub use body_frames::{BodyFramer, BODY_FRAME_BYTES};
pub use decode::{Decompressor, FrameDecoder};
pub use read::{
    check_header_frame, read_frames, read_header_line, DecodedFrame, FrameReader, TornFrame,
    ZstdLog,
};
pub use scan::{scan_frames, scan_frames_limited, FrameScan, MAGIC_BYTES};
pub use write::{compress_frame, FrameCompressor};

use crate::Error;

/// DSH's text when a complete frame's plaintext leaves the JSONL scanner uncommitted (the scan
/// itself belongs to the JSONL reader; the message is here so both encodings agree on it).
pub const TORN_RECORD_IN_COMPLETE_FRAME: &str =
    "corrupt Zstandard session log: complete frame contains a torn JSONL record";

/// DSH's text for an artifact without one complete frame.
pub const HEADER_LESS: &str = "empty or header-less Zstandard session log";

/// DSH's `corrupt Zstandard session log: <detail>`.
fn corrupt(detail: String) -> Error {
    Error::Zstd {
        message: format!("corrupt Zstandard session log: {detail}"),
    }
}

/// DSH's refusal of an artifact with no complete frame.
fn header_less() -> Error {
    Error::Zstd {
        message: HEADER_LESS.to_owned(),
    }
}
