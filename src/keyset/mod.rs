//! An exact set of byte-string keys, compact enough to hold a whole build side in every process,
//! and the encoding in which build keys are collected and broadcast. Its parts:
//!
//! - `arena`: the keys a worker collects, length-prefixed, as they travel;
//! - `bits`: numbers held as bits of their range, sent as words or as gaps;
//! - `distinct`: how many distinct keys an arena holds, estimated, to size a set for them;
//! - `growing`: a set built as its keys arrive, for keys that repeat;
//! - `numbers`: which keys are numbers or short, and the words they are kept as;
//! - `sketch`: a small Bloom filter of a partition's long keys, asked before its table;
//! - `table`: the tables a partition keeps its keys in;
//!
//! and here the set itself, cut into partitions that workers build side by side.

mod arena;
mod bits;
mod distinct;
mod growing;
mod numbers;
mod sketch;
mod table;
#[cfg(test)]
mod tests;

pub use arena::*;
pub use bits::*;
pub use distinct::*;
pub use growing::*;
pub use numbers::*;
use sketch::Sketch;
use std::hash::BuildHasher;
use table::*;

/// Keys a set's build inserts in a group whose slots are prefetched together (see `insert_keys`).
const BATCH: usize = 64;
/// How many keys ahead of the one it looks up a batched lookup hashes and prefetches (see
/// `KeySet::each_prefetched`).
const AHEAD: usize = 16;
/// Keys up to this long are short (see `is_short`): most are held as words, the others with the
/// long keys.
const INLINE: usize = 8;

/// An exact set of keys, built once and then only queried. Keys of up to 8 bytes (and numbers
/// of up to 16 digits) live in the tables themselves, so a lookup touches one cache line, and
/// batched lookups prefetch those lines so that the misses overlap; longer keys live in an
/// arena. Numbers of up to 9 digits (see `number`) take a bit each of their range where it is
/// dense (see `Dense`), else about 6 bytes each; 12 bytes per other short key (see
/// `short_word`), 12 per other key plus its text.
///
/// The set is cut into partitions by hash (dense numbers by value), so that the workers of a
/// process can each build one at the same time (see [`PartitionBuilder`]); a key is looked up
/// in its own partition only.
pub struct KeySet {
    parts: Vec<Part>,
    dense: Dense,
    /// Where each partition's places start among the set's (see [`places`](Self::places)).
    starts: Vec<usize>,
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
    /// Whether the keys' text is worth keeping to hold the long keys in (see
    /// [`hold_in_place`](Self::hold_in_place)).
    in_place: bool,
    /// The long keys its table was sized for (0 where there are none).
    long_keys: usize,
}

impl PartitionBuilder {
    /// Sized for its share of `counts`. It grows if its share proves larger.
    pub fn new(counts: KeyCounts, index: usize, count: usize) -> PartitionBuilder {
        // A share, with room for the deviation of a random split.
        let share = |n: u64| (n as usize / count) + (n as usize / count).isqrt() * 4 + 16;
        let dense = Dense::of(&counts);
        // Where the numbers are dense, their table takes only those that fall outside the span
        // (none, when the counts are right).
        let numbers = if dense.span > 0 { 0 } else { share(counts.numbers) };
        let (short, big, long) = (share(counts.short), share(counts.big), share(counts.long()));
        let table = Part::with_capacity(dense.range(index, count), numbers, short, big, long);
        let in_place = counts.long() * 2 >= counts.keys;
        let long_keys = if counts.long() == 0 { 0 } else { long };
        PartitionBuilder { table, dense, index, count, in_place, long_keys }
    }

    /// Keeps a sketch of the partition's long keys (see [`KeySet::positions_batch_sketched`]),
    /// for a set asked mostly about keys it does not hold. (Numbers and short keys are not sketched:
    /// their tables take 4 or 8 bytes a key, a sketch 2, and in the probe-side join keyed on
    /// the 20M-row probe's ids or amounts against its first 2M rows, asking a sketch of them
    /// first took 0.52–0.54 s to 0.60–0.62 and 0.65–0.72 s to 0.81–0.89.)
    pub fn sketching(mut self) -> PartitionBuilder {
        if self.long_keys > 0 {
            self.table.sketching(self.long_keys);
        }
        self
    }

    /// Where at least half the keys are long, holds those that lie in `buffers` (encoded keys,
    /// which the partition may keep) where they lie, not copies of them. Where fewer are, the
    /// buffers are let go once the set is built, and the long keys copied: kept, the text of
    /// 20M amounts of 6–7 bytes, held as words, took 160 MB.
    pub fn hold_in_place(&mut self, buffers: Vec<std::sync::Arc<Vec<u8>>>) {
        if self.in_place {
            self.table.adopt(buffers);
        }
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
        let PartitionBuilder { mut table, dense, index, count, .. } = self;
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
        insert_keys(&mut table, dense, pieces, index, count);
        table.bits.count();
        Partition(table, dense)
    }
}

