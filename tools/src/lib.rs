//! Library side of the `sessionlog` tool: the pieces the CLI, tests and benches share.
//!
//! - [`gen`]: the deterministic DSH-shaped workload generator behind `sessionlog gen`.
//! - [`hosting`]: the multi-session hosting benchmark behind `sessionlog bench hosting`, with
//!   DSH's JSONL and SQLite backends as peers.
//! - [`stress`]: the kill -9 crash harness behind `sessionlog stress` and the crash test.
//! - [`power`]: the power-loss harness (LazyFS) behind `sessionlog stress --power-loss` and the
//!   power test.
#![forbid(unsafe_code)]

pub mod gen;
pub mod hosting;
pub mod power;
pub mod stress;
