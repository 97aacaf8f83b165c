//! One connection to PostgreSQL, made when first needed and made again after it drops (a
//! failover moves the primary: a multi-host URL with `target_session_attrs=read-write` finds the
//! new one). Errors are worded from the redacted URL.

use std::time::{Duration, Instant};

use postgres::error::SqlState;
use postgres::{Client, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::tls::{client_config, TlsMode};

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause between attempts while PostgreSQL is unreachable (a failover takes seconds).
const RETRY_PAUSE: Duration = Duration::from_millis(250);
/// How a connection notices a server that vanished without closing it (a machine's death, a
/// partition): a keepalive probe after this much silence, then one every [`PROBE_INTERVAL`],
/// [`PROBES`] of them unanswered, and at most [`UNACKED_LIMIT`] for sent data to go
/// unacknowledged. A call waiting on such a server then fails in about half a minute, inside the
/// commit hook's patience, and the hook reconnects and reads back, rather than waiting for the
/// system's default (two hours of silence before the first probe).
const PROBE_AFTER_IDLE: Duration = Duration::from_secs(10);
const PROBE_INTERVAL: Duration = Duration::from_secs(5);
const PROBES: u32 = 3;
const UNACKED_LIMIT: Duration = Duration::from_secs(30);
/// The driver's keepalive idle time when the URL sets none.
const DRIVER_DEFAULT_IDLE: Duration = Duration::from_secs(2 * 60 * 60);

/// How long one statement of the fleet may run and wait on a lock (`statement_timeout`,
/// `lock_timeout`), set on every connection a host makes, so that a statement stuck behind a
/// row lock (an operator's open transaction, a takeover's) or a server that stalls gives the
/// caller its turn back: PostgreSQL cancels it, rolled back, and the caller tries again or
/// answers within its patience rather than waiting without end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The longest a statement runs.
    pub(crate) statement: Duration,
    /// The longest a statement waits on a lock.
    pub(crate) lock: Duration,
}

impl Limits {
    /// The control connection's (acquisitions, renewals, catch-up pages, listings, purges).
    pub(crate) const CONTROL: Limits = Limits {
        statement: Duration::from_secs(120),
        lock: Duration::from_secs(5),
    };

    /// The commit hook's, for its `patience`: a call waits on a row lock at most an eighth of
    /// it (at most 5 s), so that a group split around one locked row commits its other batches
    /// well within the patience (`commit.rs`), and runs at most half of it (at most 30 s).
    pub(crate) fn commit(patience: Duration) -> Limits {
        Limits {
            statement: (patience / 2).clamp(Duration::from_secs(1), Duration::from_secs(30)),
            lock: (patience / 8).clamp(Duration::from_millis(100), Duration::from_secs(5)),
        }
    }
}

/// A connection attempt that failed, and whether trying again may succeed.
struct NoConnection {
    error: Error,
    /// The server could not be reached or was not ready (starting, shutting down, a failover),
    /// as against a refusal that stays: no such database or role, a wrong password, a TLS
    /// setting this host cannot use.
    may_pass: bool,
}

/// A connection that reconnects.
pub(crate) struct Pg {
    config: Config,
    client: Option<Client>,
    limits: Limits,
}

impl Pg {
    /// A connection to `config`'s PostgreSQL, not yet made, its statements bounded by
    /// [`Limits::CONTROL`].
    pub(crate) fn new(config: Config) -> Pg {
        Pg {
            config,
            client: None,
            limits: Limits::CONTROL,
        }
    }

    /// Where this connection goes (another connection of the same host's goes there too).
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// This connection, its statements bounded by `limits` instead.
    pub(crate) fn with_limits(self, limits: Limits) -> Pg {
        Pg { limits, ..self }
    }

    /// The connected client, connecting when there is none.
    pub(crate) fn client(&mut self, during: &str) -> Result<&mut Client> {
        self.connected(during).map_err(|n| n.error)
    }

    /// [`Pg::client`], saying whether a failure to connect may pass.
    fn connected(&mut self, during: &str) -> std::result::Result<&mut Client, NoConnection> {
        let client = match self.client.take() {
            Some(client) => client,
            None => connect_once(&self.config, during, Some(self.limits))?,
        };
        Ok(self.client.insert(client))
    }

    /// Forget the connection (after it failed): the next call makes a new one.
    pub(crate) fn reset(&mut self) {
        self.client = None;
    }

    /// Run `op`, reconnecting and running it again while it fails for a reason that leaves
    /// nothing done and may pass (the server could not be reached or was not ready, or
    /// PostgreSQL refused before doing anything: a standby that is not yet primary, a deadlock
    /// or serialization failure that rolled the transaction back), for at most `patience`. A
    /// refusal that stays (no such database or role, a wrong password) fails at once. `op` must be safe to run again
    /// after a connection that dropped mid-statement: reads, or writes fenced so that a second
    /// run changes nothing.
    pub(crate) fn retrying<T>(
        &mut self,
        during: &str,
        patience: Duration,
        mut op: impl FnMut(&mut Client) -> std::result::Result<T, postgres::Error>,
    ) -> Result<T> {
        let deadline = Instant::now() + patience;
        loop {
            let failure = match self.connected(during) {
                Ok(client) => match op(client) {
                    Ok(v) => return Ok(v),
                    Err(e) => e,
                },
                Err(n) if !n.may_pass || Instant::now() >= deadline => return Err(n.error),
                Err(_) => {
                    std::thread::sleep(RETRY_PAUSE);
                    continue;
                }
            };
            if !is_transient(&failure) || Instant::now() >= deadline {
                return Err(self.pg_error(during, &failure));
            }
            self.reset();
            std::thread::sleep(RETRY_PAUSE);
        }
    }

