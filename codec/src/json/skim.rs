//! The indexing skim: `JSON.parse`'s verdict on one line without building its value, and where
//! the envelope's members sit, so a reader builds only the values it needs.
//!
//! Invariants kept here (the differential test `codec/tests/skim_oracle.rs` checks them against
//! [`super::parse`] over a million generated and adversarial lines):
//! - the verdict is `parse(&String::from_utf8_lossy(line))`'s: accepted, a syntax error, or
//!   nesting deeper than [`MAX_DEPTH`] ([`Rejected`]). The same grammar is checked in the same
//!   left-to-right order, so the first defect decides in both. Raw bytes are scanned: lossy
//!   decoding only turns bytes ≥ 0x80 into U+FFFD, never adds or removes an ASCII byte, and a
//!   byte ≥ 0x80 is plain inside a string and a syntax error outside one under both;
//! - an [`Envelope`] lists the members of the indexed objects (the line's top-level object, its
//!   `data` object, and the `data.message` and `data.chunk` objects) in JS property order with
//!   their value spans. That order is the text's order only when those objects' keys are unique, unescaped, ASCII and
//!   not index-like; any other object line is [`Skim::Unusual`] (parse it in full), as is a line
//!   whose value is not an object;
//! - the value of a member's span, parsed alone ([`Envelope::value`]), is the value the full
//!   parser gives that property; a span's kind and length agree with it.

use std::borrow::Cow;
use std::ops::Range;

use super::parse::{parse_bytes, MAX_DEPTH};
use super::plain_run::plain_run_len;
use super::value::Value;
use crate::Result;

/// Why `JSON.parse` throws on a line (the full parser on the same line gives the exact error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejected {
    /// Not JSON text.
    Syntax,
    /// Nested deeper than [`MAX_DEPTH`] before any syntax error.
    TooDeep,
}

/// What the skim found in an accepted line.
#[derive(Debug)]
pub enum Skim<'a> {
    /// An object whose indexed members are listed.
    Indexed(Envelope<'a>),
    /// Valid JSON the skim does not index: not an object, or an indexed object with a
    /// duplicate, escaped, non-ASCII or index-like key. Parse it in full.
    Unusual,
}

/// The objects whose members an [`Envelope`] lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// The line's top-level object.
    Top,
    /// The top-level object's `data` object.
    Data,
    /// `data.message`, when an object.
    Message,
    /// `data.chunk`, when an object (an `assistant/chunk`'s delta).
    Chunk,
}

impl Level {
    /// The level of an object held under `key` by an object at this level.
    fn child(self, key: &[u8]) -> Option<Level> {
        match (self, key) {
            (Level::Top, b"data") => Some(Level::Data),
            (Level::Data, b"message") => Some(Level::Message),
            (Level::Data, b"chunk") => Some(Level::Chunk),
            _ => None,
        }
    }
}

/// What kind of value a span holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An object with this many members in its text (a duplicate key counts each time).
    Object(u32),
    /// An array with this many elements.
    Array(u32),
    /// A string; `escaped` when it holds an escape (or bytes that are not UTF-8), so its text
    /// must be decoded.
    String {
        /// Whether decoding is needed.
        escaped: bool,
    },
    /// A number.
    Number,
    /// `true` or `false`.
    Bool(bool),
    /// `null`.
    Null,
}

/// Where a value sits in the line, and its kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    /// Byte range of the value's text.
    pub range: Range<usize>,
    /// Its kind.
    pub kind: Kind,
}

/// One member of an indexed object.
#[derive(Clone, Debug)]
struct Member {
    level: Level,
    key: Range<usize>,
    value: Span,
}

/// The indexed members of an accepted object line.
#[derive(Debug)]
pub struct Envelope<'a> {
    line: &'a [u8],
    members: Vec<Member>,
}

impl<'a> Envelope<'a> {
    /// The member `key` of the object at `level`, if present.
    pub fn get(&self, level: Level, key: &str) -> Option<&Span> {
        self.members
            .iter()
            .find(|m| m.level == level && &self.line[m.key.clone()] == key.as_bytes())
            .map(|m| &m.value)
    }

