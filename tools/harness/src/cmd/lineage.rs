//! `sessionlog-harness bench fork` and `bench listing`: costs that must not grow with the data.
//! - fork: forking a session of `events` events must cost what forking a tiny one does (the
//!   child shares the prefix): mean time per fork and bytes stored per child, for both;
//! - listing: a page of `limit` sessions must read O(limit) index keys, whatever the store size.

use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use sessionlog_codec::format::header::{author_header, HeaderFields};
use sessionlog_codec::json::{Object, Value};
use sessionlog_engine::{
    AppendItem, Durability, ImportOptions, ListOrder, Options, SourceEncoding, Store,
};
use sessionlog_harness::gen::{session_bytes, GenOptions};
use sessionlog_tools_common::output::json_line;

/// A fresh store in a temp dir for one benchmark (buffered: these measure work, not fsync).
fn scratch_store(workload: &str) -> anyhow::Result<(std::path::PathBuf, Store)> {
    let (work, _) = crate::cmd::work_dir(None, workload);
    let options = Options {
        durability: Durability::Buffered,
        ..Options::default()
    };
    let store = Store::open(work.join("store"), options)?;
    Ok((work, store))
}

/// Fork `parent` `n` times after its last `turn/end` (a checkpointed point in both parents, so
/// both compare the same work); mean seconds per fork and mean bytes stored per child.
fn fork_cost(store: &Store, parent: &str, n: u64) -> anyhow::Result<(f64, f64)> {
    let boundary = last_turn_end(store, parent)?;
    let (mut seconds, mut bytes) = (0.0, 0.0);
    for i in 0..n {
        let child = format!("{parent}-fork-{i}");
        let t = Instant::now();
        store.fork(parent, boundary, &child)?;
        seconds += t.elapsed().as_secs_f64();
        bytes += store.stored_bytes(&child)? as f64;
    }
    Ok((seconds / n as f64, bytes / n as f64))
}

/// The seq of `parent`'s last `turn/end` (a checkpointed point), if it has one.
pub(super) fn last_turn_end(store: &Store, parent: &str) -> anyhow::Result<Option<u64>> {
    let turns = store.state_at(parent, "turns", None)?;
    Ok(turns
        .as_array()
        .and_then(|t| {
            t.iter()
                .rev()
                .find_map(|t| t.as_object()?.get("endSeq")?.as_safe_integer())
        })
        .and_then(|s| u64::try_from(s).ok()))
}

pub fn bench_fork(events: u64, forks: u64, as_json: bool) -> anyhow::Result<ExitCode> {
    let (work, store) = scratch_store("fork")?;
    let mut figures = Object::new()
        .with("workload", "fork")
        .with("forks_per_parent", forks as i64);
    let mut parents = Vec::new();
    for (seed, (name, size)) in [("small", 10), ("large", events)].into_iter().enumerate() {
        let opts = GenOptions {
            sessions: 1,
            events_per_session: size,
            seed: 5 + seed as u64,
            torn_fraction: 0.0,
        };
        let file = work.join(format!("{name}.jsonl"));
        std::fs::write(&file, session_bytes(0, &opts))?;
        parents.push((
            name,
            store.import_path(&file, &ImportOptions::default(), &mut |_| {})?,
        ));
    }
    // Measure forks with no import compaction running behind them.
    store.compact()?;
    let mut rows = Vec::new();
    for (name, r) in parents {
        let (seconds, bytes) = fork_cost(&store, &r.id, forks)?;
        eprintln!(
            "fork: parent of {} events: {:.1} us, {:.0} bytes per fork",
            r.events,
            seconds * 1e6,
            bytes
        );
        figures = figures.with(
            name,
            Value::Object(
                Object::new()
                    .with("parent_events", r.events as i64)
                    .with("fork_us", seconds * 1e6)
                    .with("child_bytes", bytes),
            ),
        );
        rows.push((r.events, seconds, bytes));
    }
    drop(store);
    std::fs::remove_dir_all(&work)?;
    let (small, large) = (rows[0], rows[1]);
    // Higher is better: 1.0 means forking the large session costs what forking the small one does.
    let ratios = Object::new()
        .with("time_small_over_large", small.1 / large.1)
        .with("bytes_small_over_large", small.2 / large.2);
    let mut out = std::io::stdout().lock();
    if as_json {
        json_line(&mut out, figures.with("ratios", Value::Object(ratios)))?;
    } else {
        for (events, s, b) in rows {
            writeln!(
                out,
                "parent {events:>9} events: fork {:>8.1} us, child {:>6.0} bytes",
                s * 1e6,
                b
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn bench_listing(sessions: u64, limit: usize, as_json: bool) -> anyhow::Result<ExitCode> {
    let (work, store) = scratch_store("listing")?;
    let t = Instant::now();
    for i in 0..sessions {
        let id = format!("s{i:08}");
        let header = author_header(&HeaderFields {
            id: id.clone(),
            created_at: i as i64,
            ..HeaderFields::default()
        });
        store.create_session(&header, SourceEncoding::Jsonl)?;
        if i % 3 == 0 {
            let prompt = sessionlog_codec::json::parse(&format!(
                r#"{{"type":"user/message","time":{},"data":{{"content":[],"source":{{"kind":"user"}},"role":"user","id":"m"}},"surfaceOp":"append"}}"#,
                (i * 7919) % 1_000_003
            ))?;
            let event = sessionlog_codec::format::event::NewEvent::from_logged(&prompt)
                .map_err(anyhow::Error::msg)?;
            for r in store.append_many(vec![AppendItem::new(&id, Some(0), vec![event])]) {
                r?;
            }
        }
    }
    let fill_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let first = store.list_page(ListOrder::Activity, limit, None)?;
    let first_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let second = store.list_page(ListOrder::Activity, limit, first.next.as_deref())?;
    let second_s = t.elapsed().as_secs_f64();
    drop(store);
    std::fs::remove_dir_all(&work)?;
    let figures = Object::new()
        .with("workload", "listing")
        .with("sessions", sessions as i64)
        .with("limit", limit as i64)
        .with("fill_seconds", fill_s)
        .with("first_page_keys_read", first.keys_read as i64)
        .with("first_page_ms", first_s * 1e3)
        .with("second_page_keys_read", second.keys_read as i64)
        .with("second_page_ms", second_s * 1e3)
        .with(
            "ratios",
            Value::Object(Object::new().with(
                "sessions_per_key_read",
                sessions as f64 / first.keys_read.max(1) as f64,
            )),
        );
    let mut out = std::io::stdout().lock();
    if as_json {
        json_line(&mut out, figures)?;
    } else {
        writeln!(out, "{sessions} sessions: a page of {limit} read {} index keys in {:.2} ms (next page: {} keys, {:.2} ms)", first.keys_read, first_s * 1e3, second.keys_read, second_s * 1e3)?;
    }
    Ok(ExitCode::SUCCESS)
}
