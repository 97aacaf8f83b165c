//! The archive crate's one error type. Every variant names the object or session it is about;
//! none carries a credential (object storage errors are kept as their text, which names the
//! request and the server's answer, never the secret key: a test checks it).

/// Result alias for archive operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything an export, import, archive or restore can refuse or fail at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store refused or failed.
    #[error(transparent)]
    Engine(#[from] sessionlog_engine::Error),
    /// An `s3://` URL that names no bucket, or an object key object storage cannot hold.
    #[error("{0}")]
    Location(String),
    /// What the client needs is missing or unusable (region, endpoint, credentials).
    #[error("object storage configuration: {0}")]
    Config(String),
    /// A request to object storage failed.
    #[error("{what} {location}: {message}")]
    Request {
        /// What was being done (`uploading`, `reading`, `listing`, …).
        what: &'static str,
        /// The object or prefix, `s3://BUCKET/KEY`.
        location: String,
        /// The client's description of the failure.
        message: String,
    },
    /// An object already holds other bytes than the ones it would be given: it is never
    /// overwritten.
    #[error("{location} already exists with other bytes ({held}); it is never overwritten")]
    Conflict {
        /// The object, `s3://BUCKET/KEY`.
        location: String,
        /// What it holds (size and SHA-256) against what was to be written.
        held: String,
    },
    /// An object read back differs from what was written or recorded.
    #[error("{location} reads back as {got}, not {expected}")]
    Mismatch {
        /// The object, `s3://BUCKET/KEY`.
        location: String,
        /// Size and SHA-256 expected.
        expected: String,
        /// Size and SHA-256 read.
        got: String,
    },
    /// A local temporary file or directory failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl Error {
    /// A failed request of `what` on `location`, from the client's error.
    pub(crate) fn request(
        what: &'static str,
        location: impl Into<String>,
    ) -> impl FnOnce(object_store::Error) -> Error {
        let location = location.into();
        move |e| Error::Request {
            what,
            location,
            message: e.to_string(),
        }
    }

    /// A local I/O failure while doing `what`.
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }
}
