//! Session ownership: which sessions this host holds, at which owner epoch, and the statements
//! that take, renew and give them up (`sessionlog.acquire`, `renew`, `release`).
//!
//! Invariant: a session is in [`Held`] only at the epoch this host acquired (or created) it at;
//! every batch the host commits names that epoch, so once another host bumps it, this host's
//! batches are refused, whatever [`Held`] still says.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use postgres::Client;

use crate::error::{Error, Result};

/// Where a held session lives in PostgreSQL and the epoch this host holds it at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Holding {
    pub(crate) root: String,
    pub(crate) epoch: i64,
}

/// A value per session id, shared between threads.
#[derive(Debug)]
pub(crate) struct BySession<T>(RwLock<HashMap<String, T>>);

impl<T> Default for BySession<T> {
    fn default() -> Self {
        BySession(RwLock::new(HashMap::new()))
    }
}

impl<T: Clone> BySession<T> {
    /// The value of `id`, if it has one.
    pub(crate) fn get(&self, id: &str) -> Option<T> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    /// Give `id` the value `value`.
    pub(crate) fn insert(&self, id: &str, value: T) {
        self.0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.to_owned(), value);
    }

    /// Forget `id`.
    pub(crate) fn remove(&self, id: &str) {
        self.0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    /// Give `id` the value `value` unless it has one already; whether it was given.
    pub(crate) fn claim(&self, id: &str, value: T) -> bool {
        let mut map = self.0.write().unwrap_or_else(PoisonError::into_inner);
        match map.contains_key(id) {
            true => false,
            false => {
                map.insert(id.to_owned(), value);
                true
            }
        }
    }

    /// Forget `id` if its value is still one `stale` says is stale (checked and removed under
    /// one lock, so a value set meanwhile stays); whether it was forgotten.
    pub(crate) fn remove_if(&self, id: &str, stale: impl FnOnce(&T) -> bool) -> bool {
        let mut map = self.0.write().unwrap_or_else(PoisonError::into_inner);
        match map.get(id).is_some_and(stale) {
            true => map.remove(id).is_some(),
            false => false,
        }
    }

    /// Every session with its value.
    pub(crate) fn all(&self) -> Vec<(String, T)> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(id, v)| (id.clone(), v.clone()))
            .collect()
    }
}

/// The sessions this host holds: removed when released or taken over.
pub(crate) type Held = BySession<Holding>;

impl Held {
    /// Forget `id` because its holding at `epoch` was refused (taken over): only while this
    /// host still holds it at that epoch, so a late answer about an old epoch never erases a
    /// newer acquisition.
    pub(crate) fn lose(&self, id: &str, epoch: i64) -> bool {
        self.remove_if(id, |h| h.epoch == epoch)
    }
}

/// A fork this host is creating: where its row goes and what it records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fork {
    /// The parent's lineage root, which the child shares (one shard per fork tree).
    pub(crate) root: String,
    /// The parent's id.
    pub(crate) parent: String,
    /// The events the child inherits.
    pub(crate) seed: i64,
}

/// The forks this host is creating, by child id, from before their creating batch is committed
/// until after. A session created with no entry here is no fork, and its own lineage root.
/// Invariant: one fork per child id at a time ([`BySession::claim`]): a second concurrent fork
/// into an id is refused, so it can never give the first one's creation its parent.
pub(crate) type Forks = BySession<Fork>;

/// A session's row in PostgreSQL, as an acquisition returns it. Serializes (the CLI's `--json`,
/// Node's results) as `{id, root, owner, epoch, nextSeq, nextBatch, version, zstd, verdict,
/// deleted, parent, seed}`: every field but the header's bytes.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRow {
    /// The session.
    pub id: String,
    /// Its lineage root.
    pub root: String,
    /// Its owner, if any.
    pub owner: Option<String>,
    /// The owner epoch.
    pub epoch: i64,
    /// The seq and batch number its next batch starts at.
    pub next_seq: i64,
    /// See `next_seq`.
    pub next_batch: i64,
    /// Its format version.
    pub version: i32,
    /// Whether it is kept as `.jsonl.zstd`.
    pub zstd: bool,
    /// Its header's bytes in the file.
    #[serde(skip)]
    pub header: Vec<u8>,
    /// DSH's reader verdict on it.
    pub verdict: String,
    /// Whether it is deleted.
    pub deleted: bool,
    /// The session it was forked from, if it is a fork.
    pub parent: Option<String>,
    /// The events it inherited from its parent, if it is a fork.
    pub seed: Option<i64>,
}

