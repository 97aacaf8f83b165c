//! Writing one imported session: stored lines, tail chunks and frames, batched with bounded
//! memory, committed atomically with the session's metadata.
//!
//! Invariant (see also `store.rs`): a session's keys are only ever visible together with its
//! metadata. Writes are buffered in a WriteBatch; when it grows past
//! [`Options::import_batch_bytes`] it is committed early, preceded (in the same first batch) by a
//! `P ‖ number` marker. The WAL is ordered, so whenever any early batch is durable the marker is
//! too, and an interrupted import is removed at the next open. The final batch holds the
//! metadata and removes the marker.
//!
//! [`Options::import_batch_bytes`]: crate::Options::import_batch_bytes

use rocksdb::WriteBatch;
use sessionlog_codec::stored::{encode_block, BlockMeta};

use crate::keys;
use crate::meta::SessionMeta;
use crate::store::{Store, CF_EVENTS, CF_SESSIONS};
use crate::Result;

/// Accumulates one session's keys.
pub(crate) struct SessionWriter<'s> {
    store: &'s Store,
    number: u64,
    batch: WriteBatch,
    bytes: usize,
    spilled: bool,
    tail: Vec<u8>,
    /// The block being filled: its first seq, metadata and text.
    block: Option<(u64, BlockMeta, Vec<u8>)>,
    /// Tail chunks written so far.
    pub(crate) tail_chunks: u64,
    /// Tail bytes written or buffered so far.
    pub(crate) tail_bytes: u64,
    /// Committed lines written so far.
    pub(crate) lines: u64,
    /// Frames written so far.
    pub(crate) frames: u64,
    /// Lower generations stored with the session.
    pub(crate) frozen: Vec<crate::meta::FrozenGeneration>,
    /// The stored session of the same id this one replaces: its keys go in the final commit.
    pub(crate) replaces: Option<SessionMeta>,
}

impl<'s> SessionWriter<'s> {
    pub(crate) fn new(store: &'s Store, number: u64) -> Self {
        SessionWriter {
            store,
            number,
            batch: WriteBatch::default(),
            bytes: 0,
            spilled: false,
            tail: Vec::new(),
            block: None,
            tail_chunks: 0,
            tail_bytes: 0,
            lines: 0,
            frames: 0,
            frozen: Vec::new(),
            replaces: None,
        }
    }

    /// Store a committed line (without `\n`) holding `members` events from `first_seq` on, written
    /// in `batch`. Lines are grouped into blocks of one batch, bounded by
    /// [`Options::block_bytes`](crate::Options::block_bytes).
    pub(crate) fn put_line(
        &mut self,
        first_seq: u64,
        members: u32,
        batch: u64,
        bytes: &[u8],
    ) -> Result<()> {
        let full = self.block.as_ref().is_some_and(|(_, meta, text)| {
            meta.batch != batch || text.len() >= self.store.options.block_bytes
        });
        if full {
            self.flush_block()?;
        }
        let (_, meta, text) = self.block.get_or_insert_with(|| {
            (
                first_seq,
                BlockMeta {
                    batch,
                    members: Vec::new(),
                },
                Vec::new(),
            )
        });
        meta.members.push(members);
        text.extend_from_slice(bytes);
        text.push(b'\n');
        self.lines += 1;
        Ok(())
    }

    /// Store the block being filled, if any.
    fn flush_block(&mut self) -> Result<()> {
        if let Some((first_seq, meta, text)) = self.block.take() {
            let value = encode_block(&meta, &text)?;
            self.put(keys::event_key(self.number, keys::BLOCK, first_seq), value)?;
        }
        Ok(())
    }

    /// Store a surface-index record (see `surface/mod.rs`).
    pub(crate) fn put_surface(&mut self, key: &[u8], value: Vec<u8>) -> Result<()> {
        self.put_in(crate::store::CF_SURFACE, key, value)
    }

