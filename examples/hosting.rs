//! A host running many sessions on many threads. Each thread plays its sessions' turns and hands
//! every turn's batch to `Store::append`, which returns once the batch is durable; the threads
//! batch nothing themselves. The store's group commit does: the batches of every thread
//! committing at the same moment go to disk as one WAL write and one fsync, and
//! `Store::commit_stats` shows how many durable appends each fsync carried.
//!
//! A host that cannot block a thread per waiting append (an event loop) hands its batches to an
//! `AppendQueue` instead; a host that already holds several sessions' batches passes them to
//! `Store::append_many` in one call.
//!
//! Run: `cargo build --release --examples && $CARGO_TARGET_DIR/release/examples/hosting`
//! (`./x test` runs it). It exits non-zero unless every batch landed and fsyncs were shared.

use std::sync::Arc;

use sessionlog::codec::format::event::NewEvent;
use sessionlog::codec::format::header::{author_header, HeaderFields};
use sessionlog::codec::json;
use sessionlog::engine::{Durability, Options, SourceEncoding, Store};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const THREADS: usize = 16;
const SESSIONS_PER_THREAD: usize = 8;
const TURNS: u64 = 20;
/// Events in a session after all its turns ([`turn`]: six in a turn, seven in the first).
const EVENTS_PER_SESSION: u64 = 6 * TURNS + 1;

/// Turn `n` of a DSH 0.2 (format V4) session: the user's prompt and the model's answer in one
/// step, between the turn's and the step's markers; the first turn's step opens with the system
/// prompt.
fn turn(n: u64) -> Result<Vec<NewEvent>> {
    let mut lines = vec![
        format!(r#"{{"type":"turn/start","data":{{"turn":{n}}}}}"#),
        format!(r#"{{"type":"step/start","data":{{"turn":{n},"step":1}}}}"#),
    ];
    if n == 1 {
        lines.push(r#"{"type":"system/message","data":{"turn":1,"step":1,"message":{"id":"sys","role":"system","content":[{"type":"text","text":"Be brief."}],"source":{"kind":"system-prompt"}}},"surfaceOp":"append"}"#.to_owned());
    }
    lines.extend([
        format!(
            r#"{{"type":"user/message","data":{{"id":"u{n}","role":"user","content":[{{"type":"text","text":"step {n}"}}],"source":{{"kind":"user"}}}},"surfaceOp":"append"}}"#
        ),
        format!(
            r#"{{"type":"assistant/message","data":{{"turn":{n},"step":1,"message":{{"id":"a{n}","role":"assistant","content":[{{"type":"text","text":"done {n}"}}],"source":{{"kind":"model","provider":"deepseek","model":"deepseek-chat"}}}},"stream":[]}},"surfaceOp":"append"}}"#
        ),
        format!(r#"{{"type":"step/end","data":{{"turn":{n},"step":1}}}}"#),
        format!(r#"{{"type":"turn/end","data":{{"turn":{n},"reason":{{"kind":"completed"}}}}}}"#),
    ]);
    lines
        .iter()
        .map(|line| Ok(NewEvent::from_value(&json::parse(line)?)?))
        .collect()
}

/// One host thread: creates its sessions with their first turns, then appends their next turns
/// one batch at a time, each call returning when that batch is durable.
fn host_thread(store: &Store, thread: usize) -> Result<()> {
    let ids: Vec<String> = (0..SESSIONS_PER_THREAD)
        .map(|k| format!("session-{thread:02}-{k}"))
        .collect();
    let mut next_seqs = Vec::new();
    for id in &ids {
        let header = author_header(&HeaderFields {
            id: id.clone(),
            created_at: 1_700_000_000_000,
            cwd: Some("/work".into()),
            version: 4,
            ..HeaderFields::default()
        });
        // A session is created with its first batch, in one commit.
        let receipt = store.create(&header, SourceEncoding::Jsonl, turn(1)?)?;
        next_seqs.push(receipt.first_seq + receipt.count);
    }
    for n in 2..=TURNS {
        for (id, next_seq) in ids.iter().zip(&mut next_seqs) {
            let receipt = store.append(id, Some(*next_seq), turn(n)?)?;
            *next_seq = receipt.first_seq + receipt.count;
        }
    }
    Ok(())
}

fn main() -> Result<()> {
    let dir = tempfile::tempdir()?;
    // `Sync`, the default: an append returns after the fsync that covers it.
    let options = Options {
        durability: Durability::Sync,
        ..Options::default()
    };
    let store = Arc::new(Store::open(dir.path(), options)?);

    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let store = Arc::clone(&store);
                scope.spawn(move || host_thread(&store, t))
            })
            .collect();
        threads
            .into_iter()
            .try_for_each(|t| t.join().map_err(|_| "a host thread panicked")?)
    })?;

    let sessions = (THREADS * SESSIONS_PER_THREAD) as u64;
    let stats = store.commit_stats();
    println!(
        "{} durable appends from {THREADS} threads in {} synced writes: {:.1} appends per fsync",
        stats.appends,
        stats.synced_writes,
        stats.appends as f64 / stats.synced_writes.max(1) as f64
    );
    assert_eq!(stats.appends, sessions * TURNS, "every batch was appended");
    assert!(
        stats.synced_writes < stats.appends,
        "concurrent appends shared fsyncs: {stats:?}"
    );

    // Every session holds every turn, and every index agrees with the stored lines.
    for summary in store.list()? {
        assert_eq!(summary.events, EVENTS_PER_SESSION, "{}", summary.id);
    }
    assert_eq!(store.list()?.len() as u64, sessions);
    let report = store.verify(&[])?;
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    println!(
        "verified {} sessions, {} stored lines",
        report.sessions, report.lines
    );
    Ok(())
}