    /// The error of `e` during `during`.
    pub(crate) fn pg_error(&self, during: &str, e: &postgres::Error) -> Error {
        let detail = match e.as_db_error() {
            Some(db) => match db.hint() {
                Some(hint) => format!("{} ({}); {hint}", db.message(), db.code().code()),
                None => format!("{} ({})", db.message(), db.code().code()),
            },
            None => message_with_causes(e),
        };
        self.error(during, crate::config::redact_message(&detail))
    }

    fn error(&self, during: &str, detail: String) -> Error {
        Error::Postgres {
            url: self.config.shown().to_owned(),
            during: during.to_owned(),
            detail,
        }
    }
}

// Connecting lives here, beside the reconnecting client, so that `config.rs` stays a parser
// that imports nothing of the crate's PostgreSQL code.
impl Config {
    /// A connection to this PostgreSQL, as a host or an operator makes one (`during` names what
    /// for, in an error).
    pub fn connect(&self, during: &str) -> Result<Client> {
        connect_once(self, during, None).map_err(|n| n.error)
    }
}

/// Say on stderr, once in the process (at the first connection), what an unverified
/// connection off this machine exposes ([`Config::unverified_warning`]).
fn warn_once_if_unverified(config: &Config) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    if let Some(warning) = config.unverified_warning() {
        WARNED.call_once(|| eprintln!("sessionlog: warning: PostgreSQL at {config}: {warning}"));
    }
}

/// [`Config::connect`], saying whether a failure may pass; a host's connections are bounded
/// by `limits`.
fn connect_once(
    config: &Config,
    during: &str,
    limits: Option<Limits>,
) -> std::result::Result<Client, NoConnection> {
    warn_once_if_unverified(config);
    let mut pg = config.pg.clone();
    if pg.get_connect_timeout().is_none() {
        pg.connect_timeout(CONNECT_TIMEOUT);
    }
    notice_silent_loss(&mut pg);
    if let Some(limits) = limits {
        bound(&mut pg, limits);
    }
    pg.ssl_mode(config.tls.negotiation());
    let connected = match config.tls {
        TlsMode::Disable => pg.connect(NoTls),
        mode => {
            let tls =
                client_config(mode, config.root_cert.as_deref()).map_err(|error| NoConnection {
                    error,
                    may_pass: false,
                })?;
            pg.connect(MakeRustlsConnect::new(tls))
        }
    };
    let during = format!("connecting ({during})");
    connected.map_err(|e| match certificate_refusal(&e) {
        Some(refusal) => NoConnection {
            error: Pg::new(config.clone()).error(
                &during,
                format!(
                    "certificate verification failed: the server's certificate does not verify \
                     against the CA in {}: {refusal}",
                    config
                        .root_cert
                        .as_deref()
                        .map_or_else(|| "(none)".into(), |p| p.display().to_string())
                ),
            ),
            may_pass: false,
        },
        None => {
            let mut error = Pg::new(config.clone()).pg_error(&during, &e);
            if let (Error::Postgres { detail, .. }, TlsMode::Disable) = (&mut error, config.tls) {
                if e.code() == Some(&SqlState::INVALID_AUTHORIZATION_SPECIFICATION)
                    && detail.contains("no encryption")
                {
                    detail.push_str(
                        "; the server refuses unencrypted connections: connect over TLS \
                         (sslmode=verify-full with sslrootcert, or require)",
                    );
                }
            }
            NoConnection {
                error,
                may_pass: is_transient(&e),
            }
        }
    })
}

/// Whether `e` is a statement cancelled by its [`Limits`] (or by an operator): it waited on a
/// lock, or ran, too long, and was rolled back.
pub(crate) fn is_timeout(e: &postgres::Error) -> bool {
    e.code()
        .is_some_and(|c| [SqlState::LOCK_NOT_AVAILABLE, SqlState::QUERY_CANCELED].contains(c))
}

/// Set the TCP liveness checks (see [`PROBE_AFTER_IDLE`]) the URL leaves at the driver's
/// defaults; what the URL sets (`keepalives_idle`, `tcp_user_timeout`, `keepalives=0`) stays.
fn notice_silent_loss(pg: &mut postgres::Config) {
    if pg.get_keepalives() && pg.get_keepalives_idle() == DRIVER_DEFAULT_IDLE {
        pg.keepalives_idle(PROBE_AFTER_IDLE);
    }
    if pg.get_keepalives_interval().is_none() {
        pg.keepalives_interval(PROBE_INTERVAL);
    }
    if pg.get_keepalives_retries().is_none() {
        pg.keepalives_retries(PROBES);
    }
    if pg.get_tcp_user_timeout().is_none() {
        pg.tcp_user_timeout(UNACKED_LIMIT);
    }
}

