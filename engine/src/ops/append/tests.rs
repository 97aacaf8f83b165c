//! Appends through a store with a commit hook (the fleet's system of record): each session's
//! batch is offered to the hook as the bytes it adds to the log file, a refused batch writes
//! nothing locally and fails alone, and batches given as those bytes (a replica catching up)
//! rebuild a byte-identical log without reaching the hook.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Refusal, RefusalKind};
use crate::layout::meta::SourceEncoding;
use crate::ops::append::AppendItem;
use crate::store::{CommitHook, CommitRecord};
use crate::test_support::{empty, ev, exported};

/// A hook that keeps every record it accepts, and refuses the sessions in `fenced`.
#[derive(Default)]
struct Recorder {
    kept: Mutex<Vec<CommitRecord>>,
    fenced: Mutex<HashSet<String>>,
}

impl CommitHook for Recorder {
    fn commit(&self, records: &[&CommitRecord]) -> Vec<Result<(), Refusal>> {
        let fenced = self.fenced.lock().expect("lock");
        records
            .iter()
            .map(|r| {
                if fenced.contains(&r.session) {
                    return Err(Refusal {
                        kind: RefusalKind::Fenced,
                        message: format!("session \"{}\" is owned by another host", r.session),
                    });
                }
                self.kept.lock().expect("lock").push((*r).clone());
                Ok(())
            })
            .collect()
    }
}

fn header(id: &str) -> String {
    format!(
        r#"{{"type":"session","version":0,"id":"{id}","createdAt":1,"cwd":"/w","delegationDepth":0}}"#
    )
}

fn prompt(n: u64) -> sessionlog_codec::format::event::NewEvent {
    ev(&format!(
        r#"{{"type":"user/message","time":{n},"data":{{"content":[],"source":{{"kind":"tool"}},"role":"user","id":"u{n}"}},"surfaceOp":"append"}}"#
    ))
}

#[test]
fn each_batch_reaches_the_hook_as_its_bytes_and_a_refused_one_writes_nothing() {
    for encoding in [SourceEncoding::Jsonl, SourceEncoding::JsonlZstd] {
        let (_t, store) = empty();
        let hook = Arc::new(Recorder::default());
        store.set_commit_hook(hook.clone()).expect("hook");
        let created = store.append_many(vec![
            AppendItem::new("a", Some(0), vec![prompt(1)]).creating(header("a"), encoding),
            AppendItem::new("b", Some(0), vec![prompt(1), prompt(2)])
                .creating(header("b"), encoding),
        ]);
        assert!(created.iter().all(Result::is_ok), "{created:?}");
        hook.fenced.lock().expect("lock").insert("b".into());
        let appended = store.append_many(vec![
            AppendItem::new("a", Some(1), vec![prompt(3)]),
            AppendItem::new("b", Some(2), vec![prompt(4)]),
        ]);
        assert!(appended[0].is_ok(), "{:?}", appended[0]);
        assert!(
            matches!(&appended[1], Err(Error::Refused(r)) if r.kind == RefusalKind::Fenced),
            "{:?}",
            appended[1]
        );
        assert_eq!(
            store.require_meta(b"b").expect("b").events,
            2,
            "b wrote nothing"
        );
        // The cached state of the refused session was dropped: it appends again from the store.
        hook.fenced.lock().expect("lock").clear();
        store
            .append("b", Some(2), vec![prompt(4)])
            .expect("b again");

        // The records rebuild each log byte for byte: header, then every accepted batch.
        let kept = hook.kept.lock().expect("lock").clone();
        for id in ["a", "b"] {
            let mut file = Vec::new();
            let mut next_seq = 0;
            for (k, r) in kept.iter().filter(|r| r.session == id).enumerate() {
                assert_eq!(r.first_seq, next_seq, "{id}");
                assert_eq!(r.batch, k as u64 + 1, "{id}");
                if let Some(c) = &r.creates {
                    assert_eq!(k, 0, "{id}: only the first batch creates");
                    assert_eq!(c.zstd, encoding == SourceEncoding::JsonlZstd);
                    file.extend_from_slice(&c.header);
                }
                file.extend_from_slice(&r.bytes);
                next_seq += r.events;
                assert_eq!(r.verdict, "clean");
            }
            assert_eq!(file, exported(&store, id), "{id} as the hook saw it");

            // A replica catches up from the records alone, without reaching a hook.
            let (_r, replica) = empty();
            for r in kept.iter().filter(|r| r.session == id) {
                let mut item = AppendItem::replicated(id, Some(r.first_seq), r.bytes.clone());
                if r.creates.is_some() {
                    item = item.creating(header(id), encoding);
                }
                replica
                    .append_many(vec![item])
                    .pop()
                    .expect("a result")
                    .expect("replicated");
            }
            assert_eq!(exported(&replica, id), exported(&store, id), "{id} replica");
            assert_eq!(
                replica.require_meta(id.as_bytes()).expect("meta").events,
                store.require_meta(id.as_bytes()).expect("meta").events
            );
            let report = replica.verify(&[]).expect("verify");
            assert!(report.problems.is_empty(), "{:?}", report.problems);
        }
    }
}

#[test]
fn written_bytes_reach_the_hook_and_replicated_ones_do_not() {
    for encoding in [SourceEncoding::Jsonl, SourceEncoding::JsonlZstd] {
        let (_s, source) = empty();
        source
            .append_many(vec![AppendItem::new(
                "a",
                Some(0),
                vec![prompt(1), prompt(2)],
            )
            .creating(header("a"), encoding)])
            .pop()
            .expect("a result")
            .expect("created");
        let file = exported(&source, "a");
        let header_len = match encoding {
            SourceEncoding::Jsonl => header("a").len() + 1,
            SourceEncoding::JsonlZstd => {
                sessionlog_codec::format::zstd::scan_frames(&file)
                    .expect("frames")
                    .frames[0]
                    .end
            }
        };
        let body = file[header_len..].to_vec();

        let (_t, store) = empty();
        let hook = Arc::new(Recorder::default());
        store.set_commit_hook(hook.clone()).expect("hook");
        let item =
            AppendItem::written_bytes("a", Some(0), body.clone()).creating(header("a"), encoding);
        store
            .append_many(vec![item])
            .pop()
            .expect("a result")
            .expect("written");
        let kept = hook.kept.lock().expect("lock").clone();
        assert_eq!(kept.len(), 1, "the written batch reached the hook");
        assert_eq!(
            (kept[0].bytes.as_slice(), kept[0].events),
            (body.as_slice(), 2)
        );
        assert!(kept[0].creates.is_some());

        let item = AppendItem::replicated("b", Some(0), body).creating(header("b"), encoding);
        store
            .append_many(vec![item])
            .pop()
            .expect("a result")
            .expect("replicated");
        assert_eq!(
            hook.kept.lock().expect("lock").len(),
            1,
            "the replicated one did not"
        );
        assert_eq!(store.require_meta(b"b").expect("b").events, 2);
        assert_eq!(exported(&store, "a"), file);
    }
}
