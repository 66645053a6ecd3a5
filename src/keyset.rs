//! An exact set of byte-string keys, compact enough to hold a whole build side in every process,
//! and the encoding in which build keys are collected and broadcast.

use std::hash::BuildHasher;

/// Keys whose slots are prefetched together by [`KeySet::contains_batch`].
const BATCH: usize = 64;
/// Keys up to this long are stored in their slot; longer ones in the arena.
const INLINE: usize = 8;

/// Keys appended to one buffer as (length, bytes), the form in which they are collected during a
/// scan and broadcast between workers. The length is a LEB128 varint: one byte for a key shorter
/// than 128 bytes, where a u32 took four (the benchmark's 1M ids of 7–8 digits: 8.4 MB instead
/// of 11.4 to hold and to send to every other process).
#[derive(Clone, Debug)]
pub struct KeyArena {
    bytes: Vec<u8>,
    keys: u64,
    /// Keys that are numbers (see [`is_number`]), and the other keys that are short (see
    /// [`is_short`]), counted as they come so that a set's tables can be sized before its keys
    /// arrive.
    numbers: u64,
    short: u64,
    /// Keys that are numbers of 17–20 digits (see [`big_number`]).
    big: u64,
    /// The smallest and the largest number (see [`KeyCounts::numbers_range`]).
    numbers_range: Option<(u32, u32)>,
    /// The bytes the numbers' text takes (lengths included), wherever they are held: what their
    /// bits may take (see [`NumberBits`]).
    number_bytes: u64,
    /// The numbers held as bits, where the arena was made to (see
    /// [`holding_numbers_as_bits`](KeyArena::holding_numbers_as_bits)); the others' text is in
    /// `bytes`.
    bits: Option<NumberBits>,
    /// Where each piece of at least `piece` bytes ends (see [`KeyArena::pieces`]), noted as keys
    /// come: finding key boundaries afterwards meant decoding every length again, 3 ms for 1M
    /// keys on the sender's way.
    cuts: Vec<usize>,
    piece: usize,
}

/// Bytes of keys per piece sent to another process.
pub const PIECE: usize = 1 << 20;

/// How many keys a set will hold, and of which kinds, so that its tables are sized before the
/// keys arrive (they grow if the counts prove short).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyCounts {
    pub keys: u64,
    /// Keys that are numbers (see [`is_number`]).
    pub numbers: u64,
    /// Keys that are short (see [`is_short`]) and not numbers.
    pub short: u64,
    /// Keys that are numbers of 17–20 digits (see [`is_big_number`]).
    pub big: u64,
    /// The smallest and the largest of the numbers, as values: where the range is at most 48
    /// times their count, a set holds them as bits.
    pub numbers_range: Option<(u32, u32)>,
}

impl KeyCounts {
    /// The counts of two sets of keys together.
    pub fn merge(self, other: KeyCounts) -> KeyCounts {
        let numbers_range = match (self.numbers_range, other.numbers_range) {
            (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
            (one, None) | (None, one) => one,
        };
        KeyCounts {
            keys: self.keys + other.keys,
            numbers: self.numbers + other.numbers,
            short: self.short + other.short,
            big: self.big + other.big,
            numbers_range,
        }
    }
}

impl Default for KeyArena {
    fn default() -> Self {
        KeyArena { bytes: Vec::new(), keys: 0, numbers: 0, short: 0, big: 0, numbers_range: None, number_bytes: 0, bits: None, cuts: Vec::new(), piece: PIECE }
    }
}

impl KeyArena {
    /// An empty arena with room for `bytes` bytes of encoded keys. Only address space: pages
    /// are touched as keys arrive, so reserving more than will be used costs no memory, and the
    /// arena never reallocates, which copied it and touched fresh pages at every doubling.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut arena = KeyArena::default();
        // A reservation the system refuses leaves an arena that grows as it fills.
        let _ = arena.bytes.try_reserve_exact(bytes);
        arena
    }

    /// The arena, holding its numbers (decimals of 1–9 digits without a leading zero) as bits
    /// while the bits take no more bytes than the numbers' text, plus 64 KiB (ids from a range
    /// not much wider than their count); past that, the numbers the bits do not cover are
    /// kept as text. For the exact join's broadcast, which sends them as bits
    /// ([`take_bits`](Self::take_bits)).
    pub fn holding_numbers_as_bits(mut self) -> Self {
        self.bits = Some(NumberBits::default());
        self
    }

    /// Appends a key.
    #[inline]
    pub fn push(&mut self, key: &[u8]) {
        self.keys += 1;
        let value = number(key).map(|word| word - 1);
        let number = value.is_some();
        self.numbers += number as u64;
        // A number has at most 9 digits: one length byte.
        self.number_bytes += number as u64 * (key.len() as u64 + 1);
        if let Some(v) = value {
            let (low, high) = self.numbers_range.unwrap_or((v, v));
            self.numbers_range = Some((low.min(v), high.max(v)));
            if let Some(bits) = &mut self.bits {
                if bits.insert(v, self.number_bytes + NumberBits::SLACK) {
                    return;
                }
            }
        }
        crate::records::push_with_length(&mut self.bytes, key);
        let short = !number && is_short(key);
        self.short += short as u64;
        self.big += (!number && !short && is_big_number(key)) as u64;
        if self.bytes.len() - self.cuts.last().copied().unwrap_or(0) >= self.piece {
            self.cuts.push(self.bytes.len());
        }
    }

    /// The keys in pieces of about [`PIECE`] bytes (the last may be shorter), each of whole
    /// keys: the byte ranges of the encoded keys.
    pub fn pieces(&self) -> Vec<std::ops::Range<usize>> {
        let mut ends = self.cuts.clone();
        if ends.last().copied().unwrap_or(0) < self.bytes.len() {
            ends.push(self.bytes.len());
        }
        let starts = std::iter::once(0).chain(ends.iter().copied());
        starts.zip(ends.iter().copied()).map(|(start, end)| start..end).collect()
    }

    /// Bytes held, bits included.
    pub fn len_bytes(&self) -> usize {
        self.bytes.len() + self.bits.as_ref().map_or(0, |bits| bits.bytes.len())
    }

    pub fn keys(&self) -> u64 {
        self.keys
    }

    /// An empty arena cut in pieces of `piece` bytes instead of [`PIECE`] (for tests of pieces).
    #[cfg(test)]
    fn with_piece(piece: usize) -> Self {
        KeyArena { piece, ..KeyArena::default() }
    }

    /// How many keys of each kind are held.
    pub fn counts(&self) -> KeyCounts {
        KeyCounts { keys: self.keys, numbers: self.numbers, short: self.short, big: self.big, numbers_range: self.numbers_range }
    }

    /// The encoded keys, for sending.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Calls `f` with every key: those held as text in the order pushed, then those held as
    /// bits, in order of value and once each.
    pub fn for_each_key(&self, mut f: impl FnMut(&[u8])) {
        for_each_key(std::slice::from_ref(&self.bytes), &mut f);
        if let Some(bits) = &self.bits {
            let mut text = String::new();
            for_each_bit(BitsPiece { at: bits.at, bytes: &bits.bytes }, |value| {
                use std::fmt::Write;
                text.clear();
                write!(text, "{value}").expect("a String takes any text");
                f(text.as_bytes());
            });
        }
    }

    /// The encoded keys, taken.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// Releases the memory.
    pub fn clear(&mut self) {
        *self = KeyArena::default();
    }

    /// Takes the numbers held as bits (see [`holding_numbers_as_bits`](Self::holding_numbers_as_bits)),
    /// if any: the arena keeps the keys held as text.
    ///
    /// So a worker's numbers travel to every process as bits and are read once, as they are
    /// collected, where each process read every worker's text (the benchmark's 1M ids over a
    /// span of 20M: 2.5 MB of bits a worker against 4.5 MB of text; the key set's phase took
    /// twice as long with 2 processes of 1 worker as with 1 of 2).
    pub fn take_bits(&mut self) -> Option<DenseWords> {
        let bits = self.bits.take()?;
        (!bits.bytes.is_empty()).then_some(DenseWords { at: bits.at, bytes: bits.bytes })
    }
}

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
struct NumberBits {
    at: u32,
    bytes: Vec<u8>,
}

impl NumberBits {
    /// Bytes the bits may take beyond the numbers' text.
    const SLACK: u64 = 64 << 10;

