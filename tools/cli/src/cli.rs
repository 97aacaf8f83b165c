//! Command-line arguments. Doc comments are the help text.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use sessionlog_tools_common::args::{LogFormatArg, StoreArgs};

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
    #[command(flatten)]
    pub store: StoreArgs,
    /// Run as a host of a fleet whose system of record is this PostgreSQL (a libpq URL:
    /// `postgres://user@host[:port][,host2…]/db?sslmode=verify-full&sslrootcert=ca.pem`; the
    /// password from the URL, PGPASSWORD or the password file). The store is then this host's
    /// index: reads catch it up from PostgreSQL first, writes commit there first.
    #[arg(
        long,
        global = true,
        env = "SESSIONLOG_CLUSTER",
        hide_env_values = true
    )]
    pub cluster: Option<String>,
    /// This host's name in the fleet (with `--cluster`). Default: $SESSIONLOG_HOST, else the
    /// machine's host name.
    #[arg(long, global = true, env = "SESSIONLOG_HOST")]
    pub host: Option<String>,
    #[command(flatten)]
    pub s3: S3Args,
    #[command(subcommand)]
    pub command: Command,
}

/// How to reach object storage for `s3://` URLs. Credentials are read as AWS's tools read them,
/// from `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` (never from the
/// command line, where the process list would show them).
#[derive(clap::Args, Debug)]
pub struct S3Args {
    /// The S3-compatible service's URL. Default: $AWS_ENDPOINT_URL_S3, else $AWS_ENDPOINT_URL,
    /// else AWS for the region.
    #[arg(long, global = true)]
    pub endpoint_url: Option<String>,
    /// The region requests are signed for. Default: $AWS_REGION, else $AWS_DEFAULT_REGION,
    /// else us-east-1.
    #[arg(long, global = true)]
    pub region: Option<String>,
    /// How long a failing request to object storage is retried before it fails, in seconds.
    #[arg(long, global = true, default_value_t = 20)]
    pub s3_retry_timeout: u64,
}

/// `ls --order` values.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum OrderArg {
    /// Most recent human prompt first.
    Activity,
    /// Newest `createdAt` first.
    Created,
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

