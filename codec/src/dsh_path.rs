//! dsh_path (stub).
