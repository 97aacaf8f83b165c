//! Scenario: the surface folds replay every DSH fixture session and reproduce, byte for byte, the
//! views DSH's own code derived from the same logical events (`dsh-expected/`):
//!
//! - `<name>.messages.jsonl` (`deriveMessages()`), `<name>.surface.json` (nodes, generation,
//!   replacements), `<name>.transcript.jsonl` (append-origin events) and
//!   `<name>.request-header.json` (the folded canonical header);
//! - every `<name>.pit.jsonl` line, folding events `0..=N` only, and the set of pit seqs itself
//!   (each `turn/end` and each replacement surface event);
//! - every fixture in `derive-errors.json` fails with DSH's error, without panicking.
//!
//! The entry point DSH used (`derive-paths.json`) does not change these views for a log it
//! accepts: `Session.create`/`fromRestore` only validate more strictly, and the lower-level
//! `foldSurface` + `deriveEventMessage` path is exactly what [`replay`] runs. Fixtures are read in
//! place from `<repo>/../shared/fixtures` (or `$SESSIONLOG_FIXTURES`); when missing the tests note
//! it and pass, unless `CI` is set.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use sessionlog_codec::json::{parse, stringify, Object, Value};
use sessionlog_codec::rules::surface::{
    derive_messages, is_replacement_surface_event, replay, SurfaceFold,
};
use sessionlog_codec::Error;

