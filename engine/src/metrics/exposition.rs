//! [`Metrics`] as Prometheus text exposition (format 0.0.4), encoded by the `prometheus-client`
//! crate: a `# HELP` and a `# TYPE` line per metric, every name under the `sessionlog_` prefix,
//! counters ending in `_total`, durations in `_seconds` and sizes in `_bytes`. The text holds no
//! `# EOF` line, so a host can append it to its own exposition.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::prometheus_text::encode;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use super::{ColumnFamilyMetrics, HistogramSnapshot, Metrics};

/// The prefix of every metric name.
const PREFIX: &str = "sessionlog";

impl Metrics {
    /// The metrics as Prometheus text exposition (`text/plain; version=0.0.4`), each with its
    /// help and type; `docs/METRICS.md` describes them.
    pub fn to_prometheus(&self) -> String {
        let mut registry = Registry::with_prefix(PREFIX);
        registry.register_collector(Box::new(Snapshot(self.clone())));
        let mut text = String::new();
        // Encoding into a String fails only if a collector fails, and this one only passes on
        // the String's own (infallible) writes.
        let _ = encode(&mut text, &registry);
        text
    }
}

/// The metrics of one scrape, handed to the registry.
#[derive(Debug)]
struct Snapshot(Metrics);

type Written = Result<(), std::fmt::Error>;

/// Writes metrics one descriptor at a time.
struct Out<'a, 'e>(&'a mut DescriptorEncoder<'e>);

impl Out<'_, '_> {
    fn counter(
        &mut self,
        name: &str,
        unit: Option<Unit>,
        help: &str,
        value: impl EncodeCounterValue,
    ) -> Written {
        self.0
            .encode_descriptor(name, help, unit.as_ref(), MetricType::Counter)?
            .encode_counter::<NoLabelSet, _, u64>(&value, None)
    }

    fn gauge(
        &mut self,
        name: &str,
        unit: Option<Unit>,
        help: &str,
        value: impl EncodeGaugeValue,
    ) -> Written {
        self.0
            .encode_descriptor(name, help, unit.as_ref(), MetricType::Gauge)?
            .encode_gauge(&value)
    }

    /// A counter with one series per value of `label`.
    fn counters_by(
        &mut self,
        name: &str,
        help: &str,
        label: &str,
        series: &[(&str, u64)],
    ) -> Written {
        let mut metric = self
            .0
            .encode_descriptor(name, help, None, MetricType::Counter)?;
        for &(value, count) in series {
            metric
                .encode_family(&[(label, value)])?
                .encode_counter::<NoLabelSet, _, u64>(&count, None)?;
        }
        Ok(())
    }

    /// A gauge with one series per column family.
    fn per_cf(
        &mut self,
        cfs: &[ColumnFamilyMetrics],
        name: &str,
        unit: Option<Unit>,
        help: &str,
        value: fn(&ColumnFamilyMetrics) -> u64,
    ) -> Written {
        let mut metric = self
            .0
            .encode_descriptor(name, help, unit.as_ref(), MetricType::Gauge)?;
        for cf in cfs {
            metric
                .encode_family(&[("cf", cf.name)])?
                .encode_gauge(&value(cf))?;
        }
        Ok(())
    }

