//! One host interface: what a front end (the CLI, the Node binding, the console) asks of
//! sessionlog, whether the store is one of its own or this host's index of a fleet. Each
//! operation is offered here once, and here alone it is decided how it runs in a fleet: carried
//! through PostgreSQL, read after catching up, or refused with [`Error::NotCarried`].
//!
//! | operation | a store of its own | a host of a fleet |
//! |---|---|---|
//! | [`create_session`](Host::create_session), [`append`](Host::append) | the store | through the commit hook (PostgreSQL first) |
//! | [`fork`](Host::fork), [`import`](Host::import), [`import_path`](Host::import_path) | the store | [`Fleet::fork`], [`Fleet::import`] |
//! | [`set_deleted`](Host::set_deleted), [`remove`](Host::remove), [`purge`](Host::purge) | the store | PostgreSQL first, then the store |
//! | [`read`](Host::read): every query of one session | the store | after catch-up (one-shot), or as last synced (serving) |
//! | [`lineage`](Host::lineage): a session's fork tree | the store | PostgreSQL's rows of its lineage root |
//! | [`subscribe`](Host::subscribe): following one session | the engine's subscription | [`Fleet::subscribe`]: whichever host appends, woken by `LISTEN/NOTIFY` |
//! | [`listing`](Host::listing): listing | the store | after every session of the fleet is caught up |
//! | [`store`](Host::store): reads across the store (search, verify, metrics) | the store | this host's copies |
//! | [`local_only`](Host::local_only): [`LocalOnly`]'s operations | the store | refused |
//! | [`fleet`](Host::fleet), [`sync`](Host::sync): acquire, release, catch up | refused | the fleet |
//!
//! Invariant: every write a front end makes goes through a method here, so in a fleet it
//! reaches PostgreSQL or is refused before anything is written; the store's commit layer refuses
//! any write past its commit hook besides (`Error::IndexOfFleet`).

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use sessionlog_codec::format::event::NewEvent;
use sessionlog_codec::json::Value;
use sessionlog_engine::{
    AppendReceipt, ForkReport, ImportOptions, ImportReport, IndexFollower, LineageEntry,
    PurgeReport, SourceEncoding, Store, Subscription,
};

use crate::error::{Error, Result};
use crate::fleet::{Fleet, LeaseKeeper};
use crate::follow::FleetSubscription;

/// How long a host of a fleet lives, which decides how it holds sessions and how fresh its
/// reads are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tenure {
    /// One command (the CLI): a read of a session catches it up from PostgreSQL first; a write
    /// to a session takes it for this host first (refused while another host's lease is live);
    /// every session held is given up when the host closes.
    OneShot,
    /// A process serving many calls (the Node binding, the console): it takes the sessions it
    /// writes itself ([`Fleet::acquire`]) and keeps them, its leases renewed in the background;
    /// a read serves the local copy as of its last catch-up ([`Host::sync`]); the sessions held
    /// are given up when the host closes.
    Serving,
}

/// An operation on a store of its own that the fleet does not carry: each would change, or
/// read as a whole, one host's store rather than the fleet's sessions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LocalOnly {
    /// Repairing a session as DSH does on load.
    Repair,
    /// Resuming a session (repair, then append DSH's closers).
    Resume,
    /// Cutting a session's torn tail.
    CutTornTail,
    /// Migrating sessions to the current format.
    Migrate,
    /// Compacting the store.
    Compact,
    /// Archiving sessions to object storage.
    Archive,
    /// Restoring an archived session.
    Restore,
    /// Exporting every session of the store.
    ExportAll,
    /// Importing a session root from object storage.
    ImportFromObjectStorage,
    /// Importing a file only when DSH's reader loads it clean (`strict`).
    StrictImport,
    /// Importing a session's earlier generations.
    GenerationsImport,
    /// Listing what a purge would remove.
    DryRunPurge,
    /// Following every session's commits (`tail --all`): a fleet follows one session at a time
    /// (`Fleet::subscribe`).
    TailAll,
}

