//! `JSON.parse` (stub).
use super::Value;
use crate::Result;

/// Deepest nesting accepted.
pub const MAX_DEPTH: usize = 1000;

/// Parse JSON text.
pub fn parse(_text: &str) -> Result<Value> {
    Ok(Value::Null)
}
