//! What `sessionlog-harness bench hosting` prints: one JSON object (raw figures per system and the
//! `ratios` map) or a table, both from the same [`Report`]s.
//!
//! Ratios are taken in the same run, higher is better: `vs_<peer>` is sessionlog's durable
//! batches/s over the peer's, `cpu_vs_<peer>` the peer's process CPU per durable batch over
//! sessionlog's, `store_cpu_vs_<peer>` the same without the host's feed (the CPU the host threads
//! spent building the events, the same work for every system). They need a report named
//! `"sessionlog"`, and are `null`, with a `note`, without one. A fleet of H host processes
//! (`fleet_hH`) also gets `fleet_hH_vs_pg_rows` and `fleet_hH_vs_embedded`: its durable
//! batches/s over the straightforward PostgreSQL store's and over the embedded store's. Per
//! system the CPU per batch (all of it, the feed's, the rest; for a system with a server, the
//! server's too) and per event are printed, and, when the run was inside a disk cgroup
//! ([`DiskModel`]), the device write requests per batch.

use std::fmt::Write as _;

use sessionlog_codec::json::{JsString, Object, Value};

use super::{millis, Durability, FeedPool, Report, Workload};
use crate::gen::LogFormat;

/// Name of sessionlog's report, the numerator of every ratio.
pub const SESSIONLOG: &str = "sessionlog";
/// How the name of a fleet's report starts (the host processes' count follows).
pub const FLEET_PREFIX: &str = "fleet_h";
/// The name of the straightforward PostgreSQL store's report.
pub const PG_ROWS: &str = "pg_rows";
/// Printed when no sessionlog report is present.
pub const NO_SESSIONLOG: &str = "sessionlog was not among the reports: peers only, no ratios";

/// The disk a run's data directory was on, as the benchmark modelled it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskModel {
    /// The whole disk, `major:minor`.
    pub device: String,
    /// The cgroup hierarchy counting (and limiting) its writes: `"v1"` or `"v2"`.
    pub cgroup: &'static str,
    /// The write-IOPS limit, or `None` for the raw disk (writes only counted).
    pub write_iops: Option<u64>,
}

/// The run's figures as one JSON object.
pub fn figures(
    workload: &Workload,
    durability: Durability,
    pool: &FeedPool,
    disk: Option<&DiskModel>,
    reports: &[Report],
) -> Object {
    let (batches_per_session, events_per_batch) = pool.shape();
    let mut systems = Object::new();
    for r in reports {
        systems.insert(JsString::from(r.system.as_str()), Value::Object(system(r)));
    }
    let mut o = Object::new()
        .with("workload", "hosting")
        .with("sessions", workload.sessions as i64)
        .with("threads", workload.threads as i64)
        .with("seconds", workload.duration.as_secs_f64())
        .with("warmup_seconds", workload.warmup.as_secs_f64())
        .with("durability", durability_name(durability))
        .with(
            "feed",
            Object::new()
                .with("pool", pool.len() as i64)
                .with(
                    "format",
                    match pool.format() {
                        LogFormat::V0 => "v0",
                        LogFormat::V4 => "v4",
                    },
                )
                .with("batches_per_session", batches_per_session)
                .with("events_per_batch", events_per_batch),
        )
        .with(
            "disk",
            disk.map_or(Value::Null, |d| {
                Value::Object(
                    Object::new()
                        .with("device", d.device.as_str())
                        .with("cgroup", d.cgroup)
                        .with(
                            "write_iops",
                            d.write_iops.map_or(Value::Null, |n| Value::from(n as i64)),
                        ),
                )
            }),
        )
        .with("systems", systems);
    o = match ratios(reports) {
        Some(r) => o.with("ratios", r),
        None => o.with("ratios", Value::Null).with("note", NO_SESSIONLOG),
    };
    o
}

