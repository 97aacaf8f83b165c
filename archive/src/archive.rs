//! `archive` and `restore`: moving cold sessions' bytes to object storage and back.
//!
//! Archiving a session: its generation files are uploaded as `export-all` would store them
//! (conditional puts; an object already there with the same bytes counts), each object
//! created is read back whole and its size and SHA-256 compared with what was sent, and only
//! then does the store give the bytes up for the record of where they are, in one commit that
//! checks the session did not change meanwhile (`Store::commit_archive`). A failure or a kill at
//! any step before that commit leaves the session as it was, and its objects where they are: a
//! rerun finds them, compares them, and finishes the job.
//!
//! Restoring one: its objects are fetched into a temporary session directory, each checked
//! against its recorded size and SHA-256, and imported in place of the archived record in one
//! commit; then its objects are deleted, so the archive holds only archived sessions (a kill
//! between the two leaves them, and a later archive of the changed session refuses to replace
//! them).

use sessionlog_engine::{ArchivedFile, Error as EngineError, ImportReport, Store};

use crate::bucket::Bucket;
use crate::error::{Error, Result};
use crate::sources::ArchiveSources;
use crate::upload::Stored;

/// What an archive run did. Serializes as `{archived: [{id, bytes}], kept: [{id, reason}],
/// failed: [{id, error}]}`.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ArchiveSummary {
    /// Sessions archived, with the bytes of their objects, in id order.
    #[serde(serialize_with = "crate::render::sizes")]
    pub archived: Vec<(String, u64)>,
    /// Sessions idle long enough that stay, with why.
    #[serde(serialize_with = "crate::render::reasons")]
    pub kept: Vec<(String, String)>,
    /// Sessions whose archive failed (each unchanged in the store), with why.
    #[serde(rename = "failed", serialize_with = "crate::render::errors")]
    pub failures: Vec<(String, String)>,
}

/// Archive every session of `store` with no activity for `older_than_ms` into `bucket`'s root;
/// `progress` hears each candidate done. A failing session is reported, and left as it was.
pub fn archive(
    store: &Store,
    bucket: &Bucket,
    older_than_ms: i64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<ArchiveSummary> {
    let candidates = store.archive_candidates(older_than_ms)?;
    let present = bucket.list()?;
    let done = std::sync::Mutex::new(Vec::new());
    crate::par::for_each(&candidates.due, bucket.transfer.sessions_in_flight, |id| {
        let outcome = archive_one(store, bucket, &present, id);
        done.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((id.clone(), outcome));
        progress(1);
    });
    let mut done = done
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    done.sort_by(|a, b| a.0.cmp(&b.0));
    let mut summary = ArchiveSummary {
        kept: candidates.kept,
        ..ArchiveSummary::default()
    };
    for (id, outcome) in done {
        match outcome {
            Ok(bytes) => summary.archived.push((id, bytes)),
            Err(e) => summary.failures.push((id, e.to_string())),
        }
    }
    Ok(summary)
}

/// Archive session `id` into `bucket`'s root whatever its activity; returns its objects'
/// bytes.
pub fn archive_session(store: &Store, bucket: &Bucket, id: &str) -> Result<u64> {
    archive_one(store, bucket, &Default::default(), id)
}

/// Upload, read back and commit one session (see the module's steps).
fn archive_one(
    store: &Store,
    bucket: &Bucket,
    present: &std::collections::BTreeMap<String, u64>,
    id: &str,
) -> Result<u64> {
    let plan = store.archive_plan(id)?;
    let mut files = Vec::with_capacity(plan.files().len());
    for file in plan.files() {
        let key = bucket.root.key(&file.key)?;
        let (sent, stored) = bucket.store_object(&key, present.contains_key(&file.key), |out| {
            store.export_generation(id, file.version, None, out)
        })?;
        // An object found there was read whole to compare it; one created is read back now.
        if stored == Stored::Created {
            let back = bucket.digest(&key)?;
            if back != sent {
                return Err(Error::Mismatch {
                    location: bucket.root.show(&key),
                    expected: sent.to_string(),
                    got: back.to_string(),
                });
            }
        }
        files.push(ArchivedFile {
            key: file.key.clone(),
            version: file.version,
            zstd: file.zstd,
            bytes: sent.bytes,
            sha256: sent.sha256,
        });
    }
    let bytes = files.iter().map(|f| f.bytes).sum();
    store.commit_archive(&plan, &bucket.root.to_string(), files)?;
    Ok(bytes)
}

/// What a restore did. Serializes as the import's report (`{id, verdict, events, lines,
/// bytes}`) with `deleted` and `notDeleted: [{id, error}]` (`id` naming the object).
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RestoreReport {
    /// The session as imported back.
    #[serde(flatten)]
    pub import: ImportReport,
    /// Its objects deleted from the archive.
    pub deleted: u64,
    /// Objects that could not be deleted (the session is restored all the same), with why.
    #[serde(serialize_with = "crate::render::errors")]
    pub not_deleted: Vec<(String, String)>,
}

/// Bring archived session `id` back into `store` (see the module's steps).
pub fn restore(store: &Store, sources: &ArchiveSources, id: &str) -> Result<RestoreReport> {
    let copy = store
        .archived_copy(id)?
        .ok_or_else(|| EngineError::Archive {
            id: id.to_owned(),
            reason: "it is not archived".into(),
        })?;
    let fetched = crate::fetch::fetch_session(sources, &copy.root, &copy.files)?;
    let import = store.restore_archived(id, &fetched.dir)?;
    let bucket = sources.bucket(&copy.root)?;
    let mut report = RestoreReport {
        import,
        deleted: 0,
        not_deleted: Vec::new(),
    };
    for file in &copy.files {
        let deleted = bucket
            .root
            .key(&file.key)
            .and_then(|key| bucket.delete(&key));
        match deleted {
            Ok(()) => report.deleted += 1,
            Err(e) => report.not_deleted.push((file.key.clone(), e.to_string())),
        }
    }
    Ok(report)
}