/// Inserts the keys of `pieces` that fall in partition `index` of `count` into `table`.
fn insert_keys(table: &mut Part, dense: Dense, pieces: &[impl AsRef<[u8]>], index: usize, count: usize) {
    let h = hasher();
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

impl KeySet {
    /// The set of the keys in `pieces`, sized for `counts` (it grows if there are more). A key
    /// given twice is held once: an insert stops at a slot that holds its key, as a lookup
    /// does. Build sides repeat their keys (a fact table's foreign keys), and a repeated key
    /// had made a cluster of its copies that every later insert of it walked: the shuffle join
    /// keyed on the 20M-row probe's amounts (about 1M values) took 2.72 s, 1.51 s with each
    /// held once.
    pub fn build(pieces: &[impl AsRef<[u8]>], counts: KeyCounts) -> KeySet {
        KeySet::from_partitions(vec![PartitionBuilder::new(counts, 0, 1).build(pieces)])
    }

    /// The set of the keys `arena` holds, as text and, where it holds numbers as bits (see
    /// [`KeyArena::holding_numbers_as_bits`]), as bits. Where at least half its keys are long,
    /// the set keeps the arena's text and holds its long keys there (see
    /// [`PartitionBuilder::hold_in_place`]): with the 20M-row probe's payloads (30 bytes) as the
    /// shuffle join's build keys, copies took 580 MB beside the text's.
    ///
    /// Where the arena estimates its distinct keys (see [`KeyArena::estimating_distinct`]), the
    /// set's tables are sized for those, not for every copy (see [`KeyCounts::for_distinct`]).
    pub fn from_arena(mut arena: KeyArena) -> KeySet {
        let counts = arena.distinct_estimate().map_or(arena.counts(), |distinct| arena.counts().for_distinct(distinct));
        let taken = arena.take_bits();
        let bits = DenseWords::pieces(&taken);
        let ranges = arena.pieces();
        let bytes = std::sync::Arc::new(arena.into_bytes());
        let pieces: Vec<&[u8]> = ranges.into_iter().map(|piece| &bytes[piece]).collect();
        let mut builder = PartitionBuilder::new(counts, 0, 1);
        builder.hold_in_place(vec![std::sync::Arc::clone(&bytes)]);
        KeySet::from_partitions(vec![builder.build_with_bits(&pieces, &bits, &[])])
    }

    /// The set made of partitions 0..n of one [`PartitionBuilder`] count n, in index order.
    pub fn from_partitions(parts: Vec<Partition>) -> KeySet {
        assert!(!parts.is_empty(), "a key set has at least one partition");
        let dense = parts[0].1;
        assert!(parts.iter().all(|p| p.1 == dense), "the partitions of one set, built from the same counts");
        let parts: Vec<Part> = parts.into_iter().map(|p| p.0).collect();
        let starts = parts.iter().scan(0, |start, part| Some(std::mem::replace(start, *start + part.places()))).collect();
        KeySet { parts, dense, starts }
    }

    #[inline(always)]
    fn part(&self, k: &Hashed) -> &Part {
        &self.parts[self.part_index(k)]
    }

    #[inline(always)]
    fn part_index(&self, k: &Hashed) -> usize {
        if self.parts.len() == 1 { 0 } else { part_of(k, self.dense, self.parts.len()) }
    }

    /// Hands each of `keys`, hashed, with the index of its partition, to `f`, in order, each
    /// key's slot prefetched [`AHEAD`] keys before it is handed on, so that about that many
    /// cache misses are always in flight. (Prefetched 64 at a time and then looked up, the
    /// probe-side join keyed on 20M payloads against 2M stalled on its prefetches, which
    /// outnumbered the core's outstanding misses, then on the first lookups: 0.97–1.06 s
    /// against 0.91–0.94 s, 4 interleaved runs; 8 or 32 ahead, as fast as 16.)
    #[inline(always)]
    fn each_prefetched<'k>(&self, keys: &[&'k [u8]], mut f: impl FnMut(usize, Hashed<'k>)) {
        let h = hasher();
        // Each key with its partition, found once.
        let hashed = |key: &'k [u8]| {
            let k = Hashed::new(&h, key, self.dense);
            let part = self.part_index(&k);
            self.parts[part].prefetch(k);
            (part, k)
        };
        let mut ahead = [(0, Hashed::NONE); AHEAD];
        for (k, &key) in ahead.iter_mut().zip(keys) {
            *k = hashed(key);
        }
        for i in 0..keys.len() {
            let (part, k) = ahead[i % AHEAD];
            if let Some(&key) = keys.get(i + AHEAD) {
                ahead[i % AHEAD] = hashed(key);
            }
            f(part, k);
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

    /// Answers many keys, their slots prefetched ahead (see `each_prefetched`).
    pub fn contains_batch(&self, keys: &[&[u8]], answers: &mut Vec<bool>) {
        answers.clear();
        self.each_prefetched(keys, |part, k| answers.push(self.parts[part].probe(k)));
    }

    /// How many places the set's keys can take: each key it holds has one of its own (see
    /// [`positions_batch`](Self::positions_batch)), a number from 0 to this, exclusive.
    pub fn places(&self) -> usize {
        self.starts.last().zip(self.parts.last()).map_or(0, |(start, part)| start + part.places())
    }

    /// The place of each key (see [`places`](Self::places)), or None for a key the set does not
    /// hold; their slots are prefetched ahead, as in [`contains_batch`](Self::contains_batch).
    /// Sets built from the same pieces in the same order (and with as many partitions) place
    /// every key alike: their [`layout_digest`](Self::layout_digest)s are equal.
    pub fn positions_batch(&self, keys: &[&[u8]], places: &mut Vec<Option<usize>>) {
        places.clear();
        self.each_prefetched(keys, |part, k| places.push(self.parts[part].position(k).map(|at| self.starts[part] + at)));
    }

    /// [`positions_batch`](Self::positions_batch), asking the sketches of the long keys first,
    /// where the partitions keep them (see [`PartitionBuilder::sketching`]). Cheaper where most
    /// keys are absent, dearer where most are held: the probe-side join keyed on the 20M-row
    /// probe's payloads (30 bytes), against its first 2M rows, where 9 build keys in 10 are
    /// absent, 0.98–1.10 s → 0.84–0.92; against 10 copies of those rows, where all are held,
    /// 0.90–0.97 s → 1.06–1.13.
    pub fn positions_batch_sketched(&self, keys: &[&[u8]], places: &mut Vec<Option<usize>>) {
        if !self.parts.iter().any(Part::sketched) {
            return self.positions_batch(keys, places);
        }
        places.clear();
        self.each_sketched(keys, |held| places.push(held.and_then(|(part, k)| self.parts[part].position(k).map(|at| self.starts[part] + at))));
    }

    /// [`each_prefetched`](Self::each_prefetched), asking the partitions' sketches first: each
    /// key is hashed and its sketch word prefetched 2·[`AHEAD`] keys before it is handed on,
    /// its sketch asked and (unless that says the key is absent) its slot prefetched [`AHEAD`]
    /// keys before; `f` gets None for a key a sketch rules out.
    #[inline(always)]
    fn each_sketched<'k>(&self, keys: &[&'k [u8]], mut f: impl FnMut(Option<(usize, Hashed<'k>)>)) {
        let h = hasher();
        let hashed = |key: &'k [u8]| {
            let k = Hashed::new(&h, key, self.dense);
            let part = self.part_index(&k);
            self.parts[part].prefetch_sketch(&k);
            (part, k, true)
        };
        let asked = |(part, k, _): (usize, Hashed<'k>, bool)| {
            let held = self.parts[part].may_hold(&k);
            if held {
                self.parts[part].prefetch(k);
            }
            (part, k, held)
        };
        const RING: usize = 2 * AHEAD;
        let mut ring = [(0, Hashed::NONE, false); RING];
        for (slot, &key) in ring.iter_mut().zip(keys) {
            *slot = hashed(key);
        }
        for slot in ring.iter_mut().take(keys.len().min(AHEAD)) {
            *slot = asked(*slot);
        }
        for i in 0..keys.len() {
            let (part, k, held) = ring[i % RING];
            if let Some(&key) = keys.get(i + RING) {
                ring[i % RING] = hashed(key);
            }
            if i + AHEAD < keys.len() {
                ring[(i + AHEAD) % RING] = asked(ring[(i + AHEAD) % RING]);
            }
            f(held.then_some((part, k)));
        }
    }

    /// A digest of where the set holds its keys (see [`positions_batch`](Self::positions_batch)):
    /// equal in two processes whose sets place every key alike, and almost surely not
    /// otherwise.
    pub fn layout_digest(&self) -> u32 {
        let mut digest = crc32fast::Hasher::new();
        for part in &self.parts {
            part.layout_digest(&mut digest);
        }
        digest.finalize()
    }

    /// Keys held, each once however often it was given.
    pub fn len(&self) -> usize {
        self.parts.iter().map(Part::keys).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the set's tables and bits, and of the long keys it copied: its memory, but for
    /// the text of the long keys it holds where they were given (see
    /// [`PartitionBuilder::hold_in_place`]).
    pub fn table_bytes(&self) -> u64 {
        self.parts.iter().map(|part| part.table_bytes() as u64).sum()
    }

    /// Bytes of long keys the partitions copied, rather than hold where they were given.
    #[cfg(test)]
    pub(crate) fn copied_bytes(&self) -> usize {
        self.parts.iter().map(Part::copied_bytes).sum()
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

