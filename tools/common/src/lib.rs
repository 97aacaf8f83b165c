//! What the two binaries of `tools/` share: the `sessionlog` CLI users run (`tools/cli`) and the
//! harness that generates workloads, benchmarks and crash-tests the store (`tools/harness`).
//! Neither links the other; both link this, so that a flag means the same in both and the
//! import benchmark times the CLI's own import.
//!
//! - [`args`]: the store flags both take (`--durability`, `--v0-reads`, `--no-wal-recycling`,
//!   `--blob-files`, `--no-direct-io`) and the engine [`Options`](sessionlog_engine::Options)
//!   they make; the log-format flag's values;
//! - [`export`]: many sessions exported into one stream, one worker per core;
//! - [`import`]: bulk import of files, directories and DSH session roots, one worker per core;
//! - [`par`]: one job per item on one worker per core, results in item order;
//! - [`output`]: JSON lines through the codec's JS-exact stringify, and broken-pipe detection.
#![forbid(unsafe_code)]

pub mod args;
pub mod export;
pub mod import;
pub mod output;
pub mod par;
