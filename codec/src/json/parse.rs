//! `JSON.parse`: strict JSON text (already UTF-8) into a [`Value`], exactly as JS would read it.
//!
//! Invariants kept here:
//! - the grammar is RFC 8259 / ECMA-404 and nothing more: whitespace is only space, tab, CR and
//!   LF (no BOM, no NBSP); numbers match `-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?`; raw U+0000..=U+001F
//!   inside strings is rejected; nothing but whitespace may follow the value;
//! - numbers are the nearest binary64 (`-0` stays `-0`, `1e400` is `Infinity`, like JS);
//! - a `\uD83D\uDE00` escape pair becomes one scalar; a lone surrogate escape is kept as its
//!   3-byte WTF-8 form (see [`super::JsString`]);
//! - objects follow JS property order (index keys first, a duplicate key keeps its first position
//!   and its last value);
//! - the parser is iterative with an explicit stack and refuses nesting deeper than [`MAX_DEPTH`],
//!   so no input can exhaust the thread stack, and the values it returns are shallow enough for
//!   Rust's recursive drop on a 2 MiB thread (tested).
//!
//! Speed: a string's plain runs are found eight bytes at a time (`plain_run.rs`); strings
//! without escapes are copied in one slice, DSH's common strings (event types, keys:
//! `interned.rs`) not at all; escaped strings copy the unescaped runs in bulk; short
//! integers skip the float parser.

use super::interned::interned;
use super::plain_run::plain_run_len;
use super::value::{JsString, Object, Value};
use crate::{Error, Result};

/// Deepest nesting of arrays and objects accepted; one more level is [`Error::TooDeep`].
pub const MAX_DEPTH: usize = 1000;

/// Parse JSON text as `JSON.parse` does.
pub fn parse(text: &str) -> Result<Value> {
    Parser {
        text,
        src: text.as_bytes(),
        pos: 0,
        values: Vec::new(),
        entries: Vec::new(),
    }
    .run()
}

/// Parse a line's bytes as `JSON.parse(new TextDecoder().decode(bytes))` does: bytes that are
/// not UTF-8 read as U+FFFD (`String::from_utf8_lossy`). Valid UTF-8, the common case, is
/// checked by the fast validator and parsed in place, never copied.
pub fn parse_bytes(bytes: &[u8]) -> Result<Value> {
    match std::str::from_utf8(bytes) {
        Ok(text) => parse(text),
        Err(_) => parse(&String::from_utf8_lossy(bytes)),
    }
}

/// A container still being filled; its finished children sit on the parser's scratch stacks
/// from `start` on.
enum Frame {
    Array {
        start: usize,
    },
    /// Also holds the key whose value is being parsed.
    Object {
        start: usize,
        key: JsString,
    },
}

struct Parser<'a> {
    text: &'a str,
    src: &'a [u8],
    pos: usize,
    /// Finished elements of all open arrays, innermost last (one buffer, so no per-array regrowth).
    values: Vec<Value>,
    /// Finished entries of all open objects, innermost last.
    entries: Vec<(JsString, Value)>,
}

