//! Where a session's bytes come from: the store, or, for an archived session, the objects its
//! [`ArchivedCopy`](sessionlog_engine::ArchivedCopy) names, fetched and checked against their
//! recorded size and SHA-256. Clients of archive roots are opened once, on first use.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use sessionlog_engine::{ArchivedFile, Store};

use crate::bucket::{Bucket, Digest};
use crate::config::{S3Config, Transfer};
use crate::error::Result;
use crate::location::ArchiveRoot;

/// Opens (once each) the archive roots archived sessions name.
pub struct ArchiveSources {
    config: S3Config,
    transfer: Transfer,
    opened: Mutex<HashMap<String, Arc<Bucket>>>,
}

impl ArchiveSources {
    /// Sources reached with `config`.
    pub fn new(config: S3Config, transfer: Transfer) -> Self {
        ArchiveSources {
            config,
            transfer,
            opened: Mutex::new(HashMap::new()),
        }
    }

    /// The client of archive root `root` (an `s3://` URL).
    pub fn bucket(&self, root: &str) -> Result<Arc<Bucket>> {
        let mut opened = self.opened.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(bucket) = opened.get(root) {
            return Ok(Arc::clone(bucket));
        }
        let bucket = Arc::new(Bucket::open(
            ArchiveRoot::parse(root)?,
            &self.config,
            self.transfer,
        )?);
        opened.insert(root.to_owned(), Arc::clone(&bucket));
        Ok(bucket)
    }

    /// Write archived `file` of archive root `root` to `out`, checked against its record.
    pub fn fetch_file(&self, root: &str, file: &ArchivedFile, out: &mut dyn Write) -> Result<()> {
        let bucket = self.bucket(root)?;
        let key = bucket.root.key(&file.key)?;
        bucket.fetch_checked(&key, recorded(file), out)
    }
}

/// The digest an archived file was recorded with.
pub(crate) fn recorded(file: &ArchivedFile) -> Digest {
    Digest {
        bytes: file.bytes,
        sha256: file.sha256,
    }
}

/// The archived files of session `id`, with their root, if it is archived.
pub(crate) fn archived_files(
    store: &Store,
    id: &str,
) -> Result<Option<(String, Vec<ArchivedFile>)>> {
    Ok(store.archived_copy(id)?.map(|copy| (copy.root, copy.files)))
}
