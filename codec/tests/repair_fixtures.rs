//! Scenario: crash-repair closers on DSH's own files.
//!
//! - the `tool-outcome-unknown` fixture is a log DSH repaired after a crash: from its first six
//!   lines (header, then the interrupted turn's events) the closers stringify to lines 7–9 byte
//!   for byte, and the following end-seed line is the marker a resume adds;
//! - every corpus session's logical events (`dsh-expected/<name>.events.jsonl`) fold without
//!   panicking: a log whose last turn is closed gets no closers, an open one gets closers that
//!   continue its seqs and end with an interrupted `turn/end`.
//!
//! Fixtures are read in place from `<repo>/../shared/fixtures` (or `$SESSIONLOG_FIXTURES`); when
//! missing the tests note it and pass, unless `CI` is set.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use sessionlog_codec::json::{parse, stringify, Value};
use sessionlog_codec::rules::repair::{
    end_seed, interrupted_turn_closers, needs_end_seed, OpenTurn,
};

const TOOL_OUTCOME_UNKNOWN: &str = "dsh/examples__headless-agent__tests__semantic-checkpoint-snapshots__tool-outcome-unknown__session.expected.jsonl";

fn fixtures() -> Option<PathBuf> {
    common::fixtures_with("dsh-expected")
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn json(text: &str, what: &str) -> Value {
    parse(text).unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn field<'a>(event: &'a Value, key: &str) -> Option<&'a Value> {
    event.as_object().and_then(|o| o.get(key))
}

fn ty(event: &Value) -> Option<&str> {
    field(event, "type").and_then(Value::as_str)
}

#[test]
fn tool_outcome_unknown_closers_equal_lines_7_to_9() {
    let Some(dir) = fixtures() else { return };
    let text = read(&dir.join(TOOL_OUTCOME_UNKNOWN));
    let lines: Vec<&str> = text.lines().collect();
    let events: Vec<Value> = lines[1..6]
        .iter()
        .map(|l| json(l, "fixture event"))
        .collect();
    let closers: Vec<String> = interrupted_turn_closers(&events)
        .iter()
        .map(stringify)
        .collect();
    assert_eq!(closers, lines[6..9]);

    // Line 10 is the end-seed the resume added after the repaired log.
    let repaired: Vec<Value> = lines[1..9].iter().map(|l| json(l, "line")).collect();
    assert!(needs_end_seed(repaired.last()));
    assert_eq!(stringify(&end_seed(8, 0)), lines[9]);
    let resumed: Vec<Value> = lines[1..10].iter().map(|l| json(l, "line")).collect();
    assert!(!needs_end_seed(resumed.last()));
    assert!(interrupted_turn_closers(&resumed).is_empty());
}

#[test]
fn corpus_logs_fold_without_panicking_and_closed_logs_need_no_closers() {
    let Some(dir) = fixtures() else { return };
    let expected = dir.join("dsh-expected");
    let mut names: Vec<String> = fs::read_dir(&expected)
        .unwrap_or_else(|e| panic!("{}: {e}", expected.display()))
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".events.jsonl").map(str::to_owned))
        .collect();
    names.sort();
    assert!(names.len() >= 169, "only {} event files", names.len());
    let (mut closed, mut open, mut unreadable) = (0, 0, 0);
    for name in &names {
        let text = read(&expected.join(format!("{name}.events.jsonl")));
        let events: Vec<Value> = text
            .lines()
            .enumerate()
            .map(|(i, l)| json(l, &format!("{name} line {i}")))
            .collect();
        let closers = interrupted_turn_closers(&events);
        let mut fold = OpenTurn::new();
        for e in &events {
            fold.observe(e);
        }
        let last_turn_open = events
            .iter()
            .rev()
            .find_map(|e| match ty(e) {
                Some("turn/start") => Some(true),
                Some("turn/end") => Some(false),
                _ => None,
            })
            .unwrap_or(false);
        if fold.type_error().is_some() {
            unreadable += 1;
            assert!(closers.is_empty(), "{name}");
        } else if !last_turn_open {
            closed += 1;
            assert!(closers.is_empty(), "{name}: closed log got closers");
        } else {
            open += 1;
            let last = closers
                .last()
                .unwrap_or_else(|| panic!("{name}: no closers"));
            assert_eq!(ty(last), Some("turn/end"), "{name}");
            for (k, c) in closers.iter().enumerate() {
                let seq = field(c, "seq").and_then(Value::as_f64);
                assert_eq!(seq, Some((events.len() + k) as f64), "{name}: closer {k}");
                assert_eq!(
                    field(c, "time"),
                    events.last().and_then(|e| field(e, "time")),
                    "{name}"
                );
            }
        }
    }
    eprintln!("closers: {closed} closed, {open} open, {unreadable} unreadable by DSH's scan");
    assert!(closed > 100, "{closed} closed logs");
}