/// Run `sessionlog.acquire` for `host`: the session's row once acquired, or who holds it.
pub(crate) fn acquire(
    client: &mut Client,
    host: &str,
    id: &str,
    lease: Duration,
    force: bool,
) -> std::result::Result<Result<SessionRow>, postgres::Error> {
    let rows = client.query(
        "SELECT root_id, acquired, owner, owner_epoch, lease_left, next_seq, next_batch, \
         version, zstd, header, verdict, deleted, parent_id, seed \
         FROM sessionlog.acquire($1, $2, $3, $4)",
        &[&host, &id, &lease_seconds(lease), &force],
    )?;
    let Some(row) = rows.first() else {
        return Ok(Err(Error::UnknownSession(id.to_owned())));
    };
    let owner: Option<String> = row.get(2);
    if !row.get::<_, bool>(1) {
        return Ok(Err(Error::Owned {
            id: id.to_owned(),
            owner: owner.unwrap_or_default(),
            lease_left: row.get(4),
        }));
    }
    Ok(Ok(SessionRow {
        id: id.to_owned(),
        root: row.get(0),
        owner,
        epoch: row.get(3),
        next_seq: row.get(5),
        next_batch: row.get(6),
        version: row.get(7),
        zstd: row.get(8),
        header: row.get(9),
        verdict: row.get(10),
        deleted: row.get(11),
        parent: row.get(12),
        seed: row.get(13),
    }))
}

/// Session `id`'s row, read without taking it (`None` when the fleet has no such session).
pub(crate) fn row(
    client: &mut Client,
    id: &str,
) -> std::result::Result<Option<SessionRow>, postgres::Error> {
    let rows = client.query(
        "SELECT s.id, s.root_id, s.owner, s.owner_epoch, s.next_seq, s.next_batch, s.version, \
         s.zstd, s.header, s.verdict, s.deleted_at IS NOT NULL, s.parent_id, s.seed \
         FROM sessionlog.lineage l JOIN sessionlog.sessions s \
           ON s.root_id = l.root_id AND s.id = l.id WHERE l.id = $1",
        &[&id],
    )?;
    Ok(rows.first().map(session_row))
}

/// A row of `sessionlog.sessions` selected as `row` and `Fleet::sessions` select it.
pub(crate) fn session_row(r: &postgres::Row) -> SessionRow {
    SessionRow {
        id: r.get(0),
        root: r.get(1),
        owner: r.get(2),
        epoch: r.get(3),
        next_seq: r.get(4),
        next_batch: r.get(5),
        version: r.get(6),
        zstd: r.get(7),
        header: r.get(8),
        verdict: r.get(9),
        deleted: r.get(10),
        parent: r.get(11),
        seed: r.get(12),
    }
}

/// Renew the leases of `held` in one statement; the ids renewed (the others were taken over).
pub(crate) fn renew(
    client: &mut Client,
    host: &str,
    lease: Duration,
    held: &[(String, Holding)],
) -> std::result::Result<Vec<String>, postgres::Error> {
    let roots: Vec<&str> = held.iter().map(|(_, h)| h.root.as_str()).collect();
    let ids: Vec<&str> = held.iter().map(|(id, _)| id.as_str()).collect();
    let epochs: Vec<i64> = held.iter().map(|(_, h)| h.epoch).collect();
    Ok(client
        .query(
            "SELECT id FROM sessionlog.renew($1, $2, $3, $4, $5)",
            &[&host, &lease_seconds(lease), &roots, &ids, &epochs],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect())
}

/// Give up `id`, held as `holding`; whether this host still held it.
pub(crate) fn release(
    client: &mut Client,
    host: &str,
    id: &str,
    holding: &Holding,
) -> std::result::Result<bool, postgres::Error> {
    Ok(client
        .query_one(
            "SELECT sessionlog.release($1, $2, $3, $4)",
            &[&host, &holding.root, &id, &holding.epoch],
        )?
        .get(0))
}

/// A lease as PostgreSQL's whole seconds (at least one).
pub(crate) fn lease_seconds(lease: Duration) -> i32 {
    i32::try_from(lease.as_secs().max(1)).unwrap_or(i32::MAX)
}
