//! Hostile input as properties: DSH corpus files mutated (bit flips, truncation, splicing,
//! duplicated lines, huge numbers, deep nesting, invalid UTF-8) and fed to `.jsonl` and
//! `.jsonl.zstd` import, to the live append path (`NewEvent::from_value` on mutated events) and to
//! the JSON codec. Never a panic or a hang: either a clean import whose export is byte-identical
//! and whose `verify` is clean, or a clear error that leaves the store without that session.
//! Cases per property: 48 normally, 1000 with `SESSIONLOG_NIGHTLY=1`.

use std::path::Path;
use std::sync::OnceLock;

use proptest::prelude::*;
use sessionlog::codec::format::event::NewEvent;
use sessionlog::codec::json;
use sessionlog::engine::{ImportOptions, SourceEncoding};

use crate::fixtures::{assert_empty, fixtures, temp_store};

/// Corpus files by kind: `.jsonl` and `.jsonl.zstd`.
struct Corpus {
    jsonl: Vec<Vec<u8>>,
    zstd: Vec<Vec<u8>>,
}

/// The corpus, or `None` where the shared fixtures are missing: then the calling test fails
/// under CI and says on stderr what it skipped elsewhere (each test itself, for an honest count).
fn corpus() -> Option<&'static Corpus> {
    let dir = fixtures()?;
    static CORPUS: OnceLock<Corpus> = OnceLock::new();
    Some(CORPUS.get_or_init(|| {
        let read = |sub: &str, ext: &str| -> Vec<Vec<u8>> {
            let mut paths: Vec<_> = std::fs::read_dir(dir.join(sub))
                .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
                .unwrap_or_default();
            paths.retain(|p: &std::path::PathBuf| p.to_string_lossy().ends_with(ext));
            paths.sort();
            paths
                .iter()
                .map(|p: &std::path::PathBuf| std::fs::read(Path::new(p)).expect("read fixture"))
                .collect()
        };
        let c = Corpus {
            jsonl: read("dsh", ".jsonl"),
            zstd: read("dsh-zstd", ".jsonl.zstd"),
        };
        assert!(
            !c.jsonl.is_empty() && !c.zstd.is_empty(),
            "{} holds no dsh/*.jsonl or no dsh-zstd/*.jsonl.zstd",
            dir.display()
        );
        c
    }))
}

fn cases() -> u32 {
    if std::env::var_os("SESSIONLOG_NIGHTLY").is_some_and(|v| v == "1") {
        1000
    } else {
        48
    }
}

/// Mutated inputs the codec or the event rules refuse per case the append path checks, at most.
/// On the DSH corpus about one drawn case in 13 reaches the append path (48 checked cases drew
/// 589 refused ones: 488 not JSON, 70 not an event, 31 from files without an event line), so
/// this floor leaves three times that room and still fails a run that checks almost nothing.
const REFUSED_PER_CHECKED: u32 = 40;

/// Run `test` on `cases()` values of `strategy`; a failure panics with proptest's minimal case.
/// Cases `test` rejects (`TestCaseError::reject`) do not count: proptest draws others, and fails the
/// test once it rejected more than `REFUSED_PER_CHECKED` per case it needs.
fn check<S: Strategy>(strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: cases(),
        max_global_rejects: cases() * REFUSED_PER_CHECKED,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{e}");
    }
}

