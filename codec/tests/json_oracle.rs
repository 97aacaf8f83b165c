//! Scenario: our JSON codec against the reference emulation `shared/tools/js_json.py`.
//!
//! One `python3 codec/tests/oracle.py` process answers a batch of cases, byte for byte:
//! - every line of every DSH fixture (`shared/fixtures/dsh/*.jsonl`): `stringify(parse(line))`
//!   (lines the Python parser refuses are skipped and counted);
//! - over 20,000 doubles (random bit patterns, edge values, powers of ten and two with their
//!   neighbours, round-half-even tie candidates): `JSON.stringify(x)`;
//! - a few thousand generated JSON texts (nested objects with index-like and duplicate keys,
//!   escapes, lone surrogate escapes, every number spelling, odd whitespace) plus mutated copies,
//!   where accept/refuse must agree too.
//!
//! `shared` is `<repo>/../shared` (override with `SESSIONLOG_SHARED_DIR`). When it is missing the
//! test fails under CI (`CI` set) and elsewhere prints a `SKIPPED` line to stderr and passes.
//! The seed is fixed; set `JSON_ORACLE_SEED` to explore others.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sessionlog_codec::json::{number_to_string, parse, stringify, Value};

mod rng;
use rng::Rng;

/// A case for the oracle and the answer our codec gives for it.
struct Case {
    /// What the case is, for failure messages.
    label: String,
    /// The line sent to `oracle.py` (`J <hex>` or `N <hex bits>`).
    request: String,
    /// `Some(text)` when our codec produced output, `None` when it refused the input.
    ours: Option<String>,
    /// A fixture line: skip it when Python refuses it.
    skip_if_python_refuses: bool,
}

