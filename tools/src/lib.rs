//! Library side of the `sessionlog` tool: the pieces the CLI, tests and benches share.
//!
//! - [`gen`]: the deterministic DSH-shaped workload generator behind `sessionlog gen`.
#![forbid(unsafe_code)]

pub mod gen;
