//! A store with a commit hook is the index of a system of record (a fleet's host): every write
//! that would change it without reaching the hook is refused, naming the write and its session,
//! and changes nothing; the system of record's own decisions
//! ([`Store::apply_recorded`]) and its replicated batches are applied. Every public method of
//! `Store`, one by one: `fleet_boundary.rs`.

mod fleet_boundary;

use std::sync::Arc;

use sessionlog_codec::format::zstd::compress_frame;

use crate::error::Error;
use crate::layout::meta::{ArchivedFile, SourceEncoding};
use crate::ops::append::AppendItem;
use crate::ops::import::ImportOptions;
use crate::ops::retention::RecordedChange;
use crate::store::Store;
use crate::test_support::{exported, seeded, Counts};

const HEADER_B: &str =
    r#"{"type":"session","version":0,"id":"b","createdAt":1,"cwd":"/w","delegationDepth":0}"#;

/// Session `a` (seeded) in a store that then gets a hook.
fn index() -> (tempfile::TempDir, Store) {
    let (dir, store) = seeded();
    store
        .set_commit_hook(Arc::<Counts>::default())
        .expect("hook");
    (dir, store)
}

/// `outcome` is the fleet refusal of `operation`, whose message names `target`, and session
/// `a` is unchanged.
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
                message.starts_with("this store is the index of a fleet: ")
                    && message.contains(target),
                "{operation}: {message}"
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
    // A repair with nothing to repair writes nothing, so it is answered.
    assert_eq!(store.repair("a").expect("nothing to repair").closers, 0);
    assert_eq!(store.cut_torn_tail("a").expect("no tail").cut_bytes, 0);
    assert_eq!(exported(&store, "a"), before);
    refused(
        &store,
        &before,
        store.resume("a"),
        "resume",
        "session \"a\"",
    );
}

#[test]
fn archive_and_retention_are_refused_in_a_fleet_s_index() {
    let (_dir, store) = index();
    let before = exported(&store, "a");
    let plan = store.archive_plan("a").expect("a plan changes nothing");
    refused(
        &store,
        &before,
        store.commit_archive(&plan, "s3://bucket/root", vec![generation("a", 0)]),
        "archive",
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
    // What changes nothing is answered: a dry run, a purge with nothing deleted.
    assert!(store.purge(0, true).expect("dry run").sessions.is_empty());
    assert!(store
        .purge(0, false)
        .expect("nothing due")
        .sessions
        .is_empty());
}

/// Session `id`'s `.jsonl` generation `version` as uploaded (its key, size and hash are not
/// checked here).
fn generation(id: &str, version: u32) -> ArchivedFile {
    ArchivedFile {
        key: format!("--w--/{id}/session.jsonl"),
        version,
        zstd: false,
        bytes: 0,
        sha256: [0; 32],
    }
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
