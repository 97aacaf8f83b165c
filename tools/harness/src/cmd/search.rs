//! `sessionlog-harness bench search`: what finding sessions costs and how fast it answers, in one
//! run. `sessions` generated sessions are imported into two fresh stores; one then builds its
//! session index (`Store::reindex`), so import with the index costs the import plus the build,
//! against import alone. On the indexed store, `queries` queries of each kind (filter-only,
//! text-only, combined) are timed after a first search has caught the index up. Hosting: threads
//! append batches to fresh stores for `seconds`, once alone, once with a searcher beside them
//! that searches (catching the index up) without pause, and once with the index kept caught up
//! in the background ([`IndexFollower`], settling [`FOLLOWER_SETTLE`]) and no search, and the
//! throughputs are compared. Sizes: the index's bytes against the store's.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::cli::SearchBench;
use sessionlog_codec::format::event::NewEvent;
use sessionlog_codec::json::{Object, Value};
use sessionlog_engine::{
    ImportOptions, IndexFollower, Options, SearchQuery, SourceEncoding, Store,
};
use sessionlog_harness::gen::{session_bytes, GenOptions};
use sessionlog_harness::hosting::Histogram;
use sessionlog_tools_common::output::json_line;

/// Hosting: sessions appended to, and threads appending.
const HOSTED: usize = 64;
const THREADS: usize = 4;
/// The background follower's settle in the hosting run that measures it.
const FOLLOWER_SETTLE: Duration = Duration::from_secs(1);

/// What runs beside the appenders of a hosting run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Beside {
    Nothing,
    /// A thread searching without pause.
    Searcher,
    /// An [`IndexFollower`].
    Follower,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Import the corpus into `store`; the seconds it took (generation not counted).
fn import(store: &Store, opts: &GenOptions) -> anyhow::Result<f64> {
    let mut spent = Duration::ZERO;
    for i in 0..opts.sessions {
        let bytes = session_bytes(i, opts);
        let t = Instant::now();
        store
            .import_jsonl(
                &format!("s{i}.jsonl"),
                &bytes[..],
                &ImportOptions::default(),
                &mut |_| {},
            )
            .with_context(|| format!("importing session {i}"))?;
        spent += t.elapsed();
    }
    Ok(spent.as_secs_f64())
}

/// Words of the corpus's messages to search for.
fn words(store: &Store) -> anyhow::Result<Vec<String>> {
    let page = store.search(&SearchQuery {
        text: Some("the".into()),
        limit: 5,
        ..SearchQuery::default()
    })?;
    let mut out: Vec<String> = page
        .sessions
        .iter()
        .flat_map(|h| h.matches.iter())
        .flat_map(|m| {
            m.snippet
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| w.len() >= 4)
                .map(str::to_lowercase)
                .collect::<Vec<_>>()
        })
        .collect();
    out.sort();
    out.dedup();
    if out.is_empty() {
        out.push("the".into());
    }
    Ok(out)
}

/// `queries` queries made by `make`, timed.
fn timed(
    store: &Store,
    queries: u64,
    make: &dyn Fn(u64) -> SearchQuery,
) -> anyhow::Result<Histogram> {
    let mut h = Histogram::default();
    for i in 0..queries {
        let q = make(i);
        let t = Instant::now();
        store.search(&q)?;
        h.record(t.elapsed());
    }
    Ok(h)
}

