//! The bytes a JSON string holds as they are: everything but `"`, `\` and U+0000..=U+001F. Both
//! directions stop at the same bytes (the writer escapes them, the reader must decode or refuse
//! them), so both find the end of a plain run here, eight bytes at a time: most text has
//! nothing to escape.

/// The length of the longest prefix of `bytes` holding only plain bytes.
pub(crate) fn plain_run_len(bytes: &[u8]) -> usize {
    let mut at = 0;
    while let Some(word) = bytes
        .get(at..at + 8)
        .and_then(|w| <[u8; 8]>::try_from(w).ok())
    {
        let marks = stop_marks(u64::from_le_bytes(word));
        if marks != 0 {
            // The lowest mark is always a stop byte (see `stop_marks`).
            return at + (marks.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    bytes[at..]
        .iter()
        .position(|&b| is_stop(b))
        .map_or(bytes.len(), |i| at + i)
}

/// Whether `b` ends a plain run.
pub(crate) fn is_stop(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// The high bit of each byte of `word` (little-endian: the lowest byte first) that ends a plain
/// run, and of none if no byte does: the classic has-zero and has-less word tests, combined
/// without branches. Their borrow can mark a byte after a marked one wrongly, but never one
/// before it, so the lowest mark is right.
fn stop_marks(word: u64) -> u64 {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let zero_marks = |v: u64| v.wrapping_sub(ONES) & !v;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word;
    (below_space
        | zero_marks(word ^ (ONES * u64::from(b'"')))
        | zero_marks(word ^ (ONES * u64::from(b'\\'))))
        & HIGH
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn byte_by_byte(bytes: &[u8]) -> usize {
        bytes
            .iter()
            .position(|&b| is_stop(b))
            .unwrap_or(bytes.len())
    }

    #[test]
    fn finds_every_stop_byte_at_every_offset() {
        for b in 0..=u8::MAX {
            for len in 1..40 {
                for at in 0..len {
                    let mut bytes: Vec<u8> = (0..len).map(|k| b'a' + (k % 26) as u8).collect();
                    bytes[at] = b;
                    assert_eq!(
                        plain_run_len(&bytes),
                        byte_by_byte(&bytes),
                        "byte {b:#x} at {at} of {len}"
                    );
                }
            }
        }
    }

    proptest! {
        /// Any bytes, stop bytes often and several to a word (the borrow's false marks): the word
        /// scan ends where a byte-by-byte scan does.
        #[test]
        fn ends_where_a_byte_scan_ends(bytes in prop::collection::vec(
            prop_oneof![3 => 0x20u8..=0xFF, 1 => 0u8..0x20, 1 => Just(b'"'), 1 => Just(b'\\')],
            0..120,
        )) {
            prop_assert_eq!(plain_run_len(&bytes), byte_by_byte(&bytes));
        }
    }
}
