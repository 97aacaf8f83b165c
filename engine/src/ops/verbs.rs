//! The first-contact verbs: a session created with its first batch, its events read into a
//! `Vec`, its bytes exported into one. Each is a thin form of the one way the store does it —
//! writes through [`Store::append_many`] (the one write path), reads through [`Store::events`]
//! and [`Store::export`] — for a newcomer, and for code that handles one session at a time.
//!
//! Hosts writing many sessions at once use the forms beside them: [`Store::append_many`] (one
//! commit for several sessions' batches, each refused or stored on its own rules) and
//! [`AppendQueue`](crate::AppendQueue) (group commit across callers without a thread per waiting
//! append); [`Store::append`] appends one batch to one session.

use sessionlog_codec::format::event::NewEvent;
use sessionlog_codec::json::Value;

use crate::error::{Error, Result};
use crate::layout::meta::SourceEncoding;
use crate::ops::append::{header_of, AppendItem, AppendReceipt};
use crate::store::Store;

impl Store {
    /// Create the session `header_line` names (its header line, without `\n`, as DSH's writer
    /// authors it: [`author_header`](sessionlog_codec::format::header::author_header)) with
    /// `first` as its first batch, in one commit: durable when this returns (under
    /// [`Durability::Sync`](crate::Durability::Sync)), or refused whole, nothing written. Its
    /// bytes are kept as `encoding`. `first` may be empty.
    pub fn create(
        &self,
        header_line: &str,
        encoding: SourceEncoding,
        first: Vec<NewEvent>,
    ) -> Result<AppendReceipt> {
        let id = header_of(header_line)?.id.to_string_lossy();
        let item = AppendItem::new(id, Some(0), first).creating(header_line, encoding);
        self.append_many(vec![item])
            .pop()
            .unwrap_or_else(|| Err(Error::Internal("no creation result".into())))
    }

    /// The logical events of session `id` whose seqs are in `from..=to` (`to` `None`: to the
    /// end), in order, as DSH's reader parses them. [`Store::events`] streams them instead,
    /// for logs too large to hold.
    pub fn read_events(&self, id: &str, from: u64, to: Option<u64>) -> Result<Vec<Value>> {
        let mut events = Vec::new();
        self.events(id, from, to, &mut |_, event| {
            events.push(event.clone());
            Ok(())
        })?;
        Ok(events)
    }

    /// Session `id`'s log, byte for byte as DSH's writer writes its file, in the encoding it
    /// is kept in. [`Store::export`] writes it to any writer, or converts it.
    pub fn export_bytes(&self, id: &str) -> Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.export(id, None, &mut bytes)?;
        Ok(bytes)
    }
}
