//! The lossless-JSON admission gate: DSH's `snapshotJsonValue` for values the engine authors.
//!
//! Invariant: a value is admitted iff `JSON.parse(JSON.stringify(v))` gives back the same value,
//! which for what [`Value`] can hold means every number is finite and not `-0`. (Strings with lone
//! surrogates, index keys, any depth are all admissible.) A recursive check bounded to
//! [`FAST_DEPTH`] levels admits the common value without allocating; what it cannot admit goes to
//! an iterative walk, so a value of any depth is checked without deep recursion. A refusal names
//! the first offending value in document order by a JS-style path rooted at `value`, e.g.
//! `value.data.items[3]` or `value["a b"]`.

use super::value::{JsString, Value};
use crate::{Error, Result};

/// One open container and the step (index or key) to the child being checked.
enum Frame<'a> {
    Array(&'a [Value], usize),
    Object(&'a [(JsString, Value)], usize),
}

/// Admit `v` for authoring, or say which number is not lossless JSON.
pub fn admit(v: &Value) -> Result<()> {
    // Almost every value is admitted and shallow: a recursive walk without allocation decides
    // those; the iterative walk below decides the rest and names the refused number.
    if shallow_verdict(v, FAST_DEPTH) == Some(true) {
        return Ok(());
    }
    let mut stack: Vec<Frame<'_>> = Vec::new();
    let mut next = v;
    loop {
        match next {
            Value::Number(x) => {
                if let Some(rule) = number_rule(*x) {
                    return Err(Error::NotLossless {
                        path: path_of(&stack),
                        rule,
                    });
                }
            }
            Value::Array(items) => stack.push(Frame::Array(items, 0)),
            Value::Object(o) => stack.push(Frame::Object(o.entries(), 0)),
            Value::Null | Value::Bool(_) | Value::String(_) => {}
        }
        // Advance to the next child; `at` is one past the child being visited.
        loop {
            let child = match stack.last_mut() {
                None => return Ok(()),
                Some(Frame::Array(items, at)) => {
                    *at += 1;
                    items.get(*at - 1)
                }
                Some(Frame::Object(entries, at)) => {
                    *at += 1;
                    entries.get(*at - 1).map(|(_, v)| v)
                }
            };
            match child {
                Some(child) => {
                    next = child;
                    break;
                }
                None => {
                    stack.pop();
                }
            }
        }
    }
}

/// Containers the recursive check enters before leaving a value to the iterative walk.
const FAST_DEPTH: u32 = 64;

/// Whether `v` is lossless, decided within `depth` levels of containers; `None` when `v` nests
/// deeper and no refused number came first (the iterative walk then decides).
fn shallow_verdict(v: &Value, depth: u32) -> Option<bool> {
    match v {
        Value::Number(x) => Some(number_rule(*x).is_none()),
        Value::Null | Value::Bool(_) | Value::String(_) => Some(true),
        _ if depth == 0 => None,
        Value::Array(items) => children_verdict(items.iter(), depth - 1),
        Value::Object(o) => children_verdict(o.entries().iter().map(|(_, v)| v), depth - 1),
    }
}

/// [`shallow_verdict`] of a container's children, in document order.
fn children_verdict<'a>(children: impl Iterator<Item = &'a Value>, depth: u32) -> Option<bool> {
    for child in children {
        match shallow_verdict(child, depth) {
            Some(true) => {}
            other => return other,
        }
    }
    Some(true)
}

/// Why a number is refused, if it is.
fn number_rule(x: f64) -> Option<&'static str> {
    if x.is_nan() {
        Some("NaN is not allowed")
    } else if x.is_infinite() {
        Some(if x > 0.0 {
            "Infinity is not allowed"
        } else {
            "-Infinity is not allowed"
        })
    } else if x == 0.0 && x.is_sign_negative() {
        Some("-0 is not allowed")
    } else {
        None
    }
}

