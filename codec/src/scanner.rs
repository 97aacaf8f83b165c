//! scanner (stub).
