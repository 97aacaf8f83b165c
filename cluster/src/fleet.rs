//! A host of the fleet: its embedded store as the index of the sessions it holds, PostgreSQL as
//! the system of record. Appends go through the store's group commit, whose hook (`commit.rs`)
//! commits them to PostgreSQL first; acquiring a session takes it (bumping its owner epoch) and
//! catches the store up; leases are renewed in bulk.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sessionlog_engine::{AppendItem, AppendReceipt, Durability, Options, RecordedChange, Store};

use crate::catch_up::catch_up;
use crate::commit::FleetHook;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::ownership::{self, BySession, Forks, Held, Holding};
use crate::pg::{Limits, Pg};
use crate::schema;

pub use crate::ownership::SessionRow;

/// How long reads and control statements keep trying PostgreSQL.
pub(crate) const PATIENCE: Duration = Duration::from_secs(60);

/// How a host joins the fleet.
#[derive(Clone, Debug)]
pub struct FleetOptions {
    /// This host's name in the fleet: the owner PostgreSQL records. Default: none (required).
    pub host: String,
    /// How long an acquisition or renewal keeps a session from being taken over without
    /// force. Default: 30 s.
    pub lease: Duration,
    /// How long a group commit keeps trying PostgreSQL (reconnecting, reading back a commit
    /// whose outcome is unknown) before its batches are refused as unavailable; longer than a
    /// failover of the primary, so that appends wait one out. Default: 60 s.
    pub commit_patience: Duration,
    /// How long after PostgreSQL last confirmed this host's hold on a session (an acquisition
    /// or a renewal) the host serves reads of it from its own copy without asking PostgreSQL
    /// again ([`Fleet::sync`]): the longest a host deposed by a forced takeover serves reads
    /// that miss the new owner's appends. Used as at most the lease, so that a takeover without
    /// force never finds a host still trusting its copy. Zero asks PostgreSQL at every read.
    /// Default: 10 s.
    pub read_bound: Duration,
    /// The local store's options. Its durability is `Buffered` whatever is given here:
    /// PostgreSQL holds durability. Default: `Options::default()`.
    pub store: Options,
}

impl FleetOptions {
    /// The options of host `host`, every other one its default.
    pub fn new(host: impl Into<String>) -> Self {
        FleetOptions {
            host: host.into(),
            lease: Duration::from_secs(30),
            commit_patience: Duration::from_secs(60),
            read_bound: Duration::from_secs(10),
            store: Options::default(),
        }
    }
}

/// A session this host acquired. Serializes as its row's fields (see [`SessionRow`]) and
/// `caughtUp`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Acquired {
    /// The session's row in PostgreSQL once acquired.
    #[serde(flatten)]
    pub row: SessionRow,
    /// Batches the local store caught up with.
    pub caught_up: u64,
}

/// The thread renewing a host's leases ([`Fleet::keep_leases`]); dropped, it stops.
pub struct LeaseKeeper {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        let (lock, wake) = &*self.stop;
        *lock.lock().unwrap_or_else(PoisonError::into_inner) = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One host of the fleet (see the module docs).
pub struct Fleet {
    pub(crate) store: Arc<Store>,
    /// The connection for acquisitions, catch-up and listings (the hook has its own).
    control: Mutex<Pg>,
    pub(crate) held: Arc<Held>,
    /// When PostgreSQL last confirmed each held session this host's (the instant before the
    /// acquisition or renewal that did): how long its own copy is trusted for reads.
    pub(crate) confirmed: BySession<Instant>,
    pub(crate) forks: Arc<Forks>,
    pub(crate) options: FleetOptions,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("host", &self.options.host)
            .finish_non_exhaustive()
    }
}

impl Fleet {
    /// Join the fleet whose system of record `config` reaches, with the local store at `path`.
    /// The schema must be this build's (`sessionlog cluster init`).
    pub fn open(path: impl AsRef<Path>, config: Config, options: FleetOptions) -> Result<Fleet> {
        if options.host.is_empty() {
            return Err(Error::Config("a host needs a name in the fleet".into()));
        }
        let mut control = Pg::new(config.clone());
        control.retrying("checking the schema", PATIENCE, schema::check)??;
        let as_host = format!("joining the fleet as host \"{}\"", options.host);
        control.retrying(&as_host, PATIENCE, |c| {
            schema::check_caller(c, &options.host)
        })?;
        let store = Store::open(
            path,
            Options {
                durability: Durability::Buffered,
                ..options.store.clone()
            },
        )?;
        let held = Arc::new(Held::default());
        let forks = Arc::new(Forks::default());
        let hook = Arc::new(FleetHook {
            pg: Mutex::new(Pg::new(config).with_limits(Limits::commit(options.commit_patience))),
            host: options.host.clone(),
            lease: options.lease,
            patience: options.commit_patience,
            held: Arc::clone(&held),
            forks: Arc::clone(&forks),
        });
        store.set_commit_hook(hook)?;
        Ok(Fleet {
            store: Arc::new(store),
            control: Mutex::new(control),
            held,
            confirmed: BySession::default(),
            forks,
            options,
        })
    }

