//! The store handle, the engine's second layer: opening it (column families, tuned RocksDB
//! options, recovery of imports that a crash interrupted) and the primitives every layer above
//! needs: commits, the one metadata reader, session segments and lineage, bounded iterators and
//! the one forward-scan helper ([`visit`]). The caches it holds are plain types that do not know
//! the store (`session_cache.rs`, `successor_cache.rs`, `projection_registry.rs`).
//!
//! Invariant kept at open: no `events` key belongs to a session number without metadata, except
//! while an import of that number is in progress in this process. Interrupted imports are found
//! through their `P ‖ number` markers and their partial ranges deleted before the store serves.

mod direct_io;
mod projection_registry;
mod session_cache;
mod successor_cache;
mod wal_audit;

pub use direct_io::supported as direct_io_supported;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamily, ColumnFamilyDescriptor, DBCompressionType,
    DBRawIteratorWithThreadMode, DBRecoveryMode, SliceTransform, Snapshot, WriteBatch,
    WriteOptions, DB,
};
use sessionlog_codec::format::header::Header;

pub(crate) use projection_registry::Registry;
pub(crate) use session_cache::{
    lock_session, ProjectionCheckpoints, RelationRules, WriteState, WriteStateCache,
};
pub(crate) use successor_cache::SuccessorCache;

use crate::error::{Error, Result};
use crate::layout::counter;
use crate::layout::keys::{
    self, ALL_CFS, CF_CHECKPOINTS, CF_EVENTS, CF_SESSIONS, CF_SURFACE, SESSION_PREFIX_LEN,
    SESSION_RANGE_CFS,
};
use crate::layout::meta::{SessionCounters, SessionMeta};
use crate::options::{Durability, Options};

/// A raw RocksDB iterator over the store.
pub(crate) type RawIter<'a> = DBRawIteratorWithThreadMode<'a, DB>;

/// What [`visit`] calls with each entry (key, value); `false` stops the scan.
pub(crate) type VisitEntry<'f> = dyn FnMut(&[u8], &[u8]) -> Result<bool> + 'f;

/// A visitor of every record of a kind: (id, stored value).
type VisitRecord<'f> = dyn FnMut(&[u8], &[u8]) -> Result<()> + 'f;

/// An open sessionlog store.
pub struct Store {
    pub(crate) db: DB,
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
    /// Whether flush and compaction run with direct I/O (`Options::direct_io` where the
    /// filesystem takes it).
    direct_io: bool,
    /// The store's own directory lock ([`lock_dir`]), released after `db` closes (fields drop
    /// in order).
    _dir_lock: std::fs::File,
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

/// The store's own lock file in its directory.
const DIR_LOCK: &str = "sessionlog.lock";

/// Hold the store directory against every other open (other processes, and other handles in
/// this one: an `flock` conflicts between open files, not only between processes) from before
/// the WAL audit until the handle drops. RocksDB's own lock (`LOCK`) is taken inside its open,
/// too late: the audit must never read a WAL another handle is appending to, whose unfinished
/// writes could look like damage.
fn lock_dir(path: &Path) -> Result<std::fs::File> {
    let lock_path = path.join(DIR_LOCK);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(|source| Error::Io {
            path: lock_path.clone(),
            source,
        })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked {
            path: path.to_path_buf(),
            reason: format!("{} is held", lock_path.display()),
        }),
        Err(std::fs::TryLockError::Error(source)) => Err(Error::Io {
            path: lock_path,
            source,
        }),
    }
}

/// Create `path` and any missing ancestors, then fsync the parent of each directory created, so
/// a new store's directory entry survives a power cut (RocksDB syncs the store directory's own
/// entries, not the entry naming it).
fn create_dir_durably(path: &Path) -> Result<()> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    let created: Vec<&Path> = path.ancestors().take_while(|p| !p.exists()).collect();
    std::fs::create_dir_all(path).map_err(io(path))?;
    for dir in created {
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::File::open(parent)
                .and_then(|f| f.sync_all())
                .map_err(io(parent))?;
        }
    }
    Ok(())
}

