//! Archive and restore: a cold session's bytes given up for the record of where they went in
//! object storage, and taken back. The engine does no network I/O: a host (the
//! `sessionlog-archive` crate) uploads the session's generation files, reads them back and
//! compares their checksums, and only then calls [`Store::commit_archive`]; `restore` hands the
//! files back, fetched and checked, to [`Store::restore_archived`].
//!
//! Invariants:
//! - archiving is one commit, under the session's write lock, of a session unchanged since its
//!   plan was taken (the whole metadata compared): the session's ranges emptied and its
//!   metadata rewritten with the [`ArchivedCopy`]; its listing and lineage keys stay. A failure
//!   or a kill before that commit leaves the session as it was;
//! - an archived session is never read as if its bytes were here: the metadata reader and the
//!   segment walk refuse it (`Error::Archived`), so only listing, lineage, `verify`, archive and
//!   restore see it;
//! - a session in a fork relation is not archived: a fork reads its prefix from its parent's
//!   storage, so neither a fork nor a session with forks can give its bytes up alone;
//! - restore is one import of the files, under the session's write lock, that replaces the
//!   archived record in its final commit (as a migration publishes its successor).

use crate::error::{Error, Result};
use crate::layout::changes::{Change, ChangeKind};
use crate::layout::meta::{now_ms, ArchivedCopy, ArchivedFile, SessionMeta};
use crate::ops::generations::SessionDir;
use crate::ops::import::{ImportOptions, ImportReport, Landing};
use crate::ops::root::{root_files_of, RootFile};
use crate::store::{lock_session, Store};
use crate::write::session_batch::SessionBatch;

/// Which sessions an archive run takes, and which it keeps with why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArchiveCandidates {
    /// Sessions with no activity since the cutoff, in id order.
    pub due: Vec<String>,
    /// Sessions with no activity since the cutoff that stay, with why.
    pub kept: Vec<(String, String)>,
}

/// A session as it was when its archive began: the files to upload and the metadata the
/// commit checks the session still has.
#[derive(Clone, Debug)]
pub struct ArchivePlan {
    meta: SessionMeta,
    files: Vec<RootFile>,
}

impl ArchivePlan {
    /// The session id.
    pub fn id(&self) -> String {
        self.meta.id_lossy()
    }

    /// Its generation files as they go in a DSH root, in its source encoding, lowest version
    /// first: what to upload (each exported by [`Store::export_generation`] with no format).
    pub fn files(&self) -> &[RootFile] {
        &self.files
    }
}

impl Store {
    /// The sessions whose last activity is at least `older_than_ms` old: the time of their last
    /// event (its `time`), else their header's `createdAt`, else their import. Archived and
    /// deleted sessions are not candidates; sessions in a fork relation are kept.
    pub fn archive_candidates(&self, older_than_ms: i64) -> Result<ArchiveCandidates> {
        let cutoff = now_ms().saturating_sub(older_than_ms);
        let mut idle = Vec::new();
        self.for_each_meta(&mut |m| {
            if m.archived.is_none() && m.deleted_at_ms.is_none() {
                idle.push(m.clone());
            }
            Ok(())
        })?;
        let mut out = ArchiveCandidates::default();
        for meta in idle {
            if self.last_activity(&meta)? > cutoff {
                continue;
            }
            let id = meta.id_lossy();
            match self.fork_relation(&meta)? {
                Some(reason) => out.kept.push((id, reason)),
                None => out.due.push(id),
            }
        }
        Ok(out)
    }

    /// The session `id` as it is now, to archive (refused when archived, or in a fork
    /// relation).
    pub fn archive_plan(&self, id: &str) -> Result<ArchivePlan> {
        let meta = self.require_meta(id.as_bytes())?;
        if let Some(reason) = self.fork_relation(&meta)? {
            return Err(Error::Archive {
                id: id.to_owned(),
                reason: format!("it is not archived: {reason}"),
            });
        }
        let files = root_files_of(&meta, None)?;
        Ok(ArchivePlan { meta, files })
    }

