//! Scenario: the indexing skim (`json::skim`) against the full parser (`json::parse` over the
//! line decoded as Node decodes it), line by line: the same verdict (accepted, a syntax error,
//! too deep) on every line, and on every accepted object line the skim indexes, the same members
//! in the same order at each indexed level (top, `data`, `data.message`) with the same values.
//!
//! Lines: every line of the DSH fixtures and mutated copies of them; DSH-shaped events; random
//! JSON texts (escapes, lone surrogate escapes, duplicate, escaped and index-like keys, huge, odd
//! and misspelled numbers, odd whitespace); nesting around the depth limit; and mutations of all of these
//! (bytes that are not UTF-8, control bytes, structural bytes inserted, replaced, deleted,
//! truncated). The default run checks a few ten thousand lines; the ignored test checks
//! `SKIM_ORACLE_LINES` (default 1,000,000):
//! `cargo test --release --workspace --test skim_oracle -- --ignored`.
//! The seed is fixed; set `SKIM_ORACLE_SEED` to explore others.

mod common;
mod rng;

use rng::Rng;
use sessionlog_codec::json::skim::{skim, Envelope, Kind, Level, Rejected, Skim, Span};
use sessionlog_codec::json::{parse, Object, Value, MAX_DEPTH};

/// One chance in `one_in`.
fn chance(rng: &mut Rng, one_in: usize) -> bool {
    rng.below(one_in) == 0
}

/// What the checks counted, for the run's closing line.
#[derive(Default, Debug)]
struct Tally {
    lines: u64,
    indexed: u64,
    unusual: u64,
    syntax: u64,
    too_deep: u64,
}

const STRINGS: &[&str] = &[
    "",
    "text",
    "user",
    "assistant",
    "caf\u{e9}",
    "\u{1F600} emoji",
    "line\\nbreak",
    "quote \\\" inside",
    "slash \\/ and \\\\",
    "\\u00e9\\u0041",
    "\\ud83d\\ude00",
    "lone \\ud800 high",
    "lone \\udc00 low",
    "pair reversed \\udc00\\ud800",
    "\\b\\f\\r\\t",
    "tab\there",
    "\u{7f} del",
    "\u{2028}\u{2029}",
];

const KEYS: &[&str] = &[
    "type",
    "seq",
    "time",
    "data",
    "message",
    "content",
    "role",
    "usage",
    "surfaceOp",
    "sourceEventSeqs",
    "id",
    "text",
    "a",
    "b",
    "",
];

const ODD_KEYS: &[&str] = &[
    "0",
    "1",
    "42",
    "007",
    "4294967294",
    "4294967295",
    "-1",
    "d\\u0061ta",
    "typ\\u0065",
    "caf\u{e9}",
    "\\ud800",
];

const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "42",
    "1.5",
    "-0.0",
    "1e400",
    "-1e400",
    "1e-400",
    "5e-324",
    "1.7976931348623157e308",
    "123456789012345678901234567890",
    "9007199254740993",
    "0.1e+5",
    "2E-3",
    "1734567890123",
    "100000000000000000000000000000000000000000000000000000000000e-50",
];

/// Spellings `JSON.parse` refuses (or JS's literals it does not know).
const BAD_NUMBERS: &[&str] = &[
    "01", "-01", "00", "-", "1.", ".5", "1e", "1e+", "+1", "0x10", "1.e5", "-.5", "Infinity",
    "NaN", "- 1", "1_000",
];

fn string(rng: &mut Rng, out: &mut Vec<u8>) {
    out.push(b'"');
    for _ in 0..1 + rng.below(2) {
        out.extend_from_slice(rng.pick(STRINGS).as_bytes());
    }
    out.push(b'"');
}

fn ws(rng: &mut Rng, out: &mut Vec<u8>) {
    if chance(rng, 6) {
        out.extend_from_slice(rng.pick(&[" ", "\t", "\r\n", "  ", "\n"]).as_bytes());
    }
}

/// A random JSON text of at most `depth` more levels.
fn value(rng: &mut Rng, depth: u32, out: &mut Vec<u8>) {
    ws(rng, out);
    match rng.below(if depth == 0 { 5 } else { 8 }) {
        0 => string(rng, out),
        1 if chance(rng, 12) => out.extend_from_slice(rng.pick(BAD_NUMBERS).as_bytes()),
        1 => out.extend_from_slice(rng.pick(NUMBERS).as_bytes()),
        2 => out.extend_from_slice(rng.pick(&["true", "false", "null"]).as_bytes()),
        3 | 4 => string(rng, out),
        5 => {
            out.push(b'[');
            for i in 0..rng.below(4) {
                if i > 0 {
                    out.push(b',');
                }
                value(rng, depth - 1, out);
            }
            ws(rng, out);
            out.push(b']');
        }
        _ => object(rng, depth - 1, out),
    }
    ws(rng, out);
}

