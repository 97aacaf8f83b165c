//! DSH's session-root path encoding (spec §1.2): where a session lives under a DSH JSONL root,
//! `<root>/<project dir>/<session dir>/session.jsonl[.zstd]`.
//!
//! Invariants kept here:
//! - both encoders walk UTF-16 code units, exactly like the TypeScript (`charCodeAt`), so an astral
//!   character becomes two escapes and a lone surrogate one; ids are accepted as [`JsString`]
//!   (WTF-8) so lone surrogates survive;
//! - [`encode_segment`] is injective and [`decode_segment`] is its exact inverse: decoding accepts
//!   only canonical encodings (it re-encodes and compares), so one directory name maps to one id;
//! - [`project_key`] is lossy by design (separator runs collapse, the slug is cut at 251
//!   characters) and always yields ASCII of at most 255 bytes.

use crate::json::JsString;
use crate::{Error, Result};

/// Project directory for a session whose header has no `cwd`.
pub const NO_CWD_DIR: &str = "_no-cwd";
/// Transcript file name with `compression: 'zstd'` (DSH's default).
pub const ZSTD_FILE_NAME: &str = "session.jsonl.zstd";
/// Transcript file name with `compression: 'none'`.
pub const PLAIN_FILE_NAME: &str = "session.jsonl";
/// Longest project slug kept between the `--` delimiters.
const MAX_SLUG_UNITS: usize = 251;

/// A string DSH sees as a sequence of UTF-16 code units.
pub trait Utf16Units {
    /// The code units, as JS `charCodeAt` would return them.
    fn utf16_units(&self) -> Vec<u16>;
}

impl Utf16Units for str {
    fn utf16_units(&self) -> Vec<u16> {
        self.encode_utf16().collect()
    }
}

impl Utf16Units for String {
    fn utf16_units(&self) -> Vec<u16> {
        self.as_str().utf16_units()
    }
}

impl Utf16Units for JsString {
    fn utf16_units(&self) -> Vec<u16> {
        wtf8_to_units(self.as_wtf8())
    }
}

/// DSH `encodeSegment`: one safe path segment for a session id.
pub fn encode_segment<S: Utf16Units + ?Sized>(id: &S) -> Result<String> {
    encode_units(&id.utf16_units())
}

/// The id a segment written by [`encode_segment`] stands for; refuses anything
/// [`encode_segment`] would not have produced.
pub fn decode_segment(segment: &str) -> Result<JsString> {
    const NOT_ENCODED: Error = Error::PathComponent("not a DSH-encoded session directory name");
    let bytes = segment.as_bytes();
    let mut units = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'~' {
            let hex = bytes.get(i + 1..i + 5).ok_or(NOT_ENCODED)?;
            let text = std::str::from_utf8(hex).map_err(|_| NOT_ENCODED)?;
            units.push(u16::from_str_radix(text, 16).map_err(|_| NOT_ENCODED)?);
            i += 5;
        } else {
            units.push(u16::from(b));
            i += 1;
        }
    }
    if encode_units(&units).ok().as_deref() != Some(segment) {
        return Err(NOT_ENCODED);
    }
    Ok(units_to_wtf8(&units))
}

/// DSH `projectKey`: the readable, lossy project directory name for a `cwd`.
pub fn project_key<S: Utf16Units + ?Sized>(cwd: &S) -> Result<String> {
    let units = cwd.utf16_units();
    if units.is_empty() {
        return Err(Error::PathComponent("cannot encode an empty project path"));
    }
    let mut readable = String::with_capacity(units.len());
    let mut separator_run = false;
    for unit in units {
        if matches!(unit, 0x2F | 0x5C | 0x3A) {
            // `/`, `\`, `:`
            if !separator_run {
                readable.push('-');
            }
            separator_run = true;
        } else {
            push_unit(&mut readable, unit);
            separator_run = false;
        }
    }
    let mut slug = readable.trim_start_matches('-').to_owned();
    if slug.is_empty() {
        slug.push_str("root");
    }
    // All ASCII, so bytes are code units and truncation cannot split a character.
    slug.truncate(MAX_SLUG_UNITS);
    Ok(format!("--{slug}--"))
}

