//! header (stub).
