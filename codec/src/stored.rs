//! stored (stub).
