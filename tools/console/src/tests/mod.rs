//! The console over HTTP against a served test store: a host holds the store and appends while
//! the console reads beside it (as `sessionlog serve` does); the answers, the limits, the
//! refusals (writes, bad ids and seqs, a missing token, a foreign Host) and a live follow.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use sessionlog_archive::{ArchiveRoot, ArchiveSources, Bucket, Transfer};
use sessionlog_cluster::Host;
use sessionlog_codec::format::event::NewEvent;
use sessionlog_codec::format::header::{author_header, HeaderFields};
use sessionlog_codec::json;
use sessionlog_engine::{Durability, Options, SourceEncoding, Store};
use sessionlog_harness::seaweed::SeaweedServer;

use crate::api::MAX_EVENTS;
use crate::listing::MAX_PAGE;
use crate::{check_listen, router, Config};

mod search;
mod steps;
mod window;

/// A user turn of a V4 session: turn and step start, a system and a user message (with
/// `text`), an assistant message calling a tool, its result.
fn turn_lines(turn: u32, text: &str) -> Vec<String> {
    let text = json::stringify(&json::Value::String(text.into()));
    vec![
        format!(r#"{{"type":"turn/start","data":{{"turn":{turn}}}}}"#),
        format!(r#"{{"type":"step/start","data":{{"turn":{turn},"step":1}}}}"#),
        format!(
            r#"{{"type":"user/message","data":{{"id":"u{turn}","role":"user","content":[{{"type":"text","text":{text}}}],"source":{{"kind":"user"}}}},"surfaceOp":"append"}}"#
        ),
        format!(
            r#"{{"type":"assistant/message","data":{{"turn":{turn},"step":1,"message":{{"id":"a{turn}","role":"assistant","content":[{{"type":"tool-call","id":"c{turn}","name":"ls","arguments":"{{}}"}}]}},"stream":[]}},"surfaceOp":"append"}}"#
        ),
    ]
}

fn events(lines: &[String]) -> Vec<NewEvent> {
    lines
        .iter()
        .map(|l| NewEvent::from_value(&json::parse(l).expect("event json")).expect("event"))
        .collect()
}

/// Create V4 session `id` holding `lines`.
fn create(store: &Store, id: &str, lines: &[String]) {
    let header = author_header(&HeaderFields {
        id: id.to_owned(),
        created_at: 1_700_000_000_000,
        cwd: Some("/work/<b>project</b>".to_owned()),
        version: 4,
        ..HeaderFields::default()
    });
    store
        .create(&header, SourceEncoding::Jsonl, events(lines))
        .expect("create");
}

/// A host's store in a temp dir (buffered: the tests make many sessions).
fn host() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        durability: Durability::Buffered,
        ..Options::default()
    };
    let store = Store::open(dir.path().join("db"), options).expect("open");
    (dir, store)
}

/// Serve the console beside `host` on a free loopback port; the server lives as long as the
/// test process.
fn serve_beside(host: &Store, token: Option<&str>) -> SocketAddr {
    serve_archives(host, token, None)
}

/// [`serve_beside`], archived sessions fetched through `archive`.
fn serve_archives(
    host: &Store,
    token: Option<&str>,
    archive: Option<ArchiveSources>,
) -> SocketAddr {
    let reader = Store::open_beside(host.path(), Options::default()).expect("open beside");
    let config = Config {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        token: token.map(str::to_owned),
    };
    let app = router(Host::local(reader), Options::default(), archive, &config);
    let listener = std::net::TcpListener::bind(config.listen).expect("bind");
    let addr = listener.local_addr().expect("addr");
    listener.set_nonblocking(true).expect("nonblocking");
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            axum::serve(listener, app).await.expect("serve");
        });
    });
    addr
}

/// An answer: status, headers (lower-cased names), body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> json::Value {
        json::parse(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    /// The error message of an error answer.
    fn error(&self) -> String {
        match self.json().as_object().and_then(|o| o.get("error")) {
            Some(json::Value::String(s)) => s.to_string_lossy(),
            _ => panic!("no error message: {}", self.body),
        }
    }
}

/// One HTTP/1.1 request (`Host: 127.0.0.1`, plus `headers`), read to its end.
fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut text = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        text.push_str(&format!("Host: {addr}\r\n"));
    }
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("Content-Length: 0\r\n\r\n");
    stream.write_all(text.as_bytes()).expect("send");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read");
    let raw = String::from_utf8(raw).expect("utf-8 answer");
    let (head, body) = raw.split_once("\r\n\r\n").expect("head and body");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_owned(),
    }
}

fn get(addr: SocketAddr, path: &str) -> Answer {
    request(addr, "GET", path, &[])
}

