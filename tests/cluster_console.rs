//! The console over a fleet (`sessionlog serve --cluster URL`): a console host with an empty
//! store serves the sessions another host of the fleet writes. Its listing is the fleet's, and a
//! session's view at a seq is what the writing host's store answers, including batches appended
//! after the console started (each read catches its session up with PostgreSQL first); a
//! session's fork tree is the fleet's, with forks the other host made; a followed session
//! streams a batch the other host appends.
//!
//! Needs PostgreSQL 15's server binaries, as `cluster.rs` does, and the `sessionlog` binary
//! (`cargo build --release`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sessionlog::codec::json::{self, Value};
use sessionlog::engine::{AppendItem, SourceEncoding, Store};
use sessionlog_cluster::{Config, Fleet, FleetOptions};

use crate::cluster::{fleet_database, header, host_url, prompt};

/// The console's process, killed when dropped.
struct Console {
    child: Child,
    /// `127.0.0.1:PORT`.
    addr: String,
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Console {
    /// `GET path`: the status and the body as JSON.
    fn get(&self, path: &str) -> (u16, Value) {
        let mut stream = TcpStream::connect(&self.addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        );
        stream.write_all(request.as_bytes()).expect("send");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("read");
        let (head, body) = answer.split_once("\r\n\r\n").expect("head and body");
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("status");
        let body = json::parse(body).unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {body}"));
        (status, body)
    }

    /// `GET path`, which must answer 200.
    fn ok(&self, path: &str) -> Value {
        let (status, body) = self.get(path);
        assert_eq!(status, 200, "{path}: {}", json::stringify(&body));
        body
    }
}

fn field<'v>(v: &'v Value, key: &str) -> &'v Value {
    v.as_object()
        .and_then(|o| o.get(key))
        .unwrap_or_else(|| panic!("no {key} in {}", json::stringify(v)))
}

/// The view's messages, each as `JSON.stringify` writes it.
fn view_messages(view: &Value) -> Vec<String> {
    match field(view, "messages") {
        Value::Array(list) => list.iter().map(json::stringify).collect(),
        other => panic!("messages: {}", json::stringify(other)),
    }
}

/// What the store answers for session `id` at seq `at`, as the view renders it.
fn messages_at(store: &Store, id: &str, at: u64) -> Vec<String> {
    store
        .messages_at(id, Some(at))
        .expect("messages")
        .iter()
        .map(json::stringify)
        .collect()
}

#[test]
fn a_console_serving_the_fleet_lists_and_shows_what_another_host_wrote() {
    let Some(pg) = fleet_database() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let config = Config::parse(&host_url(&pg, "writer")).expect("url");
    let writer = Fleet::open(
        dir.path().join("writer"),
        config,
        FleetOptions::new("writer"),
    )
    .expect("join the fleet");
    for (id, n) in [("s1", 4), ("s2", 2)] {
        let created = writer.append_many(vec![AppendItem::new(
            id,
            Some(0),
            (0..n).map(prompt).collect(),
        )
        .creating(header(id), SourceEncoding::Jsonl)]);
        assert!(created.iter().all(Result::is_ok), "{created:?}");
    }

    let mut child = Command::new(crate::objects::cli())
        .arg("--db")
        .arg(dir.path().join("console"))
        .args(["--cluster", &host_url(&pg, "console"), "--host", "console"])
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run sessionlog serve");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("address");
    let console = Console {
        child,
        addr: line
            .trim()
            .trim_start_matches("sessionlog console at http://")
            .trim_end_matches('/')
            .to_owned(),
    };
    assert!(console.addr.starts_with("127.0.0.1:"), "{line}");

    // The listing is the fleet's.
    let listing = console.ok("/api/sessions");
    let mut listed: Vec<String> = match field(&listing, "sessions") {
        Value::Array(list) => list
            .iter()
            .map(|s| match field(s, "id") {
                Value::String(id) => id.to_string_lossy(),
                other => panic!("id: {}", json::stringify(other)),
            })
            .collect(),
        other => panic!("sessions: {}", json::stringify(other)),
    };
    listed.sort();
    let fleet: Vec<String> = writer
        .sessions()
        .expect("sessions")
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed, fleet);

    // A view at a seq is what the writing host's store answers.
    for at in [0, 2, 3] {
        let view = console.ok(&format!("/api/sessions/s1/view?at={at}"));
        assert_eq!(view_messages(&view), messages_at(writer.store(), "s1", at));
    }

    // Appended after the console started: a read of the session catches it up first.
    let appended = writer.append_many(vec![AppendItem::new(
        "s1",
        Some(4),
        (4..7).map(prompt).collect(),
    )]);
    assert!(appended.iter().all(Result::is_ok), "{appended:?}");
    let view = console.ok("/api/sessions/s1/view?at=6");
    assert_eq!(view_messages(&view), messages_at(writer.store(), "s1", 6));
    assert_eq!(view_messages(&view).len(), 7);
    assert_eq!(field(&view, "end").as_f64(), Some(7.0));

    // A fork the writer made after the console read its parent shows in the parent's tree, and
    // the fork's tree names its parent: the tree is the fleet's, whichever host made the fork.
    writer.fork("s1", None, "s1-fork").expect("fork");
    let lineage = |id: &str| -> Vec<(String, String, f64)> {
        match field(&console.ok(&format!("/api/sessions/{id}/tree")), "lineage") {
            Value::Array(list) => list
                .iter()
                .map(|e| {
                    let text = |k| json::stringify(field(e, k));
                    (
                        text("id"),
                        text("parent"),
                        field(e, "depth").as_f64().expect("depth"),
                    )
                })
                .collect(),
            other => panic!("lineage: {}", json::stringify(other)),
        }
    };
    let (s1, fork) = (r#""s1""#.to_owned(), r#""s1-fork""#.to_owned());
    assert_eq!(
        lineage("s1"),
        [
            (s1.clone(), "null".into(), 0.0),
            (fork.clone(), s1.clone(), 1.0)
        ]
    );
    assert_eq!(
        lineage("s1-fork"),
        [(fork, s1.clone(), 0.0), (s1, "null".into(), -1.0)]
    );

    // Followed live: a batch appended on the writer arrives as a server-sent event.
    let mut stream = TcpStream::connect(&console.addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let request = format!(
        "GET /api/sessions/s1/follow?from=7 HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        console.addr
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut events = BufReader::new(stream);
    let mut line = String::new();
    events.read_line(&mut line).expect("status line");
    assert!(line.contains(" 200 "), "{line}");
    let appended = writer.append_many(vec![AppendItem::new("s1", Some(7), vec![prompt(7)])]);
    assert!(appended.iter().all(Result::is_ok), "{appended:?}");
    let data = loop {
        line.clear();
        assert!(events.read_line(&mut line).expect("an event") > 0, "ended");
        if let Some(data) = line.trim_end().strip_prefix("data: ") {
            break json::parse(data).expect("event json");
        }
    };
    assert_eq!(field(&data, "seq").as_f64(), Some(7.0));
    let stored = writer.store().read_events("s1", 7, None).expect("events");
    assert_eq!(
        json::stringify(field(&data, "event")),
        json::stringify(&stored[0])
    );

    // A session the fleet does not hold is not found.
    let (status, body) = console.get("/api/sessions/nowhere/view?at=0");
    assert_eq!(status, 404, "{}", json::stringify(&body));
}
