//! Store options, each with a written default, and their validation.

use crate::error::{Error, Result};

/// When a write is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// fsync the WAL before acknowledging (concurrent writers share fsyncs via group commit).
    Sync,
    /// Acknowledge once the WAL is written; fsync happens on flush or on demand.
    Buffered,
}

/// Which model a V0 session's logical views answer in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum V0Reads {
    /// DSH 0.1's model: the format's own reader and folds (indexed).
    Native,
    /// DSH 0.2's: the V4 successor the migration chain makes in memory, at its seqs (what DSH
    /// 0.2 answers for a V0 log it opens without migrating; a refusal is the chain's).
    Migrated,
}

/// A message projection the engine has built in, registered at open when
/// [`Options::message_projections`] names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuiltinProjection {
    /// DSH's first-party `image/offload` (its image-offload plugin's projection): marks the
    /// selected images of current user and tool messages `offloaded`.
    ImageOffload,
}

impl BuiltinProjection {
    /// Every built-in projection.
    pub const ALL: [BuiltinProjection; 1] = [BuiltinProjection::ImageOffload];

    /// The built-in projection of event type `ty`, if there is one.
    pub fn of_event_type(ty: &str) -> Option<BuiltinProjection> {
        Self::ALL.into_iter().find(|b| b.event_type() == ty)
    }

    /// The event type the projection interprets.
    pub fn event_type(self) -> &'static str {
        match self {
            BuiltinProjection::ImageOffload => "image/offload",
        }
    }
}

impl std::str::FromStr for BuiltinProjection {
    type Err = String;

    /// The built-in projection of an event type; `Err` names the built-in ones.
    fn from_str(ty: &str) -> std::result::Result<Self, String> {
        Self::of_event_type(ty).ok_or_else(|| {
            let known: Vec<&str> = Self::ALL.iter().map(|b| b.event_type()).collect();
            format!(
                "\"{ty}\" is not a built-in message projection (built in: {})",
                known.join(", ")
            )
        })
    }
}

