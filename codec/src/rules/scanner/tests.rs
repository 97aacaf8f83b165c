use super::*;

/// Scan `body` (lines joined by the caller) after a header of `h` bytes.
fn scan(h: u64, body: &str) -> (BodyScanner, Vec<bool>) {
    scan_with(BodyScanner::new(h), h, body)
}

/// Scan `body` under a later-generation header line.
fn scan_header(header: &str, body: &str) -> (BodyScanner, u64) {
    let h = crate::format::header::parse_header(header.as_bytes()).expect("a header");
    let len = header.len() as u64 + 1;
    let (s, _) = scan_with(BodyScanner::for_header(&h, len), len, body);
    (s, len + body.len() as u64)
}

fn scan_with(mut s: BodyScanner, h: u64, body: &str) -> (BodyScanner, Vec<bool>) {
    let mut off = h;
    let mut committed = Vec::new();
    for piece in body.split_inclusive('\n') {
        if !piece.ends_with('\n') {
            break;
        }
        off += piece.len() as u64;
        let out = s
            .push_line(&piece.as_bytes()[..piece.len() - 1], off)
            .expect("depth");
        committed.push(matches!(out, LineOutcome::Committed(_)));
    }
    (s, committed)
}

const T0: &str = "{\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{\"turn\":1}}\n";
const E1: &str = "{\"type\":\"turn/end\",\"seq\":1,\"time\":1,\"data\":{\"turn\":1}}\n";

#[test]
fn clean_body() {
    let body = format!("{T0}{E1}");
    let (s, c) = scan(10, &body);
    assert_eq!(c, [true, true]);
    assert_eq!(s.finish(10 + body.len() as u64), BodyVerdict::Clean);
    assert_eq!(s.events(), 2);
}

#[test]
fn torn_fragment_is_tail() {
    let body = format!("{T0}{{\"type\":\"assistant/chunk\",\"seq\":8,\"ti");
    let (s, _) = scan(10, &body);
    assert_eq!(s.committed_bytes(), 10 + T0.len() as u64);
    assert_eq!(s.finish(10 + body.len() as u64), BodyVerdict::Torn);
}

#[test]
fn unparsable_line_before_turn_end_is_fatal() {
    let body = format!("{T0}garbage\n{E1}");
    let (s, c) = scan(0, &body);
    assert_eq!(c, [true, false, false]);
    assert_eq!(
        s.finish(body.len() as u64),
        BodyVerdict::Corrupt("unparsable committed event at line 2".into())
    );
}

#[test]
fn unparsable_line_after_last_turn_end_is_torn() {
    let body = format!("{T0}{E1}garbage\n");
    let (s, _) = scan(0, &body);
    assert_eq!(s.finish(body.len() as u64), BodyVerdict::Torn);
    assert_eq!(s.events(), 2);
}

#[test]
fn seq_gap_messages() {
    let body = format!("{T0}{}", E1.replace("\"seq\":1", "\"seq\":3"));
    let (s, _) = scan(0, &body);
    assert_eq!(
        s.finish(body.len() as u64),
        BodyVerdict::Corrupt("seq gap in committed region at line 2 (expected 1, got 3)".into())
    );
    let body = format!("{T0}{{\"type\":\"x\",\"seq\":\"1\"}}\n");
    let (s, _) = scan(0, &body);
    assert_eq!(s.finish(body.len() as u64), BodyVerdict::Torn);
    let body = format!("{T0}{{\"type\":\"x\"}}\n{E1}");
    let (s, _) = scan(0, &body);
    assert_eq!(
        s.finish(body.len() as u64),
        BodyVerdict::Corrupt(
            "seq gap in committed region at line 2 (expected 1, got undefined)".into()
        )
    );
}

#[test]
fn null_line_is_a_type_error() {
    let body = format!("{T0}null\n");
    let (s, _) = scan(0, &body);
    assert_eq!(
        s.finish(body.len() as u64),
        BodyVerdict::Corrupt("Cannot read properties of null (reading 'seq')".into())
    );
}