    /// Sets number `v`'s bit, growing the bits to cover it within `bound` bytes; false if they
    /// cannot, and then the number is for the text.
    #[inline(always)]
    fn insert(&mut self, v: u32, bound: u64) -> bool {
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
    /// their size (toward it) where `bound` allows, so that ids that come in order cost a copy
    /// of their bits a doubling, not one a word.
    #[cold]
    fn grow(&mut self, word: u32, bound: u64) {
        let words = (self.bytes.len() / 8) as u32;
        let (low, high) = self.bounds_with(word);
        let needed = (high - low + 1) as u64;
        debug_assert!(8 * needed <= bound);
        // Numbers are below 10^9: words below 2^24.
        let room = needed.max(2 * words as u64).min(bound / 8).min(1 << 24) as u32;
        let low = if word < self.at { (high + 1).saturating_sub(room) } else { low };
        // Pages written, not left to the zero page: each bit is set by a read and a write, and
        // a read of an untouched page maps the zero page, which the write then replaces with a
        // flush of every CPU's TLB (see `limits::zeroed_written`; on the benchmark's 2.5 MB of
        // bits a worker, no difference in 25 interleaved runs either way).
        let mut bytes: Vec<u8> = crate::limits::zeroed_written(room as usize * 8);
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
fn numbers_outside(piece: BitsPiece, dense: Dense, mut f: impl FnMut(u32)) {
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
fn for_each_bit(piece: BitsPiece, mut f: impl FnMut(u32)) {
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
    fn for_each_bit(&self, mut f: impl FnMut(u32)) {
        let fit = walk_gaps(self.gaps, self.len, |bit| f(64 * self.at + bit as u32));
        debug_assert!(fit, "gaps are checked when received");
    }
}

/// Where the encoded key at `at` lies: its bytes' start and end.
#[inline(always)]
fn key_at(encoded: &[u8], at: usize) -> (usize, usize) {
    let (mut len, mut shift, mut i) = (0usize, 0, at);
    loop {
        let b = encoded[i];
        i += 1;
        len |= ((b & 0x7f) as usize) << shift;
        if b < 0x80 {
            return (i, i + len);
        }
        shift += 7;
    }
}

/// One slot of the table of other keys ([`Others`]): 16 bytes, four to a cache line.
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Slot {
    /// The hash's high 32 bits with the lowest bit set; 0 marks an empty slot.
    tag: u32,
    len: u32,
    /// The key itself (up to 8 bytes), or its offset in the arena.
    data: [u8; 8],
}

/// A table's slot count for `keys` keys: at most 2/3 full. Not rounded to a power of two (a
/// key's first slot comes from a multiply-shift, not a mask): rounded, the table of 1M keys took
/// a third more memory, and on a virtual machine every fresh megabyte can cost a millisecond or
/// more to touch.
fn slots_for(keys: usize) -> usize {
    (keys * 3 / 2 + 1).max(16)
}

/// Whether a table of `slots` slots needs to grow before it takes one more key beyond `keys`.
fn full(keys: usize, slots: usize) -> bool {
    (keys + 1) * 3 > slots * 2
}

/// The slot after `i` among `n`, wrapping at the end (linear probing).
#[inline(always)]
fn next(i: usize, n: usize) -> usize {
    if i + 1 == n { 0 } else { i + 1 }
}

/// An open-addressing table of keys that are words themselves: numbers as 4-byte words (see
/// [`number`]), other short keys as 8-byte ones (see [`short_word`]). The whole key is compared
/// in one instruction, and 16 or 8 slots share a cache line. The benchmark's 1M ids of 7–8
/// digits took 24 MB in 16-byte slots, 12 MB as 8-byte words, and take 6 MB as numbers.
/// Measured on the benchmark's exact semi-join (interleaved medians): 8-byte words against the
/// 16-byte slots, 2 processes × 1, where each process builds the whole table, 334 -> 314 ms;
/// `-w 2` 297 -> 278 ms; peak RSS at `-w 2` 42 -> 30 MiB (9 rounds). Numbers against 8-byte
/// words: 2 processes × 1 317 -> 301.5 ms, `-w 2` 294 -> 281 ms; peak RSS 29 -> 24 MiB (8
/// rounds).
struct Words<W> {
    slots: Vec<W>,
    keys: usize,
}

/// What a table of [`Words`] holds in a slot: a nonzero value that is the key itself (0 marks
/// an empty slot).
trait Word: Copy + Eq + Default + bytemuck::Zeroable {
    /// The value, widened, which the word's hash is taken of.
    fn wide(self) -> u64;
}

impl Word for u64 {
    #[inline(always)]
    fn wide(self) -> u64 {
        self
    }
}

impl Word for u32 {
    #[inline(always)]
    fn wide(self) -> u64 {
        self as u64
    }
}

impl<W: Word> Words<W> {
    fn with_capacity(keys: usize) -> Words<W> {
        Words { slots: crate::limits::zeroed_written(slots_for(keys)), keys: 0 }
    }

    #[inline(always)]
    fn first(&self, hash: u64) -> usize {
        slot_of(hash, self.slots.len())
    }

    fn insert(&mut self, hash: u64, word: W) {
        if full(self.keys, self.slots.len()) {
            self.grow();
        }
        self.place(hash, word);
        self.keys += 1;
    }

    /// Stores `word` in the first empty slot from its hash's (linear probing).
    #[inline(always)]
    fn place(&mut self, hash: u64, word: W) {
        let mut i = self.first(hash);
        while self.slots[i] != W::default() {
            i = next(i, self.slots.len());
        }
        self.slots[i] = word;
    }

    /// Doubles the table (only when a partition gets more keys than it was sized for).
    fn grow(&mut self) {
        let doubled = self.slots.len() * 2;
        let old = std::mem::replace(&mut self.slots, crate::limits::zeroed_written(doubled));
        let h = hasher();
        for &word in old.iter().filter(|&&w| w != W::default()) {
            self.place(h.hash_one(word.wide()), word);
        }
    }

    #[inline(always)]
    fn probe(&self, hash: u64, word: W) -> bool {
        let mut i = self.first(hash);
        loop {
            match self.slots[i] {
                w if w == W::default() => return false,
                w if w == word => return true,
                _ => i = next(i, self.slots.len()),
            }
        }
    }
}

/// Bits a key may take where numbers are held as bits: a bitmap of their span is chosen while
/// it takes no more memory than their table of 4-byte words, 2/3 full (48 bits a key).
const DENSE_BITS_PER_KEY: u64 = 48;

/// The span of number words a set holds as bits, cut into one range per partition, or none.
/// Ids are often numbers from a range not much wider than their count (the benchmark's 1M
/// customers among 20M ids), and then a bit per possible number beats a hash table: no hash,
/// no probing, a third of the memory (2.5 MB for the benchmark's 1M ids against 6 MB).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Dense {
    /// The first number word held as a bit (the smallest number plus one).
    first: u32,
    /// How many words from `first` on; 0 where numbers are held in their table.
    span: u32,
}

impl Dense {
    /// The span of `counts`' numbers where a bitmap of it is small enough, else none.
    fn of(counts: &KeyCounts) -> Dense {
        match counts.numbers_range {
            Some((low, high)) if counts.numbers > 0 && ((high - low) as u64) < DENSE_BITS_PER_KEY.saturating_mul(counts.numbers) => {
                // From the start of the smallest number's 64-bit word, so that bits collected
                // in words (see `NumberBits`) go in whole.
                let start = low / 64 * 64;
                Dense { first: start + 1, span: high - start + 1 }
            }
            _ => Dense::default(),
        }
    }

    /// The partition among `count` that holds number word `word` as a bit: by value, the span's
    /// 64-bit words cut in `count` even ranges (see [`range`](Self::range)). None for a word
    /// outside the span (or not a number, 0), which goes by its hash.
    #[inline(always)]
    fn part_of(&self, word: u32, count: usize) -> Option<usize> {
        self.holds(word).then(|| ((word - self.first) as u64 / 64 * count as u64 / self.words()) as usize)
    }

    /// The 64-bit words of the span's bitmap.
    #[inline(always)]
    fn words(&self) -> u64 {
        (self.span as u64).div_ceil(64)
    }

    /// Whether number word `word` is held as a bit.
    #[inline(always)]
    fn holds(&self, word: u32) -> bool {
        word.wrapping_sub(self.first) < self.span
    }

    /// The words partition `part` of `count` holds as bits: its first, and how many. Each
    /// partition starts on a word of the span's bitmap, so that bits that come as words (see
    /// [`DenseWords`]) go in whole.
    fn range(&self, part: usize, count: usize) -> (u32, u32) {
        let start = |p: usize| (64 * (p as u64 * self.words()).div_ceil(count as u64)).min(self.span as u64) as u32;
        (self.first + start(part), start(part + 1) - start(part))
    }
}

/// Number words as bits: bit `word - first` for each word held (see [`Dense`]).
struct Bits {
    first: u32,
    len: u32,
    words: Vec<u64>,
    /// The bits set, counted once they all are (see [`Bits::count`]).
    keys: usize,
}

impl Bits {
    fn new((first, len): (u32, u32)) -> Bits {
        Bits { first, len, words: crate::limits::zeroed_written((len as usize).div_ceil(64)), keys: 0 }
    }

    /// The bit of `word`, if it is one of these.
    #[inline(always)]
    fn bit(&self, word: u32) -> Option<usize> {
        let offset = word.wrapping_sub(self.first);
        (offset < self.len).then_some(offset as usize)
    }

    /// Sets the bit of `word` if it is one of these. Branch-free: with several partitions,
    /// whether a word falls in this one changes from key to key.
    #[inline(always)]
    fn set_if_held(&mut self, word: u32) {
        if self.words.is_empty() {
            return;
        }
        let offset = word.wrapping_sub(self.first);
        let held = offset < self.len;
        let bit = if held { offset as usize } else { 0 };
        self.words[bit / 64] |= (held as u64) << (bit % 64);
    }

    /// ORs in the words of `piece` that fall in these, which start at word `at` of the span's
    /// bitmap.
    fn or_piece(&mut self, at: u32, piece: BitsPiece) {
        let (at, from) = (at as usize, piece.at as usize);
        let start = at.max(from);
        let end = (at + self.words.len()).min(from + piece.bytes.len() / 8);
        for w in start..end {
            let bytes = &piece.bytes[8 * (w - from)..8 * (w - from + 1)];
            self.words[w - at] |= u64::from_le_bytes(bytes.try_into().expect("8 bytes"));
        }
    }

    /// Counts the bits set, for [`KeySet::len`], and clears any past the last (a word ORed in
    /// whole whose numbers past the span went to the table).
    fn count(&mut self) {
        if let Some(last) = self.words.last_mut().filter(|_| !self.len.is_multiple_of(64)) {
            *last &= (1 << (self.len % 64)) - 1;
        }
        self.keys = self.words.iter().map(|w| w.count_ones() as usize).sum();
    }

    #[inline(always)]
    fn get(&self, bit: usize) -> bool {
        self.words[bit / 64] & (1 << (bit % 64)) != 0
    }
}

/// The open-addressing table of the keys that are not short: longer than 8 bytes (held in an
/// arena), the empty key, and 8-byte keys that end in a byte below 8.
struct Others {
    slots: Vec<Slot>,
    arena: Vec<u8>,
    keys: usize,
}

impl Others {
    fn with_capacity(keys: usize) -> Others {
        Others { slots: crate::limits::zeroed_written(slots_for(keys)), arena: Vec::new(), keys: 0 }
    }

    /// The first empty slot from `i` on.
    #[inline(always)]
    fn free_from(&self, mut i: usize) -> usize {
        while self.slots[i].tag != 0 {
            i = next(i, self.slots.len());
        }
        i
    }

    fn insert(&mut self, hash: u64, key: &[u8]) {
        if full(self.keys, self.slots.len()) {
            self.grow();
        }
        let (i, tag) = slot_and_tag(hash, self.slots.len());
        let i = self.free_from(i);
        let data = if key.len() <= INLINE {
            inline_word(key).to_le_bytes()
        } else {
            let at = self.arena.len() as u64;
            self.arena.extend_from_slice(key);
            at.to_le_bytes()
        };
        self.slots[i] = Slot { tag, len: key.len() as u32, data };
        self.keys += 1;
    }

    /// Doubles the table (only when a partition gets more keys than it was sized for).
    fn grow(&mut self) {
        let doubled = self.slots.len() * 2;
        let old = std::mem::replace(&mut self.slots, crate::limits::zeroed_written(doubled));
        let h = hasher();
        for slot in old.iter().filter(|s| s.tag != 0) {
            let (i, _) = slot_and_tag(h.hash_one(stored_key(&self.arena, slot)), doubled);
            let i = self.free_from(i);
            self.slots[i] = *slot;
        }
    }

    #[inline(always)]
    fn probe(&self, hash: u64, key: &[u8]) -> bool {
        let (mut i, tag) = slot_and_tag(hash, self.slots.len());
        // An inline key is compared as one word (a slice comparison called memcmp: 2% of an
        // exact semi-join's time).
        let word = (key.len() <= INLINE).then(|| inline_word(key));
        loop {
            let slot = &self.slots[i];
            if slot.tag == 0 {
                return false;
            }
            if slot.tag == tag && slot.len as usize == key.len() {
                let found = match word {
                    Some(word) => u64::from_le_bytes(slot.data) == word,
                    None => {
                        let at = u64::from_le_bytes(slot.data) as usize;
                        self.arena[at..at + key.len()] == *key
                    }
                };
                if found {
                    return true;
                }
            }
            i = next(i, self.slots.len());
        }
    }
}

/// A key as the tables take it: its hash, its number if it is one (0 if not), else its word if
/// it is short (0 if not), else its value if it is a big number (0 if not).
#[derive(Clone, Copy)]
struct Hashed<'a> {
    hash: u64,
    number: u32,
    word: u64,
    big: u64,
    key: &'a [u8],
}

impl<'a> Hashed<'a> {
    const NONE: Hashed<'static> = Hashed { hash: 0, number: 0, word: 0, big: 0, key: &[] };

    #[inline(always)]
    fn new(h: &foldhash::fast::FixedState, key: &'a [u8], dense: Dense) -> Self {
        Hashed::with_number(h, key, number(key), dense)
    }

    /// [`new`](Self::new), given the key's number (see `number`), if it is one.
    #[inline(always)]
    fn with_number(h: &foldhash::fast::FixedState, key: &'a [u8], number: Option<u32>, dense: Dense) -> Self {
        // A word hashes in a few instructions where bytes of varying length take a loop.
        if let Some(number) = number {
            // A number held as a bit needs no hash: its partition and its bit come from it.
            let hash = if dense.holds(number) { 0 } else { h.hash_one(number.wide()) };
            return Hashed { hash, number, word: 0, big: 0, key };
        }
        if let Some(word) = short_word(key) {
            return Hashed { hash: h.hash_one(word), number: 0, word, big: 0, key };
        }
        match big_number(key) {
            Some(big) => Hashed { hash: h.hash_one(big), number: 0, word: 0, big, key },
            None => Hashed { hash: h.hash_one(key), number: 0, word: 0, big: 0, key },
        }
    }
}

/// One partition of a [`KeySet`]: its numbers, its other short keys, its big numbers and the
/// rest, apart.
struct Part {
    /// The numbers of the set's dense span that fall in this partition's range (none where
    /// numbers are not dense), and the numbers outside it.
    bits: Bits,
    numbers: Words<u32>,
    words: Words<u64>,
    big: Words<u64>,
    others: Others,
}

impl Part {
    fn with_capacity(bits: (u32, u32), numbers: usize, short: usize, big: usize, others: usize) -> Part {
        Part {
            bits: Bits::new(bits),
            numbers: Words::with_capacity(numbers),
            words: Words::with_capacity(short),
            big: Words::with_capacity(big),
            others: Others::with_capacity(others),
        }
    }

    fn keys(&self) -> usize {
        self.bits.keys + self.numbers.keys + self.words.keys + self.big.keys + self.others.keys
    }

    /// Inserts a key, but for a number of the set's dense span: the builder sets those bits
    /// itself, without a hash (see [`PartitionBuilder::build`]).
    #[inline(always)]
    fn insert(&mut self, k: Hashed) {
        debug_assert!(self.bits.bit(k.number).is_none(), "a dense number goes straight to its bit");
        if k.number != 0 {
            self.numbers.insert(k.hash, k.number);
        } else if k.word != 0 {
            self.words.insert(k.hash, k.word);
        } else if k.big != 0 {
            self.big.insert(k.hash, k.big);
        } else {
            self.others.insert(k.hash, k.key);
        }
    }

    /// Hints the cache to load the first slot a key would look at.
    #[inline(always)]
    fn prefetch(&self, k: Hashed) {
        if let Some(bit) = self.bits.bit(k.number) {
            prefetch(&self.bits.words[bit / 64]);
        } else if k.number != 0 {
            prefetch(&self.numbers.slots[self.numbers.first(k.hash)]);
        } else if k.word != 0 {
            prefetch(&self.words.slots[self.words.first(k.hash)]);
        } else if k.big != 0 {
            prefetch(&self.big.slots[self.big.first(k.hash)]);
        } else {
            prefetch(&self.others.slots[slot_and_tag(k.hash, self.others.slots.len()).0]);
        }
    }

    /// Inserts a group of keys (whose slots were prefetched), prefetching the slots of the next
    /// group's keys as it goes.
    fn insert_group_prefetching(&mut self, group: &[Hashed], next: &[Hashed]) {
        for i in 0..group.len().max(next.len()) {
            if let Some(&k) = next.get(i) {
                self.prefetch(k);
            }
            if let Some(&k) = group.get(i) {
                self.insert(k);
            }
        }
    }

    #[inline(always)]
    fn probe(&self, k: Hashed) -> bool {
        if let Some(bit) = self.bits.bit(k.number) {
            self.bits.get(bit)
        } else if k.number != 0 {
            self.numbers.probe(k.hash, k.number)
        } else if k.word != 0 {
            self.words.probe(k.hash, k.word)
        } else if k.big != 0 {
            self.big.probe(k.hash, k.big)
        } else {
            self.others.probe(k.hash, k.key)
        }
    }
}

/// Whether a key is a number (see `number`).
#[inline(always)]
pub fn is_number(key: &[u8]) -> bool {
    number(key).is_some()
}

/// A key that is a decimal number of 1–9 digits written without a leading zero (or the single
/// digit 0), as its value plus one: a nonzero 32-bit word, and no two such keys share one. Ids
/// are most often numbers, and a table of 4-byte slots holds them in half the memory of 8-byte
/// words: for the benchmark's 1M ids, 6 MB where 12 MB took 10–16 ms just to touch on this
/// virtual machine, in each process of a 2-process job.
///
/// Read eight digits at a time, as one word (see `eight_digits`), not digit by digit: a set of
/// 1M dense ids built in 4.55 ms a partition against 4.9, and a whole exact join took 7.5% fewer
/// instructions.
#[inline(always)]
fn number(key: &[u8]) -> Option<u32> {
    let len = key.len();
    if !(1..=9).contains(&len) || key[0] == b'0' && len > 1 {
        return None;
    }
    let head = &key[..len.min(8)];
    // The first digits as eight, with '0's before them: the word's low bytes come first.
    let fill = 0x3030_3030_3030_3030u64.checked_shr(8 * head.len() as u32).unwrap_or(0);
    let value = eight_digits(inline_word(head) << (8 * (8 - head.len())) | fill)?;
    let value = match key.get(8) {
        Some(&last) => value * 10 + digit(last)?,
        None => value,
    };
    Some(value + 1)
}

/// The value of eight decimal digits, the first in the word's low byte (little-endian text), or
/// None if a byte is not a digit: the digits paired, then the pairs, then the fours, by
/// multiplies (as simdjson parses eight digits).
#[inline(always)]
fn eight_digits(text: u64) -> Option<u32> {
    const HIGH: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    const ZEROS: u64 = 0x3030_3030_3030_3030;
    // Every byte 0x30–0x39: its high half 3, and still 3 once 6 is added.
    if text & HIGH != ZEROS || text.wrapping_add(0x0606_0606_0606_0606) & HIGH != ZEROS {
        return None;
    }
    let digits = text - ZEROS;
    let pairs = digits.wrapping_mul(10).wrapping_add(digits >> 8);
    const MASK: u64 = 0x0000_00FF_0000_00FF;
    let fours = (pairs & MASK).wrapping_mul(100 + (1_000_000 << 32)).wrapping_add(((pairs >> 16) & MASK).wrapping_mul(1 + (10_000 << 32)));
    Some((fours >> 32) as u32)
}

/// The value of one decimal digit.
#[inline(always)]
fn digit(byte: u8) -> Option<u32> {
    let d = byte.wrapping_sub(b'0');
    (d <= 9).then_some(d as u32)
}

/// Whether a key is short (see `short_word`): from its length and last byte alone, but for
/// the keys of 10–16 bytes, which may be numbers.
#[inline(always)]
pub fn is_short(key: &[u8]) -> bool {
    matches!(key.len(), 1..INLINE) || key.len() == INLINE && key[INLINE - 1] >= 8 || long_number(key).is_some()
}

/// A key as one nonzero word, if it fits with its length: keys of 1–7 bytes, zero-padded, with
/// the length in the top byte (1–7); keys of 8 bytes whose last byte, the top byte, is 8 or more
/// (so that no 8-byte key's word equals a shorter key's); and numbers of 10–16 digits (see
/// [`long_number`]), whose top byte is 0. Identifiers (numbers, codes) nearly all are short; the
/// rest (the empty key, other longer keys, and 8-byte keys ending in a control byte below 8) go
/// to the table of others.
#[inline(always)]
fn short_word(key: &[u8]) -> Option<u64> {
    let len = key.len();
    if len > INLINE {
        return long_number(key);
    }
    if len == 0 {
        return None;
    }
    let word = inline_word(key);
    if len < INLINE {
        Some(word | (len as u64) << 56)
    } else {
        (word >> 56 >= 8).then_some(word)
    }
}

/// A key that is a decimal number of 10–16 digits without a leading zero, as its value: below
/// 10^16 < 2^56, so its word's top byte is 0, which no other short key's word has (there it is
/// the key's length, 1–7, or its last byte, 8 or more). Ids of that many digits (milliseconds
/// since 1970, long account or phone numbers) then take an 8-byte word, not a 16-byte slot and
/// their bytes in the arena.
#[inline(always)]
fn long_number(key: &[u8]) -> Option<u64> {
    decimal(key, 10..=16)
}

/// The value of `key` as a decimal number of `digits` digits without a leading zero (but for
/// the number 0 itself): None for a key of another length, with a leading zero or a byte that
/// is not a digit, or past `u64::MAX` (only 20 digits can be).
#[inline(always)]
fn decimal(key: &[u8], digits: std::ops::RangeInclusive<usize>) -> Option<u64> {
    debug_assert!(*digits.start() >= 1, "an empty key has no first digit");
    if !digits.contains(&key.len()) || key[0] == b'0' && key.len() > 1 {
        return None;
    }
    // Up to 19 digits cannot overflow: the checks, which cost the 1–9-digit numbers of the
    // benchmark 11% more instructions in a whole exact join, are made only where 20 may come.
    let may_overflow = *digits.end() >= 20;
    let mut value = 0u64;
    for &b in key {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = match may_overflow {
            true => value.checked_mul(10)?.checked_add(digit as u64)?,
            false => value * 10 + digit as u64,
        };
    }
    Some(value)
}

/// Whether a key is a big number (see `big_number`).
#[inline(always)]
pub fn is_big_number(key: &[u8]) -> bool {
    big_number(key).is_some()
}

/// A key that is a decimal number of 17–20 digits without a leading zero and below 2^64, as its
/// value: nonzero, and no two such keys share one. Ids of 18–19 digits (64-bit "snowflake" ids,
/// which most large systems hand out) then take an 8-byte word of a table of their own (their
/// values use all 64 bits, so they cannot share the short keys' table) instead of a 16-byte slot
/// and their bytes in the arena.
#[inline(always)]
fn big_number(key: &[u8]) -> Option<u64> {
    decimal(key, 17..=20)
}

/// A key of at most 8 bytes as a slot holds it: its bytes zero-padded to 8, little-endian. Built
/// from whole-word loads by lookup3's tail reader rather than a copy of variable length, which is
/// a call to memcpy.
#[inline(always)]
fn inline_word(key: &[u8]) -> u64 {
    debug_assert!(key.len() <= INLINE);
    if key.is_empty() {
        return 0;
    }
    let (low, high, _) = crate::hashing::lookup3::tail_words(key);
    low as u64 | (high as u64) << 32
}

/// The key a slot holds: in the slot, or in the arena.
fn stored_key<'a>(arena: &'a [u8], slot: &'a Slot) -> &'a [u8] {
    let len = slot.len as usize;
    if len <= INLINE {
        &slot.data[..len]
    } else {
        let at = u64::from_le_bytes(slot.data) as usize;
        &arena[at..at + len]
    }
}

/// A key's first slot among `slots`, and its tag. The slot is a multiply-shift of the hash with
/// its halves swapped, so that it comes mostly from the low half and does not correlate with the
/// tag, which is the high half (with the lowest bit set: 0 marks an empty slot).
#[inline(always)]
fn slot_and_tag(hash: u64, slots: usize) -> (usize, u32) {
    (slot_of(hash, slots), ((hash >> 32) as u32) | 1)
}

/// A key's first slot among `slots` (see [`slot_and_tag`]).
#[inline(always)]
fn slot_of(hash: u64, slots: usize) -> usize {
    crate::hashing::mulshift(hash.rotate_left(32), slots as u64) as usize
}

/// An exact set of keys, built once and then only queried. Keys of up to 8 bytes (and numbers
/// of up to 16 digits) live in the tables themselves, so a lookup touches one cache line, and
/// batched lookups prefetch those lines so that the misses overlap; longer keys live in an
/// arena. Numbers of up to 9 digits (see `number`) take a bit each of their range where it is
/// dense (see `Dense`), else about 6 bytes each; 12 bytes per other short key (see
/// `short_word`), 24 per other key plus the arena.
///
/// The set is cut into partitions by hash (dense numbers by value), so that the workers of a
/// process can each build one at the same time (see [`PartitionBuilder`]); a key is looked up
/// in its own partition only.
pub struct KeySet {
    parts: Vec<Part>,
    dense: Dense,
}

/// A partition of a [`KeySet`], built on its own.
pub struct Partition(Part, Dense);

/// Partition `index` of `count` of a [`KeySet`], to be built from the keys of encoded pieces
/// (see [`KeyArena`]): the keys whose hash falls in it. Its tables are made first, sized for its
/// share of the keys, so that their memory can be made ready while the keys are still on their
/// way (fresh memory costs about half a millisecond a MB to touch on a virtual machine).
pub struct PartitionBuilder {
    table: Part,
    dense: Dense,
    index: usize,
    count: usize,
}

impl PartitionBuilder {
    /// Sized for its share of `counts`. It grows if its share proves larger.
    pub fn new(counts: KeyCounts, index: usize, count: usize) -> PartitionBuilder {
        // A share, with room for the deviation of a random split.
        let share = |n: u64| (n as usize / count) + (n as usize / count).isqrt() * 4 + 16;
        let others = counts.keys.saturating_sub(counts.numbers + counts.short + counts.big);
        let dense = Dense::of(&counts);
        // Where the numbers are dense, their table takes only those that fall outside the span
        // (none, when the counts are right).
        let numbers = if dense.span > 0 { 0 } else { share(counts.numbers) };
        let table = Part::with_capacity(dense.range(index, count), numbers, share(counts.short), share(counts.big), share(others));
        PartitionBuilder { table, dense, index, count }
    }

    /// The partition of the keys in `pieces`. Every key is hashed, so each builder reads all
    /// the pieces; the partitions' inserts, the costly part, are shared out.
    pub fn build(self, pieces: &[impl AsRef<[u8]>]) -> Partition {
        self.build_with_bits(pieces, &[], &[])
    }

    /// [`build`](Self::build), with numbers that came as bits (see [`KeyArena::take_bits`])
    /// too: this partition's words of each piece are ORed in, and its bits of each piece of
    /// gaps set.
    pub fn build_with_bits(self, pieces: &[impl AsRef<[u8]>], bits: &[BitsPiece], gaps: &[GapsPiece]) -> Partition {
        let PartitionBuilder { mut table, dense, index, count } = self;
        let h = hasher();
        if !table.bits.words.is_empty() {
            // The partition's bits start on a word (see `Dense::range`).
            let at = (table.bits.first - 1) / 64;
            bits.iter().for_each(|&piece| table.bits.or_piece(at, piece));
        }
        // Numbers the span does not hold (all, where the set holds no bits) go to the table.
        let number_to_table = |table: &mut Part, word: u32| {
            let k = Hashed::with_number(&h, &[], Some(word), dense);
            if count == 1 || part_of(&k, dense, count) == index {
                table.insert(k);
            }
        };
        for &piece in bits {
            numbers_outside(piece, dense, |word| number_to_table(&mut table, word));
        }
        for piece in gaps {
            piece.for_each_bit(|value| match value + 1 {
                word if dense.holds(word) => table.bits.set_if_held(word),
                word => number_to_table(&mut table, word),
            });
        }
        // Keys go in groups, and a group's slots are prefetched while the group before it is
        // inserted, one slot per insert, so that about a group's misses are always in flight.
        // A key joins the group whatever its partition, and the group's length grows only for
        // this partition's keys: with several partitions, a branch on the partition would
        // mispredict for every other key.
        let mut groups = [[Hashed::NONE; BATCH]; 2];
        let (mut len, mut ready) = (0, 0);
        for_each_key(pieces, |key| {
            let number = number(key);
            // A number of the dense span goes straight to its bit, if this partition holds it:
            // no hash, no group (a bitmap of a few MB needs no prefetching to be filled fast).
            if let Some(word) = number.filter(|&word| dense.holds(word)) {
                table.bits.set_if_held(word);
                return;
            }
            let k = Hashed::with_number(&h, key, number, dense);
            let [waiting, filling] = &mut groups;
            filling[len] = k;
            len += (count == 1 || part_of(&k, dense, count) == index) as usize;
            if len == BATCH {
                table.insert_group_prefetching(&waiting[..ready], filling);
                std::mem::swap(waiting, filling);
                (ready, len) = (BATCH, 0);
            }
        });
        let [waiting, filling] = &groups;
        table.insert_group_prefetching(&waiting[..ready], &filling[..len]);
        table.insert_group_prefetching(&filling[..len], &[]);
        table.bits.count();
        Partition(table, dense)
    }
}

fn hasher() -> foldhash::fast::FixedState {
    foldhash::fast::FixedState::with_seed(0x626c_6f6f_6d66_6c77)
}

/// The partition of key `k` among `parts`: by value for a number of the dense span, else by hash.
#[inline(always)]
fn part_of(k: &Hashed, dense: Dense, parts: usize) -> usize {
    dense.part_of(k.number, parts).unwrap_or_else(|| partition_of(k.hash, parts))
}

/// The partition of a hash among `parts`: the high bits of the hash times an odd constant, which
/// depend on every bit of the hash, so that the low bits (the slot) stay uniform within a
/// partition.
#[inline(always)]
fn partition_of(hash: u64, parts: usize) -> usize {
    crate::hashing::mulshift(hash.wrapping_mul(0x9E37_79B9_7F4A_7C15), parts as u64) as usize
}

/// Calls `f` with every key of encoded pieces (see [`KeyArena`]), in order. A loop rather than
/// an iterator: a flattening iterator checked for its next piece at every key, which took a tenth
/// of a partition's build.
#[inline(always)]
fn for_each_key<'a>(pieces: &'a [impl AsRef<[u8]>], mut f: impl FnMut(&'a [u8])) {
    for piece in pieces {
        let piece = piece.as_ref();
        let mut at = 0;
        while at < piece.len() {
            let (start, end) = key_at(piece, at);
            f(&piece[start..end]);
            at = end;
        }
    }
}

impl KeySet {
    /// The set of the keys in `pieces`, sized for `counts` (it grows if there are more). A key
    /// given twice takes two slots; membership is unaffected.
    pub fn build(pieces: &[impl AsRef<[u8]>], counts: KeyCounts) -> KeySet {
        KeySet::from_partitions(vec![PartitionBuilder::new(counts, 0, 1).build(pieces)])
    }

    /// The set made of partitions 0..n of one [`PartitionBuilder`] count n, in index order.
    pub fn from_partitions(parts: Vec<Partition>) -> KeySet {
        assert!(!parts.is_empty(), "a key set has at least one partition");
        let dense = parts[0].1;
        assert!(parts.iter().all(|p| p.1 == dense), "the partitions of one set, built from the same counts");
        KeySet { parts: parts.into_iter().map(|p| p.0).collect(), dense }
    }

    #[inline(always)]
    fn part(&self, k: &Hashed) -> &Part {
        if self.parts.len() == 1 {
            &self.parts[0]
        } else {
            &self.parts[part_of(k, self.dense, self.parts.len())]
        }
    }

    /// Whether the set holds its numbers as bits: their range is at most 48 times their count.
    pub fn numbers_as_bits(&self) -> bool {
        self.dense.span > 0
    }

    /// Whether `key` is in the set.
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        let k = Hashed::new(&hasher(), key, self.dense);
        self.part(&k).probe(k)
    }

    /// Answers many keys: every key's slot is prefetched before any is probed.
    pub fn contains_batch(&self, keys: &[&[u8]], answers: &mut Vec<bool>) {
        answers.clear();
        let h = hasher();
        let mut hashed = [Hashed::NONE; BATCH];
        for group in keys.chunks(BATCH) {
            for (k, key) in hashed.iter_mut().zip(group) {
                *k = Hashed::new(&h, key, self.dense);
                self.part(k).prefetch(*k);
            }
            answers.extend(hashed[..group.len()].iter().map(|&k| self.part(&k).probe(k)));
        }
    }

    /// Keys held, duplicates included but for numbers held as bits, which count once.
    pub fn len(&self) -> usize {
        self.parts.iter().map(Part::keys).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[inline(always)]
fn prefetch<T>(slot: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint with no effect on memory; the reference is valid.
    unsafe {
        std::arch::x86_64::_mm_prefetch(slot as *const T as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = slot;
}

#[cfg(test)]
mod tests {
    #[test]
    fn inline_words_are_the_zero_padded_key_for_every_length() {
        let bytes: Vec<u8> = (0..8u8).map(|i| i.wrapping_mul(37).wrapping_add(0x81)).collect();
        for n in 0..=8 {
            let mut padded = [0u8; 8];
            padded[..n].copy_from_slice(&bytes[..n]);
            assert_eq!(super::inline_word(&bytes[..n]), u64::from_le_bytes(padded), "length {n}");
        }
    }

    use super::*;

    /// The arena's pieces, as a receiver holds them.
    fn pieces_of(arena: &KeyArena) -> Vec<Vec<u8>> {
        arena.pieces().into_iter().map(|r| arena.as_bytes()[r].to_vec()).collect()
    }

    #[test]
    fn holds_exactly_the_keys_put_in() {
        let mut arena = KeyArena::with_piece(1000);
        for i in 0..10_000u32 {
            arena.push(format!("k{}", i % 7000).as_bytes());
        }
        arena.push(b"");
        arena.push(b"a key longer than eight bytes");
        let pieces = pieces_of(&arena);
        // Sized for the keys, and for far fewer (the tables must grow).
        for counts in [arena.counts(), KeyCounts { keys: 100, numbers: 10, short: 50, ..KeyCounts::default() }] {
            let set = KeySet::build(&pieces, counts);
            assert_eq!(set.len(), 10_002);
            assert!((0..7000).all(|i| set.contains(format!("k{i}").as_bytes())));
            assert!(set.contains(b"") && set.contains(b"a key longer than eight bytes"));
            assert!(!set.contains(b"k7000") && !set.contains(b"k") && !set.contains(b"a key longer than eight byteS"));
            let keys: Vec<&[u8]> = vec![b"k5", b"nope", b"a key longer than eight bytes", b"12345678"];
            let mut answers = Vec::new();
            set.contains_batch(&keys, &mut answers);
            assert_eq!(answers, [true, false, true, false]);
        }
    }

    /// The arena counts short keys by length and last byte alone; the tables decide by the
    /// word. They must agree, or a table would be sized for the wrong keys.
    #[test]
    fn is_short_agrees_with_short_word() {
        for len in 0..=10 {
            for last in [0u8, 1, 7, 8, 9, b'0', 0x7f, 0xff] {
                let mut key = vec![b'k'; len];
                if let Some(l) = key.last_mut() {
                    *l = last;
                }
                assert_eq!(is_short(&key), short_word(&key).is_some(), "{key:?}");
            }
        }
    }

    /// A short key's word holds its length: keys that differ only by trailing zero bytes, and
    /// an 8-byte key whose last byte is a shorter key's length, never share a word.
    #[test]
    fn short_words_tell_keys_apart() {
        let shorter = b"abcdefg";
        let mut eight = shorter.to_vec();
        for last in 0..=8u8 {
            eight.truncate(7);
            eight.push(last);
            // 8 bytes ending below 8 would read as the 7-byte key's word: they are not short.
            assert_eq!(short_word(&eight).is_some(), last == 8, "last byte {last}");
        }
        let padded: Vec<Vec<u8>> = (1..=8).map(|n| [&b"a"[..], &vec![0u8; n - 1]].concat()).collect();
        let words: std::collections::HashSet<Option<u64>> = padded.iter().map(|k| short_word(k)).collect();
        // Seven distinct words; the 8-byte key, ending in 0, is not short.
        assert_eq!(words.len(), 8);
        assert!(words.contains(&None));
        assert_eq!(short_word(b""), None);
        assert_eq!(short_word(b"123456789"), None);

        let mut arena = KeyArena::with_piece(100);
        for key in [&shorter[..], b"a", b"a\0", b"", b"12345678"] {
            arena.push(key);
        }
        let mut seven_then_seven = shorter.to_vec();
        seven_then_seven.push(7);
        arena.push(&seven_then_seven);
        let set = KeySet::build(&pieces_of(&arena), arena.counts());
        assert!(set.contains(shorter) && set.contains(&seven_then_seven));
        assert!(set.contains(b"a") && set.contains(b"a\0") && set.contains(b"") && set.contains(b"12345678"));
        assert!(!set.contains(b"a\0\0") && !set.contains(b"abcdefg\0") && !set.contains(b"abcdefg\x08"));
        let only_seven = KeySet::build(&pieces_of(&{ let mut a = KeyArena::default(); a.push(shorter); a }), KeyCounts { keys: 1, short: 1, ..KeyCounts::default() });
        assert!(!only_seven.contains(&seven_then_seven));
        let only_eight = KeySet::build(&pieces_of(&{ let mut a = KeyArena::default(); a.push(&seven_then_seven); a }), KeyCounts { keys: 1, ..KeyCounts::default() });
        assert!(!only_eight.contains(shorter));
    }

    /// The eight-at-a-time reading of numbers agrees with a digit loop: on every number below
    /// 200,000 and near each power of ten, on random keys of 0–11 bytes mostly of digits (with
    /// the bytes either side of '0' and '9', a high bit, a NUL), and on every 9-digit key with one
    /// byte that is not a digit.
    #[test]
    fn numbers_read_eight_digits_at_a_time_as_a_digit_loop_reads_them() {
        use rand::{Rng, SeedableRng};
        let slow = |key: &[u8]| decimal(key, 1..=9).map(|value| value as u32 + 1);
        let powers = (0..=9).map(|e| 10u64.pow(e)).flat_map(|p| p.saturating_sub(3)..p + 3);
        for n in (0..200_000u64).chain(powers).chain(999_999_990..1_000_000_003) {
            let key = n.to_string();
            assert_eq!(number(key.as_bytes()), slow(key.as_bytes()), "{key}");
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        const ODD: [u8; 8] = [b'/', b':', b'a', b' ', 0, 0xff, 0xb0, b'0' + 0x80];
        for _ in 0..300_000 {
            let len = rng.gen_range(0..=11);
            let key: Vec<u8> = (0..len).map(|_| if rng.gen_bool(0.9) { rng.gen_range(b'0'..=b'9') } else { ODD[rng.gen_range(0..ODD.len())] }).collect();
            assert_eq!(number(&key), slow(&key), "{key:?}");
        }
        for at in 0..9 {
            for odd in ODD {
                let mut key = *b"123456789";
                key[at] = odd;
                assert_eq!(number(&key), None, "{key:?}");
            }
        }
    }

    /// A number is a decimal of 1–9 digits with no leading zero (or the digit 0 alone): no other
    /// key reads as one, and keys that differ only by leading zeros stay apart, in their tables.
    #[test]
    fn numbers_are_canonical_decimals() {
        assert_eq!(number(b"0"), Some(1));
        assert_eq!(number(b"7"), Some(8));
        assert_eq!(number(b"123456789"), Some(123_456_790));
        assert_eq!(number(b"999999999"), Some(1_000_000_000));
        for not in [&b""[..], b"00", b"07", b"007", b"1234567890", b"12a", b"-1", b"+1", b" 1", b"1.0", b"1/", b"1:"] {
            assert_eq!(number(not), None, "{:?}", String::from_utf8_lossy(not));
        }
        let keys: [&[u8]; 8] = [b"0", b"7", b"07", b"007", b"123456789", b"1234567890", b"999999999", b"x7"];
        let mut arena = KeyArena::with_piece(16);
        keys.iter().for_each(|k| arena.push(k));
        assert_eq!(arena.counts(), KeyCounts { keys: 8, numbers: 4, short: 4, big: 0, numbers_range: Some((0, 999_999_999)) });
        for counts in [arena.counts(), KeyCounts { keys: 1, ..KeyCounts::default() }] {
            let set = KeySet::build(&pieces_of(&arena), counts);
            assert!(keys.iter().all(|k| set.contains(k)));
            assert_eq!(set.parts[0].numbers.keys, 4);
            for absent in [&b"00"[..], b"0007", b"8", b"70", b"12345678", b"23456789", b"1000000000", b"x07"] {
                assert!(!set.contains(absent), "{:?}", String::from_utf8_lossy(absent));
            }
        }
    }

    /// Numbers of 10–16 digits without a leading zero are words of their own (top byte 0): no
    /// short key's word and no other number's. In a set with 8-byte keys, shorter keys and other
    /// numbers, each is found and nothing else is.
    #[test]
    fn long_numbers_are_words_apart_from_other_keys() {
        assert_eq!(long_number(b"1000000000"), Some(1_000_000_000));
        assert_eq!(long_number(b"9999999999999999"), Some(9_999_999_999_999_999));
        for not in [&b"999999999"[..], b"10000000000000000", b"0123456789", b"123456789a", b"12345 67890", b"-123456789"] {
            assert_eq!(long_number(not), None, "{:?}", String::from_utf8_lossy(not));
        }
        let keys: Vec<Vec<u8>> = ["1000000000", "1700000000123", "9999999999999999", "12345678", "1234567", "abcdefgh", "10000000000000000", "0123456789", "123456789"]
            .iter()
            .map(|k| k.as_bytes().to_vec())
            .collect();
        // An 8-byte key whose little-endian word is a long number's value (its top byte 0) is
        // not short, and must not be taken for the number.
        let as_bytes = 1_000_000_000u64.to_le_bytes();
        let mut arena = KeyArena::with_piece(16);
        keys.iter().for_each(|k| arena.push(k));
        assert_eq!(arena.counts(), KeyCounts { keys: 9, numbers: 3, short: 4, big: 1, numbers_range: Some((1_234_567, 123_456_789)) });
        for counts in [arena.counts(), KeyCounts { keys: 1, ..KeyCounts::default() }] {
            let set = KeySet::build(&pieces_of(&arena), counts);
            assert!(keys.iter().all(|k| set.contains(k)));
            assert_eq!(set.parts[0].words.keys, 4, "three long numbers and abcdefgh");
            assert_eq!(set.parts[0].big.keys, 1, "the 17-digit number");
            for absent in [&as_bytes[..], b"1000000001", b"01000000000", b"100000000", b"99999999999999999", b"170000000012"] {
                assert!(!set.contains(absent), "{:?}", String::from_utf8_lossy(absent));
            }
        }
    }

    /// Numbers of 17–20 digits without a leading zero and below 2^64 are words of a table of
    /// their own; one past 2^64, or with a leading zero, is another key. In a set of snowflake
    /// ids beside other keys, each is found and its near misses are not.
    #[test]
    fn big_numbers_are_words_of_their_own() {
        assert_eq!(big_number(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(big_number(b"10000000000000000"), Some(10_000_000_000_000_000));
        for not in [&b"18446744073709551616"[..], b"99999999999999999999", b"01234567890123456", b"1234567890123456", b"123456789012345678a", b"123456789012345678901"] {
            assert_eq!(big_number(not), None, "{:?}", String::from_utf8_lossy(not));
        }
        let keys: Vec<Vec<u8>> = ["1789012345678901234", "1789012345678901235", "18446744073709551615", "18446744073709551616", "7", "k1789012345678901234"]
            .iter()
            .map(|k| k.as_bytes().to_vec())
            .collect();
        let mut arena = KeyArena::default();
        keys.iter().for_each(|k| arena.push(k));
        assert_eq!(arena.counts(), KeyCounts { keys: 6, numbers: 1, short: 0, big: 3, numbers_range: Some((7, 7)) });
        for counts in [arena.counts(), KeyCounts { keys: 1, ..KeyCounts::default() }] {
            let set = KeySet::build(&pieces_of(&arena), counts);
            assert!(keys.iter().all(|k| set.contains(k)));
            assert_eq!(set.parts[0].big.keys, 3);
            for absent in [&b"1789012345678901236"[..], b"01789012345678901234", b"178901234567890123", b"17890123456789012340", b"18446744073709551614"] {
                assert!(!set.contains(absent), "{:?}", String::from_utf8_lossy(absent));
            }
        }
    }

    /// Every key count around the insert groups' boundaries (the last group partial, full, or
    /// alone), in one partition and in two.
    #[test]
    fn every_key_is_inserted_whatever_the_count() {
        for n in [0u32, 1, 63, 64, 65, 127, 128, 129, 200] {
            let mut arena = KeyArena::with_piece(100);
            (0..n).for_each(|i| arena.push(format!("k{i}").as_bytes()));
            let pieces = pieces_of(&arena);
            for count in [1, 2] {
                let set = KeySet::from_partitions((0..count).map(|i| PartitionBuilder::new(arena.counts(), i, count).build(&pieces)).collect());
                assert_eq!(set.len(), n as usize, "{n} keys, {count} partition(s)");
                assert!((0..n).all(|i| set.contains(format!("k{i}").as_bytes())), "{n} keys, {count} partition(s)");
                assert!(!set.contains(format!("k{n}").as_bytes()));
            }
        }
    }

    #[test]
    fn partitions_built_apart_make_the_same_set() {
        let mut arena = KeyArena::with_piece(4096);
        for i in 0..20_000u32 {
            arena.push(format!("key-{i}").as_bytes());
        }
        arena.push(b"a key longer than eight bytes");
        let pieces = pieces_of(&arena);
        for count in [2, 3, 5] {
            let parts = (0..count).map(|i| PartitionBuilder::new(arena.counts(), i, count).build(&pieces)).collect();
            let set = KeySet::from_partitions(parts);
            assert_eq!(set.len(), 20_001, "{count} partitions");
            // Each partition holds a fair share (the split is by hash).
            assert!(set.parts.iter().all(|p| p.keys() > 20_001 / count / 2), "{count} partitions");
            assert!((0..20_000).all(|i| set.contains(format!("key-{i}").as_bytes())));
            assert!(set.contains(b"a key longer than eight bytes"));
            let probes: Vec<Vec<u8>> = (15_000..25_000u32).map(|i| format!("key-{i}").into_bytes()).collect();
            let refs: Vec<&[u8]> = probes.iter().map(|k| k.as_slice()).collect();
            let mut answers = Vec::new();
            set.contains_batch(&refs, &mut answers);
            assert!(answers.iter().enumerate().all(|(i, &a)| a == (i < 5_000)), "{count} partitions");
        }
    }

    /// Numbers from a range not much wider than their count are held as bits, cut by value
    /// among the partitions; the set answers exactly as the table does (the same keys with
    /// counts that carry no range), for every number around the span and for the other keys,
    /// one at a time and batched. Numbers 0 and 999999999 (the ends of what a number word
    /// holds) and repeats are among them.
    #[test]
    fn dense_numbers_are_held_as_bits_and_answer_as_the_table() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for (low, high) in [(1_000u32, 9_000u32), (0, 500), (999_990_000, 999_999_999)] {
            let mut arena = KeyArena::with_piece(512);
            let mut numbers = std::collections::HashSet::new();
            for _ in 0..2_000 {
                let n = rng.gen_range(low..=high);
                numbers.insert(n);
                arena.push(n.to_string().as_bytes());
            }
            for key in [&b"k1"[..], b"0123", b"a key longer than eight bytes", b"12345678901", b"12345678901234567890"] {
                arena.push(key);
            }
            let pieces = pieces_of(&arena);
            let probes: Vec<Vec<u8>> = (low.saturating_sub(100)..=high.saturating_add(100).min(999_999_999))
                .map(|n| n.to_string().into_bytes())
                .chain([&b"k1"[..], b"k2", b"0123", b"123", b"a key longer than eight bytes", b"12345678901", b"12345678901234567890"].map(|k| k.to_vec()))
                .collect();
            let refs: Vec<&[u8]> = probes.iter().map(|k| k.as_slice()).collect();
            let table = KeySet::build(&pieces, KeyCounts { numbers_range: None, ..arena.counts() });
            assert!(!table.numbers_as_bits());
            let (mut want, mut got) = (Vec::new(), Vec::new());
            table.contains_batch(&refs, &mut want);
            let others: [&[u8]; 5] = [b"k1", b"0123", b"a key longer than eight bytes", b"12345678901", b"12345678901234567890"];
            let held = |k: &[u8]| others.contains(&k) || std::str::from_utf8(k).ok().and_then(|t| t.parse().ok()).is_some_and(|n: u32| numbers.contains(&n) && n.to_string().as_bytes() == k);
            assert!(refs.iter().zip(&want).all(|(k, &yes)| yes == held(k)), "the table holds exactly the keys");
            for count in [1, 2, 3, 5] {
                let set = KeySet::from_partitions((0..count).map(|i| PartitionBuilder::new(arena.counts(), i, count).build(&pieces)).collect());
                assert!(set.numbers_as_bits(), "{low}..={high}");
                // Numbers held as bits count once.
                assert_eq!(set.len(), numbers.len() + 5);
                set.contains_batch(&refs, &mut got);
                assert!(got == want, "{low}..={high}, {count} partition(s): batched");
                assert!(refs.iter().zip(&want).all(|(k, &yes)| set.contains(k) == yes), "{low}..={high}, {count} partition(s)");
                if count > 1 {
                    // Cut by value, each partition holds its share of the numbers.
                    assert!(set.parts.iter().all(|p| p.bits.keys > numbers.len() / count / 2), "{count} partitions");
                }
            }
        }
    }

    /// Numbers outside the range the counts give (counts that are wrong) go to the table, and
    /// the set still holds every key; numbers spread too widely stay in the table.
    #[test]
    fn numbers_outside_the_counted_range_or_too_sparse_go_to_the_table() {
        let mut arena = KeyArena::with_piece(64);
        let numbers: Vec<u32> = (0..300).map(|i| i * 7 + 100).collect();
        numbers.iter().for_each(|n| arena.push(n.to_string().as_bytes()));
        let pieces = pieces_of(&arena);
        let narrow = KeyCounts { numbers_range: Some((500, 1_000)), ..arena.counts() };
        for count in [1, 2, 3] {
            let set = KeySet::from_partitions((0..count).map(|i| PartitionBuilder::new(narrow, i, count).build(&pieces)).collect());
            assert!(set.numbers_as_bits());
            assert!((0..2_400).all(|n| set.contains(n.to_string().as_bytes()) == numbers.contains(&n)), "{count} partition(s)");
            assert_eq!(set.len(), 300);
        }
        let mut sparse = KeyArena::default();
        (0..10u32).for_each(|i| sparse.push((i * 1_000).to_string().as_bytes()));
        let set = KeySet::build(&pieces_of(&sparse), sparse.counts());
        assert!(!set.numbers_as_bits(), "10 numbers over a span of 9001: more than 48 bits a key");
        assert!((0..10u32).all(|i| set.contains((i * 1_000).to_string().as_bytes())) && !set.contains(b"500"));
    }

    /// Workers' keys collected with numbers as bits (see `KeyArena::holding_numbers_as_bits`)
    /// make the set that their text makes, in 1, 2, 3 and 5 partitions, with the bits in
    /// pieces of every size (one word, three, whole): numbers, their neighbours, 0, repeats,
    /// and keys of every other kind. One worker's numbers are too sparse for bits and stay text;
    /// with counts that carry no range, or too narrow a one, the bits' numbers go to the table.
    /// Pieces of bits come as words or as gaps (as another process receives them), or both.
    #[test]
    fn numbers_collected_as_bits_make_the_set_their_text_makes() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let mut workers: Vec<KeyArena> = (0..3).map(|_| KeyArena::with_piece(256).holding_numbers_as_bits()).collect();
        let mut text = KeyArena::with_piece(256);
        let mut numbers = Vec::new();
        let mut push = |w: usize, key: &[u8], workers: &mut Vec<KeyArena>| {
            workers[w].push(key);
            text.push(key);
        };
        for i in 0..6_000u32 {
            let n = if i < 3 { [0, 4_000, 1_000][i as usize] } else { rng.gen_range(1_000..=4_000u32) };
            numbers.push(n);
            push((i % 2) as usize, n.to_string().as_bytes(), &mut workers);
        }
        // The third worker: two numbers 198,999 apart (25 KB of bits for 14 bytes of text: within
        // the slack), and keys of every other kind.
        let others: [&[u8]; 6] = [b"k1", b"0123", b"a key longer than eight bytes", b"12345678901", b"12345678901234567890", b"-5"];
        for key in [&b"1001"[..], b"200000"].into_iter().chain(others) {
            push(2, key, &mut workers);
        }
        push(0, b"k1", &mut workers);
        let counts = workers.iter().map(KeyArena::counts).fold(KeyCounts::default(), KeyCounts::merge);
        assert_eq!(counts, text.counts());
        let bits: Vec<Option<DenseWords>> = workers.iter_mut().map(KeyArena::take_bits).collect();
        assert!(bits[0].is_some() && bits[1].is_some(), "the first two hold their numbers as bits");
        assert_eq!(workers[0].keys(), 3_001, "counted, all of them");
        assert_eq!(pieces_of(&workers[0]).concat(), [&b"\x02k1"[..]].concat(), "the first worker's text: k1 alone");
        assert!(pieces_of(&workers[1]).concat().is_empty());
        assert_eq!(bits[2].as_ref().map(|b| (b.at, b.bytes.len())), Some((1001 / 64, 8 * (200_000 / 64 - 1001 / 64 + 1))), "the third's bits");
        assert_eq!(pieces_of(&workers[2]).iter().map(|p| p.len()).sum::<usize>(), 74, "the third's text: the others");
        let rest: Vec<Vec<u8>> = workers.iter().flat_map(pieces_of).collect();
        let probes: Vec<Vec<u8>> = (0..=5_100u32).chain([199_999, 200_000, 200_001]).map(|n| n.to_string().into_bytes()).chain(others.iter().chain(&[&b"k2"[..], b"01"]).map(|k| k.to_vec())).collect();
        let refs: Vec<&[u8]> = probes.iter().map(|k| k.as_slice()).collect();
        let table = KeySet::build(&pieces_of(&text), KeyCounts { numbers_range: None, ..counts });
        let (mut want, mut got) = (Vec::new(), Vec::new());
        table.contains_batch(&refs, &mut want);
        let distinct: std::collections::HashSet<u32> = numbers.iter().copied().chain([1001, 200_000]).collect();
        assert_eq!(want.iter().filter(|&&yes| yes).count(), distinct.len() + others.len());
        let narrow = KeyCounts { numbers_range: Some((1_500, 3_000)), ..counts };
        let no_range = KeyCounts { numbers_range: None, ..counts };
        // Numbers held as bits count once, and "k1", pushed twice as text, twice (where numbers
        // go to the table, a number two workers hold counts twice).
        let len = distinct.len() + others.len() + 1;
        for (counts, as_bits, len) in [(counts, true, Some(len)), (narrow, true, None), (no_range, false, None)] {
            for piece_words in [1, 3, usize::MAX] {
                let bits: Vec<BitsPiece> = bits
                    .iter()
                    .flatten()
                    .flat_map(|bits| {
                        let step = piece_words.saturating_mul(8).min(bits.bytes.len());
                        bits.bytes.chunks(step).enumerate().map(move |(i, bytes)| BitsPiece { at: bits.at + (i * step / 8) as u32, bytes })
                    })
                    .collect();
                // As other processes receive them, pieces come as gaps: none, every other one, all.
                let encoded: Vec<Vec<u8>> = bits.iter().map(|piece| encode_gaps(piece.bytes)).collect();
                for gaps_one_in in [0, 2, 1] {
                    let as_gaps = |i: usize| gaps_one_in > 0 && i.is_multiple_of(gaps_one_in);
                    let words: Vec<BitsPiece> = bits.iter().enumerate().filter(|&(i, _)| !as_gaps(i)).map(|(_, &piece)| piece).collect();
                    let gaps: Vec<GapsPiece> = (0..bits.len())
                        .filter(|&i| as_gaps(i))
                        .map(|i| GapsPiece::checked(bits[i].at, &encoded[i], bits[i].bytes.len()).expect("gaps of these bits fit them"))
                        .collect();
                    for count in [1, 2, 3, 5] {
                        let set = KeySet::from_partitions((0..count).map(|i| PartitionBuilder::new(counts, i, count).build_with_bits(&rest, &words, &gaps)).collect());
                        let case = format!("{:?}, pieces of {piece_words} words, one in {gaps_one_in} as gaps, {count} partition(s)", counts.numbers_range);
                        assert_eq!(set.numbers_as_bits(), as_bits, "{case}");
                        set.contains_batch(&refs, &mut got);
                        assert!(got == want, "{case}");
                        assert!(refs.iter().zip(&want).all(|(k, &yes)| set.contains(k) == yes), "{case}");
                        assert!(len.is_none_or(|len| set.len() == len), "{case}: {} keys", set.len());
                    }
                }
            }
        }
    }

    /// Bits go to gaps and back unchanged, from empty to full, and sparse ones take fewer
    /// bytes so; gaps that run past their bytes, or a varint cut short or past 64 bits, are none.
    #[test]
    fn bits_go_to_gaps_and_back() {
        let mut rng = crate::xorshift::XorShift::new(0x5eed);
        for (len, one_in) in [(0usize, 1u64), (8, 1), (64, 2), (4096, 40), (4096, 1_000), (800, 0)] {
            let bits: Vec<u8> = (0..len).map(|_| (0..8).fold(0u8, |b, i| b | (((one_in > 0 && rng.next().is_multiple_of(one_in)) as u8) << i))).collect();
            let gaps = encode_gaps(&bits);
            assert_eq!(decode_gaps(&gaps, len), Some(bits.clone()), "{len} bytes, one bit in {one_in}");
            if one_in >= 40 {
                assert!(gaps.len() < len / 4, "{len} bytes, one bit in {one_in}: {} bytes of gaps", gaps.len());
            }
        }
        let last = {
            let mut bits = vec![0u8; 16];
            bits[15] = 0x80;
            bits
        };
        let gaps = encode_gaps(&last);
        assert_eq!(gaps, [127]);
        assert_eq!(decode_gaps(&gaps, 16), Some(last));
        assert_eq!(decode_gaps(&gaps, 15), None, "bit 127 is past 15 bytes");
        assert_eq!(decode_gaps(&[0x80], 16), None, "a varint cut short");
        assert_eq!(decode_gaps(&[0xff; 10], 1 << 20), None, "a varint past 64 bits");
        assert_eq!(decode_gaps(&[0, 0], 1), Some(vec![0b11]));
    }

    /// Numbers held as bits grow their bits up and down, by doubling, within the bound of their
    /// text's bytes plus the slack; past it the bits stop growing and the rest is text. Every
    /// key comes back from `for_each_key` (numbers held as bits in order, once), and the bytes
    /// held count the bits.
    #[test]
    fn numbers_are_held_as_bits_within_their_bound() {
        let mut arena = KeyArena::default().holding_numbers_as_bits();
        for n in (64_000..65_000u32).chain((10_000..11_000).rev()).chain([64_000, 10_500]) {
            arena.push(n.to_string().as_bytes());
        }
        arena.push(b"k");
        let bits = arena.bits.as_ref().expect("held as bits");
        assert!(bits.at <= 10_000 / 64 && bits.at + (bits.bytes.len() / 8) as u32 > 65_000 / 64);
        // Doubling: 1 word, then 2, 4, ... up to the span of about 860 words.
        assert!(bits.bytes.len() <= 2 * 8 * (65_000 / 64 - 10_000 / 64 + 1), "{} bytes", bits.bytes.len());
        assert_eq!(arena.len_bytes(), 2 + bits.bytes.len());
        let mut keys = Vec::new();
        arena.for_each_key(|k| keys.push(String::from_utf8(k.to_vec()).unwrap()));
        let want: Vec<String> = std::iter::once("k".to_string()).chain((10_000..11_000).chain(64_000..65_000).map(|n| n.to_string())).collect();
        assert_eq!(keys, want);
        assert_eq!(arena.keys(), 2_003);

        // Sparse numbers: the second passes the bound (a word for the first, then 2^24 words),
        // and stays text; the bits still grow to the next ones, which are near.
        let mut sparse = KeyArena::default().holding_numbers_as_bits();
        for key in ["5", "999999999", "6", "70", "64"] {
            sparse.push(key.as_bytes());
        }
        let bits = sparse.take_bits().expect("the near numbers' words");
        assert_eq!((bits.at, bits.bytes.len()), (0, 16));
        let words: Vec<u64> = bits.bytes.chunks(8).map(|w| u64::from_le_bytes(w.try_into().unwrap())).collect();
        assert_eq!(words, [1 << 5 | 1 << 6, 1 << 0 | 1 << 6], "5, 6, 64 and 70");
        assert_eq!(pieces_of(&sparse).concat(), b"\x09999999999", "the far one as text");
        assert!(sparse.take_bits().is_none(), "taken");

        // A jump the bound refuses (numbers 0..64K, then 4M on) goes to text only until the
        // text has caught up with the span: then the bits grow to it, and take the rest.
        let mut jump = KeyArena::default().holding_numbers_as_bits();
        let (near, far) = (0..64_000u32, 4_000_000..4_040_000u32);
        near.clone().chain(far.clone()).for_each(|n| jump.push(n.to_string().as_bytes()));
        let mut keys = Vec::new();
        jump.for_each_key(|k| keys.push(String::from_utf8(k.to_vec()).unwrap()));
        keys.sort_by_key(|k| k.parse::<u32>().unwrap());
        assert_eq!(keys, near.chain(far).map(|n| n.to_string()).collect::<Vec<_>>(), "every number, once");
        let text = pieces_of(&jump).concat().len();
        let bits = jump.take_bits().expect("held as bits");
        assert!(bits.at == 0 && bits.bytes.len() >= 4_040_000 / 8, "the bits grew to the far numbers: {} bytes", bits.bytes.len());
        // The span's bits (505 KB) pass the bound (the numbers' text, 378 KB for the near ones
        // and 8 bytes each far one, and 64 KB of slack) until some 7,900 far numbers are in:
        // those are text, the other 32,000 bits.
        assert!((8 * 7_500..8 * 8_500).contains(&text), "{text} bytes of text");

        // An arena not made to hold bits keeps every key as text.
        let mut plain = KeyArena::default();
        plain.push(b"7");
        assert!(plain.take_bits().is_none() && plain.as_bytes() == b"\x017");
    }

    /// The partitions' ranges of a dense span cover it once, each starts on a word of its
    /// bitmap, and a word's partition is the one whose range holds it.
    #[test]
    fn dense_ranges_cut_the_span_without_gap_or_overlap() {
        for (first, span) in [(1u32, 1u32), (1, 7), (100, 1_000), (5, 64), (999_000_001, 999_999)] {
            for count in 1..=7 {
                let dense = Dense { first, span };
                let mut next = first;
                for part in 0..count {
                    let (start, len) = dense.range(part, count);
                    assert_eq!(start, next, "{first}+{span}, {count} parts");
                    assert!((start - first) % 64 == 0 || len == 0, "{first}+{span}, {count} parts: part {part} starts on a word");
                    next = start + len;
                    for word in [start, start + len.saturating_sub(1)].into_iter().filter(|_| len > 0) {
                        assert_eq!(dense.part_of(word, count), Some(part), "{word} in {first}+{span}, {count} parts");
                    }
                }
                assert_eq!(next, first + span);
                assert_eq!(dense.part_of(first - 1, count), None);
                assert_eq!(dense.part_of(first + span, count), None);
                assert_eq!(dense.part_of(0, count), None, "0 is no number word");
            }
        }
    }

    #[test]
    fn counts_merge_their_sums_and_ranges() {
        let a = KeyCounts { keys: 3, numbers: 2, short: 1, big: 0, numbers_range: Some((5, 9)) };
        let b = KeyCounts { keys: 4, numbers: 1, short: 0, big: 2, numbers_range: Some((2, 6)) };
        let none = KeyCounts { keys: 1, short: 1, ..KeyCounts::default() };
        assert_eq!(a.merge(b), KeyCounts { keys: 7, numbers: 3, short: 1, big: 2, numbers_range: Some((2, 9)) });
        assert_eq!(a.merge(none).numbers_range, Some((5, 9)));
        assert_eq!(none.merge(b).numbers_range, Some((2, 6)));
        assert_eq!(none.merge(none).numbers_range, None);
    }

    /// Lengths of one, two and three varint bytes, on both sides of each boundary.
    #[test]
    fn pieces_end_on_key_boundaries() {
        let lengths: Vec<usize> = (0..100).chain([127, 128, 129, 300, 16_383, 16_384, 70_000]).collect();
        let mut arena = KeyArena::with_piece(64);
        for &n in &lengths {
            arena.push(&vec![b'x'; n]);
        }
        let pieces = pieces_of(&arena);
        assert_eq!(pieces.concat(), arena.as_bytes());
        assert!(pieces.len() > 50, "the keys of 0–99 bytes alone (5,050 bytes with lengths) fill more than 50 pieces of 64");
        // Every piece but the last holds at least 64 bytes, and would hold fewer without its
        // last key: each ends where the key that reached 64 bytes ends.
        for piece in &pieces[..pieces.len() - 1] {
            let mut ends = Vec::new();
            let mut at = 0;
            while at < piece.len() {
                at = key_at(piece, at).1;
                ends.push(at);
            }
            assert!(piece.len() >= 64 && ends.iter().rev().nth(1).is_none_or(|&before| before < 64));
        }
        let mut seen = Vec::new();
        for_each_key(&pieces, |key| seen.push(key.len()));
        assert_eq!(seen, lengths);
        let set = KeySet::build(&pieces, arena.counts());
        assert_eq!(set.len(), lengths.len());
        assert!(lengths.iter().all(|&n| set.contains(&vec![b'x'; n])));
        assert!(!set.contains(&[b'x'; 131]));
        // A key shorter than 128 bytes takes one length byte.
        let mut one = KeyArena::default();
        one.push(b"12345678");
        assert_eq!(one.len_bytes(), 9);
    }
}
