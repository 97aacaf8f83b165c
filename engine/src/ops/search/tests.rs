//! The session index follows the log: appends, forks, deletes and undeletes, purges, archive
//! and restore are reflected in the next search (migration: `tests/search.rs`); `verify` finds
//! the index consistent after each; an index left behind (a crash before its catch-up) or
//! damaged is caught up or rebuilt; bad queries get a clear error; pages are stable while
//! sessions are created.

use crate::error::Error;
use crate::layout::meta::{ArchivedFile, SourceEncoding};
use crate::ops::generations::{GenerationFile, SessionDir};
use crate::options::{Durability, Options};
use crate::store::search_index::SEARCH_DIR;
use crate::store::Store;
use crate::test_support::{ev, exported, seeded};

use super::derive::{Fold, Folding};
use super::{SearchPage, SearchQuery};
use crate::read::events::LineReader;

fn text(t: &str) -> SearchQuery {
    SearchQuery {
        text: Some(t.into()),
        ..SearchQuery::default()
    }
}

fn search(store: &Store, q: &SearchQuery) -> SearchPage {
    store.search(q).expect("search")
}

/// (id, matched seqs) of every session found.
fn found(store: &Store, q: &SearchQuery) -> Vec<(String, Vec<u64>)> {
    search(store, q)
        .sessions
        .into_iter()
        .map(|h| (h.row.id, h.matches.into_iter().map(|m| m.seq).collect()))
        .collect()
}

fn ids(store: &Store, q: &SearchQuery) -> Vec<String> {
    found(store, q).into_iter().map(|(id, _)| id).collect()
}

