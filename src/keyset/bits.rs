//! Numbers held as bits of their range, and the encodings in which those bits travel: as words,
//! or as the gaps between set bits where the numbers are sparse.

use super::*;

/// Numbers collected as bits: bit v − 64·`at` of `bytes` (little-endian 64-bit words) for each
/// number v, over the words from the smallest number's to the largest's (of those taken).
///
/// They grow only while the bits take no more bytes than the numbers' text, plus [`SLACK`]
/// for the first numbers: ids from a range not much wider than their count. A number the bits
/// cannot grow to cover is kept as text, as all are in an arena of sparse numbers (whose second
/// number already passes the bound); the bits grow again once the text has caught up. (A
/// worker whose first split is read while others claim the next few jumps several splits at
/// its second: on the benchmark's 2 × 1 semi-join, one run in six had kept 3 of its 4 MB of
/// numbers as text when the bits stopped growing for good at the first refusal.)
///
/// [`SLACK`]: NumberBits::SLACK
#[derive(Clone, Debug, Default)]
pub(super) struct NumberBits {
    pub(super) at: u32,
    pub(super) bytes: Vec<u8>,
    /// Whether the bits ask for transparent huge pages (see
    /// [`KeyArena::holding_numbers_as_bits`]).
    pub(super) huge_pages: bool,
}

impl NumberBits {
    /// Bytes the bits may take beyond the numbers' text.
    pub(super) const SLACK: u64 = 64 << 10;

    /// The least room the bits are allocated with (most of it never touched, so never in
    /// memory): past glibc's largest mmap threshold, 32 MiB on 64-bit systems (`mallopt(3)`),
    /// so that each block is a mapping of its own, fresh zero pages given back to the kernel when
    /// freed (and, being past the ceiling, freed without raising the threshold). Allocated at
    /// their size, the doublings of the bits came from a thread's arena whenever a larger block
    /// freed by the other worker had raised glibc's threshold past them, and stayed there when
    /// freed: in the outliers of the exact semi-join's peak memory, one worker's last four
    /// doublings together (6.8 MB) were in its arena, 3 MiB over the usual. 70 interleaved runs
    /// of the benchmark's exact semi-join each way: 3 peaked at 18.4-20.2 MiB, against 1 (18.2)
    /// with this room; the same time. Past 64 MiB too, the most a thread's arena holds (its heap,
    /// with its header): a block of 33 MiB could still come from a larger one freed in the
    /// arena (a vector grown in place by `realloc`), written and advised for huge pages before,
    /// as a unit test found when bits were grown by an eighth at least.
    const MAPPED: usize = 65 << 20;

    /// Sets number `v`'s bit, growing the bits to cover it within `bound` bytes; false if they
    /// cannot, and then the number is for the text.
    #[inline(always)]
    pub(super) fn insert(&mut self, v: u32, bound: u64) -> bool {
        let word = v / 64;
        let words = (self.bytes.len() / 8) as u32;
        if word.wrapping_sub(self.at) >= words {
            if 8 * self.span_with(word) > bound {
                return false;
            }
            self.grow(word, bound);
        }
        let bit = (v - 64 * self.at) as usize;
        self.bytes[bit / 8] |= 1 << (bit % 8);
        true
    }

    /// Prefetches the byte of number `v`'s bit, where the bits cover it (see
    /// [`KeyArena::push_all`]).
    #[inline(always)]
    pub(super) fn prefetch(&self, v: u32) {
        let bit = (v as u64).wrapping_sub(64 * self.at as u64);
        if let Some(byte) = self.bytes.get((bit / 8) as usize) {
            prefetch(byte);
        }
    }

    /// The words from the lowest the bits cover, or `word`, to the highest.
    #[inline(always)]
    fn span_with(&self, word: u32) -> u64 {
        let (low, high) = self.bounds_with(word);
        (high - low + 1) as u64
    }

    #[inline(always)]
    fn bounds_with(&self, word: u32) -> (u32, u32) {
        match (self.bytes.len() / 8) as u32 {
            0 => (word, word),
            words => (self.at.min(word), (self.at + words - 1).max(word)),
        }
    }

