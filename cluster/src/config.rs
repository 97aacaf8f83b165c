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

use crate::conninfo;
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
                redact_message(&e.to_string())
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

    /// What connecting with this configuration exposes, when it reaches a server off this
    /// machine without authenticating it (`sslmode` other than `verify-full` or `verify-ca`, or
    /// `require` without `sslrootcert`); `None` when the server is verified or every host is
    /// this machine. A host says it once, when it first connects.
    pub fn unverified_warning(&self) -> Option<String> {
        crate::tls::unverified_warning(
            self.tls,
            self.root_cert.is_some(),
            self.pg.get_hosts(),
            self.pg.get_hostaddrs(),
        )
    }
}

/// `url` without this module's own parameters, and those parameters (decoded), found where the
/// driver finds parameters (`conninfo.rs`).
fn split_own_params(url: &str) -> (String, Vec<(String, String)>) {
    let info = conninfo::read(url);
    let own: Vec<(String, String)> = info
        .params
        .iter()
        .filter(|p| OWN_PARAMS.contains(&p.key.as_str()))
        .map(|p| (p.key.clone(), p.value.clone()))
        .collect();
    if own.is_empty() {
        return (url.to_owned(), own);
    }
    let kept = info
        .params
        .iter()
        .filter(|p| !OWN_PARAMS.contains(&p.key.as_str()))
        .map(|p| &url[p.whole.clone()])
        .chain(info.unparsed.map(|at| &url[at..]));
    let rest = match info.query_at {
        Some(query) => {
            let kept: Vec<&str> = kept.collect();
            match kept.is_empty() {
                true => url[..query].to_owned(),
                false => format!("{}?{}", &url[..query], kept.join("&")),
            }
        }
        None => kept.collect::<Vec<_>>().join(" "),
    };
    (rest, own)
}

/// `url` with every password masked (`***`): a URL's `user:password@`, and the value of every
/// parameter whose key names a password (`password`, `sslpassword`, any case), each where the
/// driver finds it (`conninfo.rs`); past a point the driver cannot read, everything.
pub(crate) fn redact(url: &str) -> String {
    let info = conninfo::read(url);
    let mut masked: Vec<std::ops::Range<usize>> = info
        .params
        .iter()
        .filter(|p| p.key.to_ascii_lowercase().contains("password"))
        .map(|p| p.raw_value.clone())
        .chain(info.userinfo_password)
        .filter(|r| !r.is_empty())
        .collect();
    if let Some(at) = info.unparsed {
        masked.retain(|r| r.start < at);
        masked.push(at..url.len());
    }
    masked.sort_by_key(|r| r.start);
    let mut out = String::with_capacity(url.len());
    let mut from = 0;
    for r in masked {
        if r.start < from {
            continue;
        }
        out.push_str(&url[from..r.start]);
        out.push_str("***");
        from = r.end;
    }
    out.push_str(&url[from..]);
    out
}