impl std::fmt::Display for LocalOnly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LocalOnly::Repair => "repair",
            LocalOnly::Resume => "resume",
            LocalOnly::CutTornTail => "cutting a torn tail",
            LocalOnly::Migrate => "migrate",
            LocalOnly::Compact => "compact",
            LocalOnly::Archive => "archive",
            LocalOnly::Restore => "restore",
            LocalOnly::ExportAll => "export-all",
            LocalOnly::ImportFromObjectStorage => "an import from object storage",
            LocalOnly::StrictImport => "a strict import",
            LocalOnly::GenerationsImport => "an import of a session's earlier generations",
            LocalOnly::DryRunPurge => "a dry run of purge",
            LocalOnly::TailAll => "tail --all",
        })
    }
}

impl LocalOnly {
    /// The refusal of this operation on host `host` of a fleet.
    pub fn refused(self, host: &str) -> Error {
        Error::NotCarried {
            what: self.to_string(),
            host: host.to_owned(),
        }
    }
}

/// A fleet this host belongs to.
struct Member {
    fleet: Arc<Fleet>,
    tenure: Tenure,
    /// Renewing leases (serving hosts); stopped before the sessions held are given up.
    leases: Option<LeaseKeeper>,
}

/// What a front end serves: a store of its own, or this host's index of a fleet (see the module
/// docs). Dropped (or [`closed`](Host::close)), a host of a fleet gives up the sessions it holds.
pub struct Host {
    /// The session index kept caught up in the background, once started
    /// ([`Host::follow_index`]); first, so it stops before the store it holds is released.
    follower: Mutex<Option<IndexFollower>>,
    /// The store. Replaced only for a reader beside the process that holds it, when that
    /// process reopened the store ([`Host::catch_up`]).
    store: RwLock<Arc<Store>>,
    member: Option<Member>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("fleet", &self.name())
            .finish_non_exhaustive()
    }
}

impl Host {
    /// A host of a store of its own.
    pub fn local(store: Store) -> Host {
        Host {
            follower: Mutex::new(None),
            store: RwLock::new(Arc::new(store)),
            member: None,
        }
    }

    /// Host `fleet` for `tenure` (a serving host starts renewing its leases).
    pub fn in_fleet(fleet: Fleet, tenure: Tenure) -> Result<Host> {
        let fleet = Arc::new(fleet);
        let leases = match tenure {
            Tenure::Serving => Some(fleet.keep_leases()?),
            Tenure::OneShot => None,
        };
        Ok(Host {
            follower: Mutex::new(None),
            store: RwLock::new(Arc::clone(fleet.store())),
            member: Some(Member {
                fleet,
                tenure,
                leases,
            }),
        })
    }

