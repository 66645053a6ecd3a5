//! The bit array under a Bloom filter: u64 words, bit i in word i/64 under mask 1 << (i % 64),
//! sized in 64-bit so that filters above 2^32 bits work. The words are stored in 64-byte-aligned
//! lines, so that a block of the blocked layout is exactly one cache line.

/// One cache line of words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
pub struct Line(pub [u64; 8]);

/// A fixed-size array of bits stored as little-endian-numbered u64 words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitArray {
    lines: Vec<Line>,
    /// Words in use: ⌈len/64⌉ (the last line may hold unused, zero words).
    words: usize,
    len: u64,
}

/// Number of u64 words needed for `bits` bits.
pub fn words_for_bits(bits: u64) -> u64 {
    bits.div_ceil(64)
}

impl BitArray {
    /// An all-zero array of `len` bits, in huge pages where it is large (see
    /// [`zeroed_huge`](crate::limits::zeroed_huge)).
    pub fn new(len: u64) -> Self {
        let words = words_for_bits(len) as usize;
        BitArray { lines: crate::limits::zeroed_huge(words.div_ceil(8)), words, len }
    }

    /// An all-zero array of `len` bits in huge pages, zeroed by `threads` threads at once (see
    /// [`zeroed_huge_parallel`](crate::limits::zeroed_huge_parallel)).
    pub fn new_parallel(len: u64, threads: usize) -> Self {
        let words = words_for_bits(len) as usize;
        BitArray { lines: crate::limits::zeroed_huge_parallel(words.div_ceil(8), threads), words, len }
    }

    /// An all-zero array of `len` bits for a job's partial filter: in 4 KiB pages, written as it
    /// is allocated, calling `tick` every 2 MiB (see
    /// [`zeroed_written_ticking`](crate::limits::zeroed_written_ticking)).
    pub fn new_partial(len: u64, tick: &mut dyn FnMut()) -> Self {
        let words = words_for_bits(len) as usize;
        BitArray { lines: crate::limits::zeroed_written_ticking(words.div_ceil(8), tick), words, len }
    }

    /// An array over existing words. Padding bits at or above `len` are cleared so that two
    /// arrays with the same bits compare and serialise equal.
    pub fn from_words(words: Vec<u64>, len: u64) -> Self {
        assert_eq!(words.len() as u64, words_for_bits(len), "word count must match bit length");
        let mut bits = BitArray::new(len);
        bits.words_mut().copy_from_slice(&words);
        bits.clear_padding();
        bits
    }

    /// Clears the bits at or above `len` in the last word (after filling words from a file).
    pub fn clear_padding(&mut self) {
        let tail = self.len % 64;
        if tail != 0 {
            if let Some(last) = self.words_mut().last_mut() {
                *last &= (1u64 << tail) - 1;
            }
        }
    }

    /// The 8 words of cache line `i`.
    #[inline(always)]
    pub fn line(&self, i: usize) -> &[u64; 8] {
        &self.lines[i].0
    }

    /// The 8 words of cache line `i`, mutable.
    #[inline(always)]
    pub fn line_mut(&mut self, i: usize) -> &mut [u64; 8] {
        &mut self.lines[i].0
    }

    /// A pointer to line `i`, for prefetching.
    #[inline(always)]
    pub fn line_ptr(&self, i: usize) -> *const u8 {
        self.lines[i].0.as_ptr() as *const u8
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
        let (line, word) = ((i >> 9) as usize, ((i >> 6) & 7) as usize);
        self.lines[line].0[word] |= 1u64 << (i & 63);
    }

    /// Reads bit `i`.
    #[inline(always)]
    pub fn get(&self, i: u64) -> bool {
        debug_assert!(i < self.len);
        let (line, word) = ((i >> 9) as usize, ((i >> 6) & 7) as usize);
        self.lines[line].0[word] & (1u64 << (i & 63)) != 0
    }

    /// The words, for serialisation and merging.
    pub fn words(&self) -> &[u64] {
        &bytemuck::cast_slice::<Line, u64>(&self.lines)[..self.words]
    }

    /// Mutable words, for merging slices received from other workers and for readers.
    pub fn words_mut(&mut self) -> &mut [u64] {
        let words = self.words;
        &mut bytemuck::cast_slice_mut::<Line, u64>(&mut self.lines)[..words]
    }

    /// Number of bits set.
    pub fn count_ones(&self) -> u64 {
        self.words().iter().map(|w| w.count_ones() as u64).sum()
    }

    /// ORs `other` into `self`; lengths must be equal (checked by the caller's identity check).
    pub fn union_with(&mut self, other: &BitArray) {
        or_words(self.words_mut(), other.words());
    }

    /// ANDs `other` into `self`.
    pub fn intersect_with(&mut self, other: &BitArray) {
        for (a, b) in self.words_mut().iter_mut().zip(other.words()) {
            *a &= *b;
        }
    }

    /// Clears every bit.
    pub fn clear(&mut self) {
        self.lines.fill(Line([0; 8]));
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
