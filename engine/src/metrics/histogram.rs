//! A histogram recorded with atomics alone, for the write path: fixed upper bounds, one counter
//! per bucket and a running sum, so an observation is two relaxed additions and never waits for
//! a lock (a reader may see an observation's bucket before its sum; a scrape tolerates that).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of latency buckets, in nanoseconds: 25 µs to 10 s, about three per decade.
pub(crate) const LATENCY_NS: &[u64] = &[
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// Upper bounds of size buckets (batches or appends per write): powers of two up to 4096.
pub(crate) const SIZES: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096];

/// Nanoseconds in a second, the scale of a latency histogram's figures.
const NANOS: f64 = 1e9;

/// Observations of one quantity.
pub(crate) struct Histogram {
    /// Inclusive upper bounds, ascending, in the recorded unit.
    bounds: &'static [u64],
    /// One count per bound, then the overflow bucket (+∞).
    buckets: Box<[AtomicU64]>,
    /// Sum of the observations, in the recorded unit.
    sum: AtomicU64,
    /// What one recorded unit is in the reported one (1 for sizes, 1e-9 for nanoseconds).
    scale: f64,
}

impl Histogram {
    /// Durations, recorded in nanoseconds and reported in seconds.
    pub(crate) fn latency() -> Self {
        Self::new(LATENCY_NS, 1.0 / NANOS)
    }

    /// Counts (how many batches or appends a write carried).
    pub(crate) fn sizes() -> Self {
        Self::new(SIZES, 1.0)
    }

    fn new(bounds: &'static [u64], scale: f64) -> Self {
        Histogram {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
            scale,
        }
    }

    /// Count one observation of `value` (in the recorded unit).
    pub(crate) fn record(&self, value: u64) {
        let bucket = self.bounds.partition_point(|&bound| bound < value);
        if let Some(count) = self.buckets.get(bucket) {
            count.fetch_add(1, Ordering::Relaxed);
        }
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    /// Count one observation of a duration.
    pub(crate) fn record_duration(&self, took: Duration) {
        self.record(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX));
    }

    /// The observations so far.
    pub(crate) fn snapshot(&self) -> HistogramSnapshot {
        let bounds = self
            .bounds
            .iter()
            .map(|&b| b as f64 * self.scale)
            .chain([f64::INFINITY]);
        let buckets: Vec<(f64, u64)> = bounds
            .zip(self.buckets.iter().map(|c| c.load(Ordering::Relaxed)))
            .collect();
        HistogramSnapshot {
            count: buckets.iter().map(|&(_, n)| n).sum(),
            sum: self.sum.load(Ordering::Relaxed) as f64 * self.scale,
            buckets,
        }
    }
}

/// A histogram's observations at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistogramSnapshot {
    /// Each bucket's inclusive upper bound, ascending (the last is +∞), with the observations in
    /// that bucket alone (not cumulative: Prometheus's `le` buckets are the running sums).
    pub buckets: Vec<(f64, u64)>,
    /// The sum of the observations (seconds for durations).
    pub sum: f64,
    /// The number of observations.
    pub count: u64,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Histogram;

    /// A value equal to a bound falls in that bound's bucket (`le` is inclusive); one past the
    /// last bound falls in the overflow bucket; sum and count add up.
    #[test]
    fn observations_land_in_their_inclusive_buckets() {
        let h = Histogram::sizes();
        for v in [0, 1, 2, 3, 4096, 4097] {
            h.record(v);
        }
        let s = h.snapshot();
        let count_at = |bound: f64| s.buckets.iter().find(|(b, _)| *b == bound).map(|&(_, n)| n);
        assert_eq!(count_at(1.0), Some(2));
        assert_eq!(count_at(2.0), Some(1));
        assert_eq!(count_at(4.0), Some(1));
        assert_eq!(count_at(4096.0), Some(1));
        assert_eq!(count_at(f64::INFINITY), Some(1));
        assert_eq!(s.count, 6);
        assert_eq!(s.sum, (1 + 2 + 3 + 4096 + 4097) as f64);
    }

    /// Durations are kept in nanoseconds and reported in seconds.
    #[test]
    fn durations_are_reported_in_seconds() {
        let h = Histogram::latency();
        h.record_duration(Duration::from_millis(3));
        let s = h.snapshot();
        assert!((s.sum - 0.003).abs() < 1e-12, "{}", s.sum);
        let (bound, _) = s
            .buckets
            .iter()
            .find(|(_, n)| *n == 1)
            .expect("one bucket holds it");
        assert!((bound - 0.005).abs() < 1e-12, "{bound}");
    }
}
