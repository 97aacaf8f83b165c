//! Who a host's credentials let it be, on a real PostgreSQL (a throwaway cluster started here).
//! Each host connects as the login role of its own name, a member of the fleet's host role; the
//! fenced functions refuse (privilege error 42501) a `host` argument that is not the caller's
//! login role, so host A's credentials cannot append, take, renew, release, delete or purge as
//! host B, and change nothing trying; as itself A can do each. A's purge leaves alone a deleted
//! session B holds under a live lease. A host that names another host at join is refused there;
//! the superuser acts for any host. A host's role is made by SQL or by `cluster add-host`, and
//! `cluster init` brings a version-2 schema (no host check) up to this one.
//!
//! Needs PostgreSQL 15's server binaries, as `cluster.rs` does.

use std::path::Path;
use std::time::Duration;

use sessionlog::engine::{AppendItem, Error, RefusalKind, SourceEncoding};
use sessionlog_cluster::{Config, Fleet, FleetOptions};
use sessionlog_harness::postgres::TempPostgres;

use crate::cluster::{fleet_database, header, prompt};

/// The login role `name`, a member of the fleet's host role.
fn host_role(pg: &TempPostgres, name: &str) {
    pg.psql(&format!(
        "CREATE ROLE \"{name}\" LOGIN IN ROLE {}",
        sessionlog_cluster::schema::HOST_ROLE
    ))
    .expect("a host role");
}

/// Host `host` of the fleet, connected as role `role`, its store under `dir`.
fn join_as(
    pg: &TempPostgres,
    dir: &Path,
    role: &str,
    host: &str,
) -> sessionlog_cluster::Result<Fleet> {
    let config = Config::parse(&pg.url(role, "postgres")).expect("url");
    Fleet::open(
        dir.join(format!("{role}-{host}")),
        config,
        FleetOptions::new(host),
    )
}

fn create(fleet: &Fleet, id: &str) {
    let created = fleet.append_many(vec![AppendItem::new(
        id,
        Some(0),
        vec![prompt(0), prompt(1)],
    )
    .creating(header(id), SourceEncoding::Jsonl)]);
    assert!(created.iter().all(Result::is_ok), "{id}: {created:?}");
}

/// Session `id`'s owner, epoch, next batch and whether it is deleted, as PostgreSQL holds them
/// (empty when it has no row).
fn state(pg: &TempPostgres, id: &str) -> String {
    pg.psql(&format!(
        "SELECT owner, owner_epoch, next_batch, deleted_at IS NOT NULL \
         FROM sessionlog.sessions WHERE id = '{id}'"
    ))
    .expect("a session's state")
    .trim()
    .to_owned()
}

