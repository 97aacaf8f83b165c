//! Storing one object without ever replacing one: the bytes an export writes are hashed as they
//! come and uploaded as they come, in one conditional `PUT` (`If-None-Match: *`) when they fit
//! in a part, else as a multipart upload whose parts go up while the export goes on and whose
//! completion is conditional too (`conditional.rs`). Memory stays within the parts in flight.
//!
//! An object already there is never overwritten: when it holds the same bytes (size and
//! SHA-256, read back) the store counts as done ([`Stored::AlreadyThere`]), so a rerun after a
//! kill resumes where the last one stopped; other bytes are a [`Error::Conflict`].

use std::io::Write;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, WriteMultipart};
use sha2::{Digest as _, Sha256};

use crate::bucket::{Bucket, Digest};
use crate::error::{Error, Result};

/// What storing an object did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    /// The object was created.
    Created,
    /// An object with the same bytes was already there.
    AlreadyThere,
}

impl Bucket {
    /// Store what `export` writes as object `key`: uploaded, or, when `present` (the root's
    /// listing holds the key), only hashed and compared with the object there. Returns the
    /// bytes' digest and what was done; an export that fails uploads nothing.
    pub(crate) fn store_object(
        &self,
        key: &Path,
        present: bool,
        export: impl FnOnce(&mut dyn Write) -> sessionlog_engine::Result<u64>,
    ) -> Result<(Digest, Stored)> {
        let mut writer = ObjectWriter {
            bucket: self,
            key,
            upload: !present,
            hasher: Sha256::new(),
            bytes: 0,
            buffer: Vec::new(),
            multipart: None,
            failed: None,
        };
        let exported = export(&mut writer);
        if let Err(e) = exported {
            writer.abort();
            return Err(writer.failed.take().unwrap_or(Error::Engine(e)));
        }
        writer.finish()
    }

    /// Compare object `key` with `ours`: the same bytes are [`Stored::AlreadyThere`], other
    /// bytes a conflict.
    fn compare(&self, key: &Path, ours: Digest) -> Result<(Digest, Stored)> {
        let held = self.digest(key)?;
        if held == ours {
            Ok((ours, Stored::AlreadyThere))
        } else {
            Err(Error::Conflict {
                location: self.root.show(key),
                held: format!("it holds {held}; this is {ours}"),
            })
        }
    }
}

/// An export's destination: hashes what it is given and uploads it in parts.
struct ObjectWriter<'b> {
    bucket: &'b Bucket,
    key: &'b Path,
    /// False when the object is there already: the bytes are only hashed.
    upload: bool,
    hasher: Sha256,
    bytes: u64,
    /// Bytes not uploaded yet (less than a part).
    buffer: Vec<u8>,
    /// The multipart upload, once the bytes outgrew one part.
    multipart: Option<WriteMultipart>,
    /// The upload failure an export saw as an I/O error.
    failed: Option<Error>,
}

impl Write for ObjectWriter<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.hasher.update(data);
        self.bytes += data.len() as u64;
        if !self.upload {
            return Ok(data.len());
        }
        self.buffer.extend_from_slice(data);
        if self.buffer.len() >= self.bucket.transfer.part_bytes {
            if let Err(e) = self.send_part() {
                let shown = e.to_string();
                self.failed = Some(e);
                return Err(std::io::Error::other(shown));
            }
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl ObjectWriter<'_> {
    /// Upload the buffer as the next part, starting the multipart upload with the first; waits
    /// while the parts in flight are at their bound.
    fn send_part(&mut self) -> Result<()> {
        let bucket = self.bucket;
        let shown = bucket.root.show(self.key);
        let part = Bytes::from(std::mem::take(&mut self.buffer));
        let in_flight = bucket.transfer.parts_in_flight;
        let part_bytes = bucket.transfer.part_bytes;
        let multipart = &mut self.multipart;
        let key = self.key;
        bucket.runtime.block_on(async {
            let upload = match multipart {
                Some(upload) => upload,
                None => {
                    let started = bucket
                        .store
                        .put_multipart(key)
                        .await
                        .map_err(Error::request("starting the upload of", shown.clone()))?;
                    multipart.insert(WriteMultipart::new_with_chunk_size(started, part_bytes))
                }
            };
            upload
                .wait_for_capacity(in_flight)
                .await
                .map_err(Error::request("uploading a part of", shown))?;
            upload.put(part);
            Ok(())
        })
    }

    /// Finish: upload what is left and make the object, or compare with the one there.
    fn finish(mut self) -> Result<(Digest, Stored)> {
        let bucket = self.bucket;
        let key = self.key;
        let ours = Digest::of(std::mem::take(&mut self.hasher), self.bytes);
        if !self.upload {
            return bucket.compare(key, ours);
        }
        let shown = bucket.root.show(key);
        let made = match self.multipart.take() {
            None => {
                let payload = PutPayload::from(std::mem::take(&mut self.buffer));
                let options = PutOptions {
                    mode: PutMode::Create,
                    ..PutOptions::default()
                };
                match bucket
                    .runtime
                    .block_on(bucket.store.put_opts(key, payload, options))
                {
                    Ok(_) => Ok(()),
                    Err(object_store::Error::AlreadyExists { .. }) => {
                        return bucket.compare(key, ours);
                    }
                    Err(e) => Err(Error::request("uploading", shown)(e)),
                }
            }
            Some(mut upload) => {
                upload.put(Bytes::from(std::mem::take(&mut self.buffer)));
                bucket
                    .runtime
                    .block_on(upload.finish())
                    .map(|_| ())
                    .map_err(Error::request("completing the upload of", shown))
            }
        };
        match made {
            Ok(()) => Ok((ours, Stored::Created)),
            // A refused completion (the object appeared meanwhile), or an answer lost after the
            // object was made: what is there decides.
            Err(e) => match bucket.exists(key) {
                Ok(true) => bucket.compare(key, ours),
                _ => Err(e),
            },
        }
    }

    /// Give up a multipart upload begun (best effort: a killed process leaves its parts, which
    /// a bucket's lifecycle rule for incomplete uploads removes).
    fn abort(&mut self) {
        if let Some(upload) = self.multipart.take() {
            let _ = self.bucket.runtime.block_on(upload.abort());
        }
    }
}
