//! Maintenance: flushing memtables, compacting ranges or the whole store, and the sizes of its
//! files. Admin operations (`purge`, `compact`, `bench space`) decide when; this file does it.

use rocksdb::{BottommostLevelCompaction, CompactOptions, WaitForCompactOptions};

use super::tuning::{last_level_settings, LastLevel};
use super::Store;
use crate::error::{Error, Result};
use crate::layout::keys::{self, ALL_CFS, CF_EVENTS, CF_SESSIONS, SESSION_RANGE_CFS};

/// Blob garbage collection of the `events` column family, set around a full compaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlobGc {
    /// Every blob file's live blobs are relocated, so the files holding garbage are dropped
    /// (also for a store opened without `Options::blob_files` that holds blob files from an
    /// earlier open with it).
    Full,
    /// Off, as the store runs: appends make no garbage (`tuning.rs`).
    Off,
}

impl BlobGc {
    fn settings(self) -> &'static [(&'static str, &'static str)] {
        match self {
            BlobGc::Full => &[
                ("enable_blob_garbage_collection", "true"),
                ("blob_garbage_collection_age_cutoff", "1.0"),
            ],
            BlobGc::Off => &[("enable_blob_garbage_collection", "false")],
        }
    }
}

impl Store {
    /// Flush every memtable, so SST sizes describe all the data.
    pub(crate) fn flush_all(&self) -> Result<()> {
        for name in ALL_CFS {
            self.db
                .flush_cf(self.cf(name)?)
                .map_err(Error::storage("flushing memtables"))?;
        }
        Ok(())
    }

    /// Flush, then compact away what is stored under each of `numbers` (purged sessions), so
    /// their space is returned now rather than by later compactions.
    pub(crate) fn compact_numbers(&self, numbers: &[u64]) -> Result<()> {
        self.db
            .flush_cf(self.cf(CF_SESSIONS)?)
            .map_err(Error::storage("flushing after a purge"))?;
        for name in SESSION_RANGE_CFS {
            let cf = self.cf(name)?;
            self.db
                .flush_cf(cf)
                .map_err(Error::storage("flushing after a purge"))?;
            for &number in numbers {
                self.db.compact_range_cf(
                    cf,
                    Some(keys::session_start(number)),
                    Some(keys::session_end(number)),
                );
            }
        }
        Ok(())
    }

    /// Flush and compact every column family to its last level, written for keeps
    /// ([`LastLevel::Archive`]), with `events`' blob garbage collection set to `gc` for the
    /// compaction; both are set back after it, failed or not.
    pub(crate) fn compact_all(&self, gc: BlobGc) -> Result<()> {
        self.flush_all()?;
        let mut every_level = CompactOptions::default();
        every_level.set_bottommost_level_compaction(BottommostLevelCompaction::Force);
        let compacted = self
            .set_blob_gc(gc)
            .and_then(|()| self.set_last_level(LastLevel::Archive))
            .and_then(|()| {
                for name in ALL_CFS {
                    self.db.compact_range_cf_opt(
                        self.cf(name)?,
                        None::<&[u8]>,
                        None::<&[u8]>,
                        &every_level,
                    );
                }
                Ok(())
            });
        let restored = self
            .set_last_level(LastLevel::Running)
            .and(self.set_blob_gc(BlobGc::Off));
        compacted.and(restored)
    }

    /// Set how every column family writes its last level from now on.
    pub(super) fn set_last_level(&self, mode: LastLevel) -> Result<()> {
        for name in ALL_CFS {
            let settings = last_level_settings(name, mode);
            let pairs: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (*k, v.as_str())).collect();
            self.db
                .set_options_cf(self.cf(name)?, &pairs)
                .map_err(Error::storage("setting how the last level is written"))?;
        }
        Ok(())
    }

    /// Set the `events` column family's blob garbage collection.
    fn set_blob_gc(&self, gc: BlobGc) -> Result<()> {
        self.db
            .set_options_cf(self.cf(CF_EVENTS)?, gc.settings())
            .map_err(Error::storage("setting blob garbage collection"))
    }

    /// Wait until the store is at rest: every memtable flushed, no flush or compaction queued
    /// or running. After a bulk import the store keeps flushing and compacting for a while; a
    /// bulk export or a read benchmark that starts then shares the disk and the cores with that
    /// work.
    pub fn settle(&self) -> Result<()> {
        let mut options = WaitForCompactOptions::default();
        options.set_flush(true);
        self.db
            .wait_for_compact(&options)
            .map_err(Error::storage("waiting for flushes and compactions"))
    }

    /// The store's live SST and blob file bytes, over all column families (memtables and the
    /// WAL not counted).
    pub fn file_bytes(&self) -> Result<u64> {
        Ok(self.column_family_bytes()?.iter().map(|(_, n)| n).sum())
    }

    /// The live SST and blob file bytes of each column family, by name.
    pub fn column_family_bytes(&self) -> Result<Vec<(&'static str, u64)>> {
        let mut sizes = Vec::with_capacity(ALL_CFS.len());
        for name in ALL_CFS {
            let mut total = 0;
            for property in ["rocksdb.live-sst-files-size", "rocksdb.live-blob-file-size"] {
                total += self
                    .db
                    .property_int_value_cf(self.cf(name)?, property)
                    .map_err(Error::storage("reading SST and blob file sizes"))?
                    .unwrap_or(0);
            }
            sizes.push((name, total));
        }
        Ok(sizes)
    }
}
