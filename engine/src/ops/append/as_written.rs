//! Writes through DSH's persistence seam. DSH's own JSONL backend stores every batch its
//! coordinator hands it and judges the log only when it loads it: the coordinator normalises
//! legacy message shapes then, and refuses unknown event types and foreign format versions with
//! its own errors. A backend behind that seam must keep what DSH wrote in the same way, so these
//! calls store the lines exactly as DSH's writer would write them and record the verdict DSH
//! 0.1.0's reader gives the whole log, as import does, instead of refusing the batch.
//!
//! [`Store::create_session`] and [`Store::append`] stay the store's own API, strict as before;
//! a host calls these only where DSH's writer is the one deciding what its log holds.
//!
//! Invariants: each call is one atomic commit (an import of the whole log, replacing the stored
//! session when there is one, its frozen generations kept); a torn or deleted session takes no
//! write here either; the lines are the ones `write/lines.rs` authors for the strict path.

use sessionlog_codec::format::event::NewEvent;
use sessionlog_codec::format::zstd::FrameCompressor;
use sessionlog_codec::json::Value;

use super::AppendReceipt;
use crate::error::{Error, Result};
use crate::layout::meta::{now_ms, SourceEncoding, Verdict};
use crate::ops::import::{ImportOptions, ImportReport, Landing};
use crate::store::{lock_session, Store};
use sessionlog_codec::format::lines::author_lines;

impl Store {
    /// Create session `header_line`'s log with its first batch `events` (seqs from 0) in one
    /// commit, as DSH's writer creates a session file. The header need only name a session (its
    /// version may be one DSH refuses at load); the log is stored with its reader verdict.
    /// `defer_sync`: the commit is not fsynced; the caller makes it durable with
    /// [`Store::sync`] (many creations, one fsync) before acknowledging it.
    pub fn create_as_written(
        &self,
        header_line: &str,
        encoding: SourceEncoding,
        events: Vec<NewEvent>,
        defer_sync: bool,
    ) -> Result<ImportReport> {
        self.check_writable()?;
        let header = super::header_of(header_line)?;
        let id = header.id.to_string_lossy();
        let version = header.version.unwrap_or(0);
        let mut text = String::with_capacity(header_line.len() + 1);
        text.push_str(header_line);
        text.push('\n');
        let mut bytes = Vec::new();
        if encoding == SourceEncoding::JsonlZstd {
            FrameCompressor::new()?.compress_into(text.as_bytes(), &mut bytes)?;
            text.clear();
        }
        let lines = authored_lines(&id, version, 0, events)?;
        let options = ImportOptions {
            defer_sync,
            ..ImportOptions::default()
        };
        self.land_as_written(
            &id,
            encoding,
            (bytes, text),
            lines,
            &options,
            Landing::default(),
        )
    }

    /// Append `events` to session `id` as DSH's writer would, whatever DSH's reader will say of
    /// the result. Slower than [`Store::append`] (the log is re-read): for batches the strict
    /// append refuses. The first event takes seq `expected_next_seq` (default: the stored count);
    /// a clean log must have exactly that many events.
    pub fn append_as_written(
        &self,
        id: &str,
        expected_next_seq: Option<u64>,
        events: Vec<NewEvent>,
    ) -> Result<AppendReceipt> {
        self.check_writable()?;
        self.write_open(id)?;
        let handle = self.write_states.handle(id.as_bytes());
        let mut state = lock_session(&handle);
        let meta = self.require_meta(id.as_bytes())?;
        meta.require_undeleted()?;
        let first_seq = match (&meta.verdict, expected_next_seq) {
            (Verdict::Torn, _) => {
                return Err(Error::NotAppendable {
                    id: id.into(),
                    reason: "its log has a torn tail; repair it first (sessionlog repair)".into(),
                })
            }
            (Verdict::Clean, Some(expected)) if expected != meta.events => {
                return Err(Error::StaleSeq {
                    id: id.into(),
                    expected,
                    actual: meta.events,
                })
            }
            (_, expected) => expected.unwrap_or(meta.events),
        };
        let receipt = AppendReceipt {
            first_seq,
            count: events.len() as u64,
        };
        if events.is_empty() {
            return Ok(receipt);
        }
        let lines = authored_lines(id, meta.version, first_seq, events)?;
        let mut stored = Vec::with_capacity(meta.total_bytes as usize + lines.len());
        self.export(id, None, &mut stored)?;
        let versions: Vec<u32> = meta.frozen.iter().map(|f| f.version).collect();
        let landing = Landing {
            lower: Some(self.generation_files(&meta, &versions)?),
            replaces: Some(meta.clone()),
        };
        let options = ImportOptions::default();
        self.land_as_written(
            id,
            meta.source,
            (stored, String::new()),
            lines,
            &options,
            landing,
        )?;
        *state = None;
        Ok(receipt)
    }

    /// Import `stored` (bytes already in `encoding`, then text) followed by `lines` (the text
    /// framed once more under zstd) as session `id`'s whole log.
    fn land_as_written(
        &self,
        id: &str,
        encoding: SourceEncoding,
        stored: (Vec<u8>, String),
        lines: String,
        options: &ImportOptions,
        landing: Landing,
    ) -> Result<ImportReport> {
        let name = format!("session \"{id}\" as DSH wrote it");
        let (mut bytes, mut plain) = stored;
        plain.push_str(&lines);
        match encoding {
            SourceEncoding::Jsonl => {
                bytes.extend_from_slice(plain.as_bytes());
                self.land_jsonl(&name, &bytes[..], options, landing, &mut |_| {})
            }
            SourceEncoding::JsonlZstd => {
                if !plain.is_empty() {
                    FrameCompressor::new()?.compress_into(plain.as_bytes(), &mut bytes)?;
                }
                self.land_zstd(&name, &bytes, options, landing)
            }
        }
    }
}

