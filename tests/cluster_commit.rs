//! The fleet's group commit at its edges, on a real PostgreSQL (a throwaway cluster started here):
//! a commit whose answer is lost and whose retry meets a new owner is read back, not reported
//! fenced; one bad batch or one locked row is refused alone, the rest of its group committed;
//! two concurrent forks into one id cannot swap parents; a local write that fails after
//! PostgreSQL committed says the outcome is unknown, the batch recovered on the next acquire; a
//! commit whose connection ends after PostgreSQL committed (a backend ended while it waits for a
//! synchronous standby; a pooler's error with a SQLSTATE of class 08) is answered with its
//! outcome unknown, never "not committed"; and a host catching up a session it holds while
//! committing batches of its own to it (PostgreSQL first, then its store) takes neither side of
//! that gap for a divergence.
//!
//! Connections are dropped mid-commit, a statement's answer held back or replaced by an error, by
//! a TCP proxy the test controls ([`Proxy`]); rows and tables are held locked by a second connection with an open
//! transaction. Needs PostgreSQL 15's server binaries, as `cluster.rs` does (and root for the
//! full-disk case, as `faults.rs`).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use sessionlog::engine::{AppendItem, Error, ExportFormat, Options, RefusalKind, SourceEncoding};
use sessionlog_cluster::{Config, Fleet, FleetOptions};
use sessionlog_harness::gen::{session_feed, GenOptions, LogFormat};
use sessionlog_harness::postgres::TempPostgres;

use crate::cluster::{batch_rows, fleet_database, header, host_url, prompt, verified};
use crate::faults::{fill, Tmpfs};

/// A TCP proxy in front of PostgreSQL that the test controls. [`Proxy::cut`] closes the client
/// side of every connection and refuses new ones: a statement under way runs on in its backend
/// (whose socket stays open) and commits, its answer never delivered, as when a network drops
/// a connection mid-commit. [`Proxy::open`] lets connections through again. [`Proxy::hold`]
/// keeps one connection's answers from its client until [`Proxy::release`], as a slow network
/// does.
struct Proxy {
    port: u16,
    open: Arc<AtomicBool>,
    /// Every client socket, to cut them.
    clients: Arc<Mutex<Vec<TcpStream>>>,
    hold: Arc<Hold>,
}

/// Which connection's answers wait in the proxy, and whether one waits.
#[derive(Default)]
struct Hold {
    state: Mutex<Held>,
    changed: Condvar,
}

#[derive(Default)]
struct Held {
    /// The connection (by the order the proxy accepted it) whose answers wait, from the first
    /// that answers an executed statement.
    connection: Option<usize>,
    /// Whether such an answer waits.
    waiting: bool,
    /// Hold, instead, the first connection whose client sends a statement holding this text.
    statement: Option<&'static str>,
    /// The connection whose held answer is replaced by an error with this SQLSTATE, and closed.
    failed: Option<(usize, &'static str)>,
}

impl Hold {
    /// Before `chunk`, read from connection `n`'s server, goes to its client: wait while that
    /// connection is held and the chunk answers an executed statement (its first message a
    /// BindComplete, `2`; a statement's preparation, which the driver sends first, passes), or
    /// an answer of it waits already.
    /// What goes to the client instead, if anything (then the connection is closed).
    fn pass(&self, n: usize, chunk: &[u8]) -> Option<Vec<u8>> {
        let mut state = self.state.lock().expect("hold");
        if state.connection == Some(n) && (state.waiting || chunk.first() == Some(&b'2')) {
            state.waiting = true;
            self.changed.notify_all();
            while state.connection == Some(n) {
                state = self.changed.wait(state).expect("hold");
            }
        }
        match state.failed {
            Some((failed, code)) if failed == n => Some(error_response(code)),
            _ => None,
        }
    }

