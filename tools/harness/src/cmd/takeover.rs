//! `sessionlog-harness bench takeover`: what moving a session to a host with an empty disk costs.
//! On a throwaway PostgreSQL 15 (`fsync` on), host `a` creates one generated session per size
//! and appends it batch by batch, each batch committed to PostgreSQL as the hosting benchmark
//! commits them; then, per round, a host with an empty disk acquires each session by force
//! (taking it from the previous holder, whose lease is live) and so catches up from PostgreSQL:
//! the wall time of that acquisition, the batches and bytes it applied.
//!
//! Peers, in the same round and the same process: importing the session's exported JSONL (the
//! same bytes, from memory) into an empty store, the other way to build a host's copy of a
//! session; and reading the rows catching up reads (`COPY (SELECT …) TO STDOUT` of the
//! session's batches, to memory), what PostgreSQL alone takes to hand them over. The takeover
//! goes first in even rounds, last in odd ones; figures are medians over the rounds. Both copies
//! are checked byte-identical to host `a`'s export.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{ensure, Context};
use postgres::NoTls;
use sessionlog_cluster::{Config, Fleet, FleetOptions};
use sessionlog_codec::json::{JsString, Object, Value};
use sessionlog_engine::{ImportOptions, Options, Store};
use sessionlog_harness::gen::{host_options, session_feed, GenOptions, LogFormat, SessionFeed};
use sessionlog_harness::hosting::fleet::fleet_postgres;
use sessionlog_harness::hosting::sessionlog::append_built;
use sessionlog_tools_common::output::json_line;

use super::s3_export::median;

/// What one size measured in one round.
struct Round {
    takeover_s: f64,
    batches: u64,
    import_s: f64,
    read_s: f64,
}

