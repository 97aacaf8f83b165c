//! sessionlog's integration tests: one binary, one module per area.

mod corpus;
mod fixtures;
mod hostile;
mod roundtrip;
mod zstd;
