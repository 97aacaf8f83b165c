//! Pure codecs for DSH session logs: no I/O, no RocksDB.
//!
//! - [`json`]: JS-faithful `JSON.parse` / `JSON.stringify` and the lossless-JSON admission gate;
//! - [`header`]: the session header line (DSH's `isHeaderLine` and writer key order);
//! - [`chunk_rows`]: packing `assistant/chunk` runs into storage rows and expanding them;
//! - [`scanner`]: the JSONL reader with DSH's strict-reader semantics and verdicts;
//! - [`log_reader`]: DSH's reader over a whole log (scanner, vocabulary, migration, restore);
//! - [`stored`]: the bincode + crc32 encoding of what the engine keeps per line;
//! - [`zstd`]: the `.jsonl.zstd` frame scanner, decoder and Node-identical frame writer;
//! - [`dsh_path`]: DSH's session-root path encoding;
//! - [`generation`]: format generations and their file names; [`seq_ranges`]: `sourceEventSeqs` ranges;
//! - [`rows`]: the one-event-per-row envelope of V2–V4 files; [`lines`]: how a batch of events
//!   becomes log lines;
//! - [`message_shape`]: the message a DSH 0.2 `Session` requires of a message event.
#![forbid(unsafe_code)]

mod by_length;
pub mod chunk_rows;
pub mod dsh_path;
mod error;
pub mod event;
pub mod generation;
pub mod header;
pub mod invariant;
pub mod json;
pub mod known_types;
pub mod lines;
pub mod log_reader;
pub mod message_shape;
pub mod migrate;
pub mod open_turn;
pub mod projection;
pub mod relations;
pub mod repair;
pub mod rows;
pub mod scanner;
pub mod seq_ranges;
pub mod stored;
pub mod surface;
pub mod zstd;

pub use error::{Error, Result};