#[test]
fn a_host_role_acts_as_its_own_host_and_no_other() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    host_role(&pg, "host-a");
    let added = std::process::Command::new(crate::objects::cli())
        .arg("--db")
        .arg(dir.path().join("admin"))
        .args([
            "--cluster",
            &pg.url("postgres", "postgres"),
            "cluster",
            "add-host",
            "host-b",
        ])
        .output()
        .expect("run sessionlog");
    let said = String::from_utf8_lossy(&added.stdout);
    assert!(
        added.status.success()
            && said.contains("CREATE ROLE \"host-b\" LOGIN")
            && said.contains("GRANT sessionlog_host TO \"host-b\""),
        "{said}{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let b = join_as(&pg, dir.path(), "host-b", "host-b").expect("host-b joins as itself");
    create(&b, "b1");
    create(&b, "b2");
    b.set_deleted("b2", true)
        .expect("host-b deletes b2, still holding it");
    let before = [state(&pg, "b1"), state(&pg, "b2")];
    assert_eq!(before[0], "host-b|1|2|f");

    // Host A's credentials, naming host B: every fenced function refuses.
    let mut a_role = postgres::Client::connect(&pg.url("host-a", "postgres"), postgres::NoTls)
        .expect("connect as host-a");
    for (what, sql) in [
        (
            "append as host-b",
            "SELECT * FROM sessionlog.append_batches('host-b', 30, ARRAY['b1'], ARRAY['b1'], \
             ARRAY[1]::bigint[], ARRAY[2]::bigint[], ARRAY[2]::bigint[], ARRAY[1]::bigint[], \
             ARRAY['x'::bytea], ARRAY[0]::bigint[], ARRAY['clean'], ARRAY[NULL]::bytea[], \
             ARRAY[false], ARRAY[0], ARRAY[NULL]::text[], ARRAY[NULL]::bigint[])",
        ),
        (
            "create as host-b",
            "SELECT * FROM sessionlog.append_batches('host-b', 30, ARRAY['n1'], ARRAY['n1'], \
             ARRAY[1]::bigint[], ARRAY[0]::bigint[], ARRAY[0]::bigint[], ARRAY[0]::bigint[], \
             ARRAY[''::bytea], ARRAY[0]::bigint[], ARRAY['clean'], ARRAY['h'::bytea], \
             ARRAY[false], ARRAY[0], ARRAY[NULL]::text[], ARRAY[NULL]::bigint[])",
        ),
        (
            "acquire as host-b",
            "SELECT * FROM sessionlog.acquire('host-b', 'b1', 30, true)",
        ),
        (
            "renew as host-b",
            "SELECT * FROM sessionlog.renew('host-b', 30, ARRAY['b1'], ARRAY['b1'], ARRAY[1]::bigint[])",
        ),
        (
            "release as host-b",
            "SELECT sessionlog.release('host-b', 'b1', 'b1', 1)",
        ),
        (
            "delete as host-b",
            "SELECT sessionlog.set_deleted('host-b', 'b1', 'b1', 1, true)",
        ),
        (
            "restore as host-b",
            "SELECT sessionlog.set_deleted('host-b', 'b2', 'b2', 1, false)",
        ),
        ("purge as host-b", "SELECT * FROM sessionlog.purge('host-b', 0)"),
    ] {
        let e = a_role.batch_execute(sql).expect_err(what);
        let db = e.as_db_error().unwrap_or_else(|| panic!("{what}: {e}"));
        assert_eq!(db.code().code(), "42501", "{what}: {e}");
        assert!(
            db.message()
                .contains("role \"host-a\" may not act as host \"host-b\""),
            "{what}: {}",
            db.message()
        );
    }
    assert_eq!(
        [state(&pg, "b1"), state(&pg, "b2")],
        before,
        "nothing changed"
    );
    assert_eq!(state(&pg, "n1"), "", "nothing created");

    // A host naming another host at join is refused there, saying so.
    let e = join_as(&pg, dir.path(), "host-a", "host-b").expect_err("host-a as host-b");
    assert!(
        e.to_string()
            .contains("role \"host-a\" may not act as host \"host-b\""),
        "{e}"
    );

    // As itself, host A does each: create, append, take, delete, release, purge.
    let a = join_as(&pg, dir.path(), "host-a", "host-a").expect("host-a joins as itself");
    create(&a, "a1");
    let appended = a.append_many(vec![AppendItem::new("a1", Some(2), vec![prompt(2)])]);
    assert!(appended.iter().all(Result::is_ok), "{appended:?}");
    a.renew().expect("renews its own leases");
    a.set_deleted("a1", true).expect("deletes its own session");
    assert!(a.release("a1").expect("releases"));
    a.acquire("a1", false).expect("takes it again");
    let purged = a.purge(Duration::ZERO).expect("purges");
    // B's deleted session, under B's live lease, is not A's to purge.
    assert_eq!(purged, ["a1"]);
    assert_eq!(state(&pg, "b2"), before[1]);
    assert_eq!(b.purge(Duration::ZERO).expect("host-b purges"), ["b2"]);

    // B's session under its live lease: A as itself is refused without force, and a forced
    // takeover (open to every host: it is how a dead host's sessions move) fences B.
    let owned = a.acquire("b1", false).expect_err("owned by host-b");
    assert!(owned.to_string().contains("host-b"), "{owned}");
    a.acquire("b1", true).expect("taken over by force");
    let fenced = b
        .append_many(vec![AppendItem::new("b1", Some(2), vec![prompt(2)])])
        .pop()
        .expect("an outcome")
        .expect_err("fenced");
    assert!(
        matches!(&fenced, Error::Refused(r) if r.kind == RefusalKind::Fenced),
        "{fenced}"
    );

    // The superuser acts for any host (operators' tooling).
    let admin = join_as(&pg, dir.path(), "postgres", "host-b").expect("the superuser as host-b");
    admin.acquire("b1", true).expect("takes b1 for host-b");
    assert!(
        state(&pg, "b1").starts_with("host-b|3|"),
        "{}",
        state(&pg, "b1")
    );
}

#[test]
fn cluster_init_upgrades_a_version_2_schema_to_hosts_bound_to_their_roles() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    host_role(&pg, "host-a");
    // Version 2's functions: no `check_caller`, and a `purge` that names no host.
    pg.psql(
        "DROP FUNCTION sessionlog.purge(text, bigint); \
         DROP FUNCTION sessionlog.check_caller(text)",
    )
    .expect("this version's own functions dropped");
    pg.psql(include_str!("data/fleet_functions_v2.sql"))
        .expect("version 2's functions");
    pg.psql("UPDATE sessionlog.schema_version SET version = 2")
        .expect("version 2");
    let e = join_as(&pg, dir.path(), "host-a", "host-a").expect_err("another version");
    assert!(e.to_string().contains("is version 2"), "{e}");

    let mut admin = postgres::Client::connect(&pg.url("postgres", "postgres"), postgres::NoTls)
        .expect("connect as the superuser");
    sessionlog_cluster::schema::init(&mut admin, &[]).expect("upgraded");
    assert_eq!(
        pg.psql(
            "SELECT string_agg(p.oid::regprocedure::text, ' ') FROM pg_proc p \
             WHERE p.proname = 'purge'"
        )
        .expect("purge's signatures")
        .trim(),
        "sessionlog.purge(text,bigint)"
    );
    let a = join_as(&pg, dir.path(), "host-a", "host-a").expect("joins the upgraded schema");
    create(&a, "a1");
    let mut a_role = postgres::Client::connect(&pg.url("host-a", "postgres"), postgres::NoTls)
        .expect("connect as host-a");
    let e = a_role
        .batch_execute("SELECT * FROM sessionlog.acquire('host-b', 'a1', 30, true)")
        .expect_err("host-a as host-b");
    assert_eq!(e.code().map(|c| c.code()), Some("42501"), "{e}");
    assert!(
        state(&pg, "a1").starts_with("host-a|1|"),
        "{}",
        state(&pg, "a1")
    );
}
