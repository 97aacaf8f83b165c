//! The session index against an oracle: for generated stores (imported V0 sessions, some torn,
//! one migrated to V4, a fork, an append, a deletion), every filter's result set equals a
//! brute-force scan of every session's events, paged through a few sessions at a time; and
//! every word and two-word phrase picked from a message is found in exactly the messages
//! (session, seq) whose text holds it. And the CLI's `search --json` prints the engine's page.

use std::collections::{BTreeMap, BTreeSet};

use sessionlog::codec::json::Value;
use sessionlog::engine::{MigrateOptions, SearchQuery, Store};
use sessionlog_harness::gen::{session, GenOptions};

use crate::fixtures::{all_events, ev, import_bytes, temp_store};

/// What the oracle reads of one session, by scanning its events.
#[derive(Debug, Default)]
struct Scan {
    tools: BTreeSet<String>,
    tool_errors: BTreeSet<String>,
    models: BTreeSet<String>,
    open: bool,
    created: i64,
    last_event: i64,
    tokens: u64,
    verdict: String,
    parent: Option<String>,
    /// seq → the message's tokens.
    messages: BTreeMap<u64, Vec<String>>,
}

fn obj<'a>(v: &'a Value, k: &str) -> Option<&'a Value> {
    v.as_object()?.get(k)
}

fn s(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(str::to_owned)
}