#[test]
fn the_view_at_a_seq_is_what_messages_at_answers_with_the_projections() {
    let (_dir, store) = host();
    let mut lines = turn_lines(1, "first <script>alert(1)</script>");
    lines.push(
        r#"{"type":"session/title","data":{"title":"T <img src=x onerror=alert(1)>"}}"#.into(),
    );
    lines.extend(turn_lines(2, "second"));
    create(&store, "s1", &lines);
    let addr = serve_beside(&store, None);
    for at in [0u64, 2, 4, 8] {
        let answer = get(addr, &format!("/api/sessions/s1/view?at={at}"));
        assert_eq!(answer.status, 200, "{}", answer.body);
        let view = answer.json();
        let view = view.as_object().expect("object");
        let expected: Vec<String> = store
            .messages_at("s1", Some(at))
            .expect("messages")
            .iter()
            .map(json::stringify)
            .collect();
        let got: Vec<String> = match view.get("messages") {
            Some(json::Value::Array(list)) => list.iter().map(json::stringify).collect(),
            other => panic!("messages: {other:?}"),
        };
        assert_eq!(got, expected, "messages at seq {at}");
        assert_eq!(
            view.get("at").and_then(json::Value::as_f64),
            Some(at as f64)
        );
        let title = view
            .get("projections")
            .and_then(json::Value::as_object)
            .and_then(|p| p.get("title"))
            .cloned();
        let expected_title = store.state_at("s1", "title", Some(at)).expect("title");
        assert_eq!(title, Some(expected_title), "title at seq {at}");
    }
    let marks = get(addr, "/api/sessions/s1/marks").json();
    let turns = marks.as_object().and_then(|m| m.get("turns")).cloned();
    assert!(
        matches!(&turns, Some(json::Value::Array(t)) if t.len() == 2),
        "two turn marks: {turns:?}"
    );
    let around = get(addr, "/api/sessions/s1/events?at=4&radius=2").json();
    let seqs: Vec<f64> = match around.as_object().and_then(|o| o.get("events")) {
        Some(json::Value::Array(list)) => list
            .iter()
            .filter_map(|e| e.as_object()?.get("seq")?.as_f64())
            .collect(),
        other => panic!("events: {other:?}"),
    };
    assert_eq!(seqs, vec![2.0, 3.0, 4.0, 5.0, 6.0]);
    let tree = get(addr, "/api/sessions/s1/tree");
    assert_eq!(tree.status, 200, "{}", tree.body);
    assert!(tree.body.contains("\"depth\":0"), "{}", tree.body);
}

#[test]
fn the_listing_pages_by_cursor_and_caps_its_page() {
    let (_dir, store) = host();
    let total = MAX_PAGE + 5;
    for n in 0..total {
        create(&store, &format!("s{n:03}"), &turn_lines(1, "hi"));
    }
    let addr = serve_beside(&store, None);
    let page = get(addr, "/api/sessions?limit=100000").json();
    let listed = |page: &json::Value| match page.as_object().and_then(|o| o.get("sessions")) {
        Some(json::Value::Array(list)) => list
            .iter()
            .filter_map(|s| Some(s.as_object()?.get("id")?.as_str()?.to_owned()))
            .collect::<Vec<_>>(),
        other => panic!("sessions: {other:?}"),
    };
    assert_eq!(listed(&page).len(), MAX_PAGE, "a page is capped");
    let mut seen = Vec::new();
    let mut after = String::new();
    loop {
        let page = get(addr, &format!("/api/sessions?limit=64{after}")).json();
        seen.extend(listed(&page));
        match page.as_object().and_then(|o| o.get("next")) {
            Some(json::Value::String(next)) => after = format!("&after={}", next.to_string_lossy()),
            _ => break,
        }
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), total, "every session once over the pages");
    let mut filtered = listed(&get(addr, "/api/sessions?q=S20").json());
    filtered.sort();
    assert_eq!(filtered, vec!["s200", "s201", "s202", "s203", "s204"]);
}

