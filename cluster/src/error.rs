//! The cluster crate's one error type. Every message names the session and what was refused;
//! none ever holds a password (connection errors are worded from the redacted URL).

/// What went wrong in the fleet.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The local store refused or failed.
    #[error(transparent)]
    Store(#[from] sessionlog_engine::Error),

    /// A connection URL or option the fleet cannot use.
    #[error("cluster configuration: {0}")]
    Config(String),

    /// PostgreSQL could not be reached, or a statement failed (`during` names the operation).
    #[error("PostgreSQL at {url}, while {during}: {detail}")]
    Postgres {
        /// The redacted URL.
        url: String,
        /// What the fleet was doing.
        during: String,
        /// PostgreSQL's or the connection's message.
        detail: String,
    },

    /// The schema in PostgreSQL is missing or of another version.
    #[error("the sessionlog schema in PostgreSQL {0}; run `sessionlog cluster init`")]
    Schema(String),

    /// No session of that id in the fleet.
    #[error("no session \"{0}\" in the fleet")]
    UnknownSession(String),

    /// Another host holds a live lease on the session.
    #[error("session \"{id}\" is owned by host \"{owner}\" (lease {lease_left:.1} s left); take it over with force")]
    Owned {
        /// The session.
        id: String,
        /// Its owner.
        owner: String,
        /// Seconds left on the owner's lease.
        lease_left: f64,
    },

    /// This host does not hold the session (never acquired, or taken over since).
    #[error("session \"{0}\" is not held by this host: acquire it first")]
    NotHeld(String),

    /// A file the fleet cannot import; nothing was written.
    #[error("importing {name}: {why}")]
    Import {
        /// The file.
        name: String,
        /// Why.
        why: String,
    },

    /// An operation the fleet does not carry, asked of a host of a fleet (`host::LocalOnly`);
    /// nothing was done.
    #[error("{what} is not carried by the fleet: it works on a store of its own, and host \"{host}\"'s store is the fleet's index; run it on a store outside the fleet")]
    NotCarried {
        /// The operation.
        what: String,
        /// This host.
        host: String,
    },

    /// An operation of a fleet (acquire, release, catch up), asked of a store of its own.
    #[error(
        "the store is not a host of a fleet: open it as one (with the fleet's PostgreSQL URL)"
    )]
    NotAFleet,

    /// The local store and PostgreSQL disagree in a way catch-up cannot mend.
    #[error("session \"{id}\": {detail}")]
    Diverged {
        /// The session.
        id: String,
        /// How.
        detail: String,
    },
}

/// The cluster crate's result.
pub type Result<T> = std::result::Result<T, Error>;