/// Batches per second appended by [`THREADS`] threads to [`HOSTED`] sessions of a fresh store
/// for `seconds`, with `beside` beside them; and the seconds the first search after the appends
/// took (catching the index up with whatever it had not indexed yet).
fn hosting(
    dir: PathBuf,
    options: &Options,
    seconds: f64,
    beside: Beside,
) -> anyhow::Result<(f64, f64)> {
    let store = Arc::new(Store::open(&dir, options.clone())?);
    for s in 0..HOSTED {
        let header = format!(
            r#"{{"type":"session","version":0,"id":"h{s}","createdAt":1,"cwd":"/w","delegationDepth":0}}"#
        );
        store.create_session(&header, SourceEncoding::Jsonl)?;
    }
    let follower = match beside {
        Beside::Follower => Some(IndexFollower::start(Arc::clone(&store), FOLLOWER_SETTLE)?),
        _ => None,
    };
    let stop = AtomicBool::new(false);
    let batches = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let mut appenders = Vec::new();
        for t in 0..THREADS {
            let (store, stop, batches) = (&store, &stop, &batches);
            appenders.push(scope.spawn(move || -> anyhow::Result<()> {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for s in (t..HOSTED).step_by(THREADS) {
                        let text = format!(
                            r#"{{"type":"user/message","time":{n},"data":{{"content":[{{"type":"text","text":"retry {n} after the rate limit of step {s}"}}],"source":{{"kind":"user"}},"role":"user","id":"u{n}"}},"surfaceOp":"append"}}"#
                        );
                        let event = NewEvent::from_value(&sessionlog_codec::json::parse(&text)?)
                            .map_err(anyhow::Error::msg)?;
                        store.append(&format!("h{s}"), None, vec![event])?;
                        batches.fetch_add(1, Ordering::Relaxed);
                        n += 1;
                    }
                }
                Ok(())
            }));
        }
        let searcher = (beside == Beside::Searcher).then(|| {
            let (store, stop) = (&store, &stop);
            scope.spawn(move || -> anyhow::Result<()> {
                while !stop.load(Ordering::Relaxed) {
                    store.search(&rate_limit())?;
                }
                Ok(())
            })
        });
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
        for a in appenders {
            a.join()
                .map_err(|_| anyhow::anyhow!("an appender panicked"))??;
        }
        if let Some(s) = searcher {
            s.join()
                .map_err(|_| anyhow::anyhow!("the searcher panicked"))??;
        }
        Ok(())
    })?;
    let rate = batches.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64();
    let t = Instant::now();
    store.search(&rate_limit())?;
    let first_search = t.elapsed().as_secs_f64();
    drop(follower);
    Ok((rate, first_search))
}

/// The hosting runs' search: their appends' words.
fn rate_limit() -> SearchQuery {
    SearchQuery {
        text: Some("rate limit".into()),
        limit: 5,
        ..SearchQuery::default()
    }
}

/// `queries` timed queries of each kind against `store`: filter-only, text-only (words of its
/// own messages) and the two combined.
fn queries(store: &Store, queries: u64) -> anyhow::Result<(Histogram, Histogram, Histogram)> {
    eprintln!("bench search: {queries} queries of each kind");
    let words = words(store)?;
    let word = |i: u64| words[(i as usize * 7919) % words.len()].clone();
    let filter = |i: u64| match i % 3 {
        0 => SearchQuery {
            tool_error: true,
            ..SearchQuery::default()
        },
        1 => SearchQuery {
            open: true,
            ..SearchQuery::default()
        },
        _ => SearchQuery {
            min_tokens: Some(100_000),
            ..SearchQuery::default()
        },
    };
    let filters = timed(store, queries, &filter)?;
    let texts = timed(store, queries, &|i| SearchQuery {
        text: Some(word(i)),
        ..SearchQuery::default()
    })?;
    let combined = timed(store, queries, &|i| SearchQuery {
        text: Some(word(i)),
        ..filter(i)
    })?;
    Ok((filters, texts, combined))
}

