//! How the engine's reports serialize (serde): the one rendering that the CLI's `--json` and
//! the Node binding both emit, so a report reads the same from either. Field names are
//! camelCase, as JavaScript reads them; a verdict is its text (`clean`, `torn`, `corrupt: …`,
//! `unsupported: …`), never the stored enum's layout (which `layout/meta.rs` keeps for itself).

use std::fmt::Display;

use serde::Serializer;

/// Serialize `value` as its `Display` text (a verdict as `clean`, `corrupt: …`).
pub(crate) fn as_text<T: Display, S: Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(value)
}