    /// The local store: every read, and appends (through the fleet's commit hook).
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// This host's name in the fleet.
    pub fn host(&self) -> &str {
        &self.options.host
    }

    /// Take session `id` for this host and catch the local store up with PostgreSQL. A session
    /// this host holds already has its lease renewed and is caught up (its epoch stays); one
    /// another host holds under a live lease is refused unless `force`. A session whose
    /// catch-up fails is given up again (released in PostgreSQL, not held here): a host never
    /// holds a session it cannot serve.
    pub fn acquire(&self, id: &str, force: bool) -> Result<Acquired> {
        let mut pg = self.control();
        if let Some(holding) = self.held.get(id) {
            if self.confirm(&mut pg, id, &holding)? {
                let row = pg
                    .retrying("reading a session", PATIENCE, |c| ownership::row(c, id))?
                    .ok_or_else(|| Error::UnknownSession(id.to_owned()))?;
                let caught_up = self.caught_up_or_given_up(&mut pg, &row, &holding)?;
                return Ok(Acquired { row, caught_up });
            }
            // Taken over since: this host acquires it anew.
            self.forget(id);
        }
        let host = &self.options.host;
        let lease = self.options.lease;
        let asked = Instant::now();
        let row = pg.retrying("acquiring a session", PATIENCE, |c| {
            ownership::acquire(c, host, id, lease, force)
        })??;
        let holding = Holding {
            root: row.root.clone(),
            epoch: row.epoch,
        };
        let caught_up = self.caught_up_or_given_up(&mut pg, &row, &holding)?;
        // Held from here on: appends name this epoch, and every earlier one is fenced.
        self.held.insert(id, holding);
        self.confirmed.insert(id, asked);
        Ok(Acquired { row, caught_up })
    }

    /// Catch the local copy of `row`'s session, held as `holding`, up; when that fails, give
    /// the session up (in PostgreSQL and here) and say why.
    fn caught_up_or_given_up(
        &self,
        pg: &mut Pg,
        row: &SessionRow,
        holding: &Holding,
    ) -> Result<u64> {
        catch_up(pg, &self.store, row).inspect_err(|_| {
            self.forget(&row.id);
            let host = &self.options.host;
            // Best effort: a release that fails leaves a lease that runs out.
            let _released = pg.retrying("releasing a session", PATIENCE, |c| {
                ownership::release(c, host, &row.id, holding)
            });
        })
    }

    /// Give up session `id`: the next acquisition by any host needs no force. Whether this host
    /// still held it.
    pub fn release(&self, id: &str) -> Result<bool> {
        let Some(holding) = self.held.get(id) else {
            return Ok(false);
        };
        let host = &self.options.host;
        let released = self
            .control()
            .retrying("releasing a session", PATIENCE, |c| {
                ownership::release(c, host, id, &holding)
            })?;
        self.forget(id);
        Ok(released)
    }

    /// Renew the lease of session `id`, held as `holding`, alone (on the control connection
    /// `pg`): whether PostgreSQL still records this host its owner at that epoch. Only a renewal
    /// confirms a hold, never a read of the session's row: a row naming this host whose lease
    /// has run out lets another host take the session over without force or purge it, so a
    /// confirmation that did not extend the lease would let this host trust its copy past that.
    /// Renewed, the hold counts as confirmed at the instant before the statement; refused, the
    /// session is forgotten.
    pub(crate) fn confirm(&self, pg: &mut Pg, id: &str, holding: &Holding) -> Result<bool> {
        let held = [(id.to_owned(), holding.clone())];
        let (host, lease) = (&self.options.host, self.options.lease);
        let asked = Instant::now();
        let renewed = pg.retrying("renewing a lease", PATIENCE, |c| {
            ownership::renew(c, host, lease, &held)
        })?;
        if renewed.iter().any(|r| r == id) {
            self.confirmed.insert(id, asked);
            return Ok(true);
        }
        if self.held.lose(id, holding.epoch) {
            self.confirmed.remove(id);
        }
        Ok(false)
    }

    /// Renew the leases of every held session in one statement; the sessions this host lost
    /// (taken over since), which it no longer holds.
    pub fn renew(&self) -> Result<Vec<String>> {
        let held = self.held.all();
        if held.is_empty() {
            return Ok(Vec::new());
        }
        let host = &self.options.host;
        let lease = self.options.lease;
        let asked = Instant::now();
        let renewed = self.control().retrying("renewing leases", PATIENCE, |c| {
            ownership::renew(c, host, lease, &held)
        })?;
        for id in &renewed {
            self.confirmed.insert(id, asked);
        }
        // Only the holdings renewed here: one acquired again meanwhile, at a new epoch, stays.
        let lost: Vec<String> = held
            .into_iter()
            .filter(|(id, h)| !renewed.contains(id) && self.held.lose(id, h.epoch))
            .map(|(id, _)| id)
            .collect();
        for id in &lost {
            self.confirmed.remove(id);
        }
        Ok(lost)
    }