    /// `chunk` goes from connection `n`'s client to its server.
    fn sent(&self, n: usize, chunk: &[u8]) {
        let mut state = self.state.lock().expect("hold");
        let Some(text) = state.statement else { return };
        if state.connection.is_none() && chunk.windows(text.len()).any(|w| w == text.as_bytes()) {
            state.connection = Some(n);
        }
    }
}

/// A FATAL ErrorResponse of the wire protocol with SQLSTATE `code`, as a connection pooler
/// sends when its server connection dies under a statement.
fn error_response(code: &str) -> Vec<u8> {
    let mut fields = Vec::new();
    for (tag, value) in [
        (b'S', "FATAL"),
        (b'V', "FATAL"),
        (b'C', code),
        (b'M', "server conn crashed?"),
    ] {
        fields.push(tag);
        fields.extend_from_slice(value.as_bytes());
        fields.push(0);
    }
    fields.push(0);
    let mut message = vec![b'E'];
    message.extend_from_slice(&(fields.len() as i32 + 4).to_be_bytes());
    message.extend_from_slice(&fields);
    message
}

impl Proxy {
    fn start(to: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("address").port();
        let open = Arc::new(AtomicBool::new(true));
        let clients = Arc::new(Mutex::new(Vec::new()));
        let hold = Arc::new(Hold::default());
        // Server sockets are kept open for the test's life, so that no backend notices a cut.
        let servers = Arc::new(Mutex::new(Vec::new()));
        let (is_open, all, holding) = (Arc::clone(&open), Arc::clone(&clients), Arc::clone(&hold));
        std::thread::spawn(move || {
            for (n, client) in listener.incoming().enumerate() {
                let Ok(client) = client else { continue };
                if !is_open.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else {
                    continue;
                };
                let (Ok(c2), Ok(s2), Ok(c3), Ok(s3)) = (
                    client.try_clone(),
                    server.try_clone(),
                    client.try_clone(),
                    server.try_clone(),
                ) else {
                    continue;
                };
                all.lock().expect("clients").push(c3);
                servers.lock().expect("servers").push(s3);
                let holding = Arc::clone(&holding);
                let sending = Arc::clone(&holding);
                std::thread::spawn(move || {
                    pump(client, server, |chunk| {
                        sending.sent(n, chunk);
                        None
                    })
                });
                std::thread::spawn(move || pump(s2, c2, |chunk| holding.pass(n, chunk)));
            }
        });
        Proxy {
            port,
            open,
            clients,
            hold,
        }
    }

    /// Host `host`'s URL through the proxy (its login role made first).
    fn url(&self, pg: &TempPostgres, host: &str) -> String {
        host_url(pg, host);
        format!("postgres://{host}@127.0.0.1:{}/postgres", self.port)
    }

    /// Host `host`, joined through the proxy.
    fn join(&self, pg: &TempPostgres, dir: &Path, host: &str) -> Arc<Fleet> {
        Arc::new(join_at(&self.url(pg, host), dir, host, |_| {}))
    }