    /// Grows the bits to cover `word` (within `bound` bytes, as the caller checked), to twice
    /// their size (toward it) where `bound` allows and by an eighth at least, so that ids that
    /// come in order or at random cost a copy of their bits a doubling or an eighth, not one a
    /// word.
    #[cold]
    pub(super) fn grow(&mut self, word: u32, bound: u64) {
        let words = (self.bytes.len() / 8) as u32;
        let (low, high) = self.bounds_with(word);
        let needed = (high - low + 1) as u64;
        debug_assert!(8 * needed <= bound);
        // Numbers are below 10^9: words below 2^24. An eighth more at least, even past the
        // bound (the room past the numbers is never written, so never in memory): grown only as
        // far as the bound allowed, random ids (the bound a number's text more at each) took a
        // copy of the bits almost a number, from the first that fitted until the span covered
        // them all.
        let room = needed.max(2 * words as u64).min(bound / 8).max(words as u64 + words as u64 / 8).min(1 << 24) as u32;
        let low = if word < self.at { (high + 1).saturating_sub(room) } else { low };
        // A zeroed allocation, left untouched: where the allocator maps fresh pages for it (a
        // large block, unless it has one freed to reuse), only the pages the copy and the
        // numbers to come write are ever in memory, and the room a doubling gave past the last
        // number never is. Written whole (`limits::zeroed_written`, which spares the zero
        // page's replacement at each page's first write), the benchmark's bits took 4 MB a
        // worker for 2.5 MB of numbers, and the exact semi-join's peak RSS swung from 19.4 to
        // 23.7 MiB with the timing of the two workers' doublings; untouched, 16.8 to 18.9 MiB,
        // in the same time (medians of 10 interleaved runs: 0.537 and 0.541 s).
        let mut bytes: Vec<u8> = vec![0u8; (room as usize * 8).max(Self::MAPPED)];
        bytes.truncate(room as usize * 8);
        if self.huge_pages && bytes.len() >= 2 << 20 {
            // The whole mapping: its part in use starts a few bytes into a page, wherever
            // the kernel put it, and advised alone it held no aligned 2 MiB for a huge page.
            // Not for smaller bits, which the TLB reaches anyway: each doubling is a mapping of
            // its own, and each would have taken (and zeroed) a huge page.
            crate::limits::advise_huge_pages(bytes.as_ptr() as usize, bytes.capacity());
        }
        if words > 0 {
            let from = 8 * (self.at - low) as usize;
            bytes[from..from + self.bytes.len()].copy_from_slice(&self.bytes);
        }
        (self.at, self.bytes) = (low, bytes);
    }
}

/// Calls `f` with the word (see `number`) of each number of `piece` that `dense` does not hold:
/// all of them where the set holds no numbers as bits; else none where the set was sized for
/// the counts of the arenas the bits came from. Reads only the words outside the span, and the
/// span's last (numbers past the largest may share it).
pub(super) fn numbers_outside(piece: BitsPiece, dense: Dense, mut f: impl FnMut(u32)) {
    let end = piece.at + (piece.bytes.len() / 8) as u32;
    let visit = |from: u32, to: u32, f: &mut dyn FnMut(u32)| {
        let (from, to) = (from.max(piece.at), to.min(end));
        if from < to {
            let bytes = &piece.bytes[8 * (from - piece.at) as usize..8 * (to - piece.at) as usize];
            for_each_bit(BitsPiece { at: from, bytes }, |value| f(value + 1));
        }
    };
    if dense.span == 0 {
        return visit(piece.at, end, &mut f);
    }
    let (first, last) = ((dense.first - 1) / 64, (dense.first + dense.span - 2) / 64);
    visit(piece.at, first, &mut f);
    visit(last + 1, end, &mut f);
    visit(last, last + 1, &mut |word| {
        if !dense.holds(word) {
            f(word)
        }
    });
}

/// Calls `f` with the value of each bit set in `piece`, in order.
pub(super) fn for_each_bit(piece: BitsPiece, mut f: impl FnMut(u32)) {
    for (i, word) in piece.bytes.chunks_exact(8).enumerate() {
        let mut word = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        while word != 0 {
            f(64 * (piece.at + i as u32) + word.trailing_zeros());
            word &= word - 1;
        }
    }
}

/// Numbers as bits, as [`KeyArena::take_bits`] gives them: the bytes of 64-bit words from word
/// `at` on (little-endian: bit i of byte j of the bytes is the number 64·`at` + 8j + i).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DenseWords {
    pub at: u32,
    pub bytes: Vec<u8>,
}

impl DenseWords {
    /// The pieces a builder reads of `bits` (one piece, or none).
    pub fn pieces(bits: &Option<DenseWords>) -> Vec<BitsPiece<'_>> {
        bits.iter().map(|bits| BitsPiece { at: bits.at, bytes: &bits.bytes }).collect()
    }
}

