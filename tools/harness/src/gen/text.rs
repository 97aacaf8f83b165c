//! Deterministic pseudo-text: prose, code, tool output, ids and paths, and the token split a
//! streaming model would use.
//!
//! Invariant: every function is a pure function of the [`Rng`] state, and every string it
//! returns is valid UTF-8 (slicing only ever happens on char boundaries). The vocabulary mixes in
//! what real logs hold and a JSON writer must escape: quotes, backslashes, tabs, newlines, a rare
//! NUL, and non-ASCII (2-, 3- and 4-byte UTF-8).

use super::rng::Rng;

/// Prose vocabulary; a few non-ASCII words keep multi-byte UTF-8 in the mix.
#[rustfmt::skip]
const WORDS: &[&str] = &[
    "the", "a", "to", "of", "and", "in", "is", "it", "that", "for", "on", "with", "as", "this",
    "be", "we", "file", "function", "test", "tests", "error", "value", "session", "event", "log",
    "line", "seq", "batch", "store", "read", "write", "append", "replace", "surface", "message",
    "model", "tool", "result", "call", "step", "turn", "chunk", "row", "header", "index", "key",
    "bytes", "buffer", "crate", "module", "type", "struct", "field", "option", "default", "config",
    "path", "directory", "workspace", "command", "output", "input", "check", "build", "run", "fix",
    "update", "change", "remove", "add", "return", "now", "then", "first", "next", "last",
    "because", "so", "but", "if", "when", "all", "each", "only", "also", "still", "should", "must",
    "can", "will", "does", "not", "need", "let", "me", "look", "at", "see", "found", "compile",
    "clippy", "warning", "passes", "fails", "panic", "unwrap", "iterator", "vector", "string",
    "number", "parse", "stringify", "encode", "decode", "frame", "torn", "tail", "commit",
    "durable", "snapshot", "compaction", "summary", "user", "assistant", "reasoning", "delta",
    "stream", "finish", "usage", "tokens", "cache", "latency", "throughput", "benchmark", "corpus",
    "fixture", "expected", "actual", "mismatch", "offset", "length", "range", "start", "end",
    "order", "sorted", "contiguous", "rocksdb", "column", "family", "prefix", "iterator", "merge",
    "flush", "sync", "fsync", "crash", "recovery", "repair", "closer", "pending", "open", "close",
    "handle", "lock", "thread", "async", "café", "naïve", "—", "→", "über", "日本語", "测试", "✓", "😀",
    "résumé",
];

/// Snippets of code-like text, rich in characters JSON must escape.
const CODE_LINES: &[&str] = &[
    "fn main() {",
    "}",
    "    let mut buf = String::with_capacity(4096);",
    "    for (i, line) in text.lines().enumerate() {",
    "        println!(\"{i}: {line}\");",
    "    if path.ends_with(\".jsonl\") { return Ok(None); }",
    "\tlet re = Regex::new(r\"\\d+\\s*\\w+\")?;",
    "import { readFile } from \"node:fs/promises\";",
    "const rows = await store.list({ prefix: \"--home--\" });",
    "export function packChunkRuns(events: SessionEvent[]): StorageRecord[] {",
    "  return events.map((e) => JSON.stringify(e)).join(\"\\n\");",
    "#[derive(Clone, Debug, PartialEq)]",
    "pub struct Options { pub sync: bool, pub cache_mb: usize }",
    "    assert_eq!(got, expected, \"seq {seq} differs\");",
    "// TODO: handle the torn tail",
    "def parse(line):  # returns dict",
    "    return json.loads(line.strip())",
    "SELECT id, seq, data FROM events WHERE session = ?1 ORDER BY seq;",
    "C:\\Users\\dev\\project\\src\\main.rs",
    "echo \"done\" > /tmp/out.txt && cat /tmp/out.txt",
];

/// Tool names the synthetic agent calls.
pub(super) const TOOLS: &[&str] = &["bash", "read", "write", "grep", "edit"];

#[rustfmt::skip]
const DIRS: &[&str] = &[
    "src", "tests", "crates/core/src", "packages/session/src", "docs", "benches", "lib",
];

#[rustfmt::skip]
const FILES: &[&str] = &[
    "main.rs", "lib.rs", "mod.rs", "store.rs", "index.ts", "session.ts", "README.md", "Cargo.toml",
    "package.json", "format.md", "chunk-rows.ts", "scanner.rs", "notes.txt",
];

#[rustfmt::skip]
const PROJECTS: &[&str] = &[
    "sessionlog", "harness", "web-app", "billing-service", "dotfiles", "ml-pipeline", "cli-tools",
];

/// Append `n` words of prose (with punctuation and the occasional paragraph break) to `out`.
pub(crate) fn prose(rng: &mut Rng, out: &mut String, n: usize) {
    let mut sentence_left = rng.range(4, 18);
    let mut capital = out.is_empty() || out.ends_with(['.', '\n']);
    for _ in 0..n {
        if !(out.is_empty() || out.ends_with([' ', '\n'])) {
            out.push(' ');
        }
        let word = rng.pick(WORDS);
        if capital {
            let mut chars = word.chars();
            if let Some(c) = chars.next() {
                out.extend(c.to_uppercase());
                out.push_str(chars.as_str());
            }
            capital = false;
        } else if rng.chance(0.03) {
            out.push('`');
            out.push_str(word);
            out.push('`');
        } else if rng.chance(0.01) {
            out.push('"');
            out.push_str(word);
            out.push('"');
        } else {
            out.push_str(word);
        }
        sentence_left -= 1;
        if sentence_left == 0 {
            out.push_str(rng.pick(&[".", ".", ".", "?", "!", ":", ";"]));
            if rng.chance(0.12) {
                out.push_str("\n\n");
                if rng.chance(0.3) {
                    out.push_str("- ");
                }
            }
            capital = true;
            sentence_left = rng.range(4, 18);
        } else if rng.chance(0.06) {
            out.push(',');
        }
    }
    if !out.ends_with(['.', '?', '!', '\n']) {
        out.push('.');
    }
}