    /// Drop every connection's client side and refuse new connections.
    fn cut(&self) {
        self.refuse_new();
        for c in self.clients.lock().expect("clients").drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    /// Refuse new connections (those made go on).
    fn refuse_new(&self) {
        self.open.store(false, Ordering::SeqCst);
    }

    /// Let connections through again.
    fn open(&self) {
        self.open.store(true, Ordering::SeqCst);
    }

    /// Keep the answers of connection `n` (by the order the proxy accepted it) from its client,
    /// from the first that answers an executed statement, until [`Proxy::release`].
    fn hold(&self, n: usize) {
        *self.hold.state.lock().expect("hold") = Held {
            connection: Some(n),
            ..Held::default()
        };
    }

    /// Keep the answers of the first connection whose client sends a statement holding `text`
    /// from its client, from the first that answers an executed statement.
    fn hold_statement(&self, text: &'static str) {
        *self.hold.state.lock().expect("hold") = Held {
            statement: Some(text),
            ..Held::default()
        };
    }

    /// Replace the held answer with a FATAL error of SQLSTATE `code`, and close its connection.
    fn fail_held(&self, code: &'static str) {
        let mut state = self.hold.state.lock().expect("hold");
        let connection = state.connection.take().expect("a held connection");
        state.statement = None;
        state.failed = Some((connection, code));
        self.hold.changed.notify_all();
    }

    /// Wait until an answer of the held connection waits in the proxy: its statement ran.
    fn wait_for_held_answer(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut state = self.hold.state.lock().expect("hold");
        while !state.waiting {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no answer of the held connection came");
            state = self.hold.changed.wait_timeout(state, left).expect("hold").0;
        }
    }

    /// Deliver the held answers, and every later one.
    fn release(&self) {
        *self.hold.state.lock().expect("hold") = Held::default();
        self.hold.changed.notify_all();
    }
}

/// Copy `from` to `to` until either ends (never closing `to`'s other direction), each chunk
/// shown to `before` first; when it gives bytes instead, those go to `to`, which is closed.
fn pump(mut from: TcpStream, mut to: TcpStream, before: impl Fn(&[u8]) -> Option<Vec<u8>>) {
    let mut buf = [0u8; 16 << 10];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if let Some(instead) = before(&buf[..n]) {
                    let _ = to.write_all(&instead);
                    let _ = to.shutdown(Shutdown::Both);
                    return;
                }
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}

fn join_at(url: &str, dir: &Path, host: &str, options: impl FnOnce(&mut FleetOptions)) -> Fleet {
    let config = Config::parse(url).expect("url");
    let mut o = FleetOptions::new(host);
    options(&mut o);
    Fleet::open(dir.join(host), config, o).expect("join the fleet")
}

fn join(pg: &TempPostgres, dir: &Path, host: &str) -> Fleet {
    join_at(&host_url(pg, host), dir, host, |_| {})
}

/// Host `host`, its group commit patient for `patience`.
fn join_patient(pg: &TempPostgres, dir: &Path, host: &str, patience: Duration) -> Arc<Fleet> {
    Arc::new(join_at(&host_url(pg, host), dir, host, |o| {
        o.commit_patience = patience
    }))
}

fn create(fleet: &Fleet, id: &str) -> sessionlog::engine::Result<()> {
    fleet
        .append_many(vec![AppendItem::new(
            id,
            Some(0),
            vec![prompt(0), prompt(1)],
        )
        .creating(header(id), SourceEncoding::Jsonl)])
        .pop()
        .expect("an outcome")
        .map(drop)
}

fn item(id: &str, at: u64, n: u64) -> AppendItem {
    AppendItem::new(id, Some(at), (at..at + n).map(prompt).collect())
}

fn append(fleet: &Fleet, id: &str, at: u64, n: u64) -> sessionlog::engine::Result<()> {
    fleet
        .append_many(vec![item(id, at, n)])
        .pop()
        .expect("an outcome")
        .map(drop)
}

/// Wait until `n` backends wait on a lock.
fn wait_for_lock_waiters(pg: &TempPostgres, n: usize) {
    wait_for_lock_waiters_running(pg, n, "");
}

/// Wait until `n` backends whose statement holds `text` wait on a lock.
fn wait_for_lock_waiters_running(pg: &TempPostgres, n: usize, text: &str) {
    wait_for_backends(
        pg,
        n,
        &format!("wait_event_type = 'Lock' AND strpos(query, '{text}') > 0"),
    );
}

/// Wait until `n` backends of `pg_stat_activity` meet `condition`.
fn wait_for_backends(pg: &TempPostgres, n: usize, condition: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let waiting: usize = pg
            .psql(&format!(
                "SELECT count(*) FROM pg_stat_activity WHERE {condition}"
            ))
            .expect("pg_stat_activity")
            .trim()
            .parse()
            .expect("a count");
        if waiting >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{waiting} backends meet {condition:?}, not {n}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait until PostgreSQL holds `n` batch rows of session `id`.
fn wait_for_batch_rows(pg: &TempPostgres, id: &str, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while batch_rows(pg, id) != n {
        assert!(Instant::now() < deadline, "{id} never had {n} batch rows");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A superuser connection holding session `id`'s row locked (`SELECT … FOR UPDATE` in an open
/// transaction) until it commits.
fn lock_row(pg: &TempPostgres, id: &str) -> postgres::Client {
    let mut lock = postgres::Client::connect(&pg.url("postgres", "postgres"), postgres::NoTls)
        .expect("connect as the superuser");
    lock.batch_execute(&format!(
        "BEGIN; SELECT 1 FROM sessionlog.sessions WHERE id = '{id}' FOR UPDATE"
    ))
    .expect("lock the row");
    lock
}

fn refusal_kind(e: &Error) -> Option<RefusalKind> {
    match e {
        Error::Refused(r) => Some(r.kind),
        _ => None,
    }
}

#[test]
fn a_lost_answer_whose_retry_meets_a_new_owner_is_read_back_not_reported_fenced() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let proxy = Proxy::start(pg.port());
    let a = proxy.join(&pg, dir.path(), "host-a");
    let b = Arc::new(join(&pg, dir.path(), "host-b"));
    create(&a, "s").expect("created on host-a");

    // host-a's commit of seqs 2.. waits on the row lock; its connection is then cut, so its
    // answer is lost while the backend waits on.
    let mut lock = lock_row(&pg, "s");
    let appending = {
        let a = Arc::clone(&a);
        std::thread::spawn(move || append(&a, "s", 2, 1))
    };
    wait_for_lock_waiters(&pg, 1);
    proxy.cut();
    // host-b takes the session over, queued behind host-a's first call.
    let taking = {
        let b = Arc::clone(&b);
        std::thread::spawn(move || b.acquire("s", true))
    };
    wait_for_lock_waiters(&pg, 2);
    // host-a reads back (nothing yet: the first call still waits) and calls again, queued
    // behind host-b's takeover.
    proxy.open();
    wait_for_lock_waiters(&pg, 3);
    lock.batch_execute("COMMIT").expect("release the row");

    let taken = taking.join().expect("takeover thread").expect("taken over");
    assert_eq!(batch_rows(&pg, "s"), 2, "host-a's first call committed");
    assert_eq!(taken.row.next_seq, 3, "{taken:?}");
    let outcome = appending.join().expect("append thread");
    assert!(
        outcome.is_ok(),
        "a batch PostgreSQL holds (and host-b caught up) was answered {outcome:?}"
    );
    let on_b = b.store().summary("s").expect("on host-b").events;
    let on_a = a.store().summary("s").expect("on host-a").events;
    assert_eq!((on_a, on_b), (3, 3));
    // host-a is fenced from here on, its next batch written nowhere.
    let fenced = append(&a, "s", 3, 1).expect_err("fenced");
    assert_eq!(refusal_kind(&fenced), Some(RefusalKind::Fenced), "{fenced}");
    assert_eq!(batch_rows(&pg, "s"), 2);
    verified(&[&a, &b]);
}

#[test]
fn a_session_id_postgres_cannot_hold_is_refused_alone_at_the_door() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let a = join(&pg, dir.path(), "host-a");
    create(&a, "s").expect("created");
    let bad = "with\u{0}nul";
    let group = a.append_many(vec![
        AppendItem::new(bad, Some(0), vec![prompt(0)])
            .creating(header("with\\u0000nul"), SourceEncoding::Jsonl),
        item("s", 2, 1),
    ]);
    assert!(group[1].is_ok(), "the other tenant's batch: {:?}", group[1]);
    let e = group[0].as_ref().expect_err("an id holding NUL");
    let text = e.to_string();
    assert!(
        text.contains("NUL") && text.contains("with\\u0000nul"),
        "the error names the session and the rule: {text}"
    );
    assert_ne!(refusal_kind(e), Some(RefusalKind::Unavailable), "{text}");
    assert_eq!(batch_rows(&pg, "s"), 2);
}

#[test]
fn a_batch_postgres_refuses_for_good_is_refused_alone_and_its_group_committed() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let a = join(&pg, dir.path(), "host-a");
    for id in ["s1", "poison", "s2"] {
        create(&a, id).expect("created");
    }
    // A batch of session "poison" fails in PostgreSQL for good (a data error, raised by a
    // trigger the test adds), inside the group's one transaction.
    pg.psql(
        "CREATE FUNCTION sessionlog.poison() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN IF NEW.session_id = 'poison' THEN \
           RAISE EXCEPTION 'poisoned batch' USING ERRCODE = '22000'; END IF; \
         RETURN NEW; END $$; \
         CREATE TRIGGER poison BEFORE INSERT ON sessionlog.batches \
           FOR EACH ROW EXECUTE FUNCTION sessionlog.poison()",
    )
    .expect("the trigger");
    let group = a.append_many(vec![
        item("s1", 2, 1),
        item("poison", 2, 1),
        item("s2", 2, 1),
    ]);
    assert!(group[0].is_ok(), "s1: {:?}", group[0]);
    assert!(group[2].is_ok(), "s2: {:?}", group[2]);
    let e = group[1].as_ref().expect_err("the poisoned batch");
    assert!(e.to_string().contains("poisoned batch"), "{e}");
    assert_eq!(
        [
            batch_rows(&pg, "s1"),
            batch_rows(&pg, "poison"),
            batch_rows(&pg, "s2")
        ],
        [2, 1, 2]
    );
    append(&a, "s1", 3, 1).expect("s1 goes on");
}

#[test]
fn a_row_locked_elsewhere_stalls_only_its_own_batch_for_the_hook_s_patience() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let patience = Duration::from_secs(4);
    let a = join_patient(&pg, dir.path(), "host-a", patience);
    create(&a, "locked").expect("created");
    create(&a, "free").expect("created");
    let mut lock = lock_row(&pg, "locked");
    let (tx, rx) = mpsc::channel();
    let committing = {
        let a = Arc::clone(&a);
        std::thread::spawn(move || {
            let started = Instant::now();
            let group = a.append_many(vec![item("locked", 2, 1), item("free", 2, 1)]);
            let _ = tx.send((group, started.elapsed()));
        })
    };
    let answered = rx.recv_timeout(patience + Duration::from_secs(20));
    lock.batch_execute("COMMIT").expect("release the row");
    committing.join().expect("append thread");
    let (group, took) = answered.expect("the group commit still waited on the row lock");
    assert!(group[1].is_ok(), "the free session's batch: {:?}", group[1]);
    let e = group[0].as_ref().expect_err("the locked session's batch");
    assert_eq!(refusal_kind(e), Some(RefusalKind::Unavailable), "{e}");
    assert!(e.to_string().contains("not committed"), "{e}");
    assert!(
        took < patience + Duration::from_secs(10),
        "answered after {took:?}"
    );
    assert_eq!([batch_rows(&pg, "locked"), batch_rows(&pg, "free")], [1, 2]);
    append(&a, "locked", 2, 1).expect("appended once the row is free");
}

/// Session `s`'s batch at seq 2, committed by PostgreSQL while its host could not hear it:
/// `answered` says its outcome is unknown, and appending it again reports it committed, once.
fn answered_unknown_then_committed_once(
    pg: &TempPostgres,
    a: &Fleet,
    answered: sessionlog::engine::Result<()>,
) {
    assert_eq!(batch_rows(pg, "s"), 2, "the batch committed");
    let e = answered.expect_err("the host could not reach PostgreSQL after the commit");
    assert_eq!(refusal_kind(&e), Some(RefusalKind::Unavailable), "{e}");
    assert!(
        e.to_string().contains("outcome unknown"),
        "a batch PostgreSQL holds was answered: {e}"
    );
    append(a, "s", 2, 1).expect("the batch, appended again");
    assert_eq!(a.store().summary("s").expect("s").events, 3);
    assert_eq!(batch_rows(pg, "s"), 2);
}

#[test]
fn a_backend_ended_while_waiting_for_a_synchronous_standby_is_answered_outcome_unknown() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let patience = Duration::from_secs(3);
    let a = join_patient(&pg, dir.path(), "host-a", patience);
    create(&a, "s").expect("created");

