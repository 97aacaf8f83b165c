//! Watching a session from another process: `sessionlog tail ID --from 0 --follow` runs while
//! one `sessionlog append` process after another appends to the store, and prints exactly the
//! lines `sessionlog events ID` prints at the end; a tail restarted from the last seq + 1
//! continues without a gap. Read-only commands work beside a process that holds the store open,
//! and bad input (an unknown session, a `--from` past the end, another store's cursor) gets a
//! clear error.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use sessionlog::codec::format::event::NewEvent;
use sessionlog::engine::{Durability, Error, Options, SourceEncoding, Store};
use sessionlog_cluster::Host;

use crate::objects::cli;

/// How long a test waits for a line a tail must print.
const LINE_WAIT: Duration = Duration::from_secs(60);

fn header(id: &str) -> String {
    format!(
        r#"{{"type":"session","version":0,"id":"{id}","createdAt":1,"cwd":"/w","delegationDepth":0}}"#
    )
}

/// A batch-shape user message, as `sessionlog append` reads it.
fn prompt(n: u64) -> String {
    format!(
        r#"{{"type":"user/message","time":{n},"data":{{"content":[{{"type":"text","text":"line {n}"}}],"source":{{"kind":"user"}},"role":"user","id":"u{n}"}},"surfaceOp":"append"}}"#
    )
}

/// `sessionlog --db DB ARGS…`, its output.
fn run(db: &Path, args: &[&str]) -> Output {
    Command::new(cli())
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .expect("run sessionlog")
}

