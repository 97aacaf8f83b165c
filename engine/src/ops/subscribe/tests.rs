//! Subscriptions against the stored log: random interleavings of appends to two sessions,
//! subscribers starting at random seqs (past the end too), consumers that read a little at a
//! time or fall far behind their buffer, and reopens (each subscriber resuming from its next
//! seq) must give each subscriber exactly the stored events from its start, in order, each
//! once; the store-wide feed gives every append in commit order and resumes from its cursor
//! across a reopen. And a live follower on another thread sees every event as it commits.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use sessionlog_codec::format::event::NewEvent;
use sessionlog_codec::json::Value;

use super::{FeedChange, BUFFERED_EVENTS};
use crate::error::Error;
use crate::layout::changes::ChangeKind;
use crate::layout::meta::SourceEncoding;
use crate::ops::append::AppendItem;
use crate::options::{Durability, Options};
use crate::store::Store;
use crate::test_support::ev;

fn header(id: &str) -> String {
    format!(
        r#"{{"type":"session","version":0,"id":"{id}","createdAt":1,"cwd":"/w","delegationDepth":0}}"#
    )
}

fn prompt(n: u64) -> NewEvent {
    ev(&format!(
        r#"{{"type":"user/message","time":{n},"data":{{"content":[],"source":{{"kind":"tool"}},"role":"user","id":"u{n}"}},"surfaceOp":"append"}}"#
    ))
}

fn open(path: &Path) -> Store {
    let options = Options {
        durability: Durability::Buffered,
        ..Options::default()
    };
    Store::open(path, options).expect("open")
}

/// Session `id` created with no events.
fn create(store: &Store, id: &str) {
    store
        .create_session(&header(id), SourceEncoding::Jsonl)
        .expect("create");
}

/// Every stored event of `id` from `from` on.
fn stored(store: &Store, id: &str, from: u64) -> Vec<(u64, Value)> {
    let mut out = Vec::new();
    store
        .events(id, from, None, &mut |seq, e| {
            out.push((seq, e.clone()));
            Ok(())
        })
        .expect("events");
    out
}

/// One step of a run.
#[derive(Clone, Debug)]
enum Step {
    /// Append a batch of `events` events to session `session` (0: "a", 1: "b").
    Append { session: usize, events: usize },
    /// Start a subscriber of `session` at `ahead` seqs past (or before) its end.
    Subscribe { session: usize, offset: i64 },
    /// Subscriber `which` (modulo their count) reads up to `count` events without waiting.
    Read { which: usize, count: usize },
    /// Close and reopen the store; every subscriber resumes from its next seq.
    Reopen,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..2usize, 1..6usize).prop_map(|(session, events)| Step::Append { session, events }),
        2 => (0..2usize, -8..3i64).prop_map(|(session, offset)| Step::Subscribe { session, offset }),
        4 => (0..8usize, 0..7usize).prop_map(|(which, count)| Step::Read { which, count }),
        1 => Just(Step::Reopen),
    ]
}

/// A subscriber in the model: its session, its start, what it got.
struct Follower {
    session: &'static str,
    from: u64,
    got: Vec<(u64, Value)>,
    sub: super::Subscription,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn subscribers_get_exactly_the_stored_events_from_their_start(
        steps in proptest::collection::vec(step(), 1..40),
    ) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("db");
        let mut store = open(&path);
        let sessions = ["a", "b"];
        for id in sessions {
            create(&store, id);
        }
        let mut next = [0u64; 2];
        let mut time = 0;
        let mut followers: Vec<Follower> = Vec::new();
        for step in steps {
            match step {
                Step::Append { session, events } => {
                    let batch = (0..events).map(|_| { time += 1; prompt(time) }).collect();
                    store.append(sessions[session], Some(next[session]), batch).expect("append");
                    next[session] += events as u64;
                }
                Step::Subscribe { session, offset } => {
                    let from = u64::try_from(next[session] as i64 + offset).unwrap_or(0);
                    let sub = store.subscribe(sessions[session], from).expect("subscribe");
                    followers.push(Follower { session: sessions[session], from, got: Vec::new(), sub });
                }
                Step::Read { which, count } => {
                    if followers.is_empty() {
                        continue;
                    }
                    let n = followers.len();
                    let f = &mut followers[which % n];
                    for _ in 0..count {
                        match f.sub.next_within(&store, Duration::ZERO).expect("next") {
                            Some(e) => f.got.push(e),
                            None => break,
                        }
                    }
                }
                Step::Reopen => {
                    drop(store);
                    store = open(&path);
                    for f in &mut followers {
                        f.sub = store.subscribe(f.session, f.sub.next_seq()).expect("resubscribe");
                    }
                }
            }
        }
        for f in &mut followers {
            while let Some(e) = f.sub.next_within(&store, Duration::ZERO).expect("drain") {
                f.got.push(e);
            }
            prop_assert_eq!(&f.got, &stored(&store, f.session, f.from), "{} from {}", f.session, f.from);
        }
    }
}

