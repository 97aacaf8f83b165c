//! How this crate's reports serialize (serde), the one rendering the CLI's `--json` and the Node
//! binding both emit: camelCase fields, and each per-session list as objects naming the session
//! (`[{id, error}]`, `[{id, reason}]`, `[{id, bytes}]`) rather than as pairs.

use serde::{Serialize, Serializer};

/// A session (or an object) and why it failed.
#[derive(Serialize)]
struct Failed<'a> {
    id: &'a str,
    error: &'a str,
}

/// A session and why it stays.
#[derive(Serialize)]
struct Kept<'a> {
    id: &'a str,
    reason: &'a str,
}

/// A session and the bytes of its objects.
#[derive(Serialize)]
struct Size<'a> {
    id: &'a str,
    bytes: u64,
}

/// `[(id, error)]` as `[{id, error}]`.
pub(crate) fn errors<S: Serializer>(list: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|(id, error)| Failed { id, error }))
}

/// `[(id, reason)]` as `[{id, reason}]`.
pub(crate) fn reasons<S: Serializer>(list: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|(id, reason)| Kept { id, reason }))
}

/// `[(id, bytes)]` as `[{id, bytes}]`.
pub(crate) fn sizes<S: Serializer>(list: &[(String, u64)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|(id, bytes)| Size { id, bytes: *bytes }))
}