#[test]
fn bad_ids_seqs_and_ranges_get_a_clear_json_error() {
    let (_dir, store) = host();
    create(&store, "s1", &turn_lines(1, "hi"));
    let addr = serve_beside(&store, None);
    let cases: [(&str, u16, &str); 12] = [
        ("/api/sessions/nope/view", 404, "no session \"nope\""),
        ("/api/sessions/nope/follow", 404, "no session \"nope\""),
        ("/api/sessions/s1/view?at=abc", 400, "at is a whole number"),
        ("/api/sessions/s1/view?at=-1", 400, "at is a whole number"),
        ("/api/sessions/s1/view?at=4", 404, "seq 4 is past its end"),
        (
            "/api/sessions/s1/view?at=99999999999999999999999",
            400,
            "whole number",
        ),
        (
            "/api/sessions/s1/events?from=3&to=1",
            400,
            "the range is empty",
        ),
        (
            "/api/sessions/s1/events?from=0&to=100000",
            400,
            "at most 200 events",
        ),
        ("/api/sessions/s1/events?from=9", 404, "past its end"),
        ("/api/sessions?limit=0", 400, "at least one session"),
        ("/api/sessions?after=zz", 400, "not a cursor"),
        ("/api/nothing/here", 404, "no such page"),
    ];
    for (path, status, says) in cases {
        let answer = get(addr, path);
        assert_eq!(answer.status, status, "{path}: {}", answer.body);
        assert!(
            answer.error().contains(says),
            "{path}: {:?} should say {says:?}",
            answer.error()
        );
        assert_eq!(
            answer.header("content-type"),
            Some("application/json; charset=utf-8"),
            "{path}"
        );
    }
    let long = format!("/api/sessions/{}/view", "x".repeat(2000));
    assert_eq!(get(addr, &long).status, 400);
    assert_eq!(MAX_EVENTS, 200, "the message above names the cap");
}

#[test]
fn writes_are_refused_with_405() {
    let (_dir, store) = host();
    create(&store, "s1", &turn_lines(1, "hi"));
    let addr = serve_beside(&store, None);
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        for path in ["/api/sessions", "/api/sessions/s1/view", "/", "/nowhere"] {
            let answer = request(addr, method, path, &[]);
            assert_eq!(answer.status, 405, "{method} {path}");
            assert!(answer.error().contains("only reads"), "{}", answer.body);
        }
    }
    let count = store.list().expect("list").len();
    assert_eq!(count, 1, "nothing was written");
}

#[test]
fn a_non_loopback_address_needs_a_token() {
    let open = Config {
        listen: "0.0.0.0:7700".parse().expect("addr"),
        token: None,
    };
    let e = check_listen(&open).expect_err("refused").to_string();
    assert!(e.contains("0.0.0.0:7700") && e.contains("--token"), "{e}");
    let tokened = Config {
        token: Some("t0ken".into()),
        ..open.clone()
    };
    assert!(check_listen(&tokened).is_ok());
    let empty = Config {
        token: Some(String::new()),
        ..open
    };
    assert!(
        check_listen(&empty).is_err(),
        "an empty token protects nothing"
    );
    let loopback = Config {
        listen: "127.0.0.1:7700".parse().expect("addr"),
        token: None,
    };
    assert!(check_listen(&loopback).is_ok());
}

#[test]
fn with_a_token_requests_without_it_get_401_and_the_login_url_works_once() {
    let (_dir, store) = host();
    create(&store, "s1", &turn_lines(1, "hi"));
    let addr = serve_beside(&store, Some("s3cret"));
    for path in ["/", "/api/sessions", "/api/sessions/s1/view", "/app.js"] {
        let answer = get(addr, path);
        assert_eq!(answer.status, 401, "{path}");
        assert!(
            answer.error().contains("needs its token"),
            "{}",
            answer.body
        );
        let wrong = request(addr, "GET", path, &[("Authorization", "Bearer s3cre")]);
        assert_eq!(wrong.status, 401, "{path} with a wrong token");
        let right = request(addr, "GET", path, &[("Authorization", "Bearer s3cret")]);
        assert_eq!(right.status, 200, "{path} with the token: {}", right.body);
    }
    let cookie = request(
        addr,
        "GET",
        "/api/sessions",
        &[("Cookie", "sessionlog_console=s3cret")],
    );
    assert_eq!(cookie.status, 200);
    assert_eq!(get(addr, "/login?key=guess").status, 401);
    let config = Config {
        listen: addr,
        token: Some("s3cret".into()),
    };
    let announced = crate::guard::announce(addr, &config);
    let key = announced
        .split("key=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("a login URL");
    let login = get(addr, &format!("/login?key={key}"));
    assert_eq!(login.status, 303, "{}", login.body);
    let set = login.header("set-cookie").expect("a cookie");
    assert!(
        set.starts_with("sessionlog_console=s3cret;") && set.contains("HttpOnly"),
        "{set}"
    );
    assert_eq!(login.header("location"), Some("/"));
    let again = get(addr, &format!("/login?key={key}"));
    assert_eq!(again.status, 401, "the login URL works once");
}

#[test]
fn without_a_token_only_loopback_hosts_are_answered() {
    let (_dir, store) = host();
    let addr = serve_beside(&store, None);
    let foreign = request(
        addr,
        "GET",
        "/api/sessions",
        &[("Host", "evil.example:7700")],
    );
    assert_eq!(foreign.status, 403);
    assert!(foreign.error().contains("loopback"), "{}", foreign.body);
    for host in ["localhost:7700", "127.0.0.1", "[::1]:7700"] {
        assert_eq!(
            request(addr, "GET", "/api/sessions", &[("Host", host)]).status,
            200,
            "{host}"
        );
    }
}

#[test]
fn the_page_is_served_with_a_policy_that_allows_only_its_own_script() {
    let (_dir, store) = host();
    let addr = serve_beside(&store, None);
    for path in ["/", "/s/any%20id?at=3"] {
        let page = get(addr, path);
        assert_eq!(page.status, 200);
        assert_eq!(
            page.header("content-type"),
            Some("text/html; charset=utf-8")
        );
        let csp = page.header("content-security-policy").expect("a policy");
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe"),
            "{csp}"
        );
        assert!(page.body.contains("/app.js"));
    }
    let script = get(addr, "/app.js");
    assert_eq!(script.status, 200);
    assert!(
        !script.body.contains("innerHTML"),
        "the page never parses data as HTML"
    );
}

