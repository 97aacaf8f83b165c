//! The session counter (`C` in `sessions`): the next session number to allocate, a u64
//! big-endian value that writers merge in, never put.
//!
//! Invariant: the stored counter is past every session number a committed batch has used.
//! A creation fixes its counter value when it builds its batch and commits it afterwards, and
//! concurrent creations commit in any order. With a plain put, an older creation's lower value
//! could land last, and the next open would hand out a number that a stored session already
//! holds, whose keys the new session would then overwrite. Merged by maximum, commit order does
//! not matter. `Store::open` also takes the highest `N ‖ number` key into account, which repairs
//! a counter that a build from before this rule left too low.

/// The name RocksDB records for the counter's merge operator.
pub(crate) const MERGE_OPERATOR: &str = "sessionlog.counter.max";

/// Length of a stored counter value.
const LEN: usize = 8;

/// A counter value (or merge operand) for `next`.
pub(crate) fn encode(next: u64) -> [u8; LEN] {
    next.to_be_bytes()
}

/// A stored counter value, or `None` when it is not 8 bytes.
pub(crate) fn decode(bytes: &[u8]) -> Option<u64> {
    <[u8; LEN]>::try_from(bytes).ok().map(u64::from_be_bytes)
}

/// The merge of a stored value (if any) with `operands`: their maximum. `None`, when a value
/// is malformed, makes RocksDB report the counter as corrupt rather than guess.
pub(crate) fn merge_max<'a>(
    existing: Option<&[u8]>,
    operands: impl IntoIterator<Item = &'a [u8]>,
) -> Option<Vec<u8>> {
    let mut max = existing.map(decode).unwrap_or(Some(0))?;
    for operand in operands {
        max = max.max(decode(operand)?);
    }
    Some(encode(max).to_vec())
}

#[cfg(test)]
mod tests {
    use super::{decode, encode, merge_max};

    #[test]
    fn the_merge_is_the_maximum_in_any_order() {
        let values = [encode(7), encode(9), encode(8)];
        let orders: [[usize; 3]; 3] = [[0, 1, 2], [2, 1, 0], [1, 0, 2]];
        for order in orders {
            let operands = order.iter().map(|&i| values[i].as_slice());
            let merged = merge_max(None, operands).expect("well-formed");
            assert_eq!(decode(&merged), Some(9), "order {order:?}");
        }
        let below = merge_max(Some(&encode(12)), [encode(3).as_slice()]).expect("well-formed");
        assert_eq!(
            decode(&below),
            Some(12),
            "an operand below the stored value"
        );
    }

    #[test]
    fn a_malformed_value_fails_the_merge() {
        assert_eq!(merge_max(Some(b"short"), [encode(1).as_slice()]), None);
        assert_eq!(
            merge_max(None, [encode(1).as_slice(), b"x".as_slice()]),
            None
        );
    }
}
