//! A session created through the store's own API: [`Store::create_session`] alone, or with its
//! first batch in one [`Store::append_many`] item ([`AppendItem::creating`]), as DSH's backends
//! publish a session only with its first batch. Either way the header is checked as DSH's strict
//! header check does, and the session's keys go into the call's one WriteBatch.
//!
//! Invariant: a creation writes nothing unless its batch is admitted. Its keys are staged after
//! the batch's, with the metadata the session will have once the batch commits, so a batch
//! refused by DSH's rules leaves no trace of the session either.
//!
//! [`AppendItem::creating`]: super::AppendItem::creating

use sessionlog_codec::format::header::{Header, HeaderCheck};
use sessionlog_codec::format::zstd::FrameCompressor;

use crate::error::{Error, Result};
use crate::layout::keys::{self, CF_EVENTS};
use crate::layout::meta::{SessionMeta, SourceEncoding};
use crate::layout::values::checked_value;
use crate::store::{Claim, Store};
use crate::write::session_batch::SessionBatch;

/// A header line that passed the checks, with the bytes stored for it.
pub(crate) struct NewHeader {
    header: Header,
    /// The header line and its `\n`.
    record: Vec<u8>,
    /// The record's zstd frame (`.jsonl.zstd` sessions), else empty.
    frame: Vec<u8>,
    encoding: SourceEncoding,
}

impl NewHeader {
    /// Check `header_line` (without `\n`) as a header sessionlog may author: DSH's strict header
    /// check passes and the format is V0 or V4.
    pub(crate) fn check(header_line: &str, encoding: SourceEncoding) -> Result<NewHeader> {
        let header = super::header_of(header_line)?;
        let refuse = |rule: String| Error::Rejected {
            id: header.id.to_string_lossy(),
            seq: None,
            rule: format!("header: {rule}"),
        };
        match &header.check {
            HeaderCheck::Corrupt(m) | HeaderCheck::Unsupported(m) => return Err(refuse(m.clone())),
            HeaderCheck::Valid if !matches!(header.version, Some(0 | 4)) => {
                return Err(refuse(
                    "sessionlog authors format v0 and v4 sessions".into(),
                ))
            }
            HeaderCheck::Valid => {}
        }
        let mut record = header_line.as_bytes().to_vec();
        record.push(b'\n');
        let mut frame = Vec::new();
        if encoding == SourceEncoding::JsonlZstd {
            FrameCompressor::new()?.compress_into(&record, &mut frame)?;
        }
        Ok(NewHeader {
            header,
            record,
            frame,
            encoding,
        })
    }

    /// The session id the header names.
    pub(crate) fn id(&self) -> String {
        self.header.id.to_string_lossy()
    }

    /// Claim the id for this creation: refused while another creation or import of it is under
    /// way in this process, or when it is stored.
    pub(crate) fn claim<'s>(&self, store: &'s Store) -> Result<Claim<'s>> {
        store.claim_new(&format!("create {}", self.id()), &self.header)
    }

    /// The metadata of the session, empty, under a newly allocated number.
    pub(crate) fn empty_meta(&self, store: &Store) -> SessionMeta {
        let mut meta = SessionMeta::new(
            store.allocate_number(),
            &self.header,
            self.record.clone(),
            self.encoding,
        );
        if !self.frame.is_empty() {
            meta.frames = 1;
            meta.total_bytes = self.frame.len() as u64;
        }
        meta
    }

    /// Stage the session's keys: its header frame, if any, and its metadata and index keys as
    /// `meta` (the metadata once the call commits) holds them.
    pub(crate) fn stage(&self, meta: &SessionMeta, batch: &mut SessionBatch<'_>) -> Result<()> {
        if !self.frame.is_empty() {
            let key = keys::event_key(meta.number, keys::FRAME, 0);
            batch.put(CF_EVENTS, &key, &checked_value(&self.frame))?;
        }
        batch.insert_session(meta)
    }
}