/// `sessionlog --db DB ARGS…`, which must succeed: its standard output.
fn succeed(db: &Path, args: &[&str]) -> String {
    let out = run(db, args);
    assert!(
        out.status.success(),
        "sessionlog {} failed:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// `sessionlog --db DB ARGS…`, which must fail: its standard error.
fn fail(db: &Path, args: &[&str]) -> String {
    let out = run(db, args);
    assert!(
        !out.status.success(),
        "sessionlog {} succeeded:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stderr).expect("utf-8")
}

/// One `sessionlog append ID` process appending `events` (one a line on its standard input).
fn append_process(db: &Path, id: &str, events: &[String]) {
    let mut child = Command::new(cli())
        .arg("--db")
        .arg(db)
        .args(["append", id])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn append");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(format!("{}\n", events.join("\n")).as_bytes())
        .expect("write batch");
    drop(stdin);
    let out = child.wait_with_output().expect("append");
    assert!(
        out.status.success(),
        "append failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A running `sessionlog tail`, its standard output's lines arriving on a channel.
pub struct Tail {
    child: Child,
    lines: Receiver<String>,
    stderr: Receiver<String>,
}

impl Tail {
    fn start(db: &Path, args: &[&str]) -> Tail {
        Tail::spawn(
            Command::new(cli())
                .arg("--db")
                .arg(db)
                .arg("tail")
                .args(args),
        )
    }

    /// Run `command` (a `sessionlog … tail …` command line) as a tail.
    pub fn spawn(command: &mut Command) -> Tail {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tail");
        let lines = forward(child.stdout.take().expect("stdout"));
        let stderr = forward(child.stderr.take().expect("stderr"));
        Tail {
            child,
            lines,
            stderr,
        }
    }

    /// The next `n` lines it prints (each within [`LINE_WAIT`]).
    pub fn take(&mut self, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| match self.lines.recv_timeout(LINE_WAIT) {
                Ok(line) => line,
                Err(e) => panic!(
                    "tail printed {i} of {n} lines, then nothing ({e}); stderr: {:?}",
                    self.stderr.try_iter().collect::<Vec<_>>()
                ),
            })
            .collect()
    }
}

impl Drop for Tail {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A channel receiving `from`'s lines as they come.
fn forward(from: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (send, receive) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { return };
            if send.send(line).is_err() {
                return;
            }
        }
    });
    receive
}

#[test]
fn a_tail_beside_append_processes_prints_what_events_prints_and_resumes_without_a_gap() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("db");
    succeed(&db, &["create", "a", "--created-at", "1"]);
    let mut tail = Tail::start(&db, &["a", "--from", "0", "--follow"]);
    let mut n = 0;
    let mut printed = Vec::new();
    for batch in 0..12 {
        let events: Vec<String> = (0..1 + batch % 3)
            .map(|_| {
                n += 1;
                prompt(n)
            })
            .collect();
        append_process(&db, "a", &events);
        // Each batch is printed while the next process starts, not all at the end.
        printed.extend(tail.take(events.len()));
    }
    drop(tail);
    let events = succeed(&db, &["events", "a"]);
    let expected: Vec<&str> = events.lines().collect();
    assert_eq!(expected.len() as u64, n);
    assert_eq!(printed, expected);
    // A tail restarted from the last seq + 1 picks up the next appends, nothing twice.
    let mut resumed = Tail::start(&db, &["a", "--from", &n.to_string(), "--follow"]);
    let more: Vec<String> = (n + 1..=n + 4).map(prompt).collect();
    append_process(&db, "a", &more[..2]);
    append_process(&db, "a", &more[2..]);
    printed.extend(resumed.take(4));
    let events = succeed(&db, &["events", "a"]);
    assert_eq!(printed, events.lines().collect::<Vec<_>>());
    // Without --follow, tail prints what is stored and ends.
    let stored = succeed(&db, &["tail", "a", "--from", "3"]);
    assert_eq!(
        stored.lines().collect::<Vec<_>>(),
        events.lines().skip(3).collect::<Vec<_>>()
    );
}

#[test]
fn read_only_commands_and_tail_work_beside_a_process_holding_the_store() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("db");
    let options = Options {
        durability: Durability::Buffered,
        ..Options::default()
    };
    let host = Store::open(&db, options).expect("open");
    host.create_session(&header("a"), SourceEncoding::Jsonl)
        .expect("create");
    host.append("a", Some(0), prompts(1, 2)).expect("append");
    let events = succeed(&db, &["events", "a"]);
    assert_eq!(events.lines().count(), 2, "{events}");
    assert!(succeed(&db, &["ls"]).contains('a'));
    succeed(&db, &["verify"]);
    let mut tail = Tail::start(&db, &["a", "--follow"]);
    let mut printed = tail.take(2);
    host.append("a", Some(2), prompts(3, 2)).expect("append");
    printed.extend(tail.take(2));
    // The host writes; a write from beside it is refused, naming why.
    let refused = fail(&db, &["delete", "a"]);
    assert!(refused.contains("in use by another process"), "{refused}");
    let mut expected = String::new();
    host.events("a", 0, None, &mut |_, e| {
        expected.push_str(&sessionlog::codec::json::stringify(e));
        expected.push('\n');
        Ok(())
    })
    .expect("events");
    assert_eq!(printed, expected.lines().collect::<Vec<_>>());
}

#[test]
fn tail_refuses_bad_input_with_the_reason() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("db");
    succeed(&db, &["create", "a", "--created-at", "1"]);
    append_process(&db, "a", &[prompt(1), prompt(2)]);
    let unknown = fail(&db, &["tail", "nope", "--from", "0"]);
    assert!(unknown.contains("nope"), "{unknown}");
    let past = fail(&db, &["tail", "a", "--from", "5"]);
    assert!(
        past.contains("ends at seq 2") && past.contains("--from 5 is past its end"),
        "{past}"
    );
    let not_seq = fail(&db, &["tail", "a", "--from", "x"]);
    assert!(not_seq.contains("a seq"), "{not_seq}");
    // With --follow, a start past the end waits, says so, and prints the event when it comes.
    let mut waiting = Tail::start(&db, &["a", "--from", "3", "--follow"]);
    let note = waiting.stderr.recv_timeout(LINE_WAIT).expect("a note");
    assert!(note.contains("waiting for seq 3"), "{note}");
    append_process(&db, "a", &[prompt(3), prompt(4)]);
    let got = waiting.take(1);
    let events = succeed(&db, &["events", "a", "--from", "3"]);
    assert_eq!(got, events.lines().collect::<Vec<_>>());
    // A cursor is checked against the store it belongs to.
    let all = succeed(&db, &["tail", "--all"]);
    let first = all.lines().next().expect("a change");
    let cursor = first
        .split("\"next\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a cursor");
    let resumed = succeed(&db, &["tail", "--all", "--from", cursor]);
    assert_eq!(
        resumed.lines().collect::<Vec<_>>(),
        all.lines().skip(1).collect::<Vec<_>>()
    );
    let other = dir.path().join("other");
    succeed(&other, &["create", "b", "--created-at", "1"]);
    let foreign = fail(&other, &["tail", "--all", "--from", cursor]);
    assert!(foreign.contains("belongs to store"), "{foreign}");
}

