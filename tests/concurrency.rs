//! Concurrency: threads appending to one shared session and to their own sessions while readers
//! export and query them. Every export taken mid-run succeeds and is a line-aligned prefix of the
//! final export; every `events` scan has contiguous seqs from 0 and agrees with the final log;
//! the shared session ends with every batch exactly once; `verify` is clean. Writers wait for the
//! readers' first pass before they start and for a second at their midpoint, so reads always
//! overlap appends however the threads are scheduled.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use sessionlog::codec::format::event::NewEvent;
use sessionlog::codec::json::{self, Value};
use sessionlog::engine::{AppendItem, ExportFormat, SourceEncoding, Store};
use sessionlog_harness::gen::{session_batches, GenOptions};

use crate::fixtures::{events_text, new_event, temp_store};

const WRITERS: usize = 4;
const BATCHES: usize = 120;

fn header(id: &str) -> String {
    format!(
        r#"{{"type":"session","version":0,"id":"{id}","createdAt":1,"cwd":"/w","delegationDepth":0}}"#
    )
}

fn marker(writer: usize, batch: usize, k: usize) -> NewEvent {
    let text =
        format!(r#"{{"type":"hook/result","time":5,"data":{{"w":{writer},"b":{batch},"k":{k}}}}}"#);
    NewEvent::from_value(&json::parse(&text).expect("json")).expect("event")
}

/// What a reader saw of one session: an export and an events scan.
struct Seen {
    id: String,
    export: Vec<u8>,
    events: String,
}

fn read_all(store: &Store, ids: &[String], seen: &Mutex<Vec<Seen>>) {
    for id in ids {
        let mut export = Vec::new();
        store
            .export(id, Some(ExportFormat::Jsonl), &mut export)
            .unwrap_or_else(|e| panic!("export of {id} during appends: {e}"));
        assert!(export.ends_with(b"\n"), "export of {id} ends mid-line");
        let mut events = String::new();
        let mut next = 0;
        store
            .events(id, 0, None, &mut |seq, e| {
                assert_eq!(seq, next, "{id}: events skip or repeat a seq");
                next += 1;
                json::write_value(&mut events, e);
                events.push('\n');
                Ok(())
            })
            .unwrap_or_else(|e| panic!("events of {id} during appends: {e}"));
        seen.lock().expect("lock").push(Seen {
            id: id.clone(),
            export,
            events,
        });
    }
}

#[test]
fn readers_see_consistent_prefixes_while_many_threads_append() {
    let (_tmp, store) = temp_store();
    store
        .create_session(&header("shared"), SourceEncoding::Jsonl)
        .expect("create");
    let feeds: Vec<_> = (0..WRITERS)
        .map(|t| {
            let feed = session_batches(
                t as u64,
                &GenOptions {
                    events_per_session: 400,
                    ..GenOptions::default()
                },
            );
            let id = format!("own-{t}");
            store
                .create_session(&feed.header_line_for(&id), SourceEncoding::Jsonl)
                .expect("create");
            (id, feed)
        })
        .collect();
    let mut ids: Vec<String> = feeds.iter().map(|(id, _)| id.clone()).collect();
    ids.push("shared".into());
    let done = AtomicBool::new(false);
    let passes = AtomicUsize::new(0);
    let seen = Mutex::new(Vec::new());
    // Wait until the readers have made `n` passes over the sessions.
    let after_passes = |n: usize| {
        while passes.load(Ordering::SeqCst) < n {
            std::thread::yield_now();
        }
    };
    std::thread::scope(|s| {
        let writers: Vec<_> = feeds
            .iter()
            .enumerate()
            .map(|(t, (id, feed))| {
                let (store, after_passes) = (&store, &after_passes);
                s.spawn(move || {
                    let mut own = feed.batches.iter();
                    for b in 0..BATCHES {
                        if b == 0 || b == BATCHES / 2 {
                            after_passes(1 + usize::from(b > 0));
                        }
                        let shared: Vec<NewEvent> =
                            (0..1 + b % 3).map(|k| marker(t, b, k)).collect();
                        if b % 2 == 0 {
                            store
                                .append("shared", None, shared)
                                .expect("append to shared");
                        } else if let Some(batch) = own.next() {
                            // One group commit across the shared and the writer's own session.
                            let items = vec![
                                AppendItem::new("shared", None, shared),
                                AppendItem::new(
                                    id,
                                    Some(batch.first_seq),
                                    batch.events.iter().map(new_event).collect(),
                                ),
                            ];
                            for r in store.append_many(items) {
                                r.expect("group append");
                            }
                        } else {
                            store
                                .append("shared", None, shared)
                                .expect("append to shared");
                        }
                    }
                })
            })
            .collect();
        for _ in 0..2 {
            let (store, ids, seen, done, passes) = (&store, &ids, &seen, &done, &passes);
            s.spawn(move || {
                while !done.load(Ordering::SeqCst) {
                    read_all(store, ids, seen);
                    passes.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        for w in writers {
            w.join().expect("writer");
        }
        done.store(true, Ordering::SeqCst);
    });
    read_all(&store, &ids, &seen);
    let seen = seen.into_inner().expect("lock");
    let last = |id: &str| seen.iter().rev().find(|s| s.id == id).expect("final read");
    let mut checked = 0;
    for s in &seen {
        let f = last(&s.id);
        assert!(
            f.export.starts_with(&s.export),
            "{}: a mid-run export is not a prefix of the final one",
            s.id
        );
        assert!(
            f.events.starts_with(&s.events),
            "{}: mid-run events are not a prefix of the final ones",
            s.id
        );
        checked += 1;
    }
    assert!(
        checked > ids.len(),
        "readers never ran alongside the writers"
    );
    // The shared session holds every writer's every batch exactly once, in some order.
    let text = events_text(&store, "shared").expect("events");
    let mut marks: Vec<(i64, i64, i64)> = text
        .lines()
        .map(|l| {
            let v = json::parse(l).expect("event json");
            let d = v
                .as_object()
                .and_then(|o| o.get("data"))
                .and_then(Value::as_object)
                .expect("data");
            let n = |k| d.get(k).and_then(Value::as_safe_integer).expect("marker");
            (n("w"), n("b"), n("k"))
        })
        .collect();
    let total = marks.len();
    marks.sort_unstable();
    marks.dedup();
    assert_eq!(marks.len(), total, "a batch was stored twice");
    assert_eq!(
        total,
        WRITERS * (0..BATCHES).map(|b| 1 + b % 3).sum::<usize>()
    );
    let v = store.verify(&[]).expect("verify");
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    eprintln!("concurrency: {checked} mid-run reads checked");
}