impl Store {
    /// Open (creating if needed) the store at `path`.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Store> {
        options.validate()?;
        let path = path.as_ref().to_path_buf();
        create_dir_durably(&path)?;
        let cache = Cache::new_lru_cache(options.block_cache_bytes);
        let mut db_opts = rocksdb::Options::default();
        db_opts.create_if_missing(true);
        db_opts.create_missing_column_families(true);
        db_opts.set_paranoid_checks(true);
        db_opts.increase_parallelism(options.background_jobs);
        db_opts.set_max_background_jobs(options.background_jobs);
        db_opts.set_bytes_per_sync(1 << 20);
        db_opts.set_wal_bytes_per_sync(1 << 20);
        set_wal_policy(&mut db_opts, &options);
        let dir_lock = lock_dir(&path)?;
        let direct_io = options.direct_io && direct_io::supported(&path);
        db_opts.set_use_direct_io_for_flush_and_compaction(direct_io);
        wal_audit::audit(&path, options.recycles_wal())?;
        let cfs = ALL_CFS
            .into_iter()
            .map(|name| {
                let o = cf_options(name, &options, &cache).map_err(Error::storage(format!(
                    "building the options of column family {name}"
                )))?;
                Ok(ColumnFamilyDescriptor::new(name, o))
            })
            .collect::<Result<Vec<_>>>()?;
        let db = DB::open_cf_descriptors(&db_opts, &path, cfs).map_err(|source| {
            // RocksDB's messages: "While lock file: …/LOCK: Resource temporarily unavailable"
            // (another process) and "lock hold by current process" (another handle here).
            let text = source.to_string();
            if text.contains("While lock file") || text.contains("lock hold by current process") {
                Error::Locked {
                    path: path.clone(),
                    reason: text,
                }
            } else {
                Error::storage(format!("opening the store at {}", path.display()))(source)
            }
        })?;
        let write_states = WriteStateCache::new(options.hot_sessions);
        let store = Store {
            db,
            options,
            path,
            next_number: AtomicU64::new(0),
            write_states,
            poisoned: AtomicBool::new(false),
            claims: Mutex::new(HashSet::new()),
            projection_registry: Registry::default(),
            successors: SuccessorCache::default(),
            direct_io,
            _dir_lock: dir_lock,
        };
        store.recover_interrupted_imports()?;
        let next = store.first_free_number()?;
        store.next_number.store(next, Ordering::SeqCst);
        Ok(store)
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this open flushes and compacts with direct I/O: [`Options::direct_io`] was set
    /// and the directory's filesystem takes `O_DIRECT`.
    pub fn direct_io(&self) -> bool {
        self.direct_io
    }

    pub(crate) fn cf(&self, name: &str) -> Result<&ColumnFamily> {
        self.db.cf_handle(name).ok_or_else(|| Error::Corrupt {
            id: String::new(),
            detail: format!("column family {name} is missing"),
        })
    }

    /// Write options for the configured durability.
    pub(crate) fn write_options(&self) -> WriteOptions {
        let mut w = WriteOptions::default();
        w.set_sync(self.options.durability == Durability::Sync);
        w
    }

    /// Commit a batch with the configured durability.
    pub(crate) fn commit(&self, batch: WriteBatch, context: &str) -> Result<()> {
        self.db
            .write_opt(batch, &self.write_options())
            .map_err(Error::storage(context))
    }

    /// How durable a commit is when it returns (the store's [`Options::durability`]).
    pub fn durability(&self) -> Durability {
        self.options.durability
    }

    /// Make every write so far durable (fsync the WAL).
    pub fn sync(&self) -> Result<()> {
        self.db
            .flush_wal(true)
            .map_err(Error::storage("syncing the write-ahead log"))
    }