    // Commits wait for a synchronous standby that never comes: flushed locally, unanswered. The
    // backend is then ended by the server (as a failover's shutdown of the old primary ends
    // it: SQLSTATE 57P01), its transaction committed, while the host cannot connect again
    // within its patience.
    pg.psql("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
        .expect("a synchronous standby");
    pg.psql("SELECT pg_reload_conf()").expect("reload");
    let appending = {
        let a = Arc::clone(&a);
        std::thread::spawn(move || append(&a, "s", 2, 1))
    };
    // Waiting for the standby: flushed locally.
    wait_for_backends(&pg, 1, "wait_event = 'SyncRep'");
    pg.psql("SET synchronous_commit = local; ALTER ROLE \"host-a\" NOLOGIN")
        .expect("no login");
    pg.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
        .expect("end the backend");
    let answered = appending.join().expect("append thread");
    pg.psql("ALTER SYSTEM RESET synchronous_standby_names")
        .expect("no synchronous standby");
    pg.psql("SELECT pg_reload_conf()").expect("reload");
    pg.psql("SET synchronous_commit = local; ALTER ROLE \"host-a\" LOGIN")
        .expect("login");

    answered_unknown_then_committed_once(&pg, &a, answered);
}

#[test]
fn a_connection_error_with_a_sqlstate_after_the_commit_is_answered_outcome_unknown() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let proxy = Proxy::start(pg.port());
    let url = proxy.url(&pg, "host-a");
    let a = Arc::new(join_at(&url, dir.path(), "host-a", |o| {
        o.commit_patience = Duration::from_secs(3)
    }));
    create(&a, "s").expect("created");