    /// The members of the object at `level`, in order: key and value span.
    pub fn members(&self, level: Level) -> impl Iterator<Item = (&'a str, &Span)> + '_ {
        let line = self.line;
        self.members
            .iter()
            .filter(move |m| m.level == level)
            .map(move |m| {
                // Keys at indexed levels are ASCII (else the line is `Unusual`).
                (
                    std::str::from_utf8(&line[m.key.clone()]).unwrap_or(""),
                    &m.value,
                )
            })
    }

    /// The text of `span`.
    pub fn text(&self, span: &Span) -> &'a [u8] {
        &self.line[span.range.clone()]
    }

    /// The string `span` holds, without allocating when it needs no decoding; `None` if it is
    /// not a string or holds a lone surrogate (use [`Envelope::value`] for those).
    pub fn str(&self, span: &Span) -> Option<Cow<'a, str>> {
        let Kind::String { escaped } = span.kind else {
            return None;
        };
        let inner = &self.line[span.range.start + 1..span.range.end - 1];
        if !escaped {
            return std::str::from_utf8(inner).ok().map(Cow::Borrowed);
        }
        match self.value(span).ok()? {
            Value::String(s) => s.as_str().map(|s| Cow::Owned(s.to_owned())),
            _ => None,
        }
    }

    /// The number `span` holds, exactly as the full parser reads it.
    pub fn number(&self, span: &Span) -> Option<f64> {
        if span.kind != Kind::Number {
            return None;
        }
        match self.value(span).ok()? {
            Value::Number(x) => Some(x),
            _ => None,
        }
    }

    /// The value `span` holds, built by the full parser.
    pub fn value(&self, span: &Span) -> Result<Value> {
        parse_bytes(self.text(span))
    }
}

/// Skim `line` (without its `\n`).
pub fn skim(line: &[u8]) -> std::result::Result<Skim<'_>, Rejected> {
    Skimmer {
        src: line,
        pos: 0,
        members: Vec::new(),
        unusual: false,
    }
    .run()
}

/// An open container.
struct Open {
    start: usize,
    /// Members or elements finished so far.
    count: u32,
    /// Objects: the level indexed, if any, and the key whose value is being scanned.
    object: Option<(Option<Level>, Range<usize>)>,
}

struct Skimmer<'a> {
    src: &'a [u8],
    pos: usize,
    members: Vec<Member>,
    /// An indexed object had a key the envelope cannot list in JS order.
    unusual: bool,
}

