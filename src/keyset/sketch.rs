//! A sketch of a partition's keys: a Bloom filter of 16 bits a key, each key's 4 bits in one
//! 64-bit word, which a batched lookup asks before it goes to the partition's tables. It answers
//! "absent" for about 99% of the keys the partition does not hold, from a sixth of the tables'
//! memory, which stays in the cache where the tables do not. Made only for sets that are asked
//! mostly about keys they do not hold: the probe-side join's set of probe keys, which every
//! build key of a much larger build side is looked up in.

/// Bits of the sketch per key it holds.
const BITS_PER_KEY: usize = 16;

pub(super) struct Sketch {
    words: Vec<u64>,
}

impl Sketch {
    /// An empty sketch for `keys` keys.
    pub(super) fn with_capacity(keys: usize) -> Sketch {
        Sketch { words: vec![0; (keys * BITS_PER_KEY).div_ceil(64).max(1)] }
    }

    /// The word of a key's bits, and its bits. The hash is remixed: the set takes its
    /// partition from the hash's product with another constant, and its slot from the hash's
    /// low half, so the keys of one partition share neither.
    #[inline(always)]
    fn word_and_mask(&self, hash: u64) -> (usize, u64) {
        let x = (hash ^ hash >> 32).wrapping_mul(0xD6E8_FEB8_6659_FD93);
        let word = crate::hashing::mulshift(x, self.words.len() as u64) as usize;
        let mask = 1 << (x & 63) | 1 << (x >> 6 & 63) | 1 << (x >> 12 & 63) | 1 << (x >> 18 & 63);
        (word, mask)
    }

    pub(super) fn insert(&mut self, hash: u64) {
        let (word, mask) = self.word_and_mask(hash);
        self.words[word] |= mask;
    }

    /// False where the key of `hash` is surely not held.
    #[inline(always)]
    pub(super) fn may_hold(&self, hash: u64) -> bool {
        let (word, mask) = self.word_and_mask(hash);
        self.words[word] & mask == mask
    }

    /// Hints the cache to load the word of the key of `hash`.
    #[inline(always)]
    pub(super) fn prefetch(&self, hash: u64) {
        super::prefetch(&self.words[self.word_and_mask(hash).0]);
    }

    pub(super) fn bytes(&self) -> usize {
        self.words.len() * 8
    }
}
