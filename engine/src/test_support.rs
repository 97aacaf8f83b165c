//! Helpers for the engine's unit tests: a store in a temp directory holding one small V0
//! session, and direct edits of stored values to simulate damage the public API cannot cause.

use std::sync::atomic::{AtomicUsize, Ordering};

use sessionlog_codec::format::event::NewEvent;

use crate::error::Refusal;

use crate::layout::keys;
use crate::layout::keys::CF_EVENTS;
use crate::layout::meta::{SessionMeta, SourceEncoding};
use crate::options::{Durability, Options};
use crate::store::{CommitHook, CommitRecord, Store};
use crate::write::session_batch::SessionBatch;

/// A V0 session header with id `a`.
const HEADER: &str =
    r#"{"type":"session","version":0,"id":"a","createdAt":1,"cwd":"/w","delegationDepth":0}"#;

/// A system of record that takes every batch, counting them.
#[derive(Default)]
pub(crate) struct Counts(pub(crate) AtomicUsize);

impl CommitHook for Counts {
    fn commit(&self, records: &[&CommitRecord]) -> Vec<Result<(), Refusal>> {
        self.0.fetch_add(records.len(), Ordering::SeqCst);
        records.iter().map(|_| Ok(())).collect()
    }
}

/// A batch-shape event as an append input.
pub(crate) fn ev(text: &str) -> NewEvent {
    NewEvent::from_value(&sessionlog_codec::json::parse(text).expect("json")).expect("event")
}

/// Session `id`'s file, as kept.
pub(crate) fn exported(store: &Store, id: &str) -> Vec<u8> {
    let mut out = Vec::new();
    store.export(id, None, &mut out).expect("export");
    out
}

/// An empty store (buffered durability) in a temp directory.
pub(crate) fn empty() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("temp dir");
    let options = Options {
        durability: Durability::Buffered,
        ..Options::default()
    };
    let store = Store::open(dir.path().join("db"), options).expect("open");
    (dir, store)
}

/// A store holding session `a`: a user message at seq 0, an assistant message at 1 and a tool
/// result at 2, all on the surface, appended as one batch (one block keyed at seq 0).
pub(crate) fn seeded() -> (tempfile::TempDir, Store) {
    let (dir, store) = empty();
    store
        .create_session(HEADER, SourceEncoding::Jsonl)
        .expect("create");
    let batch = vec![
        ev(
            r#"{"type":"user/message","time":2,"data":{"content":[],"source":{"kind":"user"},"role":"user","id":"u1"},"surfaceOp":"append"}"#,
        ),
        ev(
            r#"{"type":"assistant/message","time":3,"data":{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","source":{"kind":"model","provider":"p","model":"m"},"content":[{"type":"text","text":"x"}]}},"surfaceOp":"append","sourceEventSeqs":[]}"#,
        ),
        ev(
            r#"{"type":"tool/result","time":4,"data":{"turn":1,"step":1,"message":{"id":"t1","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"out"}],"isError":false}]}},"surfaceOp":"append","sourceEventSeqs":[1]}"#,
        ),
    ];
    store.append("a", Some(0), batch).expect("seed batch");
    (dir, store)
}

/// Overwrite session `a`'s first block with bytes that fail its checksum.
pub(crate) fn damage_first_block(store: &Store) {
    let number = store.require_meta(b"a").expect("meta").number;
    store.raw_put(
        CF_EVENTS,
        &keys::event_key(number, keys::BLOCK, 0),
        b"damaged block",
    );
}

/// Store `edit` applied to session `a`'s metadata (its `S` and counters records, as every
/// write of the metadata does).
pub(crate) fn edit_meta(store: &Store, edit: impl FnOnce(&mut SessionMeta)) {
    let mut meta = store.require_meta(b"a").expect("meta");
    edit(&mut meta);
    let mut batch = SessionBatch::new(store);
    batch.put_meta(&meta).expect("stage");
    batch.commit("editing metadata").expect("commit");
}

/// Every DSH session log (`.jsonl`, `.jsonl.zstd`) under `<repo>/../shared/fixtures`, sorted;
/// `None`, noted, when the fixtures are not there, which fails the test under `CI`.
pub(crate) fn fixture_logs() -> Option<Vec<std::path::PathBuf>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures");
    if !root.is_dir() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{} is missing",
            root.display()
        );
        eprintln!("skipped: {} is missing", root.display());
        return None;
    }
    let mut logs = Vec::new();
    let mut dirs = vec![root];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let name = path.to_string_lossy();
            if path.is_dir() {
                dirs.push(path);
            } else if name.ends_with(".jsonl") || name.ends_with(".jsonl.zstd") {
                logs.push(path);
            }
        }
    }
    logs.sort();
    assert!(logs.len() > 100, "only {} fixture logs found", logs.len());
    Some(logs)
}