fn shared_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("SESSIONLOG_SHARED_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"),
    };
    if dir.join("tools/js_json.py").is_file() {
        return Some(dir);
    }
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("json_oracle");
    let why = format!(
        "{} has no tools/js_json.py (set SESSIONLOG_SHARED_DIR)",
        dir.display()
    );
    assert!(
        std::env::var_os("CI").is_none(),
        "CI: {test} needs the JSON oracle: {why}"
    );
    // One write of the whole line: `./x test` counts the tests these lines name (.ci/tally).
    let line = format!("SKIPPED {test}: needs the JSON oracle: {why}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    None
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text_case(label: String, text: &str, skip_if_python_refuses: bool) -> Case {
    Case {
        label,
        request: format!("J {}", hex(text.as_bytes())),
        ours: parse(text).ok().map(|v| stringify(&v)),
        skip_if_python_refuses,
    }
}

fn double_case(x: f64) -> Case {
    let via_stringify = stringify(&Value::Number(x));
    if x.is_finite() {
        let mut direct = String::new();
        number_to_string(x, &mut direct);
        assert_eq!(
            direct, via_stringify,
            "number_to_string vs stringify for {x:e}"
        );
    }
    Case {
        label: format!("double {x:e} (bits {:016x})", x.to_bits()),
        request: format!("N {:016x}", x.to_bits()),
        ours: Some(via_stringify),
        skip_if_python_refuses: false,
    }
}

fn fixture_cases(shared: &Path) -> Vec<Case> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(shared.join("fixtures/dsh"))
        .expect("read fixtures/dsh")
        .map(|e| e.expect("fixture dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for file in files {
        let bytes = std::fs::read(&file).expect("read fixture");
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
        if lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
        for (i, line) in lines.into_iter().enumerate() {
            // As Node's `Buffer.toString('utf8')`.
            let text = String::from_utf8_lossy(line);
            cases.push(text_case(format!("{name}:{}", i + 1), &text, true));
        }
    }
    cases
}

fn double_cases(rng: &mut Rng) -> Vec<f64> {
    let mut xs = vec![
        0.0,
        -0.0,
        5e-324,
        -5e-324,
        f64::MIN_POSITIVE,
        f64::MAX,
        f64::MIN,
        f64::EPSILON,
        1e21,
        1e-6,
        1e-7,
        0.1 + 0.2,
        1.0 / 3.0,
        1e15 + 0.3,
        9_007_199_254_740_991.0,
        9_007_199_254_740_992.0,
        12_345_678_901_234_567_890.0,
        999_999_999_999_999_999_999.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    // Powers of ten and two with both neighbours.
    let mut anchors = Vec::new();
    for e in -325..=308 {
        anchors.push(format!("1e{e}").parse::<f64>().expect("power of ten"));
    }
    for e in -1074..=1023 {
        anchors.push(2f64.powi(e));
    }
    for a in anchors {
        for x in [a, -a] {
            xs.push(x);
            xs.push(f64::from_bits(x.to_bits().wrapping_add(1)));
            xs.push(f64::from_bits(x.to_bits().wrapping_sub(1)));
        }
    }
    // Random bit patterns (all exponents, NaNs and infinities included).
    for _ in 0..12_000 {
        xs.push(f64::from_bits(rng.next()));
    }
    // Round-half-even tie candidates: short exact expansions near the 17-digit limit.
    for _ in 0..3_000 {
        let n = (1u64 << 52) | (rng.next() >> 12);
        #[expect(clippy::cast_precision_loss, reason = "n < 2^53 is exact")]
        let m = n as f64;
        let shift = i32::try_from(rng.below(80)).expect("small") - 20;
        xs.push(m * 2f64.powi(-shift));
    }
    for _ in 0..3_000 {
        let digits: String = (0..16 + rng.below(3))
            .map(|_| char::from(b'0' + (rng.next() % 10) as u8))
            .collect();
        let e = i32::try_from(rng.below(60)).expect("small") - 30;
        xs.push(format!("1{digits}5e{e}").parse::<f64>().expect("decimal"));
    }
    // Everyday decimals.
    for _ in 0..2_000 {
        let k = i32::try_from(rng.below(12)).expect("small");
        #[expect(clippy::cast_precision_loss, reason = "a test input")]
        let x = (rng.next() % 10_000_000) as f64 / 10f64.powi(k);
        xs.push(x);
    }
    xs
}

const KEYS: &[&str] = &[
    "a",
    "b",
    "c",
    "0",
    "1",
    "2",
    "10",
    "9",
    "4294967294",
    "4294967295",
    "01",
    "-1",
    "",
    "__proto__",
    "a b",
    "\\u0061",
    "\\ud83d",
    "type",
    "é",
    "😀",
    "1.5",
];

const STRING_PIECES: &[&str] = &[
    "x",
    "hello",
    " ",
    "\\\"",
    "\\\\",
    "\\/",
    "\\b",
    "\\f",
    "\\n",
    "\\r",
    "\\t",
    "\\u0000",
    "\\u001F",
    "\\u001b",
    "\\u007f",
    "\\u00e9",
    "\\u2028",
    "\\uD83D\\uDE00",
    "\\ud83d\\ude00",
    "\\ud83d",
    "\\udc00",
    "\\uDBFF",
    "\\uDFFF\\uD800",
    "\\ud800\\ud800\\udc00",
    "é",
    "😀",
    "\u{2028}",
    "\u{2029}",
    "\u{7f}",
    "\u{fffd}",
    "/",
    "</script>",
    "\\u0041",
];

const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "1.0",
    "1E+21",
    "1e21",
    "1e-7",
    "1E-7",
    "0.000001",
    "1.5e-7",
    "-0.0",
    "12345678901234567890",
    "9007199254740993",
    "123456789012345678901234567890",
    "0.1",
    "100e-2",
    "1e400",
    "-1e400",
    "1e-400",
    "-1e-400",
    "2.2250738585072014e-308",
    "5e-324",
    "1.7976931348623157e308",
    "1.7976931348623159e308",
    "0.30000000000000004",
    "1000000000000000.25",
    "1e+0",
    "4.35",
    "1e0",
];

const SPACES: &[&str] = &["", "", "", " ", "\n", "\t", "\r\n", "  "];

fn gen_value(rng: &mut Rng, depth: usize, out: &mut String) {
    let choice = if depth >= 6 {
        rng.below(4)
    } else {
        rng.below(7)
    };
    match choice {
        0 => out.push_str(rng.pick(&["null", "true", "false"])),
        1 => {
            if rng.below(2) == 0 {
                out.push_str(rng.pick(NUMBERS));
            } else {
                let int = rng.next() % 1_000_000_000;
                let frac = rng.next() % 1000;
                let e = i64::try_from(rng.below(50)).expect("small") - 25;
                out.push_str(&format!("{int}.{frac}e{e}"));
            }
        }
        2 | 3 => {
            out.push('"');
            for _ in 0..rng.below(5) {
                out.push_str(rng.pick(STRING_PIECES));
            }
            out.push('"');
        }
        4 => {
            out.push('[');
            for i in 0..rng.below(5) {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(rng.pick(SPACES));
                gen_value(rng, depth + 1, out);
                out.push_str(rng.pick(SPACES));
            }
            out.push(']');
        }
        _ => {
            out.push('{');
            for i in 0..rng.below(7) {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(rng.pick(SPACES));
                out.push('"');
                out.push_str(rng.pick(KEYS));
                out.push('"');
                out.push_str(rng.pick(SPACES));
                out.push(':');
                out.push_str(rng.pick(SPACES));
                gen_value(rng, depth + 1, out);
            }
            out.push_str(rng.pick(SPACES));
            out.push('}');
        }
    }
}

const MUTANTS: &[&str] = &[
    "{", "}", "[", "]", ",", ":", "\"", "\\", "0", "-", "+", ".", "e", "E", " ", "\u{feff}",
    "\u{a0}", "x", "\u{1}", "\n", "\\u", "u", "01", "nul",
];

fn mutate(rng: &mut Rng, text: &str) -> String {
    let bounds: Vec<usize> = (0..=text.len())
        .filter(|&i| text.is_char_boundary(i))
        .collect();
    let at = rng.pick(&bounds);
    match rng.below(3) {
        0 => text[..at].to_string(),
        1 => {
            let end = bounds.iter().copied().find(|&b| b > at).unwrap_or(at);
            format!("{}{}", &text[..at], &text[end..])
        }
        _ => format!("{}{}{}", &text[..at], rng.pick(MUTANTS), &text[at..]),
    }
}

/// Run every case through `oracle.py` and return the Python answers in order.
fn ask_python(shared: &Path, cases: &[Case]) -> Vec<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle.py");
    let mut child = Command::new("python3")
        .arg(script)
        .arg(shared.join("tools"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn python3 (the oracle needs it)");
    let mut input = String::new();
    for c in cases {
        input.push_str(&c.request);
        input.push('\n');
    }
    let mut stdin = child.stdin.take().expect("python stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let stdout = child.stdout.take().expect("python stdout");
    let answers: Vec<String> = BufReader::new(stdout)
        .split(b'\n')
        .map(|l| {
            String::from_utf8(l.expect("read python answer")).expect("python answers in UTF-8")
        })
        .collect();
    writer
        .join()
        .expect("writer thread")
        .expect("write to python");
    assert!(
        child.wait().expect("wait python").success(),
        "oracle.py failed"
    );
    assert_eq!(
        answers.len(),
        cases.len(),
        "oracle.py answered a different number of cases"
    );
    answers
}

#[test]
fn codec_matches_js_json_oracle() {
    let Some(shared) = shared_dir() else {
        return;
    };
    let seed = std::env::var("JSON_ORACLE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5E55_10A9_u64);
    let mut rng = Rng(seed);

    let mut cases = fixture_cases(&shared);
    let fixture_lines = cases.len();

    let doubles = double_cases(&mut rng);
    let double_count = doubles.len();
    cases.extend(doubles.into_iter().map(double_case));

    let mut generated = 0;
    for i in 0..4_000 {
        let mut text = String::new();
        text.push_str(rng.pick(SPACES));
        gen_value(&mut rng, 0, &mut text);
        text.push_str(rng.pick(SPACES));
        if rng.below(3) == 0 {
            let bad = mutate(&mut rng, &text);
            // Python alone reads NaN/Infinity literals; JS does not.
            if !bad.contains("NaN") && !bad.contains("Infinity") {
                cases.push(text_case(format!("mutant {i}: {bad:?}"), &bad, false));
                generated += 1;
            }
        }
        cases.push(text_case(format!("text {i}: {text:?}"), &text, false));
        generated += 1;
    }

    let answers = ask_python(&shared, &cases);
    let (mut compared, mut skipped, mut refused_by_both) = (0, 0, 0);
    let mut mismatches = Vec::new();
    for (case, answer) in cases.iter().zip(&answers) {
        let theirs = answer.strip_prefix("OK ");
        if theirs.is_none() && case.skip_if_python_refuses {
            skipped += 1;
            continue;
        }
        if theirs.is_none() && case.ours.is_none() {
            refused_by_both += 1;
            continue;
        }
        compared += 1;
        if theirs != case.ours.as_deref() {
            mismatches.push(format!(
                "{}\n  python: {answer}\n  rust:   {:?}",
                case.label, case.ours
            ));
        }
    }
    eprintln!(
        "json_oracle (seed {seed:#x}): {fixture_lines} fixture lines ({skipped} skipped as \
         Python refuses them), {double_count} doubles, {generated} generated texts; \
         {compared} outputs compared byte for byte, {refused_by_both} refused by both, \
         {} mismatches",
        mismatches.len()
    );
    assert!(
        mismatches.is_empty(),
        "{} mismatches with js_json.py, first ones:\n{}",
        mismatches.len(),
        mismatches
            .iter()
            .take(15)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        fixture_lines - skipped >= 6_000,
        "too few fixture lines compared"
    );
    assert!(double_count >= 20_000, "too few doubles");
}
