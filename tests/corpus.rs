//! The real DSH corpus: every session log round-trips byte-exactly with DSH's logical events and
//! reader verdict; every other file is refused and leaves the store unchanged.

use std::collections::{BTreeMap, HashSet};

use sessionlog::codec::json::{self, Value};
use sessionlog::engine::{Error, Store};

use crate::fixtures::{
    assert_empty, events_text, export_bytes, fixtures, import_bytes, temp_store,
};

/// `verdicts.json`: file name → (kind, strict verdict).
fn verdicts(dir: &std::path::Path) -> BTreeMap<String, (String, Option<String>)> {
    let text =
        std::fs::read_to_string(dir.join("dsh-expected/verdicts.json")).expect("verdicts.json");
    let Value::Object(all) = json::parse(&text).expect("verdicts parse") else {
        panic!("verdicts is not an object")
    };
    all.iter()
        .map(|(name, v)| {
            let o = v.as_object().expect("verdict entry");
            let kind = o
                .get("kind")
                .and_then(Value::as_str)
                .expect("kind")
                .to_owned();
            let strict = o.get("strict").and_then(Value::as_str).map(str::to_owned);
            (name.to_string(), (kind, strict))
        })
        .collect()
}

#[test]
fn every_session_fixture_round_trips_with_dsh_events_and_verdict() {
    let Some(dir) = fixtures() else { return };
    let verdicts = verdicts(&dir);
    // Fixture ids repeat (47 share `{{sessionId}}`); a store per id-disjoint group keeps the
    // duplicate-id rule intact while testing every file.
    let mut stores: Vec<(tempfile::TempDir, Store, HashSet<String>)> = Vec::new();
    let mut sessions = 0;
    for (name, (kind, strict)) in &verdicts {
        if kind != "session" {
            continue;
        }
        let bytes = std::fs::read(dir.join("dsh").join(name)).expect("fixture");
        let header = sessionlog::codec::format::header::parse_header(
            &bytes[..bytes.iter().position(|&b| b == b'\n').expect("newline")],
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let id = header.id.to_string_lossy();
        let slot = match stores.iter().position(|(_, _, ids)| !ids.contains(&id)) {
            Some(i) => i,
            None => {
                let (d, s) = temp_store();
                stores.push((d, s, HashSet::new()));
                stores.len() - 1
            }
        };
        let (_, store, ids) = &mut stores[slot];
        ids.insert(id.clone());
        let report =
            import_bytes(store, name, &bytes, false).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(report.id, id);
        assert_eq!(Some(report.verdict.to_string()), *strict, "{name}: verdict");
        assert_eq!(
            export_bytes(store, &id),
            bytes,
            "{name}: export is not byte-identical"
        );
        let stem = name.strip_suffix(".jsonl").expect("jsonl name");
        let expected = std::fs::read_to_string(
            dir.join("dsh-expected")
                .join(format!("{stem}.events.jsonl")),
        )
        .expect("events fixture");
        let got = events_text(store, &id).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            got == expected,
            "{name}: logical events differ from DSH's (first differing line {:?})",
            first_diff(&got, &expected)
        );
        sessions += 1;
    }
    assert_eq!(sessions, 169, "the corpus has 169 session logs");
    for (_, store, _) in &stores {
        let report = store.verify(&[]).expect("verify");
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }
}

#[test]
fn strict_import_accepts_exactly_the_clean_logs() {
    let Some(dir) = fixtures() else { return };
    let mut accepted = 0;
    for (name, (kind, strict)) in verdicts(&dir) {
        if kind != "session" {
            continue;
        }
        let bytes = std::fs::read(dir.join("dsh").join(&name)).expect("fixture");
        let (_tmp, store) = temp_store();
        match import_bytes(&store, &name, &bytes, true) {
            Ok(_) => {
                assert_eq!(
                    strict.as_deref(),
                    Some("clean"),
                    "{name}: strict accepted a non-clean log"
                );
                accepted += 1;
            }
            Err(Error::StrictRejected { verdict, .. }) => {
                assert_eq!(Some(verdict), strict, "{name}");
                assert_empty(&store);
            }
            Err(e) => panic!("{name}: unexpected error {e}"),
        }
    }
    assert_eq!(accepted, 132, "132 corpus logs are clean");
}

#[test]
fn non_session_files_are_refused_and_write_nothing() {
    let Some(dir) = fixtures() else { return };
    let (_tmp, store) = temp_store();
    let mut refused = 0;
    for (name, (kind, _)) in verdicts(&dir) {
        if kind == "session" {
            continue;
        }
        let bytes = std::fs::read(dir.join("dsh").join(&name)).expect("fixture");
        match import_bytes(&store, &name, &bytes, false) {
            Err(Error::NotASession {
                source_name,
                reason,
            }) => {
                assert_eq!(source_name, name);
                assert!(!reason.is_empty());
                refused += 1;
            }
            other => panic!("{name}: expected a not-a-session refusal, got {other:?}"),
        }
    }
    assert_eq!(refused, 108);
    assert_empty(&store);
}

fn first_diff(a: &str, b: &str) -> Option<(usize, String, String)> {
    a.lines()
        .zip(b.lines())
        .enumerate()
        .find(|(_, (x, y))| x != y)
        .map(|(i, (x, y))| {
            (
                i + 1,
                x.chars().take(200).collect(),
                y.chars().take(200).collect(),
            )
        })
        .or_else(|| {
            (a.lines().count() != b.lines().count()).then(|| {
                (
                    0,
                    format!("{} lines", a.lines().count()),
                    format!("{} lines", b.lines().count()),
                )
            })
        })
}
