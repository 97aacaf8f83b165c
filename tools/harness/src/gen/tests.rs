//! Generator tests: determinism, DSH framing (header first, contiguous seqs, packed rows in both
//! layouts, surface rules), torn tails, and an end-to-end pass through the codec's JSON
//! round-trip and DSH body scanner.

use std::collections::BTreeMap;

use sessionlog_codec::format::chunk_rows::decode_record;
use sessionlog_codec::format::header::{parse_header, HeaderCheck};
use sessionlog_codec::json::{parse, stringify, Value};
use sessionlog_codec::rules::scanner::{BodyScanner, BodyVerdict, LineOutcome};

use super::*;

fn opts(sessions: u64, events: u64, seed: u64, torn: f64) -> GenOptions {
    GenOptions {
        sessions,
        events_per_session: events,
        seed,
        torn_fraction: torn,
    }
}

/// Complete lines (without `\n`) and the torn fragment, if any.
fn split(bytes: &[u8]) -> (Vec<&[u8]>, Option<&[u8]>) {
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let last = lines.pop().filter(|l| !l.is_empty());
    (lines, last)
}

fn parse_line(line: &[u8]) -> Value {
    let text = std::str::from_utf8(line).expect("generated lines are UTF-8");
    parse(text).unwrap_or_else(|e| panic!("unparsable line {e}: {text}"))
}

