//! Node binding of the sessionlog store: the `NativeStore` class behind the `sessionlog` npm
//! package (`index.js` wraps it).
//!
//! Every method returns a promise and runs off the JS thread: appends go to the engine's append
//! queue (`commit.rs`), everything else to worker threads (`workers.rs`). Arguments and results
//! cross as JSON text, parsed on the far side by one `JSON.parse`/`JSON.stringify` call each,
//! which is much cheaper than building values property by property through N-API. A result is
//! its report's serde rendering (`reply.rs`), the same text the CLI's `--json` prints.

mod cluster;
mod commit;
mod objects;
mod ops;
mod reply;
mod tail;
mod workers;

use std::sync::{Arc, RwLock};

use napi::bindgen_prelude::Buffer;
use napi::{Env, JsObject};
use napi_derive::napi;
use sessionlog_cluster::{Fleet, Host, LocalOnly};
use sessionlog_engine::{AppendQueue, BuiltinProjection, Durability, ExportFormat, Options, Store};

use cluster::ClusterOptions;
use commit::{AppendRequest, Creation};
use objects::Endpoint;
use reply::{Pending, Reply};
use workers::{Shared, Workers};

/// Worker threads per store: reads of different sessions run in parallel.
const WORKER_THREADS: usize = 4;

/// With `followIndex`, how long the writes gather before the index catches up with them.
const INDEX_SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

/// One store directory, opened by `open` and closed by `close`.
#[napi]
pub struct NativeStore {
    shared: Shared,
    workers: Workers,
    appends: Option<AppendQueue>,
    /// The subscriptions tail steps left for their next steps (`tail.rs`).
    tails: Arc<tail::Parked>,
}

/// How `open` opens a store.
#[napi(object)]
pub struct OpenOptions {
    /// `sync` or `buffered`.
    pub durability: String,
    /// Reuse WAL files in place (`Options::wal_recycling`, default true).
    pub wal_recycling: Option<bool>,
    /// Keep the events' blocks in blob files (`Options::blob_files`).
    pub blob_files: Option<bool>,
    /// Flush and compact with direct I/O where the filesystem takes it (`Options::direct_io`,
    /// default true).
    pub direct_io: Option<bool>,
    /// Built-in message projections to register, by event type (`Options::message_projections`:
    /// `"image/offload"`). Default: none.
    pub message_projections: Option<Vec<String>>,
    /// Open it as a host of that fleet (`cluster.rs`).
    pub cluster: Option<ClusterOptions>,
    /// Keep the session index caught up in the background (`Host::follow_index`). Default:
    /// false.
    pub follow_index: Option<bool>,
}

/// Group-commit counters.
#[napi(object)]
pub struct CommitStats {
    /// Writes to the store (one WAL write each, and one fsync under `sync`).
    pub writes: f64,
    /// Session batches appended (appends and creations) that those writes carried.
    pub appends: f64,
}

fn bad(message: String) -> Reply {
    Reply::failed("SESSIONLOG_BAD_ARGUMENT", message)
}

/// A seq from JavaScript: a non-negative safe integer.
fn seq_arg(name: &str, v: Option<f64>) -> Result<Option<u64>, Reply> {
    match v {
        None => Ok(None),
        Some(x) if x >= 0.0 && x.fract() == 0.0 && x <= 9_007_199_254_740_991.0 => {
            Ok(Some(x as u64))
        }
        Some(x) => Err(bad(format!(
            "{name} must be a non-negative safe integer, got {x}"
        ))),
    }
}

fn format_arg(format: Option<String>) -> Result<Option<ExportFormat>, Reply> {
    match format.as_deref() {
        None | Some("stored") => Ok(None),
        Some("jsonl") => Ok(Some(ExportFormat::Jsonl)),
        Some("jsonl.zstd") => Ok(Some(ExportFormat::JsonlZstd)),
        Some(other) => Err(bad(format!(
            "format must be \"stored\", \"jsonl\" or \"jsonl.zstd\", got \"{other}\""
        ))),
    }
}