    /// Commit a batch without fsync (intermediate import batches that acknowledge nothing,
    /// creations made durable by their first append) — except when the store reuses its WAL
    /// files: then every WAL record is synced before the next one is written, so a power cut
    /// leaves at most the last record unsynced, and the WAL audit may take a complete record
    /// after a lost one for damage in synced data (`wal_audit.rs`). Unsynced records in a row
    /// could reach the disk out of order.
    pub(crate) fn commit_unsynced(&self, batch: WriteBatch, context: &str) -> Result<()> {
        let mut w = WriteOptions::default();
        w.set_sync(self.options.recycles_wal());
        self.db
            .write_opt(batch, &w)
            .map_err(Error::storage(context))
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
    fn get_at(
        &self,
        cf: &str,
        key: &[u8],
        snap: Option<&Snapshot<'_>>,
        what: impl FnOnce() -> String,
    ) -> Result<Option<rocksdb::DBPinnableSlice<'_>>> {
        let mut ro = rocksdb::ReadOptions::default();
        if let Some(snap) = snap {
            ro.set_snapshot(snap);
        }
        self.db
            .get_pinned_cf_opt(self.cf(cf)?, key, &ro)
            .map_err(|source| Error::storage(what())(source))
    }

    /// Metadata of `id`, if stored.
    pub(crate) fn meta(&self, id: &[u8]) -> Result<Option<SessionMeta>> {
        self.read_meta(id, None)
    }

    /// Metadata of `id`, or `UnknownSession`.
    pub(crate) fn require_meta(&self, id: &[u8]) -> Result<SessionMeta> {
        self.meta(id)?.ok_or_else(|| unknown(id))
    }

