//! Retention: delete (hide, still exportable), undelete, and purge (remove for good, reclaiming
//! space with range deletes and a compaction of the freed ranges; the purged blocks held in blob
//! files, beside other sessions' blocks, come back with the next [`Store::compact`]).

use crate::error::Result;
use crate::layout::changes::{Change, ChangeKind};
use crate::layout::meta::{now_ms, SessionMeta};
use crate::store::{lock_session, BlobGc, Recorded, Store};
use crate::write::session_batch::SessionBatch;

/// What a purge removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PurgeReport {
    /// Sessions removed (or that would be, with `dry_run`).
    pub sessions: Vec<String>,
    /// Deleted sessions kept, with why (a live fork reads their prefix).
    pub kept: Vec<(String, String)>,
    /// Their stored file bytes.
    pub session_bytes: u64,
    /// Live SST and blob file bytes before and after the purge's compaction (0 with `dry_run`).
    pub stored_bytes_before: u64,
    /// See `stored_bytes_before`.
    pub stored_bytes_after: u64,
}

/// A retention change a store's system of record committed (see [`Store::apply_recorded`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordedChange {
    /// The session was deleted (hidden, still readable).
    Deleted(String),
    /// The session was restored.
    Undeleted(String),
    /// The sessions were removed for good (this store's copies, deleted or not, go too).
    Purged(Vec<String>),
}

impl Store {
    /// Mark session `id` deleted: hidden from listings, still exportable, restorable.
    pub fn delete(&self, id: &str) -> Result<()> {
        self.set_deleted(id, Some(now_ms()), None)
    }

    /// Restore a deleted session.
    pub fn undelete(&self, id: &str) -> Result<()> {
        self.set_deleted(id, None, None)
    }

    /// Mark session `id` deleted at `at` (`None`: not deleted); `recorded` when its system of
    /// record made the change.
    fn set_deleted(&self, id: &str, at: Option<i64>, recorded: Option<Recorded>) -> Result<()> {
        self.rewrite_session(id, "marking session", recorded, |mut meta, batch| {
            meta.deleted_at_ms = at;
            let kind = match at {
                Some(_) => ChangeKind::Deleted,
                None => ChangeKind::Undeleted,
            };
            batch.record_change(Change::new(kind, &meta.id, meta.events, 0), None);
            batch.put_meta(&meta)
        })
    }

    /// Remove for good every deleted session deleted more than `older_than_ms` ago.
    pub fn purge(&self, older_than_ms: i64, dry_run: bool) -> Result<PurgeReport> {
        let cutoff = now_ms().saturating_sub(older_than_ms);
        self.purge_where(
            &|m: &SessionMeta| m.deleted_at_ms.is_some_and(|t| t <= cutoff),
            dry_run,
            None,
        )
    }

    /// Apply a change its system of record has committed to a store that is its index (a
    /// fleet's host, whose store has a commit hook): the retention operations, which such a
    /// store refuses when asked directly ([`Error::IndexOfFleet`]), are made here as the record
    /// says, without asking the hook again.
    ///
    /// [`Error::IndexOfFleet`]: crate::Error::IndexOfFleet
    pub fn apply_recorded(&self, change: &RecordedChange) -> Result<()> {
        let recorded = Some(Recorded::by_the_system_of_record());
        match change {
            RecordedChange::Deleted(id) => self.set_deleted(id, Some(now_ms()), recorded),
            RecordedChange::Undeleted(id) => self.set_deleted(id, None, recorded),
            RecordedChange::Purged(ids) => {
                let ids: std::collections::HashSet<&[u8]> =
                    ids.iter().map(|id| id.as_bytes()).collect();
                let due = |m: &SessionMeta| ids.contains(m.id.as_slice());
                self.purge_where(&due, false, recorded).map(drop)
            }
        }
    }

    /// Remove for good the sessions `due` says (see [`Store::purge`]); `recorded` when its
    /// system of record made the change.
    fn purge_where(
        &self,
        due: &dyn Fn(&SessionMeta) -> bool,
        dry_run: bool,
        recorded: Option<Recorded>,
    ) -> Result<PurgeReport> {
        self.check_writable()?;
        let mut candidates: Vec<Vec<u8>> = Vec::new();
        self.for_each_meta(&mut |m| {
            if due(m) {
                candidates.push(m.id.clone());
            }
            Ok(())
        })?;
        // Purge and append exclude each other: every candidate's session lock is held (taken in
        // id order, as appends take theirs) from the re-read of its metadata to the commit, and
        // its cached write state is dropped with it. An undelete meanwhile keeps the session.
        let handles: Vec<_> = candidates
            .iter()
            .map(|id| self.write_states.handle(id))
            .collect();
        let mut locked: Vec<_> = handles.iter().map(lock_session).collect();
        let mut victims: Vec<SessionMeta> = Vec::new();
        for id in &candidates {
            if let Some(m) = self.meta(id)?.filter(|m| due(m)) {
                victims.push(m);
            }
        }
        // A parent whose prefix a live fork still reads stays (and so do its ancestors).
        let mut kept = Vec::new();
        loop {
            let doomed: std::collections::HashSet<Vec<u8>> =
                victims.iter().map(|m| m.id.clone()).collect();
            let mut guarded = None;
            for (i, m) in victims.iter().enumerate() {
                if let Some(child) = self
                    .children(m.number)?
                    .into_iter()
                    .find(|c| !doomed.contains(c))
                {
                    guarded = Some((i, String::from_utf8_lossy(&child).into_owned()));
                    break;
                }
            }
            match guarded {
                Some((i, child)) => {
                    let m = victims.remove(i);
                    kept.push((
                        m.id_lossy(),
                        format!("the live fork \"{child}\" reads its prefix"),
                    ));
                }
                None => break,
            }
        }
        let mut report = PurgeReport {
            kept,
            sessions: victims.iter().map(SessionMeta::id_lossy).collect(),
            session_bytes: victims.iter().map(|m| m.total_bytes).sum(),
            ..PurgeReport::default()
        };
        if dry_run || victims.is_empty() {
            return Ok(report);
        }
        self.flush_all()?;
        report.stored_bytes_before = self.file_bytes()?;
        let mut batch = SessionBatch::recorded(self, recorded);
        for m in &victims {
            batch.remove_session(m, true)?;
            batch.record_change(Change::new(ChangeKind::Purged, &m.id, m.events, 0), None);
        }
        batch.commit("purging deleted sessions")?;
        for state in &mut locked {
            **state = None;
        }
        drop(locked);
        let numbers: Vec<u64> = victims.iter().map(|m| m.number).collect();
        self.compact_numbers(&numbers)?;
        report.stored_bytes_after = self.file_bytes()?;
        Ok(report)
    }

    /// Flush and fully compact the store (an admin operation: afterwards no background work is
    /// pending, and deleted data is gone from disk, blob files included: this compaction
    /// relocates the live blobs of every blob file, so the files holding garbage are dropped).
    pub fn compact(&self) -> Result<()> {
        self.compact_all(BlobGc::Full)
    }
}