fn assert_verified(store: &Store) {
    let report = store.verify(&[]).expect("verify");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

fn prompt(words: &str) -> sessionlog_codec::format::event::NewEvent {
    ev(&format!(
        r#"{{"type":"user/message","time":10,"data":{{"content":[{{"type":"text","text":"{words}"}}],"source":{{"kind":"user"}},"role":"user","id":"u{words}"}},"surfaceOp":"append"}}"#
    ))
}

fn header(id: &str) -> String {
    format!(
        r#"{{"type":"session","version":0,"id":"{id}","createdAt":5,"cwd":"/w","delegationDepth":0}}"#
    )
}

#[test]
fn appends_are_found_at_their_seqs_and_the_watermark_moves() {
    let (_dir, store) = seeded();
    assert_eq!(found(&store, &text("out")), vec![("a".into(), vec![2])]);
    let before = search(&store, &text("out")).watermark;
    store
        .append("a", Some(3), vec![prompt("zebracorn rate limit")])
        .expect("append");
    assert_eq!(
        found(&store, &text("zebracorn")),
        vec![("a".into(), vec![3])]
    );
    assert_eq!(
        found(&store, &text("\"rate limit\"")),
        vec![("a".into(), vec![3])]
    );
    assert!(ids(&store, &text("\"limit rate\"")).is_empty());
    let after = search(&store, &text("out")).watermark;
    assert!(after.position > before.position, "{before:?} → {after:?}");
    assert_eq!(after.behind, 0);
    let hit = &search(&store, &SearchQuery::default()).sessions[0];
    assert_eq!(hit.row.events, 4);
    assert_eq!(hit.row.models, vec!["m".to_owned(), "p/m".to_owned()]);
    assert_eq!(hit.row.providers, vec!["p".to_owned()]);
    assert_verified(&store);
}

#[test]
fn forks_deletes_undeletes_and_purges_are_reflected() {
    let (_dir, store) = seeded();
    store
        .append("a", Some(3), vec![prompt("zebracorn")])
        .expect("append");
    store.fork("a", None, "c").expect("fork");
    let forks = SearchQuery {
        parent: Some("a".into()),
        ..SearchQuery::default()
    };
    assert_eq!(ids(&store, &forks), vec!["c".to_owned()]);
    let mut both = ids(&store, &text("zebracorn"));
    both.sort();
    assert_eq!(both, vec!["a".to_owned(), "c".to_owned()]);
    assert_eq!(search(&store, &forks).sessions[0].row.depth, 1);
    assert_verified(&store);
    store.delete("c").expect("delete");
    assert_eq!(ids(&store, &text("zebracorn")), vec!["a".to_owned()]);
    assert_verified(&store);
    store.undelete("c").expect("undelete");
    assert_eq!(ids(&store, &forks), vec!["c".to_owned()]);
    store.delete("c").expect("delete");
    store.purge(0, false).expect("purge");
    assert!(ids(&store, &forks).is_empty());
    assert_verified(&store);
}

#[test]
fn archive_and_restore_are_reflected() {
    let (dir, store) = seeded();
    let kept = dir.path().join("a.jsonl");
    std::fs::write(&kept, exported(&store, "a")).expect("keep a's log");
    assert_eq!(ids(&store, &text("out")), vec!["a".to_owned()]);
    let plan = store.archive_plan("a").expect("plan");
    let file = ArchivedFile {
        key: "--w--/a/session.jsonl".into(),
        version: 0,
        zstd: false,
        bytes: 0,
        sha256: [0; 32],
    };
    store
        .commit_archive(&plan, "s3://bucket/root", vec![file])
        .expect("archive");
    assert!(ids(&store, &text("out")).is_empty());
    assert_verified(&store);
    let files = SessionDir {
        served: GenerationFile {
            version: 0,
            zstd: false,
            path: kept,
        },
        lower: Vec::new(),
    };
    store.restore_archived("a", &files).expect("restore");
    assert_eq!(found(&store, &text("out")), vec![("a".into(), vec![2])]);
    assert_verified(&store);
}

#[test]
fn an_index_left_behind_or_damaged_is_caught_up_or_rebuilt() {
    let dir = tempfile::tempdir().expect("temp dir");
    let options = Options {
        durability: Durability::Buffered,
        ..Options::default()
    };
    let path = dir.path().join("db");
    {
        let store = Store::open(&path, options.clone()).expect("open");
        store
            .create_session(&header("b"), SourceEncoding::Jsonl)
            .expect("create");
        store
            .append("b", Some(0), vec![prompt("first")])
            .expect("append");
        assert_eq!(ids(&store, &text("first")), vec!["b".to_owned()]);
        // Committed after the index's last catch-up, then the process ends.
        store
            .append("b", Some(1), vec![prompt("second")])
            .expect("append");
    }
    let store = Store::open(&path, options.clone()).expect("reopen");
    assert_verified(&store);
    assert_eq!(found(&store, &text("second")), vec![("b".into(), vec![1])]);
    drop(store);
    std::fs::write(path.join(SEARCH_DIR).join("meta.json"), b"{ damaged").expect("damage");
    let store = Store::open(&path, options).expect("reopen");
    assert_eq!(found(&store, &text("second")), vec![("b".into(), vec![1])]);
    assert_verified(&store);
    let report = store.reindex().expect("reindex");
    assert_eq!((report.sessions, report.messages), (1, 2));
}

#[test]
fn bad_queries_get_a_clear_error() {
    let (_dir, store) = seeded();
    let verdict = SearchQuery {
        verdict: Some("dirty".into()),
        ..SearchQuery::default()
    };
    let e = store.search(&verdict).expect_err("unknown verdict");
    assert!(matches!(e, Error::Query { .. }), "{e}");
    assert!(
        e.to_string().contains("clean, torn, corrupt, unsupported"),
        "{e}"
    );
    let cursor = SearchQuery {
        after: Some("page-2".into()),
        ..SearchQuery::default()
    };
    let e = store.search(&cursor).expect_err("malformed cursor");
    assert!(matches!(e, Error::Cursor { .. }), "{e}");
    let e = store
        .search(&text(&"word ".repeat(300)))
        .expect_err("overlong text");
    assert!(e.to_string().contains("at most 1024"), "{e}");
    let e = store.search(&text("\"unclosed")).expect_err("bad syntax");
    assert!(matches!(e, Error::Query { .. }), "{e}");
    assert!(super::parse_time("yesterday").is_err());
    assert_eq!(super::parse_time("1970-01-02").expect("date"), 86_400_000);
    assert_eq!(
        super::parse_time("2026-05-01T12:00:00.5Z").expect("time"),
        1_777_636_800_500
    );
}

#[test]
fn pages_are_stable_while_sessions_are_created() {
    let (_dir, store) = seeded();
    for n in 0..5 {
        let id = format!("s{n}");
        store
            .create_session(&header(&id), SourceEncoding::Jsonl)
            .expect("create");
    }
    let mut q = SearchQuery {
        limit: 2,
        ..SearchQuery::default()
    };
    let mut seen = Vec::new();
    let mut created = 0;
    loop {
        let page = search(&store, &q);
        seen.extend(page.sessions.iter().map(|h| h.row.id.clone()));
        // New sessions and appends between pages neither repeat nor hide a session.
        store
            .create_session(&header(&format!("late{created}")), SourceEncoding::Jsonl)
            .expect("create");
        created += 1;
        store
            .append("a", None, vec![prompt("more")])
            .expect("append");
        match page.next {
            Some(next) => q.after = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, vec!["s4", "s3", "s2", "s1", "s0", "a"]);
}

/// A change trimmed from the change log before the index read it is not lost: the index finds
/// its watermark behind the log's retained start and derives every session again.
#[test]
fn changes_trimmed_before_the_index_read_them_are_still_found() {
    let dir = tempfile::tempdir().expect("temp dir");
    let options = Options {
        durability: Durability::Buffered,
        feed_retained_changes: 4,
        ..Options::default()
    };
    let store = Store::open(dir.path().join("db"), options).expect("open");
    for id in ["a", "b"] {
        store
            .create_session(&header(id), SourceEncoding::Jsonl)
            .expect("create");
    }
    assert_eq!(ids(&store, &SearchQuery::default()).len(), 2);
    store
        .append("a", Some(0), vec![prompt("quokkafire")])
        .expect("append");
    for n in 0..20 {
        store
            .append("b", Some(n), vec![prompt("filler")])
            .expect("append");
    }
    assert_eq!(
        found(&store, &text("quokkafire")),
        vec![("a".into(), vec![0])]
    );
    assert_verified(&store);
}

/// The change-log position the index's last commit covers, read without catching it up (`None`:
/// not opened or never committed).
fn indexed_position(store: &Store) -> Option<u64> {
    let slot = store.search.lock();
    let ix = slot.as_ref()?;
    ix.watermark().expect("the watermark").map(|w| w.position)
}

/// Wait up to 10 s for the index to cover every published change, without searching.
fn wait_for_index(store: &Store) -> Option<u64> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let at = indexed_position(store);
        if at == Some(store.feed_end()) || std::time::Instant::now() >= deadline {
            return at;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn a_follower_indexes_what_was_written_before_and_after_it_started_without_a_search() {
    let (_dir, store) = seeded();
    let store = std::sync::Arc::new(store);
    store
        .create_session(&header("early"), SourceEncoding::Jsonl)
        .expect("create");
    store
        .append("early", None, vec![prompt("aardvark")])
        .expect("append");
    assert_eq!(indexed_position(&store), None, "nothing has indexed yet");
    let follower = super::IndexFollower::start(
        std::sync::Arc::clone(&store),
        std::time::Duration::from_millis(20),
    )
    .expect("start");
    assert_eq!(wait_for_index(&store), Some(store.feed_end()));
    for n in 0..5 {
        store
            .append("early", None, vec![prompt(&format!("badger{n}"))])
            .expect("append");
    }
    store
        .create_session(&header("late"), SourceEncoding::Jsonl)
        .expect("create");
    store
        .append("late", None, vec![prompt("capybara")])
        .expect("append");
    let end = store.feed_end();
    assert_eq!(
        wait_for_index(&store),
        Some(end),
        "the follower fell behind"
    );
    drop(follower);
    assert_eq!(
        std::sync::Arc::strong_count(&store),
        1,
        "the stopped follower still holds the store"
    );
    // What it indexed is what a search finds, with nothing left to catch up.
    let page = search(&store, &text("capybara"));
    assert_eq!(page.watermark.position, end);
    assert_eq!(ids(&store, &text("badger3")), ["early"]);
    assert_verified(&store);
}

#[test]
fn a_follower_is_refused_beside_another_process_and_stops_when_dropped_while_idle() {
    let (_dir, store) = seeded();
    let reader = Store::open_beside(store.path(), Options::default()).expect("a reader beside");
    let refused = super::IndexFollower::start(
        std::sync::Arc::new(reader),
        std::time::Duration::from_millis(20),
    )
    .expect_err("a reader keeps no index");
    assert!(matches!(refused, Error::ReadOnly { .. }), "{refused}");
    let store = std::sync::Arc::new(store);
    let follower = super::IndexFollower::start(
        std::sync::Arc::clone(&store),
        std::time::Duration::from_secs(3600),
    )
    .expect("start");
    wait_for_index(&store);
    store
        .append("a", None, vec![prompt("dormouse")])
        .expect("append");
    // Dropped while it waits out a long settle: it stops at once, without indexing.
    let began = std::time::Instant::now();
    drop(follower);
    assert!(
        began.elapsed() < std::time::Duration::from_secs(5),
        "the follower took {:?} to stop",
        began.elapsed()
    );
    assert_eq!(std::sync::Arc::strong_count(&store), 1);
}

/// A [`Folding`] that counts the lines it took from their text and records the fold's time
/// after each line or event: `(events folded, last event time)`.
struct Tracing<'a> {
    folding: Folding<'a>,
    taken: u64,
    trace: Vec<(u64, Option<i64>)>,
}

impl LineReader for Tracing<'_> {
    fn line(&mut self, first: u64, members: u32, line: &[u8]) -> crate::error::Result<bool> {
        let took = self.folding.line(first, members, line)?;
        if took {
            self.taken += 1;
            let fold = &self.folding.fold;
            self.trace.push((fold.indexed, fold.last_event_at));
        }
        Ok(took)
    }

    fn event(
        &mut self,
        seq: u64,
        event: &sessionlog_codec::json::Value,
    ) -> crate::error::Result<()> {
        self.folding.event(seq, event)?;
        let fold = &self.folding.fold;
        self.trace.push((fold.indexed, fold.last_event_at));
        Ok(())
    }
}

/// Session `id` folded as the index folds it (whole lines from their text where they allow)
/// and as `verify` does (every decoded event): both must give the same fold and messages, and
/// the same time after every line taken from its text as after its last event decoded. Returns
/// the lines taken from their text.
fn fold_both_ways(store: &Store, id: &str, label: &str) -> u64 {
    let meta = store.require_meta(id.as_bytes()).expect("meta");
    let mut by_lines = Fold::default();
    let mut tracing = Tracing {
        folding: Folding {
            fold: &mut by_lines,
            version: meta.version,
            messages: Vec::new(),
        },
        taken: 0,
        trace: Vec::new(),
    };
    store
        .lines_or_events(&meta, 0, None, &mut tracing)
        .expect("fold by lines");
    let Tracing {
        folding,
        taken,
        trace,
        ..
    } = tracing;
    let lines_messages = folding.messages;
    let mut by_events = Fold::default();
    let mut events_messages = Vec::new();
    let mut times = std::collections::BTreeMap::new();
    store
        .events_of(&meta, 0, None, &mut |seq, e| {
            if let Some(text) = by_events.apply(seq, e) {
                events_messages.push((seq, text));
            }
            times.insert(by_events.indexed, by_events.last_event_at);
            Ok(())
        })
        .expect("fold by events");
    for (indexed, time) in trace {
        assert_eq!(
            times.get(&indexed),
            Some(&time),
            "{label}: after seq {indexed}"
        );
    }
    assert_eq!(
        (by_lines, lines_messages),
        (by_events, events_messages),
        "{label}"
    );
    taken
}

/// Every DSH fixture log folds the same from its lines as from its events, and many of their
/// lines take the line path.
#[test]
fn the_index_folds_every_fixture_from_its_lines_as_from_its_events() {
    let Some(logs) = crate::test_support::fixture_logs() else {
        return;
    };
    let (mut folded, mut taken) = (0, 0);
    for path in &logs {
        let (_dir, store) = crate::test_support::empty();
        let Ok(report) = store.import_path(path, &crate::ImportOptions::default(), &mut |_| {})
        else {
            continue;
        };
        taken += fold_both_ways(&store, &report.id, &path.display().to_string());
        folded += 1;
    }
    assert!(folded > 100, "only {folded} fixtures imported");
    assert!(taken > 1000, "only {taken} lines taken from their text");
}

/// Lines at the edges of the line path fold as their events do: a chunk row of one member, a
/// type spelled with an escape, a duplicate key, a time that is no number, an event of a
/// plain type whose `data` holds `content` with a tool call, a row ending at the largest safe
/// time.
#[test]
fn lines_at_the_edges_of_the_line_path_fold_as_their_events_do() {
    let (_dir, store) = crate::test_support::empty();
    let lines = [
        header("edges"),
        r#"{"type":"turn/start","seq":0,"time":100,"data":{"turn":1}}"#.into(),
        r#"{"type":"text-chunks","seq0":1,"time0":200,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}}"#.into(),
        r#"{"type":"reasoning-chunks","seq0":2,"time0":300,"data":{"turn":1,"step":1,"index":0,"dt":[5,7],"texts":["a","b","c"]}}"#.into(),
        r#"{"type":"step\/start","seq":5,"time":400,"data":{"turn":1,"step":2}}"#.into(),
        r#"{"type":"step/end","seq":6,"time":1,"time":500,"data":{"turn":1,"step":2}}"#.into(),
        r#"{"type":"step/start","seq":7,"time":"late","data":{"turn":1,"step":3}}"#.into(),
        r#"{"type":"step/end","seq":8,"time":600,"data":{"turn":1,"step":3,"content":[{"type":"tool-call","toolCallId":"c9","toolName":"grep"}]}}"#.into(),
        r#"{"type":"text-chunks","seq0":9,"time0":9007199254740990,"data":{"turn":1,"step":4,"index":0,"dt":[1,0],"texts":["a","b","c"]}}"#.into(),
        r#"{"type":"turn/end","seq":12,"time":700,"data":{"turn":1}}"#.into(),
    ];
    let file = lines.join("\n") + "\n";
    let report = store
        .import_jsonl(
            "edges.jsonl",
            file.as_bytes(),
            &crate::ImportOptions::default(),
            &mut |_| {},
        )
        .expect("import");
    let summary = store.summary(&report.id).expect("summary");
    assert!(summary.events >= 9, "{summary:?}");
    assert!(fold_both_ways(&store, &report.id, "edges") >= 3);
}
