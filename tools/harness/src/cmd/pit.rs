//! `sessionlog-harness bench pit`: "what did the model see at seq N" on sessions of growing size.
//!
//! Three ways to answer, on the same session and the same random seqs:
//! - sessionlog: `messages_at(N)` from the surface index (nearest snapshot, then the ops after);
//! - replay: read events 0..=N from the store and fold them (what a store without an index does);
//! - DSH: read the session's JSONL file, parse and decode every line, fold the prefix (what DSH
//!   does today: it only knows the latest state, so any older point means a full load).
//!
//! The peers are slow on large sessions, so they answer fewer queries there; every figure says
//! how many samples it took. Ratios are peer p50 ÷ sessionlog p50 (higher is better).
//!
//! `--format v4` runs the same on DSH 0.2's format (V4 rules for all three; projection state
//! is served for V0 sessions only, so its figure is then absent).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use sessionlog_codec::format::rows::decode_line;
use sessionlog_codec::json::{self, JsString, Object, Value};
use sessionlog_codec::rules::surface::{replay_with, SurfaceModel};
use sessionlog_engine::{ImportOptions, Options, Store};
use sessionlog_harness::gen::{
    host_options, session_bytes, session_v4_each, GenOptions, LogFormat,
};
use sessionlog_tools_common::output::json_line;

/// The generator writes V0 sessions, whose chunk events V4 folds away: about this many V0
/// events make one V4 event (measured on generated sessions: 23–27), so a V4 session of `size`
/// events is generated from a V0 one this many times longer.
const V0_EVENTS_PER_V4_EVENT: u64 = 24;

/// Queries the peers answer per size: enough for a p50, bounded in time.
fn peer_queries(events: u64, queries: u64) -> u64 {
    match events {
        0..=20_000 => queries.min(50),
        20_001..=200_000 => queries.min(10),
        _ => queries.min(3),
    }
}

/// Latency percentiles of a sample, in microseconds.
struct Latency {
    samples: usize,
    p50_us: f64,
    p99_us: f64,
}

fn latency(mut d: Vec<Duration>) -> Latency {
    d.sort_unstable();
    let at = |q: f64| {
        d.get(((d.len() as f64 * q) as usize).min(d.len().saturating_sub(1)))
            .map_or(0.0, |x| x.as_secs_f64() * 1e6)
    };
    Latency {
        samples: d.len(),
        p50_us: at(0.5),
        p99_us: at(0.99),
    }
}

/// The figures, or `null` for a measurement not taken.
fn latency_json(l: &Latency) -> Value {
    if l.samples == 0 {
        return Value::Null;
    }
    Value::Object(
        Object::new()
            .with("samples", l.samples as i64)
            .with("p50_us", l.p50_us)
            .with("p99_us", l.p99_us),
    )
}

/// A deterministic stream of seqs in `0..n`.
fn seqs(n: u64, count: u64, seed: u64) -> Vec<u64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..count)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n.max(1)
        })
        .collect()
}

