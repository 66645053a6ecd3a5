//! The bit array under a Bloom filter: u64 words, bit i in word i/64 under mask 1 << (i % 64),
//! sized in 64-bit so that filters above 2^32 bits work.

/// A fixed-size array of bits stored as little-endian-numbered u64 words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitArray {
    words: Vec<u64>,
    len: u64,
}

/// Number of u64 words needed for `bits` bits.
pub fn words_for_bits(bits: u64) -> u64 {
    bits.div_ceil(64)
}

impl BitArray {
    /// An all-zero array of `len` bits.
    pub fn new(len: u64) -> Self {
        BitArray {
            words: vec![0; words_for_bits(len) as usize],
            len,
        }
    }

    /// An array over existing words. Padding bits at or above `len` are cleared so that two
    /// arrays with the same bits compare and serialise equal.
    pub fn from_words(mut words: Vec<u64>, len: u64) -> Self {
        assert_eq!(words.len() as u64, words_for_bits(len), "word count must match bit length");
        let tail = len % 64;
        if tail != 0 {
            if let Some(last) = words.last_mut() {
                *last &= (1u64 << tail) - 1;
            }
        }
        BitArray { words, len }
    }

    /// Number of bits.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the array holds no bits at all.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sets bit `i`.
    #[inline(always)]
    pub fn set(&mut self, i: u64) {
        debug_assert!(i < self.len);
        self.words[(i >> 6) as usize] |= 1u64 << (i & 63);
    }

    /// Reads bit `i`.
    #[inline(always)]
    pub fn get(&self, i: u64) -> bool {
        debug_assert!(i < self.len);
        self.words[(i >> 6) as usize] & (1u64 << (i & 63)) != 0
    }

    /// The words, for serialisation and merging.
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Mutable words, for merging slices received from other workers.
    pub fn words_mut(&mut self) -> &mut [u64] {
        &mut self.words
    }

    /// Number of bits set.
    pub fn count_ones(&self) -> u64 {
        self.words.iter().map(|w| w.count_ones() as u64).sum()
    }

    /// ORs `other` into `self`; lengths must be equal (checked by the caller's identity check).
    pub fn union_with(&mut self, other: &BitArray) {
        or_words(&mut self.words, &other.words);
    }

    /// ANDs `other` into `self`.
    pub fn intersect_with(&mut self, other: &BitArray) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= *b;
        }
    }

    /// Clears every bit.
    pub fn clear(&mut self) {
        self.words.fill(0);
    }
}

/// ORs `src` into `dst` word by word: the merge step of the all-reduce.
pub fn or_words(dst: &mut [u64], src: &[u64]) {
    assert_eq!(dst.len(), src.len());
    for (a, b) in dst.iter_mut().zip(src) {
        *a |= *b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_numbering_is_word_then_lsb() {
        let mut b = BitArray::new(130);
        b.set(0);
        b.set(65);
        b.set(129);
        assert_eq!(b.words(), &[1, 2, 2]);
        assert!(b.get(65) && !b.get(64));
        assert_eq!(b.count_ones(), 3);
    }

    #[test]
    fn from_words_clears_padding() {
        let b = BitArray::from_words(vec![u64::MAX], 3);
        assert_eq!(b.words(), &[0b111]);
    }
}