/// Run the benchmark for sessions of about `sizes` events each, `rounds` times, every store
/// (the hosts' and the peer's) opened with `options` (the hosts' durability is PostgreSQL's).
pub fn run(
    sizes: &[u64],
    rounds: usize,
    options: Options,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    ensure!(rounds >= 1, "rounds must be at least 1");
    let (work, _) = crate::cmd::work_dir(None, "takeover");
    let result = measure(&work, sizes, rounds, &host_options(options));
    std::fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    let mut out = std::io::stdout().lock();
    let (figures, summary) = result?;
    if as_json {
        json_line(&mut out, figures)?;
    } else {
        out.write_all(summary.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Fill the fleet with one session per size, then take each over `rounds` times.
/// The JSON figures and a line per size for people.
fn measure(
    work: &Path,
    sizes: &[u64],
    rounds: usize,
    options: &Options,
) -> anyhow::Result<(Object, String)> {
    let (postgres, config) = fleet_postgres()?;
    let feeds: Vec<SessionFeed> = sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| feed_of(i as u64, size))
        .collect();
    let mut reader = postgres::Client::connect(&postgres.url("postgres", "postgres"), NoTls)
        .context("connecting to PostgreSQL as the superuser")?;
    let a = join(&work.join("a"), &config, "a", options)?;
    let mut expected = Vec::with_capacity(feeds.len());
    for feed in &feeds {
        let t = Instant::now();
        fill(&a, feed)?;
        eprintln!(
            "host a: {} events in {} batches committed in {:.1} s",
            feed.events(),
            feed.batches.len(),
            t.elapsed().as_secs_f64()
        );
        let mut bytes = Vec::new();
        a.store().export_jsonl(&feed.id, &mut bytes)?;
        expected.push(bytes);
    }
    drop(a);
    let mut measured: Vec<Vec<Round>> = feeds.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        let host = format!("b{round}");
        let b = join(&work.join(&host), &config, &host, options)?;
        let peer = Store::open(work.join(format!("import{round}")), options.clone())?;
        for ((feed, bytes), rows) in feeds.iter().zip(&expected).zip(&mut measured) {
            let takeover_first = round % 2 == 0;
            let mut r = Round {
                takeover_s: 0.0,
                batches: 0,
                import_s: 0.0,
                read_s: 0.0,
            };
            if takeover_first {
                (r.takeover_s, r.batches) = take_over(&b, &feed.id, bytes)?;
            }
            r.import_s = import(&peer, &feed.id, bytes)?;
            r.read_s = read_rows(
                &mut reader,
                &feed.id,
                bytes.len() - feed.header_line.len() - 1,
            )?;
            if !takeover_first {
                (r.takeover_s, r.batches) = take_over(&b, &feed.id, bytes)?;
            }
            eprintln!(
                "round {round}: {} events: takeover {:.1} ms ({} batches), import {:.1} ms, \
                 reading the rows {:.1} ms",
                feed.events(),
                r.takeover_s * 1e3,
                r.batches,
                r.import_s * 1e3,
                r.read_s * 1e3
            );
            rows.push(r);
        }
        drop(b);
        drop(peer);
        for dir in [host, format!("import{round}")] {
            std::fs::remove_dir_all(work.join(dir))?;
        }
    }
    let server = postgres
        .psql("SELECT version()")
        .unwrap_or_default()
        .trim()
        .to_owned();
    drop(reader);
    drop(postgres);
    let figures = Object::new()
        .with("workload", "takeover")
        .with("rounds", rounds as i64)
        .with("postgres", server.as_str());
    let mut sessions = Vec::new();
    let mut ratios = Object::new();
    let mut summary = String::new();
    for ((feed, bytes), rows) in feeds.iter().zip(&expected).zip(measured) {
        let takeover_s = median(&mut rows.iter().map(|r| r.takeover_s).collect::<Vec<_>>());
        let import_s = median(&mut rows.iter().map(|r| r.import_s).collect::<Vec<_>>());
        let read_s = median(&mut rows.iter().map(|r| r.read_s).collect::<Vec<_>>());
        let mb = bytes.len() as f64 / 1e6;
        let events = feed.events();
        sessions.push(Value::Object(
            Object::new()
                .with("events", events as i64)
                .with("batches_applied", rows[0].batches as i64)
                .with("bytes_applied", bytes.len() as i64)
                .with("takeover_ms", takeover_s * 1e3)
                .with("catch_up_mb_per_s", mb / takeover_s)
                .with("import_ms", import_s * 1e3)
                .with("import_mb_per_s", mb / import_s)
                .with("read_rows_ms", read_s * 1e3)
                .with("read_rows_mb_per_s", mb / read_s)
                .with(
                    "takeover_ms_per_round",
                    Value::Array(rows.iter().map(|r| (r.takeover_s * 1e3).into()).collect()),
                )
                .with(
                    "import_ms_per_round",
                    Value::Array(rows.iter().map(|r| (r.import_s * 1e3).into()).collect()),
                )
                .with(
                    "read_rows_ms_per_round",
                    Value::Array(rows.iter().map(|r| (r.read_s * 1e3).into()).collect()),
                ),
        ));
        summary.push_str(&format!(
            "{events} events: takeover {:.1} ms ({} batches, {:.1} MB/s); import {:.1} ms ({:.1} MB/s); \
             reading the rows {:.1} ms\n",
            takeover_s * 1e3,
            rows[0].batches,
            mb / takeover_s,
            import_s * 1e3,
            mb / import_s,
            read_s * 1e3
        ));
        // Higher is better: above 1.0, taking the session over is faster than importing it.
        ratios.insert(
            JsString::from(format!("takeover_vs_import_{events}")),
            (import_s / takeover_s).into(),
        );
        // At most 1.0: the share of the takeover PostgreSQL's read of the rows alone takes.
        ratios.insert(
            JsString::from(format!("takeover_vs_read_rows_{events}")),
            (read_s / takeover_s).into(),
        );
    }
    let figures = figures
        .with("sessions", Value::Array(sessions))
        .with("ratios", Value::Object(ratios));
    Ok((figures, summary))
}

/// A generated session of at least `size` events (whole batches): the first batches of one
/// drawn at 1x to 3x of `size`.
fn feed_of(index: u64, size: u64) -> SessionFeed {
    let opts = GenOptions {
        sessions: 1,
        events_per_session: size * 2,
        seed: 52 + index,
        torn_fraction: 0.0,
    };
    let mut feed = session_feed(index, &opts, LogFormat::V0);
    let mut events = 0;
    let keep = feed
        .batches
        .iter()
        .position(|b| {
            events += b.events.len() as u64;
            events >= size
        })
        .map_or(feed.batches.len(), |i| i + 1);
    feed.batches.truncate(keep);
    feed
}

/// Host `host` of the fleet, its store in `dir` (empty) opened with `options`.
fn join(dir: &Path, config: &Config, host: &str, options: &Options) -> anyhow::Result<Fleet> {
    Ok(Fleet::open(
        dir,
        config.clone(),
        FleetOptions {
            store: options.clone(),
            ..FleetOptions::new(host)
        },
    )?)
}

/// Create `feed`'s session on `fleet` and append its batches one by one, each committed.
fn fill(fleet: &Fleet, feed: &SessionFeed) -> anyhow::Result<()> {
    for (i, batch) in feed.batches.iter().enumerate() {
        let header = (i == 0).then_some(feed.header_line.as_str());
        let item = append_built(&feed.id, batch.first_seq, batch.events.clone(), header)?;
        for result in fleet.append_many(vec![item]) {
            result.with_context(|| format!("appending batch {i} of {}", feed.id))?;
        }
    }
    Ok(())
}

/// Acquire `id` by force on `fleet` (catching up from PostgreSQL): seconds and batches applied,
/// the copy checked against `expected`.
fn take_over(fleet: &Fleet, id: &str, expected: &[u8]) -> anyhow::Result<(f64, u64)> {
    let t = Instant::now();
    let acquired = fleet.acquire(id, true)?;
    let seconds = t.elapsed().as_secs_f64();
    let mut bytes = Vec::with_capacity(expected.len());
    fleet.store().export_jsonl(id, &mut bytes)?;
    ensure!(
        bytes == expected,
        "host {}'s copy of {id} differs",
        fleet.host()
    );
    Ok((seconds, acquired.caught_up))
}

/// Read session `id`'s batch rows as catching up reads them (by root id and session id; a
/// session no fork made is its own root), with `COPY … TO STDOUT` into memory: seconds, once
/// checked to have carried at least the session's `body` bytes.
fn read_rows(client: &mut postgres::Client, id: &str, body: usize) -> anyhow::Result<f64> {
    let quoted = id.replace('\'', "''");
    let t = Instant::now();
    let mut out = client.copy_out(&format!(
        "COPY (SELECT batch, first_seq, bytes, crc FROM sessionlog.batches \
         WHERE root_id = '{quoted}' AND session_id = '{quoted}' ORDER BY batch) TO STDOUT (FORMAT binary)"
    ))?;
    let mut rows = Vec::new();
    std::io::Read::read_to_end(&mut out, &mut rows)?;
    let seconds = t.elapsed().as_secs_f64();
    ensure!(
        rows.len() >= body,
        "COPY of {id}'s rows carried too few bytes"
    );
    Ok(seconds)
}

/// Import `bytes` as session `id` into `store`: seconds, the copy checked against `bytes`.
fn import(store: &Store, id: &str, bytes: &[u8]) -> anyhow::Result<f64> {
    let t = Instant::now();
    let report = store.import_jsonl(
        &format!("{id}.jsonl"),
        bytes,
        &ImportOptions::default(),
        &mut |_| {},
    )?;
    let seconds = t.elapsed().as_secs_f64();
    let mut copy = Vec::with_capacity(bytes.len());
    store.export_jsonl(&report.id, &mut copy)?;
    ensure!(copy == bytes, "the imported copy of {id} differs");
    Ok(seconds)
}

#[cfg(test)]
mod tests {
    use super::feed_of;

    #[test]
    fn a_feed_is_the_fewest_whole_batches_reaching_its_size() {
        for size in [1, 2_000, 20_000] {
            let feed = feed_of(0, size);
            let last = feed.batches.last().map_or(0, |b| b.events.len() as u64);
            assert!(feed.events() >= size, "{} events for {size}", feed.events());
            assert!(feed.events() - last < size, "a batch too many for {size}");
            let seqs: Vec<u64> = feed.batches.iter().map(|b| b.first_seq).collect();
            let mut next = 0;
            for (batch, first) in feed.batches.iter().zip(seqs) {
                assert_eq!(first, next);
                next += batch.events.len() as u64;
            }
        }
    }
}
