//! bloomflow's native hashing scheme, the one every native `.bloom` file depends on, pinned by
//! golden tests:
//!
//! 1. `a = lookup2(key, seed)` and `b = lookup2(key, seed ^ 0x9E3779B9)` (Bob Jenkins' lookup2, as in
//!    the `jenkins_hash` crate): 64 bits of entropy, so a billion keys do not hit the floor that
//!    32-bit collisions would put under the false-positive rate.
//! 2. `x = (a << 32) | b` and `y = (b << 32) | a`, both u64.
//! 3. Enhanced double hashing (Dillinger & Manolios 2004), wrapping u64 arithmetic:
//!    `for i in 0..k { pos[i] = mulshift(x, m); x += y; y += i; }`
//! 4. `mulshift(x, m) = (x as u128 * m as u128) >> 64`, which maps x uniformly into [0, m) without a
//!    division (Lemire 2019) and works for any m up to 2^64.

/// Second lookup2 seed offset: the 32-bit golden ratio, so that the two hashes are independent.
pub const SECOND_SEED_XOR: u32 = 0x9E37_79B9;

/// The two 32-bit Jenkins lookup2 hashes of a key that the native scheme derives positions from.
#[inline]
pub fn native_hash(key: &[u8], seed: u32) -> (u32, u32) {
    (
        jenkins_hash::lookup2(key, seed),
        jenkins_hash::lookup2(key, seed ^ SECOND_SEED_XOR),
    )
}

/// Maps a uniform 64-bit value into [0, m) by multiply-shift.
#[inline(always)]
pub fn mulshift(x: u64, m: u64) -> u64 {
    ((x as u128 * m as u128) >> 64) as u64
}

/// The k positions of one key under the native scheme, in order.
#[derive(Clone, Debug)]
pub struct NativePositions {
    x: u64,
    y: u64,
    i: u32,
    k: u32,
    m: u64,
}

impl NativePositions {
    /// Positions of `key` in a filter of `m` bits and `k` hashes seeded with `seed`.
    #[inline]
    pub fn new(key: &[u8], seed: u32, m: u64, k: u32) -> Self {
        let (a, b) = native_hash(key, seed);
        Self::from_hashes(a, b, m, k)
    }

    /// Positions from precomputed hashes (used by batched lookups).
    #[inline]
    pub fn from_hashes(a: u32, b: u32, m: u64, k: u32) -> Self {
        let (a, b) = (a as u64, b as u64);
        NativePositions {
            x: (a << 32) | b,
            y: (b << 32) | a,
            i: 0,
            k,
            m,
        }
    }
}

impl Iterator for NativePositions {
    type Item = u64;

    #[inline(always)]
    fn next(&mut self) -> Option<u64> {
        if self.i == self.k {
            return None;
        }
        let pos = mulshift(self.x, self.m);
        self.x = self.x.wrapping_add(self.y);
        self.y = self.y.wrapping_add(self.i as u64);
        self.i += 1;
        Some(pos)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.k - self.i) as usize;
        (left, Some(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn positions(key: &str, seed: u32, m: u64, k: u32) -> Vec<u64> {
        NativePositions::new(key.as_bytes(), seed, m, k).collect()
    }

    /// Golden values: every native filter file depends on these. If this test fails, the change
    /// broke compatibility with every filter ever written; do not update the numbers, fix the code.
    #[test]
    fn golden_native_positions() {
        assert_eq!(native_hash(b"", 0), GOLDEN_HASH_EMPTY);
        assert_eq!(native_hash(b"hello", 0), GOLDEN_HASH_HELLO);
        assert_eq!(positions("hello", 0, 1000, 7), GOLDEN_HELLO_1000_7);
        assert_eq!(positions("customer-42", 7, 9_585_059, 7), GOLDEN_CUST_9585059_7);
        assert_eq!(positions("", 0, 64, 3), GOLDEN_EMPTY_64_3);
        assert_eq!(positions("big", 1, 1 << 40, 4), GOLDEN_BIG_2P40_4);
    }

    /// Golden values of the lookup3 scheme and the blocked layout (the defaults of `build`),
    /// from the same independent Python transcription (tests/data/native_golden.py).
    #[test]
    fn golden_lookup3_and_blocked_positions() {
        use crate::hashing::Scheme;
        use crate::spec::{FilterSpec, Layout};
        let positions = |layout, key: &str, seed, m, k| -> Vec<u64> {
            FilterSpec::with_layout(Scheme::NativeLookup3, layout, seed, m, k).unwrap().positions(key.as_bytes()).collect()
        };
        assert_eq!(crate::hashing::lookup3::hashlittle2(b"hello", 0, 0), (885767278, 1543812985));
        assert_eq!(positions(Layout::Standard, "hello", 0, 1000, 7), [206, 565, 925, 284, 644, 3, 362]);
        assert_eq!(positions(Layout::Blocked, "hello", 0, 51200, 7), [10497, 10531, 10527, 10284, 10374, 10526, 10293]);
        assert_eq!(
            positions(Layout::Blocked, "customer-42", 7, 5_120_000, 10),
            [32420, 32481, 32638, 32742, 32342, 32730, 32614, 32704, 32457, 32463]
        );
        assert_eq!(positions(Layout::Blocked, "", 0, 512, 3), [396, 25, 186]);
        // The fast paths set and test exactly these bits.
        let spec = FilterSpec::with_layout(Scheme::NativeLookup3, Layout::Blocked, 7, 5_120_000, 10).unwrap();
        let mut f = crate::BloomFilter::new(spec);
        f.insert(b"customer-42");
        let set: Vec<u64> = (0..spec.bits).filter(|&i| f.bits().get(i)).collect();
        let mut expected = vec![32420, 32481, 32638, 32742, 32342, 32730, 32614, 32704, 32457, 32463];
        expected.sort();
        expected.dedup();
        assert_eq!(set, expected);
    }

    #[test]
    fn positions_stay_in_range_for_any_m() {
        for m in [1u64, 2, 63, 64, 65, 1000, (1 << 32) + 17, u64::MAX] {
            for key in ["", "a", "abc", "a longer key of some bytes"] {
                for p in positions(key, 3, m, 32) {
                    assert!(p < m, "{p} >= {m}");
                }
            }
        }
    }

    #[test]
    fn filters_above_2_pow_32_bits_reach_high_positions() {
        let m = 1u64 << 36;
        let high = (0..1000)
            .flat_map(|i| positions(&format!("k{i}"), 0, m, 4))
            .filter(|&p| p >= 1 << 32)
            .count();
        // 15/16 of positions should land above 2^32.
        assert!(high > 3500, "{high}");
    }

    // Computed by an independent Python transcription of Jenkins' reference lookup2 and the rule
    // in this module's doc comment, not by this code.
    const GOLDEN_HASH_EMPTY: (u32, u32) = (3175731469, 2912551993);
    const GOLDEN_HASH_HELLO: (u32, u32) = (3070638494, 3517605519);
    const GOLDEN_HELLO_1000_7: [u64; 7] = [714, 533, 352, 171, 990, 809, 628];
    const GOLDEN_CUST_9585059_7: [u64; 7] =
        [3235388, 6413064, 5680, 3183356, 6361031, 9538707, 3131324];
    const GOLDEN_EMPTY_64_3: [u64; 3] = [47, 26, 6];
    const GOLDEN_BIG_2P40_4: [u64; 4] =
        [547455036969, 727208636841, 906962236712, 1086715836584];
}
