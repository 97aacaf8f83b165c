//! ECMAScript `Number::toString` (stub).

/// Append `x` as JS would print it.
pub fn number_to_string(x: f64, out: &mut String) {
    out.push_str(&x.to_string());
}
