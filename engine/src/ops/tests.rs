//! A store with a commit hook is the index of a system of record (a fleet's host): every write
//! that would change it without reaching the hook is refused, naming the operation and the
//! session, and changes nothing; the system of record's own decisions
//! ([`Store::apply_recorded`]) and its replicated batches are applied.

use std::path::PathBuf;
use std::sync::Arc;

use sessionlog_codec::format::zstd::compress_frame;

use crate::error::{Error, Refusal};
use crate::layout::meta::SourceEncoding;
use crate::ops::append::AppendItem;
use crate::ops::generations::{GenerationFile, SessionDir};
use crate::ops::import::ImportOptions;
use crate::ops::migrate::MigrateOptions;
use crate::ops::retention::RecordedChange;
use crate::store::{CommitHook, CommitRecord, Store};
use crate::test_support::{exported, seeded};

/// A system of record that takes every batch.
struct TakesAll;

impl CommitHook for TakesAll {
    fn commit(&self, records: &[&CommitRecord]) -> Vec<Result<(), Refusal>> {
        records.iter().map(|_| Ok(())).collect()
    }
}

const HEADER_B: &str =
    r#"{"type":"session","version":0,"id":"b","createdAt":1,"cwd":"/w","delegationDepth":0}"#;

/// Session `a` (seeded) in a store that then gets a hook.
fn index() -> (tempfile::TempDir, Store) {
    let (dir, store) = seeded();
    store.set_commit_hook(Arc::new(TakesAll)).expect("hook");
    (dir, store)
}

/// `outcome` is the refusal of `operation` on `target`, and session `a` is unchanged.
#[track_caller]
fn refused<T: std::fmt::Debug>(
    store: &Store,
    before: &[u8],
    outcome: crate::error::Result<T>,
    operation: &str,
    target: &str,
) {
    match outcome {
        Err(e @ Error::IndexOfFleet { .. }) => {
            let message = e.to_string();
            assert!(
                message.starts_with(&format!(
                    "this store is the index of a fleet: {operation} of {target}"
                )),
                "{message}"
            );
        }
        other => panic!("{operation}: expected the fleet refusal, got {other:?}"),
    }
    assert_eq!(
        exported(store, "a"),
        before,
        "{operation} changed session a"
    );
    assert_eq!(store.summary("a").expect("a").deleted_at_ms, None);
}

#[test]
fn imports_forks_and_repairs_are_refused_in_a_fleet_s_index() {
    let (_dir, store) = index();
    let before = exported(&store, "a");
    let jsonl = format!("{HEADER_B}\n");
    let options = ImportOptions::default();
    refused(
        &store,
        &before,
        store.import_jsonl("b.jsonl", jsonl.as_bytes(), &options, &mut |_| {}),
        "import",
        "session \"b\"",
    );
    let zstd = compress_frame(jsonl.as_bytes()).expect("frame");
    refused(
        &store,
        &before,
        store.import_zstd("b.jsonl.zstd", &zstd, &options),
        "import",
        "session \"b\"",
    );
    assert!(
        store.meta(b"b").expect("meta").is_none(),
        "nothing imported"
    );
    refused(
        &store,
        &before,
        store.fork("a", None, "c"),
        "fork",
        "session \"c\"",
    );
    assert!(store.meta(b"c").expect("meta").is_none(), "nothing forked");
    refused(
        &store,
        &before,
        store.repair("a"),
        "repair",
        "session \"a\"",
    );
    refused(
        &store,
        &before,
        store.cut_torn_tail("a"),
        "repair",
        "session \"a\"",
    );
    refused(
        &store,
        &before,
        store.resume("a"),
        "resume",
        "session \"a\"",
    );
}

#[test]
fn migration_archive_and_retention_are_refused_in_a_fleet_s_index() {
    let (_dir, store) = index();
    let before = exported(&store, "a");
    refused(
        &store,
        &before,
        store.migrate("a", &MigrateOptions::default()),
        "migrate",
        "session \"a\"",
    );
    let plan = store.archive_plan("a").expect("a plan changes nothing");
    refused(
        &store,
        &before,
        store.commit_archive(&plan, "s3://bucket/root", Vec::new()),
        "archive",
        "session \"a\"",
    );
    let dir = SessionDir {
        served: GenerationFile {
            version: 0,
            zstd: false,
            path: PathBuf::from("/nonexistent/session.jsonl"),
        },
        lower: Vec::new(),
    };
    refused(
        &store,
        &before,
        store.restore_archived("a", &dir),
        "restore",
        "session \"a\"",
    );
    refused(
        &store,
        &before,
        store.delete("a"),
        "delete",
        "session \"a\"",
    );
    refused(
        &store,
        &before,
        store.undelete("a"),
        "undelete",
        "session \"a\"",
    );
    refused(
        &store,
        &before,
        store.purge(0, false),
        "purge",
        "the deleted sessions",
    );
    // Looking changes nothing: a dry run is not refused.
    assert!(store.purge(0, true).expect("dry run").sessions.is_empty());
}

#[test]
fn the_system_of_record_s_decisions_and_batches_are_applied() {
    let (_dir, store) = index();
    let item =
        AppendItem::replicated("b", Some(0), Vec::new()).creating(HEADER_B, SourceEncoding::Jsonl);
    store
        .append_many(vec![item])
        .pop()
        .expect("outcome")
        .expect("replicated creation");
    store
        .apply_recorded(&RecordedChange::Deleted("a".into()))
        .expect("recorded deletion");
    assert!(store.summary("a").expect("a").deleted_at_ms.is_some());
    store
        .apply_recorded(&RecordedChange::Undeleted("a".into()))
        .expect("recorded restoration");
    assert_eq!(store.summary("a").expect("a").deleted_at_ms, None);
    // A purge the record made removes the sessions it names, deleted here or not, and no other.
    store
        .apply_recorded(&RecordedChange::Purged(vec!["a".into()]))
        .expect("recorded purge");
    assert!(store.meta(b"a").expect("meta").is_none());
    assert!(store.meta(b"b").expect("meta").is_some());
}
