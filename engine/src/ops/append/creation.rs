//! A session created by an append item that carries its header ([`AppendItem::creating`]): the
//! one way a session is created, header and first batch in one commit, as DSH's backends publish
//! a session only with its first batch. The header is checked as DSH's strict header check does
//! (unless the item is written as DSH's writer wrote it, which keeps any header that names a
//! session), and the session's keys go into the call's one batch.
//!
//! Invariant: a creation writes nothing unless its batch is admitted. Its keys are staged after
//! the batch's, with the metadata the session will have once the batch commits, so a batch
//! refused by DSH's rules leaves no trace of the session either.
//!
//! [`AppendItem::creating`]: super::AppendItem::creating

use sessionlog_codec::format::header::{Header, HeaderCheck};
use sessionlog_codec::format::zstd::FrameCompressor;
use sessionlog_codec::log_reader::LogReader;

use crate::error::{Error, Result};
use crate::layout::keys;
use crate::layout::meta::{SessionMeta, SourceEncoding};
use crate::layout::values::checked_value;
use crate::store::{Claim, CreatedSession, SeamReader, Store};
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
    /// check passes and the format is V0 or V4. `as_written`: any line that names a session is
    /// kept, DSH's reader judging it with the log.
    pub(crate) fn check(
        header_line: &str,
        encoding: SourceEncoding,
        as_written: bool,
    ) -> Result<NewHeader> {
        let header = super::header_of(header_line)?;
        let refuse = |rule: String| Error::Rejected {
            id: header.id.to_string_lossy(),
            seq: None,
            rule: format!("header: {rule}"),
        };
        match &header.check {
            _ if as_written => {}
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

    /// The session as its creation's record for the store's commit hook shows it.
    pub(crate) fn created(&self) -> CreatedSession {
        let zstd = self.encoding == SourceEncoding::JsonlZstd;
        CreatedSession {
            header: if zstd {
                self.frame.clone()
            } else {
                self.record.clone()
            },
            zstd,
            version: self.header.version.unwrap_or(0),
        }
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

    /// DSH's reader before the session's first line, for a creation written as DSH's writer
    /// wrote it: the session is not stored, so there is nothing to read again.
    pub(crate) fn seam_reader(&self) -> SeamReader {
        SeamReader {
            reader: LogReader::new(&self.header, self.record.len() as u64),
            header: self.header.clone(),
            fragment: Vec::new(),
        }
    }

    /// The metadata of the session, empty, under a newly allocated number (`as_written`: with
    /// the verdict DSH's reader gives the header alone).
    pub(crate) fn empty_meta(&self, store: &Store, as_written: bool) -> SessionMeta {
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
        if as_written {
            // What DSH's reader says of the header alone: a log DSH's writer began with a header
            // DSH refuses keeps that refusal until its body has one of its own.
            let len = self.record.len() as u64;
            meta.verdict = self
                .seam_reader()
                .reader
                .verdict(&self.header, None, len)
                .into();
        }
        meta
    }

    /// Stage the session's keys: its header frame, if any, and its metadata and index keys as
    /// `meta` (the metadata once the call commits) holds them.
    pub(crate) fn stage(&self, meta: &SessionMeta, batch: &mut SessionBatch<'_>) -> Result<()> {
        if !self.frame.is_empty() {
            let key = keys::event_key(meta.number, keys::FRAME, 0);
            batch.put_event_record(&key, &checked_value(&self.frame))?;
        }
        batch.insert_session(meta)
    }
}
