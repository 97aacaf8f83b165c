//! `export-all --to s3://…`: the whole store as a DSH session root in object storage, under the
//! names `export-all --out` gives its files, every generation. Sessions go up in parallel,
//! each file streamed from the store into a conditional upload (`upload.rs`). The root is
//! listed once first: a file whose object is there is hashed and compared, not uploaded, so a
//! rerun after a kill uploads only what is missing and ends with the same objects. An archived
//! session's objects are copied from its archive, checked against their record.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use sessionlog_engine::{ExportFormat, Store};

use crate::bucket::Bucket;
use crate::error::{Error, Result};
use crate::sources::{archived_files, ArchiveSources};
use crate::upload::Stored;

/// What an export to object storage did. Serializes as `{sessions, created, alreadyThere,
/// bytesUploaded, bytes, failed: [{id, error}]}`.
#[derive(Clone, Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportSummary {
    /// Sessions exported whole (every file created or already there).
    pub sessions: u64,
    /// Objects created.
    pub created: u64,
    /// Objects already there with the same bytes.
    pub already_there: u64,
    /// Bytes of the objects created.
    pub bytes_uploaded: u64,
    /// Bytes of every object exported (created or already there).
    pub bytes: u64,
    /// Sessions that failed, with why (their other files may be stored).
    #[serde(rename = "failed", serialize_with = "crate::render::errors")]
    pub failures: Vec<(String, String)>,
}

/// Export every session of `store` into `bucket`'s root, in `format` (default: each session's
/// own encoding); `progress` hears each session done. A failing session is reported and the
/// others go on.
pub fn export_all(
    store: &Store,
    bucket: &Bucket,
    sources: &ArchiveSources,
    format: Option<ExportFormat>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<ExportSummary> {
    let ids = store.ids()?;
    let present = bucket.list()?;
    let summary = Mutex::new(ExportSummary::default());
    let counts = Counts::default();
    crate::par::for_each(&ids, bucket.transfer.sessions_in_flight, |id| {
        let outcome = export_session(store, bucket, sources, &present, id, format, &counts);
        let mut s = summary
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match outcome {
            Ok(()) => s.sessions += 1,
            Err(e) => s.failures.push((id.clone(), e.to_string())),
        }
        progress(1);
    });
    let mut summary = summary
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    summary.created = counts.created.load(Ordering::Relaxed);
    summary.already_there = counts.already_there.load(Ordering::Relaxed);
    summary.bytes_uploaded = counts.bytes_uploaded.load(Ordering::Relaxed);
    summary.bytes = counts.bytes.load(Ordering::Relaxed);
    Ok(summary)
}

/// Object counts shared by the workers.
#[derive(Default)]
struct Counts {
    created: AtomicU64,
    already_there: AtomicU64,
    bytes_uploaded: AtomicU64,
    bytes: AtomicU64,
}

/// Store every file of session `id`.
fn export_session(
    store: &Store,
    bucket: &Bucket,
    sources: &ArchiveSources,
    present: &std::collections::BTreeMap<String, u64>,
    id: &str,
    format: Option<ExportFormat>,
    counts: &Counts,
) -> Result<()> {
    let archived = archived_files(store, id)?;
    for file in store.root_files(id, format)? {
        let key = bucket.root.key(&file.key)?;
        let there = present.contains_key(&file.key);
        let (digest, stored) = match &archived {
            None => bucket.store_object(&key, there, |out| {
                store.export_generation(id, file.version, format, out)
            })?,
            Some((root, files)) => {
                let archived = files
                    .iter()
                    .find(|f| f.version == file.version && f.zstd == file.zstd)
                    .ok_or_else(|| {
                        Error::Location(format!(
                            "session \"{id}\" is archived at {root} without a {} file; restore it to export it in another encoding",
                            file.key
                        ))
                    })?;
                let mut fetched = Vec::with_capacity(usize::try_from(archived.bytes).unwrap_or(0));
                sources.fetch_file(root, archived, &mut fetched)?;
                bucket.store_object(&key, there, |out| {
                    out.write_all(&fetched)
                        .map_err(|source| sessionlog_engine::Error::Io {
                            path: file.key.clone().into(),
                            source,
                        })?;
                    Ok(fetched.len() as u64)
                })?
            }
        };
        counts.bytes.fetch_add(digest.bytes, Ordering::Relaxed);
        match stored {
            Stored::Created => {
                counts.created.fetch_add(1, Ordering::Relaxed);
                counts
                    .bytes_uploaded
                    .fetch_add(digest.bytes, Ordering::Relaxed);
            }
            Stored::AlreadyThere => {
                counts.already_there.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    Ok(())
}