impl NativeStore {
    /// Run `job` with the open host on a worker thread; the returned promise settles with its
    /// reply.
    fn run(
        &self,
        env: &Env,
        job: impl FnOnce(&Host) -> Reply + Send + 'static,
    ) -> napi::Result<JsObject> {
        let (pending, promise) = Pending::new(env)?;
        self.workers.submit(pending, job);
        Ok(promise)
    }

    /// [`NativeStore::run`] reading session `id` from the store the host gives for it.
    fn read(
        &self,
        env: &Env,
        id: String,
        job: impl FnOnce(&Store, &str) -> Reply + Send + 'static,
    ) -> napi::Result<JsObject> {
        self.run(env, move |h| reply::reply(h.read(&id), |s| job(&s, &id)))
    }

    /// [`NativeStore::run`] on the store, for an operation the fleet does not carry (the host
    /// refuses it in cluster mode).
    fn run_local(
        &self,
        env: &Env,
        op: LocalOnly,
        job: impl FnOnce(&Store) -> Reply + Send + 'static,
    ) -> napi::Result<JsObject> {
        self.run(env, move |h| reply::reply(h.local_only(op), |s| job(&s)))
    }

    /// [`NativeStore::run`] with the fleet (the host refuses outside cluster mode).
    fn run_fleet(
        &self,
        env: &Env,
        job: impl FnOnce(&Fleet) -> Reply + Send + 'static,
    ) -> napi::Result<JsObject> {
        self.run(env, move |h| reply::reply(h.fleet(), job))
    }

    /// Hand `request` to the append queue (refused once the store is closing).
    fn submit(&self, request: AppendRequest) {
        match &self.appends {
            Some(queue) => commit::submit(queue, request),
            None => request.pending.settle(Reply::failed(
                "SESSIONLOG_THREADS",
                "the store's append queue could not be started, or the store is closing",
            )),
        }
    }

    /// [`NativeStore::read`] with the seq argument `name` checked first (refused at once when
    /// it is not a non-negative safe integer).
    fn read_at(
        &self,
        env: &Env,
        id: String,
        name: &str,
        at: Option<f64>,
        job: impl FnOnce(&Store, &str, Option<u64>) -> Reply + Send + 'static,
    ) -> napi::Result<JsObject> {
        match seq_arg(name, at) {
            Ok(at) => self.read(env, id, move |s, id| job(s, id, at)),
            Err(reply) => Self::refuse(env, reply),
        }
    }

    /// Settle a promise at once with `reply` (an argument error).
    fn refuse(env: &Env, reply: Reply) -> napi::Result<JsObject> {
        let (pending, promise) = Pending::new(env)?;
        pending.settle(reply);
        Ok(promise)
    }
}

#[napi]
impl NativeStore {
    /// A handle with no store open yet (call `open`).
    #[napi(constructor)]
    pub fn new() -> Self {
        let shared: Shared = Arc::new(RwLock::new(None));
        NativeStore {
            workers: Workers::start(&shared, WORKER_THREADS),
            appends: commit::start(&shared),
            shared,
            tails: Arc::default(),
        }
    }