/// A follower on another thread, waiting for each commit, sees every event of an appender that
/// outruns it by more than its buffer, in order, each once; the appender never waits for it.
#[test]
fn a_live_follower_on_another_thread_sees_every_event_once_in_order() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Arc::new(open(&dir.path().join("db")));
    create(&store, "a");
    let batches = 60u64;
    let per_batch = 40u64;
    let total = batches * per_batch;
    assert!(total > 2 * BUFFERED_EVENTS as u64);
    let mut sub = store.subscribe("a", 0).expect("subscribe");
    let follower = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            let mut got = Vec::new();
            while (got.len() as u64) < total {
                if let Some(e) = sub
                    .next_within(&store, Duration::from_secs(30))
                    .expect("next")
                {
                    got.push(e);
                }
            }
            got
        })
    };
    for b in 0..batches {
        let batch = (0..per_batch).map(|i| prompt(b * per_batch + i)).collect();
        store
            .append("a", Some(b * per_batch), batch)
            .expect("append");
    }
    let got = follower.join().expect("follower");
    assert_eq!(got, stored(&store, "a", 0));
}

/// The store-wide feed gives each change as an item of its kind followed by its events, in
/// commit order; a feed resumed from any item's cursor after a reopen gives exactly the items
/// after it; a cursor of another store, or no cursor at all, is refused with the reason.
#[test]
fn the_store_wide_feed_resumes_from_any_cursor_across_a_reopen() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("db");
    let store = open(&path);
    create(&store, "a");
    store
        .append_many(vec![AppendItem::new("b", Some(0), vec![prompt(1)])
            .creating(header("b"), SourceEncoding::Jsonl)])
        .pop()
        .expect("one")
        .expect("create b");
    store
        .append("a", Some(0), vec![prompt(2), prompt(3)])
        .expect("a");
    store.delete("b").expect("delete");
    store.append("a", Some(2), vec![prompt(4)]).expect("a");
    let mut feed = store.subscribe_all(None).expect("feed");
    let mut items = Vec::new();
    while let Some(item) = feed.next_within(&store, Duration::ZERO).expect("next") {
        items.push(item);
    }
    let shape: Vec<String> = items
        .iter()
        .map(|i| match &i.change {
            FeedChange::Session {
                kind, first, count, ..
            } => {
                format!("{} {} {first}+{count}", i.session, kind.name())
            }
            FeedChange::Event { seq, .. } => format!("{} event {seq}", i.session),
        })
        .collect();
    assert_eq!(
        shape,
        [
            "a created 0+0",
            "b created 0+1",
            "b event 0",
            "a appended 0+2",
            "a event 0",
            "a event 1",
            "b deleted 1+0",
            "a appended 2+1",
            "a event 2",
        ]
    );
    assert!(matches!(
        &items[0].change,
        FeedChange::Session {
            kind: ChangeKind::Created,
            ..
        }
    ));
    drop(feed);
    drop(store);
    let store = open(&path);
    for (i, item) in items.iter().enumerate() {
        let mut resumed = store
            .subscribe_all(Some(&item.next.to_string()))
            .expect("resume");
        let mut rest = Vec::new();
        while let Some(item) = resumed.next_within(&store, Duration::ZERO).expect("next") {
            rest.push(item);
        }
        assert_eq!(rest, items[i + 1..], "resumed after item {i}");
    }
    let other = tempfile::tempdir().expect("temp dir");
    let other = open(&other.path().join("db"));
    let foreign = items[0].next.to_string();
    let err = other
        .subscribe_all(Some(&foreign))
        .expect_err("foreign cursor");
    assert!(
        matches!(&err, Error::Cursor { .. }) && err.to_string().contains("belongs to store"),
        "{err}"
    );
    let err = store
        .subscribe_all(Some("nonsense"))
        .expect_err("not a cursor");
    assert!(err.to_string().contains("STORE:POSITION"), "{err}");
}

/// An unknown session is refused by name; a subscriber past the end waits and gets the next
/// events when they commit.
#[test]
fn an_unknown_session_is_refused_and_a_start_past_the_end_waits() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open(&dir.path().join("db"));
    let err = store.subscribe("nope", 0).expect_err("unknown");
    assert!(matches!(err, Error::UnknownSession { .. }), "{err}");
    create(&store, "a");
    let mut sub = store.subscribe("a", 2).expect("subscribe");
    assert_eq!(sub.end(&store).expect("end"), 0);
    assert_eq!(sub.next_within(&store, Duration::ZERO).expect("next"), None);
    store
        .append("a", Some(0), vec![prompt(1), prompt(2), prompt(3)])
        .expect("append");
    let got = sub.next_within(&store, Duration::ZERO).expect("next");
    assert_eq!(got, stored(&store, "a", 2).pop());
}
