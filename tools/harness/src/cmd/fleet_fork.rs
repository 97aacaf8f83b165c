//! `sessionlog-harness bench fork --cluster`: what a fork costs in the fleet, where the child is
//! DSH's whole fork file (its seed batch copies the inherited events into PostgreSQL) instead
//! of the embedded store's shared prefix. On a throwaway PostgreSQL 15 (`fsync` on), one host
//! imports a generated session of `events` events; then, per round, in alternating order: the
//! fleet's fork of it after its last `turn/end` (catch-up check, the engine's fork file, the
//! child's commit to PostgreSQL and the local write), the embedded store's fork of the same
//! parent (O(1)), and the fleet's import of the same child file under another id (the same
//! bytes committed without working the fork out). Medians over the rounds; the child's bytes
//! in PostgreSQL.

use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use sessionlog_cluster::{Fleet, FleetOptions};
use sessionlog_codec::json::{Object, Value};
use sessionlog_engine::{Durability, ImportOptions, Options, Store};
use sessionlog_harness::gen::{session_bytes, GenOptions};
use sessionlog_harness::hosting::fleet::fleet_postgres;
use sessionlog_tools_common::output::json_line;

use super::lineage::last_turn_end;
use super::s3_export::median;

pub fn run(events: u64, forks: u64, as_json: bool) -> anyhow::Result<ExitCode> {
    let (work, _) = crate::cmd::work_dir(None, "fleet-fork");
    let result = measure(&work, events, forks);
    std::fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    let (figures, summary) = result?;
    let mut out = std::io::stdout().lock();
    match as_json {
        true => json_line(&mut out, figures)?,
        false => writeln!(out, "{summary}")?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The JSON figures, and a line for people.
fn measure(work: &std::path::Path, events: u64, forks: u64) -> anyhow::Result<(Object, String)> {
    let (postgres, config) = fleet_postgres()?;
    let options = Options {
        durability: Durability::Buffered,
        ..Options::default()
    };
    let fleet = Fleet::open(
        work.join("host"),
        config,
        FleetOptions {
            store: options.clone(),
            ..FleetOptions::new("a")
        },
    )?;
    let embedded = Store::open(work.join("embedded"), options)?;
    let opts = GenOptions {
        sessions: 1,
        events_per_session: events,
        seed: 5,
        torn_fraction: 0.0,
    };
    let file = session_bytes(0, &opts);
    let path = work.join("parent.jsonl");
    std::fs::write(&path, &file)?;
    let parent = embedded
        .import_path(&path, &ImportOptions::default(), &mut |_| {})?
        .id;
    let t = Instant::now();
    fleet.import("parent.jsonl", &file)?;
    let import_parent_s = t.elapsed().as_secs_f64();
    let parent_events = embedded.summary(&parent)?.events;
    let boundary = last_turn_end(&embedded, &parent)?;
    let (mut fleet_s, mut embedded_s, mut copy_s) = (Vec::new(), Vec::new(), Vec::new());
    let mut child_bytes = 0;
    for round in 0..forks {
        let child = format!("{parent}-fork-{round}");
        let fleet_first = round % 2 == 0;
        let mut fleet_fork = || -> anyhow::Result<()> {
            let t = Instant::now();
            fleet.fork(&parent, boundary, &child)?;
            fleet_s.push(t.elapsed().as_secs_f64());
            Ok(())
        };
        if fleet_first {
            fleet_fork()?;
        }
        let t = Instant::now();
        embedded.fork(&parent, boundary, &child)?;
        embedded_s.push(t.elapsed().as_secs_f64());
        if !fleet_first {
            fleet_fork()?;
        }
        let mut bytes = Vec::new();
        fleet.store().export(&child, None, &mut bytes)?;
        child_bytes = bytes.len();
        let copy = String::from_utf8(bytes)?.replacen(
            &format!("\"id\":\"{child}\""),
            &format!("\"id\":\"{child}-copy\""),
            1,
        );
        let t = Instant::now();
        fleet.import("child copy", copy.as_bytes())?;
        copy_s.push(t.elapsed().as_secs_f64());
        eprintln!(
            "round {round}: fleet fork {:.1} ms, embedded fork {:.3} ms, fleet import of the \
             child's file {:.1} ms ({child_bytes} bytes)",
            fleet_s[fleet_s.len() - 1] * 1e3,
            embedded_s[embedded_s.len() - 1] * 1e3,
            copy_s[copy_s.len() - 1] * 1e3
        );
    }
    let server = postgres
        .psql("SELECT version()")
        .unwrap_or_default()
        .trim()
        .to_owned();
    let (fleet_ms, embedded_ms, copy_ms) = (
        median(&mut fleet_s) * 1e3,
        median(&mut embedded_s) * 1e3,
        median(&mut copy_s) * 1e3,
    );
    // Higher is better: each peer's time over the fleet fork's.
    let ratios = Object::new()
        .with("embedded_fork_over_fleet_fork", embedded_ms / fleet_ms)
        .with("fleet_import_over_fleet_fork", copy_ms / fleet_ms);
    let summary = format!(
        "parent {parent_events} events: fleet fork {fleet_ms:.1} ms (child {child_bytes} bytes \
         in PostgreSQL), embedded fork {embedded_ms:.3} ms, fleet import of the child's file \
         {copy_ms:.1} ms"
    );
    let figures = Object::new()
        .with("workload", "fleet-fork")
        .with("server", server.as_str())
        .with("parent_events", parent_events as f64)
        .with("parent_bytes", file.len() as f64)
        .with("parent_import_ms", import_parent_s * 1e3)
        .with("rounds", forks as f64)
        .with("child_bytes", child_bytes as f64)
        .with("fleet_fork_ms", fleet_ms)
        .with("embedded_fork_ms", embedded_ms)
        .with("fleet_import_of_child_ms", copy_ms)
        .with("ratios", Value::Object(ratios));
    Ok((figures, summary))
}
