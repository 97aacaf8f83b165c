//! The fleet on a real PostgreSQL (a throwaway cluster started here): two hosts' stores over one
//! system of record. Sessions created and appended on one host are acquired by the other, which
//! catches up byte for byte; the host taken over is fenced (its appends refused, PostgreSQL
//! holding nothing of them); a host with an empty disk rebuilds every session; a batch
//! PostgreSQL already holds, appended again by its host, is acknowledged once; and a host's role
//! can run the fenced functions and nothing else (as which host: `cluster_roles.rs`).
//!
//! Needs PostgreSQL 15's server binaries (Debian's `postgresql-15`, installed by `./x test`);
//! without them each test fails under CI (`CI` set) and elsewhere prints a `SKIPPED` line.

use std::path::Path;

use sessionlog::engine::{AppendItem, Error, ExportFormat, RefusalKind, SourceEncoding};
use sessionlog_cluster::{schema, Config, Fleet, FleetOptions};
use sessionlog_harness::postgres::{PgSetup, TempPostgres};
use sessionlog_harness::requirement::missing;

use crate::fixtures::ev;

/// A started cluster with the schema and a login role `host` for the hosts, or `None` when
/// PostgreSQL is not installed: then the calling test fails under CI and says on stderr what it
/// skipped elsewhere (`requirement::missing`).
pub fn fleet_database() -> Option<TempPostgres> {
    if !sessionlog_harness::postgres::available() {
        missing(
            "PostgreSQL 15's server binaries (Debian's postgresql-15)",
            "they are not installed",
        );
        return None;
    }
    let pg = TempPostgres::start(&PgSetup::default()).expect("start PostgreSQL");
    pg.psql("CREATE ROLE host LOGIN").expect("host role");
    let mut admin = postgres::Client::connect(&pg.url("postgres", "postgres"), postgres::NoTls)
        .expect("connect as the superuser");
    schema::init(&mut admin, &["host".to_owned()]).expect("schema");
    Some(pg)
}

/// The URL host `host` connects with: as the login role of its own name (made here, a member of
/// the fleet's host role), the only host that role may act as.
pub fn host_url(pg: &TempPostgres, host: &str) -> String {
    let mut admin = postgres::Client::connect(&pg.url("postgres", "postgres"), postgres::NoTls)
        .expect("connect as the superuser");
    schema::add_host(&mut admin, host).expect("the host's login role");
    pg.url(host, "postgres")
}

fn join(pg: &TempPostgres, dir: &Path, host: &str) -> Fleet {
    let config = Config::parse(&host_url(pg, host)).expect("url");
    Fleet::open(dir.join(host), config, FleetOptions::new(host)).expect("join the fleet")
}

pub fn header(id: &str) -> String {
    format!(
        r#"{{"type":"session","version":0,"id":"{id}","createdAt":1,"cwd":"/w","delegationDepth":0}}"#
    )
}

pub fn prompt(n: u64) -> sessionlog::codec::format::event::NewEvent {
    ev(&format!(
        r#"{{"type":"user/message","time":{n},"data":{{"content":[{{"type":"text","text":"m{n}"}}],"source":{{"kind":"user"}},"role":"user","id":"u{n}"}},"surfaceOp":"append"}}"#
    ))
}

fn exported(fleet: &Fleet, id: &str, format: ExportFormat) -> Vec<u8> {
    let mut out = Vec::new();
    fleet
        .store()
        .export(id, Some(format), &mut out)
        .expect("export");
    out
}

fn append(fleet: &Fleet, id: &str, at: u64, n: u64) -> sessionlog::engine::Result<()> {
    let events = (at..at + n).map(prompt).collect();
    fleet
        .append_many(vec![AppendItem::new(id, Some(at), events)])
        .pop()
        .expect("an outcome")
        .map(drop)
}