#[test]
fn a_session_created_after_the_console_started_is_listed() {
    let (_dir, store) = host();
    create(&store, "early", &turn_lines(1, "hi"));
    let addr = serve_beside(&store, None);
    assert!(!get(addr, "/api/sessions").body.contains("\"late\""));
    create(&store, "late", &turn_lines(1, "hi"));
    store.sync().expect("sync");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !get(addr, "/api/sessions").body.contains("\"id\":\"late\"") {
        assert!(
            Instant::now() < deadline,
            "the new session was not listed within 5 s"
        );
        std::thread::sleep(crate::CATCH_UP_EVERY);
    }
}

#[test]
fn follow_streams_stored_then_live_events() {
    let (_dir, store) = host();
    create(&store, "s1", &turn_lines(1, "hi"));
    let addr = serve_beside(&store, None);
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let head = format!(
        "GET /api/sessions/s1/follow?from=2 HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).expect("send");
    let mut lines = BufReader::new(stream).lines();
    let mut next_data = || loop {
        let line = lines.next().expect("more").expect("a line");
        if let Some(data) = line.strip_prefix("data: ") {
            return json::parse(data).expect("json data");
        }
    };
    let seq_of = |v: &json::Value| {
        v.as_object()
            .and_then(|o| o.get("seq"))
            .and_then(json::Value::as_f64)
    };
    assert_eq!(seq_of(&next_data()), Some(2.0));
    assert_eq!(seq_of(&next_data()), Some(3.0));
    let appended = Instant::now();
    store
        .append(
            "s1",
            Some(4),
            events(&[r#"{"type":"turn/end","data":{"turn":1,"reason":"done"}}"#.into()]),
        )
        .expect("append");
    let live = next_data();
    assert_eq!(seq_of(&live), Some(4.0), "{live:?}");
    assert!(
        appended.elapsed() < Duration::from_secs(1),
        "a live event took {:?}",
        appended.elapsed()
    );
}

#[test]
fn an_archived_session_opens_through_its_archive() {
    let server = SeaweedServer::start().unwrap_or_else(|e| panic!("{e:#}"));
    server.create_bucket("cold").expect("bucket");
    let config = server.s3_config();
    let transfer = Transfer {
        retry_timeout: Duration::from_secs(5),
        ..Transfer::default()
    };
    let (_dir, store) = host();
    let mut lines = turn_lines(1, "kept in the cold");
    lines.extend(turn_lines(2, "and back"));
    create(&store, "cold1", &lines);
    let expected: Vec<String> = store
        .messages_at("cold1", Some(5))
        .expect("messages")
        .iter()
        .map(json::stringify)
        .collect();
    let bucket = Bucket::open(
        ArchiveRoot::parse("s3://cold/archive").expect("url"),
        &config,
        transfer,
    )
    .expect("client");
    let summary = sessionlog_archive::archive(&store, &bucket, 0, &|_| {}).expect("archive");
    assert_eq!(
        summary.archived.len(),
        1,
        "kept {:?}, failed {:?}",
        summary.kept,
        summary.failures
    );
    store.sync().expect("sync");

    let without = serve_beside(&store, None);
    let refused = get(without, "/api/sessions/cold1/view?at=5");
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(refused.error().contains("archived"), "{}", refused.body);

    let addr = serve_archives(&store, None, Some(ArchiveSources::new(config, transfer)));
    for _ in 0..2 {
        let answer = get(addr, "/api/sessions/cold1/view?at=5");
        assert_eq!(answer.status, 200, "{}", answer.body);
        let got: Vec<String> = match answer.json().as_object().and_then(|o| o.get("messages")) {
            Some(json::Value::Array(list)) => list.iter().map(json::stringify).collect(),
            other => panic!("messages: {other:?}"),
        };
        assert_eq!(got, expected, "the archived session reads as it did");
    }
    let around = get(addr, "/api/sessions/cold1/events?at=3&radius=1");
    assert_eq!(around.status, 200, "{}", around.body);
    assert!(around.body.contains("\"seq\":4"), "{}", around.body);
}