    /// Open (creating if needed) the store at `dir` with `options`.
    #[napi]
    pub fn open(&self, env: Env, dir: String, options: OpenOptions) -> napi::Result<JsObject> {
        let OpenOptions {
            durability,
            wal_recycling,
            blob_files,
            direct_io,
            message_projections,
            cluster,
            follow_index,
        } = options;
        let durability = match durability.as_str() {
            "sync" => Durability::Sync,
            "buffered" => Durability::Buffered,
            other => {
                return Self::refuse(
                    &env,
                    bad(format!(
                        "durability must be \"sync\" or \"buffered\", got \"{other}\""
                    )),
                )
            }
        };
        let mut projections = Vec::new();
        for ty in message_projections.unwrap_or_default() {
            let builtin = match ty.parse::<BuiltinProjection>() {
                Ok(builtin) => builtin,
                Err(e) => return Self::refuse(&env, bad(format!("messageProjections: {e}"))),
            };
            if !projections.contains(&builtin) {
                projections.push(builtin);
            }
        }
        let (pending, promise) = Pending::new(&env)?;
        let shared = Arc::clone(&self.shared);
        let spawned = std::thread::Builder::new()
            .name("sessionlog-open".into())
            .spawn(move || {
                let options = Options {
                    durability,
                    wal_recycling: wal_recycling.unwrap_or(true),
                    blob_files: blob_files.unwrap_or(false),
                    direct_io: direct_io.unwrap_or(true),
                    message_projections: projections,
                    ..Options::default()
                };
                let opened = match cluster {
                    Some(cluster) => cluster::open(&dir, options, cluster),
                    None => Store::open(&dir, options)
                        .map(Host::local)
                        .map_err(Reply::from),
                }
                .and_then(|host| match follow_index.unwrap_or(false) {
                    true => host
                        .follow_index(INDEX_SETTLE)
                        .map(|()| host)
                        .map_err(Reply::from),
                    false => Ok(host),
                });
                let reply = match (opened, shared.write()) {
                    (Ok(opened), Ok(mut slot)) if slot.is_none() => {
                        *slot = Some(opened);
                        Reply::Done
                    }
                    (Ok(_), Ok(_)) => {
                        Reply::failed("SESSIONLOG_OPEN", "this handle already holds an open store")
                    }
                    (Ok(_), Err(_)) => Reply::failed(
                        "SESSIONLOG_CLOSED",
                        "the store handle was poisoned by a panic",
                    ),
                    (Err(reply), _) => reply,
                };
                pending.settle(reply);
            });
        if spawned.is_err() {
            return Err(napi::Error::from_reason(
                "could not start a thread to open the store",
            ));
        }
        Ok(promise)
    }

    /// Commit every queued append, then close the store (its directory can be reopened); in
    /// cluster mode, give up the sessions this host holds.
    #[napi]
    pub fn close(&mut self, env: Env) -> napi::Result<JsObject> {
        let (pending, promise) = Pending::new(&env)?;
        let appends = self.appends.take();
        let shared = Arc::clone(&self.shared);
        let tails = Arc::clone(&self.tails);
        let spawned = std::thread::Builder::new()
            .name("sessionlog-close".into())
            .spawn(move || {
                drop(appends);
                tails.clear();
                let taken = shared.write().map(|mut slot| slot.take());
                drop(taken);
                pending.settle(Reply::Done);
            });
        if spawned.is_err() {
            return Err(napi::Error::from_reason(
                "could not start a thread to close the store",
            ));
        }
        Ok(promise)
    }

    /// Create an empty session from its header line (JSON text, no newline).
    #[napi]
    pub fn create_session(
        &self,
        env: Env,
        header_line: String,
        zstd: bool,
    ) -> napi::Result<JsObject> {
        self.run(&env, move |h| ops::create_session(h, &header_line, zstd))
    }

    /// Create session `header_line` with its first batch (JSON text of an array of events) in
    /// one commit, keeping what DSH's writer writes even where DSH's reader will refuse it.
    #[napi]
    pub fn create_as_written(
        &self,
        env: Env,
        header_line: String,
        zstd: bool,
        events_json: String,
    ) -> napi::Result<JsObject> {
        let (pending, promise) = Pending::new(&env)?;
        let id = sessionlog_codec::format::header::parse_header(header_line.as_bytes())
            .map(|h| h.id.to_string_lossy())
            .unwrap_or_default();
        self.submit(AppendRequest {
            id,
            expected_next_seq: Some(0),
            events_json,
            as_written: true,
            create: Some(Creation { header_line, zstd }),
            pending,
        });
        Ok(promise)
    }

    /// Append a batch (JSON text of an array of events) to session `id`, group-committed;
    /// `as_written`: through DSH's seam (see `commit::AppendRequest`).
    #[napi]
    pub fn append(
        &self,
        env: Env,
        id: String,
        expected_next_seq: Option<f64>,
        events_json: String,
        as_written: Option<bool>,
    ) -> napi::Result<JsObject> {
        let (pending, promise) = Pending::new(&env)?;
        let expected_next_seq = match seq_arg("expectedNextSeq", expected_next_seq) {
            Ok(v) => v,
            Err(reply) => {
                pending.settle(reply);
                return Ok(promise);
            }
        };
        let request = AppendRequest {
            id,
            expected_next_seq,
            events_json,
            as_written: as_written.unwrap_or(false),
            create: None,
            pending,
        };
        self.submit(request);
        Ok(promise)
    }

