//! Cluster mode: the handle opens its store as a host of a fleet (`sessionlog_cluster::Fleet`),
//! PostgreSQL the system of record. The store is the fleet's: its commit hook sends every
//! append's batch to PostgreSQL first, fenced by the epoch this host holds the session at, so
//! appends take the same queue as in a store of its own. The host's leases are renewed in the
//! background while the store is open, and given up when it closes.
//!
//! Invariant: in cluster mode, every write reaches PostgreSQL; the writes the fleet does not
//! carry (repair, archive, restore) are refused here rather than made to the local store alone,
//! and a fork or an import goes through the fleet (its file committed to PostgreSQL).

use std::sync::Arc;
use std::time::Duration;

use napi_derive::napi;
use sessionlog_cluster::{Config, Error, Fleet, FleetOptions};
use sessionlog_engine::{ImportReport, Options};

use crate::host::Host;
use crate::ops;
use crate::reply::{code_of, Reply};
use crate::workers::Opened;

/// How a handle joins a fleet.
#[napi(object)]
pub struct ClusterOptions {
    /// PostgreSQL's connection URL (libpq's form; the password never shows in an error).
    pub url: String,
    /// This host's name in the fleet.
    pub host: String,
    /// Lease length in milliseconds (default 30 000).
    pub lease: Option<f64>,
    /// How long after PostgreSQL last confirmed this host's hold on a session its reads are
    /// served from the local copy without asking PostgreSQL, in milliseconds (default 10 000;
    /// at most the lease; 0 asks at every read).
    pub read_bound: Option<f64>,
}

/// Join the fleet `cluster` names with the store at `dir`, and start renewing leases.
pub fn open(dir: &str, store: Options, cluster: ClusterOptions) -> Result<Opened, Reply> {
    let config = Config::parse(&cluster.url).map_err(failure)?;
    let mut options = FleetOptions {
        store,
        ..FleetOptions::new(cluster.host)
    };
    if let Some(ms) = cluster.lease {
        if !(1000.0..=86_400_000.0).contains(&ms) {
            return Err(Reply::failed(
                "SESSIONLOG_BAD_ARGUMENT",
                format!("cluster.lease must be from 1000 to 86400000 ms, got {ms}"),
            ));
        }
        options.lease = Duration::from_millis(ms as u64);
    }
    if let Some(ms) = cluster.read_bound {
        if !(0.0..=86_400_000.0).contains(&ms) {
            return Err(Reply::failed(
                "SESSIONLOG_BAD_ARGUMENT",
                format!("cluster.readBound must be from 0 to 86400000 ms, got {ms}"),
            ));
        }
        options.read_bound = Duration::from_millis(ms as u64);
    }
    let fleet = Arc::new(Fleet::open(dir, config, options).map_err(failure)?);
    let leases = fleet.keep_leases().map_err(failure)?;
    Ok(Opened {
        store: Arc::clone(fleet.store()),
        host: Some(Host::new(fleet, leases)),
    })
}

/// Run `job` with the fleet, or refuse: the store is not in cluster mode.
pub fn with_fleet(opened: &Opened, job: impl FnOnce(&Fleet) -> Reply) -> Reply {
    match &opened.host {
        Some(host) => job(host.fleet()),
        None => Reply::failed(
            "SESSIONLOG_NOT_CLUSTER",
            "the store was not opened in cluster mode (open it with { cluster: { url, host } })",
        ),
    }
}

/// Refuse `what` in cluster mode (a write the fleet does not carry), else run `job`.
pub fn local_only(opened: &Opened, what: &str, job: impl FnOnce() -> Reply) -> Reply {
    match &opened.host {
        Some(host) => Reply::failed(
            "SESSIONLOG_NOT_IN_FLEET",
            format!(
                "{what} is not carried by the fleet: host \"{}\" would change its local store only",
                host.fleet().host()
            ),
        ),
        None => job(),
    }
}

/// Fork `source` after seq `at` (default: its end) into `new_id`: through the fleet in cluster
/// mode (the child, which this host then holds, committed to PostgreSQL as DSH's fork file),
/// else in the store (sharing the parent's prefix).
pub fn fork(opened: &Opened, source: &str, at: Option<u64>, new_id: &str) -> Reply {
    match &opened.host {
        Some(host) => match host.fleet().fork(source, at, new_id) {
            Ok(report) => Reply::json(&report),
            Err(e) => failure(e),
        },
        None => crate::reply::report(opened.store.fork(source, at, new_id)),
    }
}