/// One mutation; positions and picks are reduced modulo the input's size.
#[derive(Clone, Debug)]
enum Mutation {
    BitFlip(usize, u8),
    Truncate(usize),
    Splice(usize, usize, usize),
    DuplicateLine(usize),
    HugeNumber(usize, usize),
    DeepNesting(usize, usize),
    InvalidUtf8(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let big = 0usize..1 << 20;
    prop_oneof![
        (big.clone(), 0u8..8).prop_map(|(p, b)| Mutation::BitFlip(p, b)),
        big.clone().prop_map(Mutation::Truncate),
        (big.clone(), big.clone(), big.clone()).prop_map(|(f, a, b)| Mutation::Splice(f, a, b)),
        big.clone().prop_map(Mutation::DuplicateLine),
        (big.clone(), 0usize..6).prop_map(|(p, n)| Mutation::HugeNumber(p, n)),
        (big.clone(), 0usize..4).prop_map(|(p, d)| Mutation::DeepNesting(p, d)),
        (big, 0usize..4).prop_map(|(p, k)| Mutation::InvalidUtf8(p, k)),
    ]
}

const HUGE: [&str; 6] = [
    "1e400",
    "-1e400",
    "123456789012345678901234567890",
    "9007199254740993",
    "-0",
    "0.000000000000000000000000000000000000000000000000001",
];
const DEPTHS: [usize; 4] = [64, 999, 1001, 100_000];
const BAD_UTF8: [&[u8]; 4] = [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"];

/// Byte offsets just after each occurrence of `needle`.
fn after_each(bytes: &[u8], needle: &[u8]) -> Vec<usize> {
    bytes
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i + needle.len())
        .collect()
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation, others: &[Vec<u8>]) {
    if bytes.is_empty() {
        return;
    }
    let n = bytes.len();
    match *m {
        Mutation::BitFlip(p, b) => bytes[p % n] ^= 1 << b,
        Mutation::Truncate(p) => bytes.truncate(p % n),
        Mutation::Splice(f, a, b) => {
            let other = &others[f % others.len()];
            bytes.truncate(a % n);
            if !other.is_empty() {
                bytes.extend_from_slice(&other[b % other.len()..]);
            }
        }
        Mutation::DuplicateLine(p) => {
            let starts: Vec<usize> = std::iter::once(0).chain(after_each(bytes, b"\n")).collect();
            let s = starts[p % starts.len()];
            let e = bytes[s..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(n, |i| s + i + 1);
            let line = bytes[s..e].to_vec();
            bytes.splice(e..e, line);
        }
        Mutation::HugeNumber(p, k) => {
            let spots = after_each(bytes, b"\":");
            if let Some(&at) = spots.get(p % spots.len().max(1)) {
                let end = bytes[at..]
                    .iter()
                    .position(|c| !(c.is_ascii_digit() || *c == b'-' || *c == b'.'))
                    .map_or(n, |i| at + i);
                bytes.splice(at..end, HUGE[k].bytes());
            }
        }
        Mutation::DeepNesting(p, d) => {
            let spots = after_each(bytes, b"{");
            if let Some(&at) = spots.get(p % spots.len().max(1)) {
                let depth = DEPTHS[d];
                let mut v = b"\"deep\":".to_vec();
                v.extend(std::iter::repeat_n(b'[', depth));
                v.extend(std::iter::repeat_n(b']', depth));
                v.push(b',');
                bytes.splice(at..at, v);
            }
        }
        Mutation::InvalidUtf8(p, k) => {
            let at = p % n;
            bytes.splice(at..at, BAD_UTF8[k].iter().copied());
        }
    }
}

/// Import `bytes` with `import`; a clean import exports byte-identically and verifies, a failed
/// one leaves the store empty.
fn import_or_refuse(
    bytes: &[u8],
    import: impl Fn(
        &sessionlog::engine::Store,
        &[u8],
    ) -> sessionlog::engine::Result<sessionlog::engine::ImportReport>,
) -> Result<(), TestCaseError> {
    let (_tmp, store) = temp_store();
    match import(&store, bytes) {
        Ok(report) => {
            let mut out = Vec::new();
            store.export(&report.id, None, &mut out).map_err(|e| {
                TestCaseError::fail(format!("export after a clean import failed: {e}"))
            })?;
            prop_assert!(out == bytes, "export is not byte-identical");
            let v = store.verify(&[]).expect("verify");
            prop_assert!(v.problems.is_empty(), "{:?}", v.problems);
        }
        Err(e) => {
            prop_assert!(!e.to_string().is_empty());
            assert_empty(&store);
        }
    }
    Ok(())
}

#[test]
fn mutated_jsonl_imports_cleanly_or_is_refused() {
    let Some(c) = corpus() else { return };
    check(
        (0usize..10_000, prop::collection::vec(mutation(), 1..4)),
        |(file, muts)| {
            let mut bytes = c.jsonl[file % c.jsonl.len()].clone();
            for m in &muts {
                apply(&mut bytes, m, &c.jsonl);
            }
            import_or_refuse(&bytes, |store, b| {
                store.import_jsonl("mutated", b, &ImportOptions::default(), &mut |_| {})
            })
        },
    );
}

#[test]
fn mutated_zstd_imports_cleanly_or_is_refused() {
    let Some(c) = corpus() else { return };
    check(
        (0usize..10_000, prop::collection::vec(mutation(), 1..3)),
        |(file, muts)| {
            let mut bytes = c.zstd[file % c.zstd.len()].clone();
            for m in &muts {
                apply(&mut bytes, m, &c.zstd);
            }
            import_or_refuse(&bytes, |store, b| {
                store.import_zstd("mutated", b, &ImportOptions::default())
            })
        },
    );
}

/// Mutated corpus events through the JSON codec and the live append path. A case counts once
/// its mutated line parses and is an event: mutations the codec or the event rules refuse are
/// rejected (they only show that refusing does not panic), so every counted case appends.
#[test]
fn mutated_events_append_atomically_or_are_refused() {
    let Some(c) = corpus() else { return };
    check(
        (
            0usize..10_000,
            0usize..10_000,
            prop::collection::vec(mutation(), 1..3),
        ),
        |(file, line, muts)| mutated_event_appends_or_is_refused(c, file, line, &muts),
    );
}

fn mutated_event_appends_or_is_refused(
    c: &Corpus,
    file: usize,
    line: usize,
    muts: &[Mutation],
) -> Result<(), TestCaseError> {
    let source = &c.jsonl[file % c.jsonl.len()];
    let lines: Vec<&[u8]> = source
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .skip(1)
        .collect();
    let Some(&picked) = lines.get(line % lines.len().max(1)) else {
        return Err(TestCaseError::reject("a corpus file with no event line"));
    };
    let mut bytes = picked.to_vec();
    for m in muts {
        apply(&mut bytes, m, &c.jsonl);
    }
    let text = String::from_utf8_lossy(&bytes);
    // The codec: a parsed value stringifies to text that parses back to the same text.
    let value =
        json::parse(&text).map_err(|_| TestCaseError::reject("the mutated line is not JSON"))?;
    let once = json::stringify(&value);
    let again = json::parse(&once).map_err(|e| TestCaseError::fail(format!("reparse: {e}")))?;
    prop_assert_eq!(json::stringify(&again), once);
    // The append path: DSH's envelope keys only (seq is the store's to assign).
    let value = match value.as_object() {
        Some(o) => {
            let mut kept = json::Object::new();
            for (k, v) in o.iter().filter(|(k, _)| !k.eq_str("seq")) {
                kept.insert(k.clone(), v.clone());
            }
            json::Value::Object(kept)
        }
        None => value,
    };
    let event = NewEvent::from_value(&value)
        .map_err(|_| TestCaseError::reject("the mutated line is not an event"))?;
    let (_tmp, store) = temp_store();
    let header =
        r#"{"type":"session","version":0,"id":"m","createdAt":1,"cwd":"/w","delegationDepth":0}"#;
    store
        .create_session(header, SourceEncoding::Jsonl)
        .expect("create");
    let appended = store.append("m", Some(0), vec![event]);
    let events = crate::fixtures::events_text(&store, "m").expect("events");
    let mut exported = Vec::new();
    store.export("m", None, &mut exported).expect("export");
    match appended {
        Ok(r) => {
            prop_assert_eq!(events.lines().count() as u64, r.count);
            let head = format!("{header}\n");
            prop_assert!(exported.starts_with(head.as_bytes()));
            prop_assert!(exported.len() > header.len() + 1);
        }
        Err(e) => {
            prop_assert!(!e.to_string().is_empty());
            prop_assert!(events.is_empty(), "a refused batch left events");
            let head = format!("{header}\n");
            prop_assert_eq!(exported, head.into_bytes());
        }
    }
    let v = store.verify(&[]).expect("verify");
    prop_assert!(v.problems.is_empty(), "{:?}", v.problems);
    Ok(())
}

/// Generated V4 sessions (both encodings), the corpus of the V4 property.
fn v4_corpus() -> &'static [Vec<u8>] {
    static CORPUS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let opts = sessionlog_harness::gen::GenOptions {
            sessions: 4,
            events_per_session: 1_500,
            seed: 17,
            torn_fraction: 0.0,
        };
        let mut files = Vec::new();
        for i in 0..opts.sessions {
            let feed = sessionlog_harness::gen::session_batches_v4(i, &opts);
            let mut plain = feed.header_line.clone() + "\n";
            let mut frames =
                sessionlog::codec::format::zstd::compress_frame(plain.as_bytes()).expect("frame");
            for b in &feed.batches {
                plain += &b.text;
                frames.extend(
                    sessionlog::codec::format::zstd::compress_frame(b.text.as_bytes())
                        .expect("frame"),
                );
            }
            files.push(plain.into_bytes());
            files.push(frames);
        }
        files
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    /// Mutated V4 logs: a clean, byte-exact import (whose logical views answer or refuse, never
    /// panic) or a clear refusal that leaves the store empty.
    #[test]
    fn mutated_v4_logs_import_cleanly_or_are_refused(
        file in 0usize..10_000,
        muts in prop::collection::vec(mutation(), 1..4),
    ) {
        let corpus = v4_corpus();
        let mut bytes = corpus[file % corpus.len()].clone();
        for m in &muts {
            apply(&mut bytes, m, corpus);
        }
        import_or_refuse(&bytes, |store, b| {
            let options = ImportOptions::default();
            let report = if b.starts_with(&[0x28, 0xB5, 0x2F, 0xFD]) {
                store.import_zstd("mutated-v4", b, &options)?
            } else {
                store.import_jsonl("mutated-v4", b, &options, &mut |_| {})?
            };
            let _ = store.messages_at(&report.id, None);
            let _ = store.surface_at(&report.id, None);
            Ok(report)
        })?;
    }
}
