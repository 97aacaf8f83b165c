//! Fork with DSH's semantics and a shared prefix: the child's file is what DSH writes for a fork
//! (header, one seed batch re-serialized from the parent plus the end-seed, then live batches);
//! boundaries, open turns, end-seed idempotence, forks of forks, queries through the shared
//! prefix, and purge keeping parents that live forks read.

use sessionlog::codec::format::chunk_rows::pack_chunk_runs;
use sessionlog::codec::json::{self, Value};
use sessionlog::codec::rules::projection::fold;
use sessionlog::codec::rules::surface::replay;
use sessionlog::engine::{Error, ExportFormat, Store};
use sessionlog_harness::gen::{session_bytes, GenOptions};

use crate::fixtures::{all_events, ev, export_bytes, import_bytes, temp_store};

fn generated(store: &Store, index: u64) -> String {
    let opts = GenOptions {
        sessions: 1,
        events_per_session: 3000,
        seed: 41,
        torn_fraction: 0.0,
    };
    import_bytes(store, "gen", &session_bytes(index, &opts), false)
        .expect("import")
        .id
}

/// What DSH writes for a fork: the child header, the seed (packed as one batch) and then `rest`.
fn dsh_fork_file(store: &Store, child: &str, seed: &[Value], rest: &[Value]) -> Vec<u8> {
    let header = export_bytes(store, child)
        .split(|&b| b == b'\n')
        .next()
        .expect("header")
        .to_vec();
    let mut out = header;
    out.push(b'\n');
    let mut batch = seed.to_vec();
    batch.extend(rest.iter().take(1).cloned());
    for record in pack_chunk_runs(&batch) {
        out.extend_from_slice(json::stringify(&record).as_bytes());
        out.push(b'\n');
    }
    for e in rest.iter().skip(1) {
        out.extend_from_slice(json::stringify(e).as_bytes());
        out.push(b'\n');
    }
    out
}

fn last_turn_end(events: &[Value]) -> u64 {
    events
        .iter()
        .rposition(|e| {
            e.as_object()
                .and_then(|o| o.get("type"))
                .and_then(Value::as_str)
                == Some("turn/end")
        })
        .expect("a turn/end") as u64
}

#[test]
fn a_fork_exports_what_dsh_writes_and_reads_through_the_shared_prefix() {
    let (_d, store) = temp_store();
    let parent = generated(&store, 1);
    let parent_events = all_events(&store, &parent);
    // The first turn's end: a boundary with the rest of the parent's log after it.
    let boundary = parent_events
        .iter()
        .position(|e| {
            e.as_object()
                .and_then(|o| o.get("type"))
                .and_then(Value::as_str)
                == Some("turn/end")
        })
        .expect("a turn/end") as u64;
    assert!((boundary as usize) < parent_events.len() - 1);
    let r = store.fork(&parent, Some(boundary), "child").expect("fork");
    assert_eq!((r.seed, r.end_seed), (boundary + 1, true));
    let child_events = all_events(&store, "child");
    let seed = &parent_events[..=boundary as usize];
    assert_eq!(
        &child_events[..seed.len()],
        seed,
        "the child reads the parent's prefix"
    );
    assert_eq!(child_events.len(), seed.len() + 1);
    let end_seed = &child_events[seed.len()];
    assert_eq!(
        end_seed
            .as_object()
            .and_then(|o| o.get("type"))
            .and_then(Value::as_str),
        Some("session/end-seed")
    );
    let header = String::from_utf8(export_bytes(&store, "child")).expect("utf8");
    assert!(
        header.starts_with("{\"type\":\"session\",\"version\":0,\"id\":\"child\",\"createdAt\":"),
        "{}",
        &header[..120]
    );
    assert!(header.lines().next().expect("header").contains(&format!(
        "\"parentSession\":\"{parent}\",\"seedLength\":{},\"delegationDepth\":0",
        boundary + 1
    )));
    assert_eq!(
        export_bytes(&store, "child"),
        dsh_fork_file(&store, "child", seed, std::slice::from_ref(end_seed))
    );
    // Live batches after the fork follow the seed batch.
    let turn = parent_events[..=boundary as usize]
        .iter()
        .filter(|e| {
            e.as_object()
                .and_then(|o| o.get("type"))
                .and_then(Value::as_str)
                == Some("turn/start")
        })
        .count()
        + 1;
    let batch = vec![
        ev(&format!(
            r#"{{"type":"turn/start","time":7,"data":{{"turn":{turn}}}}}"#
        )),
        ev(
            r#"{"type":"user/message","time":8,"data":{"content":[],"source":{"kind":"user"},"role":"user","id":"x"},"surfaceOp":"append"}"#,
        ),
    ];
    store
        .append("child", Some(boundary + 2), batch)
        .expect("append to the child");
    let child_events = all_events(&store, "child");
    assert_eq!(
        export_bytes(&store, "child"),
        dsh_fork_file(&store, "child", seed, &child_events[seed.len()..])
    );
    // The zstd rendering: the header frame, then the seed and the live batch in one body frame
    // (the body is shorter than a body frame).
    let mut zstd = Vec::new();
    store
        .export("child", Some(ExportFormat::JsonlZstd), &mut zstd)
        .expect("zstd export");
    let (_d2, again) = temp_store();
    let re = again
        .import_zstd("child.zstd", &zstd, &Default::default())
        .expect("re-import");
    assert_eq!(
        sessionlog::codec::format::zstd::scan_frames(&zstd)
            .expect("frames")
            .frames
            .len(),
        2
    );
    assert_eq!(
        crate::fixtures::events_text(&again, &re.id).expect("events"),
        crate::fixtures::events_text(&store, "child").expect("events")
    );
    // Queries through the shared prefix equal a naive replay of the child's own log.
    for n in (0..child_events.len())
        .step_by(37)
        .chain([child_events.len() - 1])
    {
        let naive = replay(&child_events[..=n]).expect("replay");
        let messages: String = store
            .messages_at("child", Some(n as u64))
            .expect("messages")
            .iter()
            .map(|m| json::stringify(m) + "\n")
            .collect();
        assert_eq!(messages, naive.messages_jsonl(), "messages at {n}");
        assert_eq!(
            store
                .surface_at("child", Some(n as u64))
                .expect("surface")
                .nodes
                .as_slice(),
            naive.surface.nodes()
        );
        for unit in ["title", "tokenUsage", "turns", "activity"] {
            let want =
                json::stringify(&fold(unit, boundary + 1, &child_events[..=n]).expect("unit"));
            assert_eq!(
                json::stringify(
                    &store
                        .state_at("child", unit, Some(n as u64))
                        .expect("state")
                ),
                want,
                "{unit} at {n}"
            );
        }
    }
    assert!(store.verify(&[]).expect("verify").problems.is_empty());
}

