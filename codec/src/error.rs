//! The codec's one error type. Every variant says where (byte offset, line, seq) and which rule.

/// Result alias for codec operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a codec can refuse.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Text that `JSON.parse` would reject.
    #[error("invalid JSON at byte {offset}: {reason}")]
    Json {
        /// Byte offset of the problem in the parsed text.
        offset: usize,
        /// What JSON grammar rule was broken.
        reason: &'static str,
    },
    /// Nesting beyond what the parser accepts (kept bounded so no input can exhaust the stack).
    #[error("JSON nesting deeper than {limit} levels at byte {offset}")]
    TooDeep {
        /// Byte offset where the limit was crossed.
        offset: usize,
        /// The nesting limit.
        limit: usize,
    },
    /// A value the engine was asked to author that is not lossless JSON (DSH `snapshotJsonValue`).
    #[error("value at {path} is not lossless JSON: {rule}")]
    NotLossless {
        /// JS-style path to the offending value, e.g. `data.items[3]`.
        path: String,
        /// The rule it breaks, e.g. `-0 is not allowed`.
        rule: &'static str,
    },
    /// A stored record whose bytes do not decode or whose checksum does not match.
    #[error("stored record is damaged: {0}")]
    StoredRecord(String),
    /// A `.jsonl.zstd` artifact that DSH's reader would refuse; the message is DSH's own text.
    #[error("{message}")]
    Zstd {
        /// DSH's diagnostic, e.g. `invalid frame magic at byte 1234`.
        message: String,
    },
    /// A path component DSH cannot encode (empty id or cwd).
    #[error("cannot encode path component: {0}")]
    PathComponent(&'static str),
    /// An event the surface, message or request-header folds refuse where DSH's own code throws.
    /// `rule` is DSH's message text; a `TypeError: ` prefix marks a shape DSH's code cannot read
    /// (e.g. a legacy `assistant/message` without `data.message`) rather than a rule of its own.
    #[error("surface fold refused the event at seq {seq}: {rule}")]
    Surface {
        /// Seq of the event being folded (or of the surface node being projected).
        seq: u64,
        /// DSH's message, e.g. `surface replace: start seq 0 not found in surface`.
        rule: String,
    },
}
