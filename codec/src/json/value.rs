//! The JS value model: what `JSON.parse` produces and `JSON.stringify` consumes.
//!
//! Invariants kept here:
//! - numbers are binary64 (`f64`), as in JS; `-0`, NaN and infinities are representable so the
//!   admission gate can reject them, but the parser never produces NaN or infinities;
//! - strings are WTF-8 ([`JsString`]): valid UTF-8 plus lone surrogates encoded as their 3-byte
//!   generalized UTF-8 form, so every JS string round-trips; a surrogate *pair* is always stored as
//!   one 4-byte scalar;
//! - an [`Object`] keeps JS property enumeration order: canonical array-index keys
//!   (`"0"`..=`"4294967294"`) first in ascending numeric order, then the other keys in insertion
//!   order; re-inserting a key keeps its first position and replaces its value.

use std::fmt;

use super::interned::interned;

/// A JavaScript value restricted to what JSON can express.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// Every JSON number is a binary64 double.
    Number(f64),
    /// A string (possibly holding lone surrogates).
    String(JsString),
    /// A dense array.
    Array(Vec<Value>),
    /// A plain object in JS enumeration order.
    Object(Object),
}

/// `null`, the value of a member that was never set.
impl Default for Value {
    fn default() -> Self {
        Value::Null
    }
}

impl Value {
    /// The object, if this is one.
    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The object, for in-place edits, if this is one.
    pub fn as_object_mut(&mut self) -> Option<&mut Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The number, if this is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(*n),
            _ => None,
        }
    }

    /// The string as UTF-8, if this is a string without lone surrogates.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => s.as_str(),
            _ => None,
        }
    }

    /// The array, if this is one.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The value as a safe integer (`Number.isSafeInteger`), if it is one.
    pub fn as_safe_integer(&self) -> Option<i64> {
        self.as_f64().and_then(safe_integer)
    }

    /// The value as a non-negative safe integer (a seq, count or index), if it is one.
    pub fn as_safe_u64(&self) -> Option<u64> {
        self.as_safe_integer().and_then(|n| u64::try_from(n).ok())
    }

    /// DSH's `sessionFormatCount`: [`Value::as_safe_u64`] without `-0`, which DSH refuses where
    /// it counts (header fields, seqs, turn and step numbers).
    pub fn as_count(&self) -> Option<u64> {
        match self {
            Value::Number(n) if *n == 0.0 && n.is_sign_negative() => None,
            _ => self.as_safe_u64(),
        }
    }
}

/// Largest integer JS represents exactly (`Number.MAX_SAFE_INTEGER`).
pub const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// `Number.isSafeInteger(x)`, returning the integer. `-0` counts as the safe integer 0, as in JS.
pub fn safe_integer(x: f64) -> Option<i64> {
    if x.is_finite() && x.trunc() == x && x.abs() <= MAX_SAFE_INTEGER {
        #[expect(
            clippy::cast_possible_truncation,
            reason = "checked integral and within ±2^53"
        )]
        Some(x as i64)
    } else {
        None
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(JsString::from(s))
    }
}

impl From<f64> for Value {
    fn from(n: f64) -> Self {
        Value::Number(n)
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Self {
        #[expect(
            clippy::cast_precision_loss,
            reason = "JS numbers are doubles; callers pass safe integers"
        )]
        Value::Number(n as f64)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<Object> for Value {
    fn from(o: Object) -> Self {
        Value::Object(o)
    }
}

/// A JS string stored as WTF-8 bytes (see the module invariants). A string without lone
/// surrogates is kept as UTF-8 (a Rust `String`, or a `&'static str` for the fixed keys the
/// writers author and for DSH's common strings, `interned.rs`, which then cost no allocation
/// per object), so [`JsString::as_str`] costs nothing; lone surrogates ⇔ `Wtf8`, and equality,
/// order and hashing are the bytes', whichever variant holds them.
#[derive(Clone)]
pub struct JsString(Repr);

/// Lone-surrogate text is rare and never grows, so it is boxed: without a capacity of its own,
/// `Repr` fits in 24 bytes (its tag in `String`'s capacity niche), which makes a [`Value`] 32
/// bytes and an object entry 56 instead of 40 and 72, for every event a host hands over.
#[derive(Clone)]
enum Repr {
    Utf8(String),
    Static(&'static str),
    Wtf8(Box<[u8]>),
}

impl JsString {
    /// A string of fixed text, held without copying (object keys a writer authors).
    pub const fn from_static(s: &'static str) -> Self {
        JsString(Repr::Static(s))
    }

