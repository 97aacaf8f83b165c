//! This process as a host of a fleet (cluster mode): the fleet and its lease keeper, held by the
//! open handle; dropped when the store closes, giving the sessions it holds up.

use std::sync::Arc;

use sessionlog_cluster::{Fleet, LeaseKeeper};

/// This process as a host of a fleet: the fleet, and the thread renewing its leases.
pub struct Host {
    fleet: Arc<Fleet>,
    /// Dropped (stopped) before the leases are given up.
    leases: Option<LeaseKeeper>,
}

impl Host {
    /// Host of `fleet`, its leases renewed by `leases` until it is dropped.
    pub fn new(fleet: Arc<Fleet>, leases: LeaseKeeper) -> Host {
        Host {
            fleet,
            leases: Some(leases),
        }
    }

    /// The fleet this host belongs to.
    pub fn fleet(&self) -> &Fleet {
        &self.fleet
    }
}

impl Drop for Host {
    /// Closing: stop renewing, then give up every session held, so another host may take them
    /// without waiting for their leases to run out. When PostgreSQL cannot be reached the rest
    /// are left to their leases rather than tried one by one.
    fn drop(&mut self) {
        drop(self.leases.take());
        for id in self.fleet.held() {
            if self.fleet.release(&id).is_err() {
                break;
            }
        }
    }
}