    // The commit's answer, sent after PostgreSQL committed, is replaced by what a connection
    // pooler says when its server connection dies under a statement (FATAL, SQLSTATE 08P01);
    // the host then cannot connect again within its patience.
    proxy.hold_statement("append_batches");
    let appending = {
        let a = Arc::clone(&a);
        std::thread::spawn(move || append(&a, "s", 2, 1))
    };
    proxy.wait_for_held_answer();
    proxy.refuse_new();
    proxy.fail_held("08P01");
    let answered = appending.join().expect("append thread");
    proxy.open();

    answered_unknown_then_committed_once(&pg, &a, answered);
}

/// A V4 session imported on `fleet`, its id.
fn parent(fleet: &Fleet, n: u64) -> String {
    let opts = GenOptions {
        sessions: 1,
        events_per_session: 40,
        seed: n,
        torn_fraction: 0.0,
    };
    let feed = session_feed(n, &opts, LogFormat::V4);
    fleet
        .import(&format!("parent-{n}"), &feed.dsh_bytes())
        .expect("import a parent")
        .id
}

#[test]
fn two_concurrent_forks_into_one_id_cannot_swap_parents() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let a = Arc::new(join(&pg, dir.path(), "host-a"));
    let (p1, p2) = (parent(&a, 1), parent(&a, 2));
    assert_ne!(p1, p2);
    create(&a, "busy").expect("created");

    // The group commit is busy (a batch waiting on a row lock), so both forks' creations queue.
    let mut lock = lock_row(&pg, "busy");
    let busy = {
        let a = Arc::clone(&a);
        std::thread::spawn(move || append(&a, "busy", 2, 1))
    };
    wait_for_lock_waiters(&pg, 1);
    let (tx, rx) = mpsc::channel();
    let forks: Vec<_> = [p1.clone(), p2.clone()]
        .into_iter()
        .map(|p| {
            let (a, tx) = (Arc::clone(&a), tx.clone());
            std::thread::spawn(move || {
                let forked = a.fork(&p, None, "child");
                let _ = tx.send((p, forked));
            })
        })
        .collect();
    // The second fork into "child" is refused while the first is under way.
    let first = rx.recv_timeout(Duration::from_secs(20));
    lock.batch_execute("COMMIT").expect("release the row");
    let second = rx.recv_timeout(Duration::from_secs(120));
    for f in forks {
        f.join().expect("fork thread");
    }
    busy.join().expect("append thread").expect("appended");
    let (refused_parent, refused) = first.expect("no fork returned while the other was under way");
    let e = refused.expect_err("the second fork into one id");
    assert!(e.to_string().contains("under way"), "{e}");
    let (forked_parent, forked) = second.expect("the other fork's answer");
    let report = forked.expect("the first fork");
    assert_ne!(refused_parent, forked_parent);
    let row = a
        .sessions()
        .expect("listing")
        .into_iter()
        .find(|r| r.id == "child")
        .expect("the child's row");
    assert_eq!(row.parent.as_deref(), Some(forked_parent.as_str()));
    assert_eq!(row.seed, Some(report.seed as i64));
    // Every host builds the child PostgreSQL holds as the forking host wrote it.
    let reference = join(&pg, dir.path(), "host-ref");
    reference.sync("child").expect("child");
    assert_eq!(exported(&reference, "child"), exported(&a, "child"));
}

