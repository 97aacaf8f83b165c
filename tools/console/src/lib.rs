//! `sessionlog serve`: a read-only web console over a store. One HTTP server (axum) answers a
//! JSON API (`api.rs`: a session's view at a seq, raw events, scrubber marks, token usage, the
//! fork tree; `listing.rs`: the listing and its search; `steps.rs`: the steps of a range of
//! seqs; `follow.rs`: a session followed live as server-sent events) and serves one page built
//! from this crate's `assets/` (`assets.rs`), embedded in the binary.
//!
//! Its reads go through one [`Host`]: a store of its own, opened beside whatever process holds
//! it (a RocksDB secondary), so a host keeps appending while the console reads, each request
//! first catching the reader up (at most once per [`CATCH_UP_EVERY`]); or a host of a fleet
//! (`sessionlog serve --cluster URL`), whose store holds its copies of the fleet's sessions: a
//! read of a session catches that session up with PostgreSQL first ([`Host::sync`]), the listing
//! every session of the fleet (at most once per [`FLEET_LISTING_EVERY`]), and a followed session
//! follows the fleet's commits ([`Fleet::subscribe`](sessionlog_cluster::Fleet::subscribe)).
//! Nothing here writes: every route is GET, any other method is refused with 405.
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
use sessionlog_cluster::Host;
use sessionlog_engine::{LineageEntry, Options, Store};

use crate::reply::ApiError;

pub use guard::check_listen;

/// How often a request catches the reader up with the process that holds the store: often
/// enough that a page reloaded after an append shows it, seldom enough that a burst of requests
/// reads the holder's write-ahead log once.
pub const CATCH_UP_EVERY: Duration = Duration::from_millis(50);

/// How often the listing of a host of a fleet catches every session of the fleet up (one
/// PostgreSQL read per session): a listing reloaded within it shows the copies as they are.
pub const FLEET_LISTING_EVERY: Duration = Duration::from_secs(1);

/// How the console is served.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where to listen. Default: `127.0.0.1:7700`.
    pub listen: SocketAddr,
    /// The secret every request must carry; required unless `listen` is a loopback address.
    /// Default: none.
    pub token: Option<String>,
}

/// What every handler shares: the host, when its reads last caught up, and the archived
/// sessions' scratch stores.
pub(crate) struct Console {
    host: Host,
    /// When the reads last caught up: the store with its holder (a store of its own), or the
    /// listing with the fleet.
    caught_up: Mutex<Option<Instant>>,
    pub(crate) archived: archived::Archived,
}

impl Console {
    fn new(host: Host, options: Options, archive: Option<ArchiveSources>) -> Console {
        Console {
            host,
            caught_up: Mutex::new(None),
            archived: archived::Archived::new(options, archive),
        }
    }

    /// The host: its fleet, for following a session there.
    pub(crate) fn host(&self) -> &Host {
        &self.host
    }

    /// Whether the reads' last catch-up is older than `every`; if so, it counts as done now.
    fn due(&self, every: Duration) -> bool {
        let mut last = self
            .caught_up
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let due = last.is_none_or(|at| at.elapsed() >= every);
        if due {
            *last = Some(Instant::now());
        }
        due
    }

    /// The store to list and search sessions in: caught up with its holder unless it was within
    /// [`CATCH_UP_EVERY`]; in a fleet, every session of the fleet caught up
    /// ([`Host::listing`]) unless that was within [`FLEET_LISTING_EVERY`].
    pub(crate) fn listing(&self) -> Result<Arc<Store>, ApiError> {
        if self.host.name().is_none() {
            return self.caught_up_store();
        }
        if self.due(FLEET_LISTING_EVERY) {
            return Ok(self.host.listing()?);
        }
        Ok(self.host.store())
    }

    /// The store to read session `id` from: caught up with its holder as for the listing; in a
    /// fleet, the session caught up with PostgreSQL first ([`Host::sync`]; one the fleet does
    /// not hold is then not found in the store).
    pub(crate) fn session(&self, id: &str) -> Result<Arc<Store>, ApiError> {
        if self.host.name().is_none() {
            return self.caught_up_store();
        }
        self.host.sync(&[id.to_owned()])?;
        Ok(self.host.read(id)?)
    }

    /// Session `id`'s fork tree: on a store of its own, caught up as for [`Console::session`];
    /// in a fleet, the fleet's ([`Host::lineage`]).
    pub(crate) fn lineage(&self, id: &str) -> Result<Vec<LineageEntry>, ApiError> {
        match self.host.name() {
            None => Ok(self.caught_up_store()?.lineage(id)?),
            Some(_) => Ok(self.host.lineage(id)?),
        }
    }

    /// A store of its own, caught up with its holder unless it was within [`CATCH_UP_EVERY`]
    /// ([`Host::catch_up`]: a new reader once the holder reopened the store).
    fn caught_up_store(&self) -> Result<Arc<Store>, ApiError> {
        match self.due(CATCH_UP_EVERY) {
            true => Ok(self.host.catch_up()?),
            false => Ok(self.host.store()),
        }
    }
}

/// The console's routes over `host`'s reads, behind the guard `config` asks for; archived
/// sessions are fetched through `archive` (none: they answer that they are archived), into
/// scratch stores opened with `options`.
pub fn router(
    host: Host,
    options: Options,
    archive: Option<ArchiveSources>,
    config: &Config,
) -> Router {
    let console = Arc::new(Console::new(host, options, archive));
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

/// Open the store at `db` beside its holder, as the host [`serve`] reads through.
pub fn open_beside(db: &Path, options: Options) -> anyhow::Result<Host> {
    let store = Store::open_beside(db, options)
        .with_context(|| format!("opening the store at {} for reading", db.display()))?;
    Ok(Host::local(store))
}

/// Serve the console over `host` (a store opened with [`open_beside`], or a host of a fleet) on
/// `config.listen` until the process is stopped (archived sessions fetched through `archive`);
/// `ready` is told the address bound (the port, when 0 was asked for) and, with a token, the
/// one-time login URL.
pub fn serve(
    host: Host,
    options: Options,
    archive: Option<ArchiveSources>,
    config: Config,
    ready: impl FnOnce(&str),
) -> anyhow::Result<()> {
    check_listen(&config)?;
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
        let app = router(host, options, archive, &config);
        ready(&guard::announce(bound, &config));
        axum::serve(listener, app)
            .await
            .context("serving the console")
    })
}
