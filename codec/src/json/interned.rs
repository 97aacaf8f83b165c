//! The strings DSH events repeat in every session, held as `&'static str` when a [`JsString`] of
//! one is built from text: event types, a chunk's kind, a message's role, the envelope's and a
//! chunk's keys. A host building its events through `Value::from(&str)` or `JsString::from`, and
//! the parser reading lines, then allocate nothing for them, and every copy of such an event
//! copies them for free. On the hosting path each of those allocations was a read of a free
//! block the previous round had left cold.
//!
//! [`JsString`]: super::JsString

use std::sync::OnceLock;

use crate::chunk_rows::{DELTA_KINDS, ROW_TAGS};
use crate::known_types;

/// Message roles.
const ROLES: [&str; 5] = ["user", "assistant", "system", "developer", "tool"];

/// Keys of the event envelope and of an `assistant/chunk`'s data and chunk.
const KEYS: [&str; 15] = [
    "type",
    "seq",
    "time",
    "data",
    "surfaceOp",
    "sourceEventSeqs",
    "ignorable",
    "turn",
    "step",
    "chunk",
    "index",
    "text",
    "id",
    "name",
    "argumentsDelta",
];

/// The vocabulary, by length; within a length, candidates are told apart by their first and
/// last bytes before a whole comparison.
fn by_length() -> &'static [Vec<&'static str>] {
    static TABLE: OnceLock<Vec<Vec<&'static str>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let words = known_types::event_types()
            .chain(DELTA_KINDS)
            .chain(ROW_TAGS)
            .chain(ROLES)
            .chain(KEYS);
        let mut table: Vec<Vec<&'static str>> = Vec::new();
        for word in words {
            if table.len() <= word.len() {
                table.resize(word.len() + 1, Vec::new());
            }
            if !table[word.len()].contains(&word) {
                table[word.len()].push(word);
            }
        }
        table
    })
}

/// The vocabulary's copy of `bytes`, if it holds them.
pub(crate) fn interned(bytes: &[u8]) -> Option<&'static str> {
    let (&first, &last) = (bytes.first()?, bytes.last()?);
    by_length().get(bytes.len())?.iter().copied().find(|w| {
        let b = w.as_bytes();
        b[0] == first && b[b.len() - 1] == last && b == bytes
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_of_the_vocabulary_and_nothing_else_is_interned() {
        for word in known_types::event_types()
            .chain(DELTA_KINDS)
            .chain(ROW_TAGS)
            .chain(ROLES)
            .chain(KEYS)
        {
            assert_eq!(interned(word.as_bytes()), Some(word), "{word}");
        }
        for other in [
            "",
            "x",
            "assistant/chunkX",
            "Assistant/chunk",
            "text-delt",
            "tyqe",
            "us",
        ] {
            assert_eq!(interned(other.as_bytes()), None, "{other:?}");
        }
    }
}
