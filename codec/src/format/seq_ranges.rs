//! The on-disk range encoding of `sourceEventSeqs` (later-format-spec §3.3), written by every DSH
//! ≥ 0.1.2 in every generation: in a strictly increasing list, runs of ≥ 3 consecutive seqs are
//! written as `[start, end]` pairs.
//!
//! The decoded array is the logical form; the file form is kept as the raw line, so decoding
//! never has to be inverted for export.

use crate::json::Value;

/// How strictly to decode: V2+ files are checked for uniqueness and earlier seqs; V0/V1 files
/// (DSH 0.1.2's writer) only for the pair shape and the length bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strictness {
    /// V0 and V1.
    Lenient,
    /// V2, V3 and V4.
    Strict,
}

/// `encodeSeqRanges`: the file form of `seqs`.
pub fn encode(seqs: &[u64]) -> Value {
    let increasing = seqs.windows(2).all(|w| w[0] < w[1]);
    if !increasing {
        return Value::Array(seqs.iter().map(|&s| seq_value(s)).collect());
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < seqs.len() {
        let mut j = i;
        while j + 1 < seqs.len() && seqs[j + 1] == seqs[j] + 1 {
            j += 1;
        }
        if j - i + 1 >= 3 {
            out.push(Value::Array(vec![seq_value(seqs[i]), seq_value(seqs[j])]));
        } else {
            out.extend(seqs[i..=j].iter().map(|&s| seq_value(s)));
        }
        i = j + 1;
    }
    Value::Array(out)
}

fn seq_value(seq: u64) -> Value {
    Value::Number(seq as f64)
}

/// Decode the `sourceEventSeqs` of the event at `seq` (DSH's `decodeSeqRanges` with the
/// event's seq as the bound). Strict: every member is checked and the result must hold unique
/// earlier seqs. Lenient: a list without pairs is left as written (`Ok(None)`) for the event
/// rules to judge. `Err` is DSH's text.
pub fn decode(value: &Value, seq: u64, strictness: Strictness) -> Result<Option<Vec<u64>>, String> {
    let Value::Array(members) = value else {
        return match strictness {
            Strictness::Strict => Err("sourceEventSeqs must be an array".into()),
            Strictness::Lenient => Ok(None),
        };
    };
    let has_pair = members.iter().any(|m| matches!(m, Value::Array(_)));
    if !has_pair && strictness == Strictness::Lenient {
        return Ok(None);
    }
    let mut out: Vec<u64> = Vec::with_capacity(members.len());
    for member in members {
        match member {
            Value::Array(pair) => {
                let [start, end] = pair.as_slice() else {
                    return Err("sourceEventSeqs range must be a [start, end] pair".into());
                };
                let start = count(start, "sourceEventSeqs range start")?;
                let end = count(end, "sourceEventSeqs range end")?;
                // The decoded length is bounded by the seq, so a hostile pair cannot allocate.
                if start > end
                    || end >= seq
                    || end - start + 1 > seq.saturating_sub(out.len() as u64)
                {
                    return Err("sourceEventSeqs range exceeds its event seq".into());
                }
                out.extend(start..=end);
            }
            scalar => out.push(count(scalar, "sourceEventSeqs member")?),
        }
    }
    if strictness == Strictness::Strict {
        let mut seen = std::collections::HashSet::with_capacity(out.len());
        if out.iter().any(|&s| s >= seq || !seen.insert(s)) {
            return Err("sourceEventSeqs ranges must contain unique earlier seqs".into());
        }
    }
    if has_pair && !out.windows(2).all(|w| w[0] < w[1]) {
        return Err("sourceEventSeqs ranges must be strictly increasing".into());
    }
    Ok(Some(out))
}

/// DSH's `sessionFormatCount`: a non-negative safe integer, not `-0`.
fn count(v: &Value, label: &str) -> Result<u64, String> {
    v.as_count()
        .ok_or_else(|| format!("{label} must be a non-negative safe integer"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{parse, stringify};

    fn dec(text: &str, seq: u64, s: Strictness) -> Result<Option<Vec<u64>>, String> {
        decode(&parse(text).unwrap_or(Value::Null), seq, s)
    }

    #[test]
    fn encodes_runs_of_three_or_more() {
        assert_eq!(stringify(&encode(&[1, 2])), "[1,2]");
        assert_eq!(stringify(&encode(&[1, 2, 3])), "[[1,3]]");
        assert_eq!(stringify(&encode(&[7, 1])), "[7,1]");
        assert_eq!(
            stringify(&encode(&[3, 4, 5, 6, 9, 10, 12])),
            "[[3,6],9,10,12]"
        );
        assert_eq!(stringify(&encode(&[5, 2])), "[5,2]");
    }

    #[test]
    fn decodes_the_conformance_cases() {
        use Strictness::*;
        assert_eq!(dec("[[3,6],9]", 10, Strict), Ok(Some(vec![3, 4, 5, 6, 9])));
        assert!(dec("[[6,3]]", 10, Strict).is_err());
        assert!(dec("[[3,6],5]", 10, Strict).is_err());
        assert!(dec("[3,3]", 10, Strict).is_err());
        assert_eq!(dec("[3,3]", 10, Lenient), Ok(None));
        assert_eq!(dec("[]", 10, Strict), Ok(Some(vec![])));
        assert_eq!(
            dec("[[6,3]]", 10, Strict),
            Err("sourceEventSeqs range exceeds its event seq".into())
        );
        assert_eq!(
            dec("[1,-0]", 10, Strict),
            Err("sourceEventSeqs member must be a non-negative safe integer".into())
        );
        assert!(dec("[[3,6],5]", 10, Lenient).is_err());
        assert!(dec("[[1,2,3]]", 10, Lenient).is_err());
        assert!(dec("[9,10]", 10, Strict).is_err());
        assert!(dec("[[0,9007199254740991]]", 10, Lenient).is_err());
    }

    #[test]
    fn decode_inverts_encode() {
        let cases: [&[u64]; 4] = [&[0, 1, 2, 5, 6, 8, 9, 10, 11], &[4], &[1, 3, 5], &[2, 3]];
        for seqs in cases {
            let seq = seqs.last().map_or(1, |s| s + 1);
            assert_eq!(
                decode(&encode(seqs), seq, Strictness::Strict),
                Ok(Some(seqs.to_vec()))
            );
        }
    }
}