/// Every `text` string under `v`, in order.
fn texts(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Array(a) => a.iter().for_each(|i| texts(i, out)),
        Value::Object(o) => {
            for (k, value) in o.iter() {
                match value {
                    Value::String(t) if k.eq_str("text") => out.push(t.to_string_lossy()),
                    Value::Array(_) | Value::Object(_) => texts(value, out),
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// Words as a full-text engine splits them: runs of letters and digits, lowercased.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.chars().flat_map(char::to_lowercase).collect())
        .collect()
}

/// Tool-call and tool-result blocks under `v`.
fn blocks(v: &Value, calls: &mut BTreeMap<String, String>, scan: &mut Scan) {
    match v {
        Value::Array(a) => a.iter().for_each(|i| blocks(i, calls, scan)),
        Value::Object(o) => {
            match s(o.get("type")).as_deref() {
                Some("tool-call") => {
                    if let Some(name) = s(o.get("toolName")).or_else(|| s(o.get("name"))) {
                        if let Some(id) = s(o.get("toolCallId")) {
                            calls.insert(id, name.clone());
                        }
                        scan.tools.insert(name);
                    }
                }
                Some("tool-result") if o.get("isError") == Some(&Value::Bool(true)) => {
                    let name = s(o.get("toolCallId"))
                        .and_then(|c| calls.get(&c).cloned())
                        .or_else(|| s(o.get("toolName")))
                        .unwrap_or_else(|| "?".into());
                    scan.tool_errors.insert(name);
                }
                _ => {}
            }
            for (_, value) in o.iter() {
                if matches!(value, Value::Array(_) | Value::Object(_)) {
                    blocks(value, calls, scan);
                }
            }
        }
        _ => {}
    }
}

fn model(o: &Value, scan: &mut Scan) {
    let provider = s(obj(o, "provider"));
    if let Some(m) = s(obj(o, "model")) {
        if let Some(p) = &provider {
            scan.models.insert(format!("{p}/{m}"));
        }
        scan.models.insert(m);
    }
}

fn scan(store: &Store, id: &str) -> Scan {
    let summary = store.summary(id).expect("summary");
    let mut scan = Scan {
        created: summary.created_at.unwrap_or(i64::MIN),
        verdict: serde_verdict(&summary),
        parent: store.lineage(id).expect("lineage")[0].parent.clone(),
        ..Scan::default()
    };
    scan.last_event = scan.created;
    let mut calls = BTreeMap::new();
    for (seq, e) in all_events(store, id).iter().enumerate() {
        let ty = s(obj(e, "type")).unwrap_or_default();
        if let Some(t) = obj(e, "time").and_then(Value::as_f64) {
            scan.last_event = t as i64;
        }
        let Some(data) = obj(e, "data") else { continue };
        match ty.as_str() {
            "turn/start" => scan.open = true,
            "turn/end" => scan.open = false,
            "tool/call" => {
                if let Some(name) = s(obj(data, "name")).or_else(|| s(obj(data, "toolName"))) {
                    if let Some(c) = s(obj(data, "callId")) {
                        calls.insert(c, name.clone());
                    }
                    scan.tools.insert(name);
                }
            }
            "request/header" => {
                if let Some(config) = obj(data, "header").and_then(|h| obj(h, "config")) {
                    model(config, &mut scan);
                }
            }
            _ => {}
        }
        if let Some(source) = obj(data, "message").and_then(|m| obj(m, "source")) {
            if s(obj(source, "kind")).as_deref() == Some("model") {
                model(source, &mut scan);
            }
        }
        let mut text = Vec::new();
        for key in ["content", "message"] {
            if let Some(v) = obj(data, key) {
                blocks(v, &mut calls, &mut scan);
                texts(v, &mut text);
            }
        }
        if matches!(
            ty.as_str(),
            "user/message" | "assistant/message" | "tool/result"
        ) && !text.is_empty()
        {
            scan.messages.insert(seq as u64, words(&text.join("\n")));
        }
    }
    let usage = store
        .state_at(id, "tokenUsage", None)
        .unwrap_or(Value::Null);
    scan.tokens = [
        "uncachedInputTokens",
        "outputTokens",
        "cacheReadTokens",
        "cacheWriteTokens",
    ]
    .iter()
    .map(|k| obj(&usage, k).and_then(Value::as_f64).unwrap_or(0.0) as u64)
    .sum();
    scan
}

fn serde_verdict(summary: &sessionlog::engine::SessionSummary) -> String {
    let rendered = serde_json_verdict(summary);
    rendered.split(':').next().unwrap_or_default().to_owned()
}

fn serde_json_verdict(summary: &sessionlog::engine::SessionSummary) -> String {
    match &summary.verdict {
        sessionlog::engine::Verdict::Clean => "clean".into(),
        sessionlog::engine::Verdict::Torn => "torn".into(),
        sessionlog::engine::Verdict::Corrupt(_) => "corrupt".into(),
        sessionlog::engine::Verdict::Unsupported(_) => "unsupported".into(),
    }
}

/// Every (session, seq) a query finds, paging `limit` sessions at a time.
fn found(store: &Store, query: &SearchQuery, limit: usize) -> BTreeSet<(String, u64)> {
    let mut q = SearchQuery {
        limit,
        max_matches: usize::MAX,
        ..query.clone()
    };
    let mut out = BTreeSet::new();
    let mut sessions = BTreeSet::new();
    loop {
        let page = store.search(&q).expect("search");
        for hit in page.sessions {
            assert!(sessions.insert(hit.row.id.clone()), "{} twice", hit.row.id);
            assert_eq!(hit.match_count as usize, hit.matches.len());
            out.insert((hit.row.id.clone(), u64::MAX));
            for m in hit.matches {
                out.insert((hit.row.id.clone(), m.seq));
            }
        }
        match page.next {
            Some(next) => q.after = Some(next),
            None => return out,
        }
    }
}

fn session_ids(found: &BTreeSet<(String, u64)>) -> BTreeSet<String> {
    found.iter().map(|(id, _)| id.clone()).collect()
}

/// A store of generated sessions, changed the ways a host changes one.
fn generated(seed: u64) -> (tempfile::TempDir, Store) {
    let (dir, store) = temp_store();
    let opts = GenOptions {
        sessions: 8,
        events_per_session: 150,
        seed,
        torn_fraction: 0.25,
    };
    let mut ids = Vec::new();
    for i in 0..opts.sessions {
        let s = session(i, &opts);
        import_bytes(&store, &format!("{}.jsonl", s.id), &s.bytes, false).expect("import");
        ids.push(s.id);
    }
    let clean: Vec<&String> = ids
        .iter()
        .filter(|id| {
            store
                .summary(id)
                .is_ok_and(|s| s.verdict == sessionlog::engine::Verdict::Clean)
        })
        .collect();
    // Searched once before the changes, so they are followed, not only rebuilt.
    store.search(&SearchQuery::default()).expect("search");
    if let [first, second, third, ..] = clean.as_slice() {
        store.fork(first, None, "fork-of-first").expect("fork");
        let next = store.summary(second).expect("summary").events;
        let line = r#"{"type":"user/message","time":99999999999999,"data":{"content":[{"type":"text","text":"quokka rate limit"}],"source":{"kind":"user"},"role":"user","id":"u-x"},"surfaceOp":"append"}"#;
        store
            .append(second, Some(next), vec![ev(line)])
            .expect("append");
        store
            .migrate(third, &MigrateOptions::default())
            .expect("migrate");
    }
    store.delete(&ids[ids.len() - 1]).expect("delete");
    (dir, store)
}

#[test]
fn filters_equal_a_brute_force_scan_and_every_word_is_found_at_its_seq() {
    for seed in [1, 2] {
        let (_dir, store) = generated(seed);
        let scans: BTreeMap<String, Scan> = store
            .list()
            .expect("list")
            .into_iter()
            .filter(|s| s.deleted_at_ms.is_none())
            .map(|s| (s.id.clone(), scan(&store, &s.id)))
            .collect();
        let expect = |pred: &dyn Fn(&Scan) -> bool| -> BTreeSet<String> {
            scans
                .iter()
                .filter(|(_, s)| pred(s))
                .map(|(id, _)| id.clone())
                .collect()
        };
        let check = |query: SearchQuery, want: BTreeSet<String>| {
            let got = session_ids(&found(&store, &query, 3));
            assert_eq!(got, want, "seed {seed}: {query:?}");
        };
        check(SearchQuery::default(), expect(&|_| true));
        let all_tools: BTreeSet<String> = scans.values().flat_map(|s| s.tools.clone()).collect();
        assert!(!all_tools.is_empty());
        for tool in &all_tools {
            let t = tool.clone();
            check(
                SearchQuery {
                    tool: Some(tool.clone()),
                    ..SearchQuery::default()
                },
                expect(&|s| s.tools.contains(&t)),
            );
            check(
                SearchQuery {
                    tool: Some(tool.clone()),
                    tool_error: true,
                    ..SearchQuery::default()
                },
                expect(&|s| s.tool_errors.contains(&t)),
            );
        }
        check(
            SearchQuery {
                tool_error: true,
                ..SearchQuery::default()
            },
            expect(&|s| !s.tool_errors.is_empty()),
        );
        for m in scans
            .values()
            .flat_map(|s| s.models.clone())
            .collect::<BTreeSet<_>>()
        {
            let q = SearchQuery {
                model: Some(m.clone()),
                ..SearchQuery::default()
            };
            check(q, expect(&|s| s.models.contains(&m)));
        }
        let mut tokens: Vec<u64> = scans.values().map(|s| s.tokens).collect();
        tokens.sort_unstable();
        let median = tokens[tokens.len() / 2];
        check(
            SearchQuery {
                min_tokens: Some(median),
                ..SearchQuery::default()
            },
            expect(&|s| s.tokens >= median),
        );
        check(
            SearchQuery {
                open: true,
                ..SearchQuery::default()
            },
            expect(&|s| s.open),
        );
        for v in ["clean", "torn"] {
            check(
                SearchQuery {
                    verdict: Some(v.into()),
                    ..SearchQuery::default()
                },
                expect(&|s| s.verdict == v),
            );
        }
        for (id, s) in &scans {
            if let Some(parent) = &s.parent {
                let q = SearchQuery {
                    parent: Some(parent.clone()),
                    ..SearchQuery::default()
                };
                check(q, BTreeSet::from([id.clone()]));
            }
        }
        let mut lasts: Vec<i64> = scans.values().map(|s| s.last_event).collect();
        lasts.sort_unstable();
        let t = lasts[lasts.len() / 2];
        let window = SearchQuery {
            since_ms: Some(t),
            until_ms: Some(t + 86_400_000),
            tool_error: true,
            ..SearchQuery::default()
        };
        check(
            window,
            expect(&|s| {
                s.last_event >= t && s.created <= t + 86_400_000 && !s.tool_errors.is_empty()
            }),
        );
        // Words and phrases: picked from messages, found in exactly the messages holding them.
        let mut rng = seed;
        let mut next = |n: usize| {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (rng >> 33) as usize % n.max(1)
        };
        let messages: Vec<(&String, &u64, &Vec<String>)> = scans
            .iter()
            .flat_map(|(id, s)| s.messages.iter().map(move |(seq, w)| (id, seq, w)))
            .filter(|(_, _, w)| !w.is_empty())
            .collect();
        for pick in 0..40 {
            let (_, _, w) = messages[next(messages.len())];
            let at = next(w.len());
            let phrase: Vec<String> = match pick % 2 {
                0 => vec![w[at].clone()],
                _ => w[at..(at + 2).min(w.len())].to_vec(),
            };
            if phrase
                .iter()
                .any(|p| p.len() >= 40 || p == "and" || p == "or" || p == "not")
            {
                continue;
            }
            let want: BTreeSet<(String, u64)> = scans
                .iter()
                .flat_map(|(id, s)| {
                    s.messages
                        .iter()
                        .filter(|(_, words)| {
                            words
                                .windows(phrase.len())
                                .any(|win| win == phrase.as_slice())
                        })
                        .flat_map(move |(seq, _)| [(id.clone(), *seq), (id.clone(), u64::MAX)])
                })
                .collect();
            let text = format!("\"{}\"", phrase.join(" "));
            let got = found(
                &store,
                &SearchQuery {
                    text: Some(text.clone()),
                    ..SearchQuery::default()
                },
                4,
            );
            assert_eq!(got, want, "seed {seed}: {text}");
        }
        let report = store.verify(&[]).expect("verify");
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }
}

/// A reader beside the store's holder (a secondary instance) follows the holder's change log
/// as it catches up: its answers count the changes the holder's index has not covered yet
/// (`behind`), and find what the holder indexed after the reader opened.
#[test]
fn a_reader_beside_the_holder_follows_its_change_log_after_catching_up() {
    let (dir, store) = temp_store();
    let opts = GenOptions {
        sessions: 1,
        events_per_session: 40,
        seed: 3,
        torn_fraction: 0.0,
    };
    let s = session(0, &opts);
    import_bytes(&store, &format!("{}.jsonl", s.id), &s.bytes, false).expect("import");
    let indexed = store.search(&SearchQuery::default()).expect("search");
    let reader = Store::open_beside(dir.path().join("db"), Default::default()).expect("reader");
    assert!(reader.is_secondary());
    let first = reader
        .search(&SearchQuery::default())
        .expect("reader search");
    assert_eq!(first.watermark, indexed.watermark);
    assert_eq!(first.watermark.behind, 0);

    let next = store.summary(&s.id).expect("summary").events;
    let line = r#"{"type":"user/message","time":99999999999999,"data":{"content":[{"type":"text","text":"quokka rate limit"}],"source":{"kind":"user"},"role":"user","id":"u-x"},"surfaceOp":"append"}"#;
    store
        .append(&s.id, Some(next), vec![ev(line)])
        .expect("append");
    reader.catch_up().expect("catch up");
    let stale = reader
        .search(&SearchQuery::default())
        .expect("reader search");
    assert_eq!(stale.watermark.position, indexed.watermark.position);
    assert_eq!(
        stale.watermark.behind, 1,
        "the holder's append is not indexed yet"
    );

    let quokka = SearchQuery {
        text: Some("quokka".into()),
        ..SearchQuery::default()
    };
    let holder = store.search(&quokka).expect("search");
    reader.catch_up().expect("catch up");
    let fresh = reader.search(&quokka).expect("reader search");
    assert_eq!(fresh.watermark, holder.watermark);
    assert_eq!(fresh.watermark.position, indexed.watermark.position + 1);
    let hits: Vec<(&str, Vec<u64>)> = fresh
        .sessions
        .iter()
        .map(|h| (h.row.id.as_str(), h.matches.iter().map(|m| m.seq).collect()))
        .collect();
    assert_eq!(hits, [(s.id.as_str(), vec![next])]);
}