    /// `{next, events}`: session `id`'s events from `from_seq` on, waiting at most `wait_ms`
    /// (at most a second) for the first to commit (in cluster mode, on any host of the fleet);
    /// `Store.tail` in `index.js` loops on it. It runs on a thread of its own, so a waiting
    /// tail holds up no read.
    #[napi]
    pub fn tail_next(
        &self,
        env: Env,
        id: String,
        from_seq: f64,
        wait_ms: f64,
    ) -> napi::Result<JsObject> {
        let from = match seq_arg("fromSeq", Some(from_seq)) {
            Ok(from) => from.unwrap_or(0),
            Err(reply) => return Self::refuse(&env, reply),
        };
        let wait = std::time::Duration::from_millis(wait_ms.clamp(0.0, 1000.0) as u64);
        let (pending, promise) = Pending::new(&env)?;
        let shared = Arc::clone(&self.shared);
        let tails = Arc::clone(&self.tails);
        std::thread::Builder::new()
            .name("sessionlog-tail".into())
            .spawn(move || {
                pending.settle(workers::with_host(&shared, |h| {
                    tail::next(h, &tails, &id, from, wait)
                }));
            })
            .map_err(|_| napi::Error::from_reason("could not start a thread for the tail"))?;
        Ok(promise)
    }

    /// The end of a tail of session `id` whose next step would have started at `from_seq`: the
    /// subscription its last step left is dropped (`tail.rs`).
    #[napi]
    pub fn tail_end(&self, id: String, from_seq: f64) {
        if let Ok(Some(from)) = seq_arg("fromSeq", Some(from_seq)) {
            self.tails.drop_at(&id, from);
        }
    }

    /// Header, events from `from_seq`, revision and torn flag of session `id` (or `null`).
    #[napi]
    pub fn load(&self, env: Env, id: String, from_seq: Option<f64>) -> napi::Result<JsObject> {
        self.read_at(&env, id, "fromSeq", from_seq, |s, id, from| {
            ops::load(s, id, from.unwrap_or(0))
        })
    }

    /// Events, bytes, verdict and revision token of session `id` (or `null`).
    #[napi]
    pub fn summary(&self, env: Env, id: String) -> napi::Result<JsObject> {
        self.read(&env, id, ops::summary_of)
    }

    /// Every live session's summary; in cluster mode, every live session of the fleet, the
    /// store caught up on each first.
    #[napi]
    pub fn list(&self, env: Env) -> napi::Result<JsObject> {
        self.run(&env, |h| reply::reply(h.listing(), |s| ops::list(&s)))
    }

    /// Session `id`'s bytes (`format`: `stored`, the default, `jsonl` or `jsonl.zstd`;
    /// `generation`: a format version).
    #[napi]
    pub fn export_bytes(
        &self,
        env: Env,
        id: String,
        format: Option<String>,
        generation: Option<u32>,
    ) -> napi::Result<JsObject> {
        match format_arg(format) {
            Ok(format) => self.read(&env, id, move |s, id| {
                objects::read_through(s, &Endpoint::default(), id, |s| {
                    ops::export(s, id, format, generation)
                })
            }),
            Err(reply) => Self::refuse(&env, reply),
        }
    }

    /// Repair session `id` as DSH does on load (cut a torn tail, close an interrupted turn).
    #[napi]
    pub fn repair(&self, env: Env, id: String) -> napi::Result<JsObject> {
        self.run_local(&env, LocalOnly::Repair, move |s| {
            reply::report(s.repair(&id))
        })
    }

