//! The store handle, the engine's second layer, and the only code that touches RocksDB: opening
//! it (`open.rs`, with the tuned options of `tuning.rs`), committing through the group-commit
//! queue (`commit.rs`), maintenance (`maintenance.rs`: flushes, compactions, sizes), the
//! metrics it reports (`metrics.rs`: the write path's counters and RocksDB's figures), and the
//! primitives every layer above needs: the one metadata reader, session segments and lineage,
//! snapshots, bounded iterators and the one forward-scan helper ([`visit`]). The caches it holds
//! are plain types that do not know the store (`session_cache.rs`, `successor_cache.rs`,
//! `projection_registry.rs`).
//!
//! Invariant: the RocksDB handle is private to this module and its files, so every change goes
//! through [`commit::Batch`] and the queue, and every read through the methods here.

mod commit;
mod commit_hook;
mod dir_lock;
mod direct_io;
mod feed;
mod maintenance;
mod metrics;
mod open;
mod projection_registry;
pub(crate) mod search_index;
mod session_cache;
mod successor_cache;
#[cfg(test)]
mod test_seam;
mod tuning;
mod wal_audit;

pub use commit_hook::{CommitHook, CommitRecord, CreatedSession};
pub use direct_io::supported as direct_io_supported;
#[cfg(test)]
pub(crate) use feed::RECENT_EVENTS;
pub use feed::SECONDARY_POLL;
pub(crate) use feed::{Mark, Waker};

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use rocksdb::{ColumnFamily, DBRawIteratorWithThreadMode, SnapshotWithThreadMode, DB};
use sessionlog_codec::format::header::Header;

pub(crate) use commit::{Batch, Part, Recorded, Recording, Sync};
pub(crate) use maintenance::BlobGc;

pub(crate) use projection_registry::Registry;
pub(crate) use session_cache::{
    lock_session, ProjectionCheckpoints, RelationRules, SeamReader, WriteLock, WriteState,
    WriteStateCache,
};
pub(crate) use successor_cache::SuccessorCache;

use crate::error::{Error, Result};
use crate::layout::counter;
use crate::layout::keys::{self, CF_EVENTS, CF_SESSIONS};
use crate::layout::meta::{SessionCounters, SessionMeta};
use crate::metrics::Recorder;
use crate::options::Options;

/// A raw RocksDB iterator over the store.
pub(crate) type RawIter<'a> = DBRawIteratorWithThreadMode<'a, DB>;

/// A consistent view of the store at one moment ([`Store::snapshot`]).
pub(crate) type Snapshot<'a> = SnapshotWithThreadMode<'a, DB>;

/// What [`visit`] calls with each entry (key, value); `false` stops the scan.
pub(crate) type VisitEntry<'f> = dyn FnMut(&[u8], &[u8]) -> Result<bool> + 'f;

/// A visitor of every record of a kind: (id, stored value).
type VisitRecord<'f> = dyn FnMut(&[u8], &[u8]) -> Result<()> + 'f;

