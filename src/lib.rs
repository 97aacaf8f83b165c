//! sessionlog: an embedded store, on RocksDB, for the session logs of DeepSeek Harness (DSH).
//!
//! A session is an append-only log of DSH events. The store keeps every line's exact bytes (an
//! export is byte for byte what DSH's JSONL writer writes, `.jsonl` or `.jsonl.zstd`), indexes
//! the logical events once, as they are written, and answers point-in-time questions (what the
//! model saw at seq N, a projection unit's state at seq N) from those indexes. Appends of any
//! number of sessions and threads share one WAL write and one fsync (group commit).
//!
//! This crate re-exports the two crates a host uses: [`engine`] (the store: [`engine::Store`],
//! its options, errors and reports) and [`codec`] (DSH's formats and rules, pure: events,
//! headers, JS-faithful JSON).
//!
//! ```rust
//! use sessionlog::codec::format::event::NewEvent;
//! use sessionlog::codec::format::header::{author_header, HeaderFields};
//! use sessionlog::codec::json;
//! use sessionlog::engine::{Options, SourceEncoding, Store};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path(), Options::default())?;
//! // Events as a host hands them over; the store assigns their seqs and times.
//! let batch = |lines: &[&str]| -> Result<Vec<NewEvent>, Box<dyn std::error::Error>> {
//!     lines.iter().map(|l| Ok(NewEvent::from_value(&json::parse(l)?)?)).collect()
//! };
//!
//! // A session is created with its first batch: one commit, durable when the call returns.
//! let header = author_header(&HeaderFields {
//!     id: "s1".into(),
//!     created_at: 1_700_000_000_000,
//!     version: 4,
//!     ..HeaderFields::default()
//! });
//! let first = batch(&[
//!     r#"{"type":"turn/start","data":{"turn":1}}"#,
//!     r#"{"type":"user/message","data":{"id":"u1","role":"user","content":[{"type":"text","text":"List the files."}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
//!     r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}"#,
//! ])?;
//! store.create(&header, SourceEncoding::Jsonl, first)?;
//!
//! // Later batches are appended at the seq the host expects next (a stale one writes nothing).
//! let second = batch(&[
//!     r#"{"type":"turn/start","data":{"turn":2}}"#,
//!     r#"{"type":"user/message","data":{"id":"u2","role":"user","content":[{"type":"text","text":"Now the tests."}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
//!     r#"{"type":"turn/end","data":{"turn":2,"reason":{"kind":"completed"}}}"#,
//! ])?;
//! store.append("s1", Some(3), second)?;
//!
//! // The events, seqs assigned, as DSH's reader parses them.
//! assert_eq!(store.read_events("s1", 0, None)?.len(), 6);
//!
//! // What the model saw at seq 2, answered from the indexes without replaying the log.
//! assert_eq!(store.messages_at("s1", Some(2))?.len(), 1);
//! assert_eq!(store.messages_at("s1", None)?.len(), 2);
//!
//! // The log, byte for byte as DSH's JSONL writer writes it: the header and six event lines.
//! let jsonl = store.export_bytes("s1")?;
//! assert!(jsonl.starts_with(header.as_bytes()));
//! assert_eq!(jsonl.iter().filter(|&&b| b == b'\n').count(), 7);
//!
//! // A host writing many sessions at once commits their batches together: `Store::append_many`
//! // (one commit for several sessions), `AppendQueue` (group commit without a thread per append).
//! # Ok(())
//! # }
//! ```
//!
//! More: `examples/` (many threads sharing fsyncs, point-in-time queries, a bulk export as a DSH
//! session root), the README's glossary, and `docs/design.md` (the write and read paths).

pub use sessionlog_codec as codec;
pub use sessionlog_engine as engine;