    /// Cut session `id`'s torn tail, closing nothing.
    #[napi]
    pub fn cut_torn_tail(&self, env: Env, id: String) -> napi::Result<JsObject> {
        self.run_local(&env, LocalOnly::CutTornTail, move |s| {
            reply::report(s.cut_torn_tail(&id))
        })
    }

    /// Fork `source` into `new_id` at seq `at` (default: its end); in cluster mode through
    /// the fleet.
    #[napi]
    pub fn fork(
        &self,
        env: Env,
        source: String,
        new_id: String,
        at: Option<f64>,
    ) -> napi::Result<JsObject> {
        match seq_arg("at", at) {
            Ok(at) => self.run(&env, move |h| reply::report(h.fork(&source, at, &new_id))),
            Err(reply) => Self::refuse(&env, reply),
        }
    }

    /// The messages the model saw at seq `at` (default: the end).
    #[napi]
    pub fn messages_at(&self, env: Env, id: String, at: Option<f64>) -> napi::Result<JsObject> {
        self.read_at(&env, id, "seq", at, |s, id, at| {
            objects::read_through(s, &Endpoint::default(), id, |s| {
                reply::reply(s.messages_at(id, at), ops::values_json)
            })
        })
    }

    /// Projection unit `unit`'s state at seq `at` (default: the end).
    #[napi]
    pub fn state_at(
        &self,
        env: Env,
        id: String,
        unit: String,
        at: Option<f64>,
    ) -> napi::Result<JsObject> {
        self.read_at(&env, id, "seq", at, move |s, id, at| {
            objects::read_through(s, &Endpoint::default(), id, |s| {
                reply::reply(s.state_at(id, &unit, at), |v| {
                    Reply::Json(sessionlog_codec::json::stringify(&v))
                })
            })
        })
    }

    /// How many events of each type session `id` held after seq `at` (`Store::event_kinds`).
    #[napi]
    pub fn event_kinds(&self, env: Env, id: String, at: Option<f64>) -> napi::Result<JsObject> {
        self.read_at(&env, id, "seq", at, |s, id, at| {
            reply::report(s.event_kinds(id, at))
        })
    }

    /// Import one session log held in `bytes` (`.jsonl` or `.jsonl.zstd`); in cluster mode
    /// through the fleet.
    #[napi]
    pub fn import_bytes(&self, env: Env, name: String, bytes: Buffer) -> napi::Result<JsObject> {
        let bytes: Vec<u8> = bytes.into();
        self.run(&env, move |h| reply::report(h.import(&name, &bytes)))
    }

    /// Remove session `id` for good (delete, then purge every deleted session); in cluster
    /// mode that session alone, from the fleet (it must be held by this host).
    #[napi]
    pub fn remove(&self, env: Env, id: String) -> napi::Result<JsObject> {
        self.run(&env, move |h| reply::reply(h.remove(&id), |()| Reply::Done))
    }

    /// Take session `id` for this host of the fleet and catch the store up with PostgreSQL;
    /// `force` takes it from a host whose lease has not run out (that host is then fenced).
    #[napi]
    pub fn acquire(&self, env: Env, id: String, force: Option<bool>) -> napi::Result<JsObject> {
        self.run_fleet(&env, move |f| {
            reply::report(f.acquire(&id, force.unwrap_or(false)))
        })
    }

    /// Give up session `id` (another host may then take it without force); whether it was held.
    #[napi]
    pub fn release(&self, env: Env, id: String) -> napi::Result<JsObject> {
        self.run_fleet(&env, move |f| reply::report(f.release(&id)))
    }

    /// Catch the store up with PostgreSQL on `ids` (every session of the fleet when empty),
    /// but for the sessions this host holds.
    #[napi]
    pub fn sync(&self, env: Env, ids: Vec<String>) -> napi::Result<JsObject> {
        self.run(&env, move |h| reply::report(h.sync(&ids)))
    }

    /// This host's name in the fleet, or `None` outside cluster mode (or when not open).
    #[napi]
    pub fn cluster_host(&self) -> Option<String> {
        self.shared
            .read()
            .ok()
            .and_then(|slot| slot.as_ref().and_then(|h| h.name().map(str::to_owned)))
    }