#[test]
fn a_local_write_failing_after_postgres_committed_says_outcome_unknown_and_is_recovered() {
    let Some(pg) = fleet_database() else { return };
    let Some(fs) = Tmpfs::mount(24 << 20) else {
        return;
    };
    let url = host_url(&pg, "host-a");
    let small = |o: &mut FleetOptions| {
        o.store = Options {
            write_buffer_bytes: 1 << 20,
            ..Options::default()
        }
    };
    let big = |at: u64| {
        let text = format!(
            r#"{{"type":"user/message","time":{at},"data":{{"content":[{{"type":"text","text":"{}"}}],"source":{{"kind":"user"}},"role":"user","id":"u{at}"}},"surfaceOp":"append"}}"#,
            "x".repeat(64 << 10)
        );
        AppendItem::new("s", Some(at), vec![crate::fixtures::ev(&text)])
    };
    let (acked, failed) = {
        let a = join_at(&url, &fs.dir, "host-a", small);
        create(&a, "s").expect("created");
        fill(&fs.dir);
        let mut at = 2;
        let failed = loop {
            assert!(at < 200, "appends kept succeeding on a full disk");
            match a.append_many(vec![big(at)]).pop().expect("an outcome") {
                Ok(_) => at += 1,
                Err(e) => break e,
            }
        };
        (at, failed)
    };
    let text = failed.to_string();
    assert!(
        text.contains("outcome unknown") && text.contains("session \"s\""),
        "a batch PostgreSQL committed was answered: {text}"
    );
    assert!(!matches!(failed, Error::Storage { .. }), "{text}");
    // PostgreSQL holds it: the creation, the acknowledged batches and the one answered unknown.
    assert_eq!(batch_rows(&pg, "s"), acked);
    std::fs::remove_file(fs.dir.join("filler")).expect("free the disk");
    let a = join_at(&url, &fs.dir, "host-a", small);
    let acquired = a.acquire("s", false).expect("acquired again");
    assert_eq!(
        acquired.caught_up, 1,
        "the batch answered unknown, caught up"
    );
    assert_eq!(a.store().summary("s").expect("s").events, acked + 1);
    let other = tempfile::tempdir().expect("temp dir");
    let b = join(&pg, other.path(), "host-b");
    b.sync("s").expect("host-b catches up");
    assert_eq!(exported(&a, "s"), exported(&b, "s"));
    verified(&[&a, &b]);
}

