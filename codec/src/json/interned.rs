//! The strings DSH events repeat in every session, held as `&'static str` when a [`JsString`] of
//! one is built from text: event types, a chunk's kind, a message's role, the envelope's and a
//! chunk's keys. A host building its events through `Value::from(&str)` or `JsString::from`, and
//! the parser reading lines, then allocate nothing for them, and every copy of such an event
//! copies them for free. On the hosting path each of those allocations was a read of a free
//! block the previous round had left cold.
//!
//! [`JsString`]: super::JsString

use std::sync::OnceLock;

use super::by_length::ByLength;
use crate::vocabulary::{self, DELTA_KINDS, ROW_TAGS};

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

/// The words interned.
fn words() -> impl Iterator<Item = &'static str> {
    vocabulary::event_types()
        .chain(DELTA_KINDS)
        .chain(ROW_TAGS)
        .chain(ROLES)
        .chain(KEYS)
}

/// The vocabulary's table.
fn vocabulary() -> &'static ByLength<()> {
    static TABLE: OnceLock<ByLength<()>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = ByLength::new();
        for word in words() {
            table.entry(word);
        }
        table
    })
}

/// The vocabulary's copy of `bytes`, if it holds them.
pub(crate) fn interned(bytes: &[u8]) -> Option<&'static str> {
    vocabulary().get(bytes).map(|(word, ())| word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_of_the_vocabulary_and_nothing_else_is_interned() {
        for word in words() {
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
