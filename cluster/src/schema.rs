//! The fleet's schema in PostgreSQL (`sql/schema.sql`: the tables; `sql/functions.sql`: the
//! fenced functions hosts run), created by `sessionlog cluster init`, and the privileges that
//! keep hosts to those functions.
//!
//! Invariant: a host role (a member of [`HOST_ROLE`]) can read the tables and run the functions,
//! and nothing else: no DDL, no INSERT, UPDATE or DELETE of its own. Every write it makes is a
//! function's, fenced by the session's owner epoch (deletion only through `purge` and
//! `purge_session`), and made as the host of the role's own name: each function refuses a `host`
//! that is not the caller's login role (`sessionlog.check_caller`), unless the caller acts for
//! every host (the schema's owner, a member of it, or a superuser). A host's login role is made
//! by [`add_host`].

use postgres::Client;

use crate::error::{Error, Result};

/// The schema version this build reads and writes.
pub const VERSION: i32 = 3;

/// The role every host's login role is granted.
pub const HOST_ROLE: &str = "sessionlog_host";

const TABLES: &str = include_str!("../sql/schema.sql");
const FUNCTIONS: &str = include_str!("../sql/functions.sql");

/// Every function hosts may run, with its signature (for the grants).
const HOST_FUNCTIONS: [&str; 8] = [
    "sessionlog.check_caller(text)",
    "sessionlog.append_batches(text, integer, text[], text[], bigint[], bigint[], bigint[], bigint[], bytea[], bigint[], text[], bytea[], boolean[], integer[], text[], bigint[])",
    "sessionlog.acquire(text, text, integer, boolean)",
    "sessionlog.renew(text, integer, text[], text[], bigint[])",
    "sessionlog.release(text, text, text, bigint)",
    "sessionlog.set_deleted(text, text, text, bigint, boolean)",
    "sessionlog.purge(text, bigint)",
    "sessionlog.purge_session(text, text, text, bigint)",
];

/// Create (or bring up to date) the schema as the connected role, which owns it, and grant
/// [`HOST_ROLE`] what hosts need, and that role to each of `host_roles`. Returns the
/// privilege statements applied, for the operator to see.
pub fn init(
    client: &mut Client,
    host_roles: &[String],
) -> std::result::Result<Vec<String>, postgres::Error> {
    let mut tx = client.transaction()?;
    tx.batch_execute(TABLES)?;
    tx.batch_execute(FUNCTIONS)?;
    tx.execute("DELETE FROM sessionlog.schema_version", &[])?;
    tx.execute(
        "INSERT INTO sessionlog.schema_version (version) VALUES ($1)",
        &[&VERSION],
    )?;
    let exists: bool = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)",
            &[&HOST_ROLE],
        )?
        .get(0);
    let mut grants = Vec::new();
    if !exists {
        grants.push(format!("CREATE ROLE {HOST_ROLE} NOLOGIN"));
    }
    grants.push("REVOKE ALL ON ALL TABLES IN SCHEMA sessionlog FROM PUBLIC".to_owned());
    grants.push(format!("GRANT USAGE ON SCHEMA sessionlog TO {HOST_ROLE}"));
    grants.push(format!(
        "GRANT SELECT ON ALL TABLES IN SCHEMA sessionlog TO {HOST_ROLE}"
    ));
    for f in HOST_FUNCTIONS {
        grants.push(format!("REVOKE ALL ON FUNCTION {f} FROM PUBLIC"));
        grants.push(format!("GRANT EXECUTE ON FUNCTION {f} TO {HOST_ROLE}"));
    }
    for role in host_roles {
        grants.push(format!("GRANT {HOST_ROLE} TO {}", quote_ident(role)));
    }
    for statement in &grants {
        tx.batch_execute(statement)?;
    }
    tx.commit()?;
    Ok(grants)
}

/// Make `host` a host of the fleet: its login role of that name (made when missing, without a
/// password: the operator sets one, or a certificate, as the server authenticates), a member of
/// [`HOST_ROLE`], so that it runs the fenced functions as host `host` and as no other. Run as the
/// schema's owner after [`init`]; returns the statements applied.
pub fn add_host(
    client: &mut Client,
    host: &str,
) -> std::result::Result<Vec<String>, postgres::Error> {
    let mut tx = client.transaction()?;
    let exists: bool = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)",
            &[&host],
        )?
        .get(0);
    let mut statements = Vec::new();
    if !exists {
        statements.push(format!("CREATE ROLE {} LOGIN", quote_ident(host)));
    }
    statements.push(format!("GRANT {HOST_ROLE} TO {}", quote_ident(host)));
    for statement in &statements {
        tx.batch_execute(statement)?;
    }
    tx.commit()?;
    Ok(statements)
}

/// Refuse (42501, naming the role and the host) a connection whose role may not act as `host`.
pub(crate) fn check_caller(
    client: &mut Client,
    host: &str,
) -> std::result::Result<(), postgres::Error> {
    client
        .execute("SELECT sessionlog.check_caller($1)", &[&host])
        .map(drop)
}

/// Refuse a database whose schema is missing or of another version.
pub(crate) fn check(client: &mut Client) -> std::result::Result<Result<()>, postgres::Error> {
    let present: bool = client
        .query_one(
            "SELECT to_regclass('sessionlog.schema_version') IS NOT NULL",
            &[],
        )?
        .get(0);
    if !present {
        return Ok(Err(Error::Schema("is missing".into())));
    }
    let rows = client.query("SELECT version FROM sessionlog.schema_version", &[])?;
    Ok(match rows.first().map(|r| r.get::<_, i32>(0)) {
        Some(VERSION) => Ok(()),
        Some(v) => Err(Error::Schema(format!(
            "is version {v}; this build uses version {VERSION}"
        ))),
        None => Err(Error::Schema("has no version".into())),
    })
}

/// `name` as a quoted SQL identifier.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
