//! The generator's PRNG: SplitMix64, small and fast, so output is a pure function of the seed.
//!
//! Invariant: nothing in the generator draws randomness from anywhere else, so the same
//! `(seed, session index)` always yields the same bytes on every platform.

/// SplitMix64 (Steele, Lea & Flood): one `u64` of state, full period, good enough for workloads.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator for one stream, e.g. `Rng::new(seed, session_index)`.
    pub(crate) fn new(seed: u64, stream: u64) -> Self {
        let mut r = Rng(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03));
        // Decorrelate nearby seeds before first use.
        r.next_u64();
        r.next_u64();
        r
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`0` when `n == 0`), by multiply-high (Lemire), bias negligible here.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform index into a slice of length `n`.
    pub(crate) fn index(&mut self, n: usize) -> usize {
        usize::try_from(self.below(n as u64)).unwrap_or(0)
    }

    /// Uniform in `lo..=hi` (requires `lo <= hi`).
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// Uniform in `lo..=hi` as an `i64`, for times and counts that end up in JSON numbers.
    pub(crate) fn range_i(&mut self, lo: i64, hi: i64) -> i64 {
        let span = hi.abs_diff(lo);
        lo.saturating_add_unsigned(self.below(span.saturating_add(1)))
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p`.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// A uniformly chosen element.
    pub(crate) fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.index(items.len())]
    }
}