/// One batch of `sessionlog append`'s events, seqs `from..from + n` in their text.
fn prompts(from: u64, n: u64) -> Vec<NewEvent> {
    (from..from + n)
        .map(|n| {
            let value = sessionlog::codec::json::parse(&prompt(n)).expect("json");
            NewEvent::from_value(&value).expect("event")
        })
        .collect()
}

/// A store at a temporary directory holding empty session "a", closed: its directory (removed
/// when dropped) and the store's path.
fn store_with_session_a() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("db");
    Store::open(&db, Options::default())
        .expect("open")
        .create_session(&header("a"), SourceEncoding::Jsonl)
        .expect("create");
    (dir, db)
}

/// Every open of the store by a writer writes a new MANIFEST, and RocksDB's secondary instance
/// does not catch up across one reliably: a reader that opened while writers came and went saw
/// the second writer's events and not the first's (a gap), or the session's end and not its
/// last events (a stall). A reader knows when the holder reopened the store, and a follower
/// through the host goes on from its next seq on a new reader: each event once, in order.
#[test]
fn a_follower_beside_writers_that_reopen_the_store_sees_every_event_once_in_order() {
    let (_dir, db) = store_with_session_a();
    for round in 0..100u64 {
        let start = 4 * round;
        // Two writers in turn, each opening the store, appending two events and closing it,
        // while the reader opens beside them, at offsets that vary with the round.
        let writers = {
            let db = db.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(round * 7 % 30));
                for from in [start, start + 2] {
                    Store::open(&db, Options::default())
                        .expect("open")
                        .append("a", Some(from), prompts(from, 2))
                        .expect("append");
                }
            })
        };
        std::thread::sleep(Duration::from_millis(round * 13 % 30));
        let host = Host::local(Store::open_beside(&db, Options::default()).expect("beside"));
        let mut followed = host.subscribe("a", start).expect("subscribe");
        let seqs: Vec<u64> = (0..4)
            .map(|i| match followed.next_within(&host, LINE_WAIT) {
                Ok(Some((seq, _))) => seq,
                other => panic!("round {round}: event {i} of 4 from {start}: {other:?}"),
            })
            .collect();
        assert_eq!(
            seqs,
            (start..start + 4).collect::<Vec<_>>(),
            "round {round}"
        );
        writers.join().expect("writers");
    }
}

/// A reader beside the store is told when the holder reopened it (its view from then on may
/// miss events), and a reader opened again catches up.
#[test]
fn a_reader_beside_is_told_when_the_holder_reopened_the_store() {
    let (_dir, db) = store_with_session_a();
    let reader = Store::open_beside(&db, Options::default()).expect("beside");
    reader.catch_up().expect("nothing changed");
    Store::open(&db, Options::default())
        .expect("reopen")
        .append("a", Some(0), prompts(0, 2))
        .expect("append");
    let e = reader
        .catch_up()
        .expect_err("the holder reopened the store");
    assert!(matches!(e, Error::HolderReopened { .. }), "{e}");
    assert!(
        e.to_string().contains(&db.display().to_string()) && e.to_string().contains("reopen"),
        "{e}"
    );
    let again = reader.reopen_beside().expect("reopen beside");
    again.catch_up().expect("caught up");
    assert_eq!(again.summary("a").expect("summary").events, 2);
}
