//! A session's life across the fleet's hosts (several `Fleet` handles in one process, one real
//! PostgreSQL): removing one session purges that session alone; the fleet-wide purge keeps what a
//! live host holds; deletion, restoration and purges reach every host's store by catch-up; an
//! id reused after a purge replaces the old local copy; an acquisition whose catch-up fails
//! leaves nothing held; a host deposed by a takeover serves its own copy no longer than its
//! read bound; and a host trusts its copy only while its lease, renewed, keeps other hosts from
//! taking the session over without force or purging it.

use std::path::Path;
use std::time::Duration;

use sessionlog::engine::{AppendItem, ExportFormat, SourceEncoding};
use sessionlog_cluster::{Config, Error, Fleet, FleetOptions};
use sessionlog_harness::postgres::TempPostgres;

use crate::cluster::{fleet_database, host_url, prompt, verified};

fn join(pg: &TempPostgres, dir: &Path, host: &str) -> Fleet {
    join_with(pg, dir, FleetOptions::new(host))
}

fn join_with(pg: &TempPostgres, dir: &Path, options: FleetOptions) -> Fleet {
    let config = Config::parse(&host_url(pg, &options.host)).expect("url");
    let path = dir.join(&options.host);
    Fleet::open(path, config, options).expect("join the fleet")
}

/// A header line for `id` created at `created_at`.
fn header_at(id: &str, created_at: u64) -> String {
    format!(
        r#"{{"type":"session","version":0,"id":"{id}","createdAt":{created_at},"cwd":"/w","delegationDepth":0}}"#
    )
}

/// Create `id` on `fleet` with the events `events` (prompts by number) in one batch.
fn create(fleet: &Fleet, id: &str, created_at: u64, events: std::ops::Range<u64>) {
    let created = fleet
        .append_many(vec![AppendItem::new(
            id,
            Some(0),
            events.map(prompt).collect(),
        )
        .creating(header_at(id, created_at), SourceEncoding::Jsonl)])
        .pop()
        .expect("an outcome");
    created.unwrap_or_else(|e| panic!("creating {id} on {}: {e}", fleet.host()));
}

/// Append prompts `events` to `id` on `fleet` in one batch, from seq `at`.
fn append(fleet: &Fleet, id: &str, at: u64, events: std::ops::Range<u64>) {
    let appended = fleet
        .append_many(vec![AppendItem::new(
            id,
            Some(at),
            events.map(prompt).collect(),
        )])
        .pop()
        .expect("an outcome");
    appended.unwrap_or_else(|e| panic!("appending to {id} on {}: {e}", fleet.host()));
}

fn exported(fleet: &Fleet, id: &str) -> Vec<u8> {
    let mut out = Vec::new();
    fleet
        .store()
        .export(id, Some(ExportFormat::Jsonl), &mut out)
        .unwrap_or_else(|e| panic!("exporting {id} on {}: {e}", fleet.host()));
    out
}

/// Whether PostgreSQL holds a row for session `id`.
fn in_postgres(pg: &TempPostgres, id: &str) -> bool {
    pg.psql(&format!(
        "SELECT count(*) FROM sessionlog.sessions WHERE id = '{id}'"
    ))
    .expect("count")
    .trim()
        == "1"
}

#[test]
fn removing_a_session_purges_that_session_alone() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let a = join(&pg, dir.path(), "host-a");
    let b = join(&pg, dir.path(), "host-b");
    create(&a, "restorable", 1, 0..2);
    create(&b, "removed", 1, 0..2);
    // Deleted on A, to stay restorable until an operator's purge.
    a.set_deleted("restorable", true).expect("deleted");
    a.release("restorable").expect("released");

    b.remove("removed").expect("removed");
    assert!(!in_postgres(&pg, "removed"), "the removed session is gone");
    assert!(b.store().summary("removed").is_err(), "and so is B's copy");
    assert!(!b.holds("removed"));
    assert!(
        in_postgres(&pg, "restorable"),
        "removing one session purged another host's deleted session"
    );
    a.acquire("restorable", false).expect("acquired");
    a.set_deleted("restorable", false).expect("restored");
    append(&a, "restorable", 2, 2..3);

    // Only the host holding a session removes it.
    let refused = a.remove("removed").expect_err("not held");
    assert!(matches!(refused, Error::NotHeld(_)), "{refused}");
    let refused = b.remove("restorable").expect_err("held by A");
    assert!(matches!(refused, Error::NotHeld(_)), "{refused}");
    assert!(in_postgres(&pg, "restorable"));
    verified(&[&a, &b]);
}

