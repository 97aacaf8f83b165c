//! Opening the store's RocksDB instance: its directory created durably and locked against every
//! other open, its WAL audited, its column families opened with the tuned options of
//! `tuning.rs`. Or, beside a process that holds the store, a read-only RocksDB secondary
//! instance that follows it ([`Store::open_secondary_handle`]).

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use rocksdb::statistics::StatsLevel;
use rocksdb::{Cache, ColumnFamilyDescriptor, DB};

use super::commit::CommitQueue;
use super::dir_lock::{lock_dir, DirLock};
use super::feed::Feeds;
use super::tuning::{cf_options, set_wal_policy};
use super::{direct_io, wal_audit, Registry, Store, SuccessorCache, WriteStateCache};
use crate::error::{Error, Result};
use crate::layout::keys::ALL_CFS;
use crate::metrics::Recorder;
use crate::options::Options;

/// How a RocksDB instance was opened: as the primary, holding the directory lock (flushing and
/// compacting with direct I/O or not), or as a secondary beside it, with its scratch directory.
enum Opened {
    Primary { direct_io: bool, dir_lock: DirLock },
    Secondary(Secondary),
}

/// What a secondary instance keeps: its scratch directory, and the MANIFEST the primary's
/// `CURRENT` named just before the instance opened. RocksDB's secondary does not follow a
/// primary that reopens the store reliably: catching up across the new MANIFEST a reopen writes,
/// it can miss what that open flushed from the previous WAL while it still replays the new one,
/// so a session's later events show and earlier ones do not. The view is trusted only while
/// `CURRENT` names that MANIFEST ([`Store::catch_up`]).
pub(crate) struct Secondary {
    _scratch: SecondaryDir,
    manifest: String,
}

/// How many times an open beside the holder starts over when the holder reopened the store
/// meanwhile, before it gives up with [`Error::HolderReopened`].
const OPEN_BESIDE_ATTEMPTS: usize = 8;

/// The MANIFEST the store's `CURRENT` names now (RocksDB replaces `CURRENT` by a rename, so it
/// is read whole).
fn current_manifest(path: &Path) -> Result<String> {
    let current = path.join("CURRENT");
    match std::fs::read_to_string(&current) {
        Ok(name) => Ok(name),
        Err(source) if source.kind() == std::io::ErrorKind::NotFound => Err(Error::Io {
            path: current,
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no store is there to read (RocksDB's CURRENT file is missing)",
            ),
        }),
        Err(source) => Err(Error::Io {
            path: current,
            source,
        }),
    }
}

/// The descriptors of every column family, with the tuned options of `tuning.rs`.
fn column_families(options: &Options, cache: &Cache) -> Result<Vec<ColumnFamilyDescriptor>> {
    ALL_CFS
        .into_iter()
        .map(|name| {
            let o = cf_options(name, options, cache).map_err(Error::storage(format!(
                "building the options of column family {name}"
            )))?;
            Ok(ColumnFamilyDescriptor::new(name, o))
        })
        .collect()
}

/// A secondary instance's own directory, removed when the store closes.
pub(crate) struct SecondaryDir(std::path::PathBuf);

/// The prefix of every secondary instance's directory name: `sessionlog-reader-PID-N`.
const READER_DIR_PREFIX: &str = "sessionlog-reader-";

impl SecondaryDir {
    /// A new, empty directory under the system's temporary directory.
    fn create() -> Result<SecondaryDir> {
        SecondaryDir::create_in(&std::env::temp_dir())
    }

    /// A new, empty directory under `parent`, after removing those left there by processes
    /// that have exited (a reader killed before it closed cannot remove its own).
    fn create_in(parent: &Path) -> Result<SecondaryDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        sweep_dead_readers(parent);
        let dir = parent.join(format!(
            "{READER_DIR_PREFIX}{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
            path: dir.clone(),
            source,
        })?;
        Ok(SecondaryDir(dir))
    }
}

