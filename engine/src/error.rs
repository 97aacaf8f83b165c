//! The engine's one error type. Every variant names what a user needs to act: the session, the
//! file, the line or seq, and the rule that was broken.

use std::path::PathBuf;

/// Result alias for engine operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the store can refuse or fail at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A codec refused bytes or a value.
    #[error(transparent)]
    Codec(#[from] sessionlog_codec::Error),
    /// RocksDB failed.
    #[error("storage error while {context}: {source}")]
    Storage {
        /// What the store was doing.
        context: String,
        /// RocksDB's error.
        source: rocksdb::Error,
    },
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// An input file is not a DSH session log; nothing was written.
    #[error("{source_name}: not a session log: {reason}")]
    NotASession {
        /// The input's name.
        source_name: String,
        /// Why.
        reason: String,
    },
    /// A line no value model here can hold; nothing was written.
    #[error("{source_name}: session \"{id}\" line {line}: {reason}; nothing was imported")]
    Unstorable {
        /// The input's name.
        source_name: String,
        /// The session id.
        id: String,
        /// 1-based body line number.
        line: u64,
        /// The rule.
        reason: String,
    },
    /// Strict import refused a session DSH's reader would not load; nothing was written.
    #[error("{source_name}: session \"{id}\" rejected by --strict: DSH's reader says {verdict}")]
    StrictRejected {
        /// The input's name.
        source_name: String,
        /// The session id.
        id: String,
        /// The reader verdict.
        verdict: String,
    },
    /// The id is already stored; nothing was written or overwritten.
    #[error("{source_name}: session \"{id}\" already exists in the store; nothing was imported")]
    DuplicateSession {
        /// The input's name.
        source_name: String,
        /// The session id.
        id: String,
    },
    /// A file in a DSH session root whose header does not name its location (DSH's identity
    /// rule); nothing was written.
    #[error("{0}")]
    Identity(String),
    /// A DSH session root that DSH itself would refuse (flat layout, mixed encodings).
    #[error("{0}")]
    RootLayout(String),
    /// No such session.
    #[error("no session \"{id}\" in the store")]
    UnknownSession {
        /// The session id asked for.
        id: String,
    },
    /// Stored data failed a consistency check.
    #[error("session \"{id}\": stored data is corrupt: {detail}")]
    Corrupt {
        /// The session id (or session number when the id is unknown).
        id: String,
        /// What was found.
        detail: String,
    },
    /// A logical query on a session whose log DSH would not load.
    #[error("session \"{id}\" has no logical view: DSH's reader says {verdict}")]
    NotLoadable {
        /// The session id.
        id: String,
        /// The verdict.
        verdict: String,
    },
    /// Invalid options.
    #[error("invalid options: {0}")]
    Options(String),
}

impl Error {
    /// Wrap a RocksDB error with what the store was doing.
    pub(crate) fn storage(context: impl Into<String>) -> impl FnOnce(rocksdb::Error) -> Error {
        let context = context.into();
        move |source| Error::Storage { context, source }
    }
}