#[test]
fn a_session_moves_between_hosts_and_the_host_taken_over_is_fenced() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let a = join(&pg, dir.path(), "host-a");
    let b = join(&pg, dir.path(), "host-b");
    for (id, encoding) in [
        ("plain", SourceEncoding::Jsonl),
        ("packed", SourceEncoding::JsonlZstd),
    ] {
        let created = a.append_many(vec![AppendItem::new(
            id,
            Some(0),
            vec![prompt(0), prompt(1)],
        )
        .creating(header(id), encoding)]);
        assert!(created.iter().all(Result::is_ok), "{created:?}");
        append(&a, id, 2, 3).expect("append on its creator");

        // Held by host-a under a live lease: host-b needs force.
        let refused = b.acquire(id, false).expect_err("owned");
        assert!(refused.to_string().contains("host-a"), "{refused}");
        let taken = b.acquire(id, true).expect("taken over");
        assert_eq!(taken.caught_up, 2, "two batches caught up");
        for format in [ExportFormat::Jsonl, ExportFormat::JsonlZstd] {
            assert_eq!(exported(&a, id, format), exported(&b, id, format), "{id}");
        }

        // host-a is fenced: refused, nothing written there or in PostgreSQL.
        let before = exported(&a, id, ExportFormat::Jsonl);
        let fenced = append(&a, id, 5, 1).expect_err("fenced");
        assert!(
            matches!(&fenced, Error::Refused(r) if r.kind == RefusalKind::Fenced),
            "{fenced}"
        );
        assert_eq!(exported(&a, id, ExportFormat::Jsonl), before);
        append(&b, id, 5, 2).expect("append on the new owner");

        // Back to host-a, which catches up on what host-b wrote.
        let back = a.acquire(id, true).expect("taken back");
        assert_eq!(back.caught_up, 1);
        assert_eq!(
            exported(&a, id, ExportFormat::Jsonl),
            exported(&b, id, ExportFormat::Jsonl)
        );
        assert_eq!(a.store().summary(id).expect("summary").events, 7);
    }

    // A host with an empty disk loses nothing: every session rebuilt from PostgreSQL.
    let c = join(&pg, dir.path(), "host-c");
    for row in c.sessions().expect("listing") {
        c.acquire(&row.id, true).expect("rebuilt");
        assert_eq!(
            exported(&c, &row.id, ExportFormat::Jsonl),
            exported(&a, &row.id, ExportFormat::Jsonl)
        );
    }
    verified(&[&a, &b, &c]);
}

/// Every index relation of each host's store checks out.
pub fn verified(fleets: &[&Fleet]) {
    for fleet in fleets {
        let report = fleet.store().verify(&[]).expect("verify");
        assert!(
            report.problems.is_empty(),
            "{}: {:?}",
            fleet.host(),
            report.problems
        );
    }
}

/// The batch rows PostgreSQL holds for session `id`.
pub fn batch_rows(pg: &TempPostgres, id: &str) -> u64 {
    pg.psql(&format!(
        "SELECT count(*) FROM sessionlog.batches WHERE session_id = '{id}'"
    ))
    .expect("count")
    .trim()
    .parse()
    .expect("a count")
}

#[test]
fn a_batch_postgres_already_holds_appended_again_by_its_host_is_acknowledged_once() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let creating = |fleet: &Fleet, first: u64| {
        fleet
            .append_many(vec![AppendItem::new(
                "s",
                Some(0),
                vec![prompt(first), prompt(first + 1)],
            )
            .creating(header("s"), SourceEncoding::Jsonl)])
            .pop()
            .expect("an outcome")
    };
    let first = join(&pg, dir.path(), "h");
    creating(&first, 0).expect("created");
    append(&first, "s", 2, 3).expect("appended");

    // The same host, its store without those commits (as after a commit whose outcome stayed
    // unknown and was refused as unavailable): PostgreSQL is ahead of it by batches it holds.
    let config = Config::parse(&host_url(&pg, "h")).expect("url");
    let again = Fleet::open(dir.path().join("again"), config, FleetOptions::new("h"))
        .expect("join the fleet");
    creating(&again, 0).expect("the creation PostgreSQL holds is acknowledged");
    append(&again, "s", 2, 3).expect("the batch PostgreSQL holds is acknowledged");
    assert_eq!(batch_rows(&pg, "s"), 2, "nothing committed twice");
    append(&again, "s", 5, 1).expect("and the session goes on");
    assert_eq!(batch_rows(&pg, "s"), 3);
    first.sync("s").expect("catch up");
    assert_eq!(
        exported(&again, "s", ExportFormat::Jsonl),
        exported(&first, "s", ExportFormat::Jsonl)
    );

    // Other bytes where PostgreSQL holds a batch stay refused as stale, nothing written.
    let config = Config::parse(&host_url(&pg, "h")).expect("url");
    let other = Fleet::open(dir.path().join("other"), config, FleetOptions::new("h"))
        .expect("join the fleet");
    let refused = creating(&other, 100).expect_err("other bytes");
    assert!(
        matches!(&refused, Error::Refused(r) if r.kind == RefusalKind::Stale),
        "{refused}"
    );
    assert!(
        other.store().summary("s").is_err(),
        "nothing stored locally"
    );
    assert_eq!(batch_rows(&pg, "s"), 3);
    for fleet in [&first, &again] {
        let report = fleet.store().verify(&[]).expect("verify");
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }
}