#[test]
fn the_fleet_wide_purge_keeps_a_deleted_session_a_live_host_holds() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let a = join(&pg, dir.path(), "host-a");
    let operator = join(&pg, dir.path(), "operator");
    create(&a, "s", 1, 0..2);
    a.set_deleted("s", true).expect("deleted");

    // A may still restore it under its live lease: the purge leaves it.
    assert_eq!(
        operator.purge(Duration::ZERO).expect("purge"),
        Vec::<String>::new()
    );
    assert!(
        in_postgres(&pg, "s"),
        "purged under its holder's live lease"
    );
    a.release("s").expect("released");
    assert_eq!(
        operator.purge(Duration::ZERO).expect("purge"),
        vec!["s".to_owned()]
    );
    assert!(!in_postgres(&pg, "s"));
}

#[test]
fn deletion_restoration_and_purges_reach_every_hosts_store() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let a = join(&pg, dir.path(), "host-a");
    let b = join(&pg, dir.path(), "host-b");
    create(&a, "s", 1, 0..2);
    b.sync("s").expect("copied");

    a.set_deleted("s", true).expect("deleted");
    b.sync("s").expect("caught up");
    let copy = b.store().summary("s").expect("B's copy");
    assert!(copy.deleted_at_ms.is_some(), "the deletion did not reach B");

    a.set_deleted("s", false).expect("restored");
    append(&a, "s", 2, 2..4);
    assert_eq!(b.sync("s").expect("caught up"), 1);
    let copy = b.store().summary("s").expect("B's copy");
    assert_eq!(copy.deleted_at_ms, None, "the restoration did not reach B");
    assert_eq!(exported(&b, "s"), exported(&a, "s"));

    a.remove("s").expect("removed");
    let gone = b.sync("s").expect_err("purged");
    assert!(matches!(gone, Error::UnknownSession(_)), "{gone}");
    assert!(
        b.store().summary("s").is_err(),
        "a purged session stays readable on B"
    );
    verified(&[&a, &b]);
}

#[test]
fn an_id_reused_after_a_purge_replaces_the_old_copy() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let a = join(&pg, dir.path(), "host-a");
    let b = join(&pg, dir.path(), "host-b");
    // Each pair: the first incarnation, then the one after the purge (header time, events).
    let cases = [
        // Another header; the old copy as long as the new log.
        ("other-header", (1, 0..2), (2, 10..12), 0),
        // The same header, other events of the same size: only the bytes tell them apart.
        ("same-size", (1, 5..6), (1, 6..7), 0),
        // The same header, the new log longer: catching up would append onto the old copy.
        ("longer", (1, 0..2), (1, 3..5), 2),
        // The old copy longer than the new log.
        ("shorter", (1, 0..2), (1, 3..4), 0),
    ];
    for (id, (first_at, first), (second_at, second), more) in cases {
        create(&a, id, first_at, first.clone());
        if id == "shorter" {
            append(&a, id, first.end - first.start, 7..9);
        }
        b.sync(id).expect("B's copy of the first incarnation");
        a.remove(id).expect("removed");
        create(&a, id, second_at, second.clone());
        for k in 0..more {
            let at = second.end - second.start + k;
            append(&a, id, at, 20 + k..21 + k);
        }
        b.sync(id)
            .unwrap_or_else(|e| panic!("{id}: catching up the second incarnation: {e}"));
        assert_eq!(
            String::from_utf8_lossy(&exported(&b, id)),
            String::from_utf8_lossy(&exported(&a, id)),
            "{id}: B serves a log that is not the fleet's"
        );
    }
    verified(&[&a, &b]);
}

#[test]
fn acquiring_a_session_restored_elsewhere_catches_it_up() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let a = join(&pg, dir.path(), "host-a");
    let b = join(&pg, dir.path(), "host-b");
    create(&a, "s", 1, 0..2);
    a.set_deleted("s", true).expect("deleted on A");
    a.release("s").expect("released");
    b.acquire("s", false).expect("B takes it");
    b.set_deleted("s", false).expect("restored on B");
    append(&b, "s", 2, 2..3);

    let acquired = a
        .acquire("s", true)
        .unwrap_or_else(|e| panic!("A takes it back: {e}; A holds it: {}", a.holds("s")));
    assert_eq!(acquired.caught_up, 1);
    assert_eq!(exported(&a, "s"), exported(&b, "s"));
    assert_eq!(
        a.store().summary("s").expect("A's copy").deleted_at_ms,
        None
    );
    append(&a, "s", 3, 3..4);
    verified(&[&a, &b]);
}