    /// Give up `plan`'s session's bytes for `files` under `root`: the objects its generation
    /// files were uploaded to, read back and checked, lowest version first. Refused (nothing
    /// changed) when the session changed since the plan was taken, or when `files` does not
    /// name its generations.
    pub fn commit_archive(
        &self,
        plan: &ArchivePlan,
        root: &str,
        files: Vec<ArchivedFile>,
    ) -> Result<()> {
        let id = plan.id();
        let refuse = |reason: String| Error::Archive {
            id: id.clone(),
            reason,
        };
        let held: Vec<(u32, bool)> = plan
            .meta
            .frozen
            .iter()
            .map(|g| (g.version, g.zstd))
            .chain([(
                plan.meta.version,
                plan.meta.source == crate::layout::meta::SourceEncoding::JsonlZstd,
            )])
            .collect();
        let named: Vec<(u32, bool)> = files.iter().map(|f| (f.version, f.zstd)).collect();
        if named != held {
            return Err(refuse(format!(
                "the archived files {named:?} are not its generations {held:?} as stored"
            )));
        }
        self.check_writable()?;
        let handle = self.write_states.handle(&plan.meta.id);
        let mut state = lock_session(&handle);
        let current = self.require_meta(&plan.meta.id)?;
        if current != plan.meta {
            return Err(refuse(
                "it changed while it was being archived; its uploaded objects stay".into(),
            ));
        }
        if let Some(reason) = self.fork_relation(&current)? {
            return Err(refuse(format!("it is not archived: {reason}")));
        }
        let archived = SessionMeta {
            archived: Some(ArchivedCopy {
                root: root.to_owned(),
                archived_at_ms: now_ms(),
                files,
            }),
            ..current
        };
        let mut batch = SessionBatch::new(self);
        batch.replace_with_archive(&archived)?;
        batch.record_change(
            Change::new(ChangeKind::Archived, &archived.id, archived.events, 0).with_other(root),
            None,
        );
        batch.commit(&format!("archiving session \"{id}\""))?;
        *state = None;
        Ok(())
    }

    /// Bring archived session `id` back into the store from `dir`, its generation files as
    /// fetched from the archive and checked against its [`ArchivedCopy`]: they are imported
    /// (as any session directory is) in place of the archived record, in one final commit.
    pub fn restore_archived(&self, id: &str, dir: &SessionDir) -> Result<ImportReport> {
        self.check_writable()?;
        let handle = self.write_states.handle(id.as_bytes());
        let mut state = lock_session(&handle);
        let current = self.require_record(id.as_bytes())?;
        let Some(copy) = &current.archived else {
            return Err(Error::Archive {
                id: id.to_owned(),
                reason: "it is not archived".into(),
            });
        };
        let given: Vec<(u32, bool)> = dir
            .lower
            .iter()
            .chain([&dir.served])
            .map(|f| (f.version, f.zstd))
            .collect();
        let archived: Vec<(u32, bool)> = copy.files.iter().map(|f| (f.version, f.zstd)).collect();
        if given != archived {
            return Err(Error::Archive {
                id: id.to_owned(),
                reason: format!(
                    "the files given {given:?} are not its archived generations {archived:?}"
                ),
            });
        }
        let options = ImportOptions {
            generations: Some(dir.clone()),
            ..ImportOptions::default()
        };
        let landing = Landing {
            lower: None,
            replaces: Some(current),
            ..Landing::default()
        };
        let report = self.land_path(&dir.served.path, &options, landing, &mut |_| {})?;
        *state = None;
        Ok(report)
    }

    /// Where session `id`'s bytes are, when it is archived.
    pub fn archived_copy(&self, id: &str) -> Result<Option<ArchivedCopy>> {
        Ok(self.require_record(id.as_bytes())?.archived)
    }