    /// Metadata of `id` as of `snap`, or `UnknownSession`.
    pub(crate) fn meta_at(&self, id: &[u8], snap: &Snapshot<'_>) -> Result<SessionMeta> {
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
        ro.set_snapshot(snap);
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

    /// Where `meta`'s events live, in seq order.
    pub(crate) fn segments(&self, meta: &SessionMeta) -> Result<Vec<Segment>> {
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
        if let Some(snap) = snap {
            ro.set_snapshot(snap);
        }
        ro.set_readahead_size(2 << 20);
        ro.fill_cache(false);
        Ok(self.db.raw_iterator_cf_opt(self.cf(cf)?, ro))
    }

    /// Refuse writes after a failed durable write (until the store is reopened).
    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.poisoned.load(Ordering::SeqCst) {
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

    /// Delete everything stored under a session number (its lines, tail and indexes).
    pub(crate) fn delete_number_range(&self, batch: &mut WriteBatch, number: u64) -> Result<()> {
        let (start, end) = (keys::session_start(number), keys::session_end(number));
        for name in SESSION_RANGE_CFS {
            batch.delete_range_cf(self.cf(name)?, &start, &end);
        }
        Ok(())
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

    /// The number the next session takes: past the stored counter and past every number that a
    /// session holds (`N ‖ number`), so a counter that an older build left too low (see
    /// `layout::counter`) never hands out a number in use.
    fn first_free_number(&self) -> Result<u64> {
        let stored = self.read_counter()?;
        Ok(self
            .highest_session_number()?
            .map_or(stored, |n| stored.max(n + 1)))
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

    /// Remove the partial writes of imports interrupted by a crash (see the module invariant).
    fn recover_interrupted_imports(&self) -> Result<()> {
        let cf = self.cf(CF_SESSIONS)?;
        let mut batch = WriteBatch::default();
        let mut it = self.db.raw_iterator_cf(cf);
        it.seek([keys::PENDING_TAG]);
        visit(
            &mut it,
            "scanning interrupted imports".into(),
            &mut |k, _| {
                if k.first() != Some(&keys::PENDING_TAG) {
                    return Ok(false);
                }
                if let Ok(n) = <[u8; 8]>::try_from(&k[1..]) {
                    self.delete_number_range(&mut batch, u64::from_be_bytes(n))?;
                }
                batch.delete_cf(cf, k);
                Ok(true)
            },
        )?;
        if !batch.is_empty() {
            self.commit(batch, "removing interrupted imports")?;
        }
        Ok(())
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

/// WAL files kept for reuse when `Options::wal_recycling` is set (one is live at a time, and
/// another while its memtables flush).
const RECYCLED_WAL_FILES: usize = 4;

/// How the WAL is recovered, and whether its files are reused (`Options::wal_recycling`).
fn set_wal_policy(db_opts: &mut rocksdb::Options, options: &Options) {
    if options.recycles_wal() {
        // RocksDB recycles only under point-in-time recovery: a reused file's tail holds its
        // previous life's records, which replay must take as the end. Damage before the end is
        // refused by the WAL audit that runs before every open (`wal_audit`).
        db_opts.set_wal_recovery_mode(DBRecoveryMode::PointInTime);
        db_opts.set_recycle_log_file_num(RECYCLED_WAL_FILES);
        // A WAL is reusable only once every column family with data in it has flushed; left
        // alone, the small ones keep every WAL alive. Atomic flushes flush them all whenever the
        // events memtable fills, so each WAL closes obsolete and at about one size, and a reused
        // file has room for the next (writing past its end would write the inode again). A WAL
        // size limit instead closed every other WAL early, leaving reused files too small.
        // RocksDB runs atomic flushes only without pipelined writes.
        db_opts.set_atomic_flush(true);
        db_opts.set_enable_pipelined_write(false);
        // Without pipelined writes, the write group's leader inserts every member's keys into the
        // memtables: members do not insert in parallel, so they are woken once (when their group
        // is durable) rather than again to insert, and inserts use the per-session hints
        // ([`insert_hint_options`]), which RocksDB ignores under concurrent inserts. Measured at
        // (1000,32): RocksDB's write path fell from 15% to 12% of the process's CPU samples.
        // Pipelined writes (below) keep concurrent inserts: there the leader's inserts were
        // measured no cheaper (buffered, 1000 sessions: 49.9 -> 51.0 us per batch at the median).
        db_opts.set_allow_concurrent_memtable_write(false);
    } else {
        // A torn last WAL record (power loss mid-write: never acknowledged) is dropped; damage
        // anywhere else fails the open (in a reused file left by an earlier open, the WAL audit
        // refuses it). Point-in-time recovery alone would stop replay at the damage and
        // silently lose every acknowledged write after it.
        db_opts.set_wal_recovery_mode(DBRecoveryMode::TolerateCorruptedTailRecords);
        db_opts.set_enable_pipelined_write(true);
    }
}

/// With `Options::blob_files`, the `events` column family keeps its values (blocks of lines, a
/// few KB each) in RocksDB's blob files, its SSTs only their keys and references. Each flushed L0
/// file holds keys of every active session, so every L0 compaction rewrites the active sessions'
/// blocks in the level below, Zstd-compressing them again; a blob is written (and compressed)
/// once, at flush, and compaction moves only references. Values under 512 bytes stay inline:
/// compressing small values one at a time at flush cost more CPU than their compaction saved
/// (measured with 256 bytes: compaction CPU fell further, the total did not). Zstd level 1 per
/// value keeps a store of appended blocks at 1.4-1.5x the size of Zstd over 64 KiB SST blocks; LZ4
/// per value, 1.8-2.0x, was cheaper in some runs and dearer in others (ninth and twenty-sixth
/// rounds). Blob garbage collection stays off while the store runs: appends make no garbage, and
/// with it on every compaction of the active sessions' keys relocated their blobs held in older
/// files, which gave back most of the saving. The blocks of purged or replaced sessions are
/// collected by [`Store::compact`] ([`BLOB_GC_FOR_COMPACT`]). Set through RocksDB's options string:
/// the per-blob compression level has no setter.
const EVENTS_BLOB_OPTIONS: &str = "enable_blob_files=true;min_blob_size=512;\
    blob_compression_type=kZSTD;blob_compression_opts={level=1}";

/// The `events` blob garbage collection of a full compaction: every blob file's live blobs are
/// relocated, so the files holding garbage are dropped (also for a store opened without
/// `Options::blob_files` that holds blob files from an earlier open with it).
pub(crate) const BLOB_GC_FOR_COMPACT: [(&str, &str); 2] = [
    ("enable_blob_garbage_collection", "true"),
    ("blob_garbage_collection_age_cutoff", "1.0"),
];
/// Blob garbage collection as the store runs: off (RocksDB's default, which
/// [`EVENTS_BLOB_OPTIONS`] keeps).
pub(crate) const BLOB_GC_OFF: [(&str, &str); 1] = [("enable_blob_garbage_collection", "false")];

/// The Zstd level of the last level's blocks (see [`cf_options`]).
const BOTTOMMOST_ZSTD_LEVEL: i32 = 1;
/// RocksDB's default Zstd window (`CompressionOptions::window_bits`), kept when the level is set.
const ZSTD_DEFAULT_WINDOW_BITS: i32 = -14;

/// Per-session memtable insert hints, as an options string (RocksDB has no setter for them): a
/// memtable remembers where each session's last key went, so the next one (a session's keys only
/// grow) is placed from there instead of searched for from the skiplist's head; that halved the
/// skiplist search's CPU. Costs ~250 bytes per session in each memtable.
fn insert_hint_options() -> String {
    format!("memtable_insert_with_hint_prefix_extractor=rocksdb.FixedPrefix.{SESSION_PREFIX_LEN}")
}

/// The memtable prefix bloom's size. RocksDB sizes it as a fraction of the memtable, but it holds
/// one entry per session written since the last flush (a few thousand), not one per byte: 2 Mbit
/// keep its false positives under 1e-3 up to 100,000 sessions per memtable. The 10% of a 128 MiB
/// memtable it was before (12.8 MiB in each column family keyed by session) was allocated and
/// zeroed at every memtable switch: 3% of the append path's CPU samples in the bloom's
/// constructor, and most of its page faults (5.7% of the samples before, 0.8% after).
const MEMTABLE_BLOOM_BYTES: usize = 256 << 10;
/// The largest memtable bloom ratio RocksDB takes.
const MAX_MEMTABLE_BLOOM_RATIO: f64 = 0.25;

/// How many L0 files of `events` start a compaction (RocksDB's default is 4). Each flushed L0
/// file holds blocks of every active session, so every L0 compaction rewrites the level below's
/// files holding their earlier blocks: twice the L0 files per compaction halves those rewrites.
/// The level below is sized to match ([`events_level_base_bytes`]), as RocksDB's tuning guide
/// has it (L0 about the size of the base level). With 8 files and a 1 GiB base instead of 4 and
/// 256 MiB, V0 hosting at (1000,32) spent 30-32% less compaction CPU in 45- and 90-second runs
/// and 7-11% less CPU per durable batch (docs/performance-rounds.md, twenty-third round). The
/// price: a read of a session appended to lately may merge up to twice the L0 files (`bench
/// pit`, whose stores are imported, measured no slower; reads beside a full L0 were not
/// measured apart), and L0 holds up to twice the bytes before they are compacted.
const EVENTS_L0_COMPACTION_TRIGGER: i32 = 8;

/// The base level's size for `events`: the L0 files that start a compaction, memtables of
/// `write_buffer_bytes` each.
fn events_level_base_bytes(write_buffer_bytes: usize) -> u64 {
    u64::from(EVENTS_L0_COMPACTION_TRIGGER.unsigned_abs())
        .saturating_mul(u64::try_from(write_buffer_bytes).unwrap_or(u64::MAX))
}

/// The SST size of `events` and `sessions`.
const FILE_BYTES: u64 = 64 << 20;
/// The SST size of `surface` and `checkpoints`, small beside `events` and keyed by session
/// number. Sessions are numbered as they are created, so the ones being appended to hold the
/// newest numbers, and a compaction into a level rewrites only that level's files overlapping
/// them. In [`FILE_BYTES`] files the last level of these column families stayed one file for a
/// long time (1 to 3 after 45 s of V4 hosting), which every L0 compaction rewrote whole: a cost
/// that grew with the store. Smaller files leave the finished sessions' keys alone.
const SMALL_CF_FILE_BYTES: u64 = 4 << 20;

/// The SST block size of the column families keyed by session number (`events`, `surface`,
/// `checkpoints`). They are read by ranges (a session's events, its checkpoints and surface
/// records from a seq on) and an appended batch is one value of a few KB, so a block holds
/// many values of few sessions: Zstd level 1 over 64 KiB blocks of V0 lines compresses 4.06x at
/// 454 MB/s and decompresses at 1,874 MB/s, over 16 KiB blocks 3.42x, 407 and 1,235 MB/s. A
/// compacted hosting store took 15-21% less disk, and cold point-in-time reads (fewer, larger
/// reads) got faster; warm reads and the append path's CPU did not move
/// (docs/performance-rounds.md, twentieth round). Imported blocks are single values of ~64 KiB,
/// so this changes little for them. SSTs keep the block size they were written with.
const SESSION_RANGE_BLOCK_BYTES: usize = 64 << 10;
/// The SST block size of `sessions`, read by point lookups of one small record.
const SESSIONS_BLOCK_BYTES: usize = 16 << 10;

/// The SST size of column family `name` ([`FILE_BYTES`], [`SMALL_CF_FILE_BYTES`]).
fn target_file_bytes(name: &str) -> u64 {
    if name == CF_SURFACE || name == CF_CHECKPOINTS {
        SMALL_CF_FILE_BYTES
    } else {
        FILE_BYTES
    }
}

/// Per-CF options: bloom filters and a shared cache everywhere (blobs too); the session-number
/// prefix extractor (with a [`MEMTABLE_BLOOM_BYTES`] memtable bloom and insert hints) and
/// [`SESSION_RANGE_BLOCK_BYTES`] blocks on the CFs keyed by session number; blob files for
/// `events` when asked.
fn cf_options(
    name: &str,
    options: &Options,
    cache: &Cache,
) -> std::result::Result<rocksdb::Options, rocksdb::Error> {
    let keyed_by_session = SESSION_RANGE_CFS.contains(&name);
    let mut from_string = Vec::new();
    if name == CF_EVENTS && options.blob_files {
        from_string.push(EVENTS_BLOB_OPTIONS.to_owned());
    }
    if keyed_by_session {
        from_string.push(insert_hint_options());
    }
    let mut o = if from_string.is_empty() {
        rocksdb::Options::default()
    } else {
        rocksdb::Options::default().get_options_from_string(from_string.join(";"))?
    };
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(cache);
    table.set_bloom_filter(10.0, false);
    table.set_cache_index_and_filter_blocks(true);
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
    table.set_block_size(if keyed_by_session {
        SESSION_RANGE_BLOCK_BYTES
    } else {
        SESSIONS_BLOCK_BYTES
    });
    o.set_block_based_table_factory(&table);
    o.set_blob_cache(cache);
    o.set_write_buffer_size(options.write_buffer_bytes);
    o.set_level_compaction_dynamic_level_bytes(true);
    // Flushes write L0 uncompressed: an L0 file lives until its first compaction, so compressing
    // it costs CPU on every appended byte (LZ4 at flush, again on the compaction's read) for
    // space held only briefly; the levels below keep LZ4, the last one Zstd.
    o.set_compression_per_level(&[
        DBCompressionType::None,
        DBCompressionType::Lz4,
        DBCompressionType::Lz4,
        DBCompressionType::Lz4,
        DBCompressionType::Lz4,
        DBCompressionType::Lz4,
        DBCompressionType::Lz4,
    ]);
    o.set_bottommost_compression_type(DBCompressionType::Zstd);
    // Zstd level 1 instead of its default 3 at the last level: compaction Zstd-compresses every
    // appended byte there, and level 1 takes ~10% less compaction CPU for ~5% more disk.
    let (strategy, max_dict_bytes) = (0, 0);
    o.set_bottommost_compression_options(
        ZSTD_DEFAULT_WINDOW_BITS,
        BOTTOMMOST_ZSTD_LEVEL,
        strategy,
        max_dict_bytes,
        true,
    );
    o.set_target_file_size_base(target_file_bytes(name));
    if name == CF_EVENTS {
        o.set_level_zero_file_num_compaction_trigger(EVENTS_L0_COMPACTION_TRIGGER);
        o.set_max_bytes_for_level_base(events_level_base_bytes(options.write_buffer_bytes));
    }
    if keyed_by_session {
        o.set_prefix_extractor(SliceTransform::create_fixed_prefix(SESSION_PREFIX_LEN));
        let ratio = MEMTABLE_BLOOM_BYTES as f64 / options.write_buffer_bytes.max(1) as f64;
        o.set_memtable_prefix_bloom_ratio(ratio.min(MAX_MEMTABLE_BLOOM_RATIO));
    } else {
        o.set_merge_operator_associative(counter::MERGE_OPERATOR, |_key, existing, operands| {
            counter::merge_max(existing, operands)
        });
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::{
        create_dir_durably, Store, BOTTOMMOST_ZSTD_LEVEL, FILE_BYTES, MEMTABLE_BLOOM_BYTES,
        SESSIONS_BLOCK_BYTES, SESSION_RANGE_BLOCK_BYTES, SMALL_CF_FILE_BYTES,
    };
    use crate::layout::keys::{
        ALL_CFS, CF_CHECKPOINTS, CF_EVENTS, CF_SESSIONS, CF_SURFACE, SESSION_PREFIX_LEN,
        SESSION_RANGE_CFS,
    };
    use crate::options::{Durability, Options};

    /// The section of the newest OPTIONS file RocksDB wrote in `dir` whose header is
    /// `[<header>]`.
    fn options_section(dir: &std::path::Path, header: &str) -> String {
        let newest = std::fs::read_dir(dir)
            .expect("store directory")
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|n| n.starts_with("OPTIONS-"))
            .max_by_key(|n| n["OPTIONS-".len()..].parse::<u64>().unwrap_or(0))
            .expect("an OPTIONS file");
        let text = std::fs::read_to_string(dir.join(newest)).expect("OPTIONS text");
        let header = format!("{header}]");
        text.split("\n[")
            .find(|section| section.starts_with(&header))
            .expect("the section")
            .to_owned()
    }

    /// The `key=value` setting's value in an OPTIONS section.
    fn setting<'s>(section: &'s str, key: &str) -> &'s str {
        section
            .lines()
            .find_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("{key} in {section}"))
    }

    #[test]
    fn every_column_family_gets_its_bloom_hints_sizes_levels_and_last_levels_zstd_level() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let options = Options::default();
        let memtable = options.write_buffer_bytes;
        let store = Store::open(tmp.path(), options).expect("open");
        let db = options_section(store.path(), "DBOptions");
        assert_eq!(setting(&db, "allow_concurrent_memtable_write"), "false");
        assert_eq!(setting(&db, "enable_pipelined_write"), "false");
        for name in ALL_CFS {
            let section = options_section(store.path(), &format!("CFOptions \"{name}\""));
            let memtable_size = memtable.to_string();
            assert_eq!(
                setting(&section, "write_buffer_size"),
                memtable_size,
                "{name}"
            );
            let (l0_trigger, level_base) = if name == CF_EVENTS {
                (8, 8 * memtable as u64)
            } else {
                (4, 256 << 20)
            };
            assert_eq!(
                setting(&section, "level0_file_num_compaction_trigger"),
                l0_trigger.to_string(),
                "{name}"
            );
            assert_eq!(
                setting(&section, "max_bytes_for_level_base"),
                level_base.to_string(),
                "{name}"
            );
            let file_bytes = if [CF_SURFACE, CF_CHECKPOINTS].contains(&name) {
                SMALL_CF_FILE_BYTES
            } else {
                FILE_BYTES
            };
            assert_eq!(
                setting(&section, "target_file_size_base"),
                file_bytes.to_string(),
                "{name}"
            );
            let table = options_section(
                store.path(),
                &format!("TableOptions/BlockBasedTable \"{name}\""),
            );
            let block_bytes = if SESSION_RANGE_CFS.contains(&name) {
                SESSION_RANGE_BLOCK_BYTES
            } else {
                SESSIONS_BLOCK_BYTES
            };
            assert_eq!(
                setting(&table, "block_size"),
                block_bytes.to_string(),
                "{name}"
            );
            let bottommost = setting(&section, "bottommost_compression_opts");
            assert!(
                bottommost.contains(&format!(";level={BOTTOMMOST_ZSTD_LEVEL};"))
                    && bottommost.contains("enabled=true"),
                "{name}: {bottommost}"
            );
            let ratio: f64 = setting(&section, "memtable_prefix_bloom_size_ratio")
                .parse()
                .expect("a ratio");
            let hints = setting(&section, "memtable_insert_with_hint_prefix_extractor");
            if name == CF_SESSIONS {
                assert_eq!(ratio, 0.0, "{name}: no prefix extractor, no memtable bloom");
                assert_eq!(hints, "nullptr", "{name}");
            } else {
                let bloom = ratio * memtable as f64;
                let want = MEMTABLE_BLOOM_BYTES as f64;
                assert!((bloom - want).abs() < want * 0.01, "{name}: {bloom} bytes");
                let prefix = format!("rocksdb.FixedPrefix.{SESSION_PREFIX_LEN}");
                assert_eq!(setting(&section, "prefix_extractor"), prefix, "{name}");
                assert_eq!(hints, prefix, "{name}");
            }
        }
    }

    /// Pipelined writes (buffered durability, or no WAL reuse) keep RocksDB's concurrent inserts.
    #[test]
    fn pipelined_writes_keep_concurrent_memtable_inserts() {
        for options in [
            Options {
                durability: Durability::Buffered,
                ..Options::default()
            },
            Options {
                wal_recycling: false,
                ..Options::default()
            },
        ] {
            let tmp = tempfile::tempdir().expect("tempdir");
            let store = Store::open(tmp.path(), options).expect("open");
            let db = options_section(store.path(), "DBOptions");
            assert_eq!(setting(&db, "enable_pipelined_write"), "true");
            assert_eq!(setting(&db, "allow_concurrent_memtable_write"), "true");
        }
    }

    #[test]
    fn a_nested_new_store_directory_is_created_with_its_ancestors() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("a/b/store");
        create_dir_durably(&path).expect("created");
        assert!(path.is_dir());
        // Existing directories are left as they are.
        create_dir_durably(&path).expect("idempotent");
        assert!(path.is_dir());
    }

    #[test]
    fn a_store_path_under_a_file_is_an_io_error_naming_the_path() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let file = tmp.path().join("file");
        std::fs::write(&file, b"x").expect("write");
        let err = create_dir_durably(&file.join("store")).expect_err("not a directory");
        assert!(err.to_string().contains("file"), "{err}");
    }
}
