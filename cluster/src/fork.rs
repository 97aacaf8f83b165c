//! Fork in the fleet: the child is created as DSH's fork file (its header, then one seed batch of
//! the inherited events as DSH's fork writes them, then the end-seed and closers), worked out by
//! the engine from the parent caught up with PostgreSQL, and committed through the group
//! commit's hook like any creation: PostgreSQL gets the child's row and its seed batch in one
//! fenced `append_batches` transaction, under the parent's lineage root, so a fork tree stays on
//! one shard.
//!
//! A fork tree is read from PostgreSQL ([`Fleet::lineage`]): a host's copy of a fork is the
//! whole file, with no tie to its parent's copy, and holds only the sessions it caught up.
//!
//! Invariant: the parent is only read (a host forks sessions other hosts own); the child's bytes
//! in PostgreSQL are its whole file, so every host builds it by catch-up alone and a parent
//! purged later takes nothing of the child with it.

use std::collections::BTreeMap;

use sessionlog_engine::{
    AppendItem, ForkReport, LineageEntry, Refusal, RefusalKind, SourceEncoding,
};

use crate::catch_up::catch_up;
use crate::commit::unstorable_id;
use crate::error::{Error, Result};
use crate::fleet::{Fleet, PATIENCE};
use crate::ownership::{self, Fork};
use crate::pg::Pg;

impl Fleet {
    /// Fork session `parent` after event `boundary` (default: its last event) into a new
    /// session `new_id` (DSH `SessionStore.fork`), which this host then holds. Refused with
    /// DSH's codes (an existing id anywhere in the fleet or a fork into it under way on this
    /// host, a missing parent, a boundary past its end, and DSH's other fork rules), writing
    /// nothing.
    pub fn fork(&self, parent: &str, boundary: Option<u64>, new_id: &str) -> Result<ForkReport> {
        if let Some(rule) = [new_id, parent].into_iter().find_map(unstorable_id) {
            return Err(Error::Store(sessionlog_engine::Error::Refused(Refusal {
                kind: RefusalKind::Unstorable,
                message: rule,
            })));
        }
        let row = {
            let mut pg = self.control();
            if id_taken(&mut pg, new_id)? {
                return Err(exists(new_id));
            }
            let row = pg
                .retrying("reading a session", PATIENCE, |c| ownership::row(c, parent))?
                .filter(|row| !row.deleted)
                .ok_or_else(|| {
                    refused(
                        "SESSION_NOT_FOUND",
                        format!("session \"{parent}\" not found in the fleet"),
                    )
                })?;
            catch_up(&mut pg, &self.store, &row)?;
            row
        };
        let file = self.store.fork_file(parent, boundary, new_id)?;
        let item = AppendItem::written_bytes(new_id, Some(0), file.seed_batch)
            .creating(file.header_line, SourceEncoding::Jsonl);
        let fork = Fork {
            root: row.root.clone(),
            parent: parent.to_owned(),
            seed: i64::try_from(file.report.seed).unwrap_or(i64::MAX),
        };
        if !self.forks.claim(new_id, fork) {
            return Err(refused(
                "SESSION_ALREADY_EXISTS",
                format!("session \"{new_id}\": a fork into this id is under way on this host"),
            ));
        }
        let created = self.store.append_many(vec![item]).pop();
        self.forks.remove(new_id);
        match created.unwrap_or_else(|| {
            Err(sessionlog_engine::Error::Internal(
                "a fork's creation gave no outcome".into(),
            ))
        }) {
            Ok(_) => Ok(file.report),
            // Created elsewhere since the check: DSH's refusal, as if it had been there before.
            Err(sessionlog_engine::Error::Refused(r))
                if r.kind == RefusalKind::Stale && id_taken(&mut self.control(), new_id)? =>
            {
                Err(exists(new_id))
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// Whether session id `id` is taken anywhere in the fleet.
fn id_taken(pg: &mut Pg, id: &str) -> Result<bool> {
    Ok(pg
        .retrying("checking a fork's id", PATIENCE, |c| {
            c.query_opt("SELECT 1 FROM sessionlog.lineage WHERE id = $1", &[&id])
        })?
        .is_some())
}

/// DSH's refusal of a fork, with its code.
fn refused(code: &'static str, message: String) -> Error {
    Error::Store(sessionlog_engine::Error::Fork { code, message })
}

/// DSH's refusal of a fork into an id the fleet holds.
fn exists(id: &str) -> Error {
    refused(
        "SESSION_ALREADY_EXISTS",
        format!("session \"{id}\" already exists in the fleet"),
    )
}

impl Fleet {
    /// Session `id`'s fork tree in the fleet, as [`Store::lineage`](sessionlog_engine::Store::lineage)
    /// gives a store's: the session (depth 0), its ancestors (negative depth, nearest first),
    /// then its descendants depth first. From the rows of its lineage root in PostgreSQL, deleted
    /// sessions among them; refused as unknown when the fleet does not hold `id`.
    pub fn lineage(&self, id: &str) -> Result<Vec<LineageEntry>> {
        let rows = self
            .control()
            .retrying("reading a fork tree", PATIENCE, |c| {
                c.query(
                    "SELECT s.id, s.parent_id, s.seed FROM sessionlog.sessions s \
                 JOIN sessionlog.sessions me ON s.root_id = me.root_id WHERE me.id = $1 \
                 ORDER BY s.id",
                    &[&id],
                )
            })?;
        let tree: BTreeMap<String, (Option<String>, Option<i64>)> = rows
            .iter()
            .map(|r| (r.get(0), (r.get(1), r.get(2))))
            .collect();
        let entry = |id: &str, depth: i64| {
            let (parent, seed) = tree.get(id).cloned().unwrap_or_default();
            LineageEntry {
                id: id.to_owned(),
                parent,
                seed: seed.and_then(|n| u64::try_from(n).ok()),
                depth,
            }
        };
        if !tree.contains_key(id) {
            return Err(Error::UnknownSession(id.to_owned()));
        }
        let mut out = vec![entry(id, 0)];
        let (mut cursor, mut depth) = (id.to_owned(), 0);
        while let Some(parent) = tree.get(&cursor).and_then(|(p, _)| p.clone()) {
            depth -= 1;
            out.push(entry(&parent, depth));
            cursor = parent;
        }
        let mut children: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (child, (parent, _)) in &tree {
            if let Some(parent) = parent {
                children.entry(parent).or_default().push(child);
            }
        }
        let mut frontier = vec![(id, 0i64)];
        while let Some((at, d)) = frontier.pop() {
            for &child in children.get(at).into_iter().flatten() {
                frontier.push((child, d + 1));
                out.push(entry(child, d + 1));
            }
        }
        Ok(out)
    }
}
