//! The bytes of a DSH session log, and what the engine keeps of them. Everything here is a pure
//! encoding or decoding over [`crate::json`] values; which events a log may hold and what they
//! mean is [`crate::rules`].
//!
//! - [`header`]: the session header line (DSH's `isHeaderLine`, its strict header check, and the
//!   writer's key order);
//! - [`event`]: a live event's envelope, authored as DSH's `Session.append` builds it;
//! - [`known_types`]: the event types each generation's reader knows, and what it refuses
//!   outside them;
//! - [`rows`]: the one-event-per-row envelope of V2–V4 files and V4's row admission;
//! - [`chunk_rows`]: packing `assistant/chunk` runs into storage rows and expanding them (V0);
//! - [`seq_ranges`]: the range encoding of `sourceEventSeqs`;
//! - [`lines`]: how a batch of events becomes log lines (the one line-authoring rule);
//! - [`zstd`]: the `.jsonl.zstd` container: frame scanner, decoder, whole-file reader and the
//!   Node-identical frame writer;
//! - [`generation`]: format generations and their file names;
//! - [`dsh_path`]: DSH's session-root path encoding;
//! - [`stored`]: the crc32-checked blocks of lines the engine keeps per write batch.

pub mod chunk_rows;
pub mod dsh_path;
pub mod event;
pub mod generation;
pub mod header;
pub mod known_types;
pub mod lines;
pub mod rows;
pub mod seq_ranges;
pub mod stored;
pub mod zstd;