#[test]
fn a_re_acquire_racing_the_host_s_own_append_is_not_taken_for_a_divergence() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let proxy = Proxy::start(pg.port());
    let a = proxy.join(&pg, dir.path(), "host-a");
    create(&a, "s").expect("created on host-a");

    // host-a re-acquires s, which it holds: the row is read on its control connection (the
    // first, made on joining), whose answer (batch 1 the last) the proxy keeps. Meanwhile
    // host-a appends batch 2 through its commit connection: PostgreSQL, then its store. The
    // catch-up then finds its copy a batch ahead of the row it was given.
    proxy.hold(0);
    let acquiring = {
        let a = Arc::clone(&a);
        std::thread::spawn(move || a.acquire("s", false))
    };
    proxy.wait_for_held_answer();
    append(&a, "s", 2, 1).expect("appended while the row's answer waits");
    proxy.release();
    let acquired = acquiring.join().expect("acquire thread");
    let acquired = acquired.expect("a copy ahead by the host's own batch is no divergence");
    assert_eq!((acquired.row.epoch, acquired.caught_up), (1, 0));
    assert!(a.holds("s"), "still held");
    append(&a, "s", 3, 1).expect("appends go on");
    assert_eq!(batch_rows(&pg, "s"), 3);
    let b = join(&pg, dir.path(), "host-b");
    b.sync("s").expect("host-b catches up");
    assert_eq!(exported(&a, "s"), exported(&b, "s"));
    verified(&[&a, &b]);
}

