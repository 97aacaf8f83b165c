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
    /// An operation whose logical model is not implemented for the session's format generation.
    #[error("session \"{id}\" is format v{version}: {what} is not served for this format yet (its events and exact bytes are)")]
    FormatNotServed {
        /// The session id.
        id: String,
        /// The served generation's version.
        version: u32,
        /// What was asked.
        what: String,
    },
    /// A message projection cannot be registered (DSH's message).
    #[error("{0}")]
    Projection(String),
    /// A session directory whose generation files disagree (names, headers, encodings).
    #[error("{0}")]
    Generation(String),
    /// A logical query on a session whose log DSH would not load.
    #[error("session \"{id}\" has no logical view: DSH's reader says {verdict}")]
    NotLoadable {
        /// The session id.
        id: String,
        /// The verdict.
        verdict: String,
    },
    /// A migration to the current format was refused (DSH's reason, or why this store cannot
    /// publish it); nothing was written.
    #[error("session \"{id}\": migration refused: {reason}")]
    Migration {
        /// The session id.
        id: String,
        /// Why, in DSH's words where DSH has them.
        reason: String,
    },
    /// An append broke one of DSH's append rules; nothing was written.
    #[error("session \"{id}\"{}: {rule}; nothing was appended", seq.map(|s| format!(" seq {s}")).unwrap_or_default())]
    Rejected {
        /// The session id.
        id: String,
        /// The seq the offending event would have taken, when one event is at fault.
        seq: Option<u64>,
        /// DSH's rule, in DSH's words where DSH has them.
        rule: String,
    },
    /// The caller's expected next seq is stale; nothing was written.
    #[error("session \"{id}\": append expected next seq {expected}, but the log's next seq is {actual}; nothing was appended")]
    StaleSeq {
        /// The session id.
        id: String,
        /// What the caller expected.
        expected: u64,
        /// The session's actual next seq.
        actual: u64,
    },
    /// The session cannot take appends in its state.
    #[error("session \"{id}\" cannot take appends: {reason}")]
    NotAppendable {
        /// The session id.
        id: String,
        /// Why.
        reason: String,
    },
    /// The store is open elsewhere: another process, or another handle in this process. One
    /// handle at a time writes a store directory; nothing was opened.
    #[error("the store at {} is in use by another process or handle; close it first ({reason})", path.display())]
    Locked {
        /// The store directory.
        path: PathBuf,
        /// Which lock is held: the store's own (`sessionlog.lock`) or RocksDB's (`LOCK`).
        reason: String,
    },
    /// The process holding the store reopened it since this reader opened beside it: the
    /// reader's view can no longer be trusted to hold every event; open a new reader
    /// ([`Store::reopen_beside`](crate::Store::reopen_beside)).
    #[error("the process holding the store at {} reopened it; this reader must reopen to see it whole", path.display())]
    HolderReopened {
        /// The store directory.
        path: PathBuf,
    },
    /// A write to a store opened beside the process that holds it (a read-only secondary
    /// instance).
    #[error("the store at {} is held by another process and open here for reading only; write through that process", path.display())]
    ReadOnly {
        /// The store directory.
        path: PathBuf,
    },
    /// A search query the index cannot answer as asked (an unknown value, an overlong text, a
    /// text the query language does not parse); nothing was searched.
    #[error("search query: {reason}")]
    Query {
        /// What is wrong with it and what is accepted.
        reason: String,
    },
    /// The session index (`search/` in the store directory) could not be read or written; the
    /// log is untouched, and `sessionlog reindex` rebuilds the index from it.
    #[error("session index: {detail}")]
    SearchIndex {
        /// What failed.
        detail: String,
    },
    /// A feed cursor that does not belong to this store, or is not a cursor.
    #[error("cursor \"{cursor}\": {reason}")]
    Cursor {
        /// The cursor as given.
        cursor: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A WAL file holds a complete record after damage: replaying it would silently drop the
    /// acknowledged writes past the damage (RocksDB's reader stops there), so nothing was opened.
    #[error("WAL file {} is corrupt at byte {offset}, and a complete record follows at byte {record}: replay would silently drop the acknowledged writes after the damage, so the store was not opened; nothing was changed", path.display())]
    WalDamaged {
        /// The WAL file.
        path: PathBuf,
        /// Where its records stop reading cleanly.
        offset: u64,
        /// The complete, checksummed record found after that.
        record: u64,
    },
    /// A durable write failed earlier; the store refuses writes until it is reopened.
    #[error("the store refuses writes after a failed durable write; reopen it (acknowledged data is intact)")]
    Poisoned,

    /// The commit hook's system of record committed the batch, but this store's write after it
    /// failed (the store is then poisoned): the append is not acknowledged, yet the batch is
    /// in the system of record. Appending it again is refused (the store refuses writes until
    /// reopened); once reopened, acquiring the session catches the batch up from there.
    #[error("session \"{id}\" batch {batch}: outcome unknown: the fleet's system of record committed the batch, but writing it to this host's store failed while {context}: {source}; this store refuses writes until it is reopened, and acquiring the session then brings the batch in")]
    OutcomeUnknown {
        /// The session.
        id: String,
        /// The session's batch number.
        batch: u64,
        /// What the store was doing.
        context: String,
        /// RocksDB's error.
        source: rocksdb::Error,
    },

    /// The store (or the queue the operation went through) was closed.
    #[error("the store is closed")]
    Closed,

    /// The store's commit hook (its system of record) refused the batch; nothing was written.
    #[error("{}; nothing was appended", .0.message)]
    Refused(Refusal),
    /// A write that would change a store with a commit hook (the index of a fleet) without
    /// reaching its system of record; nothing was written. The store's commit layer refuses
    /// every such write, whichever operation makes it.
    #[error("this store is the index of a fleet: {write} would change this host's store alone, not the fleet's system of record; run it through the fleet, or on a store of its own; nothing was written")]
    IndexOfFleet {
        /// The write refused, as its commit names it (`committing session "ID"`, `marking
        /// session "ID"`, `purging deleted sessions`, …).
        write: String,
    },
    /// One failure reported to every append that shared its group commit.
    #[error(transparent)]
    Shared(std::sync::Arc<Error>),
    /// DSH's own code throws on this session's surface at the requested point.
    #[error("session \"{id}\": DSH's surface projection fails: {reason}")]
    SurfaceFailed {
        /// The session id.
        id: String,
        /// DSH's message.
        reason: String,
    },
    /// A seq past the end of the log.
    #[error("session \"{id}\" has {events} events; seq {seq} is past its end")]
    OutOfRange {
        /// The session id.
        id: String,
        /// The seq asked for.
        seq: u64,
        /// Events in the log.
        events: u64,
    },
    /// A recorded request differs from the one the log reconstructs.
    #[error("session \"{id}\" turn {turn} step {step}: log reconstruction mismatch at {what}")]
    ReconstructionMismatch {
        /// The session id.
        id: String,
        /// The turn.
        turn: i64,
        /// The step.
        step: i64,
        /// The first differing field (`header.<key>`) or message (`messages[i]`).
        what: String,
    },
    /// The log holds no such step.
    #[error("session \"{id}\" has no dispatched step {step} in turn {turn}")]
    NoSuchStep {
        /// The session id.
        id: String,
        /// The turn.
        turn: i64,
        /// The step.
        step: i64,
    },
    /// A fork DSH would refuse, with DSH's code (`OPEN_TURN`, `INVALID_BOUNDARY`, …).
    #[error("{code}: {message}")]
    Fork {
        /// DSH's `SessionForkError` code.
        code: &'static str,
        /// DSH's message.
        message: String,
    },
    /// No projection unit by that name.
    #[error("no projection unit \"{unit}\" (known units: {known})")]
    UnknownUnit {
        /// The name asked for.
        unit: String,
        /// The known units.
        known: String,
    },
    /// The session's bytes are in object storage, not in the store: a host reads it through
    /// its archive (the `sessionlog` CLI does), and `restore` brings it back for writing.
    #[error("session \"{id}\" is archived at {location}: its bytes are not in the store (restore it to write to it)")]
    Archived {
        /// The session id.
        id: String,
        /// Where its served generation's object is, `s3://BUCKET/KEY`.
        location: String,
    },
    /// An archive or a restore of the session was refused; nothing was changed.
    #[error("session \"{id}\": {reason}; nothing was changed")]
    Archive {
        /// The session id.
        id: String,
        /// Why.
        reason: String,
    },
    /// Invalid options.
    #[error("invalid options: {0}")]
    Options(String),
    /// A broken internal invariant of the engine (a bug, never the caller's input).
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// A copy of this error for each caller that shared the failed operation.
    pub fn duplicate(&self) -> Error {
        match self {
            Error::Poisoned => Error::Poisoned,
            Error::Closed => Error::Closed,
            Error::ReadOnly { path } => Error::ReadOnly { path: path.clone() },
            Error::Refused(r) => Error::Refused(r.clone()),
            Error::Shared(e) => Error::Shared(std::sync::Arc::clone(e)),
            Error::IndexOfFleet { write } => Error::IndexOfFleet {
                write: write.clone(),
            },
            Error::Storage { context, source } => Error::Storage {
                context: context.clone(),
                source: source.clone(),
            },
            Error::OutcomeUnknown {
                id,
                batch,
                context,
                source,
            } => Error::OutcomeUnknown {
                id: id.clone(),
                batch: *batch,
                context: context.clone(),
                source: source.clone(),
            },
            other => Error::Shared(std::sync::Arc::new(Error::Internal(other.to_string()))),
        }
    }

    /// Wrap a RocksDB error with what the store was doing.
    pub(crate) fn storage(context: impl Into<String>) -> impl FnOnce(rocksdb::Error) -> Error {
        let context = context.into();
        move |source| Error::Storage { context, source }
    }
}