fn str_field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.as_object()
        .and_then(|o| o.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Every logical event of a session's complete body lines, in order.
fn events_of(bytes: &[u8]) -> Vec<Value> {
    let (lines, _) = split(bytes);
    lines[1..]
        .iter()
        .flat_map(|l| decode_record(parse_line(l)).expect("rows are well-formed"))
        .collect()
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let a = opts(3, 300, 42, 0.5);
    for i in 0..3 {
        assert_eq!(session_bytes(i, &a), session_bytes(i, &a), "session {i}");
    }
    assert_ne!(session_bytes(0, &a), session_bytes(1, &a));
    assert_ne!(
        session_bytes(0, &a),
        session_bytes(0, &opts(3, 300, 43, 0.5))
    );
}

#[test]
fn first_line_is_a_valid_header_with_the_session_id() {
    for i in 0..5 {
        let s = session(i, &opts(5, 100, 7, 0.0));
        let (lines, torn) = split(&s.bytes);
        assert!(torn.is_none());
        let header = parse_header(lines[0]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(header.check, HeaderCheck::Valid);
        assert!(header.id.eq_str(&s.id));
    }
}

#[test]
fn seqs_are_contiguous_and_events_counted() {
    for i in 0..4 {
        let s = session(i, &opts(4, 800, 3, 0.0));
        let events = events_of(&s.bytes);
        assert_eq!(events.len() as u64, s.events);
        for (k, e) in events.iter().enumerate() {
            let seq = e
                .as_object()
                .and_then(|o| o.get("seq"))
                .and_then(Value::as_safe_integer);
            assert_eq!(seq, Some(k as i64), "session {i} event {k}");
        }
    }
}

#[test]
fn lengths_vary_around_the_requested_mean() {
    let o = opts(20, 2_000, 11, 0.0);
    let counts: Vec<u64> = (0..20).map(|i| session(i, &o).events).collect();
    assert!(
        counts.iter().all(|&n| (700..=3_800).contains(&n)),
        "{counts:?}"
    );
    assert!(counts.iter().min() != counts.iter().max());
    let mean = counts.iter().sum::<u64>() / 20;
    assert!((1_600..=2_500).contains(&mean), "mean {mean}: {counts:?}");
}

#[test]
fn packing_produces_rows_and_loose_deltas() {
    let o = opts(4, 2_000, 5, 0.0);
    let mut tags: BTreeMap<String, usize> = BTreeMap::new();
    let mut loose_deltas = 0;
    for i in 0..4 {
        let bytes = session_bytes(i, &o);
        let (lines, _) = split(&bytes);
        for line in &lines[1..] {
            let v = parse_line(line);
            let tag = str_field(&v, "type").to_owned();
            if tag == "assistant/chunk" {
                let chunk = v
                    .as_object()
                    .and_then(|o| o.get("data"))
                    .and_then(|d| d.as_object()?.get("chunk"));
                if chunk.is_some_and(|c| str_field(c, "type").ends_with("-delta")) {
                    loose_deltas += 1;
                }
            }
            *tags.entry(tag).or_default() += 1;
        }
    }
    for tag in ["text-chunks", "reasoning-chunks", "tool-call-chunks"] {
        assert!(
            tags.get(tag).copied().unwrap_or(0) > 0,
            "no {tag} rows: {tags:?}"
        );
    }
    assert!(
        loose_deltas > 0,
        "batch boundaries must leave some deltas unpacked"
    );
    for ty in [
        "turn/start",
        "turn/end",
        "step/start",
        "step/end",
        "request/header",
        "request/context",
        "user/message",
        "assistant/message",
        "tool/call",
        "tool/result",
        "session/title",
    ] {
        assert!(tags.contains_key(ty), "no {ty}: {tags:?}");
    }
}

#[test]
fn surface_rules_hold_and_replacements_appear() {
    let o = opts(12, 2_000, 9, 0.0);
    let mut replaced: BTreeMap<String, usize> = BTreeMap::new();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..12 {
        let events = events_of(&session_bytes(i, &o));
        let mut nodes: Vec<i64> = Vec::new();
        for e in &events {
            let o = e.as_object().expect("events are objects");
            let ty = str_field(e, "type");
            let keys: Vec<String> = o.iter().map(|(k, _)| k.to_string()).collect();
            let surface = matches!(ty, "user/message" | "assistant/message" | "tool/result");
            assert_eq!(keys[..4], ["type", "seq", "time", "data"]);
            if ty == "turn/end" {
                let reason = o
                    .get("data")
                    .and_then(|d| d.as_object()?.get("reason"))
                    .expect("reason");
                *reasons
                    .entry(str_field(reason, "kind").to_owned())
                    .or_default() += 1;
            }
            if !surface {
                assert_eq!(keys.len(), 4, "{ty} carries surface metadata");
                continue;
            }
            let seq = o.get("seq").and_then(Value::as_safe_integer).expect("seq");
            let sources: Vec<i64> = o
                .get("sourceEventSeqs")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_safe_integer).collect())
                .unwrap_or_default();
            assert!(
                sources.iter().all(|&s| s < seq),
                "seq {seq} cites a later event"
            );
            match o.get("surfaceOp") {
                Some(op) if op.as_str() == Some("append") => nodes.push(seq),
                Some(Value::Object(op)) => {
                    let start = op
                        .get("start")
                        .and_then(Value::as_safe_integer)
                        .expect("start");
                    let end = op.get("end").and_then(Value::as_safe_integer).expect("end");
                    let a = nodes
                        .iter()
                        .position(|&n| n == start)
                        .expect("start is current");
                    let b = nodes
                        .iter()
                        .position(|&n| n == end)
                        .expect("end is current");
                    assert!(a <= b);
                    assert!(
                        nodes[a..=b].iter().all(|n| sources.contains(n)),
                        "seq {seq} misses shadowed nodes"
                    );
                    nodes.splice(a..=b, [seq]);
                    *replaced.entry(ty.to_owned()).or_default() += 1;
                }
                other => panic!("bad surfaceOp {other:?} at seq {seq}"),
            }
        }
    }
    assert!(
        replaced.contains_key("user/message"),
        "no compaction: {replaced:?}"
    );
    assert!(
        replaced.contains_key("tool/result"),
        "no pruning: {replaced:?}"
    );
    assert!(
        reasons.contains_key("completed") && reasons.len() > 1,
        "{reasons:?}"
    );
}

#[test]
fn batch_writer_equals_whole_batch_packing() {
    use sessionlog_codec::format::chunk_rows::pack_chunk_runs;
    let events = events_of(&session_bytes(2, &opts(3, 1_500, 17, 0.0)));
    let mut rng = rng::Rng::new(1, 1);
    let mut at = 0;
    while at < events.len() {
        let end = (at + 1 + rng.index(80)).min(events.len());
        let batch = &events[at..end];
        let mut ours = String::new();
        session::write_batch(batch, &mut ours);
        let reference: String = pack_chunk_runs(batch)
            .iter()
            .map(|r| stringify(r) + "\n")
            .collect();
        assert_eq!(ours, reference, "batch {at}..{end}");
        at = end;
    }
}

#[test]
fn torn_fraction_is_honoured() {
    let none = opts(50, 50, 1, 0.0);
    assert!((0..50).all(|i| !session(i, &none).torn));
    let all = opts(20, 50, 1, 1.0);
    for i in 0..20 {
        let s = session(i, &all);
        assert!(s.torn && !s.bytes.ends_with(b"\n"));
        let (_, fragment) = split(&s.bytes);
        assert!(fragment.is_some_and(|f| !f.is_empty()));
    }
    let some = opts(400, 20, 1, 0.1);
    let torn = (0..400).filter(|&i| session(i, &some).torn).count();
    assert!((15..=70).contains(&torn), "{torn} of 400 torn at 0.1");
}

