//! The store's metrics as Prometheus reads them: after a hosting run (the benchmark's driver on
//! sessionlog, 4 threads, sessions running out and starting afresh mid-run; V0 and V4 sessions)
//! the exposition is parsed by Prometheus's own Python parser (`prometheus_client.parser`, PyPI
//! `prometheus-client`, which `./x test` installs when missing). Every family must have its help
//! and type and follow Prometheus's naming conventions, histograms must be well formed, and the
//! counters must equal exactly what the run acknowledged: appends, events, JSONL bytes and
//! sessions created.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use sessionlog::codec::json::{parse, Value};
use sessionlog::engine::Options;
use sessionlog_harness::gen::{GenOptions, LogFormat};
use sessionlog_harness::hosting::sessionlog::SessionlogHost;
use sessionlog_harness::hosting::{self, FeedPool, Workload};

use crate::fixtures::checkout;

/// One metric family as the parser returned it.
#[derive(Debug)]
struct Family {
    kind: String,
    help: String,
    samples: Vec<Sample>,
}

/// One sample of a family.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Whether python3 can import Prometheus's parser. Under CI it must: `./x test` installs it.
fn parser_available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import prometheus_client.parser"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but python3 cannot import prometheus_client (./x test installs it)"
        );
        eprintln!("note: python3 cannot import prometheus_client (./x test installs it); skipped");
    }
    ok
}

/// `text` parsed by Prometheus's Python parser, by family name.
fn parse_exposition(text: &str, dir: &Path) -> BTreeMap<String, Family> {
    let file = dir.join("metrics.prom");
    std::fs::write(&file, text).expect("write the exposition");
    let out = Command::new("python3")
        .arg(checkout().join("tests/prometheus_parse.py"))
        .arg(&file)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "Prometheus's parser refused the exposition: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed = parse(std::str::from_utf8(&out.stdout).expect("UTF-8")).expect("JSON");
    let text_of = |v: &Value, key: &str| {
        v.as_object()
            .and_then(|o| o.get(key))
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("{key} in {v:?}"))
            .to_owned()
    };
    let mut families = BTreeMap::new();
    for f in parsed.as_array().expect("an array of families") {
        let samples = f
            .as_object()
            .and_then(|o| o.get("samples"))
            .and_then(Value::as_array)
            .expect("samples")
            .iter()
            .map(|s| Sample {
                name: text_of(s, "name"),
                labels: s
                    .as_object()
                    .and_then(|o| o.get("labels"))
                    .and_then(Value::as_object)
                    .expect("labels")
                    .iter()
                    .map(|(k, v)| (k.to_string_lossy(), v.as_str().expect("label").to_owned()))
                    .collect(),
                value: s
                    .as_object()
                    .and_then(|o| o.get("value"))
                    .and_then(Value::as_f64)
                    .expect("value"),
            })
            .collect();
        let family = Family {
            kind: text_of(f, "type"),
            help: text_of(f, "help"),
            samples,
        };
        assert!(
            families.insert(text_of(f, "name"), family).is_none(),
            "a family named twice in\n{text}"
        );
    }
    families
}

/// The value of the unlabelled sample `sample` of family `name`.
fn value(families: &BTreeMap<String, Family>, name: &str, sample: &str) -> f64 {
    families
        .get(name)
        .and_then(|f| f.samples.iter().find(|s| s.name == sample))
        .map(|s| s.value)
        .unwrap_or_else(|| panic!("no sample {sample} in family {name}"))
}

/// Prometheus's conventions and a histogram's shape, family by family: every family has help
/// and a type (the parser calls a sample of no declared family `untyped`), is named
/// `sessionlog_…`, a counter's samples end in `_total`, a gauge's never do, and a histogram's
/// `le` buckets are cumulative up to `+Inf`, which equals its `_count`.
fn check_conventions(families: &BTreeMap<String, Family>) {
    for (name, f) in families {
        assert!(name.starts_with("sessionlog_"), "{name}");
        assert!(!f.help.is_empty(), "{name} has no help");
        match f.kind.as_str() {
            "counter" => assert!(
                f.samples.iter().all(|s| s.name == format!("{name}_total")),
                "{name}: {f:?}"
            ),
            "gauge" => assert!(!name.ends_with("_total"), "{name}"),
            "histogram" => check_histogram(name, f),
            other => panic!("{name} is typed {other}"),
        }
    }
}