impl Parser<'_> {
    fn run(mut self) -> Result<Value> {
        let mut stack: Vec<Frame> = Vec::new();
        self.skip_ws();
        'value: loop {
            // Parse one value starting at `pos` (whitespace already skipped).
            let mut value = match self.peek() {
                Some(b'{') => {
                    self.open(stack.len())?;
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        Value::Object(Object::new())
                    } else {
                        let key = self.key()?;
                        stack.push(Frame::Object {
                            start: self.entries.len(),
                            key,
                        });
                        continue 'value;
                    }
                }
                Some(b'[') => {
                    self.open(stack.len())?;
                    if self.peek() == Some(b']') {
                        self.pos += 1;
                        Value::Array(Vec::new())
                    } else {
                        stack.push(Frame::Array {
                            start: self.values.len(),
                        });
                        continue 'value;
                    }
                }
                Some(b'"') => {
                    self.pos += 1;
                    Value::String(self.string()?)
                }
                Some(b'-' | b'0'..=b'9') => Value::Number(self.number()?),
                Some(b't') => self.literal(b"true", Value::Bool(true))?,
                Some(b'f') => self.literal(b"false", Value::Bool(false))?,
                Some(b'n') => self.literal(b"null", Value::Null)?,
                Some(_) => return Err(self.err("unexpected character, expected a value")),
                None => return Err(self.err("unexpected end of input, expected a value")),
            };
            // Hand the finished value to its container, closing containers as they end.
            loop {
                self.skip_ws();
                match stack.last_mut() {
                    None => {
                        if self.pos != self.src.len() {
                            return Err(self.err("unexpected text after the JSON value"));
                        }
                        return Ok(value);
                    }
                    Some(&mut Frame::Array { start }) => {
                        self.values.push(value);
                        match self.peek() {
                            Some(b',') => {
                                self.pos += 1;
                                self.skip_ws();
                                continue 'value;
                            }
                            Some(b']') => {
                                self.pos += 1;
                                stack.pop();
                                value = Value::Array(self.values.drain(start..).collect());
                            }
                            _ => return Err(self.err("expected ',' or ']' in array")),
                        }
                    }
                    Some(Frame::Object { start, key }) => {
                        let start = *start;
                        self.entries.push((std::mem::take(key), value));
                        match self.peek() {
                            Some(b',') => {
                                self.pos += 1;
                                self.skip_ws();
                                *key = self.key()?;
                                continue 'value;
                            }
                            Some(b'}') => {
                                self.pos += 1;
                                stack.pop();
                                let entries = self.entries.drain(start..).collect();
                                value = Value::Object(Object::from_parsed(entries));
                            }
                            _ => return Err(self.err("expected ',' or '}' in object")),
                        }
                    }
                }
            }
        }
    }

    /// Step over `{` or `[` at depth `depth` and the whitespace after it.
    fn open(&mut self, depth: usize) -> Result<()> {
        if depth >= MAX_DEPTH {
            return Err(Error::TooDeep {
                offset: self.pos,
                limit: MAX_DEPTH,
            });
        }
        self.pos += 1;
        self.skip_ws();
        Ok(())
    }

    /// An object key, its `:` and the whitespace before the value.
    fn key(&mut self) -> Result<JsString> {
        if self.peek() != Some(b'"') {
            return Err(self.err("expected a string key in object"));
        }
        self.pos += 1;
        let key = self.string()?;
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(self.err("expected ':' after object key"));
        }
        self.pos += 1;
        self.skip_ws();
        Ok(key)
    }

    /// The rest of a string after its opening quote.
    fn string(&mut self) -> Result<JsString> {
        let start = self.pos;
        let run_end = self.run_end(start);
        if self.src.get(run_end) == Some(&b'"') {
            self.pos = run_end + 1;
            let text = &self.src[start..run_end];
            return Ok(match interned(text) {
                Some(word) => JsString::from_static(word),
                None => JsString::from_wtf8_unchecked(text.to_vec()),
            });
        }
        // Slow path: escapes (or an error). Copy unescaped runs in bulk.
        let mut buf = Vec::with_capacity(run_end - start + 16);
        let mut run_start = start;
        let mut pos = run_end;
        loop {
            buf.extend_from_slice(&self.src[run_start..pos]);
            match self.src.get(pos) {
                Some(b'"') => {
                    self.pos = pos + 1;
                    return Ok(JsString::from_wtf8_unchecked(buf));
                }
                Some(b'\\') => pos = self.escape(pos, &mut buf)?,
                Some(_) => {
                    self.pos = pos;
                    return Err(self.err("unescaped control character in string"));
                }
                None => {
                    self.pos = start.saturating_sub(1);
                    return Err(self.err("unterminated string"));
                }
            }
            run_start = pos;
            pos = self.run_end(pos);
        }
    }

    /// The end of the plain run starting at `from`: the first `"`, `\`, control byte, or the end.
    fn run_end(&self, from: usize) -> usize {
        from + plain_run_len(&self.src[from..])
    }

    /// Decode the escape at `at` (a backslash) into `buf`; returns the position after it.
    fn escape(&mut self, at: usize, buf: &mut Vec<u8>) -> Result<usize> {
        let simple = match self.src.get(at + 1) {
            Some(b'"') => b'"',
            Some(b'\\') => b'\\',
            Some(b'/') => b'/',
            Some(b'b') => 0x08,
            Some(b'f') => 0x0C,
            Some(b'n') => b'\n',
            Some(b'r') => b'\r',
            Some(b't') => b'\t',
            Some(b'u') => return self.unicode_escape(at, buf),
            _ => {
                self.pos = at;
                return Err(self.err("invalid escape in string"));
            }
        };
        buf.push(simple);
        Ok(at + 2)
    }

    /// Decode `\uXXXX` at `at`, pairing it with a following low-surrogate escape when it is a high
    /// surrogate; a lone surrogate is written as 3-byte WTF-8.
    fn unicode_escape(&mut self, at: usize, buf: &mut Vec<u8>) -> Result<usize> {
        let Some(unit) = self.hex4(at + 2) else {
            self.pos = at;
            return Err(self.err("invalid \\u escape in string"));
        };
        let mut end = at + 6;
        let code = if (0xD800..0xDC00).contains(&unit)
            && self.src.get(end..end + 2) == Some(b"\\u".as_slice())
        {
            match self.hex4(end + 2) {
                Some(low @ 0xDC00..=0xDFFF) => {
                    end += 6;
                    0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                }
                _ => unit,
            }
        } else {
            unit
        };
        match char::from_u32(code) {
            Some(c) => {
                let mut tmp = [0u8; 4];
                buf.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
            }
            None => {
                // A lone surrogate (U+D800..=U+DFFF): its generalized UTF-8 (WTF-8) form.
                #[expect(
                    clippy::cast_possible_truncation,
                    reason = "each part is masked to a byte"
                )]
                buf.extend_from_slice(&[
                    (0xE0 | (code >> 12)) as u8,
                    (0x80 | ((code >> 6) & 0x3F)) as u8,
                    (0x80 | (code & 0x3F)) as u8,
                ]);
            }
        }
        Ok(end)
    }

    /// Four hex digits at `at`, if present.
    fn hex4(&self, at: usize) -> Option<u32> {
        let digits = self.src.get(at..at + 4)?;
        digits.iter().try_fold(0u32, |acc, &b| {
            let d = char::from(b).to_digit(16)?;
            Some(acc << 4 | d)
        })
    }

    /// A number; `pos` is at its first byte (`-` or a digit).
    fn number(&mut self) -> Result<f64> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let mut int: u64 = 0;
        let int_start = self.pos;
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                while let Some(d @ b'0'..=b'9') = self.peek() {
                    int = int.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
                    self.pos += 1;
                }
            }
            _ => return Err(self.err("invalid number: expected a digit")),
        }
        let int_digits = self.pos - int_start;
        let mut plain_int = true;
        if self.peek() == Some(b'.') {
            plain_int = false;
            self.pos += 1;
            self.digits("invalid number: expected a digit after '.'")?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            plain_int = false;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            self.digits("invalid number: expected a digit in the exponent")?;
        }
        if plain_int && int_digits <= 15 {
            // Below 10^15 < 2^53: exact in binary64.
            #[expect(
                clippy::cast_precision_loss,
                reason = "at most 15 digits, exact in f64"
            )]
            let x = int as f64;
            return Ok(if negative { -x } else { x });
        }
        // Rust's float parser is correctly rounded and gives ±inf on overflow, as JS does.
        self.text[start..self.pos]
            .parse::<f64>()
            .map_err(|_| Error::Json {
                offset: start,
                reason: "invalid number",
            })
    }

    /// One or more ASCII digits.
    fn digits(&mut self, reason: &'static str) -> Result<()> {
        let from = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        if self.pos == from {
            return Err(self.err(reason));
        }
        Ok(())
    }

    /// `true`, `false` or `null`.
    fn literal(&mut self, word: &[u8], value: Value) -> Result<Value> {
        if self.src.get(self.pos..self.pos + word.len()) == Some(word) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.err("invalid literal"))
        }
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn err(&self, reason: &'static str) -> Error {
        Error::Json {
            offset: self.pos,
            reason,
        }
    }
}

#[cfg(test)]
mod tests;