#[test]
fn a_catch_up_racing_the_host_s_own_commit_of_the_batch_it_applies_goes_on_after_it() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let a = join_patient(&pg, dir.path(), "host-a", Duration::from_secs(2));
    create(&a, "s").expect("created");
    create(&a, "t").expect("created");

    // One group for s and t, t's row locked: the call waits out its lock timeout and is split;
    // s's half commits (PostgreSQL holds s's batch 2), t's waits out the patience before the
    // group writes anything to the local store.
    let mut row_lock = lock_row(&pg, "t");
    let appending = {
        let a = Arc::clone(&a);
        std::thread::spawn(move || a.append_many(vec![item("s", 2, 1), item("t", 2, 1)]))
    };
    wait_for_batch_rows(&pg, "s", 2);
    // Meanwhile host-a re-acquires s: it reads the row (up to batch 2) and its copy (up to
    // batch 1), then waits to read batch 2 (the table locked) until the group has written it
    // to the local store; the catch-up then applies a batch its copy holds already.
    let mut table_lock =
        postgres::Client::connect(&pg.url("postgres", "postgres"), postgres::NoTls)
            .expect("connect as the superuser");
    table_lock
        .batch_execute("BEGIN; LOCK TABLE sessionlog.batches IN ACCESS EXCLUSIVE MODE")
        .expect("lock the batches");
    let acquiring = {
        let a = Arc::clone(&a);
        std::thread::spawn(move || a.acquire("s", false))
    };
    wait_for_lock_waiters_running(&pg, 1, "JOIN sessionlog.batches");
    let group = appending.join().expect("append thread");
    assert!(group[0].is_ok(), "s: {:?}", group[0]);
    assert!(group[1].is_err(), "t, its row locked: {:?}", group[1]);
    table_lock
        .batch_execute("COMMIT")
        .expect("release the table");
    let acquired = acquiring.join().expect("acquire thread");
    let acquired = acquired.expect("a batch the host committed itself meanwhile is no failure");
    assert_eq!(acquired.caught_up, 0, "batch 2 was host-a's own");
    row_lock.batch_execute("COMMIT").expect("release the row");

    assert!(a.holds("s"), "still held");
    append(&a, "s", 3, 1).expect("appends go on");
    append(&a, "t", 2, 1).expect("t's batch appended again");
    assert_eq!([batch_rows(&pg, "s"), batch_rows(&pg, "t")], [3, 2]);
    let b = join(&pg, dir.path(), "host-b");
    for id in ["s", "t"] {
        b.sync(id).expect("host-b catches up");
        assert_eq!(exported(&a, id), exported(&b, id), "{id}");
    }
    verified(&[&a, &b]);
}

fn exported(fleet: &Fleet, id: &str) -> Vec<u8> {
    let mut out = Vec::new();
    fleet
        .store()
        .export(id, Some(ExportFormat::Jsonl), &mut out)
        .expect("export");
    out
}
