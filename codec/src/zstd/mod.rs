//! zstd (stub).
