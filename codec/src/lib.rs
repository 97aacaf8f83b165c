//! Pure codecs for DSH session logs: no I/O, no RocksDB.
//!
//! DSH (DeepSeek Harness) writes a session as a log file: a header line, then one line per event
//! (or per packed run of chunk events), `JSON.stringify` text, optionally in Zstandard frames.
//! This crate reads and writes those bytes exactly as DSH does and holds DSH's rules over the
//! events; the engine stores what it decodes here. Five layers, each importing only the ones
//! before it:
//!
//! - [`json`]: JS-faithful JSON: the value model, `JSON.parse`, byte-exact `JSON.stringify`,
//!   `Number::toString`, the lossless-JSON admission gate, and the interning of DSH's words.
//! - [`format`](mod@format): the bytes of a log and what the engine keeps of them: the header
//!   line, event envelopes, the event vocabulary of each generation, rows and packed chunk rows,
//!   authored lines, `sourceEventSeqs` ranges, the `.jsonl.zstd` container, generation file
//!   names, DSH's root paths, and the engine's stored blocks.
//! - [`rules`]: DSH's semantics over the events: its strict reader and verdicts (the scanner),
//!   the model-visible surface and message projections, the projection units, the V4 lifecycle
//!   relationships, crash repair and open-turn closers, the invariant companion and the message
//!   shape.
//! - [`migrate`]: DSH 0.2's migration chain, V0→V1→V2→V3→V4, streamed event by event.
//! - [`log_reader`]: DSH's reader over a whole log, line by line, as one verdict: the scanner, the
//!   V0 vocabulary, the migration chain's refusals and the V4 restore. Import runs it over a
//!   file; the seam's appends run it on over the lines they add.
//!
//! Beside them: [`Error`] (the crate's one error type, in `error`), and `vocabulary`, the plain
//! lists of DSH's words (event types per release, chunk kinds, row tags) that every layer names,
//! kept below `json` so that the JSON layer can intern them without knowing DSH's rules.
#![forbid(unsafe_code)]

mod error;
pub mod format;
pub mod json;
pub mod log_reader;
pub mod migrate;
pub mod rules;
mod vocabulary;

pub use error::{Error, Result};
