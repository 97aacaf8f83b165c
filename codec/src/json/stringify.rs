//! `JSON.stringify` (no indent, no replacer) and JS `String(v)`, byte for byte.
//!
//! Invariants kept here:
//! - no whitespace anywhere; object keys in [`Object`] enumeration order;
//! - strings escape `"` `\` `\b` `\f` `\n` `\r` `\t`, the other U+0000..=U+001F as lowercase
//!   `\u00xx`, lone surrogates as lowercase `\udxxx` (well-formed stringify, ES2019), and leave
//!   everything else raw (U+007F, U+2028/U+2029, `/`, astral characters), so output is UTF-8;
//! - numbers print as [`number_to_string`], except NaN and ±Infinity which print `null`, as JS
//!   does (the admission gate refuses them before authoring);
//! - walking is iterative: any nesting depth a [`Value`] can hold is written without recursion.

use smallvec::SmallVec;

use super::number::number_to_string;
use super::plain_run::plain_run_len;
use super::value::{JsString, Object, Value};

/// `JSON.stringify(v)`.
pub fn stringify(v: &Value) -> String {
    let mut s = String::new();
    write_value(&mut s, v);
    s
}

/// Open containers [`write_value`] keeps without allocating: an event nests about five deep, and
/// an allocation per written value costs the hosting path more than its bytes (a cold block).
const INLINE_FRAMES: usize = 16;

/// One open container while writing.
enum Frame<'a> {
    Array(std::slice::Iter<'a, Value>),
    Object(std::slice::Iter<'a, (JsString, Value)>),
}

/// Append `JSON.stringify(v)` to `out`.
pub fn write_value(out: &mut String, v: &Value) {
    let mut stack: SmallVec<[Frame<'_>; INLINE_FRAMES]> = SmallVec::new();
    let mut next = v;
    loop {
        match next {
            Value::Null => out.push_str("null"),
            Value::Bool(true) => out.push_str("true"),
            Value::Bool(false) => out.push_str("false"),
            Value::Number(x) if x.is_finite() => number_to_string(*x, out),
            Value::Number(_) => out.push_str("null"),
            Value::String(s) => write_string(out, s),
            Value::Array(items) => {
                out.push('[');
                stack.push(Frame::Array(items.iter()));
            }
            Value::Object(o) => {
                out.push('{');
                stack.push(Frame::Object(o.entries().iter()));
            }
        }
        // Find the next value to write, closing finished containers.
        loop {
            let Some(top) = stack.last_mut() else {
                return;
            };
            match top {
                Frame::Array(items) => {
                    if let Some(item) = items.next() {
                        // Right after `[` only when this is the first element: no element's
                        // text ends with `[`.
                        if !out.ends_with('[') {
                            out.push(',');
                        }
                        next = item;
                        break;
                    }
                    out.push(']');
                }
                Frame::Object(entries) => {
                    if let Some((key, value)) = entries.next() {
                        // As for arrays: no value's text ends with `{`.
                        if !out.ends_with('{') {
                            out.push(',');
                        }
                        write_string(out, key);
                        out.push(':');
                        next = value;
                        break;
                    }
                    out.push('}');
                }
            }
            stack.pop();
        }
    }
}

/// Append `JSON.stringify` of `object` with the value of its key `key` (if present) written as
/// `with` instead, at the key's position: a changed copy's text without the copy.
pub fn write_object_replacing(out: &mut String, object: &Object, key: &str, with: &Value) {
    out.push('{');
    for (i, (k, v)) in object.entries().iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, k);
        out.push(':');
        write_value(out, if k.eq_str(key) { with } else { v });
    }
    out.push('}');
}

/// How each byte is written inside a string: 0 raw, else the escape's second byte
/// (`u` for `\u00xx`). Invariant: it marks exactly the bytes that end a plain run
/// (`plain_run::is_stop`; tested), so [`write_escaped`] has an escape for each one it stops at.
const ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = b'u';
        b += 1;
    }
    t[0x08] = b'b';
    t[0x0C] = b'f';
    t[b'\n' as usize] = b'n';
    t[b'\r' as usize] = b'r';
    t[b'\t' as usize] = b't';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Append a JS string as a quoted JSON string.
fn write_string(out: &mut String, s: &JsString) {
    out.push('"');
    match s.as_str() {
        Some(text) => write_escaped(out, text),
        None => write_wtf8(out, s.as_wtf8()),
    }
    out.push('"');
}

