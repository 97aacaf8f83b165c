//! What crosses back to JavaScript: every operation settles one promise with an [`Outcome`].
//!
//! Invariant: a promise is always resolved, never rejected, from Rust; a failure travels as
//! `{code, message}` and `index.js` turns it into a JS `Error` carrying that `code`, because a
//! napi rejection can only carry napi's own status names as codes.

use napi::bindgen_prelude::Buffer;
use napi::{Env, JsDeferred, JsObject};
use napi_derive::napi;
use serde::Serialize;
use sessionlog_engine::{Error, RefusalKind};

/// The settled value of every promise the addon returns.
#[napi(object)]
pub struct Outcome {
    /// Stable error code (`SESSIONLOG_…`) when the operation failed.
    pub code: Option<String>,
    /// The engine's message when the operation failed.
    pub message: Option<String>,
    /// The result as JSON text.
    pub json: Option<String>,
    /// The result as plain text (the metrics' exposition).
    pub text: Option<String>,
    /// The result as bytes (exports).
    pub bytes: Option<Buffer>,
}

/// An operation's result before it reaches the JS thread.
pub enum Reply {
    /// Nothing to return.
    Done,
    /// JSON text.
    Json(String),
    /// Plain text, handed over as it is.
    Text(String),
    /// Bytes.
    Bytes(Vec<u8>),
    /// A failure with its stable code.
    Failed {
        /// `SESSIONLOG_…`.
        code: &'static str,
        /// What went wrong, naming the session, seq and rule.
        message: String,
    },
}

impl Reply {
    /// A failure of the binding itself (bad arguments, a closed store).
    pub fn failed(code: &'static str, message: impl Into<String>) -> Reply {
        Reply::Failed {
            code,
            message: message.into(),
        }
    }

    fn into_outcome(self) -> Outcome {
        let mut o = Outcome {
            code: None,
            message: None,
            json: None,
            text: None,
            bytes: None,
        };
        match self {
            Reply::Done => {}
            Reply::Json(text) => o.json = Some(text),
            Reply::Text(text) => o.text = Some(text),
            Reply::Bytes(bytes) => o.bytes = Some(bytes.into()),
            Reply::Failed { code, message } => {
                o.code = Some(code.to_owned());
                o.message = Some(message);
            }
        }
        o
    }
}

impl From<Error> for Reply {
    fn from(e: Error) -> Reply {
        Reply::Failed {
            code: code_of(&e),
            message: e.to_string(),
        }
    }
}

impl Reply {
    /// `value` as its report's one rendering (serde's JSON, the CLI's `--json` too), which
    /// `index.js` parses.
    pub fn json(value: &impl Serialize) -> Reply {
        match serde_json::to_string(value) {
            Ok(text) => Reply::Json(text),
            Err(e) => Reply::failed("SESSIONLOG_INTERNAL", format!("rendering a result: {e}")),
        }
    }
}

impl From<sessionlog_cluster::Error> for Reply {
    /// A host's failure with its stable code (the engine's own when the store failed).
    fn from(e: sessionlog_cluster::Error) -> Reply {
        use sessionlog_cluster::Error as E;
        let code = match &e {
            E::Store(inner) => code_of(inner),
            E::Config(_) => "SESSIONLOG_CLUSTER_CONFIG",
            E::Postgres { .. } => "SESSIONLOG_UNAVAILABLE",
            E::Schema(_) => "SESSIONLOG_CLUSTER_SCHEMA",
            E::UnknownSession(_) => "SESSIONLOG_UNKNOWN_SESSION",
            E::Owned { .. } => "SESSIONLOG_OWNED",
            E::NotHeld(_) => "SESSIONLOG_FENCED",
            E::Diverged { .. } => "SESSIONLOG_DIVERGED",
            E::Import { .. } | E::NotCarried { .. } => "SESSIONLOG_NOT_IN_FLEET",
            E::NotAFleet => "SESSIONLOG_NOT_CLUSTER",
            _ => "SESSIONLOG_ERROR",
        };
        Reply::failed(code, e.to_string())
    }
}

/// An engine's or a host's result as a reply: a success as its report's rendering
/// ([`Reply::json`]).
pub fn report<T: Serialize, E: Into<Reply>>(result: Result<T, E>) -> Reply {
    reply(result, |v| Reply::json(&v))
}

/// Turn an engine's or a host's result into a reply, rendering a success with `render`.
pub fn reply<T, E: Into<Reply>>(result: Result<T, E>, render: impl FnOnce(T) -> Reply) -> Reply {
    match result {
        Ok(v) => render(v),
        Err(e) => e.into(),
    }
}

