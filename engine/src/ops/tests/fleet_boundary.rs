//! The fleet boundary, method by method: every public method of [`Store`] (the names the
//! layering test reads from `Store`'s method map, so a new one must be added here) is called
//! on a store that is the index of a fleet (a commit hook set), and what it did is judged from
//! outside: it reached the hook (the system of record took its batch), or it was refused
//! ([`Error::IndexOfFleet`]) and changed nothing, or it changed nothing, or (the two writers
//! that apply the system of record's own changes) it wrote what the record holds. A method
//! that changes the store any other way fails the test, whichever way its author classified it.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use sessionlog_codec::format::zstd::compress_frame;
use sessionlog_codec::json::Value;
use sessionlog_codec::rules::surface::{MessageProjection, ProjectionContext};

use crate::error::{Error, Result};
use crate::layout::keys::ALL_CFS;
use crate::layout::meta::SourceEncoding;
use crate::ops::append::AppendItem;
use crate::ops::export::ExportFormat;
use crate::ops::generations::{GenerationFile, SessionDir};
use crate::ops::import::ImportOptions;
use crate::ops::list::ListOrder;
use crate::ops::migrate::MigrateOptions;
use crate::ops::retention::RecordedChange;
use crate::ops::search::SearchQuery;
use crate::options::Options;
use crate::store::Store;
use crate::test_support::{ev, exported, seeded};

use super::{generation, Counts};

/// What a method did under the hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Did {
    /// The hook saw its batch (and took it: the store changed with it).
    ReachedTheHook,
    /// Refused as a change of this store alone; nothing changed.
    Refused,
    /// Changed the store without the hook: only right for the two writers of what its system of
    /// record holds already (replicated appends and [`Store::apply_recorded`]).
    WroteWithoutTheHook,
    /// Changed nothing in the store.
    Nothing,
}

/// A projection that projects nothing.
struct ProjectsNothing;

impl MessageProjection for ProjectsNothing {
    fn event_type(&self) -> &str {
        "test/nothing"
    }

    fn project(
        &self,
        _event: &Value,
        _ctx: &ProjectionContext<'_>,
    ) -> std::result::Result<Vec<(u64, Value)>, String> {
        Ok(Vec::new())
    }
}

const HEADER_B: &str =
    r#"{"type":"session","version":0,"id":"b","createdAt":1,"cwd":"/w","delegationDepth":0}"#;

/// The log of a session `t` whose last line is torn.
const TORN: &str = concat!(
    r#"{"type":"session","version":0,"id":"t","createdAt":1,"cwd":"/w","delegationDepth":0}"#,
    "\n",
    r#"{"type":"user/message","seq":0,"time":2,"data":{"content":[],"source":{"kind":"user"},"role":"user","id":"u1"},"surfaceOp":"append"}"#,
    "\n",
    r#"{"type":"user/mess"#,
);

/// A fleet's index: sessions `a` (seeded; DSH refuses to migrate it), `m` (empty, migrates),
/// `d` (deleted), `t` (torn) and `r` (archived, its log kept at `r.jsonl` in the directory),
/// then a commit hook.
fn fleet_index() -> (tempfile::TempDir, Store, Arc<Counts>) {
    let (dir, store) = seeded();
    let options = ImportOptions::default();
    for id in ["d", "m", "r"] {
        let log = format!("{}\n", HEADER_B.replace("\"b\"", &format!("\"{id}\"")));
        store
            .import_jsonl(id, log.as_bytes(), &options, &mut |_| {})
            .expect("import");
    }
    store
        .import_jsonl("t", TORN.as_bytes(), &options, &mut |_| {})
        .expect("import the torn log");
    store.delete("d").expect("delete d");
    std::fs::write(dir.path().join("r.jsonl"), exported(&store, "r")).expect("keep r's log");
    let plan = store.archive_plan("r").expect("plan");
    store
        .commit_archive(&plan, "s3://bucket/root", vec![generation("r", 0)])
        .expect("archive r");
    let hook = Arc::new(Counts::default());
    store.set_commit_hook(hook.clone()).expect("hook");
    (dir, store, hook)
}

