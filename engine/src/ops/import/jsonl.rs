//! `.jsonl` import: streamed line by line, so memory is bounded by the write batch plus the
//! longest line. Every body line keeps its exact bytes; DSH's batch boundaries are invisible in
//! a plain file, so the whole body is batch 1 (the header is batch 0).

use std::io::BufRead;

use sessionlog_codec::format::header::parse_header;

use super::{check_strict, BodyIndexer, ImportOptions, ImportReport, Landing};
use crate::error::{Error, Result};
use crate::layout::meta::{SessionMeta, SourceEncoding};
use crate::store::Store;

/// The batch number of every line of a `.jsonl` import.
const BODY_BATCH: u64 = 1;

impl Store {
    /// Import one `.jsonl` session log read from `input`; `source_name` names it in errors.
    /// `progress` is called with the number of bytes consumed so far.
    pub fn import_jsonl(
        &self,
        source_name: &str,
        input: impl BufRead,
        options: &ImportOptions,
        progress: &mut dyn FnMut(u64),
    ) -> Result<ImportReport> {
        self.land_jsonl(source_name, input, options, Landing::default(), progress)
    }

    /// [`Store::import_jsonl`] landing as `landing` says.
    pub(crate) fn land_jsonl(
        &self,
        source_name: &str,
        mut input: impl BufRead,
        options: &ImportOptions,
        landing: Landing,
        progress: &mut dyn FnMut(u64),
    ) -> Result<ImportReport> {
        let io = |source| Error::Io {
            path: source_name.into(),
            source,
        };
        let mut header_line = Vec::new();
        input.read_until(b'\n', &mut header_line).map_err(io)?;
        let Some((b'\n', header_text)) = header_line.split_last() else {
            let reason = if header_line.is_empty() {
                "the file is empty"
            } else {
                "it has no newline-terminated first line"
            };
            return Err(Error::NotASession {
                source_name: source_name.into(),
                reason: format!("empty or header-less session log ({reason})"),
            });
        };
        let header = parse_header(header_text).map_err(|e| Error::NotASession {
            source_name: source_name.into(),
            reason: e.to_string(),
        })?;
        let full_parse = landing.full_parse;
        self.import_session(source_name, &header, options, landing, |mut w| {
            let header_len = header_line.len() as u64;
            let mut body = BodyIndexer::new(source_name, &header, header_len, full_parse);
            let mut offset = header_len;
            let mut line = Vec::new();
            let mut committed_bytes = header_len;
            loop {
                line.clear();
                let n = input.read_until(b'\n', &mut line).map_err(io)?;
                if n == 0 {
                    break;
                }
                offset += n as u64;
                progress(offset);
                // A final fragment without `\n` is never consumed by DSH's reader: it is tail.
                let committed = match line.split_last() {
                    Some((b'\n', bytes)) => body.line(&mut w, bytes, BODY_BATCH)?,
                    _ => false,
                };
                if committed {
                    committed_bytes = offset;
                } else {
                    w.put_tail(&line)?;
                }
            }
            let verdict = body.verdict(&header, None, offset);
            check_strict(options, source_name, &header, &verdict)?;
            let meta = SessionMeta {
                verdict,
                events: body.reader.scanner.events(),
                body_lines: body.reader.scanner.lines(),
                committed_bytes,
                total_bytes: offset,
                plaintext_bytes: committed_bytes,
                surface_error: body.surface.error.clone(),
                surface_since_snapshot: body.surface.indexer.since_snapshot,
                activity_ms: body.activity(),
                inherited_cut: body.reader.scanner.cut(),
                next_batch: BODY_BATCH + 1,
                ..SessionMeta::new(
                    w.number(),
                    &header,
                    header_line.clone(),
                    SourceEncoding::Jsonl,
                )
            };
            w.finish(meta, options.defer_sync)
        })
    }
}
