//! Subscriptions against the stored log: random interleavings of appends to two sessions (some
//! with chunk runs, which the store packs into one line), bursts that run past the sessions'
//! rings of committed events, changes that empty a ring (a delete and its undo), subscribers
//! starting at random seqs (past the end too), alone or sharing a watch's waker, consumers that
//! read a little at a time or fall far behind their buffer or their session's ring, and reopens
//! (each subscriber resuming from its next seq) must give each subscriber exactly the stored
//! events from its start, in order, each once, whether it took them from the ring or the store;
//! a subscriber that keeps up takes every event from memory; the store-wide feed gives every append in commit order
//! and resumes from its cursor across a reopen, and refuses a cursor older than the change log
//! retains. And live followers on another thread (one each, or many on one watch) see every
//! event as it commits.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use sessionlog_codec::format::event::NewEvent;
use sessionlog_codec::json::Value;

use super::{FeedChange, Watch, WatchKey, BUFFERED_EVENTS};
use crate::error::Error;
use crate::layout::changes::ChangeKind;
use crate::layout::meta::SourceEncoding;
use crate::ops::append::AppendItem;
use crate::options::{Durability, Options};
use crate::store::Store;
use crate::store::RECENT_EVENTS;
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

/// An assistant text delta: three or more in a row are packed into one stored line.
fn chunk(n: u64) -> NewEvent {
    ev(&format!(
        r#"{{"type":"assistant/chunk","time":{n},"data":{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"t{n}"}}}}}}"#
    ))
}

/// A batch of `events` events from time `time` on: a prompt, then chunks.
fn batch(time: &mut u64, events: usize) -> Vec<NewEvent> {
    (0..events)
        .map(|k| {
            *time += 1;
            match k {
                0 => prompt(*time),
                _ => chunk(*time),
            }
        })
        .collect()
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
    /// Append `batches` batches of 60 events to `session`: more than its ring holds.
    Burst { session: usize, batches: usize },
    /// Delete `session` and undo it: two changes without events, which empty its ring.
    Touch { session: usize },
    /// Start a subscriber of `session` at `ahead` seqs past (or before) its end.
    Subscribe { session: usize, offset: i64 },
    /// Start a subscriber of `session` at `offset` seqs past (or before) its end, in the watch.
    Watch { session: usize, offset: i64 },
    /// Subscriber `which` (modulo their count) reads up to `count` events without waiting.
    Read { which: usize, count: usize },
    /// The watch yields up to `count` events of any of its subscribers, without waiting.
    ReadWatch { count: usize },
    /// Close and reopen the store; every subscriber resumes from its next seq.
    Reopen,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..2usize, 1..6usize).prop_map(|(session, events)| Step::Append { session, events }),
        1 => (0..2usize, 1..7usize).prop_map(|(session, batches)| Step::Burst { session, batches }),
        1 => (0..2usize).prop_map(|session| Step::Touch { session }),
        2 => (0..2usize, -8..3i64).prop_map(|(session, offset)| Step::Subscribe { session, offset }),
        2 => (0..2usize, -8..3i64).prop_map(|(session, offset)| Step::Watch { session, offset }),
        4 => (0..8usize, 0..7usize).prop_map(|(which, count)| Step::Read { which, count }),
        2 => (0..12usize).prop_map(|count| Step::ReadWatch { count }),
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

/// The subscribers sharing the model's watch: the watch, and its followers by key (their `sub`
/// is unused: the watch holds theirs).
struct Watched {
    watch: Watch,
    followers: Vec<(WatchKey, Follower)>,
}