#[test]
fn packed_row_expands_and_checks_each_member() {
    let row = "{\"type\":\"text-chunks\",\"seq0\":1,\"time0\":5,\"data\":{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[1,-2],\"texts\":[\"a\",\"b\",\"c\"]}}\n";
    let body = format!("{T0}{row}");
    let (s, c) = scan(0, &body);
    assert_eq!(c, [true, true]);
    assert_eq!(s.events(), 4);
    let bad = row.replace("[1,-2]", "[1]");
    let body = format!("{T0}{bad}{}", E1.replace("\"seq\":1", "\"seq\":4"));
    let (s, _) = scan(0, &body);
    assert_eq!(
        s.finish(body.len() as u64),
        BodyVerdict::Corrupt("unparsable committed event at line 2".into())
    );
}

fn v(version: u32, seeded: bool) -> String {
    format!(
        r#"{{"type":"session","version":{version},"id":"s","createdAt":1,"isSeeded":{seeded},"delegationDepth":0}}"#
    )
}

fn row(seq: u64, ty: &str, data: &str) -> String {
    format!("{{\"type\":\"{ty}\",\"seq\":{seq},\"time\":5,\"data\":{data}}}\n")
}

#[test]
fn later_generations_take_one_event_per_row_and_decode_ranges() {
    let body = format!(
        "{}{}{}",
        row(0, "turn/start", r#"{"turn":1}"#),
        row(1, "turn/end", r#"{"turn":1}"#),
        "{\"type\":\"x/y\",\"seq\":2,\"time\":5,\"data\":{},\"ignorable\":true,\"sourceEventSeqs\":[[0,1]]}\n"
    );
    let (s, len) = scan_header(&v(4, false), &body);
    assert_eq!(s.finish(len), BodyVerdict::Clean);
    assert_eq!(s.events(), 3);
}

#[test]
fn the_inherited_marker_is_the_cut_and_must_match_the_header() {
    let marker = |seq| row(seq, "session/end-seed", r#"{"inherited":true}"#);
    let body = format!(
        "{}{}{}{}",
        row(0, "a/b", "{}"),
        marker(1),
        row(2, "c/d", "{}"),
        marker(3)
    );
    let (s, len) = scan_header(&v(2, true), &body);
    assert_eq!((s.finish(len), s.cut()), (BodyVerdict::Clean, Some(3)));
    let (s, len) = scan_header(&v(2, false), &body);
    assert_eq!(
        s.finish(len),
        BodyVerdict::Corrupt(
            "released v2 unseeded Session contains an inherited end-seed marker".into()
        )
    );
    let (s, len) = scan_header(&v(3, true), &row(0, "session/end-seed", "{}"));
    assert_eq!(
        s.finish(len),
        BodyVerdict::Corrupt(
            "released v2 seeded Session lacks an inherited end-seed marker".into()
        )
    );
}

#[test]
fn v4_recoverable_tail_and_admission_before_recovery() {
    let good: String = (0..10).map(|i| row(i, "todo/write", "{}")).collect();
    let torn = format!("{good}{{not json\n{}", row(11, "c/d", "{}"));
    let (s, len) = scan_header(&v(4, false), &torn);
    assert_eq!((s.finish(len), s.events()), (BodyVerdict::Torn, 10));
    let fatal = format!("{good}{{not json\n{}", row(11, "turn/end", "{}"));
    let (s, len) = scan_header(&v(4, false), &fatal);
    assert_eq!(
        s.finish(len),
        BodyVerdict::Corrupt("unparsable committed event at line 11".into())
    );
    let retired = format!(
        "{good}{{not json\n{}",
        row(11, "request/header", r#"{"header":{"system":""}}"#)
    );
    let (s, len) = scan_header(&v(4, false), &retired);
    assert_eq!(
        s.finish(len),
        BodyVerdict::Corrupt("format v4 request/header rejects retired header.system".into())
    );
    let extra = format!(
        "{good}{}",
        "{\"type\":\"a\",\"seq\":10,\"time\":1,\"data\":{},\"foo\":1}\n"
    );
    let (s, len) = scan_header(&v(4, false), &extra);
    assert_eq!(s.finish(len), BodyVerdict::Torn);
    assert_eq!(s.events(), 10);
    let (s, len) = scan_header(
        &v(2, false),
        &format!("{}{}", row(0, "a", "{}"), row(2, "turn/end", "{}")),
    );
    assert_eq!(
        s.finish(len),
        BodyVerdict::Corrupt("released v2 row 1 has seq gap (expected 1, got 2)".into())
    );
}

#[test]
fn v4_refuses_an_unknown_required_type_after_the_scan_and_before_the_relationships() {
    let body = format!(
        "{}{}{}",
        row(0, "todo/write", "{}"),
        row(1, "x/y", "{}"),
        row(2, "turn/end", "{}")
    );
    let (s, len) = scan_header(&v(4, false), &body);
    assert_eq!(
        (s.finish(len), s.events()),
        (
            BodyVerdict::Unsupported(
                r#"format v4 contains unknown event type "x/y" at seq 1"#.into()
            ),
            3
        )
    );
    let ignorable = format!(
        "{}{}",
        row(0, "todo/write", "{}"),
        "{\"type\":\"plugin:x/y\",\"seq\":1,\"time\":1,\"data\":{},\"ignorable\":true,\"surfaceOp\":7}\n"
    );
    let (s, len) = scan_header(&v(4, false), &ignorable);
    assert_eq!((s.finish(len), s.events()), (BodyVerdict::Clean, 2));
}

/// After a V2/V3 row's issue, a later row makes it fatal exactly when `JSON.parse` would read
/// its `type` as `turn/end`: spelled plainly, escaped, or as the last of duplicate keys (the
/// rows the skim leaves to the full parser); a row that is not JSON, or names another type,
/// leaves the rest a tail.
#[test]
fn a_turn_end_after_a_later_generation_issue_is_found_however_it_is_spelled() {
    let first = row(0, "turn/start", r#"{"turn":1}"#);
    for version in [2, 3] {
        for (later, fatal) in [
            (row(9, "turn/end", "{}"), true),
            (r#"{"type":"turn\/end","seq":9}"#.to_owned() + "\n", true),
            (r#"{"t\u0079pe":"turn/end"}"#.to_owned() + "\n", true),
            (
                r#"{"type":"turn/start","type":"turn/end"}"#.to_owned() + "\n",
                true,
            ),
            (
                r#"{"type":"turn/end","type":"turn/start"}"#.to_owned() + "\n",
                false,
            ),
            (row(9, "turn/start", "{}"), false),
            ("{\"type\":\"turn/end\"\n".to_owned(), false),
            ("[\"turn/end\"]\n".to_owned(), false),
        ] {
            let body = format!("{first}garbage\n{later}");
            let (s, len) = scan_header(&v(version, false), &body);
            let want = if fatal {
                BodyVerdict::Corrupt("row 2 is not valid JSON".into())
            } else {
                BodyVerdict::Torn
            };
            assert_eq!(s.finish(len), want, "v{version}: {later}");
        }
    }
}

/// A row nested past the depth limit after an issue fails as the full parser does.
#[test]
fn a_too_deep_row_after_a_later_generation_issue_is_an_error() {
    let h = crate::format::header::parse_header(v(2, false).as_bytes()).expect("a header");
    let mut s = BodyScanner::for_header(&h, 0);
    s.push_line(b"garbage", 8).expect("a line");
    let deep = "[".repeat(json::MAX_DEPTH + 1);
    assert!(matches!(
        s.push_line(deep.as_bytes(), 9),
        Err(crate::Error::TooDeep { .. })
    ));
}