/// Every record of every column family, in order.
fn contents(store: &Store) -> Vec<(&'static str, Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    for cf in ALL_CFS {
        let mut it = store.iter_all(cf).expect("iterator");
        it.seek_to_first();
        while let (Some(k), Some(v)) = (it.key(), it.value()) {
            out.push((cf, k.to_vec(), v.to_vec()));
            it.next();
        }
        it.status().expect("scan");
    }
    out
}

/// A call of one public method of `Store` on the index (`dir` is the index's temp directory).
type Call = fn(&Store, &Path) -> Result<()>;

/// The method a call calls, what it must do under a hook, and the call.
type Row = (&'static str, Did, Call);

fn row(name: &'static str, must: Did, call: Call) -> Row {
    (name, must, call)
}

/// Every public method of `Store`, with a call of it and what it must do under a hook: a
/// writer's call is one that would write, so that it is seen to reach the hook or be refused.
fn calls() -> Vec<Row> {
    use Did::{Nothing, ReachedTheHook, Refused, WroteWithoutTheHook};
    vec![
        // Writers: through the hook.
        row("append", ReachedTheHook, |s, _| {
            s.append("a", Some(3), vec![prompt()]).map(drop)
        }),
        row("append_many", ReachedTheHook, |s, _| {
            let item = AppendItem::new("a", Some(3), vec![prompt()]);
            s.append_many(vec![item]).remove(0).map(drop)
        }),
        row("append_many", WroteWithoutTheHook, |s, _| {
            let item = AppendItem::replicated("b", Some(0), Vec::new())
                .creating(HEADER_B, SourceEncoding::Jsonl);
            s.append_many(vec![item]).remove(0).map(drop)
        }),
        row("create_session", ReachedTheHook, |s, _| {
            s.create_session(HEADER_B, SourceEncoding::Jsonl).map(drop)
        }),
        row("create", ReachedTheHook, |s, _| {
            s.create(HEADER_B, SourceEncoding::Jsonl, vec![prompt()])
                .map(drop)
        }),
        // Writers of this store alone: refused.
        row("repair", Refused, |s, _| s.repair("t").map(drop)),
        row("resume", Refused, |s, _| s.resume("a").map(drop)),
        row("cut_torn_tail", Refused, |s, _| {
            s.cut_torn_tail("t").map(drop)
        }),
        row("import_jsonl", Refused, |s, _| {
            let log = format!("{HEADER_B}\n");
            let options = ImportOptions::default();
            s.import_jsonl("b", log.as_bytes(), &options, &mut |_| {})
                .map(drop)
        }),
        row("import_zstd", Refused, |s, _| {
            let frame = compress_frame(format!("{HEADER_B}\n").as_bytes()).expect("frame");
            s.import_zstd("b", &frame, &ImportOptions::default())
                .map(drop)
        }),
        row("import_path", Refused, |s, dir| {
            let path = dir.join("b.jsonl");
            std::fs::write(&path, format!("{HEADER_B}\n")).expect("write b");
            s.import_path(&path, &ImportOptions::default(), &mut |_| {})
                .map(drop)
        }),
        row("fork", Refused, |s, _| s.fork("a", None, "c").map(drop)),
        row("migrate", Refused, |s, _| {
            s.migrate("m", &MigrateOptions::default()).map(drop)
        }),
        row("migrate_all", Refused, |s, _| {
            s.migrate_all(&MigrateOptions::default(), &mut |_| {})
                .map(drop)
        }),
        row("delete", Refused, |s, _| s.delete("a")),
        row("undelete", Refused, |s, _| s.undelete("d")),
        row("purge", Refused, |s, _| s.purge(0, false).map(drop)),
        row("commit_archive", Refused, |s, _| {
            let plan = s.archive_plan("a")?;
            s.commit_archive(&plan, "s3://bucket/root", vec![generation("a", 0)])
        }),
        row("restore_archived", Refused, |s, dir| {
            let served = GenerationFile {
                version: 0,
                zstd: false,
                path: dir.join("r.jsonl"),
            };
            let dir = SessionDir {
                served,
                lower: Vec::new(),
            };
            s.restore_archived("r", &dir).map(drop)
        }),
        // The system of record's own decisions.
        row("apply_recorded", WroteWithoutTheHook, |s, _| {
            s.apply_recorded(&RecordedChange::Deleted("a".into()))
        }),
        // Everything else changes nothing in the store (files elsewhere, caches, settings,
        // flushes and compactions, which rewrite no record).
        row("open", Nothing, |_, dir| {
            Store::open(dir.join("another"), Options::default()).map(drop)
        }),
        row("path", Nothing, |s, _| {
            s.path();
            Ok(())
        }),
        row("direct_io", Nothing, |s, _| {
            s.direct_io();
            Ok(())
        }),
        row("durability", Nothing, |s, _| {
            s.durability();
            Ok(())
        }),
        row("sync", Nothing, |s, _| s.sync()),
        row("commit_stats", Nothing, |s, _| {
            s.commit_stats();
            Ok(())
        }),
        row("set_commit_hook", Nothing, |s, _| {
            s.set_commit_hook(Arc::new(Counts::default()))
        }),
        row("export", Nothing, |s, _| {
            s.export("a", None, &mut Vec::new()).map(drop)
        }),
        row("export_generation", Nothing, |s, _| {
            s.export_generation("a", 0, None, &mut Vec::new()).map(drop)
        }),
        row("export_jsonl", Nothing, |s, _| {
            s.export_jsonl("a", &mut Vec::new()).map(drop)
        }),
        row("export_to_root", Nothing, |s, dir| {
            s.export_to_root(&dir.join("root"), "a", None).map(drop)
        }),
        row("root_path", Nothing, |s, dir| {
            s.root_path(dir, "a", Some(ExportFormat::Jsonl)).map(drop)
        }),
        row("root_files", Nothing, |s, _| {
            s.root_files("a", None).map(drop)
        }),
        row("events_as_written", Nothing, |s, _| {
            s.events_as_written("a", 0, &mut |_| {})
        }),
        row("events", Nothing, |s, _| {
            s.events("a", 0, None, &mut |_, _| Ok(()))
        }),
        row("read_events", Nothing, |s, _| {
            s.read_events("a", 0, None).map(drop)
        }),
        row("export_bytes", Nothing, |s, _| {
            s.export_bytes("a").map(drop)
        }),
        row("subscribe", Nothing, |s, _| s.subscribe("a", 0).map(drop)),
        row("subscribe_all", Nothing, |s, _| {
            s.subscribe_all(None).map(drop)
        }),
        row("subscription_stats", Nothing, |s, _| {
            s.subscription_stats();
            Ok(())
        }),
        row("is_secondary", Nothing, |s, _| {
            s.is_secondary();
            Ok(())
        }),
        row("catch_up", Nothing, |s, _| s.catch_up()),
        row("open_reader", Nothing, |_, dir| {
            Store::open_reader(dir.join("another"), Options::default()).map(drop)
        }),
        row("open_beside", Nothing, |s, _| {
            Store::open_beside(s.path(), Options::default()).map(drop)
        }),
        row("reopen_beside", Nothing, |s, _| s.reopen_beside().map(drop)),
        row("messages_at", Nothing, |s, _| {
            s.messages_at("a", None).map(drop)
        }),
        row("surface_at", Nothing, |s, _| {
            s.surface_at("a", None).map(drop)
        }),
        row("transcript", Nothing, |s, _| {
            s.transcript("a", None).map(drop)
        }),
        row("state_at", Nothing, |s, _| {
            // A V0 log has no projection units: refused, reading nothing.
            let _ = s.state_at("a", "unit", None);
            Ok(())
        }),
        row("request", Nothing, |s, _| {
            let _ = s.request("a", 1, 1);
            Ok(())
        }),
        row("check_request", Nothing, |s, _| {
            let _ = s.check_request("a", 1, 1, &Value::Null);
            Ok(())
        }),
        row("dispatch_point", Nothing, |s, _| {
            let _ = s.dispatch_point("a", 1, 1);
            Ok(())
        }),
        row("register_message_projection", Nothing, |s, _| {
            s.register_message_projection(Arc::new(ProjectsNothing))
        }),
        row("remove_message_projection", Nothing, |s, _| {
            s.remove_message_projection("test/nothing");
            Ok(())
        }),
        row("fork_file", Nothing, |s, _| {
            s.fork_file("a", None, "c").map(drop)
        }),
        row("lineage", Nothing, |s, _| s.lineage("a").map(drop)),
        row("stored_bytes", Nothing, |s, _| {
            s.stored_bytes("a").map(drop)
        }),
        row("list_page", Nothing, |s, _| {
            s.list_page(ListOrder::Activity, 10, None).map(drop)
        }),
        row("list", Nothing, |s, _| s.list().map(drop)),
        row("summary", Nothing, |s, _| s.summary("a").map(drop)),
        row("ids", Nothing, |s, _| s.ids().map(drop)),
        row("purge", Nothing, |s, _| s.purge(0, true).map(drop)),
        row("migrate", Nothing, |s, _| {
            let dry = MigrateOptions { dry_run: true };
            s.migrate("m", &dry).map(drop)
        }),
        row("compact", Nothing, |s, _| s.compact()),
        row("archive_candidates", Nothing, |s, _| {
            s.archive_candidates(0).map(drop)
        }),
        row("archive_plan", Nothing, |s, _| {
            s.archive_plan("a").map(drop)
        }),
        row("archived_copy", Nothing, |s, _| {
            s.archived_copy("r").map(drop)
        }),
        row("verify", Nothing, |s, _| s.verify(&[]).map(drop)),
        row("event_kinds", Nothing, |s, _| {
            s.event_kinds("a", None).map(drop)
        }),
        // The session index is tantivy's files beside the log, never a record in it.
        row("search", Nothing, |s, _| {
            s.search(&SearchQuery::default()).map(drop)
        }),
        row("reindex", Nothing, |s, _| s.reindex().map(drop)),
        row("file_bytes", Nothing, |s, _| s.file_bytes().map(drop)),
        row("column_family_bytes", Nothing, |s, _| {
            s.column_family_bytes().map(drop)
        }),
        row("settle", Nothing, |s, _| s.settle()),
        row("metrics", Nothing, |s, _| s.metrics().map(drop)),
    ]
}

/// A user prompt, as an appended event.
fn prompt() -> sessionlog_codec::format::event::NewEvent {
    ev(
        r#"{"type":"user/message","time":5,"data":{"content":[],"source":{"kind":"user"},"role":"user","id":"u2"},"surfaceOp":"append"}"#,
    )
}

/// What `call` did to a fresh fleet index, judged from the store's records and the hook.
fn what_it_did(call: Call) -> (Did, String) {
    let (dir, store, hook) = fleet_index();
    let before = contents(&store);
    let outcome = call(&store, dir.path());
    let offered = hook.0.load(Ordering::SeqCst) > 0;
    let changed = contents(&store) != before;
    let did = match (&outcome, changed, offered) {
        (_, _, true) => Did::ReachedTheHook,
        (Err(Error::IndexOfFleet { .. }), false, false) => Did::Refused,
        (_, true, false) => Did::WroteWithoutTheHook,
        (_, false, false) => Did::Nothing,
    };
    (did, format!("{outcome:?}"))
}

#[test]
fn every_public_method_reaches_the_hook_or_is_refused_or_writes_nothing() {
    let calls = calls();
    let named: std::collections::BTreeSet<String> =
        calls.iter().map(|(name, ..)| (*name).to_owned()).collect();
    assert_eq!(
        named,
        crate::layering::store_public_methods(),
        "every public method of Store (its method map) has a call here, and only they"
    );
    let mut wrong = Vec::new();
    for (name, expected, call) in calls {
        let (did, outcome) = what_it_did(call);
        if did != expected {
            wrong.push(format!("{name}: {did:?}, not {expected:?} ({outcome})"));
        }
    }
    assert!(
        wrong.is_empty(),
        "under a commit hook:\n{}",
        wrong.join("\n")
    );
}