pub fn run(
    sizes: &[u64],
    queries: u64,
    format: LogFormat,
    compact: bool,
    dir: Option<PathBuf>,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let (model, version) = match format {
        LogFormat::V0 => (SurfaceModel::V0, 0),
        LogFormat::V4 => (SurfaceModel::V4, 4),
    };
    let (work, remove_after) = crate::cmd::work_dir(dir, "pit");
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let store = Store::open(work.join("store"), host_options(Options::default()))?;
    let mut rows = Vec::new();
    let mut out = std::io::stdout().lock();
    for (i, &size) in sizes.iter().enumerate() {
        let opts = GenOptions {
            sessions: 1,
            events_per_session: match format {
                LogFormat::V0 => size,
                LogFormat::V4 => size * V0_EVENTS_PER_V4_EVENT,
            },
            seed: 77 + i as u64,
            torn_fraction: 0.0,
        };
        let bytes = session_file(&opts, format);
        let file = work.join(format!("session-{size}.v{version}.jsonl"));
        std::fs::write(&file, &bytes)?;
        let report = store.import_path(&file, &ImportOptions::default(), &mut |_| {})?;
        let (id, events) = (report.id, report.events);
        if compact {
            store.compact()?;
        }
        eprintln!(
            "pit: session of {events} events ({} MB)",
            bytes.len() / 1_000_000
        );

        let mut ours = Vec::new();
        for n in seqs(events, queries, 1) {
            let t = Instant::now();
            let m = store.messages_at(&id, Some(n))?;
            ours.push(t.elapsed());
            std::hint::black_box(m);
        }
        let mut state = Vec::new();
        for n in seqs(events, queries, 3)
            .into_iter()
            .filter(|_| version == 0)
        {
            let t = Instant::now();
            let v = store.state_at(&id, "tokenUsage", Some(n))?;
            state.push(t.elapsed());
            std::hint::black_box(v);
        }
        let peer_n = seqs(events, peer_queries(events, queries), 2);
        let mut from_store = Vec::new();
        for &n in &peer_n {
            let t = Instant::now();
            let mut prefix = Vec::with_capacity(n as usize + 1);
            store.events(&id, 0, Some(n), &mut |_, e| {
                prefix.push(e.clone());
                Ok(())
            })?;
            let m = replay_with(model, &prefix)?.messages;
            from_store.push(t.elapsed());
            std::hint::black_box(m);
        }
        let mut dsh = Vec::new();
        for &n in &peer_n {
            let t = Instant::now();
            let m = dsh_load_and_fold(&file, version, model, n)?;
            dsh.push(t.elapsed());
            std::hint::black_box(m);
        }
        let (ours, state, from_store, dsh) = (
            latency(ours),
            latency(state),
            latency(from_store),
            latency(dsh),
        );
        if !as_json {
            writeln!(
                out,
                "{events:>9} events  messages_at p50 {:>8.1} us p99 {:>8.1} us  state_at p50 {:>8.1} us p99 {:>8.1} us  replay p50 {:>11.1} us  dsh-load p50 {:>11.1} us  ({:.0}x, {:.0}x)",
                ours.p50_us,
                ours.p99_us,
                state.p50_us,
                state.p99_us,
                from_store.p50_us,
                dsh.p50_us,
                from_store.p50_us / ours.p50_us,
                dsh.p50_us / ours.p50_us
            )?;
        }
        rows.push((events, ours, state, from_store, dsh));
    }
    drop(store);
    if remove_after {
        std::fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    }
    if as_json {
        let sizes: Vec<Value> = rows
            .iter()
            .map(|(events, ours, state, replay, dsh)| {
                Value::Object(
                    Object::new()
                        .with("events", *events as i64)
                        .with("sessionlog_messages_at", latency_json(ours))
                        .with("sessionlog_state_at_tokenUsage", latency_json(state))
                        .with("replay_from_store", latency_json(replay))
                        .with("dsh_load_and_fold", latency_json(dsh)),
                )
            })
            .collect();
        let mut ratios = Object::new();
        for (events, ours, _, replay, dsh) in &rows {
            ratios.insert(
                JsString::from(format!("vs_replay_{events}")),
                (replay.p50_us / ours.p50_us).into(),
            );
            ratios.insert(
                JsString::from(format!("vs_dsh_load_{events}")),
                (dsh.p50_us / ours.p50_us).into(),
            );
        }
        if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
            ratios = ratios.with(
                "flatness_smallest_over_largest",
                first.1.p50_us / last.1.p50_us,
            );
        }
        let o = Object::new()
            .with("workload", "pit")
            .with("compacted", compact)
            .with("sizes", Value::Array(sizes))
            .with("ratios", Value::Object(ratios));
        json_line(&mut out, o)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Session 0 of `opts` as a file in `format`; V4 sessions are generated batch by batch, so a
/// session of millions of events never has all its events in memory at once.
fn session_file(opts: &GenOptions, format: LogFormat) -> Vec<u8> {
    match format {
        LogFormat::V0 => session_bytes(0, opts),
        LogFormat::V4 => {
            let mut body = Vec::new();
            let (_, header) =
                session_v4_each(0, opts, &mut |b| body.extend_from_slice(b.text.as_bytes()));
            let mut bytes = header.into_bytes();
            bytes.push(b'\n');
            bytes.extend_from_slice(&body);
            bytes
        }
    }
}

/// DSH's path to an old point: read the whole file, parse and decode every line (by its
/// format's codec), fold the prefix.
fn dsh_load_and_fold(
    file: &std::path::Path,
    version: u32,
    model: SurfaceModel,
    n: u64,
) -> anyhow::Result<Vec<Value>> {
    let bytes = std::fs::read(file)?;
    let mut events = Vec::new();
    for line in bytes
        .split(|&b| b == b'\n')
        .skip(1)
        .filter(|l| !l.is_empty())
    {
        let value = json::parse(&String::from_utf8_lossy(line))?;
        let seq = events.len() as u64;
        events.extend(decode_line(value, version, seq).map_err(anyhow::Error::msg)?);
    }
    events.truncate(n as usize + 1);
    Ok(replay_with(model, &events)?.messages)
}
