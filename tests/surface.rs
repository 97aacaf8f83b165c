//! Point-in-time surface queries against DSH's own derived views of the corpus (messages,
//! transcript, surface, every pit line), and against a naive full replay at every seq of
//! generated sessions with compactions and tool-result rewrites.

use std::collections::BTreeSet;

use proptest::prelude::*;
use sessionlog::codec::json::{self, Value};
use sessionlog::codec::rules::surface::replay;
use sessionlog::engine::Error;
use sessionlog_harness::gen::{session_batches, session_bytes, GenOptions};

use crate::fixtures::{all_events, fixtures, import_bytes, names_ending, temp_store};

fn jsonl(values: &[Value]) -> String {
    values.iter().map(|v| json::stringify(v) + "\n").collect()
}

#[test]
fn corpus_views_equal_dsh_s_at_the_end_and_at_every_pit_line() {
    let Some(dir) = fixtures() else { return };
    let expected = dir.join("dsh-expected");
    let errors =
        std::fs::read_to_string(expected.join("derive-errors.json")).expect("derive-errors");
    let Value::Object(errors) = json::parse(&errors).expect("json") else {
        panic!("derive-errors is not an object")
    };
    let (mut views, mut pits, mut failing) = (0, 0, 0);
    for events_file in &names_ending(&expected, &[".events.jsonl"]) {
        let stem = events_file.trim_end_matches(".events.jsonl");
        let bytes = std::fs::read(dir.join("dsh").join(format!("{stem}.jsonl"))).expect("fixture");
        let (_d, store) = temp_store();
        let r = import_bytes(&store, stem, &bytes, false).expect("import");
        if let Some(err) = errors.get(stem) {
            let want = err
                .as_object()
                .and_then(|o| o.get("error"))
                .and_then(Value::as_str)
                .expect("error text");
            match store.messages_at(&r.id, None) {
                Err(Error::SurfaceFailed { reason, .. }) => {
                    assert!(reason.contains(want), "{stem}: {reason}")
                }
                other => panic!("{stem}: DSH throws {want}; we returned {other:?}"),
            }
            failing += 1;
            continue;
        }
        let read = |ext: &str| {
            std::fs::read_to_string(expected.join(format!("{stem}.{ext}"))).expect("expected view")
        };
        assert_eq!(
            jsonl(&store.messages_at(&r.id, None).expect("messages")),
            read("messages.jsonl"),
            "{stem}: messages"
        );
        assert_eq!(
            jsonl(&store.transcript(&r.id, None).expect("transcript")),
            read("transcript.jsonl"),
            "{stem}: transcript"
        );
        assert_eq!(
            store.surface_at(&r.id, None).expect("surface").to_json() + "\n",
            read("surface.json"),
            "{stem}: surface"
        );
        views += 1;
        for line in read("pit.jsonl").lines() {
            let pit = json::parse(line).expect("pit line");
            let o = pit.as_object().expect("pit object");
            let at = o.get("at").and_then(Value::as_safe_integer).expect("at") as u64;
            let messages = store.messages_at(&r.id, Some(at)).expect("messages at");
            assert_eq!(
                json::stringify(&Value::Array(messages)),
                json::stringify(o.get("messages").expect("messages")),
                "{stem} at {at}"
            );
            let nodes: Vec<Value> = store
                .surface_at(&r.id, Some(at))
                .expect("surface at")
                .nodes
                .iter()
                .map(|&n| Value::from(n as f64))
                .collect();
            assert_eq!(
                json::stringify(&Value::Array(nodes)),
                json::stringify(o.get("nodes").expect("nodes")),
                "{stem} at {at}"
            );
            pits += 1;
        }
    }
    assert_eq!((views, failing), (159, 10));
    assert!(pits >= 150, "only {pits} pit lines checked");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]
    /// The indexed answers equal a naive replay of the prefix, at every seq, for imported
    /// sessions and for the same sessions appended live.
    #[test]
    fn indexed_queries_equal_naive_replay_at_every_seq(index in 0u64..500, events in 200u64..1500) {
        let opts = GenOptions { sessions: 1, events_per_session: events, seed: 5, torn_fraction: 0.0 };
        let bytes = session_bytes(index, &opts);
        let (_d, store) = temp_store();
        let r = import_bytes(&store, "gen", &bytes, false).expect("import");
        let log = all_events(&store, &r.id);
        let mut replacements = 0;
        for n in 0..log.len() {
            let naive = replay(&log[..=n]).expect("naive replay");
            let at = Some(n as u64);
            let view = store.surface_at(&r.id, at).expect("surface");
            prop_assert_eq!(view.nodes.as_slice(), naive.surface.nodes(), "nodes at {}", n);
            prop_assert_eq!(view.replace_generation, naive.surface.replace_generation());
            prop_assert_eq!(view.replacements.as_slice(), naive.surface.replacements());
            replacements = view.replacements.len();
            if n % 7 == 0 || n + 1 == log.len() {
                prop_assert_eq!(jsonl(&store.messages_at(&r.id, at).expect("messages")), naive.messages_jsonl(), "messages at {}", n);
                prop_assert_eq!(jsonl(&store.transcript(&r.id, at).expect("transcript")), naive.transcript_jsonl());
            }
        }
        prop_assume!(replacements > 0 || events < 600);
        let seqs: BTreeSet<u64> = store.surface_at(&r.id, None).expect("surface").nodes.into_iter().collect();
        prop_assert!(!seqs.is_empty());
        // The same session appended live indexes the same surface.
        let feed = session_batches(index, &opts);
        let (_d2, live) = temp_store();
        crate::fixtures::host_feed(&live, &feed);
        for n in (0..log.len()).step_by(13).chain([log.len() - 1]) {
            let at = Some(n as u64);
            prop_assert_eq!(live.surface_at(&feed.id, at).expect("live"), store.surface_at(&r.id, at).expect("imported"), "live surface at {}", n);
            prop_assert_eq!(jsonl(&live.messages_at(&feed.id, at).expect("live")), jsonl(&store.messages_at(&r.id, at).expect("imported")));
        }
    }
}
