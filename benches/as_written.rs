//! The seam's append of a batch DSH's reader refuses, against the strict append of a clean
//! batch, on sessions of about 100,000 events: both must cost in proportion to the batch, not to
//! the session. Two copies of one generated V0 session are imported; each iteration appends a
//! five-event batch to one of them: strict events to the first, and to the second the same
//! events with one of a type DSH's reader refuses, marked `as_written` (the first such batch
//! makes the log `unsupported`; the later ones are appended to a log DSH's reader refuses, which
//! is the seam's steady state).
//!
//! Run: `./x bench as_written`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sessionlog::codec::format::event::NewEvent;
use sessionlog::codec::json::parse;
use sessionlog::engine::{AppendItem, Durability, ImportOptions, Options, Store};
use sessionlog_harness::gen::{session_feed, GenOptions, LogFormat};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Mean events of the generated sessions; the one generated holds 100,430.
const SESSION_EVENTS: u64 = 121_000;

/// A batch of five tool-kind user messages from `n` on; with `refused`, the third is of a type
/// DSH 0.1's reader refuses.
fn batch(n: u64, refused: bool) -> Vec<NewEvent> {
    (n..n + 5)
        .map(|k| {
            let text = if refused && k == n + 2 {
                format!(r#"{{"type":"future/event","time":{k},"data":{{"n":{k}}}}}"#)
            } else {
                format!(
                    r#"{{"type":"user/message","time":{k},"data":{{"content":[{{"type":"text","text":"m{k}"}}],"source":{{"kind":"tool"}},"role":"user","id":"b{k}"}},"surfaceOp":"append"}}"#
                )
            };
            NewEvent::from_logged(&parse(&text).expect("json")).expect("event")
        })
        .collect()
}

fn as_written(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let options = Options {
        durability: Durability::Buffered,
        ..Options::default()
    };
    let store = Store::open(dir.path(), options).expect("open");
    let opts = GenOptions {
        events_per_session: SESSION_EVENTS,
        torn_fraction: 0.0,
        ..GenOptions::default()
    };
    let feed = session_feed(0, &opts, LogFormat::V0);
    for id in ["clean", "refused"] {
        let mut bytes = format!("{}\n", feed.header_line_for(id)).into_bytes();
        bytes.extend_from_slice(&feed.dsh_bytes()[feed.header_line.len() + 1..]);
        store
            .import_jsonl(id, &bytes[..], &ImportOptions::default(), &mut |_| {})
            .expect("import");
    }
    let events = store.summary("clean").expect("summary").events;
    eprintln!("as_written: two sessions of {events} events each");
    let mut group = c.benchmark_group("as_written");
    group.throughput(Throughput::Elements(5));
    for (name, refused) in [("clean_batch", false), ("refused_batch", true)] {
        let id = if refused { "refused" } else { "clean" };
        let mut next = events;
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut item = AppendItem::new(id, Some(next), batch(next, refused));
                if refused {
                    item = item.as_written();
                }
                next += 5;
                store
                    .append_many(vec![item])
                    .pop()
                    .expect("a result")
                    .expect("appended");
            })
        });
    }
    group.finish();
}

criterion_group!(benches, as_written);
criterion_main!(benches);