/// The JS-style path to the child each frame is visiting.
fn path_of(stack: &[Frame<'_>]) -> String {
    let mut path = String::from("value");
    for frame in stack {
        match *frame {
            Frame::Array(_, at) => {
                path.push('[');
                path.push_str(&(at - 1).to_string());
                path.push(']');
            }
            Frame::Object(entries, at) => {
                let Some((key, _)) = entries.get(at - 1) else {
                    continue;
                };
                match key.as_str().filter(|k| is_identifier(k)) {
                    Some(k) => {
                        path.push('.');
                        path.push_str(k);
                    }
                    None => {
                        path.push('[');
                        super::write_value(&mut path, &Value::String(key.clone()));
                        path.push(']');
                    }
                }
            }
        }
    }
    path
}

/// Whether `.key` is valid JS member syntax (ASCII identifiers only; others use `["key"]`).
fn is_identifier(k: &str) -> bool {
    let mut bytes = k.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_' || b == b'$')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{parse, Object};

    fn refusal(v: &Value) -> (String, &'static str) {
        match admit(v) {
            Err(Error::NotLossless { path, rule }) => (path, rule),
            other => panic!("expected NotLossless, got {other:?}"),
        }
    }

    #[test]
    fn admits_everything_parse_can_produce_except_non_finite() {
        let v = parse(r#"{"a":[1,-2.5,"\ud800",null,true,{"0":0}],"b":{}}"#).expect("valid JSON");
        assert!(admit(&v).is_ok());
        assert!(admit(&Value::Number(0.0)).is_ok());
        assert!(admit(&Value::Number(5e-324)).is_ok());
    }

    #[test]
    fn refuses_negative_zero_nan_and_infinities_at_root() {
        assert_eq!(
            refusal(&Value::Number(-0.0)),
            ("value".into(), "-0 is not allowed")
        );
        assert_eq!(
            refusal(&Value::Number(f64::NAN)),
            ("value".into(), "NaN is not allowed")
        );
        assert_eq!(
            refusal(&Value::Number(f64::INFINITY)),
            ("value".into(), "Infinity is not allowed")
        );
        assert_eq!(
            refusal(&Value::Number(f64::NEG_INFINITY)),
            ("value".into(), "-Infinity is not allowed")
        );
        // JSON.parse keeps -0 and gives Infinity for 1e400; the gate refuses both.
        assert_eq!(
            refusal(&parse("-0").expect("valid JSON")).1,
            "-0 is not allowed"
        );
        assert_eq!(
            refusal(&parse("1e400").expect("valid JSON")).1,
            "Infinity is not allowed"
        );
    }

    #[test]
    fn paths_are_js_style() {
        let v = parse(r#"{"data":{"items":[0,1,2,-0]}}"#).expect("valid JSON");
        assert_eq!(refusal(&v).0, "value.data.items[3]");
        let v = parse(r#"{"ok":[[1],[2,{"a b":{"7":{"$x_1":[-0]}}}]]}"#).expect("valid JSON");
        assert_eq!(refusal(&v).0, r#"value.ok[1][1]["a b"]["7"].$x_1[0]"#);
        let v = Value::Array(vec![
            Value::Number(1.0),
            Object::new().with("1x", f64::NAN).into(),
            Value::Number(-0.0),
        ]);
        assert_eq!(
            refusal(&v),
            (r#"value[1]["1x"]"#.into(), "NaN is not allowed")
        );
    }

    /// Around the recursive check's depth limit, refusals and their paths are the iterative
    /// walk's, and lossless values deeper than it are admitted.
    #[test]
    fn values_around_the_fast_depth_get_the_same_verdict() {
        for depth in [FAST_DEPTH - 1, FAST_DEPTH, FAST_DEPTH + 1, 2 * FAST_DEPTH] {
            let nest =
                |leaf: Value| (0..depth).fold(leaf, |v, _| Object::new().with("k", v).into());
            assert!(admit(&nest(Value::Number(1.0))).is_ok(), "depth {depth}");
            let (path, rule) = refusal(&nest(Value::Number(-0.0)));
            assert_eq!(rule, "-0 is not allowed");
            assert_eq!(path, format!("value{}", ".k".repeat(depth as usize)));
            // A refused number before a deeper lossless branch is still named.
            let v = Value::Array(vec![Value::Number(f64::NAN), nest(Value::Null)]);
            assert_eq!(refusal(&v), ("value[0]".into(), "NaN is not allowed"));
            // A deeper lossless branch before a refused number does not hide it.
            let v = Value::Array(vec![nest(Value::Null), Value::Number(f64::NAN)]);
            assert_eq!(refusal(&v), ("value[1]".into(), "NaN is not allowed"));
        }
    }

    #[test]
    fn deep_values_are_checked_without_recursion() {
        let mut v = Value::Number(-0.0);
        for _ in 0..100_000 {
            v = Value::Array(vec![Value::Null, v]);
        }
        let (path, rule) = refusal(&v);
        assert_eq!(rule, "-0 is not allowed");
        assert_eq!(path.len(), "value".len() + 100_000 * "[1]".len());
        while let Value::Array(mut a) = v {
            v = a.pop().unwrap_or(Value::Null);
        }
    }
}