/// `(project directory, session directory)` names for a session: the components DSH's
/// `logPath(root, cwd, id, compression)` joins under the root, before the file name
/// ([`ZSTD_FILE_NAME`] or [`PLAIN_FILE_NAME`]). A missing `cwd` selects [`NO_CWD_DIR`].
pub fn log_path_components<S: Utf16Units + ?Sized>(
    cwd: Option<&S>,
    id: &S,
) -> Result<(String, String)> {
    let project = match cwd {
        Some(cwd) => project_key(cwd)?,
        None => NO_CWD_DIR.to_owned(),
    };
    Ok((project, encode_segment(id)?))
}

fn encode_units(units: &[u16]) -> Result<String> {
    match units {
        [] => Err(Error::PathComponent("cannot encode an empty path segment")),
        [0x2E] => Ok("~002E".to_owned()),
        [0x2E, 0x2E] => Ok("~002E~002E".to_owned()),
        _ => {
            let mut out = String::with_capacity(units.len());
            for &unit in units {
                push_unit(&mut out, unit);
            }
            Ok(out)
        }
    }
}

/// A safe unit (`[A-Za-z0-9._-]`) as itself, anything else (including `~`) as `~XXXX`.
fn push_unit(out: &mut String, unit: u16) {
    match u8::try_from(unit) {
        Ok(b) if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') => {
            out.push(char::from(b));
        }
        _ => out.push_str(&format!("~{unit:04X}")),
    }
}

/// UTF-16 code units of WTF-8 bytes: a 4-byte sequence is a surrogate pair, a 3-byte sequence in
/// `ED A0..=BF` a lone surrogate. Bytes that do not form a sequence (never produced by
/// [`JsString`]) count as U+FFFD.
fn wtf8_to_units(bytes: &[u8]) -> Vec<u16> {
    let mut units = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&lead) = bytes.get(i) {
        let len = match lead {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 0,
        };
        let scalar = bytes
            .get(i + 1..i + len.max(1))
            .filter(|tail| len > 0 && tail.iter().all(|&b| b & 0xC0 == 0x80))
            .map(|tail| {
                let mask = if len == 1 { 0x7F } else { 0x7F >> len };
                let lead_bits = u32::from(lead) & mask;
                tail.iter()
                    .fold(lead_bits, |acc, &b| (acc << 6) | u32::from(b & 0x3F))
            });
        match scalar {
            Some(c) => {
                let mut pair = [0u16; 2];
                match char::from_u32(c) {
                    Some(ch) => units.extend_from_slice(ch.encode_utf16(&mut pair)),
                    // A lone surrogate (0xD800..=0xDFFF) is one unit.
                    None => units.push(u16::try_from(c).unwrap_or(0xFFFD)),
                }
                i += len;
            }
            None => {
                units.push(0xFFFD);
                i += 1;
            }
        }
    }
    units
}