/// Escape valid UTF-8 text (no lone surrogates), copying plain runs in one piece.
fn write_escaped(out: &mut String, text: &str) {
    let mut rest = text;
    loop {
        // A run ends before an ASCII byte or at the end, so it ends on a char boundary.
        let (run, tail) = rest.split_at(plain_run_len(rest.as_bytes()));
        out.push_str(run);
        let Some(&b) = tail.as_bytes().first() else {
            return;
        };
        let esc = ESCAPE[usize::from(b)];
        out.push('\\');
        out.push(char::from(esc));
        if esc == b'u' {
            out.push_str("00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xF)]));
        }
        rest = &tail[1..];
    }
}

/// Escape WTF-8 holding lone surrogates: the runs between them are valid UTF-8.
fn write_wtf8(out: &mut String, bytes: &[u8]) {
    let mut rest = bytes;
    loop {
        // A lone surrogate is `ED A0..=BF xx`; valid UTF-8 never has `ED` followed by `A0..`.
        let at = rest
            .windows(2)
            .position(|w| w[0] == 0xED && w[1] >= 0xA0)
            .filter(|&i| i + 3 <= rest.len());
        let (run, tail) = rest.split_at(at.unwrap_or(rest.len()));
        match std::str::from_utf8(run) {
            Ok(text) => write_escaped(out, text),
            // Unreachable for a well-formed JsString; degrade rather than panic.
            Err(_) => write_escaped(out, &String::from_utf8_lossy(run)),
        }
        let Some(&[_, b1, b2]) = tail.get(..3) else {
            return;
        };
        let unit = 0xD000 | (u32::from(b1 & 0x3F) << 6) | u32::from(b2 & 0x3F);
        out.push_str("\\u");
        for shift in [12, 8, 4, 0] {
            out.push(char::from(HEX[((unit >> shift) & 0xF) as usize]));
        }
        rest = &tail[3..];
    }
}

/// JS `String(v)` for error messages: numbers as JS prints them, strings raw (lone surrogates
/// become U+FFFD), arrays joined with `,` (`null` elements empty), objects `[object Object]`.
pub fn js_string_of(v: &Value) -> String {
    let mut out = String::new();
    // Each open array with the index of its next element.
    let mut stack: Vec<(&[Value], usize)> = Vec::new();
    let mut next = v;
    loop {
        match next {
            Value::Null if stack.is_empty() => out.push_str("null"),
            Value::Null => {}
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(x) => number_to_string(*x, &mut out),
            Value::String(s) => out.push_str(&s.to_string_lossy()),
            Value::Array(items) => stack.push((items, 0)),
            Value::Object(_) => out.push_str("[object Object]"),
        }
        loop {
            let Some((items, at)) = stack.last_mut() else {
                return out;
            };
            if let Some(item) = items.get(*at) {
                if *at > 0 {
                    out.push(',');
                }
                *at += 1;
                next = item;
                break;
            }
            stack.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{parse, Object};

    fn wtf8(bytes: &[u8]) -> Value {
        Value::String(JsString::from_wtf8_unchecked(bytes.to_vec()))
    }

    #[test]
    fn scalars() {
        assert_eq!(stringify(&Value::Null), "null");
        assert_eq!(stringify(&Value::Bool(true)), "true");
        assert_eq!(stringify(&Value::Bool(false)), "false");
        assert_eq!(stringify(&Value::Number(-0.0)), "0");
        assert_eq!(stringify(&Value::Number(1e21)), "1e+21");
        assert_eq!(stringify(&Value::Number(f64::NAN)), "null");
        assert_eq!(stringify(&Value::Number(f64::INFINITY)), "null");
        assert_eq!(stringify(&Value::Number(f64::NEG_INFINITY)), "null");
    }

    #[test]
    fn string_escapes_match_js() {
        let s = "\"\\/\u{8}\u{c}\n\r\t\u{0}\u{1f}\u{7f}\u{2028}\u{2029}é😀";
        assert_eq!(
            stringify(&Value::from(s)),
            "\"\\\"\\\\/\\b\\f\\n\\r\\t\\u0000\\u001f\u{7f}\u{2028}\u{2029}é😀\""
        );
        assert_eq!(stringify(&Value::from("\u{1b}[0m")), "\"\\u001b[0m\"");
    }

    #[test]
    fn lone_surrogates_escape_lowercase() {
        // U+D83D alone, then "x", then U+DE00 alone, then U+DFFF at the very end.
        let v = wtf8(b"\xED\xA0\xBDx\xED\xB8\x80\n\xED\xBF\xBF");
        assert_eq!(stringify(&v), "\"\\ud83dx\\ude00\\n\\udfff\"");
        assert_eq!(stringify(&wtf8(b"\xED\x9F\xBF")), "\"\u{d7ff}\"");
    }

    /// What `write_escaped` must write, one char at a time.
    fn escaped_char_by_char(text: &str) -> String {
        let mut out = String::new();
        for c in text.chars() {
            let esc = if c.is_ascii() { ESCAPE[c as usize] } else { 0 };
            match esc {
                0 => out.push(c),
                b'u' => out.push_str(&format!("\\u{:04x}", c as u32)),
                e => {
                    out.push('\\');
                    out.push(char::from(e));
                }
            }
        }
        out
    }

    #[test]
    fn escapes_exactly_the_bytes_that_end_a_plain_run() {
        for b in 0..=u8::MAX {
            assert_eq!(
                ESCAPE[usize::from(b)] != 0,
                crate::json::plain_run::is_stop(b),
                "{b:#x}"
            );
        }
    }

    #[test]
    fn escapes_every_byte_at_every_offset() {
        for b in (0u8..0x80).chain([0xC3]) {
            for len in 1..40 {
                for at in 0..len {
                    let mut text: Vec<u8> = (0..len).map(|k| b'a' + (k % 26) as u8).collect();
                    text[at] = b;
                    if b == 0xC3 {
                        text.insert(at + 1, 0xA9);
                    }
                    let text = String::from_utf8(text).expect("utf-8");
                    let mut out = String::new();
                    write_escaped(&mut out, &text);
                    assert_eq!(
                        out,
                        escaped_char_by_char(&text),
                        "byte {b:#x} at {at} of {len}"
                    );
                }
            }
        }
    }

    proptest::proptest! {
        /// Long texts with escaped bytes anywhere, several in one word, and multi-byte chars
        /// across word boundaries: the escaper writes what a char-by-char walk writes.
        #[test]
        fn escaping_matches_a_char_walk(pieces in proptest::collection::vec(
            proptest::prop_oneof![
                3 => "[a-z ]{1,30}",
                1 => "[é→😀\u{7f}]{1,3}",
                1 => "[\\x00-\\x1f\"\\\\]{1,3}",
            ],
            0..24,
        )) {
            let text = pieces.concat();
            let mut out = String::new();
            write_escaped(&mut out, &text);
            proptest::prop_assert_eq!(out, escaped_char_by_char(&text));
        }
    }

    #[test]
    fn containers_have_no_whitespace_and_keep_order() {
        let v = Value::Object(Object::new().with("b", 1.0).with("2", "x").with(
            "a",
            Value::Array(vec![
                Value::Null,
                Value::Array(vec![]),
                Object::new().into(),
            ]),
        ));
        assert_eq!(stringify(&v), r#"{"2":"x","b":1,"a":[null,[],{}]}"#);
        assert_eq!(stringify(&Value::Array(vec![])), "[]");
        assert_eq!(stringify(&Object::new().into()), "{}");
    }

    #[test]
    fn write_value_appends() {
        let mut s = String::from("x=");
        write_value(&mut s, &Value::Array(vec![Value::from(1.5), Value::Null]));
        assert_eq!(s, "x=[1.5,null]");
    }

    #[test]
    fn deep_values_stringify_without_recursion() {
        let mut v = Value::Null;
        for _ in 0..100_000 {
            v = Value::Array(vec![v]);
        }
        let s = stringify(&v);
        // Dismantle iteratively (before any assertion can unwind) so dropping does not recurse.
        while let Value::Array(mut a) = v {
            v = a.pop().unwrap_or(Value::Bool(false));
        }
        assert_eq!(v, Value::Null);
        assert_eq!(
            s,
            format!("{}null{}", "[".repeat(100_000), "]".repeat(100_000))
        );

        let (mut v, mut expected) = (Value::Null, String::from("null"));
        for i in 0..1000 {
            if i % 2 == 0 {
                v = Value::Array(vec![v, Value::from(1.0)]);
                expected = format!("[{expected},1]");
            } else {
                v = Object::new().with("k", v).with("j", 2.0).into();
                expected = format!(r#"{{"k":{expected},"j":2}}"#);
            }
        }
        assert_eq!(stringify(&v), expected);
    }

    #[test]
    fn js_string_of_matches_string_conversion() {
        assert_eq!(js_string_of(&Value::Null), "null");
        assert_eq!(js_string_of(&Value::Bool(false)), "false");
        assert_eq!(js_string_of(&Value::Number(1e21)), "1e+21");
        assert_eq!(js_string_of(&Value::Number(-0.0)), "0");
        assert_eq!(js_string_of(&Value::Number(f64::NAN)), "NaN");
        assert_eq!(js_string_of(&Value::from("a\"b")), "a\"b");
        assert_eq!(
            js_string_of(&wtf8(b"a\xED\xA0\xBD")),
            "a\u{fffd}\u{fffd}\u{fffd}"
        );
        assert_eq!(js_string_of(&Object::new().into()), "[object Object]");
        let arr = parse(r#"[1,null,[2,[]],"x",{},true,[]]"#).expect("valid JSON");
        assert_eq!(js_string_of(&arr), "1,,2,,x,[object Object],true,");
        assert_eq!(js_string_of(&parse("[[]]").expect("valid JSON")), "");
        assert_eq!(js_string_of(&parse("[null]").expect("valid JSON")), "");
    }
}
