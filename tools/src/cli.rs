//! Command-line arguments. Doc comments are the help text.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// sessionlog: an embedded store for DSH agent session logs (byte-exact import and export,
/// logical event queries).
#[derive(Parser, Debug)]
#[command(name = "sessionlog", version, about)]
pub struct Cli {
    /// Store directory. Default: $SESSIONLOG_DB, else ./sessionlog-data.
    #[arg(
        long,
        global = true,
        env = "SESSIONLOG_DB",
        default_value = "sessionlog-data"
    )]
    pub db: PathBuf,
    /// Durability of writes: `sync` fsyncs before acknowledging, `buffered` leaves it to the OS.
    #[arg(long, global = true, value_enum, default_value_t = DurabilityArg::Sync)]
    pub durability: DurabilityArg,
    /// The model V0 sessions' views answer in: `native` (DSH 0.1's, indexed) or `migrated`
    /// (DSH 0.2's: the V4 successor made in memory, at its seqs). V1–V3 always answer DSH 0.2's.
    #[arg(long, global = true, value_enum, default_value_t = V0ReadsArg::Native)]
    pub v0_reads: V0ReadsArg,
    /// Create a new WAL file for every memtable instead of reusing old ones in place (the
    /// default under `--durability sync`, which saves a device write per durable commit and
    /// audits the WAL before every open: docs/RELIABILITY.md).
    #[arg(long, global = true)]
    pub no_wal_recycling: bool,
    /// Keep the events' blocks in RocksDB's blob files: compaction no longer rewrites them (for
    /// hosts whose compaction falls behind), for ~1.5x the disk, slower point-in-time reads and
    /// no CPU saved per batch (docs/performance-rounds.md, ninth and twenty-sixth rounds).
    #[arg(long, global = true)]
    pub blob_files: bool,
    /// Flush and compact through the page cache even where the filesystem takes direct I/O
    /// (the default uses it there: less CPU per batch; docs/performance-rounds.md, twelfth round).
    #[arg(long, global = true)]
    pub no_direct_io: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// `--durability` values.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum DurabilityArg {
    /// fsync before acknowledging.
    Sync,
    /// Acknowledge after the WAL write.
    Buffered,
}

/// `--v0-reads` values.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum V0ReadsArg {
    /// DSH 0.1's model.
    Native,
    /// DSH 0.2's, through the migration chain.
    Migrated,
}

/// `ls --order` values.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum OrderArg {
    /// Most recent human prompt first.
    Activity,
    /// Newest `createdAt` first.
    Created,
}

/// Log format generations sessionlog writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormatArg {
    /// DSH 0.1's format (`session.jsonl`).
    #[value(name = "v0")]
    V0,
    /// DSH 0.2's format (`session.v4.jsonl`).
    #[value(name = "v4")]
    V4,
}

impl From<LogFormatArg> for sessionlog_tools::gen::LogFormat {
    fn from(f: LogFormatArg) -> Self {
        match f {
            LogFormatArg::V0 => sessionlog_tools::gen::LogFormat::V0,
            LogFormatArg::V4 => sessionlog_tools::gen::LogFormat::V4,
        }
    }
}