impl Watched {
    /// Every event the watch yields without waiting, up to `count`, to the followers it names.
    fn read(&mut self, store: &Store, count: usize) {
        for _ in 0..count {
            let Some((key, seq, event)) = self
                .watch
                .next_within(store, Duration::ZERO)
                .expect("watch")
            else {
                break;
            };
            let (_, f) = self
                .followers
                .iter_mut()
                .find(|(k, _)| *k == key)
                .expect("a known key");
            f.got.push((seq, event));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn subscribers_get_exactly_the_stored_events_from_their_start(
        steps in proptest::collection::vec(step(), 1..48),
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
        let mut watched = Watched { watch: Watch::new(), followers: Vec::new() };
        for step in steps {
            match step {
                Step::Append { session, events } => {
                    let batch = batch(&mut time, events);
                    store.append(sessions[session], Some(next[session]), batch).expect("append");
                    next[session] += events as u64;
                }
                Step::Burst { session, batches } => {
                    for _ in 0..batches {
                        let batch = batch(&mut time, 60);
                        store.append(sessions[session], Some(next[session]), batch).expect("append");
                        next[session] += 60;
                    }
                }
                Step::Touch { session } => {
                    store.delete(sessions[session]).expect("delete");
                    store.undelete(sessions[session]).expect("undelete");
                }
                Step::Subscribe { session, offset } => {
                    let from = u64::try_from(next[session] as i64 + offset).unwrap_or(0);
                    let sub = store.subscribe(sessions[session], from).expect("subscribe");
                    followers.push(Follower { session: sessions[session], from, got: Vec::new(), sub });
                }
                Step::Watch { session, offset } => {
                    let from = u64::try_from(next[session] as i64 + offset).unwrap_or(0);
                    let key = watched.watch.add(&store, sessions[session], from).expect("watch");
                    let sub = store.subscribe(sessions[session], from).expect("subscribe");
                    watched.followers.push((key, Follower { session: sessions[session], from, got: Vec::new(), sub }));
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
                Step::ReadWatch { count } => watched.read(&store, count),
                Step::Reopen => {
                    drop(store);
                    store = open(&path);
                    for f in &mut followers {
                        f.sub = store.subscribe(f.session, f.sub.next_seq()).expect("resubscribe");
                    }
                    let old = std::mem::take(&mut watched.watch);
                    for (key, f) in &mut watched.followers {
                        let resume = old.get(*key).expect("still watched").next_seq();
                        *key = watched.watch.add(&store, f.session, resume).expect("rewatch");
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
        watched.read(&store, usize::MAX);
        for (_, f) in &watched.followers {
            prop_assert_eq!(&f.got, &stored(&store, f.session, f.from), "watched {} from {}", f.session, f.from);
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

/// One thread with one watch follows many sessions while several threads append to them: it
/// gets every event of each, in order, each once, woken by the commits (it never polls on a
/// timer: its wait is far longer than the run).
#[test]
fn one_watch_on_one_thread_follows_many_sessions_live() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Arc::new(open(&dir.path().join("db")));
    let ids: Vec<String> = (0..40).map(|i| format!("s{i:02}")).collect();
    for id in &ids {
        create(&store, id);
    }
    let batches = 30u64;
    let per_batch = 3u64;
    let mut watch = Watch::new();
    for id in &ids {
        watch.add(&store, id, 0).expect("watch");
    }
    let total = ids.len() as u64 * batches * per_batch;
    let follower = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            let mut got: Vec<Vec<(u64, Value)>> = vec![Vec::new(); 40];
            let mut count = 0;
            while count < total {
                let next = watch
                    .next_within(&store, Duration::from_secs(60))
                    .expect("next");
                if let Some((key, seq, event)) = next {
                    got[key.0].push((seq, event));
                    count += 1;
                }
            }
            got
        })
    };
    std::thread::scope(|scope| {
        for part in ids.chunks(10) {
            let store = &store;
            scope.spawn(move || {
                for b in 0..batches {
                    for id in part {
                        let batch = (0..per_batch).map(|i| prompt(b * per_batch + i)).collect();
                        store
                            .append(id, Some(b * per_batch), batch)
                            .expect("append");
                    }
                }
            });
        }
    });
    let got = follower.join().expect("follower");
    for (id, events) in ids.iter().zip(&got) {
        assert_eq!(events, &stored(&store, id, 0), "{id}");
    }
}

/// A watch whose session is purged while followed returns that error once, drops that
/// subscription, and goes on with the others.
#[test]
fn a_watch_drops_a_purged_session_and_goes_on() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open(&dir.path().join("db"));
    create(&store, "a");
    create(&store, "b");
    let mut watch = Watch::new();
    let a = watch.add(&store, "a", 0).expect("a");
    let b = watch.add(&store, "b", 0).expect("b");
    store.delete("a").expect("delete");
    store.purge(0, false).expect("purge");
    store.append("b", Some(0), vec![prompt(1)]).expect("b");
    let err = watch
        .next_within(&store, Duration::ZERO)
        .expect_err("a is gone");
    assert!(matches!(err, Error::UnknownSession { .. }), "{err}");
    assert!(watch.get(a).is_none());
    let got = watch.next_within(&store, Duration::ZERO).expect("b");
    assert_eq!(got.map(|(k, seq, _)| (k, seq)), Some((b, 0)));
}

/// Every change-log record, by position.
fn logged(store: &Store) -> Vec<u64> {
    store
        .read_changes(0, usize::MAX)
        .expect("log")
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

/// A store keeping the latest `retained` changes of its log.
fn open_retaining(path: &Path, retained: u64) -> Store {
    let options = Options {
        durability: Durability::Buffered,
        feed_retained_changes: retained,
        ..Options::default()
    };
    Store::open(path, options).expect("open")
}

/// The change log keeps the latest changes it is told to (an eighth more between trims), and
/// across a reopen: a feed with no cursor starts at the retained start, a cursor within the
/// retained changes resumes exactly, and a cursor older than the retained start, or a feed that
/// falls behind the trim, is refused with an error naming the start, never given a gap.
#[test]
fn the_change_log_keeps_its_latest_changes_and_refuses_older_cursors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("db");
    let store = open_retaining(&path, 8);
    create(&store, "a");
    let mut behind = store.subscribe_all(None).expect("feed");
    let first = behind
        .next_within(&store, Duration::ZERO)
        .expect("first")
        .expect("the creation");
    for n in 0..40 {
        store.append("a", Some(n), vec![prompt(n)]).expect("append");
    }
    let kept = logged(&store);
    assert!(
        (8..=9).contains(&kept.len()) && kept.last() == Some(&40),
        "{kept:?}"
    );
    let start = kept[0];
    let check = |store: &Store| {
        let err = store
            .subscribe_all(Some(&first.next.to_string()))
            .expect_err("trimmed cursor");
        assert!(
            matches!(&err, Error::Cursor { .. })
                && err.to_string().contains(&format!(
                    "older than the feed's retained start {}:{start}",
                    first.next.store
                ))
                && err.to_string().contains("resync from a snapshot"),
            "{err}"
        );
        let mut feed = store.subscribe_all(None).expect("feed");
        let mut items = Vec::new();
        while let Some(item) = feed.next_within(store, Duration::ZERO).expect("next") {
            items.push(item);
        }
        let appended: Vec<u64> = items
            .iter()
            .filter_map(|i| match i.change {
                FeedChange::Event { seq, .. } => Some(seq),
                FeedChange::Session { .. } => None,
            })
            .collect();
        assert_eq!(appended, (start - 1..40).collect::<Vec<_>>());
        let mut resumed = store
            .subscribe_all(Some(&items[1].next.to_string()))
            .expect("a retained cursor");
        let rest: Vec<_> =
            std::iter::from_fn(|| resumed.next_within(store, Duration::ZERO).expect("next"))
                .collect();
        assert_eq!(rest, items[2..]);
    };
    check(&store);
    drop(store);
    let store = open_retaining(&path, 8);
    check(&store);
    let err = behind
        .next_within(&store, Duration::ZERO)
        .expect_err("fell behind the trim");
    assert!(
        err.to_string()
            .contains("older than the feed's retained start"),
        "{err}"
    );
    let err = Store::open(
        &path,
        Options {
            feed_retained_changes: 0,
            ..Options::default()
        },
    )
    .expect_err("nothing retained");
    assert!(err.to_string().contains("feed_retained_changes"), "{err}");
}

/// Events yielded by `sub` without waiting.
fn drain(store: &Store, sub: &mut super::Subscription) -> Vec<(u64, Value)> {
    std::iter::from_fn(|| sub.next_within(store, Duration::ZERO).expect("next")).collect()
}

/// A subscriber that keeps up with its session takes each committed batch from the session's
/// ring, reading nothing from the store; one that falls more than the ring holds behind reads
/// the store instead (up to its buffer at a time, here all of it), and both get exactly the
/// stored events, in order, each once.
#[test]
fn a_subscriber_that_keeps_up_takes_events_from_memory_and_one_behind_reads_the_store() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open(&dir.path().join("db"));
    create(&store, "a");
    let mut live = store.subscribe("a", 0).expect("live");
    let mut behind = store.subscribe("a", 0).expect("behind");
    assert_eq!(drain(&store, &mut behind), []);
    let before = store.subscription_stats();
    let (mut time, mut next, mut got) = (0, 0u64, Vec::new());
    let batches = RECENT_EVENTS / 40 + 3;
    for _ in 0..batches {
        store
            .append("a", Some(next), batch(&mut time, 40))
            .expect("append");
        next += 40;
        got.extend(drain(&store, &mut live));
    }
    assert_eq!(got, stored(&store, "a", 0));
    let kept_up = store.subscription_stats();
    assert_eq!(
        (
            kept_up.events_from_memory - before.events_from_memory,
            kept_up.events_from_store - before.events_from_store
        ),
        (next, 0),
        "the live subscriber's events: from memory, from the store"
    );
    assert_eq!(drain(&store, &mut behind), stored(&store, "a", 0));
    let caught_up = store.subscription_stats();
    assert_eq!(
        (
            caught_up.events_from_memory - kept_up.events_from_memory,
            caught_up.events_from_store - kept_up.events_from_store
        ),
        (0, next),
        "the subscriber behind the ring: from memory, from the store"
    );
}