/// An open sessionlog store: one RocksDB database holding any number of sessions, shared by
/// every thread of a host (`Store` is `Send + Sync`; hosts hold it in an `Arc`).
///
/// Its methods live beside the code they drive, so they are spread over the engine's layers;
/// this is their map, by concern (a test keeps it complete):
///
/// | concern | methods | file |
/// |---|---|---|
/// | open | [`open`](Store::open), [`open_reader`](Store::open_reader), [`open_beside`](Store::open_beside), [`reopen_beside`](Store::reopen_beside) | `ops/open.rs` |
/// | the open store | [`path`](Store::path), [`direct_io`](Store::direct_io), [`is_secondary`](Store::is_secondary), [`catch_up`](Store::catch_up) | `store/open.rs` |
/// | durability, the commit queue | [`durability`](Store::durability), [`sync`](Store::sync), [`commit_stats`](Store::commit_stats), [`set_commit_hook`](Store::set_commit_hook) | `store/commit.rs` |
/// | live writes (group-committed) | [`append_many`](Store::append_many), [`append`](Store::append), [`create_session`](Store::create_session) | `ops/append/mod.rs` |
/// | first contact: one session at a time | [`create`](Store::create), [`read_events`](Store::read_events), [`export_bytes`](Store::export_bytes) | `ops/verbs.rs` |
/// | crash repair | [`repair`](Store::repair), [`resume`](Store::resume), [`cut_torn_tail`](Store::cut_torn_tail) | `ops/repair.rs` |
/// | import | [`import_path`](Store::import_path) | `ops/import/mod.rs` |
/// | | [`import_jsonl`](Store::import_jsonl) | `ops/import/jsonl.rs` |
/// | | [`import_zstd`](Store::import_zstd) | `ops/import/zstd.rs` |
/// | export | [`export`](Store::export), [`export_generation`](Store::export_generation), [`export_jsonl`](Store::export_jsonl) | `ops/export.rs` |
/// | | [`export_to_root`](Store::export_to_root), [`root_path`](Store::root_path), [`root_files`](Store::root_files) | `ops/root.rs` |
/// | | [`events_as_written`](Store::events_as_written) | `ops/events_as_written.rs` |
/// | point-in-time reads | [`events`](Store::events) | `read/events.rs` |
/// | | [`messages_at`](Store::messages_at), [`surface_at`](Store::surface_at), [`transcript`](Store::transcript) | `read/surface.rs` |
/// | | [`state_at`](Store::state_at) | `read/checkpoints.rs` |
/// | | [`event_kinds`](Store::event_kinds) | `ops/kinds.rs` |
/// | | [`request`](Store::request), [`check_request`](Store::check_request), [`dispatch_point`](Store::dispatch_point) | `ops/request.rs` |
/// | live feeds | [`subscribe`](Store::subscribe), [`subscription_stats`](Store::subscription_stats) | `ops/subscribe/mod.rs` |
/// | | [`subscribe_all`](Store::subscribe_all) | `ops/subscribe/all.rs` |
/// | message projections | [`register_message_projection`](Store::register_message_projection), [`remove_message_projection`](Store::remove_message_projection) | `read/message_projections.rs` |
/// | forks and lineage | [`fork`](Store::fork), [`fork_file`](Store::fork_file), [`lineage`](Store::lineage), [`stored_bytes`](Store::stored_bytes) | `ops/fork.rs` |
/// | migration to V4 | [`migrate`](Store::migrate), [`migrate_all`](Store::migrate_all) | `ops/migrate.rs` |
/// | listing | [`list_page`](Store::list_page), [`list`](Store::list), [`summary`](Store::summary), [`ids`](Store::ids) | `ops/list.rs` |
/// | retention | [`delete`](Store::delete), [`undelete`](Store::undelete), [`purge`](Store::purge), [`apply_recorded`](Store::apply_recorded), [`compact`](Store::compact) | `ops/retention.rs` |
/// | archive to object storage | [`archive_candidates`](Store::archive_candidates), [`archive_plan`](Store::archive_plan), [`commit_archive`](Store::commit_archive), [`archived_copy`](Store::archived_copy), [`restore_archived`](Store::restore_archived) | `ops/archive.rs` |
/// | finding sessions | [`search`](Store::search), [`reindex`](Store::reindex) | `ops/search/mod.rs` |
/// | checks and sizes | [`verify`](Store::verify) | `ops/verify.rs` |
/// | | [`file_bytes`](Store::file_bytes), [`column_family_bytes`](Store::column_family_bytes), [`settle`](Store::settle) | `store/maintenance.rs` |
/// | metrics | [`metrics`](Store::metrics) | `store/metrics.rs` |
///
/// A host without a thread per waiting append uses an [`AppendQueue`](crate::AppendQueue)
/// (`ops/append/queue.rs`), which calls [`append_many`](Store::append_many). A host that keeps
/// its session index caught up in the background starts an
/// [`IndexFollower`](crate::IndexFollower) (`ops/search/background.rs`), which catches the index
/// up as [`search`](Store::search) does.
pub struct Store {
    db: DB,
    pub(crate) options: Options,
    path: PathBuf,
    next_number: AtomicU64,
    /// Per-session write locks and the write state cached under them (`session_cache.rs`).
    pub(crate) write_states: WriteStateCache,
    /// Set after a failed durable write: the store refuses writes until reopened.
    pub(crate) poisoned: AtomicBool,
    /// Ids with an import in flight in this process: a second import of the same id waits for
    /// nothing and is refused, so two imports can never both create one id.
    claims: Mutex<HashSet<Vec<u8>>>,
    /// Registered message projections (`projection_registry.rs`).
    pub(crate) projection_registry: Registry,
    /// Successors of sessions read through migration (`successor_cache.rs`).
    pub(crate) successors: SuccessorCache,
    /// The group-commit queue every write goes through (`commit.rs`).
    commits: commit::CommitQueue,
    /// The write path's counters and histograms (`metrics.rs`).
    pub(crate) recorder: Recorder,
    /// The options RocksDB was opened with, kept for its statistics tickers (`metrics.rs`).
    statistics: rocksdb::Options,
    /// The block cache every column family shares.
    block_cache: rocksdb::Cache,
    /// Whether flush and compaction run with direct I/O (`Options::direct_io` where the
    /// filesystem takes it).
    direct_io: bool,
    /// The change log's next position and the signals that wake subscribers (`feed.rs`).
    feeds: feed::Feeds,
    /// A secondary instance's scratch directory, removed after `db` closes, and the MANIFEST
    /// its view holds to (`open.rs`); `None` for the primary.
    secondary: Option<open::Secondary>,
    /// The session index, opened on first use (`search_index.rs`, `ops/search/`).
    pub(crate) search: search_index::SearchSlot,
    /// The store's own directory lock (`dir_lock.rs`), released after `db` closes (fields drop
    /// in order); a secondary instance takes none.
    _dir_lock: Option<dir_lock::DirLock>,
}