/// `export --format` and `export-all --format` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExportFormatArg {
    /// Each session in the encoding it is stored in, byte for byte.
    #[value(name = "stored")]
    Stored,
    /// `session.jsonl`.
    #[value(name = "jsonl")]
    Jsonl,
    /// `session.jsonl.zstd`.
    #[value(name = "jsonl.zstd")]
    JsonlZstd,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Import DSH session logs (files, or directories searched recursively for *.jsonl and
    /// *.jsonl.zstd), or the DSH session root at an s3://BUCKET/PREFIX URL.
    Import {
        /// Refuse any log DSH's strict reader would not load cleanly (nothing is written).
        #[arg(long)]
        strict: bool,
        /// Print one JSON object per input file.
        #[arg(long)]
        json: bool,
        /// Files, directories or s3://BUCKET/PREFIX URLs.
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
        /// Print the receipt as one JSON object `{"firstSeq","count"}`.
        #[arg(long)]
        json: bool,
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
        /// Print the report as one JSON object `{"cutBytes","recovered","closers","endSeed"}`.
        #[arg(long)]
        json: bool,
    },
    /// Resume a session: repair it, then append `session/end-seed` unless the log ends with one.
    Resume {
        /// Session id.
        id: String,
        /// Print the report as one JSON object `{"cutBytes","recovered","closers","endSeed"}`.
        #[arg(long)]
        json: bool,
    },
    /// Write a session's stored bytes, exactly as imported (or converted with --format).
    Export {
        /// Session id.
        id: String,
        /// Output encoding.
        #[arg(long, value_enum, default_value_t = ExportFormatArg::Stored)]
        format: ExportFormatArg,
        /// Output file (default: standard output).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// The format generation to write (default: the served, highest one); a lower
        /// generation is written exactly as it was imported.
        #[arg(long)]
        generation: Option<u32>,
    },
    /// Export every session into a DSH session root (`<out>/--<project>--/<id>/session.*`),
    /// each with all its generations: a directory, or object storage.
    #[command(group = clap::ArgGroup::new("root").required(true))]
    ExportAll {
        /// The root directory to write (existing session files are never overwritten).
        #[arg(long, group = "root")]
        out: Option<PathBuf>,
        /// The root in object storage, s3://BUCKET/PREFIX: objects uploaded in parallel and never
        /// overwritten; one already there with the same bytes counts as done, so a rerun
        /// resumes.
        #[arg(long, group = "root")]
        to: Option<String>,
        /// Output encoding: `stored` writes each session in the encoding it is stored in, so
        /// that `import` of the root stores the same bytes; `jsonl` or `jsonl.zstd` converts.
        #[arg(long, value_enum, default_value_t = ExportFormatArg::Stored)]
        format: ExportFormatArg,
        /// Print a summary as one JSON object (with --to).
        #[arg(long, requires = "to")]
        json: bool,
    },
    /// Move sessions with no activity for a while to object storage: each is uploaded, read
    /// back and compared, then its bytes in the store are replaced by the record of where they
    /// are. Reads fetch an archived session back; `restore` brings it back for writing.
    Archive {
        /// Only sessions whose last event (else creation) is at least this old, e.g. `30d`.
        #[arg(long)]
        older_than: String,
        /// The archive root, s3://BUCKET/PREFIX (laid out as a DSH session root).
        #[arg(long)]
        to: String,
        /// Print a summary as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Bring an archived session back into the store (its objects are then deleted).
    Restore {
        /// Session id.
        id: String,
        /// Print the outcome as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Print a session's events from a seq on, exactly as `events` prints them, and with
    /// --follow each new one as it commits (also while another process holds the store: it is
    /// read beside it, catching up every 50 ms). With --all, every change to every session in
    /// commit order, one JSON object a line, each with the cursor to resume after it.
    Tail {
        /// Session id (none with --all).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        id: Option<String>,
        /// Where to start: a seq (default 0), or with --all a cursor a line printed (`next`;
        /// default: the first change the store recorded).
        #[arg(long)]
        from: Option<String>,
        /// Keep printing new events as they commit, until interrupted.
        #[arg(long)]
        follow: bool,
        /// Every session's changes instead of one session's events.
        #[arg(long)]
        all: bool,
    },
    /// Serve the web console: a read-only page and JSON API over the store, opened beside the
    /// process that holds it, or, with --cluster, over the fleet's sessions, read into this
    /// host's store (--db, --host) as they are read (docs/CONSOLE.md). Prints the address once
    /// listening.
    Serve {
        /// Where to listen; an address other than loopback requires --token.
        #[arg(long, default_value = "127.0.0.1:7700")]
        listen: std::net::SocketAddr,
        /// The secret every request must carry (`Authorization: Bearer TOKEN`, or the cookie the
        /// one-time login URL printed at start sets). Default: $SESSIONLOG_CONSOLE_TOKEN.
        #[arg(long, env = "SESSIONLOG_CONSOLE_TOKEN", hide_env_values = true)]
        token: Option<String>,
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
    /// How many events of each type the session held after seq N, as one JSON object.
    Kinds {
        /// Session id.
        id: String,
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
        /// Print the report as one JSON object `{"id","seed","endSeed","closers"}`.
        #[arg(long)]
        json: bool,
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
    /// The store's metrics: RocksDB's state (memtable, SST and blob bytes per column family,
    /// compaction debt, the block cache, write stalls) and the write path's counters, which count
    /// from this command's open of the store (a host serves its own: docs/METRICS.md).
    Stats {
        /// Print the Prometheus text exposition (format 0.0.4) instead of the summary.
        #[arg(long)]
        prometheus: bool,
    },
    /// Find sessions by what they hold: message text and filters (every one given must hold),
    /// newest first, a page at a time. The session index is caught up with the log first
    /// (docs/SEARCH.md). With --json: one object per session, then `{"next", "watermark"}`.
    Search(SearchArgs),
    /// Rebuild the session index (`search/` in the store directory) from the log.
    Reindex {
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Re-check crc32s and index consistency (all sessions, or the named ones).
    Verify {
        /// Session ids (default: the whole store).
        ids: Vec<String>,
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
        /// Also read every archived session's objects back and check their sizes and SHA-256s.
        #[arg(long)]
        objects: bool,
    },
    /// The fleet's PostgreSQL (with `--cluster`): its schema, the sessions' owners, ownership.
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
    },
}

/// `sessionlog cluster` subcommands.
#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Create (or bring up to date) the schema, as the URL's role (its owner), and grant the
    /// host role what hosts need; prints the privilege statements applied.
    Init {
        /// Existing login roles to make hosts (granted the host role); each acts as the host of
        /// its own name.
        #[arg(long = "host-role")]
        host_roles: Vec<String>,
    },
    /// Make host NAME's login role (named NAME, made without a password when missing) a member
    /// of the host role, as the schema's owner: that role runs the fleet's functions as host
    /// NAME and as no other. Set its password (`ALTER ROLE`) or certificate as the server
    /// authenticates.
    AddHost {
        /// The host's name, which is its login role's.
        name: String,
    },
    /// The schema's version, the sessions and who owns them.
    Status {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Take a session for this host (bumping its owner epoch) and catch the store up.
    Acquire {
        /// Session id.
        id: String,
        /// Take it even while another host's lease is live.
        #[arg(long)]
        force: bool,
        /// Print the session's row and the batches caught up as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Give a session up: the next host takes it without force.
    Release {
        /// Session id.
        id: String,
    },
}

/// `sessionlog search`'s arguments.
#[derive(clap::Args, Debug)]
pub struct SearchArgs {
    /// Words to find in message text (user, assistant text and reasoning, tool results),
    /// all of them; "a quoted phrase" for words in order.
    pub text: Option<String>,
    /// Sessions that called this tool.
    #[arg(long)]
    pub tool: Option<String>,
    /// Sessions with a tool result marked isError (of --tool's calls, with --tool).
    #[arg(long)]
    pub tool_error: bool,
    /// Sessions that used this model (`model` or `provider/model`).
    #[arg(long)]
    pub model: Option<String>,
    /// Sessions whose last event is at or after T (epoch ms, or a UTC date
    /// 2026-05-01[T12:00:00Z]).
    #[arg(long, value_name = "T")]
    pub since: Option<String>,
    /// Sessions created at or before T (as --since).
    #[arg(long, value_name = "T")]
    pub until: Option<String>,
    /// Sessions whose token usage totals reach N.
    #[arg(long, value_name = "N")]
    pub min_tokens: Option<u64>,
    /// Sessions with a turn started and not ended.
    #[arg(long)]
    pub open: bool,
    /// Sessions with this verdict: clean, torn, corrupt or unsupported.
    #[arg(long, value_name = "V")]
    pub verdict: Option<String>,
    /// Forks of this session.
    #[arg(long, value_name = "ID")]
    pub parent: Option<String>,
    /// Sessions per page.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// The cursor a previous page printed as `next`.
    #[arg(long, value_name = "CURSOR")]
    pub after: Option<String>,
    /// Print JSON lines.
    #[arg(long)]
    pub json: bool,
}
