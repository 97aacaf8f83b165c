//! The append path, stage by stage, on generated sessions (`sessionlog-harness gen`'s generator),
//! V0 and V4: the host's copy of a batch, turning it into `NewEvent`s and authoring their
//! envelopes, writing their lines (and parsing them back, an import's first step), and a whole
//! round (32 sessions' next batches) through `Store::append_many` without fsync.
//! `sessionlog-harness bench hosting` measures the same path with its threads, fsyncs and
//! compactions, where a change of a few percent hides in the machine's noise; these single-threaded
//! figures show it.
//!
//! Run: `./x bench [FILTER]` (`cargo bench --profile release --bench append_path`: the release
//! profile the tests use, so that nothing is compiled twice; see docs/PERFORMANCE.md).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use sessionlog::codec::format::event::NewEvent;
use sessionlog::codec::format::lines::author_lines;
use sessionlog::codec::json::{parse, Value};
use sessionlog::engine::{AppendItem, Durability, Options, Store};
use sessionlog_harness::gen::{host_options, session_feed, GenOptions, LogFormat, SessionFeed};
use sessionlog_harness::hosting::session_id;
use sessionlog_harness::hosting::sessionlog::append_built;

/// The CLI's allocator (`tools/cli/src/main.rs`), so that the stages cost here what they cost in
/// `sessionlog-harness bench hosting`.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Sessions appended together per round: about what one host thread of `bench hosting
/// --sessions 1000 --threads 32` submits (31 or 32).
const ROUND: usize = 32;

fn formats() -> [(LogFormat, &'static str, u32); 2] {
    [(LogFormat::V0, "v0", 0), (LogFormat::V4, "v4", 4)]
}

fn feeds(format: LogFormat) -> Vec<SessionFeed> {
    (0..ROUND as u64)
        .map(|i| session_feed(i, &GenOptions::default(), format))
        .collect()
}

/// The events of the feeds' batches, each as the host hands them over.
fn all_batches(feeds: &[SessionFeed]) -> Vec<&[Value]> {
    feeds
        .iter()
        .flat_map(|f| f.batches.iter().map(|b| b.events.as_slice()))
        .collect()
}

/// A batch's events as the store authors them (seqs from 0; the time each event has).
fn authored(events: Vec<Value>) -> Vec<Value> {
    events
        .into_iter()
        .map(|e| NewEvent::from_logged_owned(e).expect("a generated event"))
        .enumerate()
        .map(|(seq, e)| e.author(seq as u64, 0).expect("admitted"))
        .collect()
}

fn event_stages(c: &mut Criterion) {
    for (format, name, version) in formats() {
        let feeds = feeds(format);
        let batches = all_batches(&feeds);
        let events: usize = batches.iter().map(|b| b.len()).sum();
        let mut group = c.benchmark_group(format!("append_path/{name}"));
        group.throughput(Throughput::Elements(events as u64));
        group.bench_function("host_copy", |b| {
            b.iter(|| {
                batches
                    .iter()
                    .map(|events| events.to_vec())
                    .collect::<Vec<_>>()
            })
        });
        group.bench_function("author", |b| {
            b.iter_batched(
                || batches.iter().map(|e| e.to_vec()).collect::<Vec<_>>(),
                |copies| copies.into_iter().map(authored).collect::<Vec<_>>(),
                BatchSize::LargeInput,
            )
        });
        let written: Vec<Vec<Value>> = batches.iter().map(|e| authored(e.to_vec())).collect();
        group.bench_function("lines", |b| {
            b.iter(|| {
                let mut text = String::new();
                let mut members = Vec::new();
                for batch in &written {
                    text.clear();
                    members.clear();
                    author_lines(version, batch, &mut text, &mut members);
                }
                text.len()
            })
        });
        let mut lines = String::new();
        for batch in &written {
            author_lines(version, batch, &mut lines, &mut Vec::new());
        }
        group.bench_function("parse", |b| {
            b.iter(|| {
                lines
                    .lines()
                    .map(|line| parse(line).map_or(0, |_| 1))
                    .sum::<usize>()
            })
        });
        group.finish();
    }
}

/// Where each of the round's sessions is in its feed; a feed that ran out starts over as a new
/// session (a new id, created by its first batch), as `bench hosting` replays it.
struct Cursors {
    next_batch: Vec<usize>,
    cycle: Vec<u64>,
}

/// One session's batch in a round: its session id, its header line when the batch creates it,
/// the batch's first seq and the host's copy of its events.
type Submission = (String, Option<String>, u64, Vec<Value>);

impl Cursors {
    /// The round's next batches, one per feed.
    fn round(&mut self, feeds: &[SessionFeed]) -> Vec<Submission> {
        feeds
            .iter()
            .enumerate()
            .map(|(k, feed)| {
                if self.next_batch[k] == feed.batches.len() {
                    self.next_batch[k] = 0;
                    self.cycle[k] += 1;
                }
                let at = self.next_batch[k];
                self.next_batch[k] += 1;
                let id = session_id(feed, k, self.cycle[k]);
                let header = (at == 0).then(|| feed.header_line_for(&id));
                let batch = &feed.batches[at];
                (id, header, batch.first_seq, batch.events.clone())
            })
            .collect()
    }
}

fn append_round(c: &mut Criterion) {
    for (format, name, _) in formats() {
        let feeds = feeds(format);
        let dir = tempfile::tempdir().expect("temp dir");
        // The generator's host: V4 feeds hold `image/offload` events.
        let options = Options {
            durability: Durability::Buffered,
            ..host_options(Options::default())
        };
        let store = Store::open(dir.path(), options).expect("open");
        let mut cursors = Cursors {
            next_batch: vec![0; feeds.len()],
            cycle: vec![0; feeds.len()],
        };
        let mut group = c.benchmark_group(format!("append_path/{name}"));
        group.throughput(Throughput::Elements(ROUND as u64));
        group.bench_function("append_many_round", |b| {
            b.iter_batched(
                || cursors.round(&feeds),
                |mut round| {
                    let items: Vec<AppendItem> = round
                        .iter_mut()
                        .map(|(id, header, first_seq, events)| {
                            let events = std::mem::take(events);
                            append_built(id, *first_seq, events, header.as_deref())
                                .expect("a generated batch")
                        })
                        .collect();
                    for result in store.append_many(items) {
                        result.expect("appended");
                    }
                },
                BatchSize::LargeInput,
            )
        });
        group.finish();
    }
}

criterion_group!(benches, event_stages, append_round);
criterion_main!(benches);