/// Set `limits` as the session's `statement_timeout` and `lock_timeout`, before the options
/// the URL gives (`options=-c lock_timeout=…`), which PostgreSQL applies after, so they stay.
fn bound(pg: &mut postgres::Config, limits: Limits) {
    let mut options = format!(
        "-c statement_timeout={} -c lock_timeout={}",
        limits.statement.as_millis(),
        limits.lock.as_millis()
    );
    if let Some(given) = pg.get_options() {
        options.push(' ');
        options.push_str(given);
    }
    pg.options(&options);
}

/// Why the TLS handshake of `e` failed, when it failed on the server's certificate (untrusted
/// issuer, wrong name, expired): a refusal that stays, unlike a handshake the network cut.
fn certificate_refusal(e: &postgres::Error) -> Option<&rustls::Error> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let tls = s
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .or_else(|| s.downcast_ref::<rustls::Error>());
        if let Some(refusal @ rustls::Error::InvalidCertificate(_)) = tls {
            return Some(refusal);
        }
        source = s.source();
    }
    None
}

/// `e`'s message and those of the errors it wraps (the client library words a failed TLS
/// handshake or connection without its cause).
fn message_with_causes(e: &postgres::Error) -> String {
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}

/// Whether `e`, the answer to a statement that commits, leaves its outcome unknown: the
/// connection dropped, or the server ended it (classes 08 and 57P: a shutdown, a crash, a
/// terminated backend), which may come after the transaction committed, while its backend
/// waits for a synchronous standby.
pub(crate) fn may_have_committed(e: &postgres::Error) -> bool {
    e.code()
        .is_none_or(|code| code.code().starts_with("08") || code.code().starts_with("57P"))
}

/// Whether `e` left nothing done and may pass: the connection failed or closed, or PostgreSQL
/// refused the statement in a way that rolled it back (a [`Limits`] timeout among them: the
/// statement is cancelled before its transaction commits, so its outcome is known).
pub(crate) fn is_transient(e: &postgres::Error) -> bool {
    match e.code() {
        None => true,
        Some(code) => [
            SqlState::LOCK_NOT_AVAILABLE,
            SqlState::QUERY_CANCELED,
            SqlState::T_R_SERIALIZATION_FAILURE,
            SqlState::T_R_DEADLOCK_DETECTED,
            SqlState::READ_ONLY_SQL_TRANSACTION,
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::TOO_MANY_CONNECTIONS,
            SqlState::CONNECTION_FAILURE,
        ]
        .contains(code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn liveness(url: &str) -> postgres::Config {
        let mut pg: postgres::Config = url.parse().expect("a URL");
        notice_silent_loss(&mut pg);
        pg
    }

    #[test]
    fn a_connection_notices_a_silent_server_in_about_half_a_minute() {
        let pg = liveness("postgres://h@127.0.0.1/db");
        assert!(pg.get_keepalives());
        assert_eq!(pg.get_keepalives_idle(), PROBE_AFTER_IDLE);
        assert_eq!(pg.get_keepalives_interval(), Some(PROBE_INTERVAL));
        assert_eq!(pg.get_keepalives_retries(), Some(PROBES));
        assert_eq!(pg.get_tcp_user_timeout(), Some(&UNACKED_LIMIT));
        // Inside the commit hook's default patience of 60 s.
        let detected = PROBE_AFTER_IDLE + PROBE_INTERVAL * PROBES;
        assert!(detected < Duration::from_secs(60), "{detected:?}");
    }

    #[test]
    fn statements_are_bounded_and_the_url_s_options_win() {
        let mut pg: postgres::Config = "postgres://h@127.0.0.1/db".parse().expect("a URL");
        bound(&mut pg, Limits::commit(Duration::from_secs(60)));
        assert_eq!(
            pg.get_options(),
            Some("-c statement_timeout=30000 -c lock_timeout=5000")
        );
        let mut given: postgres::Config =
            "postgres://h@127.0.0.1/db?options=-c%20lock_timeout%3D1s"
                .parse()
                .expect("a URL");
        bound(&mut given, Limits::commit(Duration::from_secs(4)));
        assert_eq!(
            given.get_options(),
            Some("-c statement_timeout=2000 -c lock_timeout=500 -c lock_timeout=1s")
        );
    }

    #[test]
    fn what_the_url_sets_stays() {
        let pg = liveness("postgres://h@127.0.0.1/db?keepalives_idle=60&tcp_user_timeout=90");
        assert_eq!(pg.get_keepalives_idle(), Duration::from_secs(60));
        assert_eq!(pg.get_tcp_user_timeout(), Some(&Duration::from_secs(90)));
        let off = liveness("postgres://h@127.0.0.1/db?keepalives=0");
        assert!(!off.get_keepalives());
        assert_eq!(off.get_keepalives_idle(), DRIVER_DEFAULT_IDLE);
    }
}
