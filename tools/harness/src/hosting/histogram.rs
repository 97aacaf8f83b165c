//! A small log-linear latency histogram: 32 sub-buckets per power of two, so any quantile it
//! reports is within about 3% of the true value; exact count, sum and maximum.
//!
//! Bucket layout: values `0..32` have a bucket each; a value `v >= 32` with highest set bit `e`
//! goes to octave `e - 4` and sub-bucket `(v >> (e - 5)) & 31`, i.e. index
//! `(e - 4) * 32 + sub`. 64-bit values need `60 * 32` buckets.
//!
//! A histogram travels between processes as JSON ([`Histogram::to_json`]): its non-empty buckets
//! as `[index, count]` pairs, with the count, sum and maximum, so merging the copies loses nothing.

use std::time::Duration;

use anyhow::{anyhow, ensure};
use sessionlog_codec::json::{Object, Value};

/// Sub-buckets per octave, as a power of two.
const SUB_BITS: u32 = 5;
/// Sub-buckets per octave.
const SUB: u64 = 1 << SUB_BITS;
/// Buckets for the whole `u64` range.
const BUCKETS: usize = ((64 - SUB_BITS + 1) as usize) * (SUB as usize);

/// Latencies in nanoseconds.
#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum: u128,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            count: 0,
            sum: 0,
            max: 0,
        }
    }
}

impl Histogram {
    /// Record one latency.
    pub fn record(&mut self, d: Duration) {
        let v = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.counts[index(v)] += 1;
        self.count += 1;
        self.sum += u128::from(v);
        self.max = self.max.max(v);
    }

    /// Add another histogram's samples.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The largest sample (zero when empty).
    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.max)
    }

    /// The mean (zero when empty).
    pub fn mean(&self) -> Duration {
        let mean = self.sum.checked_div(u128::from(self.count)).unwrap_or(0);
        Duration::from_nanos(u64::try_from(mean).unwrap_or(u64::MAX))
    }

    /// The `q` quantile (`0.0..=1.0`): the middle of the bucket holding the sample of that rank,
    /// capped at the maximum. Zero when empty.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (low, width) = bucket(i);
                return Duration::from_nanos((low + width / 2).min(self.max));
            }
        }
        Duration::from_nanos(self.max)
    }
}

impl Histogram {
    /// The histogram as a JSON object: `{"count", "sum_ns", "max_ns", "buckets": [[i, n], …]}`,
    /// non-empty buckets only. Counts and nanoseconds stay below 2^53 (the sum for 100 days of
    /// latencies), so JSON's numbers hold them exactly.
    pub fn to_json(&self) -> Value {
        let buckets: Vec<Value> = self
            .counts
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, &n)| Value::Array(vec![Value::from(i as i64), Value::from(n as i64)]))
            .collect();
        Value::Object(
            Object::new()
                .with("count", self.count as i64)
                .with("sum_ns", i64::try_from(self.sum).unwrap_or(i64::MAX))
                .with("max_ns", self.max as i64)
                .with("buckets", Value::Array(buckets)),
        )
    }

    /// The histogram [`Histogram::to_json`] wrote; an error names what is missing or out of range.
    pub fn from_json(value: &Value) -> anyhow::Result<Self> {
        let o = value
            .as_object()
            .ok_or_else(|| anyhow!("a latency histogram is a JSON object"))?;
        let number = |key: &str| {
            o.get(key)
                .and_then(Value::as_safe_u64)
                .ok_or_else(|| anyhow!("latency histogram: no count \"{key}\""))
        };
        let mut h = Histogram {
            count: number("count")?,
            sum: u128::from(number("sum_ns")?),
            max: number("max_ns")?,
            ..Histogram::default()
        };
        let buckets = o
            .get("buckets")
            .and_then(Value::as_array)
            .ok_or_else(|| anyhow!("latency histogram: no \"buckets\" array"))?;
        for pair in buckets {
            let (Some(i), Some(n)) = (match pair.as_array() {
                Some([i, n]) => (i.as_safe_u64(), n.as_safe_u64()),
                _ => (None, None),
            }) else {
                return Err(anyhow!("latency histogram: a bucket is not [index, count]"));
            };
            let slot = usize::try_from(i)
                .ok()
                .and_then(|i| h.counts.get_mut(i))
                .ok_or_else(|| anyhow!("latency histogram: bucket {i} out of range"))?;
            *slot += n;
        }
        let total: u64 = h.counts.iter().sum();
        ensure!(
            total == h.count,
            "latency histogram: buckets hold {total} samples, count says {}",
            h.count
        );
        Ok(h)
    }
}

fn index(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    let shift = e - SUB_BITS;
    let sub = (v >> shift) & (SUB - 1);
    ((shift as usize + 1) << SUB_BITS) + sub as usize
}

/// Lower bound and width of bucket `i`.
fn bucket(i: usize) -> (u64, u64) {
    let (octave, sub) = (i >> SUB_BITS, (i as u64) & (SUB - 1));
    if octave == 0 {
        return (sub, 1);
    }
    let shift = octave as u32 - 1;
    ((SUB + sub) << shift, 1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_range() {
        for v in (0..5000).chain([u64::MAX / 3, u64::MAX - 1, u64::MAX]) {
            let (low, width) = bucket(index(v));
            assert!(low <= v && v - low < width, "{v}: bucket {low}+{width}");
        }
        assert_eq!(index(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_within_three_percent() {
        let mut h = Histogram::default();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        assert_eq!(h.count(), 1000);
        for (q, want) in [(0.5, 500.0), (0.99, 990.0), (1.0, 1000.0)] {
            let got = h.quantile(q).as_secs_f64() * 1e6;
            assert!((got - want).abs() / want < 0.03, "q{q}: {got} vs {want}");
        }
        assert_eq!(h.max(), Duration::from_micros(1000));
        assert_eq!(h.mean(), Duration::from_nanos(500_500));
        let mut merged = Histogram::default();
        merged.merge(&h);
        merged.merge(&h);
        assert_eq!(merged.count(), 2000);
        assert_eq!(merged.quantile(0.5), h.quantile(0.5));
        assert_eq!(Histogram::default().quantile(0.5), Duration::ZERO);
    }

    #[test]
    fn json_round_trip_keeps_every_sample() {
        let mut h = Histogram::default();
        for us in [3u64, 70, 70, 1_500, 90_000] {
            h.record(Duration::from_micros(us));
        }
        let back = Histogram::from_json(&h.to_json()).expect("parses");
        assert_eq!(back.count(), 5);
        assert_eq!(back.max(), h.max());
        assert_eq!(back.mean(), h.mean());
        assert_eq!(back.counts, h.counts);
        let mut lying = h.to_json();
        if let Value::Object(o) = &mut lying {
            o.insert(
                sessionlog_codec::json::JsString::from_static("count"),
                Value::from(6i64),
            );
        }
        let e = Histogram::from_json(&lying).expect_err("count disagrees");
        assert!(e.to_string().contains("count says 6"), "{e:#}");
    }
}