    /// Wrap bytes already in WTF-8 form. The caller guarantees the encoding.
    pub(crate) fn from_wtf8_unchecked(bytes: Vec<u8>) -> Self {
        match String::from_utf8(bytes) {
            Ok(s) => JsString(Repr::Utf8(s)),
            Err(e) => JsString(Repr::Wtf8(e.into_bytes().into_boxed_slice())),
        }
    }

    /// The WTF-8 bytes.
    pub fn as_wtf8(&self) -> &[u8] {
        match &self.0 {
            Repr::Utf8(s) => s.as_bytes(),
            Repr::Static(s) => s.as_bytes(),
            Repr::Wtf8(b) => b,
        }
    }

    /// The string as UTF-8, or `None` when it holds a lone surrogate.
    pub fn as_str(&self) -> Option<&str> {
        match &self.0 {
            Repr::Utf8(s) => Some(s),
            Repr::Static(s) => Some(s),
            Repr::Wtf8(_) => None,
        }
    }

    /// The string with lone surrogates replaced by U+FFFD (for messages, never for data).
    pub fn to_string_lossy(&self) -> String {
        String::from_utf8_lossy(self.as_wtf8()).into_owned()
    }

    /// Whether this string equals `s`.
    pub fn eq_str(&self, s: &str) -> bool {
        self.as_wtf8() == s.as_bytes()
    }

    /// The number of UTF-16 code units (JS `length`).
    pub fn utf16_len(&self) -> usize {
        // A 4-byte sequence is two code units; every other scalar (or lone surrogate) is one.
        self.as_wtf8()
            .iter()
            .map(|&b| match b {
                0xF0..=0xF7 => 2,
                0x80..=0xBF => 0,
                _ => 1,
            })
            .sum()
    }
}

impl Default for JsString {
    fn default() -> Self {
        JsString(Repr::Utf8(String::new()))
    }
}

impl PartialEq for JsString {
    fn eq(&self, other: &Self) -> bool {
        self.as_wtf8() == other.as_wtf8()
    }
}

impl Eq for JsString {}

impl std::hash::Hash for JsString {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_wtf8().hash(state);
    }
}

impl PartialOrd for JsString {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for JsString {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_wtf8().cmp(other.as_wtf8())
    }
}

impl From<&str> for JsString {
    fn from(s: &str) -> Self {
        match interned(s.as_bytes()) {
            Some(word) => JsString(Repr::Static(word)),
            None => JsString(Repr::Utf8(s.to_owned())),
        }
    }
}

impl From<String> for JsString {
    fn from(s: String) -> Self {
        JsString(Repr::Utf8(s))
    }
}

impl fmt::Debug for JsString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string_lossy(), f)
    }
}

impl fmt::Display for JsString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_string_lossy())
    }
}

/// A plain JS object: ordered `(key, value)` entries in JS enumeration order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Object {
    entries: Vec<(JsString, Value)>,
    /// How many leading entries have array-index keys (they sort numerically before the rest).
    index_keys: usize,
}

impl Object {
    /// An empty object.
    pub fn new() -> Self {
        Self::default()
    }

    /// `obj[key] = value` with JS semantics: an existing key keeps its position and takes the
    /// new value; a new array-index key is placed in numeric order among the index keys; any other
    /// new key goes last. Lookup is linear: DSH objects are small. Parsing a pathological object
    /// with many keys stays correct, only slower.
    pub fn insert(&mut self, key: JsString, value: Value) {
        if let Some(slot) = self.entries.iter_mut().find(|(k, _)| *k == key) {
            slot.1 = value;
            return;
        }
        match array_index(key.as_wtf8()) {
            Some(idx) => {
                let pos = self.entries[..self.index_keys]
                    .partition_point(|(k, _)| array_index(k.as_wtf8()).is_some_and(|i| i < idx));
                self.entries.insert(pos, (key, value));
                self.index_keys += 1;
            }
            None => self.entries.push((key, value)),
        }
    }

    /// An object of `entries` as they are, for an object the crate builds from fixed names.
    /// The caller guarantees what [`Object::from_parsed`] would otherwise establish: the keys are
    /// distinct and none is an array index, so enumeration order is the entries' order.
    pub(crate) fn from_distinct_names(entries: Vec<(JsString, Value)>) -> Self {
        debug_assert!(
            entries
                .iter()
                .all(|(k, _)| array_index(k.as_wtf8()).is_none())
                && !has_duplicate_keys(&entries)
        );
        Object {
            entries,
            index_keys: 0,
        }
    }

