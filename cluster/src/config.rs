//! How a host reaches PostgreSQL: a libpq connection URL (`postgres://user[:password]@host[:port]
//! [,host2[:port2]…]/dbname?sslmode=…&sslrootcert=…&target_session_attrs=read-write`), or
//! libpq's `key=value` form, with libpq's password sources: the URL, then `PGPASSWORD`, then the
//! password file (`PGPASSFILE`, else `~/.pgpass`). TLS follows libpq's `sslmode`: `disable`,
//! `prefer` (the default), `require`, `verify-ca`, `verify-full`, with the CA from `sslrootcert`
//! (`tls.rs`).
//!
//! Invariant: the password never leaves this module in text: [`Config`]'s `Display` and every
//! message built from it show the URL with its password replaced.

use std::path::PathBuf;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::tls::TlsMode;

/// A parsed connection configuration.
#[derive(Clone)]
pub struct Config {
    pub(crate) pg: postgres::Config,
    pub(crate) tls: TlsMode,
    pub(crate) root_cert: Option<PathBuf>,
    /// The URL as given, password masked: what messages show.
    shown: String,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config").field("url", &self.shown).finish()
    }
}

impl std::fmt::Display for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

/// The parameters this module takes out of the URL before PostgreSQL's parser sees it.
const OWN_PARAMS: [&str; 2] = ["sslmode", "sslrootcert"];

impl Config {
    /// Parse `url` (see the module docs). The password, when the URL has none, comes from
    /// `PGPASSWORD` or the password file.
    pub fn parse(url: &str) -> Result<Config> {
        let shown = redact(url);
        let bad = |what: String| Error::Config(format!("{what} in {shown}"));
        let (rest, own) = split_own_params(url);
        let mut pg = postgres::Config::from_str(&rest).map_err(|e| {
            bad(format!(
                "the URL does not parse: {}",
                redact(&e.to_string())
            ))
        })?;
        let tls = match own
            .iter()
            .find(|(k, _)| k == "sslmode")
            .map(|(_, v)| v.as_str())
        {
            None | Some("prefer") | Some("allow") => TlsMode::Prefer,
            Some("disable") => TlsMode::Disable,
            Some("require") => TlsMode::Require,
            Some("verify-ca") => TlsMode::VerifyCa,
            Some("verify-full") => TlsMode::VerifyFull,
            Some(other) => return Err(bad(format!("sslmode \"{other}\" is not libpq's"))),
        };
        let root_cert = own
            .iter()
            .find(|(k, _)| k == "sslrootcert")
            .map(|(_, v)| PathBuf::from(v));
        if matches!(tls, TlsMode::VerifyCa | TlsMode::VerifyFull) && root_cert.is_none() {
            return Err(bad(
                "sslmode verify-ca and verify-full need sslrootcert (the CA's PEM file)".into(),
            ));
        }
        if pg.get_password().is_none() {
            if let Some(password) = password_from_environment(&pg) {
                pg.password(password);
            }
        }
        Ok(Config {
            pg,
            tls,
            root_cert,
            shown,
        })
    }

    /// The URL with its password masked.
    pub fn shown(&self) -> &str {
        &self.shown
    }
}

/// `url` without this module's own parameters, and those parameters (decoded).
fn split_own_params(url: &str) -> (String, Vec<(String, String)>) {
    let mut own = Vec::new();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((base, query)) = url.split_once('?') else {
            return (url.to_owned(), own);
        };
        let mut kept = Vec::new();
        for pair in query.split('&') {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if OWN_PARAMS.contains(&k) {
                own.push((k.to_owned(), percent_decode(v)));
            } else {
                kept.push(pair);
            }
        }
        let rest = match kept.is_empty() {
            true => base.to_owned(),
            false => format!("{base}?{}", kept.join("&")),
        };
        return (rest, own);
    }
    let mut kept = Vec::new();
    for token in url.split_whitespace() {
        match token.split_once('=') {
            Some((k, v)) if OWN_PARAMS.contains(&k) => {
                own.push((k.to_owned(), v.trim_matches('\'').to_owned()))
            }
            _ => kept.push(token),
        }
    }
    (kept.join(" "), own)
}