#[test]
fn boundaries_open_turns_and_existing_ids_are_refused_as_dsh_refuses_them() {
    let (_d, store) = temp_store();
    let parent = generated(&store, 2);
    let events = all_events(&store, &parent);
    let open = last_turn_end(&events) - 1;
    let code = |r: Result<_, Error>| match r {
        Err(Error::Fork { code, message }) => (code, message),
        other => panic!("expected a fork refusal, got {other:?}"),
    };
    let (c, m) = code(store.fork(&parent, Some(open), "x"));
    assert_eq!(c, "OPEN_TURN");
    assert!(
        m.contains(&format!(
            "fork boundary {open} in session \"{parent}\" ends inside open turn"
        )),
        "{m}"
    );
    let (c, m) = code(store.fork(&parent, Some(events.len() as u64), "x"));
    assert_eq!(c, "INVALID_BOUNDARY");
    assert!(
        m.contains(&format!("(last seq: {})", events.len() - 1)),
        "{m}"
    );
    store
        .fork(&parent, None, "y")
        .expect("default boundary: the last event");
    assert_eq!(
        code(store.fork(&parent, None, "y")).0,
        "SESSION_ALREADY_EXISTS"
    );
    assert_eq!(code(store.fork("nope", None, "z")).0, "SESSION_NOT_FOUND");
    assert_eq!(
        store.list().expect("list").len(),
        2,
        "refused forks wrote nothing"
    );
}

#[test]
fn end_seed_is_idempotent_and_forks_of_forks_share_all_the_way_down() {
    let (_d, store) = temp_store();
    let parent = generated(&store, 3);
    store.resume(&parent).expect("resume appends an end-seed");
    let p_events = all_events(&store, &parent);
    let r = store.fork(&parent, None, "c1").expect("fork");
    assert!(
        !r.end_seed,
        "a prefix ending with an end-seed gets no second one"
    );
    assert_eq!(all_events(&store, "c1"), p_events);
    assert_eq!(
        export_bytes(&store, "c1"),
        dsh_fork_file(&store, "c1", &p_events, &[])
    );
    // A fork of the fork, at a boundary inside the shared prefix.
    let b = last_turn_end(&p_events[..p_events.len() / 3]);
    store.fork("c1", Some(b), "c2").expect("fork of fork");
    let c2 = all_events(&store, "c2");
    assert_eq!(&c2[..=b as usize], &p_events[..=b as usize]);
    let lineage = store.lineage("c2").expect("lineage");
    let names: Vec<(String, i64)> = lineage.iter().map(|e| (e.id.clone(), e.depth)).collect();
    assert_eq!(
        names,
        [("c2".into(), 0), ("c1".into(), -1), (parent.clone(), -2)]
    );
    let down: Vec<String> = store
        .lineage(&parent)
        .expect("lineage")
        .into_iter()
        .filter(|e| e.depth > 0)
        .map(|e| e.id)
        .collect();
    assert_eq!(down.len(), 2);
    // Purge keeps a parent a live fork reads, and removes the chain once every fork is gone.
    store.delete(&parent).expect("delete");
    let p = store.purge(0, false).expect("purge");
    assert!(p.sessions.is_empty() && p.kept.len() == 1, "{p:?}");
    assert_eq!(
        all_events(&store, "c2").len(),
        c2.len(),
        "the fork still reads its prefix"
    );
    store.delete("c1").expect("delete");
    store.delete("c2").expect("delete");
    let p = store.purge(0, false).expect("purge");
    assert_eq!(p.sessions.len(), 3, "{p:?}");
    assert!(store.list().expect("list").is_empty());
    assert!(store.verify(&[]).expect("verify").problems.is_empty());
}
