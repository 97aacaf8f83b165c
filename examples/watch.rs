//! Watching sessions live: a follower subscribed to one session gets its stored events, then
//! each new one as the commit holding it is written; a watch follows many sessions on one
//! thread; a store-wide feed gives every change to every session in commit order, with a cursor
//! an indexer stores and resumes from after a restart.
//!
//! A host thread appends turns to session "a" while a follower thread prints each event as it
//! arrives. Then a dashboard follows "a" and "b" through one watch. Then an indexer reads the
//! store-wide feed, stops halfway, and resumes from its cursor on a reopened store.
//!
//! Run: `cargo build --release --examples && $CARGO_TARGET_DIR/release/examples/watch`
//! (`./x test` runs it). It exits non-zero if a follower misses, repeats or reorders an event.

use std::sync::Arc;
use std::time::Duration;

use sessionlog::codec::format::event::NewEvent;
use sessionlog::codec::json;
use sessionlog::engine::{FeedChange, Options, SourceEncoding, Store, Watch};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Session `id`'s header line.
fn header(id: &str) -> String {
    format!(
        r#"{{"type":"session","version":0,"id":"{id}","createdAt":1,"cwd":"/w","delegationDepth":0}}"#
    )
}

/// One turn: its start and its end, as `sessionlog append` reads events.
fn turn(n: u64) -> Result<Vec<NewEvent>> {
    [
        format!(r#"{{"type":"turn/start","time":{n},"data":{{"turn":{n}}}}}"#),
        format!(r#"{{"type":"turn/end","time":{n},"data":{{"turn":{n},"reason":{{"kind":"completed"}}}}}}"#),
    ]
    .iter()
    .map(|line| Ok(NewEvent::from_value(&json::parse(line)?)?))
    .collect()
}

fn main() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Arc::new(Store::open(dir.path(), Options::default())?);
    store.create_session(&header("a"), SourceEncoding::Jsonl)?;
    store.append("a", Some(0), turn(1)?)?;

    // A follower from seq 0: the stored turn first, then each new event as it commits.
    let mut subscription = store.subscribe("a", 0)?;
    let follower = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || -> Result<Vec<u64>> {
            let mut seqs = Vec::new();
            while seqs.len() < 10 {
                if let Some((seq, event)) =
                    subscription.next_within(&store, Duration::from_secs(10))?
                {
                    println!("follower: {seq} {}", json::stringify(&event));
                    seqs.push(seq);
                }
            }
            Ok(seqs)
        })
    };
    for n in 2..=5 {
        store.append("a", Some(2 * (n - 1)), turn(n)?)?;
    }
    let seqs = follower.join().map_err(|_| "the follower panicked")??;
    if seqs != (0..10).collect::<Vec<u64>>() {
        return Err(format!("the follower saw {seqs:?}").into());
    }

    // A dashboard follows both sessions on this one thread: one watch, one waker.
    store.create_session(&header("b"), SourceEncoding::Jsonl)?;
    store.append("b", Some(0), turn(1)?)?;
    let mut watch = Watch::new();
    let a = watch.add(&store, "a", 8)?;
    watch.add(&store, "b", 0)?;
    let mut seen = 0;
    while let Some((key, seq, _)) = watch.next_within(&store, Duration::ZERO)? {
        let id = if key == a { "a" } else { "b" };
        println!("dashboard: {id} {seq}");
        seen += 1;
    }
    if seen != 4 {
        return Err(format!("the dashboard saw {seen} events, not 4").into());
    }

    // An indexer reads the store-wide feed, keeps its cursor, and stops after four items.
    let mut feed = store.subscribe_all(None)?;
    let mut cursor = None;
    for _ in 0..4 {
        let item = feed
            .next_within(&store, Duration::ZERO)?
            .ok_or("the feed ended early")?;
        if let FeedChange::Session { kind, count, .. } = &item.change {
            println!(
                "indexer: session {} {} ({count} events)",
                item.session,
                kind.name()
            );
        }
        cursor = Some(item.next.to_string());
    }
    drop(feed);
    let store = Arc::try_unwrap(store).map_err(|_| "the store is still shared")?;
    drop(store);

    // After a restart it resumes from the stored cursor: the remaining events, nothing twice.
    let store = Store::open(dir.path(), Options::default())?;
    let mut feed = store.subscribe_all(cursor.as_deref())?;
    let mut events = 0;
    while let Some(item) = feed.next_within(&store, Duration::ZERO)? {
        if let FeedChange::Event { .. } = item.change {
            events += 1;
        }
    }
    // Items so far: "a" created, "a" appended 0+2, its events 0 and 1; the rest: four more
    // appended changes of "a" and one of "b", of two events each.
    if events != 10 {
        return Err(format!("the resumed feed gave {events} events, not 10").into());
    }
    println!(
        "indexer: resumed from {}, {events} more events",
        cursor.unwrap_or_default()
    );
    Ok(())
}