/// One stretch of a session's log and the storage (session number) that holds it: a fork's
/// inherited prefix lives in its ancestors' ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    pub(crate) number: u64,
    pub(crate) from: u64,
    pub(crate) end: u64,
}

impl Segment {
    /// The last seq of this segment at or before `at`, or `None` when none of its events is.
    pub(crate) fn last_upto(&self, at: u64) -> Option<u64> {
        self.end
            .checked_sub(1)
            .map(|last| last.min(at))
            .filter(|&last| last >= self.from)
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Column family `name`'s handle.
    pub(crate) fn cf(&self, name: &str) -> Result<&ColumnFamily> {
        self.db.cf_handle(name).ok_or_else(|| Error::Corrupt {
            id: String::new(),
            detail: format!("column family {name} is missing"),
        })
    }

    /// A consistent view of the store as of now: reads at it see no later write.
    pub(crate) fn snapshot(&self) -> Snapshot<'_> {
        self.db.snapshot()
    }

    /// Make `ro` read as of `snap`, when given. A secondary instance (`open.rs`) reads without
    /// one: RocksDB's secondary mode takes no snapshot, and needs none, as it holds still
    /// between catch-ups, which run only at open and in [`Store::wait_for_wake`] on the thread
    /// that reads next (a secondary serves one follower or one command at a time).
    fn read_at(&self, ro: &mut rocksdb::ReadOptions, snap: Option<&Snapshot<'_>>) {
        if let (Some(snap), None) = (snap, &self.secondary) {
            ro.set_snapshot(snap);
        }
    }

