//! The open-addressing tables a key set's partitions keep their keys in: words for numbers and
//! other short keys, 16-byte slots for the rest, and the dense bitmap of numbers.

use super::*;

/// One slot of the table of other keys ([`Others`]): 8 bytes, eight to a cache line. Its high
/// 24 bits are a tag of the key's hash (with the lowest bit set: 0 marks an empty slot), its
/// low 40 bits the offset of the key, length-prefixed, where the table holds it (see
/// [`Others::place`]). The length is read with the key, which is compared anyway: 16-byte
/// slots that kept it (and a 32-bit tag) took 24 bytes a key at 2/3 load where these take 12,
/// beside the 31 of a 30-byte key's text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(transparent)]
struct Slot(u64);

impl Slot {
    /// Bits of a slot's offset: 1 TiB of keys in one partition.
    const OFFSET_BITS: u32 = 40;

    fn new(tag: u32, at: u64) -> Slot {
        assert!(at >> Self::OFFSET_BITS == 0, "a key set's partition holds at most 1 TiB of keys");
        Slot((tag as u64) << Self::OFFSET_BITS | at)
    }

    #[inline(always)]
    fn is_empty(self) -> bool {
        self.0 == 0
    }

    #[inline(always)]
    fn tag(self) -> u32 {
        (self.0 >> Self::OFFSET_BITS) as u32
    }

    #[inline(always)]
    fn at(self) -> usize {
        (self.0 & ((1 << Self::OFFSET_BITS) - 1)) as usize
    }
}

/// A table's slot count for `keys` keys: at most 2/3 full. Not rounded to a power of two (a
/// key's first slot comes from a multiply-shift, not a mask): rounded, the table of 1M keys took
/// a third more memory, and on a virtual machine every fresh megabyte can cost a millisecond or
/// more to touch.
fn slots_for(keys: usize) -> usize {
    (keys * 3 / 2 + 1).max(16)
}

/// Whether a table of `slots` slots needs to grow before it takes one more key beyond `keys`.
pub(super) fn full(keys: usize, slots: usize) -> bool {
    (keys + 1) * 3 > slots * 2
}

