use super::*;

/// Scan `body` (lines joined by the caller) after a header of `h` bytes.
fn scan(h: u64, body: &str) -> (BodyScanner, Vec<bool>) {
    let mut s = BodyScanner::new(h);
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