/// `text`, a message that may quote a connection string, with every password in it masked: in
/// each URL it holds, the userinfo's password ([`redact`]), and the value after each key naming a
/// password followed by `=` (spaces around it allowed; the value quoted, or to the next
/// whitespace or `&`).
pub(crate) fn redact_message(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for token in text.split_inclusive(char::is_whitespace) {
        let scheme_start = token.find("://").map(|at| {
            token[..at]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || "+.-".contains(c)))
                .map_or(0, |i| i + 1)
        });
        match scheme_start {
            Some(start) => {
                out.push_str(&token[..start]);
                out.push_str(&redact(&token[start..]));
            }
            None => out.push_str(token),
        }
    }
    let lower = out.to_ascii_lowercase();
    let mut masked = String::with_capacity(out.len());
    let mut from = 0;
    let mut search = 0;
    while let Some(found) = lower[search..].find("password") {
        let key_end = search + found + "password".len();
        search = key_end;
        let after_key = out[key_end..].trim_start();
        let Some(value) = after_key.strip_prefix('=') else {
            continue;
        };
        let value = value.trim_start();
        let value_start = out.len() - value.len();
        let value_len = match value.strip_prefix('\'') {
            Some(quoted) => {
                let mut escaped = false;
                quoted
                    .char_indices()
                    .find(|&(_, c)| {
                        let closes = c == '\'' && !escaped;
                        escaped = c == '\\' && !escaped;
                        closes
                    })
                    .map_or(value.len(), |(i, _)| i + 2)
            }
            None => value
                .find(|c: char| c.is_whitespace() || c == '&')
                .unwrap_or(value.len()),
        };
        if value_len == 0 || value.starts_with("***") {
            continue;
        }
        masked.push_str(&out[from..value_start]);
        masked.push_str("***");
        from = value_start + value_len;
        search = from;
    }
    masked.push_str(&out[from..]);
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
    use super::{redact, redact_message, split_own_params, Config};
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

    /// Every form a password can take in a URL or in `key=value` form: `(input, shown, secret)`,
    /// `secret` the text that must not appear in what is shown.
    const HOSTILE: [(&str, &str, &str); 16] = [
        // URL userinfo: the driver takes everything up to the first `@` as user and password.
        ("postgres://u:pa/ss@h/db", "postgres://u:***@h/db", "pa/ss"),
        (
            "postgres://u:pa?ss@h/db?sslmode=require",
            "postgres://u:***@h/db?sslmode=require",
            "pa?ss",
        ),
        (
            "postgres://u:pa#ss@h:5432/db",
            "postgres://u:***@h:5432/db",
            "pa#ss",
        ),
        (
            "postgres://u:pa%2Fss@h/db",
            "postgres://u:***@h/db",
            "pa%2Fss",
        ),
        // A password with an unescaped `@`: masked to the last `@` before the host.
        ("postgres://u:p@ss@h/db", "postgres://u:***@h/db", "p@ss"),
        (
            "postgresql://u:pa/ss@h1:5432,h2:5433/db?target_session_attrs=read-write",
            "postgresql://u:***@h1:5432,h2:5433/db?target_session_attrs=read-write",
            "pa/ss",
        ),
        // URL parameters: the value runs to the next `&`; the key may be percent-encoded.
        (
            "postgres://u@h/db?password=s3 c/r?t@x&sslmode=require",
            "postgres://u@h/db?password=***&sslmode=require",
            "s3 c/r?t@x",
        ),
        (
            "postgres://u@h/db?pass%77ord=s3cret&sslmode=require",
            "postgres://u@h/db?pass%77ord=***&sslmode=require",
            "s3cret",
        ),
        // key=value: spaces around `=`, quoted values with `\'` and `\\` escapes, escaped spaces.
        (
            "host=h password = s3cret user=u",
            "host=h password = *** user=u",
            "s3cret",
        ),
        (
            "host=h password= s3cret user=u",
            "host=h password= *** user=u",
            "s3cret",
        ),
        (
            "host=h password='s3 cr\\'et' user=u",
            "host=h password=*** user=u",
            "cr\\'et",
        ),
        (
            "host=h password='s3\\\\' user=u",
            "host=h password=*** user=u",
            "s3\\",
        ),
        (
            "host=h password=s3\\ cret user=u",
            "host=h password=*** user=u",
            "cret",
        ),
        (
            "host=h password='s3 cret user=u",
            "host=h password=***",
            "s3 cret",
        ),
        (
            "host=h password = 'a/b?c@d#e%2F' sslmode = require",
            "host=h password = *** sslmode = require",
            "a/b?c@d#e%2F",
        ),
        (
            "host=h sslpassword=s3cret",
            "host=h sslpassword=***",
            "s3cret",
        ),
    ];

    #[test]
    fn every_hostile_password_is_masked() {
        for (input, shown, secret) in HOSTILE {
            assert_eq!(redact(input), shown, "{input}");
            assert!(!redact(input).contains(secret), "{input}");
            // What a parsed configuration shows, or the error refusing it, never holds it either.
            let seen = match Config::parse(input) {
                Ok(c) => format!("{c} {c:?}"),
                Err(e) => e.to_string(),
            };
            assert!(!seen.contains(secret), "{input}: {seen}");
        }
    }

    #[test]
    fn a_message_keeps_its_words_and_loses_its_passwords() {
        for (text, shown) in [
            (
                "db error: FATAL: password authentication failed for user \"host\"",
                "db error: FATAL: password authentication failed for user \"host\"",
            ),
            (
                "cannot reach (postgres://u:pa/ss@h/db): refused",
                "cannot reach (postgres://u:***@h/db): refused",
            ),
            (
                "bad option in host=h password = 'a b\\'c' user=u and PASSWORD=x&y",
                "bad option in host=h password = *** user=u and PASSWORD=***&y",
            ),
        ] {
            assert_eq!(redact_message(text), shown, "{text}");
        }
    }

    #[test]
    fn a_password_with_url_delimiters_is_the_password_connected_with() {
        for (url, password) in [
            ("postgres://u:pa/ss@h/db", "pa/ss"),
            ("postgres://u:pa?ss@h/db?sslmode=require", "pa?ss"),
            ("postgres://u:pa%2Fss@h/db", "pa/ss"),
            ("host=h user=u password='s3 cr\\'et'", "s3 cr'et"),
        ] {
            let c = Config::parse(url).expect(url);
            assert_eq!(c.pg.get_password(), Some(password.as_bytes()), "{url}");
        }
        let c = Config::parse("postgres://u:pa?ss@h/db?sslmode=require").expect("parsed");
        assert_eq!(
            c.tls,
            TlsMode::Require,
            "the sslmode after a password holding `?`"
        );
    }

    #[test]
    fn ssl_parameters_spaced_or_quoted_in_key_value_form_are_understood() {
        let c = Config::parse("host=h user=u sslmode = require").expect("parsed");
        assert_eq!(c.tls, TlsMode::Require);
        assert_eq!(c.pg.get_user(), Some("u"));
        let c =
            Config::parse("host=h sslmode= 'verify-full' sslrootcert = '/tmp/my ca.pem' user=u")
                .expect("parsed");
        assert_eq!(c.tls, TlsMode::VerifyFull);
        assert_eq!(
            c.root_cert.as_deref(),
            Some(std::path::Path::new("/tmp/my ca.pem"))
        );
        assert_eq!(c.pg.get_user(), Some("u"));
        let e = Config::parse("host=h sslmode = maybe").expect_err("not libpq's");
        assert!(e.to_string().contains("sslmode \"maybe\""), "{e}");
    }

    #[test]
    fn an_unverified_connection_off_this_machine_is_warned_of() {
        let warned = |url: &str| {
            Config::parse(url)
                .expect(url)
                .unverified_warning()
                .inspect(|w| assert!(w.contains("verify-full"), "{w}"))
                .is_some()
        };
        for url in [
            "postgres://u@db.internal/db",
            "postgres://u@db.internal/db?sslmode=prefer",
            "postgres://u@db.internal/db?sslmode=disable",
            "postgres://u@db.internal/db?sslmode=require",
            "postgres://u@10.0.0.7/db?sslmode=allow",
            "postgres://u@127.0.0.1:5432,db.internal:5432/db",
            "host=localhost hostaddr=10.0.0.7 user=u",
            "host = db.internal sslmode = require user=u",
        ] {
            assert!(warned(url), "{url} is warned of");
        }
        for url in [
            "postgres://u@db.internal/db?sslmode=verify-full&sslrootcert=/ca.pem",
            "postgres://u@db.internal/db?sslmode=verify-ca&sslrootcert=/ca.pem",
            "postgres://u@db.internal/db?sslmode=require&sslrootcert=/ca.pem",
            "postgres://u@127.0.0.1/db",
            "postgres://u@localhost:5432,127.0.0.2:5433/db?sslmode=disable",
            "postgres://u@[::1]/db",
            "host=/var/run/postgresql user=u",
            "host=db.internal hostaddr=127.0.0.1 user=u",
        ] {
            assert!(!warned(url), "{url} is not warned of");
        }
        let w = Config::parse("postgres://u:s3cret@db.internal/db")
            .expect("parsed")
            .unverified_warning()
            .expect("warned");
        assert!(
            w.contains("sslmode prefer to db.internal") && !w.contains("s3cret"),
            "{w}"
        );
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