/// One labelled series of a histogram: its `(le, cumulative count)` buckets and its `_count`.
#[derive(Default)]
struct Series {
    buckets: Vec<(f64, f64)>,
    count: Option<f64>,
}

fn check_histogram(name: &str, f: &Family) {
    let mut series: BTreeMap<Vec<(String, String)>, Series> = BTreeMap::new();
    for s in &f.samples {
        let mut labels = s.labels.clone();
        let le = labels.remove("le");
        let entry = series.entry(labels.into_iter().collect()).or_default();
        match (s.name.strip_prefix(name), le) {
            (Some("_bucket"), Some(le)) => {
                let bound = match le.as_str() {
                    "+Inf" => f64::INFINITY,
                    other => other.parse().expect("a numeric le"),
                };
                entry.buckets.push((bound, s.value));
            }
            (Some("_count"), None) => entry.count = Some(s.value),
            (Some("_sum"), None) => {}
            _ => panic!("{name}: unexpected sample {s:?}"),
        }
    }
    for (labels, Series { buckets, count }) in series {
        assert!(
            buckets
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
            "{name}{labels:?}: buckets not cumulative: {buckets:?}"
        );
        assert_eq!(buckets.last().map(|b| b.0), Some(f64::INFINITY), "{name}");
        assert_eq!(buckets.last().map(|b| b.1), count, "{name}{labels:?}");
    }
}

#[test]
fn a_hosting_runs_exposition_parses_and_counts_exactly_what_was_acknowledged() {
    if !parser_available() {
        return;
    }
    for format in [LogFormat::V0, LogFormat::V4] {
        let dir = tempfile::tempdir().expect("temp dir");
        let opts = GenOptions {
            events_per_session: 150,
            torn_fraction: 0.0,
            ..GenOptions::default()
        };
        let workload = Workload {
            sessions: 24,
            threads: 4,
            duration: Duration::from_millis(1500),
            ..Workload::default()
        };
        let pool = FeedPool::generate(workload.sessions, &opts, format).expect("feeds");
        let host = SessionlogHost::open(&dir.path().join("store"), Options::default())
            .expect("open the store");
        let run = hosting::run(&host, &pool, &workload, None).expect("hosting run");
        let text = host.metrics().expect("metrics").to_prometheus();
        let families = parse_exposition(&text, dir.path());
        check_conventions(&families);

        let counter = |name: &str| value(&families, name, &format!("{name}_total"));
        assert!(run.batches > 0 && run.sessions_started > 0, "{run:?}");
        assert_eq!(counter("sessionlog_appends"), run.batches as f64);
        assert_eq!(counter("sessionlog_appended_events"), run.events as f64);
        assert_eq!(counter("sessionlog_appended_bytes"), run.bytes as f64);
        assert_eq!(
            counter("sessionlog_sessions_created"),
            (workload.sessions as u64 + run.sessions_started) as f64
        );
        let refused = &families["sessionlog_append_refusals"];
        assert_eq!(refused.samples.len(), 6);
        assert!(
            refused.samples.iter().all(|s| s.value == 0.0),
            "{refused:?}"
        );
        // Every append went through the group-commit queue, synced (the default durability):
        // the writes carried them all, and each write is one observation of the group sizes.
        let writes = counter("sessionlog_commit_writes");
        assert_eq!(counter("sessionlog_commit_synced_writes"), writes);
        assert_eq!(
            value(
                &families,
                "sessionlog_commit_group_appends",
                "sessionlog_commit_group_appends_sum"
            ),
            run.batches as f64
        );
        assert_eq!(
            value(
                &families,
                "sessionlog_commit_group_appends",
                "sessionlog_commit_group_appends_count"
            ),
            writes
        );
        let events_cf = families["sessionlog_rocksdb_memtable_bytes"]
            .samples
            .iter()
            .find(|s| s.labels.get("cf").map(String::as_str) == Some("events"))
            .map(|s| s.value);
        assert!(events_cf.is_some_and(|v| v > 0.0), "{events_cf:?}");
    }
}
