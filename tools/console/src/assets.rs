//! The page: `assets/index.html`, `app.js` and `app.css`, built into the binary (nothing is
//! fetched from elsewhere at run time), served at `/` (the listing) and `/s/{id}` (a session;
//! the script reads the id and `?at=` from the address). Unknown paths answer 404 as JSON.

use std::sync::Arc;

use axum::http::header::{self, HeaderValue};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::reply::ApiError;
use crate::Console;

const INDEX: &str = include_str!("../assets/index.html");
const SCRIPT: &str = include_str!("../assets/app.js");
const STYLE: &str = include_str!("../assets/app.css");

pub(crate) fn routes() -> Router<Arc<Console>> {
    Router::new()
        .route("/", get(page))
        .route("/s/{id}", get(page))
        .route("/app.js", get(script))
        .route("/app.css", get(style))
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .fallback(not_found)
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(kind)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

async fn page() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("{}: no such page or API route", uri.path()),
    )
}