fn expected_dir() -> Option<PathBuf> {
    common::fixtures_with("dsh-expected/derive-errors.json").map(|d| d.join("dsh-expected"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn json(text: &str, what: &str) -> Value {
    parse(text).unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn events(dir: &Path, name: &str) -> Vec<Value> {
    let text = read(&dir.join(format!("{name}.events.jsonl")));
    text.lines()
        .enumerate()
        .map(|(i, l)| json(l, &format!("{name} event line {i}")))
        .collect()
}

/// Fixture names with a `.messages.jsonl`, sorted.
fn derived_names(dir: &Path) -> Vec<String> {
    let entries =
        fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".messages.jsonl").map(str::to_owned))
        .collect();
    names.sort();
    names
}

/// Matches per view, and a description of every mismatch.
#[derive(Default)]
struct Tally {
    messages: usize,
    surface: usize,
    transcript: usize,
    header: usize,
    pit_lines: usize,
    mismatches: Vec<String>,
}

impl Tally {
    fn check(&mut self, view: &str, name: &str, got: &str, want: &str) -> bool {
        if got == want {
            return true;
        }
        let at = got
            .bytes()
            .zip(want.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        let around = |s: &str| {
            s.get(at.saturating_sub(40)..(at + 80).min(s.len()))
                .unwrap_or("")
                .to_owned()
        };
        self.mismatches.push(format!(
            "{name} {view}: differs at byte {at}\n  got:  {}\n  want: {}",
            around(got),
            around(want)
        ));
        false
    }
}

fn pit_line(at: u64, fold: &SurfaceFold, events: &[Value]) -> String {
    let lookup = |s: u64| usize::try_from(s).ok().and_then(|i| events.get(i));
    let messages =
        derive_messages(fold.nodes(), lookup).unwrap_or_else(|e| panic!("pit {at}: {e}"));
    #[expect(clippy::cast_precision_loss, reason = "fixture seqs are small")]
    let num = |s: u64| Value::Number(s as f64);
    let nodes = fold.nodes().iter().map(|&s| num(s)).collect();
    stringify(&Value::Object(
        Object::new()
            .with("at", num(at))
            .with("messages", Value::Array(messages))
            .with("nodes", Value::Array(nodes)),
    ))
}

fn check_fixture(dir: &Path, name: &str, tally: &mut Tally) {
    let events = events(dir, name);
    let expect = |suffix: &str| read(&dir.join(format!("{name}{suffix}")));
    let r = replay(&events).unwrap_or_else(|e| panic!("{name}: replay failed: {e}"));
    if tally.check(
        "messages",
        name,
        &r.messages_jsonl(),
        &expect(".messages.jsonl"),
    ) {
        tally.messages += 1;
    }
    if tally.check(
        "surface",
        name,
        &(r.surface.to_json() + "\n"),
        &expect(".surface.json"),
    ) {
        tally.surface += 1;
    }
    if tally.check(
        "transcript",
        name,
        &r.transcript_jsonl(),
        &expect(".transcript.jsonl"),
    ) {
        tally.transcript += 1;
    }
    let header = stringify(r.request_header.as_ref().unwrap_or(&Value::Null)) + "\n";
    if tally.check(
        "request header",
        name,
        &header,
        &expect(".request-header.json"),
    ) {
        tally.header += 1;
    }

    // Point in time: fold incrementally and derive at each listed seq from the prefix only.
    let pit = expect(".pit.jsonl");
    let wanted_at: Vec<u64> = pit
        .lines()
        .map(|l| {
            let line = json(l, &format!("{name} pit"));
            let at = line
                .as_object()
                .and_then(|o| o.get("at"))
                .and_then(Value::as_safe_integer);
            at.and_then(|n| u64::try_from(n).ok())
                .unwrap_or_else(|| panic!("{name}: pit line without at"))
        })
        .collect();
    let pit_seqs: Vec<u64> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            let ty = e
                .as_object()
                .and_then(|o| o.get("type"))
                .and_then(Value::as_str);
            ty == Some("turn/end") || is_replacement_surface_event(e)
        })
        .filter_map(|(i, _)| u64::try_from(i).ok())
        .collect();
    assert_eq!(pit_seqs, wanted_at, "{name}: pit seqs");
    let mut fold = SurfaceFold::new();
    let mut lines = pit.lines().zip(&wanted_at).peekable();
    for (i, event) in events.iter().enumerate() {
        let lookup = |s: u64| usize::try_from(s).ok().and_then(|j| events.get(j));
        fold.apply(event, lookup)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        while let Some((want, &at)) = lines.next_if(|(_, &at)| usize::try_from(at).ok() == Some(i))
        {
            let got = pit_line(at, &fold, &events[..=i]);
            if tally.check(&format!("pit line at {at}"), name, &got, want) {
                tally.pit_lines += 1;
            }
        }
    }
}

#[test]
fn replay_matches_dsh_derived_views() {
    let Some(dir) = expected_dir() else { return };
    let names = derived_names(&dir);
    let mut tally = Tally::default();
    for name in &names {
        check_fixture(&dir, name, &mut tally);
    }
    let total_pit: usize = names
        .iter()
        .map(|n| read(&dir.join(format!("{n}.pit.jsonl"))).lines().count())
        .sum();
    eprintln!(
        "surface fixtures: {} sessions; matched messages {}, surface {}, transcript {}, request \
         header {}, pit lines {}/{}",
        names.len(),
        tally.messages,
        tally.surface,
        tally.transcript,
        tally.header,
        tally.pit_lines,
        total_pit
    );
    assert!(
        tally.mismatches.is_empty(),
        "mismatches:\n{}",
        tally.mismatches.join("\n")
    );
    assert!(
        names.len() >= 100,
        "expected the full corpus, found {} sessions",
        names.len()
    );
    assert_eq!(tally.pit_lines, total_pit);
}

#[test]
fn derive_errors_fail_like_dsh() {
    let Some(dir) = expected_dir() else { return };
    let errors = json(&read(&dir.join("derive-errors.json")), "derive-errors.json");
    let errors = errors
        .as_object()
        .unwrap_or_else(|| panic!("derive-errors.json is not an object"));
    assert_eq!(errors.len(), 10);
    for (name, info) in errors.iter() {
        let name = name.to_string();
        let want = info
            .as_object()
            .and_then(|o| o.get("error"))
            .and_then(Value::as_str);
        let want = want.unwrap_or_else(|| panic!("{name}: no error text"));
        match replay(&events(&dir, &name)) {
            Err(Error::Surface { rule, .. }) => assert_eq!(rule, want, "{name}"),
            Err(other) => panic!("{name}: unexpected error kind {other}"),
            Ok(_) => panic!("{name}: replay succeeded where DSH threw {want}"),
        }
        assert!(
            !dir.join(format!("{name}.messages.jsonl")).exists(),
            "{name}: a derive error should have no derived views"
        );
    }
}