#[test]
fn tearing_keeps_the_untorn_prefix() {
    let clean = session_bytes(3, &opts(5, 200, 8, 0.0));
    let torn = session_bytes(3, &opts(5, 200, 8, 1.0));
    assert!(torn.len() < clean.len() && clean.starts_with(&torn));
}

#[test]
fn every_line_round_trips_and_the_scanner_agrees() {
    let o = opts(16, 600, 21, 0.25);
    let mut torn_seen = 0;
    for i in 0..16 {
        let s = session(i, &o);
        let (lines, fragment) = split(&s.bytes);
        for line in &lines {
            let text = std::str::from_utf8(line).expect("UTF-8");
            assert_eq!(stringify(&parse_line(line)), text);
        }
        let header_len = lines[0].len() as u64 + 1;
        let mut scanner = BodyScanner::new(header_len);
        let mut end = header_len;
        for line in &lines[1..] {
            end += line.len() as u64 + 1;
            let outcome = scanner.push_line(line, end).expect("scannable");
            assert!(
                matches!(outcome, LineOutcome::Committed(_)),
                "session {i}: line rejected"
            );
        }
        let verdict = scanner.finish(s.bytes.len() as u64);
        if s.torn {
            torn_seen += 1;
            assert!(fragment.is_some());
            assert_eq!(verdict, BodyVerdict::Torn, "session {i}");
        } else {
            assert_eq!(verdict, BodyVerdict::Clean, "session {i}");
            assert_eq!(scanner.events(), s.events);
        }
    }
    assert!(torn_seen > 0);
}

#[test]
fn generate_writes_files_named_by_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = opts(3, 100, 4, 0.0);
    let report = generate(dir.path(), &o).expect("generate");
    assert_eq!(report.files, 3);
    let mut total = 0;
    for i in 0..3 {
        let s = session(i, &o);
        let on_disk = std::fs::read(dir.path().join(format!("{}.jsonl", s.id))).expect("file");
        assert_eq!(on_disk, s.bytes);
        total += on_disk.len() as u64;
    }
    assert_eq!(report.bytes, total);
    assert!(generate(dir.path(), &opts(1, 1, 0, 1.5)).is_err());
}

/// Throughput probe: `cargo test --release -p sessionlog-harness --lib -- --ignored --nocapture`.
#[test]
#[ignore = "timing probe, not a check"]
fn generation_speed() {
    let o = GenOptions {
        sessions: 100,
        ..GenOptions::default()
    };
    let start = std::time::Instant::now();
    let bytes: usize = (0..o.sessions).map(|i| session_bytes(i, &o).len()).sum();
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{bytes} bytes in {secs:.3}s = {:.1} MB/s",
        bytes as f64 / secs / 1e6
    );
}

#[test]
fn feed_reproduces_session_bytes() {
    let o = opts(4, 400, 9, 0.0);
    for i in 0..4 {
        let feed = session_batches(i, &o);
        let mut text = format!("{}\n", feed.header_line);
        let mut next_seq = 0;
        for batch in &feed.batches {
            assert_eq!(batch.first_seq, next_seq, "session {i}: contiguous batches");
            assert!(!batch.events.is_empty(), "session {i}: no empty batch");
            next_seq += batch.events.len() as u64;
            text.push_str(&batch.text);
        }
        let file = session(i, &o);
        assert_eq!(feed.id, file.id);
        assert_eq!(next_seq, file.events);
        assert_eq!(text.as_bytes(), &file.bytes[..], "session {i}: bytes");
        let events: Vec<Value> = feed.batches.iter().flat_map(|b| b.events.clone()).collect();
        assert_eq!(events, events_of(&file.bytes), "session {i}: events");
    }
}

#[test]
fn feed_header_for_another_id_changes_only_the_id() {
    let feed = session_batches(0, &opts(1, 100, 3, 0.0));
    let line = feed.header_line_for("other-id");
    assert_eq!(line, feed.header_line.replacen(&feed.id, "other-id", 1));
    let header = parse_header(line.as_bytes()).expect("still a header");
    assert_eq!(header.check, HeaderCheck::Valid);
}
