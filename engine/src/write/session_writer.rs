//! Writing one whole new session (import, create, fork, a migration's successor): stored lines,
//! tail chunks, frames and frozen generations, batched with bounded memory, committed
//! atomically with the session's metadata through a [`SessionBatch`].
//!
//! Invariant (see also `store/mod.rs`): a session's keys are only ever visible together with its
//! metadata. Writes are buffered in a WriteBatch; when it grows past
//! [`Options::import_batch_bytes`] it is committed early, preceded (in the same first batch) by a
//! `P ‖ number` marker. The WAL is ordered, so whenever any early batch is durable the marker is
//! too, and an interrupted import is removed at the next open. The final batch holds the
//! metadata and removes the marker.
//!
//! [`Options::import_batch_bytes`]: crate::options::Options::import_batch_bytes

use sessionlog_codec::format::stored::{encode_block, BlockMeta};

use crate::error::Result;
use crate::layout::changes::{Change, ChangeKind};
use crate::layout::keys;
use crate::layout::meta::{FrozenGeneration, SessionMeta};
use crate::layout::values::checked_value;
use crate::store::Store;
use crate::write::session_batch::SessionBatch;

/// Accumulates one session's keys.
pub(crate) struct SessionWriter<'s> {
    store: &'s Store,
    number: u64,
    batch: SessionBatch<'s>,
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
    pub(crate) frozen: Vec<FrozenGeneration>,
    /// The stored session of the same id this one replaces: its keys go in the final commit.
    pub(crate) replaces: Option<SessionMeta>,
}

impl<'s> SessionWriter<'s> {
    pub(crate) fn new(store: &'s Store, number: u64) -> Self {
        SessionWriter {
            store,
            number,
            batch: SessionBatch::new(store),
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
    /// [`Options::block_bytes`](crate::options::Options::block_bytes).
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

    /// Store a surface-index record (see `write/indexer.rs`).
    pub(crate) fn put_surface(&mut self, key: &[u8], value: Vec<u8>) -> Result<()> {
        self.bytes += key.len() + value.len();
        self.batch.put_surface(key, &value)
    }

    /// Store a projection checkpoint (see `write/indexer.rs`).
    pub(crate) fn put_checkpoint(
        &mut self,
        key: [u8; keys::EVENT_KEY_LEN],
        value: Vec<u8>,
    ) -> Result<()> {
        self.bytes += key.len() + value.len();
        self.batch.put_checkpoint(&key, &value)
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
        self.batch.put_event_record(&key, &value)?;
        if self.bytes >= self.store.options.import_batch_bytes {
            self.spill()?;
        }
        Ok(())
    }

    /// Commit what is buffered so far (not synced: only the final commit acknowledges).
    fn spill(&mut self) -> Result<()> {
        let mut batch = self.batch.take();
        if !self.spilled {
            batch.mark_pending(self.number)?;
            self.spilled = true;
        }
        batch.commit_unsynced("writing an import batch")?;
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
    /// tail counts are taken from what was written; returns the metadata committed. With
    /// `defer_sync` the commit is not fsynced.
    pub(crate) fn finish(mut self, mut meta: SessionMeta, defer_sync: bool) -> Result<SessionMeta> {
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
        self.batch.insert_session(&meta)?;
        self.batch
            .record_change(landed(&meta, self.replaces.as_ref()), None);
        if self.spilled {
            self.batch.clear_pending(self.number)?;
        }
        if let Some(old) = &self.replaces {
            self.batch.remove_session(old, false)?;
        }
        let context = format!("committing session \"{}\"", meta.id_lossy());
        if defer_sync {
            self.batch.commit_unsynced(&context)?;
        } else {
            self.batch.commit(&context)?;
        }
        Ok(meta)
    }
}

/// The change a whole session landing as `meta` makes, in place of `replaced` if any: a fork
/// (its events from its seed on are its own), a migration's successor or an archived session
/// restored (both replace the stored record of the same id), else an import.
fn landed(meta: &SessionMeta, replaced: Option<&SessionMeta>) -> Change {
    let (kind, other) = match (&meta.fork_of, replaced) {
        (Some(base), _) => (
            ChangeKind::Forked,
            String::from_utf8_lossy(&base.id).into_owned(),
        ),
        (None, Some(old)) if old.archived.is_some() => (ChangeKind::Restored, String::new()),
        (None, Some(_)) => (ChangeKind::Migrated, String::new()),
        (None, None) => (ChangeKind::Imported, String::new()),
    };
    Change::new(kind, &meta.id, 0, meta.events).with_other(other)
}