/// Options for [`crate::store::Store::open`].
#[derive(Clone, Debug)]
pub struct Options {
    /// Durability of imports and appends. Default: `Durability::Sync`.
    pub durability: Durability,
    /// Shared block cache size in bytes. Default: 256 MiB.
    pub block_cache_bytes: usize,
    /// Memtable size per column family in bytes. Default: 128 MiB. Every flushed file holds
    /// keys of every active session, so every compaction of the newest level rewrites the active
    /// sessions' blocks below it: a larger memtable brings more new bytes to each such rewrite.
    /// Against 64 MiB it cut compaction's CPU by 12–42% and, with 10,000 sessions appending,
    /// most of RocksDB's write slowdowns (docs/PERFORMANCE.md, "Memtable size"), for up to
    /// twice the memory while a full memtable flushes, twice the WAL to replay after a crash,
    /// and twice the appends after each open before the first reused WAL file.
    pub write_buffer_bytes: usize,
    /// Import commits its WriteBatch whenever it holds this many bytes, bounding memory.
    /// Default: 8 MiB.
    pub import_batch_bytes: usize,
    /// Imported lines are stored in blocks of about this many bytes (an appended batch is always
    /// one block). Default: 64 KiB.
    pub block_bytes: usize,
    /// Uncommitted tail bytes are stored in chunks of this size. Default: 1 MiB.
    pub tail_chunk_bytes: usize,
    /// Background jobs for flush and compaction. Default: 2.
    pub background_jobs: i32,
    /// Check DSH's invariant companion on every append (turn/step numbering and enclosure,
    /// tool call/result pairing); a violating batch is rejected whole. Default: false (DSH's
    /// `Session.append` rules only).
    pub strict_appends: bool,
    /// Sessions whose write state (next seq, surface) stays in memory; more are evicted and
    /// reloaded on their next append. Default: 100,000.
    pub hot_sessions: usize,
    /// The model V0 sessions' messages, surface, transcript and state answer in (V1–V3 always
    /// answer DSH 0.2's; `migrate` makes either indexed). Default: `V0Reads::Native`.
    pub v0_reads: V0Reads,
    /// Overwrite obsolete WAL files in place instead of creating new ones (RocksDB's WAL
    /// recycling). A durable commit's `fdatasync` of a file that does not grow writes its data
    /// and no inode: about 2 device writes per commit instead of 3, which decides the
    /// throughput of a disk billed per write request (provisioned-IOPS cloud volumes), and the
    /// page cache reuses the file's pages instead of taking fresh ones for every WAL byte. All
    /// column families then flush together (RocksDB's atomic flush, without pipelined writes)
    /// whenever a memtable fills, so every WAL closes obsolete, at about one size, and a reused
    /// file has room for the next.
    ///
    /// Applies under `Durability::Sync` only. RocksDB recycles only under point-in-time WAL
    /// recovery, which ends replay at the first damaged record; in a reused file it cannot tell
    /// damage from the end of the current records. So every open first audits the WAL files
    /// (`store/wal_audit.rs`) and refuses a store whose WAL holds a complete record after
    /// damage, as the non-recycling mode does. Under `Sync`, with reused files, every commit is
    /// synced (also the intermediate batches of a large import and deferred creations, left
    /// unsynced with new files), so only the last record is ever unsynced and a complete record
    /// after damage proves the damage is in acknowledged data; with `Buffered`, unsynced pages may persist out of order in a power cut, and the
    /// audit could not tell that from damage. What the audit cannot see: damage inside the last
    /// record of a reused file reads exactly like a torn last write, and that one record is
    /// lost, as in SQLite's WAL. A store written this way opens normally without the option.
    /// Default: true.
    pub wal_recycling: bool,
    /// Keep the `events` column family's blocks in RocksDB's blob files (Zstd level 1 per
    /// block), its SSTs holding only keys and references, for hosts whose compaction falls
    /// behind: compaction then moves references instead of rewriting and re-compressing the
    /// active sessions' blocks (`events` compaction CPU -80 to -85% in 60-second hosting runs of
    /// 1,000 sessions on 32 threads). Why it is off by default: the flush compresses each block
    /// alone, which over today's defaults costs as much CPU per durable batch as compaction saves
    /// or more (+1.5 to +12%; it was -7% before the 64 KiB blocks and the 8-file L0
    /// compactions); the store takes 1.4-1.5x the disk at rest; point-in-time queries read 5-35%
    /// slower and plain exports ~7% slower (a blob lookup per block); and the space of purged
    /// sessions' blocks returns only with [`crate::Store::compact`]
    /// (docs/PERFORMANCE.md, "Blob files"). A store written with it
    /// opens and reads the same without it.
    /// Default: false.
    pub blob_files: bool,
    /// Flush and compact with direct I/O (RocksDB's `use_direct_io_for_flush_and_compaction`)
    /// where the store directory's filesystem takes `O_DIRECT`, probed at every open
    /// (`store/direct_io.rs`); elsewhere the store runs buffered, as with the option off. A
    /// flushed or compacted file is written once and read back only by a later compaction, so
    /// copying it into the page cache buys nothing; on a VM whose balloon hands free pages back
    /// to the host, the flush's copy into fresh page-cache pages was the largest single cost of a
    /// hosting run. Measured at 1,000 sessions and 32 threads: CPU per durable batch -12% (V0)
    /// and -24% (V4) (docs/PERFORMANCE.md, "Direct I/O"). Durability is unchanged:
    /// RocksDB syncs every flushed and compacted file as before; the WAL and reads stay
    /// buffered. Default: true.
    pub direct_io: bool,
    /// Built-in message projections registered when the store opens (more, of any type, with
    /// [`crate::Store::register_message_projection`]). A V4 log holding a projection event
    /// whose type has no registered projection is judged as DSH 0.2 judges it at load:
    /// `corrupt`, "session event "T" requires a message projection; load its owning plugin or
    /// supply its projection definition", and appending one is refused with that message.
    /// Default: none, as DSH 0.2's `SessionStore` starts; a DSH host that loads the
    /// image-offload plugin has `[BuiltinProjection::ImageOffload]`.
    pub message_projections: Vec<BuiltinProjection>,
    /// How many of the latest changes the change log keeps for the store-wide feed
    /// (`Store::subscribe_all`): a consumer that resumes from a cursor at most this many changes
    /// old misses nothing, and an older cursor is refused (resync from a snapshot). The log
    /// holds up to an eighth more between trims, some 40 bytes a change. Default: 1,000,000.
    pub feed_retained_changes: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            durability: Durability::Sync,
            block_cache_bytes: 256 << 20,
            write_buffer_bytes: 128 << 20,
            import_batch_bytes: 8 << 20,
            block_bytes: 64 << 10,
            tail_chunk_bytes: 1 << 20,
            background_jobs: 2,
            hot_sessions: 100_000,
            strict_appends: false,
            v0_reads: V0Reads::Native,
            wal_recycling: true,
            blob_files: false,
            direct_io: true,
            message_projections: Vec::new(),
            feed_retained_changes: 1_000_000,
        }
    }
}

impl Options {
    /// Whether the store reuses its WAL files: [`Options::wal_recycling`] under
    /// `Durability::Sync`.
    pub fn recycles_wal(&self) -> bool {
        self.wal_recycling && self.durability == Durability::Sync
    }

    /// Reject values the store cannot work with.
    pub fn validate(&self) -> Result<()> {
        if self.write_buffer_bytes < (1 << 20) {
            return Err(Error::Options(format!(
                "write_buffer_bytes {} is below 1 MiB",
                self.write_buffer_bytes
            )));
        }
        if self.import_batch_bytes == 0 || self.tail_chunk_bytes == 0 {
            return Err(Error::Options(
                "import_batch_bytes and tail_chunk_bytes must be positive".into(),
            ));
        }
        for (i, p) in self.message_projections.iter().enumerate() {
            if self.message_projections[..i].contains(p) {
                return Err(Error::Options(format!(
                    "message_projections names \"{}\" twice",
                    p.event_type()
                )));
            }
        }
        if self.feed_retained_changes == 0 {
            return Err(Error::Options(
                "feed_retained_changes must be at least 1".into(),
            ));
        }
        if self.background_jobs < 1 {
            return Err(Error::Options(format!(
                "background_jobs {} must be at least 1",
                self.background_jobs
            )));
        }
        Ok(())
    }
}
