//! Unit tests for `JSON.parse` semantics: grammar, numbers, strings, key order, errors, depth.

use super::*;
use crate::json::stringify;

fn ok(text: &str) -> Value {
    match parse(text) {
        Ok(v) => v,
        Err(e) => panic!("{text:?} should parse: {e}"),
    }
}

/// `JSON.stringify(JSON.parse(text))`.
fn rt(text: &str) -> String {
    stringify(&ok(text))
}

fn json_err(text: &str) -> (usize, &'static str) {
    match parse(text) {
        Err(Error::Json { offset, reason }) => (offset, reason),
        other => panic!("{text:?} should be refused, got {other:?}"),
    }
}

fn num(text: &str) -> f64 {
    match ok(text) {
        Value::Number(x) => x,
        other => panic!("{text:?} is not a number: {other:?}"),
    }
}

#[test]
fn scalars_and_surrounding_whitespace() {
    assert_eq!(ok("null"), Value::Null);
    assert_eq!(ok(" \t\r\ntrue\n"), Value::Bool(true));
    assert_eq!(ok("false"), Value::Bool(false));
    assert_eq!(ok(r#""x""#), Value::from("x"));
}

#[test]
fn numbers_are_nearest_binary64() {
    assert_eq!(num("0"), 0.0);
    assert!(num("-0").is_sign_negative() && num("-0") == 0.0);
    assert!(num("-0.0e5").is_sign_negative());
    assert!(num("-1e-400").is_sign_negative() && num("-1e-400") == 0.0);
    assert_eq!(num("1e400"), f64::INFINITY);
    assert_eq!(num("-1e400"), f64::NEG_INFINITY);
    assert_eq!(num("1E+21"), 1e21);
    assert_eq!(num("1.0"), 1.0);
    assert_eq!(num("123456789012345"), 123_456_789_012_345.0);
    assert_eq!(num("-999999999999999"), -999_999_999_999_999.0);
    assert_eq!(num("12345678901234567890"), 12_345_678_901_234_567_890.0);
    assert_eq!(num("9007199254740993"), 9_007_199_254_740_992.0);
    assert_eq!(num("5e-324"), 5e-324);
    assert_eq!(num("2e-324"), 0.0);
    assert_eq!(num("1.7976931348623157e308"), f64::MAX);
    assert_eq!(num("0.30000000000000004"), 0.1 + 0.2);
    assert_eq!(rt("12345678901234567890"), "12345678901234567000");
    assert_eq!(
        rt("[1.0,1E+21,-0,1e-7,0.0000010,100e-2]"),
        "[1,1e+21,0,1e-7,0.000001,1]"
    );
    assert_eq!(rt("1e400"), "null");
}

#[test]
fn number_grammar_is_strict() {
    for bad in [
        "01",
        "-",
        "+1",
        ".5",
        "1.",
        "1.e5",
        "1e",
        "1e+",
        "0x10",
        "-01",
        "1_0",
        "--1",
        "NaN",
        "Infinity",
        "-Infinity",
    ] {
        assert!(parse(bad).is_err(), "{bad:?} must be refused");
    }
    assert_eq!(
        json_err("1."),
        (2, "invalid number: expected a digit after '.'")
    );
    assert_eq!(json_err("[01]").0, 2);
}

#[test]
fn string_escapes() {
    assert_eq!(
        ok(r#""\"\\\/\b\f\n\r\t\u0041\u00e9\u20AC""#),
        Value::from("\"\\/\u{8}\u{c}\n\r\tAé€")
    );
    assert_eq!(ok(r#""a\u0000b""#), Value::from("a\u{0}b"));
    assert_eq!(rt(r#""\u001B\u007f\u2028/""#), "\"\\u001b\u{7f}\u{2028}/\"");
}

#[test]
fn surrogate_pairs_join_and_lone_surrogates_stay_wtf8() {
    let pair = ok(r#""\ud83d\ude00""#);
    assert_eq!(pair, Value::from("😀"));
    assert_eq!(pair.as_str().map(str::len), Some(4));
    assert_eq!(ok(r#""\uD83D\uDE00""#), Value::from("😀"));

    let lone = ok(r#""a\ud83db""#);
    let Value::String(s) = &lone else {
        panic!("not a string")
    };
    assert_eq!(s.as_wtf8(), b"a\xED\xA0\xBDb");
    assert_eq!(s.utf16_len(), 3);
    assert_eq!(stringify(&lone), r#""a\ud83db""#);

    // Low then high is not a pair; high, high, low pairs the last two.
    assert_eq!(rt(r#""\ude00\ud83d""#), r#""\ude00\ud83d""#);
    assert_eq!(rt(r#""\ud83d\ud83d\ude00""#), "\"\\ud83d😀\"");
    // A high surrogate before a non-surrogate escape or raw text stays lone.
    assert_eq!(rt(r#""\ud83d\u0041""#), r#""\ud83dA""#);
    assert_eq!(rt(r#""\ud83d\n""#), r#""\ud83d\n""#);
    assert_eq!(rt(r#""\udbff\udfff""#), "\"\u{10ffff}\"");
}

#[test]
fn raw_non_ascii_passes_through() {
    let text = "\"é😀\u{2029}\u{7f}\u{fffd}\"";
    assert_eq!(rt(text), text);
}

#[test]
fn string_errors() {
    assert_eq!(
        json_err("\"a\nb\""),
        (2, "unescaped control character in string")
    );
    assert_eq!(
        json_err("\"\t\""),
        (1, "unescaped control character in string")
    );
    assert_eq!(json_err(r#""a\x""#), (2, "invalid escape in string"));
    assert_eq!(json_err(r#""\u12G4""#), (1, "invalid \\u escape in string"));
    assert_eq!(json_err(r#""\u12""#).1, "invalid \\u escape in string");
    assert_eq!(json_err(r#""abc"#), (0, "unterminated string"));
    assert_eq!(json_err(r#"["a\"]"#), (1, "unterminated string"));
    assert_eq!(json_err(r#""\"#).1, "invalid escape in string");
    assert_eq!(json_err("'a'").1, "unexpected character, expected a value");
}

#[test]
fn objects_follow_js_enumeration_order() {
    assert_eq!(
        rt(r#"{"b":1,"2":2,"a":3,"1":4}"#),
        r#"{"1":4,"2":2,"b":1,"a":3}"#
    );
    assert_eq!(rt(r#"{"a":1,"b":2,"a":3}"#), r#"{"a":3,"b":2}"#);
    assert_eq!(
        rt(r#"{"4294967295":0,"4294967294":1,"01":2,"10":3,"9":4,"-1":5,"9":6}"#),
        r#"{"9":6,"10":3,"4294967294":1,"4294967295":0,"01":2,"-1":5}"#
    );
    assert_eq!(rt(r#"{"":1,"":2}"#), r#"{"":2}"#);
    assert_eq!(rt(r#"{ "a" : [ 1 , { } , [ ] ] }"#), r#"{"a":[1,{},[]]}"#);
}

#[test]
fn large_objects_dedupe_like_small_ones() {
    let mut text = String::from("{");
    for i in 0..200 {
        text.push_str(&format!("\"k{}\":{i},\"{}\":{i},", i % 50, 199 - i));
    }
    text.push_str("\"end\":true}");
    let v = ok(&text);
    let o = v.as_object().expect("an object");
    assert_eq!(o.len(), 50 + 200 + 1);
    let keys: Vec<String> = o.iter().map(|(k, _)| k.to_string()).collect();
    assert_eq!(keys[0], "0");
    assert_eq!(keys[199], "199");
    assert_eq!(keys[200], "k0");
    assert_eq!(keys[250], "end");
    assert_eq!(o.get("k0"), Some(&Value::Number(150.0)));
    assert_eq!(o.get("0"), Some(&Value::Number(199.0)));
    // The same result as inserting one by one.
    let mut slow = Object::new();
    for i in 0..200 {
        slow.insert(format!("k{}", i % 50).into(), Value::from(i64::from(i)));
        slow.insert(format!("{}", 199 - i).into(), Value::from(i64::from(i)));
    }
    slow.insert("end".into(), Value::Bool(true));
    assert_eq!(o, &slow);
}

#[test]
fn grammar_errors_carry_offsets() {
    assert_eq!(
        json_err(""),
        (0, "unexpected end of input, expected a value")
    );
    assert_eq!(
        json_err("   "),
        (3, "unexpected end of input, expected a value")
    );
    assert_eq!(json_err("\u{feff}1").0, 0);
    assert_eq!(json_err("\u{a0}1").0, 0);
    assert_eq!(json_err("1 2"), (2, "unexpected text after the JSON value"));
    assert_eq!(
        json_err("[1,]"),
        (3, "unexpected character, expected a value")
    );
    assert_eq!(json_err("[1 2]"), (3, "expected ',' or ']' in array"));
    assert_eq!(
        json_err(r#"{"a":1,}"#),
        (7, "expected a string key in object")
    );
    assert_eq!(json_err(r#"{"a" 1}"#), (5, "expected ':' after object key"));
    assert_eq!(
        json_err(r#"{"a":1 "b":2}"#),
        (7, "expected ',' or '}' in object")
    );
    assert_eq!(json_err("{1:2}"), (1, "expected a string key in object"));
    assert_eq!(json_err("tru"), (0, "invalid literal"));
    assert_eq!(json_err("nul1"), (0, "invalid literal"));
    assert_eq!(json_err("[true"), (5, "expected ',' or ']' in array"));
    assert_eq!(json_err("{}}").1, "unexpected text after the JSON value");
    assert!(parse("[1]\u{0}").is_err());
    assert!(parse("\u{b}1").is_err());
    assert!(parse("\u{c}1").is_err());
}

#[test]
fn every_prefix_of_a_document_is_refused_without_panic() {
    let doc = r#"{"a":[1,-2.5e3,"x\u00e9\ud83d\ude00y",{"b":null,"3":true}],"c":false}"#;
    for end in 0..doc.len() {
        if doc.is_char_boundary(end) {
            assert!(parse(&doc[..end]).is_err(), "prefix {end} parsed");
        }
    }
    assert!(parse(doc).is_ok());
}

fn nested(depth: usize, open: &str, close: &str) -> String {
    format!("{}{}", open.repeat(depth), close.repeat(depth))
}

#[test]
fn depth_limit_is_max_depth() {
    let v = ok(&nested(MAX_DEPTH, "[", "]"));
    assert_eq!(stringify(&v).len(), 2 * MAX_DEPTH);
    match parse(&nested(MAX_DEPTH + 1, "[", "]")) {
        Err(Error::TooDeep { offset, limit }) => {
            assert_eq!((offset, limit), (MAX_DEPTH, MAX_DEPTH))
        }
        other => panic!("expected TooDeep, got {other:?}"),
    }
    let objs = format!("{}1{}", r#"{"a":"#.repeat(MAX_DEPTH), "}".repeat(MAX_DEPTH));
    assert!(parse(&objs).is_ok());
    let objs = format!(
        "{}1{}",
        r#"{"a":"#.repeat(MAX_DEPTH + 1),
        "}".repeat(MAX_DEPTH + 1)
    );
    assert!(matches!(parse(&objs), Err(Error::TooDeep { .. })));
}

#[test]
fn hostile_nesting_is_safe_on_a_small_stack() {
    let handle = std::thread::Builder::new().stack_size(2 << 20).spawn(|| {
        // Deep but legal: parse, stringify, gate and drop on a 2 MiB stack.
        let mixed = format!(
            "{}0{}",
            r#"[{"k":"#.repeat(MAX_DEPTH / 2),
            "}]".repeat(MAX_DEPTH / 2)
        );
        let v = ok(&mixed);
        assert_eq!(stringify(&v), mixed);
        assert!(crate::json::admit(&v).is_ok());
        drop(v);
        // Far too deep, and unterminated: refused, never overflowing.
        for open in ["[", "{\"a\":", "[{\"a\":"] {
            let text = open.repeat(1_000_000);
            assert!(matches!(parse(&text), Err(Error::TooDeep { .. })));
        }
        let text = format!("{}{}", "[".repeat(MAX_DEPTH - 1), "[1,2");
        assert!(matches!(parse(&text), Err(Error::Json { .. })));
    });
    assert!(handle.map(|h| h.join().is_ok()).unwrap_or(false));
}