    /// Build an object from entries in source order, as `JSON.parse` does: a duplicated key keeps
    /// its first position and takes its last value; index keys move first in numeric order.
    /// Linear for the common case (few keys, no duplicates, no index keys); `O(n log n)` otherwise,
    /// so a pathological object with many keys cannot make parsing quadratic.
    pub(crate) fn from_parsed(mut entries: Vec<(JsString, Value)>) -> Self {
        let any_index = entries
            .iter()
            .any(|(k, _)| array_index(k.as_wtf8()).is_some());
        if !any_index && !has_duplicate_keys(&entries) {
            return Object {
                entries,
                index_keys: 0,
            };
        }
        if entries.len() > SMALL_OBJECT {
            let mut first: std::collections::HashMap<JsString, usize> =
                std::collections::HashMap::with_capacity(entries.len());
            let mut kept: Vec<(JsString, Value)> = Vec::with_capacity(entries.len());
            for (k, v) in entries {
                match first.get(&k) {
                    Some(&i) => kept[i].1 = v,
                    None => {
                        first.insert(k.clone(), kept.len());
                        kept.push((k, v));
                    }
                }
            }
            entries = kept;
        } else {
            let mut kept: Vec<(JsString, Value)> = Vec::with_capacity(entries.len());
            for (k, v) in entries {
                match kept.iter_mut().find(|(seen, _)| *seen == k) {
                    Some(slot) => slot.1 = v,
                    None => kept.push((k, v)),
                }
            }
            entries = kept;
        }
        // Keys are now unique, so index keys have distinct numbers and a stable split suffices.
        let (mut index, rest): (Vec<_>, Vec<_>) = entries
            .into_iter()
            .partition(|(k, _)| array_index(k.as_wtf8()).is_some());
        index.sort_by_key(|(k, _)| array_index(k.as_wtf8()));
        let index_keys = index.len();
        index.extend(rest);
        Object {
            entries: index,
            index_keys,
        }
    }

    /// The entries in enumeration order, as a slice (for walkers that keep their own stack).
    pub(crate) fn entries(&self) -> &[(JsString, Value)] {
        &self.entries
    }

    /// The entries, given up (an object rebuilt in place keeps their allocation).
    pub(crate) fn into_entries(self) -> Vec<(JsString, Value)> {
        self.entries
    }

    /// Builder form of [`Object::insert`] for authoring code.
    pub fn with(mut self, key: &'static str, value: impl Into<Value>) -> Self {
        self.insert(JsString::from_static(key), value.into());
        self
    }

    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries
            .iter()
            .find(|(k, _)| k.eq_str(key))
            .map(|(_, v)| v)
    }

    /// The value under `key`, for in-place edits (the key keeps its position).
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.entries
            .iter_mut()
            .find(|(k, _)| k.eq_str(key))
            .map(|(_, v)| v)
    }

    /// `delete obj[key]`: remove the entry, keeping the others in order.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let at = self.entries.iter().position(|(k, _)| k.eq_str(key))?;
        if at < self.index_keys {
            self.index_keys -= 1;
        }
        Some(self.entries.remove(at).1)
    }

    /// Rename `from` to `to` in place (same position), as a stage that rebuilds an object key by
    /// key does. Nothing happens when `from` is absent.
    pub fn rename(&mut self, from: &str, to: &str) {
        if let Some(slot) = self.entries.iter_mut().find(|(k, _)| k.eq_str(from)) {
            slot.0 = JsString::from(to);
        }
    }

    /// Whether `key` is present (`Object.hasOwn`).
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Entries in enumeration order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&JsString, &Value)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the object has no keys.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The values under `keys`, in that order, when the object's keys are exactly `keys` (which
    /// must be distinct) in any order. An object holding them in that order (as authored objects
    /// do) is answered in one pass, without a lookup per key.
    pub fn exact_values<const N: usize>(&self, keys: [&str; N]) -> Option<[&Value; N]> {
        if self.entries.len() != N {
            return None;
        }
        let in_order = self
            .entries
            .iter()
            .zip(keys)
            .all(|((k, _), key)| k.eq_str(key));
        let found: [Option<&Value>; N] = if in_order {
            let mut values = self.entries.iter().map(|(_, v)| v);
            std::array::from_fn(|_| values.next())
        } else {
            keys.map(|k| self.get(k))
        };
        let mut values = [&Value::Null; N];
        for (slot, value) in values.iter_mut().zip(found) {
            *slot = value?;
        }
        Some(values)
    }

    /// Whether the key set is exactly `keys` (order-insensitive; DSH's `hasExactKeys`).
    pub fn has_exact_keys(&self, keys: &[&str]) -> bool {
        // Authored objects hold their keys in the order checked: one pass confirms that case
        // before the order-insensitive check.
        self.len() == keys.len()
            && (self
                .entries
                .iter()
                .zip(keys)
                .all(|((k, _), key)| k.eq_str(key))
                || keys.iter().all(|k| self.contains_key(k)))
    }
}