    /// Renew this host's leases in the background, every third of the lease, until the
    /// returned keeper is dropped. A session found taken over is forgotten (its appends are then
    /// refused as not held); a renewal that fails (PostgreSQL unreachable) is tried again at the
    /// next tick, the leases running out meanwhile only allowing a takeover without force.
    pub fn keep_leases(self: &Arc<Self>) -> Result<LeaseKeeper> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let thread = {
            let (fleet, stop) = (Arc::clone(self), Arc::clone(&stop));
            let every = self.options.lease / 3;
            std::thread::Builder::new()
                .name("sessionlog-leases".into())
                .spawn(move || {
                    let (lock, wake) = &*stop;
                    let mut stopped = lock.lock().unwrap_or_else(PoisonError::into_inner);
                    while !*stopped {
                        let (guard, _) = wake
                            .wait_timeout(stopped, every)
                            .unwrap_or_else(PoisonError::into_inner);
                        stopped = guard;
                        if !*stopped {
                            drop(stopped);
                            let _lost = fleet.renew();
                            stopped = lock.lock().unwrap_or_else(PoisonError::into_inner);
                        }
                    }
                })
                .map_err(|e| Error::Config(format!("starting the lease thread: {e}")))?
        };
        Ok(LeaseKeeper {
            stop,
            thread: Some(thread),
        })
    }

    /// Append through the group commit: each item's batch is committed to PostgreSQL (fenced
    /// by the epoch this host holds its session at), then to the local store. A session is
    /// created by an item carrying its header and held by this host from then on.
    pub fn append_many(
        &self,
        items: Vec<AppendItem>,
    ) -> Vec<sessionlog_engine::Result<AppendReceipt>> {
        self.store.append_many(items)
    }

    /// Whether this host holds session `id`.
    pub fn holds(&self, id: &str) -> bool {
        self.held.get(id).is_some()
    }

    /// The sessions this host holds.
    pub fn held(&self) -> Vec<String> {
        self.held.all().into_iter().map(|(id, _)| id).collect()
    }

    /// Every session in the fleet, as PostgreSQL records it, in id order.
    pub fn sessions(&self) -> Result<Vec<SessionRow>> {
        let rows = self.control().retrying("listing sessions", PATIENCE, |c| {
            c.query(
                "SELECT id, root_id, owner, owner_epoch, next_seq, next_batch, version, zstd, \
                 header, verdict, deleted_at IS NOT NULL, parent_id, seed \
                 FROM sessionlog.sessions ORDER BY id",
                &[],
            )
        })?;
        Ok(rows.iter().map(ownership::session_row).collect())
    }

    /// Mark session `id` (which this host holds) deleted in the fleet and in the local store,
    /// or restore it (`deleted` false).
    pub fn set_deleted(&self, id: &str, deleted: bool) -> Result<()> {
        let holding = self
            .held
            .get(id)
            .ok_or_else(|| Error::NotHeld(id.to_owned()))?;
        let host = &self.options.host;
        let done: bool = self
            .control()
            .retrying("deleting a session", PATIENCE, |c| {
                c.query_one(
                    "SELECT sessionlog.set_deleted($1, $2, $3, $4, $5)",
                    &[host, &holding.root, &id, &holding.epoch, &deleted],
                )
            })?
            .get(0);
        if !done {
            self.forget(id);
            return Err(Error::NotHeld(id.to_owned()));
        }
        self.store.apply_recorded(&match deleted {
            true => RecordedChange::Deleted(id.to_owned()),
            false => RecordedChange::Undeleted(id.to_owned()),
        })?;
        Ok(())
    }

    /// Remove for good the sessions deleted in the fleet more than `older_than` ago that this
    /// host could acquire without force (none under another host's live lease), from
    /// PostgreSQL and from the local store (other hosts' copies go when they next catch up):
    /// the operator's retention sweep. The ids removed.
    pub fn purge(&self, older_than: Duration) -> Result<Vec<String>> {
        let seconds = i64::try_from(older_than.as_secs()).unwrap_or(i64::MAX);
        let host = &self.options.host;
        let rows = self.control().retrying("purging sessions", PATIENCE, |c| {
            c.query("SELECT id FROM sessionlog.purge($1, $2)", &[host, &seconds])
        })?;
        let ids: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        for id in &ids {
            self.forget(id);
        }
        self.store
            .apply_recorded(&RecordedChange::Purged(ids.clone()))?;
        Ok(ids)
    }

    /// Forget that this host holds `id`.
    pub(crate) fn forget(&self, id: &str) {
        self.held.remove(id);
        self.confirmed.remove(id);
    }

    /// The control connection.
    pub(crate) fn control(&self) -> std::sync::MutexGuard<'_, Pg> {
        self.control.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
