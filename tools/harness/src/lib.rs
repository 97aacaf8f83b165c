//! sessionlog's harness: what generates workloads for the store, measures it beside its peers and
//! crash-tests it. The `sessionlog-harness` binary runs it (`gen`, `bench`, `stress`), and the
//! workspace's tests and benches use it as a library; the `sessionlog` binary users run links none
//! of it (no SQLite, no LazyFS, no cgroups).
//!
//! - [`gen`]: the deterministic DSH-shaped workload generator behind `sessionlog-harness gen`.
//! - [`hosting`]: the multi-session hosting benchmark behind `sessionlog-harness bench hosting`,
//!   with DSH's JSONL and SQLite backends as peers.
//! - [`disk_cgroup`]: a block-IO cgroup that limits a disk's write IOPS (a provisioned-IOPS
//!   volume, modelled by the kernel) and counts the write requests its members issue.
//! - [`stress`]: the kill -9 crash harness behind `sessionlog-harness stress` and the crash test.
//! - [`power`]: the power-loss harness (LazyFS) behind `sessionlog-harness stress --power-loss`
//!   and the power test.
//! - [`postgres`]: throwaway PostgreSQL clusters for the fleet's tests and benchmarks.
//! - [`patroni`]: a throwaway etcd + Patroni cluster (PostgreSQL with a synchronous standby)
//!   for the database-failover harness.
//! - [`failover`]: the database-failover harness behind `sessionlog-harness stress --cluster`.
//! - [`nemesis`]: the fleet under a nemesis behind `sessionlog-harness stress --fleet-nemesis`:
//!   host processes, blackholing proxies, seeded clients and faults, a history and its checker.
//! - [`process_tree`]: a process's descendants and the CPU time of a whole tree (a server's).
//! - [`requirement`]: how a test whose requirement is missing fails under CI and says what it
//!   skipped elsewhere.
//! - [`seaweed`]: a throwaway S3-compatible server (SeaweedFS) for the object-storage tests and
//!   benchmark.
#![forbid(unsafe_code)]

pub mod disk_cgroup;
pub mod failover;
pub mod gen;
pub mod hosting;
pub mod nemesis;
pub mod patroni;
pub mod postgres;
pub mod power;
pub mod process_tree;
pub mod requirement;
pub mod seaweed;
pub mod stress;
