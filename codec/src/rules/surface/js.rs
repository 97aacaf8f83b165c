//! The sliver of JavaScript semantics that DSH's surface, message and request-header code
//! relies on when it reads event JSON: property reads (with V8's `TypeError` for `null` or
//! `undefined` bases), `.length`, `x[0]`, object spread, truthiness, `x > 0` coercion and the
//! `isDeepEqualJson` comparison.
//!
//! Invariant: every helper agrees with what V8 does on a value `JSON.parse` produced, so malformed
//! logs fail (or pass) here exactly where they fail (or pass) in DSH. `undefined` is `None`.

use std::borrow::Cow;

use crate::json::{array_index, js_string_of, JsString, Object, Value};
use crate::Error;

/// A JS value read out of an event; `None` is `undefined`.
pub(crate) type Js<'a> = Option<Cow<'a, Value>>;

/// The `TypeError` V8 throws on a property read from `null` or `undefined`.
#[derive(Debug)]
pub(crate) struct TypeError(String);

impl TypeError {
    /// The codec error for this `TypeError`, raised while folding the event at `seq`.
    pub(crate) fn at(self, seq: u64) -> Error {
        Error::Surface {
            seq,
            rule: format!("TypeError: {}", self.0),
        }
    }
}

/// `base.key` for a named key that is never `length` nor an array index: an own property of an
/// object, `undefined` on any other non-nullish value.
pub(crate) fn prop<'a>(base: Option<&'a Value>, key: &str) -> Result<Option<&'a Value>, TypeError> {
    debug_assert!(key != "length" && array_index(key.as_bytes()).is_none());
    match base {
        None => Err(nullish_read("undefined", key)),
        Some(Value::Null) => Err(nullish_read("null", key)),
        Some(Value::Object(o)) => Ok(o.get(key)),
        Some(_) => Ok(None),
    }
}

/// `base.length`: UTF-16 length of a string, length of an array, an object's own `length`.
pub(crate) fn length<'a>(base: Option<&'a Value>) -> Result<Js<'a>, TypeError> {
    match base {
        None => Err(nullish_read("undefined", "length")),
        Some(Value::Null) => Err(nullish_read("null", "length")),
        Some(Value::String(s)) => Ok(Some(Cow::Owned(count(s.utf16_len())))),
        Some(Value::Array(a)) => Ok(Some(Cow::Owned(count(a.len())))),
        Some(Value::Object(o)) => Ok(o.get("length").map(Cow::Borrowed)),
        Some(_) => Ok(None),
    }
}

/// `base[0]`: a string's first UTF-16 code unit, an array's first element, an object's `"0"`.
pub(crate) fn index0<'a>(base: Option<&'a Value>) -> Result<Js<'a>, TypeError> {
    match base {
        None => Err(nullish_read("undefined", "0")),
        Some(Value::Null) => Err(nullish_read("null", "0")),
        Some(Value::String(s)) => Ok(code_units(s)
            .into_iter()
            .next()
            .map(|u| Cow::Owned(Value::String(u)))),
        Some(Value::Array(a)) => Ok(a.first().map(Cow::Borrowed)),
        Some(Value::Object(o)) => Ok(o.get("0").map(Cow::Borrowed)),
        Some(_) => Ok(None),
    }
}

fn nullish_read(base: &str, key: &str) -> TypeError {
    TypeError(format!(
        "Cannot read properties of {base} (reading '{key}')"
    ))
}

fn count(n: usize) -> Value {
    #[expect(
        clippy::cast_precision_loss,
        reason = "lengths of parsed JSON are far below 2^53"
    )]
    Value::Number(n as f64)
}

/// A string split into its UTF-16 code units, each a one-unit `JsString` (a lone surrogate when
/// the unit is half of an astral character), as JS indexing and spread see it.
fn code_units(s: &JsString) -> Vec<JsString> {
    let bytes = s.as_wtf8();
    let mut units = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let width = match bytes[i] {
            0xF0..=0xF7 => 4,
            0xE0..=0xEF => 3,
            0xC0..=0xDF => 2,
            _ => 1,
        };
        let end = (i + width).min(bytes.len());
        let unit = &bytes[i..end];
        if width == 4 && unit.len() == 4 {
            let scalar = (u32::from(unit[0] & 0x07) << 18)
                | (u32::from(unit[1] & 0x3F) << 12)
                | (u32::from(unit[2] & 0x3F) << 6)
                | u32::from(unit[3] & 0x3F);
            let offset = scalar - 0x1_0000;
            units.push(surrogate(0xD800 | (offset >> 10)));
            units.push(surrogate(0xDC00 | (offset & 0x3FF)));
        } else {
            units.push(JsString::from_wtf8_unchecked(unit.to_vec()));
        }
        i = end;
    }
    units
}