#[test]
fn an_acquisition_whose_catch_up_fails_leaves_the_session_unheld() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let a = join(&pg, dir.path(), "host-a");
    let b = join(&pg, dir.path(), "host-b");
    create(&a, "s", 1, 0..2);
    append(&a, "s", 2, 2..3);
    b.sync("s").expect("B's copy");
    a.release("s").expect("released");
    // PostgreSQL loses the last batch (a failover that lost a commit): B's copy is ahead.
    pg.psql(
        "DELETE FROM sessionlog.batches WHERE session_id = 's' AND batch = 2; \
         UPDATE sessionlog.sessions SET next_batch = 2, next_seq = 2 WHERE id = 's'",
    )
    .expect("rewind");

    let refused = b.acquire("s", false).expect_err("B's copy is ahead");
    assert!(matches!(refused, Error::Diverged { .. }), "{refused}");
    assert!(!b.holds("s"), "B holds a session it cannot serve");
    // Not left owned either: a host with an empty disk takes it without force.
    let owner = pg
        .psql("SELECT coalesce(owner, '(none)') FROM sessionlog.sessions WHERE id = 's'")
        .expect("owner");
    assert_eq!(owner.trim(), "(none)", "B left the session owned");
    let c = join(&pg, dir.path(), "host-c");
    assert_eq!(c.acquire("s", false).expect("C takes it").caught_up, 1);
}

#[test]
fn a_deposed_host_serves_its_own_copy_no_longer_than_its_read_bound() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let a = join_with(
        &pg,
        dir.path(),
        FleetOptions {
            read_bound: Duration::ZERO,
            ..FleetOptions::new("host-a")
        },
    );
    let b = join(&pg, dir.path(), "host-b");
    create(&a, "s", 1, 0..2);
    b.acquire("s", true).expect("taken over");
    append(&b, "s", 2, 2..4);

    // A's renewals never ran (as when they cannot reach PostgreSQL): past its bound, a read
    // asks PostgreSQL, finds the session taken over, and catches up.
    assert_eq!(a.sync("s").expect("caught up"), 1);
    assert!(!a.holds("s"), "A still takes itself for the owner");
    assert_eq!(exported(&a, "s"), exported(&b, "s"));

    // The owner, within its bound, serves its own copy without asking.
    assert_eq!(b.sync("s").expect("the owner's copy"), 0);
    assert!(b.holds("s"));
}

/// Wait until PostgreSQL records session `id`'s lease as run out.
fn lease_run_out(pg: &TempPostgres, id: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let sql = format!("SELECT lease_until < now() FROM sessionlog.sessions WHERE id = '{id}'");
    while pg.psql(&sql).expect("the lease").trim() != "t" {
        assert!(
            std::time::Instant::now() < deadline,
            "{id}'s lease did not run out within a minute"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A host with a lease of 4 s (also its read bound) and no lease keeper: its leases run out
/// unless its own calls renew them.
fn without_keeper(pg: &TempPostgres, dir: &Path, host: &str) -> Fleet {
    join_with(
        pg,
        dir,
        FleetOptions {
            lease: Duration::from_secs(4),
            ..FleetOptions::new(host)
        },
    )
}

#[test]
fn a_takeover_without_force_never_finds_the_owner_trusting_its_copy() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let a = without_keeper(&pg, dir.path(), "host-a");
    let b = join(&pg, dir.path(), "host-b");
    create(&a, "s", 1, 0..2);
    lease_run_out(&pg, "s");

    // Past its bound, A's read asks PostgreSQL, which still names A the owner.
    a.sync("s").expect("A's read");
    match b.acquire("s", false) {
        // A's read renewed its lease.
        Err(Error::Owned { .. }) => {}
        Ok(_) => {
            append(&b, "s", 2, 2..4);
            a.sync("s").expect("A's read after the takeover");
            let (on_a, on_b) = (exported(&a, "s"), exported(&b, "s"));
            assert!(
                on_a == on_b,
                "B took s over without force, yet A serves its own copy ({} bytes), which \
                 misses B's append ({} bytes on B): A trusts a hold its read found with the \
                 lease run out",
                on_a.len(),
                on_b.len()
            );
        }
        Err(e) => panic!("B's takeover: {e}"),
    }
}

#[test]
fn a_session_the_owner_trusts_is_never_purged_under_it() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let a = without_keeper(&pg, dir.path(), "host-a");
    let operator = join(&pg, dir.path(), "operator");
    create(&a, "s", 1, 0..2);
    a.set_deleted("s", true).expect("deleted");
    lease_run_out(&pg, "s");

    a.sync("s").expect("A's read");
    let purged = operator.purge(Duration::ZERO).expect("the purge");
    if purged.iter().any(|id| id == "s") {
        let read = a.sync("s");
        if let Ok(copy) = a.store().summary("s") {
            panic!(
                "A serves s ({} events) after the operator purged it (A's read answered \
                 {read:?}): A trusts a hold its read found with the lease run out",
                copy.events
            );
        }
    }
}

/// Hold `sessionlog.batches` locked in `admin`'s transaction until a statement of another
/// connection waits for it (a catch-up that read a session's row and now reads its batches),
/// then run `sql` in that transaction and commit: the change lands exactly between the two
/// reads.
fn between_row_and_batches(pg: &TempPostgres, catching_up: impl FnOnce() + Send, sql: &str) {
    let url = pg.url("postgres", "postgres");
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).expect("admin");
    let mut watcher = postgres::Client::connect(&url, postgres::NoTls).expect("watcher");
    let mut tx = admin.transaction().expect("begin");
    tx.batch_execute("LOCK TABLE sessionlog.batches IN ACCESS EXCLUSIVE MODE")
        .expect("lock");
    std::thread::scope(|scope| {
        let reader = scope.spawn(catching_up);
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let waiting: i64 = watcher
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity \
                     WHERE wait_event_type = 'Lock' AND query LIKE '%sessionlog.batches%'",
                    &[],
                )
                .expect("pg_stat_activity")
                .get(0);
            if waiting > 0 {
                break;
            }
            assert!(
                !reader.is_finished(),
                "the catch-up ended without reading batches"
            );
            assert!(
                std::time::Instant::now() < deadline,
                "no catch-up waited for the batches within a minute"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        tx.batch_execute(sql).expect("the change");
        tx.commit().expect("commit");
        reader.join().expect("the catch-up's thread");
    });
}

