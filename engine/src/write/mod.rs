//! Writes, the engine's fourth layer: every change to the store goes through one
//! [`session_batch::SessionBatch`] (the only writer of the `sessions` CF's keys). New sessions
//! are written by `session_writer.rs`, appended batches by `appended_batch.rs` (lines authored by
//! the codec's one rule, `sessionlog_codec::format::lines`), indexes by `indexer.rs`, and rewrites under a session's lock by
//! `rewrite.rs`. Operations (`ops/`) decide what to write; this layer decides how.

pub(crate) mod appended_batch;
pub(crate) mod indexer;
pub(crate) mod recovery;
pub(crate) mod rewrite;
pub(crate) mod session_batch;
pub(crate) mod session_writer;