/// The figures of `rounds` runs of every system (each round: sessionlog, then the peers, each
/// alone) as one JSON object. With one round, [`figures`]. With more, `systems` holds each
/// figure's median over the rounds, `ratios` each ratio's median over the rounds (every ratio
/// taken within its round, so a noisy round moves both sides of it), and `rounds` every round's
/// own `systems` and `ratios`.
pub fn figures_over_rounds(
    workload: &Workload,
    durability: Durability,
    pool: &FeedPool,
    disk: Option<&DiskModel>,
    rounds: &[Vec<Report>],
) -> Object {
    let each: Vec<Object> = rounds
        .iter()
        .map(|reports| figures(workload, durability, pool, disk, reports))
        .collect();
    let [first, ..] = each.as_slice() else {
        return Object::new();
    };
    if each.len() == 1 {
        return first.clone();
    }
    let part = |key: &str| -> Vec<Value> {
        each.iter()
            .map(|o| o.get(key).cloned().unwrap_or(Value::Null))
            .collect()
    };
    let per_round: Vec<Value> = each
        .iter()
        .map(|o| {
            let field = |k: &str| o.get(k).cloned().unwrap_or(Value::Null);
            Value::Object(
                Object::new()
                    .with("systems", field("systems"))
                    .with("ratios", field("ratios")),
            )
        })
        .collect();
    let mut o = first.clone();
    o.insert(
        JsString::from_static("systems"),
        median_of(&part("systems")),
    );
    o.insert(JsString::from_static("ratios"), median_of(&part("ratios")));
    o.insert(JsString::from_static("rounds"), Value::Array(per_round));
    o
}

/// The median of `values` taken key by key: numbers give their median (the mean of the middle
/// two for an even count), objects recurse on the first one's keys, anything else (or a mix)
/// is the first value.
fn median_of(values: &[Value]) -> Value {
    match values.first() {
        Some(Value::Object(first)) => {
            let mut o = Object::new();
            for (key, _) in first.iter() {
                let column: Vec<Value> = values
                    .iter()
                    .map(|v| {
                        v.as_object()
                            .zip(key.as_str())
                            .and_then(|(o, k)| o.get(k))
                            .cloned()
                            .unwrap_or(Value::Null)
                    })
                    .collect();
                o.insert(key.clone(), median_of(&column));
            }
            Value::Object(o)
        }
        Some(Value::Number(_)) => {
            let mut xs: Vec<f64> = values.iter().filter_map(Value::as_f64).collect();
            if xs.len() != values.len() {
                return values[0].clone();
            }
            xs.sort_by(f64::total_cmp);
            let mid = xs.len() / 2;
            let median = if xs.len() % 2 == 1 {
                xs[mid]
            } else {
                (xs[mid - 1] + xs[mid]) / 2.0
            };
            Value::from(median)
        }
        Some(other) => other.clone(),
        None => Value::Null,
    }
}

/// A per-batch figure of a report, if known.
type PerBatch = fn(&Report) -> Option<f64>;

/// The CPU ratios: each name's prefix (the peer's name follows), the per-batch figure it divides
/// (the peer's over sessionlog's), and how the table words it.
const CPU_RATIOS: [(&str, PerBatch, &str); 2] = [
    ("cpu_vs_", Report::cpu_us_per_batch, "less CPU per batch"),
    (
        "store_cpu_vs_",
        Report::store_cpu_us_per_batch,
        "less CPU per batch beyond the host's feed",
    ),
];

