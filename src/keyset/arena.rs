//! The keys a worker collects during its scan, in the form they are sent to other workers and
//! processes: an arena of length-prefixed keys, with numbers optionally held as bits.

use super::*;

/// Keys appended to one buffer as (length, bytes), the form in which they are collected during a
/// scan and broadcast between workers. The length is a LEB128 varint: one byte for a key shorter
/// than 128 bytes, where a u32 took four (the benchmark's 1M ids of 7–8 digits: 8.4 MB instead
/// of 11.4 to hold and to send to every other process).
#[derive(Debug)]
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
    pub(super) bits: Option<NumberBits>,
    /// Where each piece of at least `piece` bytes ends (see [`KeyArena::pieces`]), noted as keys
    /// come: finding key boundaries afterwards meant decoding every length again, 3 ms for 1M
    /// keys on the sender's way.
    cuts: Vec<usize>,
    piece: usize,
    /// The distinct keys held as text, estimated, where the arena was made to (see
    /// [`estimating_distinct`](KeyArena::estimating_distinct)).
    distinct: Option<DistinctKeys>,
    /// Keys held as text.
    text_keys: u64,
    /// Whether the arena lets copies go once its keys prove to repeat (see
    /// [`holding_each_key_once`](KeyArena::holding_each_key_once)), and, once they have, the
    /// index of the keys it holds as text.
    once: bool,
    held: Option<HeldKeys>,
    /// The length of text at which the arena next asks whether its keys repeat.
    next_check: usize,
}

/// Text of keys an arena holds before it first asks whether they repeat (see
/// [`KeyArena::holding_each_key_once`]); it asks again at each eighth more (see
/// `next_check`).
pub const FIRST_CHECK: usize = 1 << 20;

/// The length of text at which an arena of `len` bytes next asks whether its keys repeat: an
/// eighth more. An estimate takes some 20 µs (4,096 registers), about 40 of them up to 64 MiB.
/// Asked at each doubling, 20M rows of 28-byte keys with 1M distinct (each seen by both workers
/// within their first 46 MB) let their copies go at 64 MiB a worker, not at 48.
fn next_check(len: usize) -> usize {
    len.saturating_add(len / 8)
}


/// Keys taken together where their cache misses are to overlap: numbers' bits and, where an
/// arena holds each key once, the slots of its index (see [`KeyArena::push_all`]).
const GROUP: usize = 16;

/// The keys of `group` (at most [`GROUP`]) as `index` takes them, each one's first slot
/// prefetched before any of them is inserted, so that the group's cache misses overlap.
#[inline(always)]
fn prefetched(index: &HeldKeys, group: &[&[u8]]) -> [Option<HeldKey>; GROUP] {
    let mut taken = [None; GROUP];
    for (k, key) in taken.iter_mut().zip(group) {
        let held = HeldKey::new(key);
        index.prefetch(held);
        *k = Some(held);
    }
    taken
}

/// Bytes of keys per piece sent to another process.
pub const PIECE: usize = 1 << 20;