    /// The store: in a fleet, this host's copies of the sessions, as of their last catch-up.
    /// For reads across the store (search, verify, metrics) and the append queue.
    pub fn store(&self) -> Arc<Store> {
        Arc::clone(&self.store.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Keep the session index caught up in the background until the host is dropped: after
    /// each change, once the writes of `settle` have gathered ([`IndexFollower`]), so a search
    /// finds them indexed. Refused for a reader beside the process that holds the store (that
    /// process keeps the index).
    pub fn follow_index(&self, settle: Duration) -> Result<()> {
        let follower = IndexFollower::start(self.store(), settle)?;
        *self.follower.lock().unwrap_or_else(PoisonError::into_inner) = Some(follower);
        Ok(())
    }

    /// Catch a store read beside the process that holds it up with that process
    /// ([`Store::catch_up`]), opening a new reader when that process reopened the store; the
    /// store to read from. A store written here has nothing to catch up with.
    pub fn catch_up(&self) -> Result<Arc<Store>> {
        let store = self.store();
        match store.catch_up() {
            Err(sessionlog_engine::Error::HolderReopened { .. }) => self.reopened(&store),
            caught_up => {
                caught_up?;
                Ok(store)
            }
        }
    }

    /// The store after `stale`, whose holder reopened it: a new reader beside the holder,
    /// opened here unless another caller has already replaced `stale`.
    fn reopened(&self, stale: &Arc<Store>) -> Result<Arc<Store>> {
        let mut slot = self.store.write().unwrap_or_else(PoisonError::into_inner);
        if Arc::ptr_eq(&slot, stale) {
            *slot = Arc::new(stale.reopen_beside()?);
        }
        Ok(Arc::clone(&slot))
    }

    /// This host's name in its fleet, or none for a store of its own.
    pub fn name(&self) -> Option<&str> {
        self.member.as_ref().map(|m| m.fleet.host())
    }

    /// The fleet, for what only a fleet does (acquire, release, its listing); refused for a
    /// store of its own.
    pub fn fleet(&self) -> Result<&Fleet> {
        self.member
            .as_ref()
            .map(|m| m.fleet.as_ref())
            .ok_or(Error::NotAFleet)
    }

    /// The store, for an operation the fleet does not carry; refused in a fleet.
    pub fn local_only(&self, op: LocalOnly) -> Result<Arc<Store>> {
        match self.name() {
            Some(host) => Err(op.refused(host)),
            None => Ok(self.store()),
        }
    }

    /// The store to read session `id` from: in a one-shot host of a fleet, caught up with
    /// PostgreSQL first (served from this host's own copy within the read bound when it holds
    /// the session, [`Fleet::sync`]); a serving host reads its copy as of its last
    /// [`sync`](Host::sync).
    pub fn read(&self, id: &str) -> Result<Arc<Store>> {
        if let Some(m) = &self.member {
            if m.tenure == Tenure::OneShot {
                m.fleet.sync(id)?;
            }
        }
        Ok(self.store())
    }

    /// Session `id`'s fork tree ([`Store::lineage`]): in a fleet, the fleet's, read from
    /// PostgreSQL ([`Fleet::lineage`]), whichever hosts made its forks.
    pub fn lineage(&self, id: &str) -> Result<Vec<LineageEntry>> {
        match &self.member {
            Some(m) => m.fleet.lineage(id),
            None => Ok(self.store().lineage(id)?),
        }
    }

    /// Follow session `id` from seq `from_seq` on: every event with seq ≥ `from_seq`, in order,
    /// each once, those stored first, then each as it commits ([`Followed::next_within`]). In
    /// a fleet, whichever host commits it ([`Fleet::subscribe`]: the host's copy caught up from
    /// PostgreSQL when a commit is announced), whatever this host's tenure.
    pub fn subscribe(&self, id: &str, from_seq: u64) -> Result<Followed> {
        match &self.member {
            Some(m) => Ok(Followed::fleet(m.fleet.subscribe(id, from_seq)?)),
            None => {
                let store = self.store();
                Ok(Followed::local(store.subscribe(id, from_seq)?, store))
            }
        }
    }

    /// The store to list sessions from: in a fleet, every session of the fleet caught up first
    /// (the copies of sessions purged elsewhere removed), so the listing is the fleet's.
    pub fn listing(&self) -> Result<Arc<Store>> {
        if self.member.is_some() {
            self.sync(&[])?;
        }
        Ok(self.store())
    }

    /// Catch the store up with PostgreSQL on `ids`, or, when empty, on every session of the
    /// fleet ([`Fleet::sync_all`]: the copies of sessions purged elsewhere removed first); the
    /// batches applied. A session the fleet does not hold is passed over. Refused for a store
    /// of its own.
    pub fn sync(&self, ids: &[String]) -> Result<u64> {
        let fleet = self.fleet()?;
        if ids.is_empty() {
            return fleet.sync_all();
        }
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

    /// In a one-shot host of a fleet, take session `id` for this host before writing it.
    fn hold(&self, id: &str) -> Result<()> {
        match &self.member {
            Some(m) if m.tenure == Tenure::OneShot => m.fleet.acquire(id, false).map(drop),
            _ => Ok(()),
        }
    }

    /// Create an empty session from its header line; its id. In a fleet, this host holds it.
    pub fn create_session(&self, header_line: &str, encoding: SourceEncoding) -> Result<String> {
        Ok(self.store().create_session(header_line, encoding)?)
    }

    /// Append `events` to session `id`, at `expected_next_seq` when given.
    pub fn append(
        &self,
        id: &str,
        expected_next_seq: Option<u64>,
        events: Vec<NewEvent>,
    ) -> Result<AppendReceipt> {
        self.hold(id)?;
        Ok(self.store().append(id, expected_next_seq, events)?)
    }

    /// Fork `source` after seq `at` (default: its end) into `new_id`. In a fleet the child is
    /// DSH's fork file, committed to PostgreSQL, and this host holds it.
    pub fn fork(&self, source: &str, at: Option<u64>, new_id: &str) -> Result<ForkReport> {
        match &self.member {
            Some(m) => m.fleet.fork(source, at, new_id),
            None => Ok(self.store().fork(source, at, new_id)?),
        }
    }

    /// Import one session log held in `bytes` (`.jsonl` or `.jsonl.zstd`, named `name` in
    /// errors). In a fleet it is committed to PostgreSQL whole or refused whole, and this host
    /// holds it; the report is then of the session as stored.
    pub fn import(&self, name: &str, bytes: &[u8]) -> Result<ImportReport> {
        let Some(m) = &self.member else {
            let options = ImportOptions::default();
            return Ok(
                if bytes.starts_with(&sessionlog_codec::format::zstd::MAGIC_BYTES) {
                    self.store().import_zstd(name, bytes, &options)?
                } else {
                    self.store()
                        .import_jsonl(name, bytes, &options, &mut |_| {})?
                },
            );
        };
        let imported = m.fleet.import(name, bytes)?;
        Ok(ImportReport::from(&self.store().summary(&imported.id)?))
    }

    /// Import the session file at `path` with `options` (`progress` told the bytes read). In a
    /// fleet as [`import`](Host::import) does, refusing what the fleet does not carry (a strict
    /// import, a session's earlier generations).
    pub fn import_path(
        &self,
        path: &Path,
        options: &ImportOptions,
        progress: &mut dyn FnMut(u64),
    ) -> Result<ImportReport> {
        let Some(host) = self.name() else {
            return Ok(self.store().import_path(path, options, progress)?);
        };
        if options.strict {
            return Err(LocalOnly::StrictImport.refused(host));
        }
        if options.generations.is_some() {
            return Err(LocalOnly::GenerationsImport.refused(host));
        }
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| Error::Import {
            name: name.clone(),
            why: format!("reading it: {e}"),
        })?;
        progress(bytes.len() as u64);
        self.import(&name, &bytes)
    }

    /// Mark session `id` deleted (hidden, restorable), or restore it (`deleted` false). In a
    /// fleet PostgreSQL first, fenced by this host's hold on the session.
    pub fn set_deleted(&self, id: &str, deleted: bool) -> Result<()> {
        let Some(m) = &self.member else {
            match deleted {
                true => self.store().delete(id)?,
                false => self.store().undelete(id)?,
            }
            return Ok(());
        };
        self.hold(id)?;
        m.fleet.set_deleted(id, deleted)
    }

    /// Remove session `id` for good, deleted or not. On a store of its own: deleted, then every
    /// deleted session purged; in a fleet that session alone, from PostgreSQL first.
    pub fn remove(&self, id: &str) -> Result<()> {
        let Some(m) = &self.member else {
            self.store().delete(id)?;
            self.store().purge(0, false)?;
            return Ok(());
        };
        self.hold(id)?;
        m.fleet.remove(id)
    }

    /// Remove for good the sessions deleted more than `older_than` ago (`dry_run`: only say
    /// which). In a fleet from PostgreSQL first ([`Fleet::purge`]); the report then names the
    /// sessions, its byte figures 0 (they are one store's), and a dry run is refused.
    pub fn purge(&self, older_than: Duration, dry_run: bool) -> Result<PurgeReport> {
        let Some(m) = &self.member else {
            let ms = i64::try_from(older_than.as_millis()).unwrap_or(i64::MAX);
            return Ok(self.store().purge(ms, dry_run)?);
        };
        if dry_run {
            return Err(LocalOnly::DryRunPurge.refused(m.fleet.host()));
        }
        Ok(PurgeReport {
            sessions: m.fleet.purge(older_than)?,
            kept: Vec::new(),
            session_bytes: 0,
            stored_bytes_before: 0,
            stored_bytes_after: 0,
        })
    }

    /// Close the host: in a fleet, stop renewing leases and give up every session held, so
    /// another host may take them without waiting for their leases to run out; the first
    /// failure to give one up (PostgreSQL unreachable: the rest are left to their leases).
    pub fn close(mut self) -> Result<()> {
        self.give_up()
    }

    fn give_up(&mut self) -> Result<()> {
        let Some(m) = &mut self.member else {
            return Ok(());
        };
        drop(m.leases.take());
        for id in m.fleet.held() {
            m.fleet.release(&id)?;
        }
        Ok(())
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _given_up = self.give_up();
    }
}

/// A session followed through a [`Host`] ([`Host::subscribe`]): on a store of its own the
/// engine's subscription, in a fleet a [`FleetSubscription`]; the same guarantee either way
/// (each event once, in seq order, from the requested seq on). It holds no borrow of the host:
/// each call is given it.
#[derive(Debug)]
pub struct Followed(Follows);

#[derive(Debug)]
enum Follows {
    /// The engine's subscription, and the store it was made on (a host beside a holder that
    /// reopened the store reads a new one: the subscription is made again there).
    Local(Subscription, Arc<Store>),
    Fleet(Box<FleetSubscription>),
}

impl Followed {
    pub(crate) fn local(sub: Subscription, store: Arc<Store>) -> Followed {
        Followed(Follows::Local(sub, store))
    }

    pub(crate) fn fleet(sub: FleetSubscription) -> Followed {
        Followed(Follows::Fleet(Box::new(sub)))
    }

    /// The session followed.
    pub fn id(&self) -> &str {
        match &self.0 {
            Follows::Local(sub, _) => sub.id(),
            Follows::Fleet(sub) => sub.id(),
        }
    }

    /// The seq of the next event this subscription yields: where a restarted follower resumes.
    pub fn next_seq(&self) -> u64 {
        match &self.0 {
            Follows::Local(sub, _) => sub.next_seq(),
            Follows::Fleet(sub) => sub.next_seq(),
        }
    }

    /// The session's committed end (the seq its next event will take) as of the last catch-up:
    /// with it a front end tells a follower that starts past the end that it is waiting.
    pub fn end(&self, host: &Host) -> Result<u64> {
        match &self.0 {
            Follows::Local(sub, _) => Ok(sub.end(&host.store())?),
            Follows::Fleet(sub) => sub.end(host.fleet()?),
        }
    }

    /// The next event (seq, event), waiting at most `timeout` for it to commit (in a fleet, on
    /// any host); `None` when none came by then. `host` is the one it was made on. Beside a
    /// process that reopened the store, it goes on from the next seq on a new reader
    /// ([`Host::catch_up`]).
    pub fn next_within(&mut self, host: &Host, timeout: Duration) -> Result<Option<(u64, Value)>> {
        match &mut self.0 {
            Follows::Local(sub, made_on) => loop {
                let store = host.store();
                if !Arc::ptr_eq(&store, made_on) {
                    *sub = store.subscribe(sub.id(), sub.next_seq())?;
                    *made_on = store;
                    continue;
                }
                match sub.next_within(&store, timeout) {
                    Err(sessionlog_engine::Error::HolderReopened { .. }) => {
                        host.reopened(&store)?;
                    }
                    next => return Ok(next?),
                }
            },
            Follows::Fleet(sub) => sub.next_within(host.fleet()?, timeout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host of a store of its own offers every operation but the fleet's, which it refuses
    /// with one error.
    #[test]
    fn a_store_of_its_own_refuses_only_the_fleets_operations() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path(), sessionlog_engine::Options::default()).expect("open");
        let host = Host::local(store);
        assert_eq!(host.name(), None);
        assert!(matches!(host.fleet(), Err(Error::NotAFleet)));
        assert!(matches!(host.sync(&[]), Err(Error::NotAFleet)));
        assert!(host.local_only(LocalOnly::Repair).is_ok());
        let header = r#"{"type":"session","version":0,"id":"s","createdAt":1,"cwd":"/w","delegationDepth":0}"#;
        host.create_session(header, SourceEncoding::Jsonl)
            .expect("created");
        assert_eq!(host.listing().expect("listing").ids().expect("ids"), ["s"]);
        host.set_deleted("s", true).expect("deleted");
        let purged = host.purge(Duration::ZERO, false).expect("purged");
        assert_eq!(purged.sessions, ["s"]);
        host.close().expect("closed");
    }

    /// A host reading beside the store's holder reads what the holder wrote after it reopened
    /// the store: its catch-up opens a new reader, and what it followed goes on from there.
    #[test]
    fn a_host_beside_a_holder_that_reopened_the_store_catches_up_on_a_new_reader() {
        let dir = tempfile::tempdir().expect("temp dir");
        let options = sessionlog_engine::Options::default;
        let header = r#"{"type":"session","version":0,"id":"s","createdAt":1,"cwd":"/w","delegationDepth":0}"#;
        let event = |n: u64| {
            let line = format!(
                r#"{{"type":"user/message","time":{n},"data":{{"content":[],"source":{{"kind":"user"}},"role":"user","id":"u{n}"}},"surfaceOp":"append"}}"#
            );
            NewEvent::from_value(&sessionlog_codec::json::parse(&line).expect("json"))
                .expect("event")
        };
        let holder = Store::open(dir.path(), options()).expect("open");
        holder
            .create_session(header, SourceEncoding::Jsonl)
            .expect("created");
        holder.append("s", Some(0), vec![event(0)]).expect("append");
        let host = Host::local(Store::open_beside(dir.path(), options()).expect("beside"));
        let mut followed = host.subscribe("s", 0).expect("subscribe");
        let first = followed.next_within(&host, Duration::ZERO).expect("next");
        assert_eq!(first.map(|(seq, _)| seq), Some(0));
        drop(holder);
        let holder = Store::open(dir.path(), options()).expect("reopen");
        holder.append("s", Some(1), vec![event(1)]).expect("append");
        let before = host.store();
        assert_eq!(
            host.catch_up()
                .expect("caught up")
                .summary("s")
                .expect("s")
                .events,
            2
        );
        assert!(!Arc::ptr_eq(&before, &host.store()), "a new reader");
        let second = followed
            .next_within(&host, Duration::from_secs(10))
            .expect("next");
        assert_eq!(second.map(|(seq, _)| seq), Some(1));
    }

    /// Every operation the fleet does not carry is named in its refusal.
    #[test]
    fn a_refusal_names_the_operation_and_the_host() {
        let e = LocalOnly::CutTornTail.refused("h1").to_string();
        assert!(
            e.starts_with("cutting a torn tail is not carried by the fleet")
                && e.contains("\"h1\""),
            "{e}"
        );
    }
}