/// The 3-byte generalized UTF-8 form of a surrogate code unit.
fn surrogate(unit: u32) -> JsString {
    let low6 = |bits: u32| 0x80 | (bits & 0x3F) as u8;
    JsString::from_wtf8_unchecked(vec![0xED, low6(unit >> 6), low6(unit)])
}

/// `{...value}`: the own enumerable properties of `value` as a fresh object.
pub(crate) fn spread(value: Option<&Value>) -> Object {
    let mut out = Object::new();
    match value {
        Some(Value::Object(o)) => {
            for (k, v) in o.iter() {
                out.insert(k.clone(), v.clone());
            }
        }
        Some(Value::Array(a)) => {
            for (i, v) in a.iter().enumerate() {
                out.insert(JsString::from(i.to_string()), v.clone());
            }
        }
        Some(Value::String(s)) => {
            for (i, u) in code_units(s).into_iter().enumerate() {
                out.insert(JsString::from(i.to_string()), Value::String(u));
            }
        }
        None | Some(Value::Null | Value::Bool(_) | Value::Number(_)) => {}
    }
    out
}

/// JS truthiness (`if (v)`); `undefined` is `None` and falsy.
pub(crate) fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => *n != 0.0 && !n.is_nan(),
        Value::String(s) => !s.as_wtf8().is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// JS `x > 0` for a value read from JSON (`undefined > 0` is false).
pub(crate) fn greater_than_zero(value: Option<&Value>) -> bool {
    value.is_some_and(|v| to_number(v) > 0.0)
}

/// JS `ToNumber` (via `ToPrimitive` for arrays and objects).
fn to_number(value: &Value) -> f64 {
    match value {
        Value::Null => 0.0,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Number(n) => *n,
        Value::String(s) => s.as_str().map_or(f64::NAN, string_to_number),
        Value::Array(_) | Value::Object(_) => string_to_number(&js_string_of(value)),
    }
}

/// JS `StringToNumber`: trimmed, empty is 0, `0x`/`0o`/`0b` integers, `[+-]Infinity`, decimals.
fn string_to_number(text: &str) -> f64 {
    let t = text.trim_matches(is_js_whitespace);
    if t.is_empty() {
        return 0.0;
    }
    for (prefix, radix) in [
        ("0x", 16),
        ("0X", 16),
        ("0o", 8),
        ("0O", 8),
        ("0b", 2),
        ("0B", 2),
    ] {
        if let Some(digits) = t.strip_prefix(prefix) {
            if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
                return f64::NAN;
            }
            return digits.chars().fold(0.0, |acc, c| {
                acc * f64::from(radix) + f64::from(c.to_digit(radix).unwrap_or(0))
            });
        }
    }
    let unsigned = t.strip_prefix(['+', '-']).unwrap_or(t);
    if unsigned == "Infinity" {
        return if t.starts_with('-') {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
    }
    if is_decimal_literal(unsigned) {
        t.parse().unwrap_or(f64::NAN)
    } else {
        f64::NAN
    }
}

/// `StrUnsignedDecimalLiteral` without `Infinity`: `1`, `1.`, `.5`, `1.5e-3`.
fn is_decimal_literal(s: &str) -> bool {
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(at) => (&s[..at], Some(&s[at + 1..])),
        None => (s, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = digits(int) && digits(frac) && !(int.is_empty() && frac.is_empty());
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok
}

/// ECMAScript `WhiteSpace` and `LineTerminator` code points (what `String.prototype.trim`
/// removes).
pub(crate) fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{B}' | '\u{C}' | '\r' | ' ' | '\u{A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202F}'
                | '\u{205F}'
                | '\u{3000}'
                | '\u{FEFF}'
    )
}

/// DSH's `isDeepEqualJson`: `===` on primitives, element-wise arrays, order-insensitive objects.
pub(crate) fn deep_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| deep_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.iter().any(|(k2, v2)| k == k2 && deep_equal(v, v2)))
        }
        _ => false,
    }
}