/// `{"vs_<peer>": sessionlog batches/s ÷ peer batches/s, "cpu_vs_<peer>": peer CPU per batch ÷
/// sessionlog CPU per batch, "store_cpu_vs_<peer>": the same beyond the host's feed}` (the CPU
/// ratios where both CPU times are known), then each fleet's `"fleet_hH_vs_pg_rows"` and
/// `"fleet_hH_vs_embedded"` (its batches/s over theirs, where they ran), if sessionlog was
/// measured.
pub fn ratios(reports: &[Report]) -> Option<Object> {
    let ours = reports.iter().find(|r| r.system == SESSIONLOG)?;
    let peers = || reports.iter().filter(|r| r.system != SESSIONLOG);
    let rate = |a: &Report, b: &Report| a.batches_per_s() / b.batches_per_s().max(1e-9);
    let mut o = Object::new();
    for peer in peers() {
        o.insert(
            JsString::from(format!("vs_{}", peer.system)),
            rate(ours, peer).into(),
        );
    }
    let pg_rows = reports.iter().find(|r| r.system == PG_ROWS);
    for fleet in reports
        .iter()
        .filter(|r| r.system.starts_with(FLEET_PREFIX))
    {
        for (peer, label) in [(pg_rows, PG_ROWS), (Some(ours), "embedded")] {
            if let Some(peer) = peer {
                o.insert(
                    JsString::from(format!("{}_vs_{label}", fleet.system)),
                    rate(fleet, peer).into(),
                );
            }
        }
    }
    for (prefix, per_batch, _) in CPU_RATIOS {
        for peer in peers() {
            if let Some((theirs, ours)) = per_batch(peer).zip(per_batch(ours)) {
                o.insert(
                    JsString::from(format!("{prefix}{}", peer.system)),
                    (theirs / ours.max(1e-9)).into(),
                );
            }
        }
    }
    Some(o)
}

/// `x` as a JSON number, or `null`.
fn optional(x: Option<f64>) -> Value {
    x.map_or(Value::Null, Value::from)
}

fn system(r: &Report) -> Object {
    let secs = r.wall.as_secs_f64().max(1e-9);
    Object::new()
        .with("batches", r.batches as i64)
        .with("events", r.events as i64)
        .with("bytes", r.bytes as i64)
        .with("sessions_started", r.sessions_started as i64)
        .with("wall_seconds", r.wall.as_secs_f64())
        .with(
            "cpu_seconds",
            r.cpu.map_or(Value::Null, |c| Value::from(c.as_secs_f64())),
        )
        .with("cpu_us_per_batch", optional(r.cpu_us_per_batch()))
        .with("feed_cpu_us_per_batch", r.feed_cpu_us_per_batch())
        .with(
            "store_cpu_us_per_batch",
            optional(r.store_cpu_us_per_batch()),
        )
        .with("cpu_us_per_event", optional(r.cpu_us_per_event()))
        .with(
            "server_cpu_us_per_batch",
            optional(r.server_cpu_us_per_batch()),
        )
        .with(
            "device_writes",
            r.device_writes
                .map_or(Value::Null, |w| Value::from(w as i64)),
        )
        .with(
            "device_writes_per_batch",
            optional(r.device_writes_per_batch()),
        )
        .with("device_writes_per_s", optional(r.device_writes_per_s()))
        .with("batches_per_s", r.batches_per_s())
        .with("events_per_s", r.events_per_s())
        .with("mb_per_s", r.bytes as f64 / 1e6 / secs)
        .with("p50_ms", millis(r.latency.quantile(0.5)))
        .with("p99_ms", millis(r.latency.quantile(0.99)))
        .with("mean_ms", millis(r.latency.mean()))
        .with("max_ms", millis(r.latency.max()))
}