    /// Why `meta`'s session cannot give its bytes up alone, if it is in a fork relation.
    fn fork_relation(&self, meta: &SessionMeta) -> Result<Option<String>> {
        if let Some(base) = &meta.fork_of {
            return Ok(Some(format!(
                "it is a fork of \"{}\" and reads its prefix from that session's storage",
                String::from_utf8_lossy(&base.id)
            )));
        }
        Ok(self.children(meta.number)?.first().map(|child| {
            format!(
                "the fork \"{}\" reads its prefix",
                String::from_utf8_lossy(child)
            )
        }))
    }

    /// When `meta`'s session was last active: its last event's `time`, else its header's
    /// `createdAt`, else its import.
    fn last_activity(&self, meta: &SessionMeta) -> Result<i64> {
        let last_event_time = match meta.events.checked_sub(1) {
            Some(seq) => self.event_at(meta, seq)?.and_then(|e| {
                e.as_object()
                    .and_then(|o| o.get("time"))
                    .and_then(sessionlog_codec::json::Value::as_safe_integer)
            }),
            None => None,
        };
        Ok(last_event_time
            .or(meta.created_at)
            .unwrap_or(meta.imported_at_ms))
    }
}

#[cfg(test)]
mod tests {
    use crate::error::Error;
    use crate::layout::meta::ArchivedFile;
    use crate::test_support::{ev, seeded};

    /// The files of `plan`, as if uploaded (their digests do not matter to the store).
    fn uploaded(plan: &super::ArchivePlan) -> Vec<ArchivedFile> {
        plan.files()
            .iter()
            .map(|f| ArchivedFile {
                key: f.key.clone(),
                version: f.version,
                zstd: f.zstd,
                bytes: 1,
                sha256: [7; 32],
            })
            .collect()
    }

    /// A session appended to after its plan was taken keeps its bytes; one unchanged gives
    /// them up in one commit, after which every read of its ranges is refused, listing and
    /// lineage still know it, and `verify` is clean.
    #[test]
    fn only_a_session_unchanged_since_its_plan_gives_its_bytes_up() {
        let (_dir, store) = seeded();
        let plan = store.archive_plan("a").expect("plan");
        let prompt = r#"{"type":"user/message","time":9,"data":{"content":[],"source":{"kind":"user"},"role":"user","id":"u2"},"surfaceOp":"append"}"#;
        store
            .append("a", Some(3), vec![ev(prompt)])
            .expect("append");
        let refused = store.commit_archive(&plan, "s3://b/p", uploaded(&plan));
        assert!(
            matches!(&refused, Err(Error::Archive { reason, .. }) if reason.contains("changed")),
            "{refused:?}"
        );
        assert_eq!(store.archived_copy("a").expect("record"), None);
        assert_eq!(store.summary("a").expect("summary").events, 4);

        let plan = store.archive_plan("a").expect("plan");
        let mut wrong = uploaded(&plan);
        wrong[0].version += 1;
        assert!(store.commit_archive(&plan, "s3://b/p", wrong).is_err());
        store
            .commit_archive(&plan, "s3://b/p", uploaded(&plan))
            .expect("archive");
        let copy = store.archived_copy("a").expect("record").expect("archived");
        assert_eq!(copy.root, "s3://b/p");
        for read in [
            store.export("a", None, &mut Vec::new()).map(|_| ()),
            store.messages_at("a", None).map(|_| ()),
            store.append("a", Some(4), vec![ev(prompt)]).map(|_| ()),
            store.delete("a"),
        ] {
            assert!(matches!(read, Err(Error::Archived { .. })), "{read:?}");
        }
        assert_eq!(
            store.summary("a").expect("summary").archived,
            Some(copy.location())
        );
        assert_eq!(store.lineage("a").expect("lineage").len(), 1);
        let report = store.verify(&[]).expect("verify");
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert!(
            store.archive_plan("a").is_err(),
            "an archived session was planned again"
        );
    }
}