/// The lines of `events` written from seq `first_seq` into a log of format `version`, with
/// DSH's envelope and its context-free append checks (the ones DSH's writer itself makes).
fn authored_lines(id: &str, version: u32, first_seq: u64, events: Vec<NewEvent>) -> Result<String> {
    let now = now_ms();
    let authored = events
        .into_iter()
        .enumerate()
        .map(|(k, event)| {
            let seq = first_seq + k as u64;
            event.author(seq, now).map_err(|rule| Error::Rejected {
                id: id.into(),
                seq: Some(seq),
                rule,
            })
        })
        .collect::<Result<Vec<Value>>>()?;
    let mut text = String::new();
    author_lines(version, &authored, &mut text, &mut Vec::new());
    Ok(text)
}

#[cfg(test)]
mod tests {
    use sessionlog_codec::format::event::NewEvent;
    use sessionlog_codec::json::parse;

    use crate::error::Error;
    use crate::layout::meta::{SourceEncoding, Verdict};
    use crate::test_support::empty;

    fn event(text: &str) -> NewEvent {
        NewEvent::from_logged(&parse(text).expect("json")).expect("event")
    }

    const HEADER: &str =
        r#"{"type":"session","version":0,"id":"s","createdAt":1,"cwd":"/w","delegationDepth":0}"#;

    fn exported(store: &crate::Store, id: &str) -> String {
        let mut out = Vec::new();
        store.export(id, None, &mut out).expect("export");
        String::from_utf8(out).expect("utf-8")
    }

    /// A batch DSH's reader refuses (an unknown, non-ignorable type) is refused by the strict
    /// append, and kept as written here: the bytes are DSH's, the verdict is its reader's.
    #[test]
    fn a_batch_dsh_refuses_at_load_is_kept_with_its_verdict() {
        let (_t, store) = empty();
        let turn = event(r#"{"type":"turn/start","time":5,"data":{"turn":1}}"#);
        let report = store
            .create_as_written(HEADER, SourceEncoding::Jsonl, vec![turn], false)
            .expect("create");
        assert_eq!(report.verdict, Verdict::Clean);
        let future = event(r#"{"type":"future/event","time":6,"data":{"payload":1}}"#);
        let strict = store.append("s", Some(1), vec![future.clone()]);
        assert!(matches!(strict, Err(Error::Rejected { .. })), "{strict:?}");
        let receipt = store
            .append_as_written("s", Some(1), vec![future])
            .expect("as written");
        assert_eq!((receipt.first_seq, receipt.count), (1, 1));
        assert_eq!(
            exported(&store, "s"),
            format!(
                "{HEADER}\n{}\n{}\n",
                r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}"#,
                r#"{"type":"future/event","seq":1,"time":6,"data":{"payload":1}}"#
            )
        );
        let summary = store.summary("s").expect("summary");
        assert!(
            matches!(summary.verdict, Verdict::Unsupported(_)),
            "{:?}",
            summary.verdict
        );
        assert_eq!(summary.body_lines, 2);
        let mut types = Vec::new();
        store
            .events_as_written("s", 1, &mut |e| {
                types.push(sessionlog_codec::json::stringify(e));
            })
            .expect("events as written");
        assert_eq!(
            types,
            [r#"{"type":"future/event","seq":1,"time":6,"data":{"payload":1}}"#]
        );
    }

    /// A header with a version DSH refuses is kept too, under zstd as one frame per write.
    #[test]
    fn a_foreign_version_is_kept_under_zstd() {
        let (_t, store) = empty();
        let header = r#"{"type":"session","version":99,"id":"v99","createdAt":1,"cwd":"/w"}"#;
        let turn = event(r#"{"type":"turn/start","time":5,"data":{"turn":1}}"#);
        store
            .create_as_written(header, SourceEncoding::JsonlZstd, vec![turn.clone()], false)
            .expect("create");
        store
            .append_as_written("v99", Some(1), vec![turn])
            .expect("append");
        let mut plain = Vec::new();
        store
            .export("v99", Some(crate::ExportFormat::Jsonl), &mut plain)
            .expect("export");
        let text = String::from_utf8(plain).expect("utf-8");
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.starts_with(header));
        let summary = store.summary("v99").expect("summary");
        assert!(matches!(summary.verdict, Verdict::Unsupported(_)));
    }

    /// The seam keeps the store's own rules on seqs and torn tails: a stale seq on a clean log
    /// and a deleted session write nothing.
    #[test]
    fn stale_seqs_and_deleted_sessions_are_still_refused() {
        let (_t, store) = empty();
        let turn = event(r#"{"type":"turn/start","time":5,"data":{"turn":1}}"#);
        store
            .create_as_written(HEADER, SourceEncoding::Jsonl, vec![turn.clone()], false)
            .expect("create");
        let before = exported(&store, "s");
        let stale = store.append_as_written("s", Some(7), vec![turn.clone()]);
        assert!(matches!(stale, Err(Error::StaleSeq { .. })), "{stale:?}");
        store.delete("s").expect("delete");
        let deleted = store.append_as_written("s", Some(1), vec![turn]);
        assert!(
            matches!(deleted, Err(Error::NotAppendable { .. })),
            "{deleted:?}"
        );
        store.undelete("s").expect("undelete");
        assert_eq!(exported(&store, "s"), before);
    }
}