/// `%XX` escapes decoded (a URL parameter's value).
fn percent_decode(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `url` with any password masked: the `user:password@` of a URL, a `password=…` parameter or
/// `key=value` token.
pub(crate) fn redact(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let authority_start = scheme_end + 3;
        let authority_end = out[authority_start..]
            .find(['/', '?'])
            .map_or(out.len(), |i| authority_start + i);
        if let Some(at) = out[authority_start..authority_end].rfind('@') {
            let userinfo = &out[authority_start..authority_start + at];
            if let Some(colon) = userinfo.find(':') {
                out.replace_range(authority_start + colon + 1..authority_start + at, "***");
            }
        }
    }
    let mut masked = String::with_capacity(out.len());
    let mut rest = out.as_str();
    while let Some(at) = rest.find("password=") {
        let value_start = at + "password=".len();
        masked.push_str(&rest[..value_start]);
        masked.push_str("***");
        let value_end = rest[value_start..]
            .find(['&', ' '])
            .map_or(rest.len(), |i| value_start + i);
        rest = &rest[value_end..];
    }
    masked.push_str(rest);
    masked
}

/// The password libpq would use when the URL gives none: `PGPASSWORD`, else the first matching
/// line of the password file (`host:port:database:username:password`, `*` matching anything).
fn password_from_environment(pg: &postgres::Config) -> Option<String> {
    if let Ok(p) = std::env::var("PGPASSWORD") {
        return Some(p);
    }
    let file = std::env::var_os("PGPASSFILE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pgpass")))?;
    let text = std::fs::read_to_string(file).ok()?;
    let user = pg.get_user().unwrap_or_default();
    let db = pg.get_dbname().unwrap_or(user);
    let host = match pg.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "localhost".into(),
    };
    let port = pg.get_ports().first().copied().unwrap_or(5432).to_string();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .find_map(|line| {
            let fields: Vec<&str> = line.splitn(5, ':').collect();
            let [h, p, d, u, password] = fields.as_slice() else {
                return None;
            };
            let matches = |pattern: &str, value: &str| pattern == "*" || pattern == value;
            (matches(h, &host) && matches(p, &port) && matches(d, db) && matches(u, user))
                .then(|| (*password).to_owned())
        })
}

#[cfg(test)]
mod tests {
    use super::{redact, split_own_params, Config};
    use crate::tls::TlsMode;

    #[test]
    fn a_password_in_a_url_or_a_parameter_is_never_shown() {
        assert_eq!(
            redact("postgres://host1:s3cret@127.0.0.1:5432/db"),
            "postgres://host1:***@127.0.0.1:5432/db"
        );
        assert_eq!(
            redact("postgres://u@h/db?password=s3cret&sslmode=require"),
            "postgres://u@h/db?password=***&sslmode=require"
        );
        assert_eq!(
            redact("host=h user=u password=s3cret"),
            "host=h user=u password=***"
        );
        let config =
            Config::parse("postgres://host1:s3cret@127.0.0.1:5432/db?sslmode=disable").expect("ok");
        assert!(!format!("{config} {config:?}").contains("s3cret"));
        let bad = Config::parse("postgres://host1:s3cret@127.0.0.1:5432/db?sslmode=maybe")
            .expect_err("refused");
        assert!(!bad.to_string().contains("s3cret"), "{bad}");
    }

    #[test]
    fn libpq_ssl_parameters_are_taken_out_and_understood() {
        let (rest, own) = split_own_params(
            "postgres://u@h/db?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&application_name=x",
        );
        assert_eq!(rest, "postgres://u@h/db?application_name=x");
        assert_eq!(
            own,
            [
                ("sslmode".to_owned(), "verify-full".to_owned()),
                ("sslrootcert".to_owned(), "/tmp/ca.pem".to_owned())
            ]
        );
        let c = Config::parse("postgres://u@h/db?sslmode=verify-full&sslrootcert=/tmp/ca.pem")
            .expect("parsed");
        assert_eq!(c.tls, TlsMode::VerifyFull);
        let e = Config::parse("postgres://u@h/db?sslmode=verify-full").expect_err("no CA");
        assert!(e.to_string().contains("sslrootcert"), "{e}");
    }
}