/// The bits set in `bytes` (whole little-endian words of a bitmap) as gaps: for each set bit in
/// order, how many bits lie between it and the one before (the first: from bit 0), a LEB128
/// varint. Numbers sparser than one in eight of their span take fewer bytes so than as bits:
/// the benchmark's 500K ids a worker, over a span of 20M, 0.5 MB against 2.5 MB of bits to send
/// to every other process (sent at about 1 GB/s on this host's loopback).
pub fn encode_gaps(bytes: &[u8]) -> Vec<u8> {
    assert!(bytes.len() < 1 << 29, "bits are numbered in 32 bits");
    let mut gaps = Vec::with_capacity(bytes.len() / 4);
    let mut next = 0;
    for_each_bit(BitsPiece { at: 0, bytes }, |bit| {
        crate::records::push_varint(&mut gaps, (bit - next) as u64);
        next = bit + 1;
    });
    gaps
}

/// The `len` bytes of bitmap whose set bits `gaps` gives (see [`encode_gaps`]); `None` if the
/// gaps are malformed or point past `len` bytes. For the tests: a builder sets the bits of a
/// [`GapsPiece`] straight in its set.
#[cfg(test)]
pub fn decode_gaps(gaps: &[u8], len: usize) -> Option<Vec<u8>> {
    let mut bytes = vec![0u8; len];
    walk_gaps(gaps, len, |bit| bytes[(bit / 8) as usize] |= 1 << (bit % 8)).then_some(bytes)
}

/// Whether `gaps` are well formed and point within `len` bytes of bits (see [`encode_gaps`]).
pub fn gaps_fit(gaps: &[u8], len: usize) -> bool {
    walk_gaps(gaps, len, |_| {})
}

/// Calls `f` with each bit that `gaps` give, in order; false (after the bits before) where they
/// are malformed or point past `len` bytes.
fn walk_gaps(gaps: &[u8], len: usize, mut f: impl FnMut(u64)) -> bool {
    let (mut at, mut next) = (0, 0u64);
    while at < gaps.len() {
        let Some((gap, end)) = read_varint(gaps, at) else { return false };
        let Some(bit) = next.checked_add(gap).filter(|&bit| bit < 8 * len as u64) else { return false };
        f(bit);
        (at, next) = (end, bit + 1);
    }
    true
}

/// The LEB128 varint at `at` of `bytes` (see [`push_varint`](crate::records::push_varint)) and where it ends; `None` if it
/// runs past the end or past 64 bits. (`key_at` reads the arena's lengths unchecked: the arena
/// is this process's own.)
fn read_varint(bytes: &[u8], mut at: usize) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(at)?;
        at += 1;
        if shift == 63 && b > 1 {
            return None;
        }
        value |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            return Some((value, at));
        }
    }
    None
}

/// A piece of [`DenseWords`] as a builder reads it: `bytes` (whole words) from word `at` on.
#[derive(Clone, Copy, Debug)]
pub struct BitsPiece<'a> {
    pub at: u32,
    pub bytes: &'a [u8],
}

/// A piece of [`DenseWords`] as another process receives it: the gaps of its set bits (see
/// [`encode_gaps`]), the bits counted from word `at`, known to fit its bytes. A builder sets
/// their bits straight in its set, where decoding them into words first took a fresh page for
/// every 4 KiB (0.45 ms a MB on this host: 2.5 of the 2 × 1 benchmark's key-set phase of 7 ms).
#[derive(Clone, Copy, Debug)]
pub struct GapsPiece<'a> {
    at: u32,
    gaps: &'a [u8],
    /// The bytes of bits they stand for.
    len: usize,
}

impl<'a> GapsPiece<'a> {
    /// The piece of `gaps` of `len` bytes of bits from word `at`; None unless they fit.
    pub fn checked(at: u32, gaps: &'a [u8], len: usize) -> Option<GapsPiece<'a>> {
        gaps_fit(gaps, len).then_some(GapsPiece { at, gaps, len })
    }

    /// The piece of `gaps` that [`gaps_fit`] passed already (as received).
    pub(crate) fn checked_before(at: u32, gaps: &'a [u8], len: usize) -> GapsPiece<'a> {
        GapsPiece { at, gaps, len }
    }

    /// Calls `f` with the value of each bit, in order.
    pub(super) fn for_each_bit(&self, mut f: impl FnMut(u32)) {
        let fit = walk_gaps(self.gaps, self.len, |bit| f(64 * self.at + bit as u32));
        debug_assert!(fit, "gaps are checked when received");
    }
}

