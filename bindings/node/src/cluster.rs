//! Cluster mode: the handle opens its store as a serving host of a fleet
//! (`sessionlog_cluster::Host`), PostgreSQL the system of record. The store is the fleet's: its
//! commit hook sends every append's batch to PostgreSQL first, fenced by the epoch this host
//! holds the session at, so appends take the same queue as in a store of its own. The host's
//! leases are renewed in the background while the store is open, and given up when it closes.
//! Which operations the fleet carries is the host's to decide, not this binding's.

use std::time::Duration;

use napi_derive::napi;
use sessionlog_cluster::{Config, Fleet, FleetOptions, Host, Tenure};
use sessionlog_engine::Options;

use crate::reply::Reply;

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

/// Join the fleet `cluster` names with the store at `dir` as a serving host (renewing leases).
pub fn open(dir: &str, store: Options, cluster: ClusterOptions) -> Result<Host, Reply> {
    let config = Config::parse(&cluster.url)?;
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
    let fleet = Fleet::open(dir, config, options)?;
    Ok(Host::in_fleet(fleet, Tenure::Serving)?)
}