    /// An iterator over column family `cf` that stops before `upper` (exclusive).
    pub(crate) fn iter_below(&self, cf: &str, upper: Vec<u8>) -> Result<RawIter<'_>> {
        let mut ro = rocksdb::ReadOptions::default();
        ro.set_iterate_upper_bound(upper);
        Ok(self.db.raw_iterator_cf_opt(self.cf(cf)?, ro))
    }

    /// An iterator over the whole of column family `cf`, across sessions (the prefix extractor
    /// ignored), for scans that step from one session's range to the next.
    pub(crate) fn iter_all(&self, cf: &str) -> Result<RawIter<'_>> {
        let mut ro = rocksdb::ReadOptions::default();
        ro.set_total_order_seek(true);
        Ok(self.db.raw_iterator_cf_opt(self.cf(cf)?, ro))
    }

    /// Read options bounded to one session's range (prefix-seek on its session number).
    pub(crate) fn bounded(&self, number: u64) -> rocksdb::ReadOptions {
        let mut ro = rocksdb::ReadOptions::default();
        ro.set_iterate_upper_bound(keys::session_end(number));
        ro.set_prefix_same_as_start(true);
        ro
    }

    /// Metadata of `id`, if stored (as of `snap`, when given). The one reader of `S` records.
    pub(crate) fn read_meta(
        &self,
        id: &[u8],
        snap: Option<&Snapshot<'_>>,
    ) -> Result<Option<SessionMeta>> {
        let got = self.get_at(CF_SESSIONS, &keys::meta_key(id), snap, || {
            format!("reading session \"{}\"", String::from_utf8_lossy(id))
        })?;
        match got {
            Some(bytes) => {
                let meta = SessionMeta::decode(id, &bytes)?;
                self.with_counters(meta, snap).map(Some)
            }
            None => Ok(None),
        }
    }

    /// `meta`, read from its `S` record, with its counters record's counters where one is
    /// stored (as of `snap`, when given): see `layout::meta` for why they are apart.
    fn with_counters(
        &self,
        mut meta: SessionMeta,
        snap: Option<&Snapshot<'_>>,
    ) -> Result<SessionMeta> {
        let key = keys::event_key(meta.number, keys::COUNTERS, 0);
        let got = self.get_at(CF_EVENTS, &key, snap, || {
            format!("reading the counters of session \"{}\"", meta.id_lossy())
        })?;
        if let Some(bytes) = got {
            let counters = SessionCounters::decode(&bytes)
                .map_err(|e| meta.corrupt(format!("session counters {e}")))?;
            meta.apply_counters(counters);
        }
        Ok(meta)
    }

    /// The value of `key` in column family `cf` as of `snap` (the latest without one); `what`
    /// names the read in an error, and is formatted only then.
    pub(crate) fn get_at(
        &self,
        cf: &str,
        key: &[u8],
        snap: Option<&Snapshot<'_>>,
        what: impl FnOnce() -> String,
    ) -> Result<Option<rocksdb::DBPinnableSlice<'_>>> {
        let mut ro = rocksdb::ReadOptions::default();
        self.read_at(&mut ro, snap);
        self.db
            .get_pinned_cf_opt(self.cf(cf)?, key, &ro)
            .map_err(|source| Error::storage(what())(source))
    }

    /// Metadata of `id`, if stored.
    pub(crate) fn meta(&self, id: &[u8]) -> Result<Option<SessionMeta>> {
        self.read_meta(id, None)
    }

    /// Metadata of `id`, whose bytes are in the store: `UnknownSession`, or `Archived` for a
    /// session whose bytes are in object storage. Every read or write of a session's ranges
    /// starts here (or at [`Store::meta_at`]).
    pub(crate) fn require_meta(&self, id: &[u8]) -> Result<SessionMeta> {
        self.require_record(id)?.held()
    }

    /// Metadata of `id`, archived or not, or `UnknownSession`: for what reads no range
    /// (listing, lineage, archive and restore themselves).
    pub(crate) fn require_record(&self, id: &[u8]) -> Result<SessionMeta> {
        self.meta(id)?.ok_or_else(|| unknown(id))
    }

    /// Metadata of `id` as of `snap`, whose bytes are in the store (see
    /// [`Store::require_meta`]).
    pub(crate) fn meta_at(&self, id: &[u8], snap: &Snapshot<'_>) -> Result<SessionMeta> {
        self.record_at(id, snap)?.held()
    }

    /// Metadata of `id` as of `snap`, archived or not, or `UnknownSession`.
    pub(crate) fn record_at(&self, id: &[u8], snap: &Snapshot<'_>) -> Result<SessionMeta> {
        self.read_meta(id, Some(snap))?.ok_or_else(|| unknown(id))
    }

    /// Visit every session's metadata in id order, as of one snapshot.
    pub(crate) fn for_each_meta(
        &self,
        each: &mut dyn FnMut(&SessionMeta) -> Result<()>,
    ) -> Result<()> {
        let snap = self.db.snapshot();
        self.for_each_meta_record(&snap, &mut |id, v| {
            each(&self.with_counters(SessionMeta::decode(id, v)?, Some(&snap))?)
        })
    }

    /// Every stored session's id, in id order, its metadata unread (`verify` reads each one
    /// itself, so that unreadable metadata is that session's problem).
    pub(crate) fn session_ids(&self) -> Result<Vec<Vec<u8>>> {
        let snap = self.db.snapshot();
        let mut ids = Vec::new();
        self.for_each_meta_record(&snap, &mut |id, _| {
            ids.push(id.to_vec());
            Ok(())
        })?;
        Ok(ids)
    }

    /// Visit every `S` record (id, stored value) in id order, as of `snap`.
    fn for_each_meta_record(&self, snap: &Snapshot<'_>, each: &mut VisitRecord<'_>) -> Result<()> {
        let mut ro = rocksdb::ReadOptions::default();
        self.read_at(&mut ro, Some(snap));
        let mut it = self.db.raw_iterator_cf_opt(self.cf(CF_SESSIONS)?, ro);
        it.seek([keys::META_TAG]);
        visit(&mut it, "listing sessions".into(), &mut |k, v| {
            let Some((&keys::META_TAG, id)) = k.split_first() else {
                return Ok(false);
            };
            each(id, v)?;
            Ok(true)
        })
    }

    /// Where `meta`'s events live, in seq order; an archived session's live nowhere in the store,
    /// and is refused (every logical read of a range goes through here).
    pub(crate) fn segments(&self, meta: &SessionMeta) -> Result<Vec<Segment>> {
        if let Some(copy) = &meta.archived {
            return Err(Error::Archived {
                id: meta.id_lossy(),
                location: copy.location(),
            });
        }
        let own_from = meta.fork_of.as_ref().map_or(0, |b| b.seed);
        let mut segs = match &meta.fork_of {
            None => Vec::new(),
            Some(base) => {
                let parent = self.require_meta(&base.id)?;
                let mut inherited = self.segments(&parent)?;
                inherited.retain_mut(|s| {
                    s.end = s.end.min(base.seed);
                    s.from < s.end
                });
                inherited
            }
        };
        segs.push(Segment {
            number: meta.number,
            from: own_from,
            end: meta.events,
        });
        Ok(segs)
    }

    /// Ids of the forks reading session `number`'s prefix.
    pub(crate) fn children(&self, number: u64) -> Result<Vec<Vec<u8>>> {
        let prefix = keys::fork_prefix(number);
        let mut out = Vec::new();
        let mut it = self.db.raw_iterator_cf(self.cf(CF_SESSIONS)?);
        it.seek(&prefix);
        visit(&mut it, "reading lineage".into(), &mut |k, v| {
            if !k.starts_with(&prefix) {
                return Ok(false);
            }
            out.push(v.to_vec());
            Ok(true)
        })?;
        Ok(out)
    }

    /// Visit every record of `section` in `cf` with seq ≤ `at`, in seq order, across `meta`'s
    /// segments (a fork's inherited records from its ancestors' storage); `what` names the read
    /// in errors (`reading {what} of "id"`).
    pub(crate) fn scan_records(
        &self,
        meta: &SessionMeta,
        (cf, section): (&str, u8),
        at: u64,
        what: &str,
        each: &mut dyn FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<()> {
        for seg in self.segments(meta)? {
            let Some(last) = seg.last_upto(at) else {
                continue;
            };
            let mut it = self.session_iter_cf(cf, seg.number)?;
            it.seek(keys::event_key(seg.number, section, seg.from));
            let context = format!("reading {what} of \"{}\"", meta.id_lossy());
            visit(
                &mut it,
                context,
                &mut |k, v| match keys::parse_event_key(k) {
                    Some((_, s, seq)) if s == section && seq <= last => {
                        each(seq, v)?;
                        Ok(true)
                    }
                    _ => Ok(false),
                },
            )?;
        }
        Ok(())
    }

    /// A raw iterator over `cf` bounded to one session's range.
    pub(crate) fn session_iter_cf(&self, cf: &str, number: u64) -> Result<RawIter<'_>> {
        Ok(self
            .db
            .raw_iterator_cf_opt(self.cf(cf)?, self.bounded(number)))
    }

    /// A raw iterator bounded to one session's `events` range.
    pub(crate) fn session_iter(&self, number: u64) -> Result<RawIter<'_>> {
        self.session_iter_cf(CF_EVENTS, number)
    }

    /// An iterator for a whole-session scan (export, verify), reading at `snap` when given: it
    /// reads ahead, and does not fill the block cache, so one-off scans do not evict the blocks
    /// queries keep hot.
    pub(crate) fn scan_iter_at(
        &self,
        number: u64,
        snap: Option<&Snapshot<'_>>,
    ) -> Result<RawIter<'_>> {
        self.scan_iter_cf_at(CF_EVENTS, number, snap)
    }

    /// [`Store::scan_iter_at`] over column family `cf`.
    pub(crate) fn scan_iter_cf_at(
        &self,
        cf: &str,
        number: u64,
        snap: Option<&Snapshot<'_>>,
    ) -> Result<RawIter<'_>> {
        let mut ro = self.bounded(number);
        self.read_at(&mut ro, snap);
        ro.set_readahead_size(2 << 20);
        ro.fill_cache(false);
        Ok(self.db.raw_iterator_cf_opt(self.cf(cf)?, ro))
    }

    /// Refuse writes after a failed durable write (until the store is reopened).
    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.secondary.is_some() {
            Err(Error::ReadOnly {
                path: self.path.clone(),
            })
        } else if self.poisoned.load(Ordering::SeqCst) {
            Err(Error::Poisoned)
        } else {
            Ok(())
        }
    }

    /// The next session number to be allocated: it moves whenever a session is created.
    pub(crate) fn number_watermark(&self) -> u64 {
        self.next_number.load(Ordering::SeqCst)
    }

    /// Reserve a fresh session number (never reused, even if the import fails).
    pub(crate) fn allocate_number(&self) -> u64 {
        self.next_number.fetch_add(1, Ordering::SeqCst)
    }

    /// The counter operand to merge in after allocating `number` (see `layout::counter`).
    pub(crate) fn counter_after(&self, number: u64) -> [u8; 8] {
        counter::encode(self.next_number.load(Ordering::SeqCst).max(number + 1))
    }

    /// Claim `id` for an import; `None` when another import in this process holds it. The claim
    /// is released when the returned guard drops, also when the import panics.
    pub(crate) fn claim(&self, id: &[u8]) -> Option<Claim<'_>> {
        self.claimed().insert(id.to_vec()).then(|| Claim {
            store: self,
            id: id.to_vec(),
        })
    }

    /// Claim a new session's id (see [`Store::claim`]) for `source_name`: refused as a duplicate
    /// while another import or creation holds it, or when a session of that id is stored.
    pub(crate) fn claim_new(&self, source_name: &str, header: &Header) -> Result<Claim<'_>> {
        let id = header.id.as_wtf8();
        let duplicate = || Error::DuplicateSession {
            source_name: source_name.into(),
            id: header.id.to_string_lossy(),
        };
        let claim = self.claim(id).ok_or_else(duplicate)?;
        match self.meta(id)? {
            Some(_) => Err(duplicate()),
            None => Ok(claim),
        }
    }

    /// The claimed ids. The lock is held only for one insert or remove, which a panic elsewhere
    /// cannot leave half-done, so a poisoned lock still holds the true set.
    fn claimed(&self) -> std::sync::MutexGuard<'_, HashSet<Vec<u8>>> {
        self.claims
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The stored session counter (0 in a new store).
    pub(crate) fn read_counter(&self) -> Result<u64> {
        let cf = self.cf(CF_SESSIONS)?;
        let got = self
            .db
            .get_cf(cf, keys::COUNTER_KEY)
            .map_err(Error::storage("reading the session counter"))?;
        match got {
            None => Ok(0),
            Some(v) => counter::decode(&v).ok_or_else(|| Error::Corrupt {
                id: String::new(),
                detail: format!("session counter is {} bytes, not 8", v.len()),
            }),
        }
    }

    /// The highest session number with an `N ‖ number` key, if any session is stored.
    pub(crate) fn highest_session_number(&self) -> Result<Option<u64>> {
        let mut it = self.db.raw_iterator_cf(self.cf(CF_SESSIONS)?);
        it.seek_for_prev(keys::number_key(u64::MAX));
        let found = it.key().and_then(keys::parse_number_key);
        it.status()
            .map_err(Error::storage("reading the highest session number"))?;
        Ok(found)
    }
}

/// Visit the entries from the iterator's position on, in key order, while `each(key, value)`
/// returns true; then check the iterator's status (`context` names the read in its error), so
/// a read that fails midway is an error, never a short answer. Every forward scan goes through
/// here.
pub(crate) fn visit(
    it: &mut RawIter<'_>,
    context: String,
    each: &mut VisitEntry<'_>,
) -> Result<()> {
    while it.valid() {
        let (Some(k), Some(v)) = (it.key(), it.value()) else {
            break;
        };
        if !each(k, v)? {
            break;
        }
        it.next();
    }
    it.status().map_err(Error::storage(context))
}

/// The error of a session that is not stored.
fn unknown(id: &[u8]) -> Error {
    Error::UnknownSession {
        id: String::from_utf8_lossy(id).into_owned(),
    }
}

/// An import's claim on an id (see [`Store::claim`]), released on drop.
pub(crate) struct Claim<'s> {
    store: &'s Store,
    id: Vec<u8>,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.store.claimed().remove(&self.id);
    }
}