/// Prose of about `n` words as a new string.
pub(crate) fn prose_string(rng: &mut Rng, n: usize) -> String {
    let mut s = String::with_capacity(n * 7);
    prose(rng, &mut s, n);
    s
}

/// Append about `target` bytes of code-like lines to `out`.
pub(crate) fn code(rng: &mut Rng, out: &mut String, target: usize) {
    let end = out.len() + target;
    while out.len() < end {
        out.push_str(rng.pick(CODE_LINES));
        out.push('\n');
    }
}

/// Tool output of about `target` bytes in the style of `tool` (`read` numbers its lines).
pub(crate) fn tool_output(rng: &mut Rng, tool: &str, target: usize) -> String {
    let mut out = String::with_capacity(target + 64);
    match tool {
        "read" => {
            let mut line_no = rng.range(1, 400);
            while out.len() < target {
                out.push_str(&format!("{line_no:>6}\t"));
                out.push_str(rng.pick(CODE_LINES));
                out.push('\n');
                line_no += 1;
            }
        }
        "grep" => {
            while out.len() < target {
                out.push_str(&path(rng));
                out.push_str(&format!(":{}:", rng.range(1, 2000)));
                out.push_str(rng.pick(CODE_LINES));
                out.push('\n');
            }
        }
        _ => {
            while out.len() < target {
                if rng.chance(0.5) {
                    code(rng, &mut out, 1);
                } else {
                    let words = rng.index(12) + 3;
                    prose(rng, &mut out, words);
                    out.push('\n');
                }
                if rng.chance(0.002) {
                    // Real tool output occasionally carries a NUL (escaped as \u0000 on disk).
                    out.push('\0');
                }
            }
        }
    }
    out
}

/// A project directory name.
pub(crate) fn project(rng: &mut Rng) -> &'static str {
    rng.pick(PROJECTS)
}

/// A project-relative source path.
pub(crate) fn path(rng: &mut Rng) -> String {
    format!("{}/{}", rng.pick(DIRS), rng.pick(FILES))
}

/// A lowercase v4-style UUID, as DSH uses for session and message ids.
pub(crate) fn uuid(rng: &mut Rng) -> String {
    let a = rng.next_u64();
    let b = rng.next_u64();
    uuid_from_bits(a, b)
}

/// The v4-style UUID spelled from 128 random bits (version and variant bits forced).
pub(crate) fn uuid_from_bits(a: u64, b: u64) -> String {
    format!(
        "{:08x}-{:04x}-4{:03x}-{:x}{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        8 + (b >> 62),
        (b >> 48) & 0xfff,
        b & 0xffff_ffff_ffff
    )
}

/// A provider-style tool-call id (`call_00_…`).
pub(crate) fn call_id(rng: &mut Rng) -> String {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut id = String::from("call_00_");
    for _ in 0..24 {
        id.push(char::from(rng.pick(ALNUM)));
    }
    id
}

/// Words in the next streaming token: mostly one, often two, sometimes three.
fn words_per_token(rng: &mut Rng) -> u32 {
    match rng.below(20) {
        0..=10 => 1,
        11..=17 => 2,
        _ => 3,
    }
}

/// Split model text into streaming tokens: one to three words with the leading space, sometimes
/// a word split in two. Concatenating the pieces gives `text` back.
pub(crate) fn tokens<'a>(rng: &mut Rng, text: &'a str) -> Vec<&'a str> {
    let mut pieces = Vec::with_capacity(text.len() / 5 + 1);
    let mut start = 0;
    let mut words_in_piece = words_per_token(rng);
    for (i, c) in text.char_indices() {
        if i > start && c == ' ' {
            words_in_piece -= 1;
            if words_in_piece == 0 {
                pieces.push(&text[start..i]);
                start = i;
                words_in_piece = words_per_token(rng);
            }
        } else if i > start + 3 && c.is_ascii_alphabetic() && rng.chance(0.04) {
            pieces.push(&text[start..i]);
            start = i;
        }
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

/// Split tool-call argument JSON into deltas of 2–40 bytes (on char boundaries).
pub(crate) fn arg_pieces<'a>(rng: &mut Rng, text: &'a str) -> Vec<&'a str> {
    let mut pieces = Vec::with_capacity(text.len() / 10 + 1);
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + rng.index(39) + 2).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        pieces.push(&text[start..end]);
        start = end;
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_split_is_lossless() {
        let mut rng = Rng::new(7, 0);
        for _ in 0..50 {
            let text = prose_string(&mut rng, 80);
            assert_eq!(tokens(&mut rng, &text).concat(), text);
            assert_eq!(arg_pieces(&mut rng, &text).concat(), text);
        }
    }

    #[test]
    fn uuid_shape() {
        let id = uuid(&mut Rng::new(1, 2));
        let parts: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12], "{id}");
        assert_eq!(&id[14..15], "4");
    }
}