    /// Store a key of the `sessions` CF with the session (e.g. a fork's lineage key).
    pub(crate) fn put_session_key(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<()> {
        self.batch.put_cf(self.store.cf(CF_SESSIONS)?, key, value);
        Ok(())
    }

    /// Store a projection checkpoint (see `projection.rs`).
    pub(crate) fn put_checkpoint(
        &mut self,
        key: [u8; keys::EVENT_KEY_LEN],
        value: Vec<u8>,
    ) -> Result<()> {
        self.put_in(crate::store::CF_CHECKPOINTS, &key, value)
    }

    fn put_in(&mut self, cf: &str, key: &[u8], value: Vec<u8>) -> Result<()> {
        self.bytes += key.len() + value.len();
        self.batch.put_cf(self.store.cf(cf)?, key, value);
        Ok(())
    }

    /// Store one complete zstd frame, verbatim.
    pub(crate) fn put_frame(&mut self, frame: &[u8]) -> Result<()> {
        let key = keys::event_key(self.number, keys::FRAME, self.frames);
        self.put(key, checked_value(frame))?;
        self.frames += 1;
        Ok(())
    }

    /// Store chunk `chunk` of frozen generation `version`, verbatim.
    pub(crate) fn put_generation_chunk(
        &mut self,
        version: u32,
        chunk: u32,
        bytes: &[u8],
    ) -> Result<()> {
        let n = keys::generation_n(version, chunk);
        self.put(
            keys::event_key(self.number, keys::GENERATION, n),
            checked_value(bytes),
        )
    }

    /// Append bytes to the uncommitted tail (stored in chunks).
    pub(crate) fn put_tail(&mut self, bytes: &[u8]) -> Result<()> {
        self.flush_block()?;
        self.tail.extend_from_slice(bytes);
        self.tail_bytes += bytes.len() as u64;
        let chunk_size = self.store.options.tail_chunk_bytes;
        while self.tail.len() >= chunk_size {
            let rest = self.tail.split_off(chunk_size);
            let chunk = std::mem::replace(&mut self.tail, rest);
            self.put_tail_chunk(&chunk)?;
        }
        Ok(())
    }

    fn put_tail_chunk(&mut self, chunk: &[u8]) -> Result<()> {
        let key = keys::event_key(self.number, keys::TAIL, self.tail_chunks);
        self.put(key, checked_value(chunk))?;
        self.tail_chunks += 1;
        Ok(())
    }

    fn put(&mut self, key: [u8; keys::EVENT_KEY_LEN], value: Vec<u8>) -> Result<()> {
        self.bytes += key.len() + value.len();
        self.batch.put_cf(self.store.cf(CF_EVENTS)?, key, value);
        if self.bytes >= self.store.options.import_batch_bytes {
            self.spill()?;
        }
        Ok(())
    }

    /// Commit what is buffered so far (not synced: only the final commit acknowledges).
    fn spill(&mut self) -> Result<()> {
        let mut batch = std::mem::take(&mut self.batch);
        if !self.spilled {
            batch.put_cf(
                self.store.cf(CF_SESSIONS)?,
                keys::pending_key(self.number),
                [],
            );
            self.spilled = true;
        }
        self.store
            .commit_unsynced(batch, "writing an import batch")?;
        self.bytes = 0;
        Ok(())
    }

    /// The store being written to.
    pub(crate) fn store(&self) -> &'s Store {
        self.store
    }

    /// The session number being written.
    pub(crate) fn number(&self) -> u64 {
        self.number
    }

    /// Flush the tail and commit everything with the session's metadata, whose line, frame and
    /// tail counts are taken from what was written. With `defer_sync` the commit is not fsynced.
    pub(crate) fn finish(
        mut self,
        mut meta: SessionMeta,
        defer_sync: bool,
    ) -> Result<crate::ImportReport> {
        self.flush_block()?;
        if !self.tail.is_empty() {
            let tail = std::mem::take(&mut self.tail);
            self.put_tail_chunk(&tail)?;
        }
        meta.committed_lines = self.lines;
        meta.frames = self.frames;
        meta.tail_chunks = self.tail_chunks;
        meta.tail_bytes = self.tail_bytes;
        meta.frozen = std::mem::take(&mut self.frozen);
        let meta = &meta;
        let sessions = self.store.cf(CF_SESSIONS)?;
        self.batch
            .put_cf(sessions, keys::meta_key(&meta.id), meta.encode()?);
        self.batch
            .put_cf(sessions, keys::number_key(self.number), &meta.id);
        self.batch.put_cf(
            sessions,
            keys::activity_key(meta.activity_ms, self.number),
            &meta.id,
        );
        self.batch.put_cf(
            sessions,
            keys::created_key(meta.created_at, self.number),
            &meta.id,
        );
        self.batch.put_cf(
            sessions,
            keys::COUNTER_KEY,
            self.store.counter_after(self.number),
        );
        if self.spilled {
            self.batch
                .delete_cf(sessions, keys::pending_key(self.number));
        }
        if let Some(old) = &self.replaces {
            if let Some(base) = &old.fork_of {
                self.batch
                    .delete_cf(sessions, keys::fork_key(base.number, old.number));
            }
            self.store
                .delete_number_range(&mut self.batch, old.number)?;
            self.batch.delete_cf(sessions, keys::number_key(old.number));
            self.batch
                .delete_cf(sessions, keys::activity_key(old.activity_ms, old.number));
            self.batch
                .delete_cf(sessions, keys::created_key(old.created_at, old.number));
        }
        let context = format!("committing session \"{}\"", meta.id_lossy());
        if defer_sync {
            self.store.commit_unsynced(self.batch, &context)?;
        } else {
            self.store.commit(self.batch, &context)?;
        }
        Ok(crate::ImportReport {
            id: meta.id_lossy(),
            verdict: meta.verdict.clone(),
            events: meta.events,
            lines: meta.body_lines,
            bytes: meta.total_bytes,
        })
    }
}

/// A checksummed value: crc32 (BE) then the bytes. Used for tail chunks and frames.
pub(crate) fn checked_value(bytes: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + bytes.len());
    v.extend_from_slice(&crc32fast::hash(bytes).to_be_bytes());
    v.extend_from_slice(bytes);
    v
}

/// The bytes of a checksummed value, if its crc32 matches.
pub(crate) fn checked_bytes(v: &[u8]) -> Option<&[u8]> {
    let (crc, bytes) = v.split_at_checked(4)?;
    (u32::from_be_bytes(crc.try_into().ok()?) == crc32fast::hash(bytes)).then_some(bytes)
}