#[test]
fn a_session_purged_while_a_host_catches_it_up_is_not_served_part_built() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let a = join(&pg, dir.path(), "host-a");
    let b = join(&pg, dir.path(), "host-b");
    create(&a, "s", 1, 0..2);
    append(&a, "s", 2, 2..3);
    a.set_deleted("s", true).expect("deleted");
    a.release("s").expect("released");

    // B, which never held a copy, reads the row; the session is purged before its batches are
    // read.
    let mut synced = None;
    between_row_and_batches(
        &pg,
        || synced = Some(b.sync("s")),
        "SELECT * FROM sessionlog.purge('host-a', 0)",
    );
    assert!(!in_postgres(&pg, "s"), "the purge did not run");
    if let Ok(copy) = b.store().summary("s") {
        panic!(
            "B serves s after its purge as {} event(s) in {} batch(es) under its header \
             (the row counted 3 batches; sync answered {:?})",
            copy.events, copy.batches, synced
        );
    }
    let refused = synced.expect("sync ran").expect_err("purged");
    assert!(matches!(refused, Error::UnknownSession(_)), "{refused}");
    verified(&[&a, &b]);
}

#[test]
fn a_copy_ahead_of_a_session_purged_during_its_catch_up_is_removed() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let a = join(&pg, dir.path(), "host-a");
    let b = join(&pg, dir.path(), "host-b");
    // A keeps a copy of s in three batches; s is purged and created again, shorter, by B.
    create(&a, "s", 1, 0..2);
    append(&a, "s", 2, 2..3);
    append(&a, "s", 3, 3..4);
    a.set_deleted("s", true).expect("deleted");
    a.release("s").expect("released");
    assert_eq!(b.purge(Duration::ZERO).expect("purge"), ["s"]);
    create(&b, "s", 2, 0..1);
    b.release("s").expect("released");
    // The new s is purged in the statement that acquires it for A: A reads its row (fewer
    // batches than its copy) and finds it gone at the re-read.
    pg.psql(
        "CREATE FUNCTION purge_on_acquire() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
           DELETE FROM sessionlog.batches WHERE session_id = NEW.id; \
           DELETE FROM sessionlog.sessions WHERE id = NEW.id; \
           DELETE FROM sessionlog.lineage WHERE id = NEW.id; \
           RETURN NULL; END $$; \
         CREATE TRIGGER purge_on_acquire AFTER UPDATE OF owner ON sessionlog.sessions \
           FOR EACH ROW WHEN (NEW.owner = 'host-a') EXECUTE FUNCTION purge_on_acquire();",
    )
    .expect("the trigger");
    let acquired = a.acquire("s", false);
    pg.psql("DROP TRIGGER purge_on_acquire ON sessionlog.sessions")
        .expect("drop the trigger");
    assert!(!in_postgres(&pg, "s"), "the trigger did not purge s");
    if let Ok(copy) = a.store().summary("s") {
        panic!(
            "A keeps its copy of s ({} batches) after finding s purged (acquire answered \
             {acquired:?}): a read would serve it",
            copy.batches
        );
    }
    let refused = acquired.expect_err("purged");
    assert!(matches!(refused, Error::UnknownSession(_)), "{refused}");
}

