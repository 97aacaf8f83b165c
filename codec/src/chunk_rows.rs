//! chunk_rows (stub).
