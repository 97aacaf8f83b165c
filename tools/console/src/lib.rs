//! `sessionlog serve`: a read-only web console over a store. One HTTP server (axum) answers a
//! JSON API (`api.rs`: a session's view at a seq, raw events, scrubber marks, token usage, the
//! fork tree; `listing.rs`: the listing and its search; `steps.rs`: the steps of a range of
//! seqs; `follow.rs`: a session followed live as server-sent events) and serves one page built
//! from this crate's `assets/` (`assets.rs`), embedded in the binary.
//!
//! The store is opened beside whatever process holds it (a RocksDB secondary), so a host keeps
//! appending while the console reads; every request first catches the reader up (at most once
//! per [`CATCH_UP_EVERY`]). Nothing here writes: every route is GET, any other method is refused
//! with 405.
//!
//! A session archived to object storage opens too (`archived.rs`): its reads are answered by a
//! scratch store holding it, fetched from its archive on first use and kept for the next reads.
//!
//! Safety (`guard.rs`): the server listens on loopback unless given a token; with a token every
//! request must carry it (bearer header, or the cookie a one-time login URL sets).

mod api;
mod archived;
mod assets;
mod follow;
mod guard;
mod listing;
mod reply;
mod steps;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::Router;
use sessionlog_archive::ArchiveSources;
use sessionlog_engine::{Options, Store};

pub use guard::check_listen;

/// How often a request catches the reader up with the process that holds the store: often
/// enough that a page reloaded after an append shows it, seldom enough that a burst of requests
/// reads the holder's write-ahead log once.
pub const CATCH_UP_EVERY: Duration = Duration::from_millis(50);

/// How the console is served.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where to listen. Default: `127.0.0.1:7700`.
    pub listen: SocketAddr,
    /// The secret every request must carry; required unless `listen` is a loopback address.
    /// Default: none.
    pub token: Option<String>,
}

/// What every handler shares: the store, when it last caught up, and the archived sessions'
/// scratch stores.
pub(crate) struct Console {
    pub(crate) store: Store,
    caught_up: Mutex<Option<Instant>>,
    pub(crate) archived: archived::Archived,
}

impl Console {
    fn new(store: Store, options: Options, archive: Option<ArchiveSources>) -> Console {
        Console {
            store,
            caught_up: Mutex::new(None),
            archived: archived::Archived::new(options, archive),
        }
    }

    /// The store, caught up with its holder unless it was within [`CATCH_UP_EVERY`].
    pub(crate) fn fresh(&self) -> sessionlog_engine::Result<&Store> {
        let mut last = self
            .caught_up
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.is_none_or(|at| at.elapsed() >= CATCH_UP_EVERY) {
            self.store.catch_up()?;
            *last = Some(Instant::now());
        }
        Ok(&self.store)
    }
}

/// The console's routes over `store`, behind the guard `config` asks for; archived sessions
/// are fetched through `archive` (none: they answer that they are archived), into scratch
/// stores opened with `options`.
pub fn router(
    store: Store,
    options: Options,
    archive: Option<ArchiveSources>,
    config: &Config,
) -> Router {
    let console = Arc::new(Console::new(store, options, archive));
    guard::wrap(
        api_routes()
            .merge(follow::routes())
            .merge(assets::routes())
            .with_state(console),
        config,
    )
}

/// The JSON API's routes (`api.rs`, `listing.rs`, `steps.rs`).
fn api_routes() -> Router<Arc<Console>> {
    use axum::routing::get;
    Router::new()
        .route("/api/sessions", get(listing::sessions))
        .route("/api/sessions/{id}/view", get(api::view))
        .route("/api/sessions/{id}/events", get(api::events))
        .route("/api/sessions/{id}/marks", get(api::marks))
        .route("/api/sessions/{id}/steps", get(steps::steps))
        .route("/api/sessions/{id}/tokens", get(api::tokens))
        .route("/api/sessions/{id}/tree", get(api::tree))
}

/// Open the store at `db` beside its holder and serve the console on `config.listen` until the
/// process is stopped (archived sessions fetched through `archive`); `ready` is told the address
/// bound (the port, when 0 was asked for) and, with a token, the one-time login URL.
pub fn serve(
    db: &Path,
    options: Options,
    archive: Option<ArchiveSources>,
    config: Config,
    ready: impl FnOnce(&str),
) -> anyhow::Result<()> {
    check_listen(&config)?;
    let store = Store::open_beside(db, options.clone())
        .with_context(|| format!("opening the store at {} for reading", db.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the console's runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("listening on {}", config.listen))?;
        let bound = listener.local_addr()?;
        let app = router(store, options, archive, &config);
        ready(&guard::announce(bound, &config));
        axum::serve(listener, app)
            .await
            .context("serving the console")
    })
}