/// The size of filter past which the build keys' bits ask for huge pages (see
/// [`KeyArena::holding_numbers_as_bits`]): what a TLB of 2048 entries (Zen 3's second level)
/// reaches in 4 KiB pages.
pub const BITS_IN_HUGE_PAGES_PAST: u64 = 8 << 20;

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
    /// Keys that are none of the kinds counted: longer than 8 bytes and not numbers (and the
    /// few odd short keys `is_short` leaves out). A key set holds them as text.
    pub fn long(&self) -> u64 {
        self.keys.saturating_sub(self.numbers + self.short + self.big)
    }

    /// The counts scaled to `distinct` keys of text (see [`DistinctKeys`]), with a tenth more
    /// room, for sizing a set that holds each key once: the short keys, the big numbers and the
    /// long keys in their proportions. The numbers stay as they are: where they are dense their
    /// bits take no more for copies, and their count decides whether they are.
    pub fn for_distinct(self, distinct: u64) -> KeyCounts {
        let text = self.short + self.big + self.long();
        let room = distinct.saturating_mul(11) / 10;
        if room >= text {
            return self;
        }
        let scale = |n: u64| (n as u128 * room as u128).div_ceil(text as u128) as u64;
        let (short, big, long) = (scale(self.short), scale(self.big), scale(self.long()));
        KeyCounts { keys: self.numbers + short + big + long, short, big, ..self }
    }

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
        KeyArena { bytes: Vec::new(), keys: 0, numbers: 0, short: 0, big: 0, numbers_range: None, number_bytes: 0, bits: None, cuts: Vec::new(), piece: PIECE, distinct: None, text_keys: 0, once: false, held: None, next_check: FIRST_CHECK }
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
    ///
    /// With `huge_pages`, the bits ask for transparent huge pages: for a build whose filter
    /// is past what the TLB reaches in 4 KiB pages (see [`BITS_IN_HUGE_PAGES_PAST`]). Each key's
    /// bit is set at random beside the filter's inserts, and in 4 KiB pages both missed the
    /// TLB: an exact semi-join with the 20M-row probe as its build side (12.6M ids in random
    /// order, a 31 MiB filter), 10 interleaved runs, took 1.89 → 1.73 s at `-w 1` and 1.35 →
    /// 1.03 s at `-w 2` (medians). Beside a small filter, where huge pages bought no time,
    /// they cost memory: the benchmark's exact semi-join, whose 1M ids take 2.5 MB of bits a
    /// worker, peaked at 19–21 MiB in them against 16–17.
    pub fn holding_numbers_as_bits(mut self, huge_pages: bool) -> Self {
        self.bits = Some(NumberBits { huge_pages, ..NumberBits::default() });
        self
    }

    /// The arena, estimating how many distinct keys it holds as text (see [`DistinctKeys`]), so
    /// that a set made from it is sized for them (see [`KeySet::from_arena`]): for a shuffle
    /// join's shard, which gets every copy of its keys.
    pub fn estimating_distinct(mut self) -> Self {
        self.distinct = Some(DistinctKeys::default());
        self
    }

    /// The estimated count of distinct keys held as text, where the arena estimates it (the
    /// count, once it holds each key once).
    pub fn distinct_estimate(&self) -> Option<u64> {
        match self.held {
            Some(_) => Some(self.text_keys),
            None => self.distinct.as_ref().map(DistinctKeys::estimate),
        }
    }

    /// The sketch of the distinct keys it holds as text, where it estimates them (see
    /// [`estimating_distinct`](Self::estimating_distinct)): merged with other workers', it
    /// estimates the distinct keys of all of them (see [`DistinctKeys::merge`]).
    pub fn distinct_sketch(&self) -> Option<&DistinctKeys> {
        self.distinct.as_ref()
    }

    /// The arena, estimating its distinct keys (see
    /// [`estimating_distinct`](Self::estimating_distinct)) and, once fewer than half of the
    /// keys it holds as text are distinct, letting the copies go and holding each key once from
    /// then on. It asks at 1 MiB of text and at each eighth more. For the keys a worker
    /// collects for the broadcast join: a fact table's foreign keys repeat, and every copy
    /// counted against the broadcast's limit (20M rows of 28-byte keys with 1M distinct took
    /// 580 MB, and went to the shuffle, where their distinct keys take 29 MB).
    pub fn holding_each_key_once(mut self) -> Self {
        self.once = true;
        self.estimating_distinct()
    }

    /// Whether its text has reached the length at which it next asks whether its keys repeat
    /// ([`FIRST_CHECK`] bytes, then each eighth more: see `next_check`); if so, the next ask
    /// moves an eighth past it. An arena that holds each key once asks itself (see
    /// [`holding_each_key_once`](Self::holding_each_key_once)); a shuffle join's shard asks
    /// its arena, and turns it into a set that grows (see [`GrowingSet`](super::GrowingSet)).
    pub fn repeat_check_due(&mut self) -> bool {
        if self.bytes.len() < self.next_check {
            return false;
        }
        self.next_check = next_check(self.bytes.len());
        true
    }

    /// Whether fewer than half the keys held as text are distinct, by the arena's estimate (see
    /// [`estimating_distinct`](Self::estimating_distinct)); false where it does not estimate.
    pub fn mostly_repeats(&self) -> bool {
        self.distinct_estimate().is_some_and(|distinct| distinct.saturating_mul(2) < self.text_keys)
    }

    /// Appends a key.
    #[inline]
    pub fn push(&mut self, key: &[u8]) {
        self.push_valued(key, number(key).map(|word| word - 1), None);
    }

    /// Appends keys, as [`push`](Self::push) each. Where numbers are held as bits, the bytes of
    /// a group's numbers are prefetched before any of their bits is set, so that the group's
    /// cache misses overlap: beside a filter that fills the cache the bits miss it, and a bit
    /// set took a fifth of an exact semi-join's samples with the 20M-row probe as its build
    /// side. 12 interleaved runs (in two sets, which agreed): 1.65 → 1.56 s at `-w 1`, 1.04 →
    /// 1.01 s at `-w 2` (medians); in 4 KiB pages, where a prefetch that misses the TLB waits
    /// for its page walk, it gained nothing.
    ///
    /// Where the arena holds each key once, the slots of the group's keys in its index are
    /// prefetched the same way.
    pub fn push_all(&mut self, keys: &[&[u8]]) {
        for group in keys.chunks(GROUP) {
            let mut values = [None; GROUP];
            for (value, key) in values.iter_mut().zip(group) {
                *value = number(key).map(|word| word - 1);
                if let (Some(v), Some(bits)) = (*value, &self.bits) {
                    bits.prefetch(v);
                }
            }
            let Some(held) = &self.held else {
                group.iter().zip(values).for_each(|(key, value)| self.push_valued(key, value, None));
                continue;
            };
            let taken = prefetched(held, group);
            for ((key, value), k) in group.iter().zip(values).zip(taken) {
                self.push_valued(key, value, k);
            }
        }
    }

    /// Appends a key whose value as a number (see `number`, less one) is `value`, if it is one;
    /// `held`, where the arena holds each key once, is the key as its index takes it, if known.
    #[inline(always)]
    fn push_valued(&mut self, key: &[u8], value: Option<u32>, held: Option<HeldKey>) {
        if let Some(v) = value {
            // A number has at most 9 digits: one length byte.
            self.number_bytes += key.len() as u64 + 1;
            let (low, high) = self.numbers_range.unwrap_or((v, v));
            self.numbers_range = Some((low.min(v), high.max(v)));
            if let Some(bits) = &mut self.bits {
                if bits.insert(v, self.number_bytes + NumberBits::SLACK) {
                    self.keys += 1;
                    self.numbers += 1;
                    return;
                }
            }
        }
        match &mut self.held {
            Some(index) => {
                let k = held.unwrap_or_else(|| HeldKey::new(key));
                if !index.insert(&self.bytes, key, k, self.bytes.len()) {
                    return;
                }
                // The sketch goes on noting keys (a copy would change none of its registers),
                // for the union of every worker's keys (see `distinct_sketch`).
                if let Some(distinct) = &mut self.distinct {
                    distinct.insert(key);
                }
            }
            None => {
                if let Some(distinct) = &mut self.distinct {
                    distinct.insert(key);
                }
            }
        }
        self.push_text(key, value.is_some());
        if self.once && self.repeat_check_due() {
            self.check_repeats();
        }
    }

    /// Appends a key as text, and counts it.
    #[inline(always)]
    fn push_text(&mut self, key: &[u8], number: bool) {
        self.keys += 1;
        self.text_keys += 1;
        self.numbers += number as u64;
        let short = !number && is_short(key);
        self.short += short as u64;
        self.big += (!number && !short && is_big_number(key)) as u64;
        crate::records::push_with_length(&mut self.bytes, key);
        if self.bytes.len() - self.cuts.last().copied().unwrap_or(0) >= self.piece {
            self.cuts.push(self.bytes.len());
        }
    }

    /// Where fewer than half of the text keys are distinct, lets the copies go and holds each
    /// key once from then on; else asks again at an eighth more text.
    #[cold]
    fn check_repeats(&mut self) {
        if self.held.is_some() || !self.mostly_repeats() {
            return;
        }
        let distinct = self.distinct_estimate().unwrap_or(self.text_keys) as usize;
        // Room for twice the distinct keys seen, for those yet to come.
        let short = (self.short as usize).min(2 * distinct);
        let mut index = HeldKeys::with_capacity(short, (2 * distinct).saturating_sub(short));
        let text = std::mem::take(&mut self.bytes);
        self.bytes = Vec::with_capacity(text.len() / 2);
        self.cuts.clear();
        // The counts were of every copy: each key is uncounted, and counted again if kept.
        (self.keys, self.text_keys, self.short, self.big) = (self.keys - self.text_keys, 0, 0, 0);
        // In groups whose slots are prefetched first, as in `push_all`.
        let mut group: [&[u8]; GROUP] = [&[]; GROUP];
        let mut len = 0;
        let keep = |this: &mut Self, index: &mut HeldKeys, group: &[&[u8]]| {
            for (&key, k) in group.iter().zip(prefetched(index, group)) {
                let number = number(key).is_some();
                this.numbers -= number as u64;
                if index.insert(&this.bytes, key, k.expect("taken with its key"), this.bytes.len()) {
                    this.push_text(key, number);
                }
            }
        };
        for_each_key(std::slice::from_ref(&text), |key| {
            group[len] = key;
            len += 1;
            if len == GROUP {
                keep(self, &mut index, &group);
                len = 0;
            }
        });
        keep(self, &mut index, &group[..len]);
        self.held = Some(index);
    }

    /// Where the arena holds each key once (see
    /// [`holding_each_key_once`](Self::holding_each_key_once)) and its keys repeat, lets the
    /// copies go now, whatever the length of its text: before a limit on its bytes is found
    /// passed.
    pub fn let_copies_go(&mut self) {
        if self.once {
            self.check_repeats();
        }
    }

    /// Appends the keys of `encoded`, keys as an arena holds them (see
    /// [`as_bytes`](Self::as_bytes)).
    pub fn push_encoded(&mut self, encoded: &[u8]) {
        for_each_key(std::slice::from_ref(&encoded), |key| self.push(key));
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
    pub(super) fn with_piece(piece: usize) -> Self {
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

/// Calls `f` with every key of encoded pieces (see [`KeyArena`]), in order. A loop rather than
/// an iterator: a flattening iterator checked for its next piece at every key, which took a tenth
/// of a partition's build.
#[inline(always)]
pub(super) fn for_each_key<'a>(pieces: &'a [impl AsRef<[u8]>], mut f: impl FnMut(&'a [u8])) {
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

/// Where the encoded key at `at` lies: its bytes' start and end.
#[inline(always)]
pub(super) fn key_at(encoded: &[u8], at: usize) -> (usize, usize) {
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