/// The first error met inside a callback that can only answer `Option` (the codec's lookups of
/// earlier events): the callback answers `None`, and the caller reports the kept error instead
/// of what the codec made of the missing value. So a storage or crc failure is never taken for
/// an absent event, nor blamed on the caller as a broken rule.
#[derive(Default)]
pub(crate) struct FirstError(std::cell::RefCell<Option<Error>>);

impl FirstError {
    /// The value of `result`, or `None` after keeping its error.
    pub(crate) fn keep<T>(&self, result: Result<Option<T>>) -> Option<T> {
        result.unwrap_or_else(|e| {
            self.0.borrow_mut().get_or_insert(e);
            None
        })
    }

    /// `Err` with the first kept error, if any.
    pub(crate) fn check(&self) -> Result<()> {
        match self.0.borrow_mut().take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Why the hook refused a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalKind {
    /// Another owner holds the session now: this host's ownership was taken over.
    Fenced,
    /// The system of record's log of the session is not where the batch expects it.
    Stale,
    /// The system of record could not be reached, or did not commit the batch.
    Unavailable,
    /// The system of record cannot hold the batch as it is (an id or a size past its limits,
    /// named in the message): appending it again is refused again.
    Unstorable,
}

/// The hook's refusal of one batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Why.
    pub kind: RefusalKind,
    /// What happened, for the error the caller gets (naming no secret).
    pub message: String,
}
