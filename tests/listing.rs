//! Listing by human activity and by creation, a page at a time; delete, undelete and purge.

use sessionlog::codec::format::event::NewEvent;
use sessionlog::codec::json;
use sessionlog::engine::{Durability, ListOrder, Options, SourceEncoding, Store};
use sessionlog_harness::gen::{session_bytes, GenOptions};

use crate::fixtures::{ev, export_bytes, import_bytes, temp_store};

fn header(id: &str, created: i64) -> String {
    format!(
        r#"{{"type":"session","version":0,"id":"{id}","createdAt":{created},"cwd":"/w","delegationDepth":0}}"#
    )
}

fn prompt(time: i64, kind: &str) -> NewEvent {
    ev(&format!(
        r#"{{"type":"user/message","time":{time},"data":{{"content":[],"source":{{"kind":"{kind}"}},"role":"user","id":"m{time}"}},"surfaceOp":"append"}}"#
    ))
}

/// Import `opts.sessions` generated sessions; their ids in import order.
fn import_generated(store: &Store, opts: &GenOptions) -> Vec<String> {
    (0..opts.sessions)
        .map(|i| {
            import_bytes(store, "gen", &session_bytes(i, opts), false)
                .expect("import")
                .id
        })
        .collect()
}

fn ids(store: &Store, order: ListOrder) -> Vec<String> {
    store
        .list_page(order, usize::MAX, None)
        .expect("list")
        .sessions
        .into_iter()
        .map(|s| s.id)
        .collect()
}

