//! Fork in the fleet: the child is created as DSH's fork file (its header, then one seed batch of
//! the inherited events as DSH's fork writes them, then the end-seed and closers), worked out by
//! the engine from the parent caught up with PostgreSQL, and committed through the group
//! commit's hook like any creation: PostgreSQL gets the child's row and its seed batch in one
//! fenced `append_batches` transaction, under the parent's lineage root, so a fork tree stays on
//! one shard.
//!
//! Invariant: the parent is only read (a host forks sessions other hosts own); the child's bytes
//! in PostgreSQL are its whole file, so every host builds it by catch-up alone and a parent
//! purged later takes nothing of the child with it.

use sessionlog_engine::{AppendItem, ForkReport, SourceEncoding};

use crate::catch_up::catch_up;
use crate::error::{Error, Result};
use crate::fleet::{Fleet, PATIENCE};
use crate::ownership::{self, Fork};

impl Fleet {
    /// Fork session `parent` after event `boundary` (default: its last event) into a new
    /// session `new_id` (DSH `SessionStore.fork`), which this host then holds. Refused with
    /// DSH's codes (an existing id anywhere in the fleet, a missing parent, a boundary past its
    /// end, and DSH's other fork rules), writing nothing.
    pub fn fork(&self, parent: &str, boundary: Option<u64>, new_id: &str) -> Result<ForkReport> {
        let refused = |code: &'static str, message: String| {
            Error::Store(sessionlog_engine::Error::Fork { code, message })
        };
        let row = {
            let mut pg = self.control();
            let taken = pg.retrying("checking a fork's id", PATIENCE, |c| {
                c.query_opt("SELECT 1 FROM sessionlog.lineage WHERE id = $1", &[&new_id])
            })?;
            if taken.is_some() {
                return Err(refused(
                    "SESSION_ALREADY_EXISTS",
                    format!("session \"{new_id}\" already exists in the fleet"),
                ));
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
        self.forks.insert(new_id, fork);
        let created = self.store.append_many(vec![item]).pop();
        self.forks.remove(new_id);
        created.unwrap_or_else(|| {
            Err(sessionlog_engine::Error::Internal(
                "a fork's creation gave no outcome".into(),
            ))
        })?;
        Ok(file.report)
    }
}