/// The run's figures as a table, one line per system, then the ratios (or the note).
pub fn table(
    workload: &Workload,
    durability: Durability,
    pool: &FeedPool,
    disk: Option<&DiskModel>,
    reports: &[Report],
) -> String {
    let (batches_per_session, events_per_batch) = pool.shape();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "hosting: {} sessions, {} threads, {:.1} s after {:.1} s unmeasured, durability {}; {} \
         generated sessions replayed ({batches_per_session:.0} batches each, \
         {events_per_batch:.1} events/batch)",
        workload.sessions,
        workload.threads,
        workload.duration.as_secs_f64(),
        workload.warmup.as_secs_f64(),
        durability_name(durability),
        pool.len(),
    );
    let _ = match disk {
        Some(DiskModel {
            device,
            cgroup,
            write_iops: Some(n),
        }) => writeln!(
            s,
            "disk {device} limited to {n} write IOPS (cgroup {cgroup} block throttle)"
        ),
        Some(DiskModel { device, cgroup, .. }) => writeln!(
            s,
            "disk {device} raw (writes counted by a cgroup {cgroup} block throttle)"
        ),
        None => writeln!(s, "disk raw (device writes not counted)"),
    };
    let _ = writeln!(
        s,
        "{:<10} {:>10} {:>11} {:>7} {:>8} {:>8} {:>7} {:>9} {:>8} {:>9} {:>8} {:>9}",
        "system",
        "batches/s",
        "events/s",
        "MB/s",
        "p50 ms",
        "p99 ms",
        "cpu s",
        "batches",
        "cpu µs/b",
        "feed µs/b",
        "cpu µs/e",
        "dev w/b"
    );
    let dash = |x: Option<f64>, digits: usize| {
        x.map_or_else(|| "-".to_owned(), |x| format!("{x:.digits$}"))
    };
    for r in reports {
        let _ = writeln!(
            s,
            "{:<10} {:>10.1} {:>11.1} {:>7.2} {:>8.2} {:>8.2} {:>7} {:>9} {:>8} {:>9.1} {:>8} {:>9}",
            r.system,
            r.batches_per_s(),
            r.events_per_s(),
            r.bytes as f64 / 1e6 / r.wall.as_secs_f64().max(1e-9),
            millis(r.latency.quantile(0.5)),
            millis(r.latency.quantile(0.99)),
            dash(r.cpu.map(|c| c.as_secs_f64()), 2),
            r.batches,
            dash(r.cpu_us_per_batch(), 1),
            r.feed_cpu_us_per_batch(),
            dash(r.cpu_us_per_event(), 2),
            dash(r.device_writes_per_batch(), 2),
        );
    }
    for r in reports {
        if let Some(server) = r.server_cpu_us_per_batch() {
            let _ = writeln!(
                s,
                "{}: its server processes used {server:.1} µs of CPU per batch besides the host's",
                r.system
            );
        }
    }
    match ratios(reports) {
        Some(r) => ratio_lines(&mut s, &r, ""),
        None => {
            let _ = writeln!(s, "{NO_SESSIONLOG}");
        }
    }
    s
}

/// One line per ratio of `ratios`, each ending in `suffix`.
fn ratio_lines(s: &mut String, ratios: &Object, suffix: &str) {
    for (name, ratio) in ratios.iter() {
        let Some(x) = ratio.as_f64() else { continue };
        let name = name.to_string_lossy();
        let cpu = CPU_RATIOS
            .iter()
            .find_map(|&(prefix, _, what)| Some((name.strip_prefix(prefix)?, what)));
        let _ = match cpu {
            Some((peer, what)) => writeln!(s, "sessionlog vs_{peer}: {x:.2}x {what}{suffix}"),
            None if name.starts_with(FLEET_PREFIX) => {
                writeln!(s, "{name}: {x:.2}x batches/s{suffix}")
            }
            None => writeln!(s, "sessionlog {name}: {x:.2}x batches/s{suffix}"),
        };
    }
}

/// [`table`] for every round, then, with more than one, each ratio's median over the rounds.
pub fn table_over_rounds(
    workload: &Workload,
    durability: Durability,
    pool: &FeedPool,
    disk: Option<&DiskModel>,
    rounds: &[Vec<Report>],
) -> String {
    let mut s = String::new();
    for (k, reports) in rounds.iter().enumerate() {
        if rounds.len() > 1 {
            let _ = writeln!(s, "round {}/{}", k + 1, rounds.len());
        }
        s.push_str(&table(workload, durability, pool, disk, reports));
    }
    if rounds.len() > 1 {
        let all: Vec<Value> = rounds
            .iter()
            .filter_map(|r| ratios(r).map(Value::Object))
            .collect();
        if let Value::Object(median) = median_of(&all) {
            let suffix = format!(" (median of {} rounds)", rounds.len());
            ratio_lines(&mut s, &median, &suffix);
        }
    }
    s
}

fn durability_name(d: Durability) -> &'static str {
    match d {
        Durability::Sync => "sync",
        Durability::Buffered => "buffered",
    }
}
