//! A seeded xorshift64 generator for the unit tests: fast, dependency-free and the same sequence
//! on every run, so that a failing case can be replayed.

pub(crate) struct XorShift(u64);

impl XorShift {
    /// A generator from a non-zero seed.
    pub(crate) fn new(seed: u64) -> Self {
        assert_ne!(seed, 0, "xorshift needs a non-zero seed");
        XorShift(seed)
    }

    /// The next 64 bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// `n` bytes, the low byte of each draw.
    pub(crate) fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}