/// The scans of the fleet's tables that PostgreSQL has counted, once every other client has
/// gone (a backend reports its counts when it exits).
fn table_scans(pg: &TempPostgres) -> u64 {
    let others = "SELECT count(*) FROM pg_stat_activity \
                  WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()";
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while pg.psql(others).expect("clients").trim() != "0" {
        assert!(
            std::time::Instant::now() < deadline,
            "the hosts' connections stayed open"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    pg.psql(
        "SELECT coalesce(sum(coalesce(idx_scan, 0) + seq_scan), 0) FROM pg_stat_user_tables \
         WHERE schemaname = 'sessionlog'",
    )
    .expect("scans")
    .trim()
    .parse()
    .expect("a count")
}

#[test]
fn listing_sessions_already_caught_up_reads_postgresql_a_few_times_not_once_per_session() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    const SESSIONS: u64 = 60;
    let a = join(&pg, dir.path(), "host-a");
    for n in 0..SESSIONS {
        create(&a, &format!("s{n:02}"), 1, n..n + 2);
    }
    let url = host_url(&pg, "host-b");
    let list = || {
        let out = std::process::Command::new(crate::objects::cli())
            .arg("--db")
            .arg(dir.path().join("host-b"))
            .args(["--cluster", &url, "--host", "host-b", "ls"])
            .output()
            .expect("run sessionlog");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let listed = list();
    for n in 0..SESSIONS {
        assert!(listed.contains(&format!("s{n:02}")), "{listed}");
    }
    // One session moves on and one is replaced under its id (the same header, other events of
    // the same size) while host B is away; the others stay as B's copies have them.
    append(&a, "s07", 2, 30..31);
    a.remove("s08").expect("removed");
    create(&a, "s08", 1, 40..42);
    drop(a);
    let before = table_scans(&pg);
    list();
    let scans = table_scans(&pg) - before;
    assert!(
        scans < SESSIONS / 2,
        "a listing of {SESSIONS} sessions, 2 of them changed, scanned the fleet's tables {scans} times"
    );
    let b = join(&pg, dir.path(), "host-b");
    let a = join(&pg, dir.path(), "host-a");
    for id in ["s07", "s08", "s09"] {
        assert_eq!(
            String::from_utf8_lossy(&exported(&b, id)),
            String::from_utf8_lossy(&exported(&a, id)),
            "{id}: host B's listing left a copy that is not the fleet's"
        );
    }
}

#[test]
fn a_listing_brings_deletions_restorations_purges_and_appends_to_every_copy() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let a = join(&pg, dir.path(), "host-a");
    let b = join(&pg, dir.path(), "host-b");
    for id in ["deleted", "purged", "grown", "restored"] {
        create(&a, id, 1, 0..2);
    }
    a.set_deleted("restored", true).expect("deleted");
    b.sync_all().expect("the first listing");
    assert!(
        b.store().summary("restored").is_err(),
        "a session deleted before host B ever read it was copied by its listing"
    );
    a.set_deleted("deleted", true).expect("deleted");
    a.remove("purged").expect("purged");
    append(&a, "grown", 2, 2..5);
    a.set_deleted("restored", false).expect("restored");
    assert_eq!(b.sync_all().expect("the second listing"), 2);
    let deleted = b.store().summary("deleted").expect("B's copy");
    assert!(
        deleted.deleted_at_ms.is_some(),
        "the deletion did not reach B"
    );
    assert!(
        b.store().summary("purged").is_err(),
        "a purged session stays on B"
    );
    for id in ["grown", "restored"] {
        assert_eq!(exported(&b, id), exported(&a, id), "{id}");
    }
    a.set_deleted("deleted", false).expect("restored");
    b.sync_all().expect("the third listing");
    let restored = b.store().summary("deleted").expect("B's copy");
    assert_eq!(
        restored.deleted_at_ms, None,
        "the restoration did not reach B"
    );
    verified(&[&a, &b]);
}