/// Objects up to this many keys are deduplicated by linear scan; larger ones by hashing.
const SMALL_OBJECT: usize = 16;

/// Whether two entries share a key.
fn has_duplicate_keys(entries: &[(JsString, Value)]) -> bool {
    if entries.len() <= SMALL_OBJECT {
        entries
            .iter()
            .enumerate()
            .any(|(i, (k, _))| entries[..i].iter().any(|(seen, _)| seen == k))
    } else {
        let mut seen = std::collections::HashSet::with_capacity(entries.len());
        !entries.iter().all(|(k, _)| seen.insert(k.as_wtf8()))
    }
}

/// The numeric value of a canonical array-index key (`"0"`..=`"4294967294"`, no leading zeros).
pub fn array_index(key: &[u8]) -> Option<u32> {
    if key.is_empty() || key.len() > 10 || (key.len() > 1 && key[0] == b'0') {
        return None;
    }
    let mut n: u64 = 0;
    for &b in key {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(b - b'0');
    }
    u32::try_from(n).ok().filter(|&i| i != u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout [`Repr`]'s boxed lone-surrogate text buys: every event a host hands over is
    /// a tree of these, and the hosting benchmark's copies and walks of them are memory-bound.
    #[test]
    fn values_and_object_entries_stay_small() {
        assert_eq!(std::mem::size_of::<JsString>(), 24);
        assert_eq!(std::mem::size_of::<Value>(), 32);
        assert_eq!(std::mem::size_of::<(JsString, Value)>(), 56);
    }

    /// `exact_values` answers what `has_exact_keys` and a lookup per key answer, in key order,
    /// for objects holding the keys in order, out of order, with one too many or one missing.
    #[test]
    fn exact_values_are_the_lookups_of_an_exact_key_set() {
        let keys = ["a", "b", "c"];
        for entries in [
            &[("a", 1.0), ("b", 2.0), ("c", 3.0)][..],
            &[("c", 3.0), ("a", 1.0), ("b", 2.0)],
            &[("a", 1.0), ("b", 2.0)],
            &[("a", 1.0), ("b", 2.0), ("d", 3.0)],
            &[("a", 1.0), ("b", 2.0), ("c", 3.0), ("d", 4.0)],
        ] {
            let o = entries.iter().fold(Object::new(), |o, &(k, v)| {
                let mut o = o;
                o.insert(k.into(), Value::Number(v));
                o
            });
            let expected = o
                .has_exact_keys(&keys)
                .then(|| keys.map(|k| o.get(k).cloned()));
            let got = o.exact_values(keys).map(|vs| vs.map(|v| Some(v.clone())));
            assert_eq!(got, expected, "{entries:?}");
        }
    }

    #[test]
    fn index_keys_enumerate_first_in_numeric_order() {
        let mut o = Object::new();
        for (k, v) in [("b", 1.0), ("2", 2.0), ("a", 3.0), ("1", 4.0), ("10", 5.0)] {
            o.insert(JsString::from(k), Value::Number(v));
        }
        let keys: Vec<String> = o.iter().map(|(k, _)| k.to_string()).collect();
        assert_eq!(keys, ["1", "2", "10", "b", "a"]);
    }

    #[test]
    fn duplicate_key_keeps_first_position_and_last_value() {
        let mut o = Object::new();
        o.insert("a".into(), Value::Number(1.0));
        o.insert("b".into(), Value::Number(2.0));
        o.insert("a".into(), Value::Number(3.0));
        let got: Vec<(String, f64)> = o
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_f64().unwrap_or(f64::NAN)))
            .collect();
        assert_eq!(got, [("a".to_string(), 3.0), ("b".to_string(), 2.0)]);
    }

    #[test]
    fn array_index_bounds() {
        assert_eq!(array_index(b"0"), Some(0));
        assert_eq!(array_index(b"4294967294"), Some(4_294_967_294));
        assert_eq!(array_index(b"4294967295"), None);
        assert_eq!(array_index(b"01"), None);
        assert_eq!(array_index(b""), None);
        assert_eq!(array_index(b"-1"), None);
    }

    #[test]
    fn utf16_length_counts_astral_as_two() {
        assert_eq!(JsString::from("aé😀").utf16_len(), 4);
    }
}