/// A value as a JS template literal shows it (`${v}`): `undefined`, `String(v)` otherwise.
pub(crate) fn template(value: Option<&Value>) -> String {
    value.map_or_else(|| "undefined".to_owned(), js_string_of)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(text: &str) -> Value {
        Value::from(text)
    }

    #[test]
    fn nullish_reads_throw_v8_text() {
        let err = prop(None, "content").map(|_| ()).map_err(|e| e.0);
        assert_eq!(
            err,
            Err("Cannot read properties of undefined (reading 'content')".to_owned())
        );
        let err = length(Some(&Value::Null)).map(|_| ()).map_err(|e| e.0);
        assert_eq!(
            err,
            Err("Cannot read properties of null (reading 'length')".to_owned())
        );
        assert!(matches!(prop(Some(&s("x")), "message"), Ok(None)));
        assert!(matches!(
            prop(Some(&Value::Number(1.0)), "message"),
            Ok(None)
        ));
    }

    #[test]
    fn length_and_index_follow_js() {
        let astral = s("😀x");
        let len = length(Some(&astral))
            .ok()
            .flatten()
            .and_then(|v| v.as_f64());
        assert_eq!(len, Some(3.0));
        let first = index0(Some(&astral)).ok().flatten().map(Cow::into_owned);
        assert_eq!(first, Some(Value::String(surrogate(0xD83D))));
        assert!(matches!(index0(Some(&s(""))), Ok(None)));
        assert!(matches!(length(Some(&Value::Bool(true))), Ok(None)));
    }

    #[test]
    fn spread_of_strings_and_arrays_gives_index_keys() {
        let spread_str = spread(Some(&s("ab")));
        let keys: Vec<String> = spread_str.iter().map(|(k, _)| k.to_string()).collect();
        assert_eq!(keys, ["0", "1"]);
        let spread_arr = spread(Some(&Value::Array(vec![Value::Null])));
        assert_eq!(spread_arr.get("0"), Some(&Value::Null));
        assert!(spread(Some(&Value::Number(4.0))).is_empty());
        assert!(spread(None).is_empty());
    }

    #[test]
    fn truthiness() {
        for falsy in [
            Value::Null,
            Value::Bool(false),
            Value::Number(0.0),
            Value::Number(-0.0),
            s(""),
        ] {
            assert!(!truthy(&falsy), "{falsy:?}");
        }
        for t in [
            Value::Bool(true),
            Value::Number(-1.0),
            s("0"),
            Value::Array(vec![]),
        ] {
            assert!(truthy(&t), "{t:?}");
        }
        assert!(truthy(&Value::Object(Object::new())));
    }

    #[test]
    fn string_to_number_grammar() {
        assert_eq!(string_to_number("  12 "), 12.0);
        assert_eq!(string_to_number(""), 0.0);
        assert_eq!(string_to_number("0x1F"), 31.0);
        assert_eq!(string_to_number("-Infinity"), f64::NEG_INFINITY);
        assert_eq!(string_to_number(".5"), 0.5);
        assert_eq!(string_to_number("5."), 5.0);
        assert_eq!(string_to_number("1e3"), 1000.0);
        for nan in ["inf", "nan", "-0x1", "1e", "abc", "1 2", "."] {
            assert!(string_to_number(nan).is_nan(), "{nan}");
        }
        assert!(greater_than_zero(Some(&s("5"))));
        assert!(!greater_than_zero(Some(&Value::Null)));
        assert!(!greater_than_zero(None));
    }

    #[test]
    fn deep_equal_ignores_key_order_but_not_array_order() {
        let a = Value::Object(Object::new().with("a", 1.0).with("b", 2.0));
        let b = Value::Object(Object::new().with("b", 2.0).with("a", 1.0));
        assert!(deep_equal(&a, &b));
        let x = Value::Array(vec![Value::Number(1.0), Value::Number(2.0)]);
        let y = Value::Array(vec![Value::Number(2.0), Value::Number(1.0)]);
        assert!(!deep_equal(&x, &y));
        assert!(deep_equal(&Value::Number(0.0), &Value::Number(-0.0)));
        assert!(!deep_equal(&Value::Null, &Value::Object(Object::new())));
    }
}