impl Drop for SecondaryDir {
    fn drop(&mut self) {
        // Best effort: a scratch directory left behind holds only RocksDB's info log.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Remove the readers' directories under `parent` whose process no longer runs. Only where
/// `/proc` shows which processes run: elsewhere every directory is left alone, since a live
/// reader's could not be told from a dead one's. A pid reused since keeps its dead reader's
/// directory until that process exits too. Best effort, like [`SecondaryDir`]'s own removal.
fn sweep_dead_readers(parent: &Path) {
    let proc = Path::new("/proc");
    if !proc.join("self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(READER_DIR_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !proc.join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
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
    /// Open the RocksDB store at `path` (creating it if needed) with the store's tuned options,
    /// after locking its directory and auditing its WAL. The store is not ready to serve until
    /// the write layer has removed any interrupted imports and numbering starts past every
    /// stored session ([`Store::start_numbering`]): `Store::open` does both.
    pub(crate) fn open_handle(path: &Path, options: Options) -> Result<Store> {
        options.validate()?;
        let path = path.to_path_buf();
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
        // The tickers the metrics report (write stalls, block cache hits, flush and compaction
        // bytes): per-core counters, without the timers and histograms that cost the write path.
        db_opts.enable_statistics();
        db_opts.set_statistics_level(StatsLevel::ExceptHistogramOrTimers);
        let dir_lock = lock_dir(&path)?;
        let direct_io = options.direct_io && direct_io::supported(&path);
        db_opts.set_use_direct_io_for_flush_and_compaction(direct_io);
        wal_audit::audit(&path, options.recycles_wal())?;
        let cfs = column_families(&options, &cache)?;
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
        let opened = Opened::Primary {
            direct_io,
            dir_lock,
        };
        Ok(Store::with_db(db, options, path, (db_opts, cache), opened))
    }

    /// A store handle around an open RocksDB instance, with the options and block cache it was
    /// opened with.
    fn with_db(
        db: DB,
        options: Options,
        path: std::path::PathBuf,
        (db_opts, cache): (rocksdb::Options, Cache),
        opened: Opened,
    ) -> Store {
        let (direct_io, dir_lock, secondary) = match opened {
            Opened::Primary {
                direct_io,
                dir_lock,
            } => (direct_io, Some(dir_lock), None),
            Opened::Secondary(secondary) => (false, None, Some(secondary)),
        };
        let write_states = WriteStateCache::new(options.hot_sessions);
        let projection_registry = Registry::with(&options.message_projections);
        Store {
            db,
            options,
            path,
            next_number: AtomicU64::new(0),
            write_states,
            poisoned: AtomicBool::new(false),
            claims: Mutex::new(HashSet::new()),
            projection_registry,
            successors: SuccessorCache::default(),
            commits: CommitQueue::default(),
            recorder: Recorder::default(),
            statistics: db_opts,
            block_cache: cache,
            direct_io,
            feeds: Feeds::default(),
            secondary,
            search: Default::default(),
            _dir_lock: dir_lock,
        }
    }

    /// Open the store at `path`, which another process holds, as a RocksDB secondary instance:
    /// read-only, following the primary as [`Store::catch_up`] replays what it wrote since.
    /// Its own files (RocksDB's info log) live in a scratch directory removed when it closes.
    /// An open that the holder's reopening overtook starts over.
    pub(crate) fn open_secondary_handle(path: &Path, options: Options) -> Result<Store> {
        options.validate()?;
        let mut attempt = 1;
        loop {
            match Store::open_secondary_once(path, options.clone()) {
                Err(Error::HolderReopened { .. }) if attempt < OPEN_BESIDE_ATTEMPTS => attempt += 1,
                opened => return opened,
            }
        }
    }

    fn open_secondary_once(path: &Path, options: Options) -> Result<Store> {
        let path = path.to_path_buf();
        // Read before the open: a reopen by the holder from here on shows at the first catch-up.
        let manifest = current_manifest(&path)?;
        let scratch = SecondaryDir::create()?;
        let cache = Cache::new_lru_cache(options.block_cache_bytes);
        let mut db_opts = rocksdb::Options::default();
        db_opts.set_paranoid_checks(true);
        // A secondary instance keeps every table file open: the primary may delete one at any
        // time, and an open file stays readable.
        db_opts.set_max_open_files(-1);
        db_opts.enable_statistics();
        db_opts.set_statistics_level(StatsLevel::ExceptHistogramOrTimers);
        let cfs = column_families(&options, &cache)?;
        let db = DB::open_cf_descriptors_as_secondary(&db_opts, &path, &scratch.0, cfs).map_err(
            Error::storage(format!(
                "opening the store at {} beside the process that holds it",
                path.display()
            )),
        )?;
        let opened = Opened::Secondary(Secondary {
            _scratch: scratch,
            manifest,
        });
        let store = Store::with_db(db, options, path, (db_opts, cache), opened);
        store.catch_up()?;
        Ok(store)
    }

    /// Replay what the primary instance wrote since this secondary last looked (a no-op on a
    /// primary): a reader beside a host that answers queries for a long time (`sessionlog
    /// serve`) calls it to see sessions and events committed since its open, and the change
    /// log's end as the primary wrote it (`store/feed.rs`). Fails with
    /// [`Error::HolderReopened`] once the holder has reopened the store since this handle
    /// opened: from then on the handle's view may miss events, and the reader opens a new one
    /// ([`Store::reopen_beside`]).
    pub fn catch_up(&self) -> Result<()> {
        let Some(secondary) = &self.secondary else {
            return Ok(());
        };
        self.db.try_catch_up_with_primary().map_err(Error::storage(
            "catching up with the process that holds the store",
        ))?;
        // Checked after the catch-up: whatever MANIFEST switch it replayed shows here.
        if current_manifest(&self.path)? != secondary.manifest {
            return Err(Error::HolderReopened {
                path: self.path.clone(),
            });
        }
        self.read_change_log_end()
    }

    /// Whether this handle reads beside another process that holds the store (a RocksDB
    /// secondary instance, read-only).
    pub fn is_secondary(&self) -> bool {
        self.secondary.is_some()
    }

    /// Start numbering new sessions past the stored counter and past every number a session
    /// holds (`N ‖ number`), so a counter that an older build left too low (see
    /// `layout::counter`) never hands out a number in use.
    pub(crate) fn start_numbering(&self) -> Result<()> {
        let stored = self.read_counter()?;
        let next = self
            .highest_session_number()?
            .map_or(stored, |n| stored.max(n + 1));
        self.next_number.store(next, Ordering::SeqCst);
        Ok(())
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
}

#[cfg(test)]
mod tests {
    use super::{create_dir_durably, SecondaryDir, READER_DIR_PREFIX};

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

    #[test]
    fn a_reader_sweeps_the_directories_of_readers_whose_process_exited() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut exited = std::process::Command::new("true").spawn().expect("spawn");
        let dead_pid = exited.id();
        exited.wait().expect("wait");
        let dead = tmp.path().join(format!("{READER_DIR_PREFIX}{dead_pid}-3"));
        let live = tmp
            .path()
            .join(format!("{READER_DIR_PREFIX}{}-999", std::process::id()));
        let other = tmp.path().join(format!("{READER_DIR_PREFIX}notapid-1"));
        for dir in [&dead, &live, &other] {
            std::fs::create_dir_all(dir.join("inner")).expect("mkdir");
        }
        let reader = SecondaryDir::create_in(tmp.path()).expect("created");
        assert!(reader.0.is_dir());
        assert!(!dead.exists(), "the exited reader's directory is removed");
        assert!(live.exists(), "a running process's directory is kept");
        assert!(other.exists(), "a name that is not a reader's is kept");
        let own = reader.0.clone();
        drop(reader);
        assert!(
            !own.exists(),
            "a reader removes its own directory when it closes"
        );
    }
}
