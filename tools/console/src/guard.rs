//! Who may ask, and how: the console reads only (GET and HEAD; any other method is 405), listens
//! on loopback unless a token is set ([`check_listen`] refuses otherwise, at start), and with a
//! token answers only requests that carry it: as `Authorization: Bearer TOKEN`, or as the cookie
//! that the one-time login URL printed at start sets (the URL works once; the cookie is
//! `HttpOnly` and `SameSite=Strict`). Without a token, a request must name a loopback host in
//! its `Host` header, so a web page elsewhere cannot reach the console through a DNS name it
//! points at 127.0.0.1. Every response carries a content security policy that allows only the
//! console's own script and style, so even a rendering mistake could not run injected script.

use std::io::Read;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::header::{self, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;

use crate::reply::ApiError;
use crate::Config;

/// The cookie the one-time login URL sets.
const COOKIE: &str = "sessionlog_console";

/// Where the one-time login URL points.
const LOGIN: &str = "/login";

/// The policy every response carries: the console's own script, style and requests only.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Refuse to serve a non-loopback address without a token: anyone who can reach it could read
/// every session.
pub fn check_listen(config: &Config) -> anyhow::Result<()> {
    match (&config.token, config.listen.ip().is_loopback()) {
        (Some(token), _) if token.is_empty() => anyhow::bail!("--token: the token is empty"),
        (None, false) => anyhow::bail!(
            "refusing to listen on {}: it is not a loopback address, so anyone who can reach it \
             could read every session; pass --token TOKEN (requests must then carry it), or \
             listen on 127.0.0.1",
            config.listen
        ),
        _ => Ok(()),
    }
}

/// The guard's state: the token, and the one-time login key until it is used.
struct Guard {
    token: Option<String>,
    login_key: Mutex<Option<String>>,
}

/// `routes` behind the guard.
pub(crate) fn wrap(routes: Router, config: &Config) -> Router {
    let guard = Arc::new(Guard {
        token: config.token.clone(),
        login_key: Mutex::new(config.token.as_ref().map(|_| login_key())),
    });
    routes.layer(axum::middleware::from_fn_with_state(guard, check))
}

/// What `serve` prints once bound: where to open the console.
pub(crate) fn announce(bound: SocketAddr, config: &Config) -> String {
    match &config.token {
        None => format!("sessionlog console at http://{bound}/"),
        Some(_) => format!(
            "sessionlog console at http://{bound}/ (open http://{bound}{LOGIN}?key={} once in a \
             browser, or send `Authorization: Bearer TOKEN`)",
            login_key()
        ),
    }
}

/// The one-time login key: derived from nothing a visitor knows (random bytes drawn once per
/// process; `announce` and the guard read the same one).
fn login_key() -> String {
    static KEY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    KEY.get_or_init(|| {
        let mut bytes = [0u8; 16];
        let drawn = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
        if drawn.is_err() {
            // No randomness to draw: a key nobody can guess cannot be made, so none works.
            return String::new();
        }
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    })
    .clone()
}

/// The middleware: method, host, token, then the route; security headers on every answer.
async fn check(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let mut response = match admit(&guard, &request) {
        Admission::Refused(e) => e.into_response(),
        Admission::Login(cookie) => login(cookie),
        Admission::Admitted => next.run(request).await,
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// What the guard decides for a request.
enum Admission {
    Admitted,
    /// The one-time login URL, used now: set this cookie value.
    Login(String),
    Refused(ApiError),
}

fn admit(guard: &Guard, request: &Request) -> Admission {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return Admission::Refused(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!(
                "{} {}: the console only reads (GET); nothing can be changed through it",
                request.method(),
                request.uri().path()
            ),
        ));
    }
    let Some(token) = &guard.token else {
        return match loopback_host(request) {
            true => Admission::Admitted,
            false => Admission::Refused(ApiError::new(
                StatusCode::FORBIDDEN,
                "the Host header names no loopback address: a console without a token answers \
                 only requests addressed to 127.0.0.1, [::1] or localhost",
            )),
        };
    };
    if request.uri().path() == LOGIN {
        return match take_login_key(guard, request) {
            true => Admission::Login(token.clone()),
            false => Admission::Refused(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "this login link is not valid (it works once); send the token as \
                 `Authorization: Bearer TOKEN`",
            )),
        };
    }
    match presented(request).is_some_and(|t| same(t.as_bytes(), token.as_bytes())) {
        true => Admission::Admitted,
        false => Admission::Refused(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "this console needs its token: send `Authorization: Bearer TOKEN`, or open the \
             one-time login URL it printed at start",
        )),
    }
}

/// Whether the request's `Host` names a loopback address (or has no port-less oddity).
fn loopback_host(request: &Request) -> bool {
    let Some(host) = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
    else {
        return false;
    };
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    matches!(name, "localhost" | "[::1]")
        || name
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The token the request carries: its bearer header, else the login cookie.
fn presented(request: &Request) -> Option<&str> {
    let headers = request.headers();
    if let Some(bearer) = headers
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
    {
        return Some(bearer.trim());
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|h| h.to_str().ok())
        .flat_map(|h| h.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// Whether the request carries the one-time login key; it is used up if so.
fn take_login_key(guard: &Guard, request: &Request) -> bool {
    let given = request
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .find_map(|pair| pair.strip_prefix("key="));
    let mut key = guard
        .login_key
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match (given, key.as_deref()) {
        (Some(given), Some(k)) if !k.is_empty() && same(given.as_bytes(), k.as_bytes()) => {
            *key = None;
            true
        }
        _ => false,
    }
}

/// The login answer: the cookie set, and the browser sent on to the listing (so the key leaves
/// the address bar).
fn login(token: String) -> Response {
    let cookie = format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict");
    match HeaderValue::from_str(&cookie) {
        Ok(cookie) => (
            StatusCode::SEE_OTHER,
            [
                (header::SET_COOKIE, cookie),
                (header::LOCATION, HeaderValue::from_static("/")),
            ],
        )
            .into_response(),
        Err(_) => ApiError::new(
            StatusCode::BAD_REQUEST,
            "the token cannot be sent as a cookie (it holds characters a header cannot); send it \
             as `Authorization: Bearer TOKEN`",
        )
        .into_response(),
    }
}

/// Equality in time independent of where the inputs differ (a token compared byte by byte
/// with an early exit would tell an attacker how much of a guess was right).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