fn object(rng: &mut Rng, depth: u32, out: &mut Vec<u8>) {
    out.push(b'{');
    let n = rng.below(6);
    for i in 0..n {
        if i > 0 {
            out.push(b',');
        }
        ws(rng, out);
        out.push(b'"');
        let key = if chance(rng, 8) {
            rng.pick(ODD_KEYS)
        } else {
            rng.pick(KEYS)
        };
        out.extend_from_slice(key.as_bytes());
        out.push(b'"');
        ws(rng, out);
        out.push(b':');
        value(rng, depth, out);
    }
    ws(rng, out);
    out.push(b'}');
}

/// A DSH-shaped event: the envelope the import's folds read, in varying order and content.
fn event(rng: &mut Rng, out: &mut Vec<u8>) {
    let mut members: Vec<Vec<u8>> = Vec::new();
    let ty = rng.pick(&[
        "user/message",
        "assistant/message",
        "tool/result",
        "turn/start",
        "turn/end",
        "assistant/chunk",
        "session/end-seed",
    ]);
    members.push(format!(r#""type":"{ty}""#).into_bytes());
    members.push(format!(r#""seq":{}"#, rng.below(100_000)).into_bytes());
    members.push(
        format!(
            r#""time":{}"#,
            1_700_000_000_000u64 + rng.next() % 1_000_000
        )
        .into_bytes(),
    );
    if chance(rng, 2) {
        let op = rng.pick(&["append", "replace", "none"]);
        members.push(format!(r#""surfaceOp":"{op}""#).into_bytes());
    }
    if chance(rng, 4) {
        members.push(br#""sourceEventSeqs":[1,2,[3,9],12]"#.to_vec());
    }
    let mut data = b"\"data\":{".to_vec();
    let mut parts: Vec<Vec<u8>> = Vec::new();
    if chance(rng, 2) {
        let mut m = b"\"message\":{\"role\":\"assistant\",\"content\":[".to_vec();
        for i in 0..rng.below(4) {
            if i > 0 {
                m.push(b',');
            }
            m.extend_from_slice(b"{\"type\":\"text\",\"text\":");
            string(rng, &mut m);
            m.push(b'}');
        }
        m.extend_from_slice(b"],\"usage\":{\"inputTokens\":12,\"outputTokens\":3}");
        if chance(rng, 3) {
            m.extend_from_slice(b",\"extra\":");
            value(rng, 3, &mut m);
        }
        m.push(b'}');
        parts.push(m);
    }
    if chance(rng, 2) {
        let mut p = b"\"payload\":".to_vec();
        value(rng, 4, &mut p);
        parts.push(p);
    }
    if chance(rng, 3) {
        let kind = rng.pick(&["text-delta", "usage", "tool-call-delta"]);
        let mut c = format!(r#""chunk":{{"type":"{kind}","index":0,"text":"#).into_bytes();
        string(rng, &mut c);
        if chance(rng, 3) {
            c.extend_from_slice(b",\"usage\":");
            value(rng, 3, &mut c);
        }
        c.push(b'}');
        parts.push(c);
    }
    if chance(rng, 3) {
        parts.push(b"\"turn\":3".to_vec());
    }
    shuffle(rng, &mut parts);
    data.extend(parts.join(&b","[..]));
    data.push(b'}');
    members.push(data);
    shuffle(rng, &mut members);
    out.push(b'{');
    out.extend(members.join(&b","[..]));
    out.push(b'}');
}

fn shuffle<T>(rng: &mut Rng, items: &mut [T]) {
    for i in (1..items.len()).rev() {
        items.swap(i, rng.below(i + 1));
    }
}

/// Nesting of `depth` containers around a value, closed or (sometimes) not.
fn nested(rng: &mut Rng, out: &mut Vec<u8>) {
    let depth = MAX_DEPTH - 2 + rng.below(5);
    let objects = chance(rng, 2);
    for _ in 0..depth {
        out.extend_from_slice(if objects { b"{\"data\":" } else { b"[" });
    }
    out.extend_from_slice(b"1");
    let closing = if chance(rng, 4) { depth / 2 } else { depth };
    for _ in 0..closing {
        out.push(if objects { b'}' } else { b']' });
    }
}

/// Replace, insert or delete a few bytes, or truncate.
fn mutate(rng: &mut Rng, line: &mut Vec<u8>) {
    const BYTES: &[u8] = &[
        0xFF, 0xC3, 0x80, 0xE2, 0xED, 0xA0, b'"', b'\\', b'{', b'}', b'[', b']', b',', b':', b' ',
        0x00, 0x1F, 0x7F, b'e', b'-', b'.', b'0', b'u', b'n', b'\n', b'\t',
    ];
    for _ in 0..1 + rng.below(3) {
        if line.is_empty() {
            line.push(rng.pick(BYTES));
            continue;
        }
        let at = rng.below(line.len());
        match rng.below(4) {
            0 => line[at] = rng.pick(BYTES),
            1 => line.insert(at, rng.pick(BYTES)),
            2 => {
                line.remove(at);
            }
            _ => line.truncate(at),
        }
    }
}

/// The full parser's verdict, as Node reads the line.
fn full(line: &[u8]) -> Result<Value, Rejected> {
    match parse(&String::from_utf8_lossy(line)) {
        Ok(v) => Ok(v),
        Err(sessionlog_codec::Error::TooDeep { .. }) => Err(Rejected::TooDeep),
        Err(_) => Err(Rejected::Syntax),
    }
}

/// Equal as JS values, numbers bit for bit (`-0` is not `0`).
fn identical(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.to_bits() == y.to_bits(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| identical(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|((ka, a), (kb, b))| ka == kb && identical(a, b))
        }
        _ => a == b,
    }
}

/// The skim's members at `level` against the full parser's object `object`.
fn check_level(env: &Envelope<'_>, level: Level, object: &Object, label: &str) {
    let members: Vec<(&str, &Span)> = env.members(level).collect();
    let keys: Vec<&str> = members.iter().map(|(k, _)| *k).collect();
    let full_keys: Vec<String> = object.iter().map(|(k, _)| k.to_string_lossy()).collect();
    assert_eq!(keys, full_keys, "{label}: {level:?} keys");
    for (key, span) in members {
        let want = object.get(key).expect("a listed key");
        let got = env
            .value(span)
            .unwrap_or_else(|e| panic!("{label}: {key}: {e}"));
        assert!(
            identical(&got, want),
            "{label}: {level:?}.{key}: {got:?} vs {want:?}"
        );
        assert_eq!(env.get(level, key), Some(span), "{label}: get {key}");
        match (span.kind, want) {
            (Kind::Object(n), Value::Object(o)) => {
                assert!(n as usize >= o.len(), "{label}: {key} members");
            }
            (Kind::Array(n), Value::Array(a)) => assert_eq!(n as usize, a.len(), "{label}: {key}"),
            (Kind::String { escaped }, Value::String(s)) => {
                let text = env.str(span);
                assert_eq!(text.as_deref(), s.as_str(), "{label}: {key} text");
                assert!(escaped || text.is_some(), "{label}: {key} plain text");
            }
            (Kind::Number, Value::Number(x)) => {
                let got = env.number(span).map(f64::to_bits);
                assert_eq!(got, Some(x.to_bits()), "{label}: {key} number");
            }
            (Kind::Bool(b), Value::Bool(c)) => assert_eq!(b, *c, "{label}: {key}"),
            (Kind::Null, Value::Null) => {}
            (kind, v) => panic!("{label}: {key}: kind {kind:?} for {v:?}"),
        }
    }
}

/// Check one line; `must_index`: a valid object line the skim is expected to index.
fn check(line: &[u8], label: &str, must_index: bool, tally: &mut Tally) {
    tally.lines += 1;
    let want = full(line);
    let got = skim(line);
    match (&got, &want) {
        (Err(g), Err(w)) => {
            assert_eq!(
                g,
                w,
                "{label}: verdict on {:?}",
                String::from_utf8_lossy(line)
            );
            match g {
                Rejected::Syntax => tally.syntax += 1,
                Rejected::TooDeep => tally.too_deep += 1,
            }
        }
        (Ok(Skim::Unusual), Ok(v)) => {
            assert!(
                !(must_index && v.as_object().is_some()),
                "{label}: not indexed: {}",
                String::from_utf8_lossy(line)
            );
            tally.unusual += 1;
        }
        (Ok(Skim::Indexed(env)), Ok(v)) => {
            let top = v
                .as_object()
                .unwrap_or_else(|| panic!("{label}: indexed a non-object"));
            check_level(env, Level::Top, top, label);
            let data = top.get("data").and_then(Value::as_object);
            match data {
                Some(data) => {
                    check_level(env, Level::Data, data, label);
                    match data.get("message").and_then(Value::as_object) {
                        Some(m) => check_level(env, Level::Message, m, label),
                        None => assert_eq!(env.members(Level::Message).count(), 0, "{label}"),
                    }
                    match data.get("chunk").and_then(Value::as_object) {
                        Some(c) => check_level(env, Level::Chunk, c, label),
                        None => assert_eq!(env.members(Level::Chunk).count(), 0, "{label}"),
                    }
                }
                None => assert_eq!(env.members(Level::Data).count(), 0, "{label}"),
            }
            tally.indexed += 1;
        }
        _ => panic!(
            "{label}: skim {:?}, full parser {:?} on {:?}",
            got.as_ref().map(|_| "accepted"),
            want.as_ref().map(|_| "accepted"),
            String::from_utf8_lossy(line)
        ),
    }
}

/// Every line of the DSH fixtures (`*.jsonl` under the fixture directories).
fn fixture_lines() -> Vec<(String, Vec<u8>)> {
    let Some(dir) = common::fixtures_with("dsh") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for sub in ["dsh", "dsh-expected", "dsh-later"] {
        let Ok(entries) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        let mut files: Vec<_> = entries
            .map(|e| e.expect("fixture dir entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        files.sort();
        for file in files {
            let bytes = std::fs::read(&file).expect("read fixture");
            let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
            for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
                if !line.is_empty() {
                    out.push((
                        format!("{sub}/{}:{}", name.clone().unwrap_or_default(), i + 1),
                        line.to_vec(),
                    ));
                }
            }
        }
    }
    out
}

fn run(lines: u64) -> Tally {
    let seed = std::env::var("SKIM_ORACLE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(63);
    let mut rng = Rng(seed);
    let mut tally = Tally::default();
    let fixtures = fixture_lines();
    for (label, line) in &fixtures {
        // DSH writes no duplicate, escaped or index-like envelope keys.
        check(line, label, true, &mut tally);
    }
    let mut line = Vec::new();
    while tally.lines < lines {
        line.clear();
        let n = tally.lines;
        let (kind, must_index) = match rng.below(10) {
            0..=2 if !fixtures.is_empty() => {
                let (label, l) = &fixtures[rng.below(fixtures.len())];
                line.extend_from_slice(l);
                mutate(&mut rng, &mut line);
                (format!("mutated {label}"), false)
            }
            0..=3 => {
                event(&mut rng, &mut line);
                ("event".to_owned(), true)
            }
            4 | 5 => {
                event(&mut rng, &mut line);
                mutate(&mut rng, &mut line);
                ("mutated event".to_owned(), false)
            }
            6 | 7 => {
                object(&mut rng, 4, &mut line);
                if chance(&mut rng, 2) {
                    mutate(&mut rng, &mut line);
                }
                ("object".to_owned(), false)
            }
            8 => {
                value(&mut rng, 4, &mut line);
                if chance(&mut rng, 2) {
                    mutate(&mut rng, &mut line);
                }
                ("value".to_owned(), false)
            }
            _ => {
                nested(&mut rng, &mut line);
                if chance(&mut rng, 3) {
                    mutate(&mut rng, &mut line);
                }
                ("nested".to_owned(), false)
            }
        };
        check(
            &line,
            &format!("seed {seed} line {n} ({kind})"),
            must_index,
            &mut tally,
        );
    }
    eprintln!("skim oracle: {tally:?}");
    assert!(tally.indexed > tally.lines / 10, "{tally:?}");
    assert!(tally.syntax > tally.lines / 20, "{tally:?}");
    assert!(tally.too_deep > 0 && tally.unusual > 0, "{tally:?}");
    tally
}

#[test]
fn the_skim_gives_the_full_parsers_verdict_and_fields() {
    run(30_000);
}

#[test]
#[ignore = "a million lines (about a minute in release); run once per change of the skim"]
fn the_skim_gives_the_full_parsers_verdict_and_fields_over_a_million_lines() {
    let lines = std::env::var("SKIM_ORACLE_LINES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    run(lines);
}