impl<'a> Skimmer<'a> {
    fn run(mut self) -> std::result::Result<Skim<'a>, Rejected> {
        let mut stack: Vec<Open> = Vec::new();
        self.skip_ws();
        'value: loop {
            let start = self.pos;
            let kind = match self.peek() {
                Some(open @ (b'{' | b'[')) => {
                    if stack.len() >= MAX_DEPTH {
                        return Err(Rejected::TooDeep);
                    }
                    self.pos += 1;
                    self.skip_ws();
                    let close = if open == b'{' { b'}' } else { b']' };
                    if self.peek() == Some(close) {
                        self.pos += 1;
                        if open == b'{' {
                            Kind::Object(0)
                        } else {
                            Kind::Array(0)
                        }
                    } else {
                        let object = if open == b'{' {
                            let level = match stack.last() {
                                None => Some(Level::Top),
                                Some(Open {
                                    object: Some((Some(level), key)),
                                    ..
                                }) => level.child(&self.src[key.clone()]),
                                Some(_) => None,
                            };
                            let key = self.key(level)?;
                            Some((level, key))
                        } else {
                            None
                        };
                        stack.push(Open {
                            start,
                            count: 0,
                            object,
                        });
                        continue 'value;
                    }
                }
                Some(b'"') => {
                    self.pos += 1;
                    Kind::String {
                        escaped: self.string()?,
                    }
                }
                Some(b'-' | b'0'..=b'9') => {
                    self.number()?;
                    Kind::Number
                }
                Some(b't') => self.literal(b"true", Kind::Bool(true))?,
                Some(b'f') => self.literal(b"false", Kind::Bool(false))?,
                Some(b'n') => self.literal(b"null", Kind::Null)?,
                _ => return Err(Rejected::Syntax),
            };
            let mut value = Span {
                range: start..self.pos,
                kind,
            };
            // Hand the finished value to its container, closing containers as they end.
            loop {
                self.skip_ws();
                let Some(open) = stack.last_mut() else {
                    if self.pos != self.src.len() {
                        return Err(Rejected::Syntax);
                    }
                    return Ok(match value.kind {
                        Kind::Object(_) if !self.unusual => Skim::Indexed(Envelope {
                            line: self.src,
                            members: self.members,
                        }),
                        _ => Skim::Unusual,
                    });
                };
                open.count = open.count.saturating_add(1);
                let (close, kind) = match &open.object {
                    None => (b']', Kind::Array(open.count)),
                    Some((level, key)) => {
                        if let Some(level) = *level {
                            self.members.push(Member {
                                level,
                                key: key.clone(),
                                value: value.clone(),
                            });
                        }
                        (b'}', Kind::Object(open.count))
                    }
                };
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        self.skip_ws();
                        if let Some((level, key)) = &mut open.object {
                            *key = self.key(*level)?;
                        }
                        continue 'value;
                    }
                    Some(c) if c == close => {
                        self.pos += 1;
                        let start = open.start;
                        stack.pop();
                        value = Span {
                            range: start..self.pos,
                            kind,
                        };
                    }
                    _ => return Err(Rejected::Syntax),
                }
            }
        }
    }

    /// An object key of an object at `level` (indexed or not), its `:` and the whitespace
    /// before the value; returns the key's text range (inside the quotes). Marks the line
    /// unusual when an indexed object's key cannot be listed in text order.
    fn key(&mut self, level: Option<Level>) -> std::result::Result<Range<usize>, Rejected> {
        if self.peek() != Some(b'"') {
            return Err(Rejected::Syntax);
        }
        self.pos += 1;
        let start = self.pos;
        let escaped = self.string()?;
        let key = start..self.pos - 1;
        if let Some(level) = level {
            let text = &self.src[key.clone()];
            let plain =
                !escaped && text.is_ascii() && !text.first().is_some_and(u8::is_ascii_digit);
            // One object per level at most, unless a duplicate key already marked the line.
            let duplicate = self
                .members
                .iter()
                .any(|m| m.level == level && &self.src[m.key.clone()] == text);
            if !plain || duplicate {
                self.unusual = true;
            }
        }
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(Rejected::Syntax);
        }
        self.pos += 1;
        self.skip_ws();
        Ok(key)
    }

    /// The rest of a string after its opening quote; whether it needs decoding (an escape, or
    /// bytes that are not UTF-8).
    fn string(&mut self) -> std::result::Result<bool, Rejected> {
        let start = self.pos;
        let mut escaped = false;
        loop {
            self.pos += plain_run_len(&self.src[self.pos..]);
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    let inner = &self.src[start..self.pos - 1];
                    return Ok(
                        escaped || (!inner.is_ascii() && std::str::from_utf8(inner).is_err())
                    );
                }
                Some(b'\\') => {
                    escaped = true;
                    self.escape()?;
                }
                _ => return Err(Rejected::Syntax),
            }
        }
    }

    /// Step over the escape at `pos` (a backslash).
    fn escape(&mut self) -> std::result::Result<(), Rejected> {
        match self.src.get(self.pos + 1) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.pos += 2,
            Some(b'u') => {
                let hex = self
                    .src
                    .get(self.pos + 2..self.pos + 6)
                    .ok_or(Rejected::Syntax)?;
                if !hex.iter().all(u8::is_ascii_hexdigit) {
                    return Err(Rejected::Syntax);
                }
                self.pos += 6;
            }
            _ => return Err(Rejected::Syntax),
        }
        Ok(())
    }

    /// A number's grammar: `-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?`.
    fn number(&mut self) -> std::result::Result<(), Rejected> {
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits()?,
            _ => return Err(Rejected::Syntax),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            self.digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            self.digits()?;
        }
        Ok(())
    }

    /// One or more ASCII digits.
    fn digits(&mut self) -> std::result::Result<(), Rejected> {
        let from = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        if self.pos == from {
            return Err(Rejected::Syntax);
        }
        Ok(())
    }

    fn literal(&mut self, word: &[u8], kind: Kind) -> std::result::Result<Kind, Rejected> {
        if self.src.get(self.pos..self.pos + word.len()) == Some(word) {
            self.pos += word.len();
            Ok(kind)
        } else {
            Err(Rejected::Syntax)
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
}