/// The slot after `i` among `n`, wrapping at the end (linear probing).
#[inline(always)]
pub(super) fn next(i: usize, n: usize) -> usize {
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
pub(super) struct Words<W> {
    slots: Vec<W>,
    pub(super) keys: usize,
}

/// What a table of [`Words`] holds in a slot: a nonzero value that is the key itself (0 marks
/// an empty slot).
pub(super) trait Word: Copy + Eq + Default + bytemuck::Zeroable {
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
    pub(super) fn with_capacity(keys: usize) -> Words<W> {
        Words { slots: crate::limits::zeroed_written(slots_for(keys)), keys: 0 }
    }

    #[inline(always)]
    pub(super) fn first(&self, hash: u64) -> usize {
        slot_of(hash, self.slots.len())
    }

    /// Holds `word`, unless it is held already: whether it was new.
    pub(super) fn insert(&mut self, hash: u64, word: W) -> bool {
        if full(self.keys, self.slots.len()) {
            self.grow();
        }
        let found = self.find(hash, word);
        if let Err(i) = found {
            self.slots[i] = word;
            self.keys += 1;
        }
        found.is_err()
    }

    /// The slot that holds `word` (linear probing from its hash's), or the empty slot where
    /// the search ended.
    #[inline(always)]
    fn find(&self, hash: u64, word: W) -> Result<usize, usize> {
        let mut i = self.first(hash);
        loop {
            match self.slots[i] {
                w if w == W::default() => return Err(i),
                w if w == word => return Ok(i),
                _ => i = next(i, self.slots.len()),
            }
        }
    }

    /// Doubles the table (only when a partition gets more keys than it was sized for).
    pub(super) fn grow(&mut self) {
        let doubled = self.slots.len() * 2;
        let old = std::mem::replace(&mut self.slots, crate::limits::zeroed_written(doubled));
        let h = hasher();
        for &word in old.iter().filter(|&&w| w != W::default()) {
            if let Err(i) = self.find(h.hash_one(word.wide()), word) {
                self.slots[i] = word;
            }
        }
    }

    #[inline(always)]
    pub(super) fn probe(&self, hash: u64, word: W) -> bool {
        self.find(hash, word).is_ok()
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
pub(super) struct Dense {
    /// The first number word held as a bit (the smallest number plus one).
    pub(super) first: u32,
    /// How many words from `first` on; 0 where numbers are held in their table.
    pub(super) span: u32,
}

impl Dense {
    /// The span of `counts`' numbers where a bitmap of it is small enough, else none.
    pub(super) fn of(counts: &KeyCounts) -> Dense {
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
    pub(super) fn part_of(&self, word: u32, count: usize) -> Option<usize> {
        self.holds(word).then(|| ((word - self.first) as u64 / 64 * count as u64 / self.words()) as usize)
    }

    /// The 64-bit words of the span's bitmap.
    #[inline(always)]
    pub(super) fn words(&self) -> u64 {
        (self.span as u64).div_ceil(64)
    }

    /// Whether number word `word` is held as a bit.
    #[inline(always)]
    pub(super) fn holds(&self, word: u32) -> bool {
        word.wrapping_sub(self.first) < self.span
    }

    /// The words partition `part` of `count` holds as bits: its first, and how many. Each
    /// partition starts on a word of the span's bitmap, so that bits that come as words (see
    /// [`DenseWords`]) go in whole.
    pub(super) fn range(&self, part: usize, count: usize) -> (u32, u32) {
        let start = |p: usize| (64 * (p as u64 * self.words()).div_ceil(count as u64)).min(self.span as u64) as u32;
        (self.first + start(part), start(part + 1) - start(part))
    }
}

/// Number words as bits: bit `word - first` for each word held (see [`Dense`]).
pub(super) struct Bits {
    pub(super) first: u32,
    len: u32,
    pub(super) words: Vec<u64>,
    /// The bits set, counted once they all are (see [`Bits::count`]).
    pub(super) keys: usize,
}

impl Bits {
    pub(super) fn new((first, len): (u32, u32)) -> Bits {
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
    pub(super) fn set_if_held(&mut self, word: u32) {
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
    pub(super) fn or_piece(&mut self, at: u32, piece: BitsPiece) {
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
    pub(super) fn count(&mut self) {
        if let Some(last) = self.words.last_mut().filter(|_| !self.len.is_multiple_of(64)) {
            *last &= (1 << (self.len % 64)) - 1;
        }
        self.keys = self.words.iter().map(|w| w.count_ones() as usize).sum();
    }

    #[inline(always)]
    pub(super) fn get(&self, bit: usize) -> bool {
        self.words[bit / 64] & (1 << (bit % 64)) != 0
    }
}

/// The open-addressing table of the keys that are not short: longer than 8 bytes, the empty
/// key, and 8-byte keys that end in a byte below 8. Each key is held length-prefixed (as a
/// [`KeyArena`] holds keys), and its slot holds its offset.
///
/// A key lies in one of the `adopted` buffers, where it came from there (see [`Part::adopt`]),
/// else it is copied into `arena`. The offsets run through the adopted buffers one after the
/// other, then through `arena`.
struct Others {
    slots: Vec<Slot>,
    adopted: Vec<Adopted>,
    /// The adopted buffers' bytes, together: the offset of `arena`'s first byte.
    adopted_len: usize,
    arena: Vec<u8>,
    keys: usize,
}

/// A buffer of encoded keys (as a [`KeyArena`] holds them) that a table of long keys holds its
/// keys in where they lie, and the offset of its first byte.
struct Adopted {
    bytes: std::sync::Arc<Vec<u8>>,
    start: usize,
}

impl Others {
    pub(super) fn with_capacity(keys: usize) -> Others {
        Others { slots: crate::limits::zeroed_written(slots_for(keys)), adopted: Vec::new(), adopted_len: 0, arena: Vec::new(), keys: 0 }
    }

    /// Holds the keys that lie in `buffers` where they lie (see [`Part::adopt`]). They are kept
    /// in order of address, so that both a key's address and an offset find their buffer by a
    /// binary search.
    fn adopt(&mut self, mut buffers: Vec<std::sync::Arc<Vec<u8>>>) {
        assert_eq!(self.keys, 0, "adopted before any key is held");
        buffers.sort_by_key(|bytes| bytes.as_ptr() as usize);
        buffers.dedup_by_key(|bytes| bytes.as_ptr() as usize);
        self.adopted = buffers
            .into_iter()
            .filter(|bytes| !bytes.is_empty())
            .map(|bytes| {
                let start = self.adopted_len;
                self.adopted_len += bytes.len();
                Adopted { bytes, start }
            })
            .collect();
    }

    /// Where a key is held, as the offset of its length: in an adopted buffer if it lies there
    /// with its length before it (compared as addresses, then the length's bytes), else
    /// appended to `arena`.
    fn place(&mut self, key: &[u8]) -> u64 {
        let (bytes, n) = length_prefix(key.len());
        let length = &bytes[..n];
        let at = key.as_ptr() as usize;
        let buffer = self.adopted.partition_point(|b| b.bytes.as_ptr() as usize <= at).checked_sub(1).map(|i| &self.adopted[i]);
        let start = buffer.and_then(|b| Some((b, (at - b.bytes.as_ptr() as usize).checked_sub(length.len())?)));
        match start {
            Some((b, start)) if start + length.len() + key.len() <= b.bytes.len() && b.bytes[start..].starts_with(length) => (b.start + start) as u64,
            _ => {
                let offset = self.adopted_len + self.arena.len();
                crate::records::push_with_length(&mut self.arena, key);
                offset as u64
            }
        }
    }

    /// The key held at `at` (see [`place`](Self::place)).
    #[inline(always)]
    fn held(&self, at: usize) -> &[u8] {
        let (bytes, at) = match at.checked_sub(self.adopted_len) {
            Some(at) => (self.arena.as_slice(), at),
            None if self.adopted.len() == 1 => (self.adopted[0].bytes.as_slice(), at),
            None => {
                let b = &self.adopted[self.adopted.partition_point(|b| b.start <= at) - 1];
                (b.bytes.as_slice(), at - b.start)
            }
        };
        let (start, end) = key_at(bytes, at);
        &bytes[start..end]
    }

    /// The first empty slot from `i` on.
    #[inline(always)]
    fn free_from(&self, mut i: usize) -> usize {
        while !self.slots[i].is_empty() {
            i = next(i, self.slots.len());
        }
        i
    }

    /// Holds `key`, unless it is held already.
    pub(super) fn insert(&mut self, hash: u64, key: &[u8]) {
        if full(self.keys, self.slots.len()) {
            self.grow();
        }
        if let Err(i) = self.find(hash, key) {
            let tag = slot_and_tag(hash, self.slots.len()).1;
            self.slots[i] = Slot::new(tag, self.place(key));
            self.keys += 1;
        }
    }

    #[inline(always)]
    fn find(&self, hash: u64, key: &[u8]) -> Result<usize, usize> {
        find(&self.slots, hash, key, |at| self.held(at))
    }

    /// Doubles the table (only when a partition gets more keys than it was sized for).
    pub(super) fn grow(&mut self) {
        let doubled = self.slots.len() * 2;
        let old = std::mem::replace(&mut self.slots, crate::limits::zeroed_written(doubled));
        let h = hasher();
        for &slot in old.iter().filter(|s| !s.is_empty()) {
            let (i, _) = slot_and_tag(h.hash_one(self.held(slot.at())), doubled);
            let i = self.free_from(i);
            self.slots[i] = slot;
        }
    }

    #[inline(always)]
    pub(super) fn probe(&self, hash: u64, key: &[u8]) -> bool {
        self.find(hash, key).is_ok()
    }
}

/// The slot of `slots` that holds `key` (linear probing from its hash's), or the empty slot
/// where the search ended; `held` reads the key a slot's offset points to. A key is read only
/// from a slot of its tag.
#[inline(always)]
fn find<'t>(slots: &[Slot], hash: u64, key: &[u8], held: impl Fn(usize) -> &'t [u8]) -> Result<usize, usize> {
    let (mut i, tag) = slot_and_tag(hash, slots.len());
    loop {
        let slot = slots[i];
        if slot.is_empty() {
            return Err(i);
        }
        if slot.tag() == tag && held(slot.at()) == key {
            return Ok(i);
        }
        i = next(i, slots.len());
    }
}

/// An index of the keys an arena holds as text, each once (see
/// [`KeyArena::holding_each_key_once`]): short keys as words, compared in one instruction
/// without reading the text, the others as slots of their offset in the arena's text, as
/// [`Others`] holds its keys.
pub(super) struct HeldKeys {
    words: Words<u64>,
    slots: Vec<Slot>,
    long: usize,
}

impl std::fmt::Debug for HeldKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HeldKeys({} short, {} others)", self.words.keys, self.long)
    }
}

/// A key as [`HeldKeys`] takes it: its hash, and its word if it is short (else 0).
#[derive(Clone, Copy)]
pub(super) struct HeldKey {
    hash: u64,
    word: u64,
}

impl HeldKey {
    #[inline(always)]
    pub(super) fn new(key: &[u8]) -> HeldKey {
        match short_word(key) {
            Some(word) => HeldKey { hash: hasher().hash_one(word), word },
            None => HeldKey { hash: hasher().hash_one(key), word: 0 },
        }
    }
}

impl HeldKeys {
    pub(super) fn with_capacity(short: usize, long: usize) -> HeldKeys {
        HeldKeys { words: Words::with_capacity(short), slots: crate::limits::zeroed_written(slots_for(long)), long: 0 }
    }

    /// Hints the cache to load the first slot `k` would look at.
    #[inline(always)]
    pub(super) fn prefetch(&self, k: HeldKey) {
        match k.word {
            0 => prefetch(&self.slots[slot_of(k.hash, self.slots.len())]),
            _ => prefetch(&self.words.slots[self.words.first(k.hash)]),
        }
    }

    /// Whether `key` (taken as `k`) is new to `text`, the arena's text: if so it is indexed as
    /// lying at `at` (its length's offset), where it is to be written.
    #[inline(always)]
    pub(super) fn insert(&mut self, text: &[u8], key: &[u8], k: HeldKey, at: usize) -> bool {
        if k.word != 0 {
            return self.words.insert(k.hash, k.word);
        }
        if full(self.long, self.slots.len()) {
            self.grow(text);
        }
        let held = |at| {
            let (start, end) = key_at(text, at);
            &text[start..end]
        };
        let Err(i) = find(&self.slots, k.hash, key, held) else { return false };
        self.slots[i] = Slot::new(slot_and_tag(k.hash, self.slots.len()).1, at as u64);
        self.long += 1;
        true
    }

    /// Doubles the slots of the keys that are not short, reading `text` in order.
    #[cold]
    fn grow(&mut self, text: &[u8]) {
        let doubled = self.slots.len() * 2;
        self.slots = crate::limits::zeroed_written(doubled);
        let mut at = 0;
        while at < text.len() {
            let (start, end) = key_at(text, at);
            let k = HeldKey::new(&text[start..end]);
            if k.word == 0 {
                let (mut i, tag) = slot_and_tag(k.hash, doubled);
                while !self.slots[i].is_empty() {
                    i = next(i, doubled);
                }
                self.slots[i] = Slot::new(tag, at as u64);
            }
            at = end;
        }
    }
}

/// The LEB128 varint of `len` (see [`crate::records::push_varint`]), in the first of the bytes
/// that many: the length a [`KeyArena`] writes before a key of that length.
fn length_prefix(mut len: usize) -> ([u8; 10], usize) {
    let (mut bytes, mut n) = ([0; 10], 0);
    while len >= 0x80 {
        bytes[n] = len as u8 | 0x80;
        len >>= 7;
        n += 1;
    }
    bytes[n] = len as u8;
    (bytes, n + 1)
}

/// A key as the tables take it: its hash, its number if it is one (0 if not), else its word if
/// it is short (0 if not), else its value if it is a big number (0 if not).
#[derive(Clone, Copy)]
pub(super) struct Hashed<'a> {
    pub(super) hash: u64,
    pub(super) number: u32,
    word: u64,
    big: u64,
    key: &'a [u8],
}

impl<'a> Hashed<'a> {
    pub(super) const NONE: Hashed<'static> = Hashed { hash: 0, number: 0, word: 0, big: 0, key: &[] };

    /// Whether it is a long key (held with its text), not a number or a short key.
    #[inline(always)]
    pub(super) fn is_long(&self) -> bool {
        self.number == 0 && self.word == 0 && self.big == 0
    }

    #[inline(always)]
    pub(super) fn new(h: &foldhash::fast::FixedState, key: &'a [u8], dense: Dense) -> Self {
        Hashed::with_number(h, key, number(key), dense)
    }

    /// [`new`](Self::new), given the key's number (see `number`), if it is one.
    #[inline(always)]
    pub(super) fn with_number(h: &foldhash::fast::FixedState, key: &'a [u8], number: Option<u32>, dense: Dense) -> Self {
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
pub(super) struct Part {
    /// The numbers of the set's dense span that fall in this partition's range (none where
    /// numbers are not dense), and the numbers outside it.
    pub(super) bits: Bits,
    pub(super) numbers: Words<u32>,
    pub(super) words: Words<u64>,
    pub(super) big: Words<u64>,
    others: Others,
    /// A sketch of its long keys, where it was asked for (see [`Part::sketching`]).
    sketch: Option<Sketch>,
}

impl Part {
    pub(super) fn with_capacity(bits: (u32, u32), numbers: usize, short: usize, big: usize, others: usize) -> Part {
        Part {
            bits: Bits::new(bits),
            numbers: Words::with_capacity(numbers),
            words: Words::with_capacity(short),
            big: Words::with_capacity(big),
            others: Others::with_capacity(others),
            sketch: None,
        }
    }

    /// Keeps a sketch of the long keys its table gets from now on (see [`Sketch`]), sized for
    /// `keys` of them.
    pub(super) fn sketching(&mut self, keys: usize) {
        self.sketch = Some(Sketch::with_capacity(keys));
    }

    /// Whether it keeps a sketch of its long keys.
    pub(super) fn sketched(&self) -> bool {
        self.sketch.is_some()
    }

    /// False where the sketch (if it has one) says it surely does not hold `k`.
    #[inline(always)]
    pub(super) fn may_hold(&self, k: &Hashed) -> bool {
        match &self.sketch {
            Some(sketch) if k.is_long() => sketch.may_hold(k.hash),
            _ => true,
        }
    }

    /// Hints the cache to load the word of its sketch that `k` would look at, if it has one.
    #[inline(always)]
    pub(super) fn prefetch_sketch(&self, k: &Hashed) {
        if let Some(sketch) = self.sketch.as_ref().filter(|_| k.is_long()) {
            sketch.prefetch(k.hash);
        }
    }

    pub(super) fn keys(&self) -> usize {
        self.bits.keys + self.numbers.keys + self.words.keys + self.big.keys + self.others.keys
    }

    /// Bytes of the partition's tables, its bits and the text it copied (not the text it holds
    /// where it was given).
    pub(super) fn table_bytes(&self) -> usize {
        self.sketch.as_ref().map_or(0, Sketch::bytes) + self.bits.words.len() * 8 + self.numbers.slots.len() * 4 + (self.words.slots.len() + self.big.slots.len() + self.others.slots.len()) * 8 + self.others.arena.len()
    }

    /// Bytes of long keys copied into the table's own arena.
    #[cfg(test)]
    pub(super) fn copied_bytes(&self) -> usize {
        self.others.arena.len()
    }

    /// Slots of the table of long keys.
    #[cfg(test)]
    pub(super) fn long_slots(&self) -> usize {
        self.others.slots.len()
    }

    /// Bytes of text kept where they were given (see [`adopt`](Self::adopt)).
    #[cfg(test)]
    pub(super) fn adopted_bytes(&self) -> usize {
        self.others.adopted_len
    }

    /// Holds the long keys that lie in `buffers` where they lie, not copies of them: for a
    /// partition built from buffers of keys that it may keep (see [`KeySet::from_arena`]).
    /// Only before any key is inserted.
    pub(super) fn adopt(&mut self, buffers: Vec<std::sync::Arc<Vec<u8>>>) {
        self.others.adopt(buffers);
    }

    /// Inserts a key, but for a number of the set's dense span: the builder sets those bits
    /// itself, without a hash (see [`PartitionBuilder::build`]).
    #[inline(always)]
    pub(super) fn insert(&mut self, k: Hashed) {
        debug_assert!(self.bits.bit(k.number).is_none(), "a dense number goes straight to its bit");
        if let Some(sketch) = self.sketch.as_mut().filter(|_| k.is_long()) {
            sketch.insert(k.hash);
        }
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
    pub(super) fn prefetch(&self, k: Hashed) {
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
    pub(super) fn insert_group_prefetching(&mut self, group: &[Hashed], next: &[Hashed]) {
        for i in 0..group.len().max(next.len()) {
            if let Some(&k) = next.get(i) {
                self.prefetch(k);
            }
            if let Some(&k) = group.get(i) {
                self.insert(k);
            }
        }
    }

    /// How many places a key can take in this partition: its bits, then the slots of each of
    /// its tables in turn (see [`position`](Self::position)).
    pub(super) fn places(&self) -> usize {
        self.bits.words.len() * 64 + self.numbers.slots.len() + self.words.slots.len() + self.big.slots.len() + self.others.slots.len()
    }

    /// The place of key `k` among the partition's [`places`](Self::places), if it holds the
    /// key: its bit, or its slot in its table after the places of the tables before it. Two
    /// partitions built from the same keys in the same order place every key alike.
    #[inline(always)]
    pub(super) fn position(&self, k: Hashed) -> Option<usize> {
        if let Some(bit) = self.bits.bit(k.number) {
            return self.bits.get(bit).then_some(bit);
        }
        let mut base = self.bits.words.len() * 64;
        if k.number != 0 {
            return self.numbers.find(k.hash, k.number).ok().map(|i| base + i);
        }
        base += self.numbers.slots.len();
        if k.word != 0 {
            return self.words.find(k.hash, k.word).ok().map(|i| base + i);
        }
        base += self.words.slots.len();
        if k.big != 0 {
            return self.big.find(k.hash, k.big).ok().map(|i| base + i);
        }
        base += self.big.slots.len();
        self.others.find(k.hash, k.key).ok().map(|i| base + i)
    }

    /// A digest of where the partition holds its keys: its bits, its words, and the tags of its
    /// long keys' slots (not their offsets, which depend on where the text lies in memory).
    pub(super) fn layout_digest(&self, digest: &mut crc32fast::Hasher) {
        digest.update(bytemuck::cast_slice(&self.bits.words));
        digest.update(bytemuck::cast_slice(&self.numbers.slots));
        digest.update(bytemuck::cast_slice(&self.words.slots));
        digest.update(bytemuck::cast_slice(&self.big.slots));
        for slot in &self.others.slots {
            digest.update(&slot.tag().to_le_bytes());
        }
    }

    #[inline(always)]
    pub(super) fn probe(&self, k: Hashed) -> bool {
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


/// A key's first slot among `slots`, and its tag. The slot is a multiply-shift of the hash with
/// its halves swapped, so that it comes mostly from the low half and does not correlate with the
/// tag, which is the high 24 bits (with the lowest bit set: 0 marks an empty slot).
#[inline(always)]
pub(super) fn slot_and_tag(hash: u64, slots: usize) -> (usize, u32) {
    (slot_of(hash, slots), ((hash >> Slot::OFFSET_BITS) as u32) | 1)
}

/// A key's first slot among `slots` (see [`slot_and_tag`]).
#[inline(always)]
fn slot_of(hash: u64, slots: usize) -> usize {
    crate::hashing::mulshift(hash.rotate_left(32), slots as u64) as usize
}