#[test]
fn a_creation_with_no_events_postgres_already_holds_is_acknowledged_once() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let create = |fleet: &Fleet, line: String| {
        fleet
            .append_many(vec![
                AppendItem::new("e", Some(0), Vec::new()).creating(line, SourceEncoding::Jsonl)
            ])
            .pop()
            .expect("an outcome")
    };
    let first = join(&pg, dir.path(), "h");
    create(&first, header("e")).expect("created");
    let config = Config::parse(&host_url(&pg, "h")).expect("url");
    let again = Fleet::open(dir.path().join("again"), config, FleetOptions::new("h"))
        .expect("join the fleet");
    create(&again, header("e")).expect("the creation PostgreSQL holds is acknowledged");
    append(&again, "e", 0, 2).expect("and the session goes on");
    assert_eq!(batch_rows(&pg, "e"), 1);
    first.sync("e").expect("catch up");
    assert_eq!(
        exported(&again, "e", ExportFormat::Jsonl),
        exported(&first, "e", ExportFormat::Jsonl)
    );
}

#[test]
fn a_host_role_runs_the_fenced_functions_and_nothing_else() {
    let Some(pg) = fleet_database() else { return };
    let mut host = postgres::Client::connect(&pg.url("host", "postgres"), postgres::NoTls)
        .expect("connect as the host role");
    for statement in [
        "DELETE FROM sessionlog.batches",
        "UPDATE sessionlog.sessions SET owner_epoch = owner_epoch + 1",
        "INSERT INTO sessionlog.lineage VALUES ('x', 'x')",
        "CREATE TABLE sessionlog.mine (x int)",
        "DROP TABLE sessionlog.batches",
    ] {
        let e = host.batch_execute(statement).expect_err(statement);
        let code = e.code().map(|c| c.code().to_owned());
        assert_eq!(code.as_deref(), Some("42501"), "{statement}: {e}");
    }
    host.query("SELECT count(*) FROM sessionlog.sessions", &[])
        .expect("the host role reads");
    host.query(
        "SELECT * FROM sessionlog.renew('host', 5, '{}', '{}', '{}')",
        &[],
    )
    .expect("and runs the functions");
}

#[test]
fn a_refusal_that_stays_fails_the_join_at_once_and_shows_no_password() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let port = pg.port();
    for (url, refusal) in [
        (
            format!("postgres://host:s3cret-pw@127.0.0.1:{port}/nosuchdb"),
            "database \"nosuchdb\" does not exist",
        ),
        (
            format!("postgres://nobody:s3cret-pw@127.0.0.1:{port}/postgres"),
            "role \"nobody\" does not exist",
        ),
    ] {
        let config = Config::parse(&url).expect("url");
        let started = std::time::Instant::now();
        let e = Fleet::open(dir.path().join("h"), config, FleetOptions::new("h"))
            .expect_err("PostgreSQL refuses the connection")
            .to_string();
        // Well inside the minute a failover may take: the refusal was not tried again.
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{url}: refused after {:?}: {e}",
            started.elapsed()
        );
        assert!(e.contains(refusal), "{e}");
        assert!(!e.contains("s3cret-pw"), "{e}");
    }
}