#[test]
fn activity_is_the_last_human_prompt_and_nothing_else_moves_it() {
    let (_d, store) = temp_store();
    for (id, created) in [("a", 1), ("b", 2), ("c", 3), ("quiet", 4)] {
        store
            .create_session(&header(id, created), SourceEncoding::Jsonl)
            .expect("create");
    }
    store
        .append("a", None, vec![prompt(100, "user")])
        .expect("a");
    store
        .append("b", None, vec![prompt(300, "user")])
        .expect("b");
    store
        .append("c", None, vec![prompt(200, "user")])
        .expect("c");
    assert_eq!(ids(&store, ListOrder::Activity), ["b", "c", "a", "quiet"]);
    // Later non-human events never move a session: a title, an end-seed, a compaction summary.
    store
        .append(
            "a",
            None,
            vec![ev(
                r#"{"type":"session/title","time":900,"data":{"title":"t"}}"#,
            )],
        )
        .expect("title");
    store
        .append(
            "a",
            None,
            vec![ev(r#"{"type":"session/end-seed","time":901,"data":{}}"#)],
        )
        .expect("end-seed");
    store
        .append("a", None, vec![prompt(902, "compact")])
        .expect("compaction copy");
    assert_eq!(ids(&store, ListOrder::Activity), ["b", "c", "a", "quiet"]);
    store
        .append("a", None, vec![prompt(400, "user")])
        .expect("a again");
    assert_eq!(ids(&store, ListOrder::Activity), ["a", "b", "c", "quiet"]);
    assert_eq!(ids(&store, ListOrder::Created), ["quiet", "c", "b", "a"]);
}

#[test]
fn imported_sessions_are_ordered_by_their_last_prompt_and_pages_cost_their_size() {
    let (_d, store) = temp_store();
    let opts = GenOptions {
        sessions: 30,
        events_per_session: 120,
        seed: 12,
        torn_fraction: 0.0,
    };
    let mut expected = Vec::new();
    for id in import_generated(&store, &opts) {
        let prompt = sessionlog::codec::rules::projection::fold(
            "activity",
            0,
            &crate::fixtures::all_events(&store, &id),
        )
        .and_then(|v| {
            v.as_object()
                .and_then(|o| o.get("lastPromptAt"))
                .and_then(json::Value::as_safe_integer)
        });
        expected.push((std::cmp::Reverse(prompt.unwrap_or(0)), id));
    }
    expected.sort();
    let want: Vec<String> = expected.into_iter().map(|(_, id)| id).collect();
    let mut got = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_page(ListOrder::Activity, 7, after.as_deref())
            .expect("page");
        assert!(
            page.keys_read <= 7,
            "a page of 7 read {} index keys",
            page.keys_read
        );
        got.extend(page.sessions.into_iter().map(|s| s.id));
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(got, want);
}

#[test]
fn delete_hides_undelete_restores_purge_reclaims() {
    let (_d, store) = temp_store();
    let opts = GenOptions {
        sessions: 3,
        events_per_session: 3000,
        seed: 13,
        torn_fraction: 0.0,
    };
    let ids = import_generated(&store, &opts);
    let kept = export_bytes(&store, &ids[0]);
    store.delete(&ids[1]).expect("delete");
    assert_eq!(
        store
            .list_page(ListOrder::Activity, 10, None)
            .expect("list")
            .sessions
            .len(),
        2
    );
    assert!(
        !export_bytes(&store, &ids[1]).is_empty(),
        "a deleted session stays exportable"
    );
    store.undelete(&ids[1]).expect("undelete");
    assert_eq!(
        store
            .list_page(ListOrder::Activity, 10, None)
            .expect("list")
            .sessions
            .len(),
        3
    );
    store.delete(&ids[1]).expect("delete");
    store.delete(&ids[2]).expect("delete");
    let dry = store.purge(0, true).expect("dry run");
    assert_eq!(dry.sessions.len(), 2);
    assert_eq!(
        store.list().expect("list").len(),
        3,
        "a dry run removes nothing"
    );
    assert!(
        store
            .purge(3_600_000, false)
            .expect("purge")
            .sessions
            .is_empty(),
        "nothing was deleted an hour ago"
    );
    let r = store.purge(0, false).expect("purge");
    assert_eq!(r.sessions.len(), 2);
    assert!(
        r.stored_bytes_after < r.stored_bytes_before,
        "purge reclaimed nothing: {r:?}"
    );
    assert_eq!(store.list().expect("list").len(), 1);
    assert_eq!(export_bytes(&store, &ids[0]), kept);
    assert!(store.verify(&[]).expect("verify").problems.is_empty());
}

/// With blob files, a purge removes its sessions' keys at once; their blocks, in blob files
/// shared with other sessions, come back with a compaction.
#[test]
fn compaction_reclaims_the_blob_space_of_purged_sessions() {
    let dir = tempfile::tempdir().expect("temp dir");
    let options = Options {
        durability: Durability::Buffered,
        blob_files: true,
        ..Options::default()
    };
    let store = Store::open(dir.path().join("db"), options).expect("open store");
    let opts = GenOptions {
        sessions: 4,
        events_per_session: 2000,
        seed: 3,
        torn_fraction: 0.0,
    };
    let ids = import_generated(&store, &opts);
    store.compact().expect("compact");
    let whole = store.file_bytes().expect("bytes");
    for id in &ids[..2] {
        store.delete(id).expect("delete");
    }
    let purged = store.purge(0, false).expect("purge");
    assert_eq!(purged.sessions.len(), 2);
    store.compact().expect("compact");
    let kept = store.file_bytes().expect("bytes");
    let kept_logs: u64 = ids[2..]
        .iter()
        .map(|id| export_bytes(&store, id).len() as u64)
        .sum();
    let share = purged.session_bytes as f64 / (purged.session_bytes + kept_logs) as f64;
    eprintln!(
        "purged {share:.2} of the logs: {whole} bytes stored, {} after the purge, {kept} after \
         compacting",
        purged.stored_bytes_after
    );
    assert!(
        (kept as f64) < whole as f64 * (1.0 - share / 2.0),
        "a compaction after purging {share:.2} of the logs left {kept} of {whole} bytes"
    );
    assert!(store.verify(&[]).expect("verify").problems.is_empty());
}

/// Appends to a deleted session are refused (undelete first), so delete → append → purge →
/// append cannot bring a purged session back with its earlier blocks gone.
#[test]
fn a_deleted_session_takes_no_appends_and_stays_purged() {
    let (_t, store) = temp_store();
    store
        .create_session(&header("d", 1), SourceEncoding::Jsonl)
        .expect("create");
    store
        .append("d", Some(0), vec![prompt(10, "user")])
        .expect("append");
    store.delete("d").expect("delete");
    let refused = store
        .append("d", Some(1), vec![prompt(11, "user")])
        .expect_err("an append to a deleted session");
    let text = refused.to_string();
    assert!(
        text.contains("\"d\"") && text.contains("deleted") && text.contains("undelete"),
        "{text}"
    );
    assert_eq!(store.purge(0, false).expect("purge").sessions, ["d"]);
    let gone = store.append("d", Some(1), vec![prompt(12, "user")]);
    assert!(
        matches!(gone, Err(sessionlog::engine::Error::UnknownSession { .. })),
        "{gone:?}"
    );
    assert!(
        store.ids().expect("ids").is_empty(),
        "the purged session came back"
    );
    let v = store.verify(&[]).expect("verify");
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    // Undeleted, it takes appends again.
    store
        .create_session(&header("e", 2), SourceEncoding::Jsonl)
        .expect("create");
    store.delete("e").expect("delete");
    store.undelete("e").expect("undelete");
    store
        .append("e", Some(0), vec![prompt(13, "user")])
        .expect("append after undelete");
}
