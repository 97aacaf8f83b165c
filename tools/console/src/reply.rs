//! How the API answers: JSON bodies (a store's values passed through as the codec wrote them,
//! never re-parsed) and errors as `{"error": MESSAGE}` with the status that fits: 400 for a
//! request that cannot be right, 404 for a session or seq that is not there, 500 for the store
//! failing, 503 for a fleet's PostgreSQL out of reach. A handler never panics on input; it
//! returns one of these.

use axum::http::header::{self, HeaderValue};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::value::RawValue;
use sessionlog_codec::json::{self, Value};
use sessionlog_engine::Error;

/// An error answer: its status and a message naming what was asked and the rule.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    message: String,
    /// The session read is archived: its bytes are in object storage (`archived.rs`).
    archived: bool,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            archived: false,
        }
    }

    /// Whether the read failed because its session is archived.
    pub(crate) fn is_archived(&self) -> bool {
        self.archived
    }

    /// What went wrong, as the answer says it.
    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        let status = match &e {
            Error::UnknownSession { .. } | Error::OutOfRange { .. } | Error::NoSuchStep { .. } => {
                StatusCode::NOT_FOUND
            }
            Error::Cursor { .. } | Error::UnknownUnit { .. } | Error::Query { .. } => {
                StatusCode::BAD_REQUEST
            }
            Error::FormatNotServed { .. }
            | Error::NotLoadable { .. }
            | Error::Archived { .. }
            | Error::SurfaceFailed { .. }
            | Error::Projection(_) => StatusCode::UNPROCESSABLE_ENTITY,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError {
            archived: matches!(e, Error::Archived { .. }),
            ..ApiError::new(status, e.to_string())
        }
    }
}

impl From<sessionlog_cluster::Error> for ApiError {
    fn from(e: sessionlog_cluster::Error) -> ApiError {
        use sessionlog_cluster::Error as Fleet;
        let status = match e {
            Fleet::Store(e) => return e.into(),
            Fleet::UnknownSession(_) => StatusCode::NOT_FOUND,
            Fleet::Postgres { .. } => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        #[derive(Serialize)]
        struct Body<'a> {
            error: &'a str,
        }
        let body = serde_json::to_string(&Body {
            error: &self.message,
        })
        .unwrap_or_else(|_| String::from("{\"error\":\"unprintable error\"}"));
        (self.status, json_headers(), body).into_response()
    }
}

/// A JSON answer.
pub(crate) fn json_body(value: &impl Serialize) -> Result<Response, ApiError> {
    let body = serde_json::to_string(value).map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("rendering the answer: {e}"),
        )
    })?;
    Ok((StatusCode::OK, json_headers(), body).into_response())
}

/// A store value as raw JSON, written once by the codec (JS-exact, as `sessionlog` prints it).
pub(crate) fn raw(value: &Value) -> Box<RawValue> {
    let mut text = String::new();
    json::write_value(&mut text, value);
    RawValue::from_string(text).unwrap_or_else(|_| null())
}

/// JSON `null` as a raw value.
pub(crate) fn null() -> Box<RawValue> {
    RawValue::NULL.to_owned()
}

fn json_headers() -> [(header::HeaderName, HeaderValue); 2] {
    [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
    ]
}