/// WTF-8 of UTF-16 code units: pairs join into one scalar, lone surrogates keep their 3-byte form.
fn units_to_wtf8(units: &[u16]) -> JsString {
    let mut out = Vec::with_capacity(units.len());
    for decoded in char::decode_utf16(units.iter().copied()) {
        match decoded {
            Ok(ch) => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
            }
            Err(lone) => {
                let u = lone.unpaired_surrogate();
                out.extend_from_slice(&[
                    0xE0 | (u >> 12) as u8,
                    0x80 | ((u >> 6) & 0x3F) as u8,
                    0x80 | (u & 0x3F) as u8,
                ]);
            }
        }
    }
    JsString::from_wtf8_unchecked(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lone(unit: u16) -> JsString {
        units_to_wtf8(&[unit, u16::from(b'x')])
    }

    #[test]
    fn session_ids_reproduce_the_spec_table() -> Result<()> {
        let rows: [(&str, &str); 10] = [
            ("abc-123_X.y", "abc-123_X.y"),
            ("a/b", "a~002Fb"),
            ("a~b", "a~007Eb"),
            ("../etc", "..~002Fetc"),
            ("é", "~00E9"),
            ("😀", "~D83D~DE00"),
            ("Sess ion", "Sess~0020ion"),
            ("{{sessionId}}", "~007B~007BsessionId~007D~007D"),
            (".", "~002E"),
            ("..", "~002E~002E"),
        ];
        for (id, encoded) in rows {
            assert_eq!(encode_segment(id)?, encoded, "id {id:?}");
            assert_eq!(
                encode_segment(&JsString::from(id))?,
                encoded,
                "JsString id {id:?}"
            );
            assert!(decode_segment(encoded)?.eq_str(id), "decode {encoded:?}");
        }
        Ok(())
    }

    #[test]
    fn lone_surrogates_are_one_escape_and_round_trip() -> Result<()> {
        let id = lone(0xD800);
        assert_eq!(id.as_wtf8(), [0xED, 0xA0, 0x80, b'x']);
        assert_eq!(encode_segment(&id)?, "~D800x");
        assert_eq!(decode_segment("~D800x")?, id);
        let low = lone(0xDC01);
        assert_eq!(encode_segment(&low)?, "~DC01x");
        assert_eq!(decode_segment("~DC01x")?, low);
        Ok(())
    }

    #[test]
    fn escaped_pairs_decode_to_one_scalar() -> Result<()> {
        assert!(decode_segment("~D83D~DE00")?.eq_str("😀"));
        Ok(())
    }

    #[test]
    fn empty_inputs_are_refused() {
        assert!(encode_segment("").is_err());
        assert!(project_key("").is_err());
        assert!(decode_segment("").is_err());
    }

    #[test]
    fn non_canonical_segments_do_not_decode() {
        for bad in [
            "~0041",
            "~00e9",
            "~+0E9",
            "a~00",
            "é",
            "a b",
            "~",
            ".",
            "..",
            "~002E~002",
        ] {
            assert!(decode_segment(bad).is_err(), "{bad:?} decoded");
        }
    }

    #[test]
    fn project_keys_reproduce_the_spec_table() -> Result<()> {
        let rows: [(&str, &str); 8] = [
            ("/home/u/proj", "--home-u-proj--"),
            ("/", "--root--"),
            ("C:\\Users\\me\\repo", "--C-Users-me-repo--"),
            ("/var//a///b/", "--var-a-b---"),
            ("/srv/my project", "--srv-my~0020project--"),
            ("/data/ünï", "--data-~00FCn~00EF--"),
            ("~/x", "--~007E-x--"),
            ("--lead", "--lead--"),
        ];
        for (cwd, key) in rows {
            assert_eq!(project_key(cwd)?, key, "cwd {cwd:?}");
        }
        Ok(())
    }

    #[test]
    fn project_keys_are_cut_at_251_slug_characters() -> Result<()> {
        let long = format!("/{}", "é".repeat(100));
        let key = project_key(long.as_str())?;
        assert_eq!(key.len(), 255);
        assert!(key.starts_with("--~00E9") && key.ends_with("~00E9~--"));
        Ok(())
    }

    #[test]
    fn log_path_components_pick_the_project_and_session_dirs() -> Result<()> {
        assert_eq!(
            log_path_components(Some("/home/u/proj"), "a/b")?,
            ("--home-u-proj--".to_owned(), "a~002Fb".to_owned())
        );
        assert_eq!(
            log_path_components(None, "s1")?,
            (NO_CWD_DIR.to_owned(), "s1".to_owned())
        );
        let id = JsString::from("x");
        assert_eq!(log_path_components(None, &id)?.1, "x");
        Ok(())
    }
}