/// Import the session log `bytes` (named `name` in errors): through the fleet in cluster mode
/// (committed to PostgreSQL whole or refused whole; this host then holds it), else into the
/// store. Its `ImportReport` (in cluster mode, of the session as stored).
pub fn import_bytes(opened: &Opened, name: &str, bytes: &[u8]) -> Reply {
    let Some(host) = &opened.host else {
        return ops::import_bytes(&opened.store, name, bytes);
    };
    let imported = host
        .fleet()
        .import(name, bytes)
        .and_then(|i| Ok(opened.store.summary(&i.id)?));
    match imported {
        Ok(s) => Reply::json(&ImportReport::from(&s)),
        Err(e) => failure(e),
    }
}

/// Take session `id` for this host (`force`: even from a host with a live lease) and catch the
/// store up: its `Acquired` (the session's row, and `caughtUp`).
pub fn acquire(fleet: &Fleet, id: &str, force: bool) -> Reply {
    match fleet.acquire(id, force) {
        Ok(acquired) => Reply::json(&acquired),
        Err(e) => failure(e),
    }
}

/// Catch the store up on `ids` (every live session of the fleet when empty, the copies of
/// sessions purged elsewhere removed first): the batches applied. A session this host holds
/// is served from its own copy within the read bound (`Fleet::sync`).
pub fn sync(fleet: &Fleet, ids: Vec<String>) -> Reply {
    let ids = match ids.is_empty() {
        false => ids,
        true => match fleet.forget_purged().and_then(|_| live(fleet)) {
            Ok(ids) => ids,
            Err(e) => return failure(e),
        },
    };
    match catch_up(fleet, &ids) {
        Ok(applied) => Reply::json(&applied),
        Err(e) => failure(e),
    }
}

/// Every live session of the fleet, as the store lists them, caught up first. The fleet decides
/// which: a session deleted or purged elsewhere is not listed, whatever copy this store keeps.
pub fn list(fleet: &Fleet) -> Reply {
    let listed = live(fleet).and_then(|ids| {
        catch_up(fleet, &ids)?;
        let store = fleet.store();
        Ok(ids
            .iter()
            .filter_map(|id| store.summary(id).ok())
            .collect::<Vec<_>>())
    });
    match listed {
        Ok(summaries) => ops::list_of(&summaries),
        Err(e) => failure(e),
    }
}

/// The ids of the fleet's sessions that are not deleted.
fn live(fleet: &Fleet) -> Result<Vec<String>, Error> {
    Ok(fleet
        .sessions()?
        .into_iter()
        .filter(|r| !r.deleted)
        .map(|r| r.id)
        .collect())
}

/// Catch the store up on `ids` (`Fleet::sync`: a purged session's copy removed, a held one
/// trusted within the read bound); the batches applied.
fn catch_up(fleet: &Fleet, ids: &[String]) -> Result<u64, Error> {
    let mut applied = 0;
    for id in ids {
        match fleet.sync(id) {
            Ok(n) => applied += n,
            Err(Error::UnknownSession(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(applied)
}

/// Remove session `id` (which this host holds) from the fleet for good: that session alone,
/// every other one, deleted or not, kept.
pub fn remove(fleet: &Fleet, id: &str) -> Reply {
    match fleet.remove(id) {
        Ok(_) => Reply::Done,
        Err(e) => failure(e),
    }
}

/// A fleet failure as a reply with its stable code.
pub fn failure(e: Error) -> Reply {
    let code = match &e {
        Error::Store(inner) => code_of(inner),
        Error::Config(_) => "SESSIONLOG_CLUSTER_CONFIG",
        Error::Postgres { .. } => "SESSIONLOG_UNAVAILABLE",
        Error::Schema(_) => "SESSIONLOG_CLUSTER_SCHEMA",
        Error::UnknownSession(_) => "SESSIONLOG_UNKNOWN_SESSION",
        Error::Owned { .. } => "SESSIONLOG_OWNED",
        Error::NotHeld(_) => "SESSIONLOG_FENCED",
        Error::Diverged { .. } => "SESSIONLOG_DIVERGED",
        Error::Import { .. } => "SESSIONLOG_NOT_IN_FLEET",
        _ => "SESSIONLOG_ERROR",
    };
    Reply::failed(code, e.to_string())
}
