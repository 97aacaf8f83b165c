//! sessionlog's integration tests: one binary, one module per area.

mod append;
mod corpus;
mod fixtures;
mod hostile;
mod reader;
mod repair;
mod root;
mod roundtrip;
mod state;
mod surface;
mod zstd;
