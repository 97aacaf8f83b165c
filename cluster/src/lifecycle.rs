//! A session's life on a host's store beyond appends: reads brought up to date with the fleet
//! ([`Fleet::sync`]), one session removed for good by the host holding it ([`Fleet::remove`]),
//! and every session brought up to date at once for a listing, the local copies of sessions purged
//! elsewhere removed ([`Fleet::sync_all`]).
//!
//! Read guarantee: a host serves a session it holds from its own copy (read-your-writes: every
//! batch it acknowledged is there) while PostgreSQL confirmed its hold less than
//! [`FleetOptions::read_bound`](crate::FleetOptions::read_bound) ago (capped at the lease);
//! past that, and for every session it does not hold, a read asks PostgreSQL first and is as of
//! that catch-up. A hold is confirmed only by a statement that extends its lease (an
//! acquisition, a renewal), timed from the instant before it was sent, so the trust ends before
//! the lease PostgreSQL recorded: while a host trusts its copy no other host takes the session
//! over without force, nor purges it. A host deposed by a forced takeover serves its own copy
//! for at most the bound after its last confirmation.

use std::collections::HashSet;
use std::time::Duration;

use sessionlog_engine::RecordedChange;

use crate::catch_up::{catch_up, is_current, local_copy};
use crate::error::{Error, Result};
use crate::fleet::{Fleet, PATIENCE};
use crate::ownership;

impl Fleet {
    /// Bring the local copy of session `id` up to date for reads without taking it; the batches
    /// applied. A session this host holds is served from its own copy while its hold is
    /// confirmed within the read bound (see the module docs); past it, PostgreSQL is asked (the
    /// lease renewed, or the session found taken over and forgotten) and the copy caught up.
    /// One PostgreSQL no longer holds (purged) is removed from the local store too, and refused
    /// as unknown.
    pub fn sync(&self, id: &str) -> Result<u64> {
        if self.trusted(id) {
            return Ok(0);
        }
        let mut pg = self.control();
        // Looked at before PostgreSQL is: a copy already here when PostgreSQL has no row is of a
        // session purged since (a creation reaches PostgreSQL before the local store).
        let had_copy = local_copy(&self.store, id)?.is_some();
        let Some(row) = pg.retrying("reading a session", PATIENCE, |c| ownership::row(c, id))?
        else {
            self.forget(id);
            if had_copy {
                self.store
                    .apply_recorded(&RecordedChange::Purged(vec![id.to_owned()]))?;
            }
            return Err(Error::UnknownSession(id.to_owned()));
        };
        if let Some(holding) = self.held.get(id) {
            // Still this host's (its lease renewed, confirmed for another read bound), or taken
            // over and forgotten: caught up like any session this host does not hold.
            self.confirm(&mut pg, id, &holding)?;
        }
        catch_up(&mut pg, &self.store, &row)
    }

    /// Remove session `id`, which this host holds, from the fleet for good, deleted or not:
    /// from PostgreSQL (fenced by the epoch this host holds it at, so a host taken over removes
    /// nothing) and from the local store; other hosts' copies go when they next catch up. Every
    /// other session, deleted or not, stays.
    pub fn remove(&self, id: &str) -> Result<()> {
        let holding = self
            .held
            .get(id)
            .ok_or_else(|| Error::NotHeld(id.to_owned()))?;
        let host = self.host().to_owned();
        let mut pg = self.control();
        let removed: bool = pg
            .retrying("removing a session", PATIENCE, |c| {
                c.query_one(
                    "SELECT sessionlog.purge_session($1, $2, $3, $4)",
                    &[&host, &holding.root, &id, &holding.epoch],
                )
            })?
            .get(0);
        self.forget(id);
        // Refused: taken over, unless it is gone already (a first try whose connection dropped
        // after it committed).
        if !removed
            && pg
                .retrying("reading a session", PATIENCE, |c| ownership::row(c, id))?
                .is_some()
        {
            return Err(Error::NotHeld(id.to_owned()));
        }
        drop(pg);
        self.store
            .apply_recorded(&RecordedChange::Purged(vec![id.to_owned()]))?;
        Ok(())
    }

    /// Bring the local copies of every session of the fleet up to date for reads (a listing's);
    /// the batches applied. The copies of sessions PostgreSQL no longer holds (purged by another
    /// host) are removed first. One read of the sessions' rows and one of which of their ids
    /// were ever purged tell the copies already current from the rest, so only the sessions
    /// this host holds (their holds confirmed as [`Fleet::sync`] does) and the copies behind,
    /// missing or of an id reused after a purge are caught up: a listing of sessions already
    /// caught up costs a few statements, not some per session. A deleted session this host
    /// has no copy of stays without one.
    pub fn sync_all(&self) -> Result<u64> {
        // The local ids before the rows: a session created here reaches PostgreSQL before the
        // local store, so one listed here and missing from PostgreSQL after was purged.
        let local = self.store.ids()?;
        let rows = self.sessions()?;
        let fleet: HashSet<&str> = rows.iter().map(|r| r.id.as_str()).collect();
        let gone: Vec<String> = local
            .into_iter()
            .filter(|id| !fleet.contains(id.as_str()))
            .collect();
        if !gone.is_empty() {
            for id in &gone {
                self.forget(id);
            }
            self.store.apply_recorded(&RecordedChange::Purged(gone))?;
        }
        let ids: Vec<&str> = fleet.into_iter().collect();
        let reused: HashSet<String> = self
            .control()
            .retrying("reading the purged ids", PATIENCE, |c| {
                c.query(
                    "SELECT id FROM sessionlog.purged WHERE id = ANY($1)",
                    &[&ids],
                )
            })?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let mut applied = 0;
        for row in &rows {
            let caught_up = if self.held.get(&row.id).is_some() {
                self.sync(&row.id)
            } else if is_current(&self.store, row, &reused)? {
                continue;
            } else {
                catch_up(&mut self.control(), &self.store, row)
            };
            match caught_up {
                Ok(n) => applied += n,
                // Purged since the rows were read.
                Err(Error::UnknownSession(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(applied)
    }

    /// Whether this host serves its own copy of `id` without asking PostgreSQL: it holds the
    /// session, confirmed less than the read bound ago, and at most the lease as PostgreSQL
    /// records it (whole seconds).
    fn trusted(&self, id: &str) -> bool {
        let recorded = Duration::from_secs(
            ownership::lease_seconds(self.options.lease)
                .unsigned_abs()
                .into(),
        );
        let bound = self
            .options
            .read_bound
            .min(self.options.lease)
            .min(recorded);
        self.held.get(id).is_some()
            && self
                .confirmed
                .get(id)
                .is_some_and(|at| at.elapsed() < bound)
    }
}
