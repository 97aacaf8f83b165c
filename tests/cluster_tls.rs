//! Who may connect to the fleet's PostgreSQL: a throwaway server with a self-signed certificate
//! that accepts TCP over TLS only (`hostssl`), its host role behind a password. A host that
//! verifies the server (`sslmode=verify-full` with the CA) joins, appends and reads the fleet's
//! status through the library and the CLI; a plain connection and a server whose certificate
//! another CA signed are refused at once, each with an error that says why; and the password in
//! the URL shows up in no output of any of them.
//!
//! Needs PostgreSQL 15's server binaries and the `openssl` command, as `cluster.rs` does.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use sessionlog::engine::{AppendItem, SourceEncoding};
use sessionlog_cluster::{Config, Fleet, FleetOptions};
use sessionlog_harness::postgres::{self_signed_ca, PgSetup, TempPostgres};
use sessionlog_harness::requirement::missing;

use crate::cluster::{header, prompt};
use crate::objects::cli;

/// The host role's password: it must appear in no output.
const PASSWORD: &str = "s3cret-tls-pw";

/// Well inside the minute a host keeps trying a server it cannot reach: a refusal that stays
/// was not tried again.
const AT_ONCE: Duration = Duration::from_secs(30);

/// A TLS-only server with the schema (created through the CLI, over `verify-full`) and a host
/// role `host` with [`PASSWORD`], or `None` when PostgreSQL is not installed.
fn tls_database() -> Option<TempPostgres> {
    if !sessionlog_harness::postgres::available() {
        missing(
            "PostgreSQL 15's server binaries (Debian's postgresql-15)",
            "they are not installed",
        );
        return None;
    }
    let pg = TempPostgres::start(&PgSetup {
        tls_only: true,
        ..PgSetup::default()
    })
    .expect("start PostgreSQL with TLS only");
    pg.psql(&format!("CREATE ROLE host LOGIN PASSWORD '{PASSWORD}'"))
        .expect("host role");
    Some(pg)
}

/// A URL for `user`, carrying [`PASSWORD`] (the superuser is trusted, its password unused),
/// with `params`.
fn url(pg: &TempPostgres, user: &str, params: &str) -> String {
    format!(
        "postgres://{user}:{PASSWORD}@127.0.0.1:{}/postgres?{params}",
        pg.port()
    )
}

fn verify_full(ca: &Path) -> String {
    format!("sslmode=verify-full&sslrootcert={}", ca.display())
}

/// `sessionlog --db DB --cluster URL --host host ARGS` (the host role's own host).
fn run_cli(db: &Path, cluster: &str, args: &[&str]) -> Output {
    Command::new(cli())
        .arg("--db")
        .arg(db)
        .args(["--cluster", cluster, "--host", "host"])
        .args(args)
        .output()
        .expect("run sessionlog")
}

/// Everything `out` printed, checked for the password.
fn shown(out: &Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains(PASSWORD), "the password is shown: {text}");
    text
}

/// Join the fleet with `url` through the library and through the CLI (stores under `dir`),
/// both refused at once for `why`: the library's error text, each checked for the password.
fn refused(dir: &Path, url: &str, why: &str) -> String {
    let config = Config::parse(url).expect("url");
    let started = Instant::now();
    let e = Fleet::open(dir.join("lib"), config, FleetOptions::new("h"))
        .expect_err("PostgreSQL refuses the connection")
        .to_string();
    assert!(
        started.elapsed() < AT_ONCE,
        "refused after {:?}: {e}",
        started.elapsed()
    );
    assert!(!e.contains(PASSWORD) && e.contains(why), "{e}");
    let started = Instant::now();
    let out = run_cli(&dir.join("cli"), url, &["cluster", "status"]);
    let text = shown(&out);
    assert!(
        !out.status.success() && text.contains(why) && started.elapsed() < AT_ONCE,
        "{text}"
    );
    e
}

#[test]
fn over_tls_only_a_verified_host_joins_and_the_password_is_never_shown() {
    let Some(pg) = tls_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = pg.ca();
    let verified = url(&pg, "host", &verify_full(&ca));

    // The schema, created by the CLI as the superuser over verify-full.
    let init = run_cli(
        &dir.path().join("admin"),
        &url(&pg, "postgres", &verify_full(&ca)),
        &["cluster", "init", "--host-role", "host"],
    );
    let text = shown(&init);
    assert!(init.status.success() && text.contains("GRANT"), "{text}");

    // (a) A host that verifies the server joins and appends.
    let fleet = Fleet::open(
        dir.path().join("host"),
        Config::parse(&verified).expect("url"),
        FleetOptions::new("host"),
    )
    .expect("join over verify-full");
    let created = fleet.append_many(vec![AppendItem::new(
        "s1",
        Some(0),
        vec![prompt(0), prompt(1)],
    )
    .creating(header("s1"), SourceEncoding::Jsonl)]);
    assert!(created.iter().all(Result::is_ok), "{created:?}");
    let appended = fleet.append_many(vec![AppendItem::new("s1", Some(2), vec![prompt(2)])]);
    assert!(appended.iter().all(Result::is_ok), "{appended:?}");
    assert_eq!(fleet.store().summary("s1").expect("summary").events, 3);

    // The CLI as a host over verify-full: the fleet's status, as text and JSON.
    let status = run_cli(&dir.path().join("cli"), &verified, &["cluster", "status"]);
    let text = shown(&status);
    assert!(status.status.success(), "{text}");
    assert!(
        text.contains("1 sessions") && text.contains("host: 1"),
        "{text}"
    );
    let status = run_cli(
        &dir.path().join("cli"),
        &verified,
        &["cluster", "status", "--json"],
    );
    let text = shown(&status);
    assert!(status.status.success(), "{text}");
    assert!(text.contains(r#""sessions":1"#), "{text}");
    // `--help` with the URL in the environment, as an operator would have it.
    for args in [&["--help"][..], &["cluster", "status", "--help"]] {
        let help = Command::new(cli())
            .args(args)
            .env("SESSIONLOG_CLUSTER", &verified)
            .output()
            .expect("run sessionlog");
        let text = shown(&help);
        assert!(
            help.status.success() && text.contains("--cluster"),
            "{text}"
        );
    }

    // (b) A plain connection: PostgreSQL has no entry for unencrypted TCP.
    let e = refused(
        &dir.path().join("plain"),
        &url(&pg, "host", "sslmode=disable"),
        "no encryption",
    );
    assert!(e.contains("connect over TLS"), "{e}");

    // (c) verify-full trusting another CA: the server's certificate does not verify.
    let other = tempfile::tempdir().expect("temp dir");
    let wrong_ca = self_signed_ca(other.path(), "another CA").expect("another CA");
    let e = refused(
        &dir.path().join("wrong-ca"),
        &url(&pg, "host", &verify_full(&wrong_ca)),
        "certificate verification failed",
    );
    assert!(e.contains(&wrong_ca.display().to_string()), "{e}");

    // A wrong password: refused, the wrong one not shown either.
    refused(
        &dir.path().join("wrong-pw"),
        &url(&pg, "host", &verify_full(&ca)).replace(PASSWORD, &format!("{PASSWORD}x")),
        "password authentication failed",
    );
}
