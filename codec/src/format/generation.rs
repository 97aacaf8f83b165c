//! Format generations (later-format-spec §3.1): a session directory holds one file per format
//! version, `session.jsonl[.zstd]` for V0 and `session.vN.jsonl[.zstd]` for VN ≥ 1. The
//! numerically highest canonical one is served; the others are frozen history.
//!
//! Invariant: [`parse_generation_name`] and [`generation_file_name`] are exact inverses over
//! canonical names, so a name that does not round-trip (`.v0`, leading zeros, upper case, temp
//! names, a foreign suffix) is not a generation at all.

/// The newest format DSH writes (`SESSION_FORMAT_VERSION` of DSH 0.2).
pub const NEWEST_VERSION: u32 = 4;

/// The suffix of compressed generation files.
const ZSTD_SUFFIX: &str = ".zstd";

/// A canonical generation file name: its format version and whether it is `.jsonl.zstd`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct GenerationName {
    /// The N of `session.vN.jsonl` (0 for `session.jsonl`).
    pub version: u32,
    /// Whether the name ends in `.jsonl.zstd`.
    pub zstd: bool,
}

/// The generation a file name denotes (DSH's `^session(?:\.v([1-9][0-9]*))?\.jsonl$` plus the
/// encoding suffix), or `None` when the name is not canonical.
pub fn parse_generation_name(name: &str) -> Option<GenerationName> {
    let (stem, zstd) = match name.strip_suffix(ZSTD_SUFFIX) {
        Some(stem) => (stem, true),
        None => (name, false),
    };
    let middle = stem.strip_prefix("session")?.strip_suffix(".jsonl")?;
    let version = if middle.is_empty() {
        0
    } else {
        let digits = middle.strip_prefix(".v")?;
        if digits.is_empty()
            || digits.starts_with('0')
            || !digits.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        // DSH requires a safe integer; beyond u32 it names a (far) newer harness: saturate.
        let v = digits.parse::<u64>().ok().filter(|v| *v < (1 << 53))?;
        u32::try_from(v).unwrap_or(u32::MAX)
    };
    Some(GenerationName { version, zstd })
}

/// The canonical file name of generation `version` in the given encoding.
pub fn generation_file_name(version: u32, zstd: bool) -> String {
    let suffix = if zstd { ZSTD_SUFFIX } else { "" };
    if version == 0 {
        format!("session.jsonl{suffix}")
    } else {
        format!("session.v{version}.jsonl{suffix}")
    }
}

/// DSH's refusal when a generation file's header names another version than its file name.
pub fn version_mismatch(file_version: u32, header_version: &str) -> String {
    format!(
        "resolved JSONL source filename identifies v{file_version}, but its header identifies v{header_version}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_names() {
        let g = |version, zstd| Some(GenerationName { version, zstd });
        assert_eq!(parse_generation_name("session.jsonl"), g(0, false));
        assert_eq!(parse_generation_name("session.jsonl.zstd"), g(0, true));
        assert_eq!(parse_generation_name("session.v4.jsonl.zstd"), g(4, true));
        assert_eq!(parse_generation_name("session.v12.jsonl"), g(12, false));
        for not in [
            "session.v0.jsonl",
            "session.v03.jsonl",
            "session.V3.jsonl",
            "session.v.jsonl",
            "session.v2x.jsonl",
            "session.jsonl.zstd.abc.tmp",
            "session.migration.0123456789abcdef.jsonl.tmp",
            "Session.jsonl",
            "session.v2.jsonl.gz",
            "session.v99999999999999999999.jsonl",
            "other.jsonl",
        ] {
            assert_eq!(parse_generation_name(not), None, "{not}");
        }
    }

    #[test]
    fn names_round_trip() {
        for version in [0, 1, 2, 3, 4, 10, 123] {
            for zstd in [false, true] {
                let name = generation_file_name(version, zstd);
                assert_eq!(
                    parse_generation_name(&name),
                    Some(GenerationName { version, zstd }),
                    "{name}"
                );
            }
        }
    }
}
