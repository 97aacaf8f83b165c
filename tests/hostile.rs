//! Inputs a new user will try: each round-trips byte-exactly or is refused with a clear error,
//! never panics, and never leaves a partial session behind.

use sessionlog::engine::{Error, Verdict};

use crate::fixtures::{assert_empty, events_text, export_bytes, import_bytes, temp_store};

const HEADER: &str =
    r#"{"type":"session","version":0,"id":"h","createdAt":1,"cwd":"/w","delegationDepth":0}"#;

fn line(seq: u64, data: &str) -> String {
    format!(r#"{{"type":"hook/result","seq":{seq},"time":5,"data":{data}}}"#)
}

/// Import `bytes`, expect success with `verdict`, and a byte-identical export.
fn round_trip(bytes: &[u8], verdict: &Verdict) -> String {
    let (_tmp, store) = temp_store();
    let report = import_bytes(&store, "input", bytes, false)
        .unwrap_or_else(|e| panic!("import failed: {e}"));
    assert_eq!(&report.verdict, verdict);
    assert_eq!(
        export_bytes(&store, &report.id),
        bytes,
        "export is not byte-identical"
    );
    assert!(store.verify(&[]).expect("verify").problems.is_empty());
    events_text(&store, &report.id).expect("events")
}

#[test]
fn invalid_utf8_round_trips_and_decodes_lossily() {
    let mut bytes = format!("{HEADER}\n").into_bytes();
    bytes.extend_from_slice(
        b"{\"type\":\"hook/result\",\"seq\":0,\"time\":5,\"data\":{\"s\":\"a\xffb\"}}\n",
    );
    let events = round_trip(&bytes, &Verdict::Clean);
    assert_eq!(
        events,
        "{\"type\":\"hook/result\",\"seq\":0,\"time\":5,\"data\":{\"s\":\"a\u{fffd}b\"}}\n"
    );
}

#[test]
fn crlf_lines_round_trip_and_load() {
    let text = format!("{HEADER}\r\n{}\r\n{}\r\n", line(0, "{}"), line(1, "{}"));
    round_trip(text.as_bytes(), &Verdict::Clean);
}

#[test]
fn bom_header_is_stored_as_corrupt() {
    let text = format!("\u{feff}{HEADER}\n{}\n", line(0, "{}"));
    round_trip(
        text.as_bytes(),
        &Verdict::Corrupt("header line is not valid JSON".into()),
    );
}

#[test]
fn duplicate_keys_keep_first_position_and_last_value() {
    let text = format!(
        "{HEADER}\n{}\n",
        r#"{"type":"x/y","seq":0,"time":5,"data":{"a":1,"b":2,"a":3},"ignorable":true}"#
    );
    let events = round_trip(text.as_bytes(), &Verdict::Clean);
    assert_eq!(
        events,
        "{\"type\":\"x/y\",\"seq\":0,\"time\":5,\"data\":{\"a\":3,\"b\":2},\"ignorable\":true}\n"
    );
}

#[test]
fn unusual_number_spellings_round_trip_as_js_values() {
    let data = r#"{"a":1.0,"b":1E+21,"c":-0,"d":12345678901234567890,"e":1e2,"f":0.0000001}"#;
    let text = format!("{HEADER}\n{}\n", line(0, data));
    let events = round_trip(text.as_bytes(), &Verdict::Clean);
    assert_eq!(
        events,
        "{\"type\":\"hook/result\",\"seq\":0,\"time\":5,\"data\":{\"a\":1,\"b\":1e+21,\"c\":0,\"d\":12345678901234567000,\"e\":100,\"f\":1e-7}}\n"
    );
}

#[test]
fn a_fifty_megabyte_line_round_trips() {
    let big = "x".repeat(50 << 20);
    let text = format!(
        "{HEADER}\n{}\n",
        line(0, &format!("{{\"output\":\"{big}\"}}"))
    );
    let events = round_trip(text.as_bytes(), &Verdict::Clean);
    assert_eq!(events.len(), text.len() - HEADER.len() - 1);
}

#[test]
fn moderate_nesting_round_trips() {
    let data = format!("{}1{}", "[".repeat(500), "]".repeat(500));
    let text = format!("{HEADER}\n{}\n", line(0, &data));
    round_trip(text.as_bytes(), &Verdict::Clean);
}

#[test]
fn extreme_nesting_is_refused_without_overflowing_the_stack() {
    let data = format!("{}1{}", "[".repeat(200_000), "]".repeat(200_000));
    let text = format!("{HEADER}\n{}\n{}\n", line(0, "{}"), line(1, &data));
    let (_tmp, store) = temp_store();
    match import_bytes(&store, "deep", text.as_bytes(), false) {
        Err(Error::Unstorable {
            id, line, reason, ..
        }) => {
            assert_eq!((id.as_str(), line), ("h", 2));
            assert!(reason.contains("nesting"), "{reason}");
        }
        other => panic!("expected a clear refusal, got {other:?}"),
    }
    assert_empty(&store);
}

#[test]
fn truncated_last_line_is_a_torn_tail() {
    let text = format!(
        "{HEADER}\n{}\n{{\"type\":\"assistant/chunk\",\"seq\":1,\"ti",
        line(0, "{}")
    );
    let events = round_trip(text.as_bytes(), &Verdict::Torn);
    assert_eq!(events.lines().count(), 1);
}

#[test]
fn file_cut_inside_a_packed_row_is_torn() {
    let row = r#"{"type":"text-chunks","seq0":1,"time0":5,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["a","b","c"]}}"#;
    let full = format!("{HEADER}\n{}\n{row}\n", line(0, "{}"));
    for cut in (HEADER.len() + 1)..full.len() {
        let (_tmp, store) = temp_store();
        let bytes = &full.as_bytes()[..cut];
        let report = import_bytes(&store, "cut", bytes, false)
            .unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert_eq!(export_bytes(&store, "h"), bytes, "cut at {cut}");
        let expect_events = if cut == full.len() {
            4
        } else if cut > HEADER.len() + 1 + line(0, "{}").len() {
            1
        } else {
            0
        };
        assert_eq!(report.events, expect_events, "cut at {cut}");
    }
}

#[test]
fn non_sessions_are_refused_clearly() {
    let (_tmp, store) = temp_store();
    let cases: [(&[u8], &str); 6] = [
        (b"", "empty"),
        (b"\x00\x01\x02binary\xff\n", "not JSON"),
        (b"{\"jsonrpc\":\"2.0\",\"id\":1}\n", "not a session header"),
        (b"[1,2]\n", "not a session header"),
        (HEADER.as_bytes(), "header-less"),
        (b"{\"type\":\"session\",\"id\":7}\n", "no string id"),
    ];
    for (bytes, why) in cases {
        match import_bytes(&store, "bad", bytes, false) {
            Err(Error::NotASession { reason, .. }) => {
                assert!(reason.contains(why), "{reason} should say {why}")
            }
            other => panic!("{why}: expected NotASession, got {other:?}"),
        }
    }
    assert_empty(&store);
}

#[test]
fn a_duplicate_id_is_refused_and_the_original_is_untouched() {
    let (_tmp, store) = temp_store();
    let first = format!("{HEADER}\n{}\n", line(0, "{}"));
    import_bytes(&store, "first", first.as_bytes(), false).expect("first import");
    let second = format!(
        "{HEADER}\n{}\n{}\n",
        line(0, "{\"other\":1}"),
        line(1, "{}")
    );
    match import_bytes(&store, "second", second.as_bytes(), false) {
        Err(Error::DuplicateSession { id, .. }) => assert_eq!(id, "h"),
        other => panic!("expected DuplicateSession, got {other:?}"),
    }
    assert_eq!(export_bytes(&store, "h"), first.as_bytes());
    assert_eq!(store.list().expect("list").len(), 1);
}

#[test]
fn header_only_session_has_no_events() {
    let text = format!("{HEADER}\n");
    let events = round_trip(text.as_bytes(), &Verdict::Clean);
    assert!(events.is_empty());
}
