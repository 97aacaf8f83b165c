//! The store's metrics ([`Store::metrics`]): the write path's counters as recorded
//! (`metrics::Recorder`), the write-state cache's size, and RocksDB's figures, read here because
//! only `store/` touches the handle: per-column-family properties (memtable, SST and blob bytes,
//! compaction debt, L0 files), DB-wide ones (stopped or slowed writes, running background jobs),
//! the block cache's usage, and the statistics tickers the store keeps (write stalls, block
//! cache hits, flush and compaction bytes).
//!
//! The tickers are RocksDB statistics at `ExceptHistogramOrTimers` (`open.rs`): per-core
//! counters, no timers and no histograms, so keeping them costs the write path next to nothing.

use std::sync::atomic::Ordering;
use std::time::Duration;

use rocksdb::statistics::Ticker;

use super::Store;
use crate::error::{Error, Result};
use crate::layout::keys::ALL_CFS;
use crate::metrics::{ColumnFamilyMetrics, Metrics, RocksDbMetrics};

impl Store {
    /// What the store has done since it opened and the state of its RocksDB instance now: see
    /// [`Metrics`], and [`Metrics::to_prometheus`] for the text Prometheus scrapes.
    pub fn metrics(&self) -> Result<Metrics> {
        Ok(Metrics {
            commits: self.recorder.commit_stats(),
            commit_distributions: self.recorder.commit_distributions(),
            appends: self.recorder.append_metrics(self.write_states.len() as u64),
            poisoned: self.poisoned.load(Ordering::SeqCst),
            rocksdb: self.rocksdb_metrics()?,
        })
    }

    fn rocksdb_metrics(&self) -> Result<RocksDbMetrics> {
        let ticker = |t: Ticker| self.statistics.get_ticker_count(t);
        let column_families = ALL_CFS
            .into_iter()
            .map(|name| {
                let property = |p: &str| self.cf_property(name, p);
                Ok(ColumnFamilyMetrics {
                    name,
                    memtable_bytes: property("rocksdb.cur-size-all-mem-tables")?,
                    live_sst_bytes: property("rocksdb.live-sst-files-size")?,
                    live_blob_bytes: property("rocksdb.live-blob-file-size")?,
                    pending_compaction_bytes: property(
                        "rocksdb.estimate-pending-compaction-bytes",
                    )?,
                    l0_files: property("rocksdb.num-files-at-level0")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let db = |p: &str| self.db_property(p);
        Ok(RocksDbMetrics {
            column_families,
            write_stall: Duration::from_micros(ticker(Ticker::StallMicros)),
            write_stopped: db("rocksdb.is-write-stopped")? != 0,
            delayed_write_rate: db("rocksdb.actual-delayed-write-rate")?,
            running_compactions: db("rocksdb.num-running-compactions")?,
            running_flushes: db("rocksdb.num-running-flushes")?,
            compaction_read_bytes: ticker(Ticker::CompactReadBytes),
            compaction_written_bytes: ticker(Ticker::CompactWriteBytes),
            flush_written_bytes: ticker(Ticker::FlushWriteBytes),
            block_cache_hits: ticker(Ticker::BlockCacheHit),
            block_cache_misses: ticker(Ticker::BlockCacheMiss),
            block_cache_usage_bytes: self.block_cache.get_usage() as u64,
            block_cache_capacity_bytes: self.options.block_cache_bytes as u64,
        })
    }

    /// Integer property `property` of column family `cf` (0 when RocksDB has none).
    fn cf_property(&self, cf: &str, property: &str) -> Result<u64> {
        Ok(self
            .db
            .property_int_value_cf(self.cf(cf)?, property)
            .map_err(Error::storage(format!("reading {property} of {cf}")))?
            .unwrap_or(0))
    }

    /// Integer property `property` of the whole database (0 when RocksDB has none).
    fn db_property(&self, property: &str) -> Result<u64> {
        Ok(self
            .db
            .property_int_value(property)
            .map_err(Error::storage(format!("reading {property}")))?
            .unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use crate::metrics::RefusalReason;
    use crate::test_support::{empty, ev};
    use crate::{AppendItem, SourceEncoding};

    fn prompt(n: u64) -> sessionlog_codec::format::event::NewEvent {
        ev(&format!(
            r#"{{"type":"user/message","data":{{"content":[],"source":{{"kind":"user"}},"role":"user","id":"u{n}"}},"surfaceOp":"append"}}"#
        ))
    }

    const HEADER: &str =
        r#"{"type":"session","version":0,"id":"m","createdAt":1,"cwd":"/w","delegationDepth":0}"#;

    /// The counters count what was acknowledged and what was refused, by reason; RocksDB's
    /// figures are read per column family.
    #[test]
    fn metrics_count_acknowledged_and_refused_appends() {
        let (_t, store) = empty();
        let created = store
            .append_many(vec![AppendItem::new("m", Some(0), vec![prompt(0)])
                .creating(HEADER, SourceEncoding::Jsonl)]);
        assert!(created.iter().all(Result::is_ok), "{created:?}");
        store
            .append("m", Some(1), vec![prompt(1), prompt(2)])
            .expect("append");
        let stale = store.append("m", Some(0), vec![prompt(3)]);
        assert!(stale.is_err());
        let unknown = store.append("nobody", None, vec![prompt(4)]);
        assert!(unknown.is_err());

        let m = store.metrics().expect("metrics");
        assert_eq!(m.commits.appends, 2);
        assert_eq!(m.appends.sessions_created, 1);
        assert_eq!(m.appends.events, 3);
        let mut log = Vec::new();
        store.export_jsonl("m", &mut log).expect("export");
        let header_len = HEADER.len() as u64 + 1;
        assert_eq!(m.appends.bytes, log.len() as u64 - header_len);
        let refused = |r| {
            m.appends
                .refused
                .iter()
                .find(|(reason, _)| *reason == r)
                .map(|&(_, n)| n)
        };
        assert_eq!(refused(RefusalReason::StaleSeq), Some(1));
        assert_eq!(refused(RefusalReason::UnknownSession), Some(1));
        assert_eq!(refused(RefusalReason::Rejected), Some(0));
        // The second append and the stale one found the state in memory (the first created
        // it); the unknown session's was looked for in the store. Both sessions' write locks
        // are held.
        assert_eq!(m.appends.write_state_hits, 2);
        assert_eq!(m.appends.write_state_misses, 1);
        assert_eq!(m.appends.open_sessions, 2);
        assert_eq!(m.commit_distributions.group_appends.count, m.commits.writes);
        assert_eq!(
            m.commit_distributions.commit_seconds.count,
            m.commits.batches
        );
        assert_eq!(m.rocksdb.column_families.len(), 4);
        let events = m
            .rocksdb
            .column_families
            .iter()
            .find(|cf| cf.name == "events")
            .expect("events");
        assert!(events.memtable_bytes > 0);
    }
}