    /// Export every session to object storage at `to` (`s3://BUCKET/PREFIX`) as a DSH session
    /// root, in `format` (default `stored`: each session in the encoding it is stored in, so an
    /// import of the root gives back the same bytes); `endpoint` and `region` over
    /// the AWS environment's.
    #[napi]
    pub fn export_all(
        &self,
        env: Env,
        to: String,
        format: Option<String>,
        endpoint: Option<String>,
        region: Option<String>,
    ) -> napi::Result<JsObject> {
        let endpoint = Endpoint::new(endpoint, region);
        match format_arg(format) {
            Ok(format) => self.run_local(&env, LocalOnly::ExportAll, move |s| {
                objects::export_all(s, &endpoint, &to, format)
            }),
            Err(reply) => Self::refuse(&env, reply),
        }
    }

    /// Archive to `to` every session with no activity for `older_than_ms`.
    #[napi]
    pub fn archive(
        &self,
        env: Env,
        to: String,
        older_than_ms: f64,
        endpoint: Option<String>,
        region: Option<String>,
    ) -> napi::Result<JsObject> {
        if !(0.0..=9_007_199_254_740_991.0).contains(&older_than_ms) {
            return Self::refuse(
                &env,
                bad(format!(
                    "olderThanMs must be a non-negative number, got {older_than_ms}"
                )),
            );
        }
        let endpoint = Endpoint::new(endpoint, region);
        self.run_local(&env, LocalOnly::Archive, move |s| {
            objects::archive(s, &endpoint, &to, older_than_ms as i64)
        })
    }

    /// Bring archived session `id` back into the store.
    #[napi]
    pub fn restore(
        &self,
        env: Env,
        id: String,
        endpoint: Option<String>,
        region: Option<String>,
    ) -> napi::Result<JsObject> {
        let endpoint = Endpoint::new(endpoint, region);
        self.run_local(&env, LocalOnly::Restore, move |s| {
            objects::restore(s, &endpoint, &id)
        })
    }

    /// Find sessions (`Store::search`); `query` is the JSON of the query object. In a fleet,
    /// every session of the fleet is caught up first ([`Host::listing`]), as `list` does.
    #[napi]
    pub fn search(&self, env: Env, query: String) -> napi::Result<JsObject> {
        self.run(&env, move |h| {
            reply::reply(h.listing(), |s| ops::search(&s, &query))
        })
    }

    /// Rebuild the session index (`Store::reindex`).
    #[napi]
    pub fn reindex(&self, env: Env) -> napi::Result<JsObject> {
        self.run(&env, |h| ops::reindex(&h.store()))
    }

    /// Verify the given sessions (all when empty).
    #[napi]
    pub fn verify(&self, env: Env, ids: Vec<String>) -> napi::Result<JsObject> {
        self.run(&env, move |h| ops::verify(&h.store(), &ids))
    }

    /// Whether the open store flushes and compacts with direct I/O (`Store::direct_io`); false
    /// when no store is open.
    #[napi]
    pub fn direct_io(&self) -> bool {
        self.shared
            .read()
            .is_ok_and(|slot| slot.as_ref().is_some_and(|h| h.store().direct_io()))
    }

    /// The store's metrics as Prometheus text exposition (`Store::metrics`, rendered), read on
    /// a worker thread: RocksDB's figures take its locks.
    #[napi]
    pub fn metrics(&self, env: Env) -> napi::Result<JsObject> {
        self.run(&env, |h| {
            reply::reply(h.store().metrics(), |m| Reply::Text(m.to_prometheus()))
        })
    }

    /// How appends were grouped into writes so far (zeros when no store is open).
    #[napi]
    pub fn commit_stats(&self) -> CommitStats {
        let stats = self
            .shared
            .read()
            .ok()
            .and_then(|slot| slot.as_ref().map(|h| h.store().commit_stats()))
            .unwrap_or_default();
        CommitStats {
            writes: stats.writes as f64,
            appends: stats.appends as f64,
        }
    }
}

impl Default for NativeStore {
    fn default() -> Self {
        Self::new()
    }
}