/// The stable code of an engine error: one per variant, so callers can branch on it.
pub fn code_of(e: &Error) -> &'static str {
    match e {
        Error::Codec(_) => "SESSIONLOG_CODEC",
        Error::Storage { .. } => "SESSIONLOG_STORAGE",
        Error::OutcomeUnknown { .. } => "SESSIONLOG_OUTCOME_UNKNOWN",
        Error::Io { .. } => "SESSIONLOG_IO",
        Error::NotASession { .. } => "SESSIONLOG_NOT_A_SESSION",
        Error::Unstorable { .. } => "SESSIONLOG_UNSTORABLE",
        Error::StrictRejected { .. } => "SESSIONLOG_STRICT_REJECTED",
        Error::DuplicateSession { .. } => "SESSIONLOG_DUPLICATE_SESSION",
        Error::Identity(_) => "SESSIONLOG_IDENTITY",
        Error::RootLayout(_) => "SESSIONLOG_ROOT_LAYOUT",
        Error::UnknownSession { .. } => "SESSIONLOG_UNKNOWN_SESSION",
        Error::Corrupt { .. } => "SESSIONLOG_CORRUPT",
        Error::FormatNotServed { .. } => "SESSIONLOG_FORMAT_NOT_SERVED",
        Error::Projection(_) => "SESSIONLOG_PROJECTION",
        Error::Generation(_) => "SESSIONLOG_GENERATION",
        Error::NotLoadable { .. } => "SESSIONLOG_NOT_LOADABLE",
        Error::Migration { .. } => "SESSIONLOG_MIGRATION",
        Error::Rejected { .. } => "SESSIONLOG_REJECTED",
        Error::StaleSeq { .. } => "SESSIONLOG_STALE_SEQ",
        Error::NotAppendable { .. } => "SESSIONLOG_NOT_APPENDABLE",
        Error::Locked { .. } => "SESSIONLOG_LOCKED",
        Error::ReadOnly { .. } => "SESSIONLOG_READ_ONLY",
        Error::HolderReopened { .. } => "SESSIONLOG_HOLDER_REOPENED",
        Error::Cursor { .. } => "SESSIONLOG_CURSOR",
        Error::Query { .. } => "SESSIONLOG_QUERY",
        Error::SearchIndex { .. } => "SESSIONLOG_SEARCH_INDEX",
        Error::Poisoned => "SESSIONLOG_POISONED",
        Error::Shared(inner) => code_of(inner),
        Error::SurfaceFailed { .. } => "SESSIONLOG_SURFACE_FAILED",
        Error::OutOfRange { .. } => "SESSIONLOG_OUT_OF_RANGE",
        Error::ReconstructionMismatch { .. } => "SESSIONLOG_RECONSTRUCTION_MISMATCH",
        Error::NoSuchStep { .. } => "SESSIONLOG_NO_SUCH_STEP",
        Error::Fork { .. } => "SESSIONLOG_FORK",
        Error::IndexOfFleet { .. } => "SESSIONLOG_NOT_IN_FLEET",
        Error::UnknownUnit { .. } => "SESSIONLOG_UNKNOWN_UNIT",
        Error::Archived { .. } => "SESSIONLOG_ARCHIVED",
        Error::Archive { .. } => "SESSIONLOG_ARCHIVE",
        Error::Options(_) => "SESSIONLOG_OPTIONS",
        Error::Internal(_) => "SESSIONLOG_INTERNAL",
        Error::Refused(r) => match r.kind {
            RefusalKind::Fenced => "SESSIONLOG_FENCED",
            RefusalKind::Stale => "SESSIONLOG_STALE",
            RefusalKind::Unavailable => "SESSIONLOG_UNAVAILABLE",
            RefusalKind::Unstorable => "SESSIONLOG_UNSTORABLE",
        },
        _ => "SESSIONLOG_ERROR",
    }
}

/// How a settled promise's value is built on the JS thread.
pub type Resolver = Box<dyn FnOnce(Env) -> napi::Result<Outcome> + Send>;

/// A promise handed to JavaScript, settled from any thread.
pub struct Pending(JsDeferred<Outcome, Resolver>);

impl Pending {
    /// A new promise and its JS object.
    pub fn new(env: &Env) -> napi::Result<(Pending, JsObject)> {
        let (deferred, promise) = env.create_deferred::<Outcome, Resolver>()?;
        Ok((Pending(deferred), promise))
    }

    /// Settle the promise with `reply` (on the JS thread, when it next runs).
    pub fn settle(self, reply: Reply) {
        self.0
            .resolve(Box::new(move |_env| Ok(reply.into_outcome())));
    }
}