/// `--format` values.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FormatArg {
    /// `session.jsonl`.
    #[value(name = "jsonl")]
    Jsonl,
    /// `session.jsonl.zstd` (DSH's default artifact).
    #[value(name = "jsonl.zstd")]
    JsonlZstd,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Import DSH session logs (files, or directories searched recursively for *.jsonl and
    /// *.jsonl.zstd).
    Import {
        /// Refuse any log DSH's strict reader would not load cleanly (nothing is written).
        #[arg(long)]
        strict: bool,
        /// Print one JSON object per input file.
        #[arg(long)]
        json: bool,
        /// Files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Create an empty session with a DSH header (written as DSH's writer writes it).
    Create {
        /// Session id.
        id: String,
        /// The session's project directory (header `cwd`).
        #[arg(long)]
        cwd: Option<String>,
        /// Creation time in epoch ms (default: now).
        #[arg(long)]
        created_at: Option<i64>,
        /// How the session's bytes are kept and exported by default.
        #[arg(long, value_enum, default_value_t = FormatArg::Jsonl)]
        encoding: FormatArg,
        /// The log format generation: v4 (DSH 0.2: one event per row, ranges, `isSeeded`) or
        /// v0 (DSH 0.1).
        #[arg(long, value_enum, default_value_t = LogFormatArg::V4)]
        format: LogFormatArg,
    },
    /// Append one DSH write batch read from standard input: one event per line,
    /// `{"type","time"?,"data","surfaceOp"?,"sourceEventSeqs"?,"ignorable"?}`. The store assigns
    /// seqs; `time` defaults to now. The whole batch is appended or nothing is.
    Append {
        /// Session id.
        id: String,
        /// Fail unless the session's next seq is this (guards against concurrent writers).
        #[arg(long)]
        expect_seq: Option<u64>,
        /// Also enforce DSH's invariant companion (turn/step numbering and enclosure, tool
        /// call/result pairing).
        #[arg(long)]
        strict: bool,
    },
    /// Migrate a V0–V3 session (or, with --all, every one) to DSH 0.2's current format V4:
    /// the V4 successor becomes the served generation, the source stays as a frozen lower
    /// generation. A refused migration names DSH's reason and writes nothing.
    Migrate {
        /// Session id (omit with --all).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        id: Option<String>,
        /// Migrate every session below V4, with progress; refusals are reported, not fatal.
        #[arg(long)]
        all: bool,
        /// Check what would be published, and publish nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print one JSON object per session.
        #[arg(long)]
        json: bool,
    },
    /// Repair a session as DSH does on load: cut a torn tail, close an interrupted turn.
    Repair {
        /// Session id.
        id: String,
    },
    /// Resume a session: repair it, then append `session/end-seed` unless the log ends with one.
    Resume {
        /// Session id.
        id: String,
    },
    /// Write a session's stored bytes, exactly as imported (or converted with --format).
    Export {
        /// Session id.
        id: String,
        /// Output encoding (default: the encoding the session was imported in).
        #[arg(long, value_enum)]
        format: Option<FormatArg>,
        /// Output file (default: standard output).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// The format generation to write (default: the served, highest one); a lower
        /// generation is written exactly as it was imported.
        #[arg(long)]
        generation: Option<u32>,
    },
    /// Export every session into a DSH session root (`<out>/--<project>--/<id>/session.*`),
    /// each with all its generations.
    ExportAll {
        /// The root directory to write (existing session files are never overwritten).
        #[arg(long)]
        out: PathBuf,
        /// Output encoding (default: each session's imported encoding).
        #[arg(long, value_enum)]
        format: Option<FormatArg>,
    },
    /// Print a session's logical events, one JSON.stringify per line.
    Events {
        /// Session id.
        id: String,
        /// First seq (inclusive).
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// Last seq (inclusive).
        #[arg(long)]
        to: Option<u64>,
    },
    /// The model-visible surface after seq N: node seqs, replaceGeneration, replacements.
    Surface {
        /// Session id.
        id: String,
        /// The seq to look at (default: the last event).
        #[arg(long)]
        at: Option<u64>,
        /// Print one JSON object `{"nodes","replaceGeneration","replacements"}`.
        #[arg(long)]
        json: bool,
    },
    /// The messages the model saw after seq N (DSH's deriveMessages), one JSON.stringify per line.
    Messages {
        /// Session id.
        id: String,
        /// The seq to look at (default: the last event).
        #[arg(long)]
        at: Option<u64>,
    },
    /// The human transcript up to seq N: append-origin surface events, one per line.
    Transcript {
        /// Session id.
        id: String,
        /// The seq to look at (default: the last event).
        #[arg(long)]
        at: Option<u64>,
    },
    /// A projection unit's state after seq N (units: title, todos, tokenUsage, turns,
    /// requestHeader, requestContext, activity, inbox, goal).
    State {
        /// Session id.
        id: String,
        /// The unit.
        unit: String,
        /// The seq to look at (default: the last event).
        #[arg(long)]
        at: Option<u64>,
    },
    /// The request step S of turn T was sent: `{"header","messages"}` rebuilt from the log.
    Request {
        /// Session id.
        id: String,
        /// Turn number.
        #[arg(long)]
        turn: i64,
        /// Step number.
        #[arg(long)]
        step: i64,
    },
    /// Check a recorded request (JSON on standard input) against the log's reconstruction.
    CheckRequest {
        /// Session id.
        id: String,
        /// Turn number.
        #[arg(long)]
        turn: i64,
        /// Step number.
        #[arg(long)]
        step: i64,
    },
    /// List live sessions, most recent human activity first (or newest first with --order
    /// created), a page at a time.
    Ls {
        /// Sort order.
        #[arg(long, value_enum, default_value_t = OrderArg::Activity)]
        order: OrderArg,
        /// Sessions per page (default: all).
        #[arg(long)]
        limit: Option<usize>,
        /// Continue after this cursor (printed at the end of a limited page).
        #[arg(long)]
        after: Option<String>,
        /// One JSON object per session (and `{"next": CURSOR}` last when more remain).
        #[arg(long)]
        json: bool,
    },
    /// Fork a session after event SEQ (default: its last event); the child shares the prefix.
    Fork {
        /// The session to fork.
        source: String,
        /// The new session's id.
        new_id: String,
        /// The last inherited seq.
        #[arg(long)]
        at: Option<u64>,
    },
    /// A session's lineage: ancestors and descendants with their fork boundaries.
    Tree {
        /// Session id.
        id: String,
    },
    /// Hide a session from listings (it stays exportable; undelete restores it).
    Delete {
        /// Session id.
        id: String,
    },
    /// Restore a deleted session.
    Undelete {
        /// Session id.
        id: String,
    },
    /// Remove deleted sessions for good and reclaim their space.
    Purge {
        /// Only sessions deleted at least this long ago, e.g. `30d`, `12h`, `0s`.
        #[arg(long, default_value = "0s")]
        older_than: String,
        /// Say what would be removed, remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Flush and fully compact the store: afterwards no background work is pending, and the
    /// space of purged sessions is free, in blob files too.
    Compact,
    /// Re-check crc32s and index consistency (all sessions, or the named ones).
    Verify {
        /// Session ids (default: the whole store).
        ids: Vec<String>,
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Write synthetic DSH-shaped session files.
    Gen {
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
        /// Number of sessions.
        #[arg(long, default_value_t = 10)]
        sessions: u64,
        /// Random seed (same seed, same bytes).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Approximate events per session.
        #[arg(long)]
        events: Option<u64>,
    },
    /// Crash harness: a child process appends durably from several threads while this process
    /// SIGKILLs it at random moments, reopens the store and checks that every acknowledged batch
    /// is there, seqs have no gap or duplicate, `verify` is clean and export matches the events.
    /// The store is `<dir>/db`; the global `--db` is ignored.
    Stress {
        /// Kill/reopen cycles.
        #[arg(long, default_value_t = 200)]
        cycles: u64,
        /// Appending threads in the child.
        #[arg(long, default_value_t = 4)]
        threads: usize,
        /// Sessions each child thread keeps open at once.
        #[arg(long, default_value_t = 4)]
        sessions_per_thread: usize,
        /// Mean events per generated session.
        #[arg(long, default_value_t = 300)]
        events: u64,
        /// Longest time a child runs before it is killed, in ms (each kill is at a random
        /// moment from 50 ms up to this).
        #[arg(long, default_value_t = 600)]
        max_kill_ms: u64,
        /// Start a fresh store every this many cycles (bounds the cost of each check).
        #[arg(long, default_value_t = 10)]
        cycles_per_store: u64,
        /// Generator and kill-timing seed.
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Working directory (default: a temp dir, removed after a successful run; kept on
        /// failure).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Print the totals as one JSON object.
        #[arg(long)]
        json: bool,
        /// Internal: run as the child worker on `<dir>` (the parent passes this).
        #[arg(long, hide = true)]
        worker: bool,
        /// Cut the power instead of killing the process: the store lives on a LazyFS mount
        /// and every byte not fsynced is dropped at each cut; every writer runs in the child
        /// (its own workload: 3 appending threads of 3 sessions, 120-event feeds, and an admin
        /// thread; `--cycles`, `--cycles-per-store`, `--seed` and `--dir` apply). Needs root
        /// and /dev/fuse. `--durability buffered` is the control that must lose acknowledged
        /// writes.
        #[arg(long)]
        power_loss: bool,
        /// LazyFS's build.sh (default: $SESSIONLOG_LAZYFS_BUILD, else
        /// ../shared/tools/lazyfs/build.sh beside the checkout); LazyFS is built once into
        /// ~/.cache/sessionlog-lazyfs. $SESSIONLOG_LAZYFS names a ready binary instead.
        #[arg(long, env = "SESSIONLOG_LAZYFS_BUILD")]
        lazyfs_build: Option<PathBuf>,
        /// Internal: run as the power-loss child (the parent passes its spec).
        #[arg(long, hide = true)]
        power_worker: Option<String>,
        /// With `--power-loss`: cut the power under this host command instead of sessionlog's
        /// own worker (after `--`; `{db}` is replaced by the store's path on the mount,
        /// `{cycle}` by the cycle number, `{durability}` by `--durability`). The host prints
        /// `ack <session> <events>` once that many events are durable; after each cut every
        /// acknowledged session must hold them, and `verify` must be clean.
        #[arg(last = true)]
        host: Vec<String>,
    },
    /// Run a benchmark workload and print its figures (and ratios against peers).
    Bench {
        #[command(subcommand)]
        workload: BenchWorkload,
    },
}

/// Benchmark workloads.
#[derive(Subcommand, Debug)]
pub enum BenchWorkload {
    /// Point-in-time queries (`messages_at`) at random seqs of sessions of growing size, side by
    /// side with a full replay from the store and with DSH's way: load the JSONL file and fold it.
    Pit {
        /// Session sizes in events (each gets one generated session).
        #[arg(long, value_delimiter = ',', default_values_t = [10_000u64, 100_000, 1_000_000])]
        sizes: Vec<u64>,
        /// Queries per size for sessionlog (the peers run fewer on large sessions, see output).
        #[arg(long, default_value_t = 200)]
        queries: u64,
        /// The log format of the generated sessions (DSH 0.1's v0 or DSH 0.2's v4).
        #[arg(long, value_enum, default_value_t = LogFormatArg::V0)]
        format: LogFormatArg,
        /// Working directory (default: a temp dir, removed after).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Print one JSON object with the raw figures and a `ratios` map.
        #[arg(long)]
        json: bool,
    },
    /// Fork cost against parent size: forks of a small and of a large session, time and bytes.
    Fork {
        /// Events of the large parent.
        #[arg(long, default_value_t = 1_000_000)]
        events: u64,
        /// Forks per parent.
        #[arg(long, default_value_t = 50)]
        forks: u64,
        /// Print one JSON object with the raw figures and a `ratios` map.
        #[arg(long)]
        json: bool,
    },
    /// Listing cost against store size: one `ls --limit` page on a store of many sessions.
    Listing {
        /// Sessions in the store.
        #[arg(long, default_value_t = 1_000_000)]
        sessions: u64,
        /// Page size.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Print one JSON object with the raw figures.
        #[arg(long)]
        json: bool,
    },
    /// Import and export a generated corpus, side by side with `cat` of the same files (or
    /// `zstd -dc` with --zstd).
    ImportExport {
        /// Use a `.jsonl.zstd` corpus laid out as a DSH session root (DSH's default artifact) and
        /// compare with `zstd -dc`.
        #[arg(long)]
        zstd: bool,
        /// Corpus size to generate, in MB.
        #[arg(long, default_value_t = 1024)]
        mb: u64,
        /// Events per generated session.
        #[arg(long, default_value_t = 2000)]
        events: u64,
        /// Working directory for the corpus and the store (default: a temp dir, removed after).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Print one JSON object with the raw figures and a `ratios` map.
        #[arg(long)]
        json: bool,
    },
    /// Many sessions appending durably at once (each with one batch in flight), side by side
    /// with DSH's JSONL and SQLite backends: durable batches/s, events/s, p50/p99
    /// acknowledgement latency. Honours the global `--durability`.
    Hosting {
        /// Concurrent sessions.
        #[arg(long, default_value_t = 100)]
        sessions: usize,
        /// Host threads; each owns every `threads`-th session.
        #[arg(long, default_value_t = 8)]
        threads: usize,
        /// How long each system keeps submitting, in seconds.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Each system first runs the workload this long unmeasured, to measure its steady
        /// state (a recycled WAL, a SQLite WAL past its first checkpoint) rather than its start.
        #[arg(long, default_value_t = 0.0)]
        warmup: f64,
        /// Mean events per generated session (a session that runs out restarts under a new id).
        #[arg(long, default_value_t = 2000)]
        events: u64,
        /// Peers to run beside sessionlog, comma-separated.
        #[arg(long, value_enum, value_delimiter = ',', default_values_t = [PeerArg::Jsonl, PeerArg::Sqlite])]
        peers: Vec<PeerArg>,
        /// The log format of the hosted sessions (DSH 0.1's v0 or DSH 0.2's v4).
        #[arg(long, value_enum, default_value_t = LogFormatArg::V0)]
        format: LogFormatArg,
        /// Run the whole benchmark with the data directory's disk limited to N write requests
        /// per second by the kernel's block throttle (a cgroup the bench creates and removes;
        /// needs root): a provisioned-IOPS cloud volume. Refused where it cannot be set.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        write_iops: Option<u64>,
        /// Working directory for the systems' data (default: a temp dir, removed after).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Print one JSON object with the raw figures per system and a `ratios` map.
        #[arg(long)]
        json: bool,
        /// Run the whole sequence (sessionlog, then the peers) this many times; with more than
        /// one, figures and ratios are medians over the rounds (each ratio taken within its
        /// round) and `rounds` lists every round's.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        rounds: u64,
    },
    /// DSH's own host in Node (its SessionStore, a flush per turn) on sessionlog's DSH backend
    /// and on DSH's JSONL backend (plain and zstd), each in its own Node process, under the same
    /// disk model as `hosting`. Needs Node 22 on PATH and the built binding (`./x node`).
    NodeHosting {
        /// Concurrent sessions.
        #[arg(long, default_value_t = 100)]
        sessions: usize,
        /// How long each backend runs, in seconds.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Limit the data directory's disk to N write requests per second (as `hosting`).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        write_iops: Option<u64>,
        /// The Node benchmark script.
        #[arg(long, default_value = "bindings/node/bench/hosting.mjs")]
        script: PathBuf,
        /// Working directory for the backends' data (default: a temp dir, removed after).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Print one JSON object with the raw figures per backend and a `ratios` map.
        #[arg(long)]
        json: bool,
    },
}

/// `--peers` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PeerArg {
    /// DSH's JSONL backend: a file per session, each batch appended and fdatasync'ed.
    Jsonl,
    /// DSH's SQLite backend: schema 17, WAL, synchronous=FULL, a transaction per batch.
    Sqlite,
}
