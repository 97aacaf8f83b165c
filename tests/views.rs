//! Views a log can and cannot answer: a seq the log does not hold is an error naming the
//! session's event count, for every view (an empty log at `--at 0` included); the transcript of a
//! V0 log whose surface fold DSH refuses is still DSH's transcript (the append-origin events
//! themselves), while the views that need the fold fail with DSH's reason.

use sessionlog::codec::json::{self, Value};
use sessionlog::engine::{Error, Store};

use crate::fixtures::{import_bytes, temp_store};

const V0_HEADER: &str = r#"{"type":"session","version":0,"id":"views","createdAt":1}"#;

/// A V0 log: the header, then `events` one per line.
fn v0_log(events: &[String]) -> Vec<u8> {
    let mut text = format!("{V0_HEADER}\n");
    for e in events {
        text.push_str(e);
        text.push('\n');
    }
    text.into_bytes()
}

fn user(seq: u64, text: &str, sources: Option<&str>) -> String {
    let sources = sources
        .map(|s| format!(r#","sourceEventSeqs":{s}"#))
        .unwrap_or_default();
    format!(
        r#"{{"type":"user/message","seq":{seq},"time":5,"data":{{"content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"user"}}}}{sources},"surfaceOp":"append"}}"#
    )
}

fn turn_start(seq: u64) -> String {
    format!(r#"{{"type":"turn/start","seq":{seq},"time":5,"data":{{"turn":1}}}}"#)
}

fn parsed(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| json::parse(l).expect("test events are JSON"))
        .collect()
}

/// `events` at the given indexes.
fn pick(events: &[Value], at: &[usize]) -> Vec<Value> {
    at.iter().map(|&i| events[i].clone()).collect()
}

/// Every view at `at`, as `Ok(())` or the error's text.
fn views_at(store: &Store, id: &str, at: u64) -> Vec<(&'static str, Result<(), String>)> {
    let text = |r: Result<(), Error>| r.map_err(|e| e.to_string());
    vec![
        ("messages", text(store.messages_at(id, Some(at)).map(drop))),
        ("transcript", text(store.transcript(id, Some(at)).map(drop))),
        ("surface", text(store.surface_at(id, Some(at)).map(drop))),
        (
            "state",
            text(store.state_at(id, "title", Some(at)).map(drop)),
        ),
    ]
}

#[test]
fn a_seq_past_the_end_is_an_error_naming_the_event_count_in_every_view() {
    let (_d, store) = temp_store();
    // A torn first line: no logical event at all.
    let torn = format!("{V0_HEADER}\n{{\"type\":\"turn/start\",\"seq\":0");
    let empty = import_bytes(&store, "torn", torn.as_bytes(), false).expect("import");
    assert_eq!(empty.events, 0);
    for (view, got) in views_at(&store, &empty.id, 0) {
        assert_eq!(
            got,
            Err(r#"session "views" has 0 events; seq 0 is past its end"#.to_owned()),
            "{view} at 0 of an empty log"
        );
    }
    // Without --at, the latest view of an empty log is the empty view.
    assert!(store
        .messages_at(&empty.id, None)
        .expect("latest")
        .is_empty());
    assert!(store
        .transcript(&empty.id, None)
        .expect("latest")
        .is_empty());

    let (_d2, store) = temp_store();
    let lines = [turn_start(0), user(1, "hi", None)];
    let r = import_bytes(&store, "two", &v0_log(&lines), false).expect("import");
    assert_eq!(r.events, 2);
    for (view, got) in views_at(&store, &r.id, 1) {
        assert_eq!(got, Ok(()), "{view} at the last seq");
    }
    for (view, got) in views_at(&store, &r.id, 2) {
        assert_eq!(
            got,
            Err(r#"session "views" has 2 events; seq 2 is past its end"#.to_owned()),
            "{view} one past the end"
        );
    }
}

#[test]
fn the_transcript_of_a_log_whose_fold_dsh_refuses_is_still_its_append_events() {
    // (sourceEventSeqs of the user/message at seq 2, DSH's refusal of it)
    let cases = [
        (
            "[]",
            "sourceEventSeqs must not be empty except on assistant/message",
        ),
        ("[0,0]", "sourceEventSeqs must not contain duplicates"),
        (
            "[0.5]",
            r#"session event "user/message" sourceEventSeqs must densely contain non-negative safe integers"#,
        ),
        (
            "[2]",
            "sourceEventSeqs must reference earlier events: 2 >= current seq 2",
        ),
        (
            "[3]",
            "sourceEventSeqs must reference earlier events: 3 >= current seq 2",
        ),
        (
            "{}",
            "sourceEventSeqs on event at seq 2 must be an array when present",
        ),
    ];
    for (sources, reason) in cases {
        let lines = [
            turn_start(0),
            user(1, "first", None),
            user(2, "second", Some(sources)),
            turn_start(3),
            user(4, "third", None),
        ];
        let events = parsed(&lines);
        let (_d, store) = temp_store();
        let r = import_bytes(&store, sources, &v0_log(&lines), false).expect("import");
        assert_eq!(r.events, 5, "{sources}: every line is committed");
        let id = r.id.as_str();
        // DSH's transcript: every append-origin surface event, in log order.
        let transcript = |at| store.transcript(id, at).expect("transcript");
        assert_eq!(transcript(None), pick(&events, &[1, 2, 4]), "{sources}");
        assert_eq!(transcript(Some(3)), pick(&events, &[1, 2]), "{sources}");
        assert_eq!(transcript(Some(1)), pick(&events, &[1]), "{sources}");
        // The fold-backed views answer before the refused event and fail from it on.
        assert_eq!(store.messages_at(id, Some(1)).expect("before").len(), 1);
        for at in [Some(2), Some(4), None] {
            let expected = format!("surface fold refused the event at seq 2: {reason}");
            match store.messages_at(id, at) {
                Err(Error::SurfaceFailed { reason, .. }) => assert_eq!(reason, expected),
                other => panic!("{sources} messages at {at:?}: {other:?}"),
            }
            match store.surface_at(id, at) {
                Err(Error::SurfaceFailed { reason, .. }) => assert_eq!(reason, expected),
                other => panic!("{sources} surface at {at:?}: {other:?}"),
            }
        }
    }
}

#[test]
fn a_log_refused_at_its_first_surface_event_has_that_event_in_its_transcript() {
    let lines = [turn_start(0), user(1, "only", Some("[]"))];
    let events = parsed(&lines);
    let (_d, store) = temp_store();
    let r = import_bytes(&store, "first", &v0_log(&lines), false).expect("import");
    assert_eq!(
        store.transcript(&r.id, Some(1)).expect("transcript"),
        pick(&events, &[1])
    );
    assert!(store
        .transcript(&r.id, Some(0))
        .expect("transcript")
        .is_empty());
    assert!(matches!(
        store.messages_at(&r.id, Some(1)),
        Err(Error::SurfaceFailed { .. })
    ));
}
