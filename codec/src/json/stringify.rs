//! `JSON.stringify` (stub).
use super::Value;

/// Stringify a value.
pub fn stringify(v: &Value) -> String {
    let mut s = String::new();
    write_value(&mut s, v);
    s
}

/// Append a value.
pub fn write_value(_out: &mut String, _v: &Value) {}

/// JS `String(v)` (stub).
pub fn js_string_of(v: &Value) -> String {
    stringify(v)
}
