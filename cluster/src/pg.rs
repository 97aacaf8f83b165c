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
}

impl Pg {
    /// A connection to `config`'s PostgreSQL, not yet made.
    pub(crate) fn new(config: Config) -> Pg {
        Pg {
            config,
            client: None,
        }
    }

    /// The connected client, connecting when there is none.
    pub(crate) fn client(&mut self, during: &str) -> Result<&mut Client> {
        self.connected(during).map_err(|n| n.error)
    }

    /// [`Pg::client`], saying whether a failure to connect may pass.
    fn connected(&mut self, during: &str) -> std::result::Result<&mut Client, NoConnection> {
        let client = match self.client.take() {
            Some(client) => client,
            None => connect_once(&self.config, during)?,
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
            Some(db) => format!("{} ({})", db.message(), db.code().code()),
            None => e.to_string(),
        };
        self.error(during, crate::config::redact(&detail))
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
        connect_once(self, during).map_err(|n| n.error)
    }
}

/// [`Config::connect`], saying whether a failure may pass.
fn connect_once(config: &Config, during: &str) -> std::result::Result<Client, NoConnection> {
    let mut pg = config.pg.clone();
    if pg.get_connect_timeout().is_none() {
        pg.connect_timeout(CONNECT_TIMEOUT);
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
    connected.map_err(|e| NoConnection {
        error: Pg::new(config.clone()).pg_error(&format!("connecting ({during})"), &e),
        may_pass: is_transient(&e),
    })
}

/// Whether `e` left nothing done and may pass: the connection failed or closed, or PostgreSQL
/// refused the statement in a way that rolled it back.
pub(crate) fn is_transient(e: &postgres::Error) -> bool {
    match e.code() {
        None => true,
        Some(code) => [
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