/// Run the benchmark and print its figures (see the module docs).
pub fn run(b: &SearchBench, options: &Options) -> anyhow::Result<ExitCode> {
    if let Some(path) = &b.store {
        return run_on_store(path, b, options);
    }
    anyhow::ensure!(
        b.sessions > 0 && b.events > 0 && b.queries > 0 && b.seconds > 0.0,
        "bench search needs sessions, events, queries and seconds above 0"
    );
    let (work, remove_after) = crate::cmd::work_dir(b.dir.clone(), "bench-search");
    std::fs::create_dir_all(&work)?;
    let opts = GenOptions {
        sessions: b.sessions,
        events_per_session: b.events,
        torn_fraction: 0.0,
        ..GenOptions::default()
    };
    eprintln!("bench search: importing {} sessions twice", b.sessions);
    let plain = Store::open(work.join("plain"), options.clone())?;
    let import_plain = import(&plain, &opts)?;
    drop(plain);
    let store = Store::open(work.join("indexed"), options.clone())?;
    let import_indexed = import(&store, &opts)?;
    let t = Instant::now();
    let built = store.reindex()?;
    let index_build = t.elapsed().as_secs_f64();
    store.settle()?;
    let store_bytes = store.file_bytes()?;
    let (filters, texts, combined) = queries(&store, b.queries)?;
    drop(store);
    eprintln!(
        "bench search: hosting {}s alone, beside a searcher and beside a follower",
        b.seconds
    );
    let (off, first_search_alone) = hosting(
        work.join("hosting-off"),
        options,
        b.seconds,
        Beside::Nothing,
    )?;
    let (on, _) = hosting(
        work.join("hosting-on"),
        options,
        b.seconds,
        Beside::Searcher,
    )?;
    let (following, first_search_following) = hosting(
        work.join("hosting-following"),
        options,
        b.seconds,
        Beside::Follower,
    )?;
    if remove_after {
        std::fs::remove_dir_all(&work).ok();
    }
    let import_ratio = import_indexed / (import_indexed + index_build).max(f64::EPSILON);
    let report = Object::new()
        .with("sessions", b.sessions as i64)
        .with("events_per_session", b.events as i64)
        .with("indexed_messages", built.messages as i64)
        .with("filter", quantiles(&filters))
        .with("text", quantiles(&texts))
        .with("combined", quantiles(&combined))
        .with("import_s", import_plain)
        .with("import_indexed_s", import_indexed)
        .with("index_build_s", index_build)
        .with("hosting_batches_per_s_off", off)
        .with("hosting_batches_per_s_on", on)
        .with("hosting_batches_per_s_following", following)
        .with("first_search_after_hosting_alone_s", first_search_alone)
        .with(
            "first_search_after_hosting_following_s",
            first_search_following,
        )
        .with("index_bytes", built.bytes as i64)
        .with("store_bytes", store_bytes as i64)
        .with(
            "ratios",
            Value::Object(
                latency_ratios(&filters, &texts)
                    .with("import_with_index", import_ratio)
                    .with("hosting_with_index", on / off.max(f64::EPSILON))
                    .with("hosting_with_follower", following / off.max(f64::EPSILON))
                    .with(
                        "index_to_store",
                        built.bytes as f64 / (store_bytes as f64).max(1.0),
                    ),
            ),
        );
    print(report, b.json)
}

/// `bench search --store PATH`: only the queries, against an existing store.
fn run_on_store(path: &Path, b: &SearchBench, options: &Options) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(b.queries > 0, "bench search needs queries above 0");
    let store = Store::open(path, options.clone())
        .with_context(|| format!("opening the store at {}", path.display()))?;
    let t = Instant::now();
    let first = store.search(&SearchQuery::default())?;
    let catch_up = t.elapsed().as_secs_f64();
    let (filters, texts, combined) = queries(&store, b.queries)?;
    let report = Object::new()
        .with("store", path.display().to_string().as_str())
        .with("watermark", first.watermark.position as i64)
        .with("catch_up_s", catch_up)
        .with("filter", quantiles(&filters))
        .with("text", quantiles(&texts))
        .with("combined", quantiles(&combined))
        .with("ratios", Value::Object(latency_ratios(&filters, &texts)));
    print(report, b.json)
}

/// A histogram's p50 and p99 in milliseconds.
fn quantiles(h: &Histogram) -> Value {
    Value::Object(
        Object::new()
            .with("p50_ms", ms(h.quantile(0.5)))
            .with("p99_ms", ms(h.quantile(0.99))),
    )
}

/// The latency targets over the measured p99s (at least 1 where met): filter queries within
/// 50 ms, text queries within 100 ms.
fn latency_ratios(filters: &Histogram, texts: &Histogram) -> Object {
    Object::new()
        .with(
            "filter_p99_target",
            50.0 / ms(filters.quantile(0.99)).max(f64::EPSILON),
        )
        .with(
            "text_p99_target",
            100.0 / ms(texts.quantile(0.99)).max(f64::EPSILON),
        )
}

fn print(report: Object, json: bool) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match json {
        true => json_line(&mut out, report)?,
        false => writeln!(
            out,
            "{}",
            sessionlog_codec::json::stringify(&Value::Object(report))
        )?,
    }
    Ok(ExitCode::SUCCESS)
}