    /// A histogram with one series per `(label, value)` pair given, or one unlabelled.
    fn histogram(
        &mut self,
        name: &str,
        unit: Option<Unit>,
        help: &str,
        series: &[(Option<(&str, &str)>, &HistogramSnapshot)],
    ) -> Written {
        let mut metric =
            self.0
                .encode_descriptor(name, help, unit.as_ref(), MetricType::Histogram)?;
        for (label, h) in series {
            match label {
                Some(pair) => metric
                    .encode_family(&[*pair])?
                    .encode_histogram::<NoLabelSet>(h.sum, h.count, &h.buckets, None)?,
                None => metric.encode_histogram::<NoLabelSet>(h.sum, h.count, &h.buckets, None)?,
            }
        }
        Ok(())
    }
}

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Written {
        let m = &self.0;
        let mut out = Out(&mut encoder);
        let (c, a, d) = (&m.commits, &m.appends, &m.commit_distributions);
        out.counter(
            "appends",
            None,
            "Session batches appended and acknowledged since the store opened (live appends and creations, each one session's DSH write batch).",
            c.appends,
        )?;
        out.counter(
            "appended_events",
            None,
            "Events in the acknowledged appends.",
            a.events,
        )?;
        out.counter(
            "appended",
            Some(Unit::Bytes),
            "JSONL bytes the acknowledged appends added to their sessions' logs (lines as DSH writes them, newlines included, before compression).",
            a.bytes,
        )?;
        out.counter(
            "sessions_created",
            None,
            "Sessions created by an append, with their first batch.",
            a.sessions_created,
        )?;
        let refused: Vec<(&str, u64)> = a.refused.iter().map(|&(r, n)| (r.label(), n)).collect();
        out.counters_by(
            "append_refusals",
            "Appends not acknowledged, by reason: rejected (a DSH append rule), stale_seq, not_appendable, unknown_session, duplicate_session, failed (the store's fault).",
            "reason",
            &refused,
        )?;
        out.counter(
            "write_state_cache_hits",
            None,
            "Appends whose session's write state (next seq, surface, projections) was in memory.",
            a.write_state_hits,
        )?;
        out.counter(
            "write_state_cache_misses",
            None,
            "Appends whose session's write state was read from the store first.",
            a.write_state_misses,
        )?;
        out.gauge(
            "open_sessions",
            None,
            "Sessions whose write lock and state are held in memory (bounded by the hot_sessions option).",
            a.open_sessions,
        )?;
        out.counter(
            "commit_writes",
            None,
            "RocksDB writes made by the group-commit queue (one WAL record each).",
            c.writes,
        )?;
        out.counter(
            "commit_synced_writes",
            None,
            "Group-commit writes fsynced before they returned.",
            c.synced_writes,
        )?;
        out.counter(
            "commit_batches",
            None,
            "Commits carried by the group-commit writes (each one call's changes, of one or more sessions).",
            c.batches,
        )?;
        out.counter(
            "commit",
            Some(Unit::Bytes),
            "Bytes the group-commit writes carried, in RocksDB's batch encoding (keys, values, record headers).",
            c.bytes,
        )?;
        out.histogram(
            "commit_group_batches",
            None,
            "Commits per group-commit write.",
            &[(None, &d.group_batches)],
        )?;
        out.histogram(
            "commit_group_appends",
            None,
            "Session batches appended per group-commit write (0 for a write without appends: imports, repairs, deletions).",
            &[(None, &d.group_appends)],
        )?;
        out.histogram(
            "commit",
            Some(Unit::Seconds),
            "Time from a commit's queueing to its return: its group's write and any write ahead of it.",
            &[(None, &d.commit_seconds)],
        )?;
        out.histogram(
            "commit_write",
            Some(Unit::Seconds),
            "Time of each group-commit write in RocksDB: WAL append, fsync when synced=\"true\", memtable inserts.",
            &[
                (Some(("synced", "true")), &d.synced_write_seconds),
                (Some(("synced", "false")), &d.unsynced_write_seconds),
            ],
        )?;
        out.gauge(
            "poisoned",
            None,
            "1 when the store refuses writes after a failed durable write (until it is reopened), else 0.",
            u64::from(m.poisoned),
        )?;
        let r = &m.rocksdb;
        out.counter(
            "rocksdb_write_stall",
            Some(Unit::Seconds),
            "Time writes spent slowed down or stopped by RocksDB since the store opened.",
            r.write_stall.as_secs_f64(),
        )?;
        out.gauge(
            "rocksdb_write_stopped",
            None,
            "1 while RocksDB stops writes (too many L0 files, memtables or pending compaction bytes), else 0.",
            u64::from(r.write_stopped),
        )?;
        out.gauge(
            "rocksdb_delayed_write_rate",
            Some(Unit::Other("bytes_per_second".into())),
            "The rate RocksDB slows writes to now; 0 when writes are not slowed.",
            r.delayed_write_rate,
        )?;
        out.gauge(
            "rocksdb_running_compactions",
            None,
            "Compactions running now.",
            r.running_compactions,
        )?;
        out.gauge(
            "rocksdb_running_flushes",
            None,
            "Memtable flushes running now.",
            r.running_flushes,
        )?;
        out.counter(
            "rocksdb_compaction_read",
            Some(Unit::Bytes),
            "Bytes compactions read since the store opened.",
            r.compaction_read_bytes,
        )?;
        out.counter(
            "rocksdb_compaction_written",
            Some(Unit::Bytes),
            "Bytes compactions wrote since the store opened.",
            r.compaction_written_bytes,
        )?;
        out.counter(
            "rocksdb_flush_written",
            Some(Unit::Bytes),
            "Bytes memtable flushes wrote since the store opened.",
            r.flush_written_bytes,
        )?;
        let cfs = &r.column_families;
        out.per_cf(
            cfs,
            "rocksdb_pending_compaction",
            Some(Unit::Bytes),
            "RocksDB's estimate of the bytes compaction must rewrite to bring every level within its target size (compaction debt), per column family.",
            |cf| cf.pending_compaction_bytes,
        )?;
        out.per_cf(
            cfs,
            "rocksdb_memtable",
            Some(Unit::Bytes),
            "Bytes in memtables (active and waiting to flush), per column family.",
            |cf| cf.memtable_bytes,
        )?;
        out.per_cf(
            cfs,
            "rocksdb_live_sst",
            Some(Unit::Bytes),
            "Bytes of live SST files, per column family.",
            |cf| cf.live_sst_bytes,
        )?;
        out.per_cf(
            cfs,
            "rocksdb_live_blob",
            Some(Unit::Bytes),
            "Bytes of live blob files (with blob files on), per column family.",
            |cf| cf.live_blob_bytes,
        )?;
        out.per_cf(
            cfs,
            "rocksdb_l0_files",
            None,
            "Files in level 0, per column family (writes slow down, then stop, as they pile up).",
            |cf| cf.l0_files,
        )?;
        out.counter(
            "rocksdb_block_cache_hits",
            None,
            "Block lookups answered by the block cache since the store opened.",
            r.block_cache_hits,
        )?;
        out.counter(
            "rocksdb_block_cache_misses",
            None,
            "Block lookups that read from the files since the store opened.",
            r.block_cache_misses,
        )?;
        out.gauge(
            "rocksdb_block_cache_usage",
            Some(Unit::Bytes),
            "Bytes held in the block cache.",
            r.block_cache_usage_bytes,
        )?;
        out.gauge(
            "rocksdb_block_cache_capacity",
            Some(Unit::Bytes),
            "The block cache's capacity.",
            r.block_cache_capacity_bytes,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ColumnFamilyMetrics, Metrics, RefusalReason};
    use crate::metrics::Recorder;

    fn sample() -> Metrics {
        let recorder = Recorder::default();
        recorder.committed(std::time::Duration::from_micros(700));
        recorder.refused(RefusalReason::StaleSeq, 1);
        Metrics {
            commits: recorder.commit_stats(),
            commit_distributions: recorder.commit_distributions(),
            appends: recorder.append_metrics(3),
            poisoned: false,
            rocksdb: super::super::RocksDbMetrics {
                column_families: vec![ColumnFamilyMetrics {
                    name: "events",
                    live_sst_bytes: 42,
                    ..ColumnFamilyMetrics::default()
                }],
                ..Default::default()
            },
        }
    }

    /// Every metric has its HELP and TYPE lines under its full name; counters end in `_total`,
    /// labelled series carry their labels, histograms their `le` buckets, `_sum` and `_count`.
    #[test]
    fn the_exposition_names_and_types_every_metric() {
        let text = sample().to_prometheus();
        for line in [
            "# TYPE sessionlog_appends_total counter",
            "# TYPE sessionlog_appended_bytes_total counter",
            "# TYPE sessionlog_commit_seconds histogram",
            "# TYPE sessionlog_open_sessions gauge",
            "sessionlog_open_sessions 3",
            "sessionlog_append_refusals_total{reason=\"stale_seq\"} 1",
            "sessionlog_append_refusals_total{reason=\"rejected\"} 0",
            "sessionlog_commit_seconds_bucket{le=\"0.001\"} 1",
            "sessionlog_commit_seconds_bucket{le=\"0.0005\"} 0",
            "sessionlog_commit_seconds_bucket{le=\"+Inf\"} 1",
            "sessionlog_commit_seconds_count 1",
            "sessionlog_commit_write_seconds_count{synced=\"true\"} 0",
            "sessionlog_rocksdb_live_sst_bytes{cf=\"events\"} 42",
            "sessionlog_rocksdb_write_stall_seconds_total 0.0",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        let types = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
        let helps = text.lines().filter(|l| l.starts_with("# HELP ")).count();
        assert_eq!(types, helps);
        assert!(!text.contains("# EOF"), "{text}");
    }
}
