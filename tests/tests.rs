//! sessionlog's integration tests: one binary, one module per area.

mod append;
mod concurrency;
mod corpus;
mod corruption;
mod crash;
mod faults;
mod fixtures;
mod fork;
mod fork_v4;
mod generations;
mod hostile;
mod hostile_props;
mod listing;
mod migrate;
mod power;
mod projections;
mod reader;
mod repair;
mod root;
mod roundtrip;
mod state;
mod surface;
mod v4_verdicts;
mod views;
mod wal;
mod zstd;
