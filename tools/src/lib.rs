//! Library side of the `sessionlog` tool: the pieces the CLI, tests and benches share.
//!
//! - [`disk_cgroup`]: a block-IO cgroup that limits a disk's write IOPS (a provisioned-IOPS
//!   volume, modelled by the kernel) and counts the write requests its members issue.
//! - [`gen`]: the deterministic DSH-shaped workload generator behind `sessionlog gen`.
//! - [`hosting`]: the multi-session hosting benchmark behind `sessionlog bench hosting`, with
//!   DSH's JSONL and SQLite backends as peers.
//! - [`stress`]: the kill -9 crash harness behind `sessionlog stress` and the crash test.
//! - [`power`]: the power-loss harness (LazyFS) behind `sessionlog stress --power-loss` and the
//!   power test.
#![forbid(unsafe_code)]

pub mod disk_cgroup;
pub mod gen;
pub mod hosting;
pub mod power;
pub mod stress;
