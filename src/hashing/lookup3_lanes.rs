//! lookup3 `hashlittle2` with one 32-bit vector lane per key: the recipe shared by the AVX-512
//! ([`super::lookup3_x16`]) and AVX2 ([`super::lookup3_x8`]) hashes, written once over the lane
//! operations ([`LaneOps`]) that each implements. The AVX2 hash reads and transposes the keys'
//! bytes into words (the AVX-512 one joins two of its halves); the rounds, the choice of the
//! blocks each key mixes in, the empty key and the keys too long for the lanes are here.

use super::{Pairs, GROUP};

/// The longest key the lanes hash (lookup3's: the native pairs', AVX-512's and AVX2's, and
/// Hadoop's Jenkins hashes; and the Murmur hashes of Hadoop and Spark): for lookup3, five mixed
/// blocks and a tail of up to 4 bytes; two rows of 32 bytes of a key ([`super::lookup3_x8`]'s
/// transpose, the second read only for a vector of keys with one over 32 bytes). A vector
/// with a longer key is hashed again, whole, a row of 32 bytes at a time
/// ([`rehash_long_vectors`], and Spark's Murmur3 in its own lanes likewise); Hadoop's Murmur
/// hashes such keys one by one. With lanes of 32 bytes, a build keyed on 36-byte UUIDs spent a
/// third of its time in the batched hash, against a tenth keyed on their 32 hex digits alone.
/// 64 takes UUIDs, SHA-1 and SHA-256 digests in hex, and most e-mail addresses and composite
/// keys.
pub(crate) const MAX_LANE_LEN: usize = 64;

/// The longest key [`rehash_long_vectors`] hashes in the lanes; longer ones are hashed one by
/// one (a vector's lanes take as many blocks as its longest key, and read each 32-byte row of
/// all its keys: see [`lane_reach`]).
pub(crate) const MAX_ANY_LEN: usize = 4096;

/// The transposed words of a vector of keys, word w of key i in lane i of vector w, zero past
/// each key's end: bytes 0..32, and where any key of the vector is over 32 bytes, 32..64.
#[derive(Clone, Copy)]
pub(crate) struct KeyWords<'a, V> {
    pub first: &'a [V; 8],
    pub rest: Option<&'a [V; 8]>,
}

/// Lane-wise u32 arithmetic on a group of vectors: what lookup3's rounds need. The methods are
/// inlined into functions compiled for the instructions they use.
pub(crate) trait LaneOps: Copy {
    /// The keys (lanes) of the group.
    const KEYS: usize;
    /// `x` in every lane.
    fn splat(x: u32) -> Self;
    /// The lanes into `KEYS` values.
    fn store(self, out: &mut [u32]);
    /// The first `KEYS` of `values` into the lanes.
    fn load(values: &[u32]) -> Self;
    fn add(self, other: Self) -> Self;
    fn sub(self, other: Self) -> Self;
    fn xor(self, other: Self) -> Self;
    fn rot<const K: i32>(self) -> Self;
    /// `yes` in the lanes whose `len` is over `n`, `no` in the others.
    fn where_over(len: Self, n: u32, yes: Self, no: Self) -> Self;
    /// `yes` in the lanes whose `len` is 0, `no` in the others.
    fn where_zero(len: Self, yes: Self, no: Self) -> Self;
    /// Whether any lane of `len` is over `n`.
    fn any_over(len: Self, n: u32) -> bool;
}

/// lookup3's `mix`, in every lane.
#[inline(always)]
fn mix<V: LaneOps>(a: &mut V, b: &mut V, c: &mut V) {
    *a = a.sub(*c).xor(c.rot::<4>()); *c = c.add(*b);
    *b = b.sub(*a).xor(a.rot::<6>()); *a = a.add(*c);
    *c = c.sub(*b).xor(b.rot::<8>()); *b = b.add(*a);
    *a = a.sub(*c).xor(c.rot::<16>()); *c = c.add(*b);
    *b = b.sub(*a).xor(a.rot::<19>()); *a = a.add(*c);
    *c = c.sub(*b).xor(b.rot::<4>()); *b = b.add(*a);
}

/// lookup3's `final`, in every lane.
#[inline(always)]
fn finish<V: LaneOps>(a: &mut V, b: &mut V, c: &mut V) {
    *c = c.xor(*b).sub(b.rot::<14>());
    *a = a.xor(*c).sub(c.rot::<11>());
    *b = b.xor(*a).sub(a.rot::<25>());
    *c = c.xor(*b).sub(b.rot::<16>());
    *a = a.xor(*c).sub(c.rot::<4>());
    *b = b.xor(*a).sub(a.rot::<14>());
    *c = c.xor(*b).sub(b.rot::<24>());
}

/// `hashlittle2(key, pc, 0)` of `V::KEYS` keys, lane by lane: (c, b), `pc` a seed per lane.
/// `len` are the keys' lengths in lanes, each exact up to [`MAX_LANE_LEN`] bytes (a longer
/// key gets a wrong answer here, which the caller replaces by the scalar hash's), and `words`
/// their bytes.
#[inline(always)]
pub(crate) fn hash_lanes<V: LaneOps>(len: V, words: KeyWords<V>, pc: V) -> (V, V) {
    let init = len.add(V::splat(0xdead_beef_u32).add(pc));
    let w = words.first;
    // The first 12 bytes; then each further block of 12 is mixed in where the key is longer
    // than the bytes before it (the words past a key's end are zero, but the mix is not). A
    // vector with no key that long skips the block and those after it: one predictable branch
    // a block, and ids and codes of up to 12 bytes take no mix at all.
    let (mut a, mut b, mut c) = (init.add(w[0]), init.add(w[1]), init.add(w[2]));
    if V::any_over(len, 12) {
        mix_in(len, 12, (&mut a, &mut b, &mut c), [w[3], w[4], w[5]]);
        if V::any_over(len, 24) {
            mix_in(len, 24, (&mut a, &mut b, &mut c), [w[6], w[7], words.rest.map_or(V::splat(0), |r| r[0])]);
            if let Some(r) = words.rest {
                // Words 9..18 of the keys (16 and 17 past the 64 bytes, zero).
                let word = |i: usize| r.get(i - 8).copied().unwrap_or(V::splat(0));
                for n in [36, 48, 60] {
                    if !V::any_over(len, n) {
                        break;
                    }
                    let first = n as usize / 4;
                    mix_in(len, n, (&mut a, &mut b, &mut c), [word(first), word(first + 1), word(first + 2)]);
                }
            }
        }
    }
    finish(&mut a, &mut b, &mut c);
    // An empty key is not finished: its hashes are the initial values.
    (V::where_zero(len, init, c), V::where_zero(len, init, b))
}

/// One of lookup3's blocks, in the lanes whose key is over `n` bytes: the state mixed, then the
/// next block's `words` added.
#[inline(always)]
fn mix_in<V: LaneOps>(len: V, n: u32, (a, b, c): (&mut V, &mut V, &mut V), words: [V; 3]) {
    let (mut ma, mut mb, mut mc) = (*a, *b, *c);
    mix(&mut ma, &mut mb, &mut mc);
    *a = V::where_over(len, n, ma.add(words[0]), *a);
    *b = V::where_over(len, n, mb.add(words[1]), *b);
    *c = V::where_over(len, n, mc.add(words[2]), *c);
}

/// [`hash_lanes`] with one seed for every lane, into `out.c[at..]` and `out.b[at..]`.
#[inline(always)]
pub(crate) fn hash_lanes_into<V: LaneOps>(len: V, words: KeyWords<V>, pc: u32, out: &mut Pairs, at: usize) {
    let (c, b) = hash_lanes(len, words, V::splat(pc));
    c.store(&mut out.c[at..at + V::KEYS]);
    b.store(&mut out.b[at..at + V::KEYS]);
}

/// Hadoop's Jenkins hashes of `V::KEYS` keys (see [`hash_lanes`] for `len` and `words`): row j
/// of `rows` gets each key's hash j, `hashlittle(key, hash j − 1)`, the first seeded with 0,
/// key i's in column `at + i`. Each hash is seeded with the one before, a
/// different seed in every lane, which is as cheap in lanes as one seed; the key's words are
/// read and transposed once for all of them.
#[inline(always)]
pub(crate) fn hadoop_lanes<V: LaneOps>(len: V, words: KeyWords<V>, rows: &mut [[u32; GROUP]], at: usize) {
    let mut h = V::splat(0);
    for row in rows {
        h = hash_lanes(len, words, h).0;
        h.store(&mut row[at..at + V::KEYS]);
    }
}

/// Replaces the lanes' answers for the keys over [`MAX_LANE_LEN`] bytes: each vector of
/// `V::KEYS` keys that holds one is hashed again in the lanes by [`hash_lanes_any`], its keys
/// up to [`lane_reach`] bytes, and its longer keys one by one. `row(vector, r)` gives words
/// 8r..8r + 8 of a vector's keys (bytes 32r..32r + 32, zero past each key's end; empty keys
/// past the last).
///
/// A build keyed on 100-byte URLs spent 45% of its time hashing them one by one.
#[inline(always)]
pub(crate) fn rehash_long_vectors<V: LaneOps>(keys: &[&[u8]], pc: u32, out: &mut Pairs, mut row: impl FnMut(&[&[u8]], usize) -> [V; 8]) {
    for (v, vector) in keys.chunks(V::KEYS).enumerate() {
        let Some((reach, lengths)) = long_vector(vector, PAIR_LANE_COST) else { continue };
        let (c, b) = hash_lanes_any(V::load(&lengths), |r| row(vector, r), V::splat(pc));
        let at = v * V::KEYS;
        c.store(&mut out.c[at..at + V::KEYS]);
        b.store(&mut out.b[at..at + V::KEYS]);
        for (i, key) in vector.iter().enumerate() {
            if key.len() > reach {
                (out.c[at + i], out.b[at + i]) = super::lookup3::hashlittle2(key, pc, 0);
            }
        }
    }
}

/// [`rehash_long_vectors`] for Hadoop's Jenkins hashes ([`hadoop_lanes`]): each vector of
/// `V::KEYS` keys with one over [`MAX_LANE_LEN`] bytes hashed again, its rows read once for all
/// its hashes, and its keys past [`lane_reach`] one by one. A build of a Hadoop filter keyed on
/// 100-byte URLs spent 71% of its time hashing them one by one, k times each.
#[inline(always)]
pub(crate) fn rehash_long_hadoop_vectors<V: LaneOps>(keys: &[&[u8]], rows: &mut [[u32; GROUP]], mut row: impl FnMut(&[&[u8]], usize) -> [V; 8]) {
    let mut words = Vec::new();
    for (v, vector) in keys.chunks(V::KEYS).enumerate() {
        let Some((reach, lengths)) = long_vector(vector, HADOOP_LANE_COST) else { continue };
        let len = V::load(&lengths);
        // Every row a hash of keys of up to `reach` bytes reads (see `hash_lanes_any`), each
        // written in place (pushed, each row of 8 vectors was copied in by `memmove`).
        words.clear();
        words.resize(reach / 32 + 2, [V::splat(0); 8]);
        for (r, words) in words.iter_mut().enumerate() {
            *words = row(vector, r);
        }
        let at = v * V::KEYS;
        let mut h = V::splat(0);
        for out in rows.iter_mut() {
            h = hash_lanes_by_word(len, |i| words[i / 8][i % 8], h).0;
            h.store(&mut out[at..at + V::KEYS]);
        }
        chain_past_reach(vector, reach, rows, at, super::lookup3::hash);
    }
}

/// Hadoop's k hashes of each key of `vector` over `reach` bytes, one by one by the scalar
/// `hash`, each seeded with the one before (the first with 0), into columns `at + i` of `rows`:
/// the keys a rehash of long vectors leaves past the lanes' reach.
#[inline(always)]
pub(crate) fn chain_past_reach(vector: &[&[u8]], reach: usize, rows: &mut [[u32; GROUP]], at: usize, hash: impl Fn(&[u8], u32) -> u32) {
    for (i, key) in vector.iter().enumerate() {
        if key.len() > reach {
            let mut h = 0;
            for out in rows.iter_mut() {
                h = hash(key, h);
                out[at + i] = h;
            }
        }
    }
}

/// For a vector of keys with one over [`MAX_LANE_LEN`] bytes, the longest key its lanes hash
/// ([`lane_reach`] at `cost`) and the lengths its lanes take: the keys' own up to that reach, 0
/// past it (such a key's lane hashes an empty key, and is replaced by the key's hash made one
/// by one). None for a vector without such a key, hashed in the lanes already.
#[inline(always)]
pub(crate) fn long_vector(vector: &[&[u8]], cost: usize) -> Option<(usize, [u32; GROUP])> {
    if vector.iter().all(|key| key.len() <= MAX_LANE_LEN) {
        return None;
    }
    let reach = lane_reach(vector, cost);
    let mut lengths = [0u32; GROUP];
    for (length, key) in lengths.iter_mut().zip(vector) {
        *length = if key.len() <= reach { key.len() as u32 } else { 0 };
    }
    Some((reach, lengths))
}

/// What a vector's lanes cost a byte of their reach, in bytes of a key hashed one by one, for a
/// pair of hashes (the native lookup3, Spark's Murmur3): the lanes read every key's row of 32
/// bytes and mix every key's blocks up to the reach. Builds at `-w 1` (AVX-512, 5 interleaved
/// runs): of 4M rows keyed on 100-byte URLs, 0.30–0.32 s with such keys hashed one by one,
/// 0.22–0.25 with any cost here (all go to the lanes); of 1M rows whose keys are a quarter each
/// of 5–60, 5–60, 61–600 and 900–1500 bytes, 0.24–0.26 s one by one, 0.25–0.30 with a cost of 3,
/// 0.24–0.25 with 6. A Spark filter of those keys: no cost from 2 to 24 stood out of the noise
/// (0.41–0.54 s, 3 or 4 interleaved runs each).
pub(crate) const PAIR_LANE_COST: usize = 6;

/// [`PAIR_LANE_COST`] for Hadoop's k hashes, each a hash of the whole key: the lanes read the
/// rows once for all k, and a key hashed one by one is read k times, so the lanes are the
/// cheaper by more. Hadoop filters (k = 7) of the mixed lengths above, `-w 1`, 4 interleaved
/// runs: Jenkins 0.89–0.91 s at a cost of 6, 0.68–0.76 at 3, 0.67–0.77 at 2; Murmur 0.96–1.07
/// at 6, 0.82–0.91 at 3, 0.79–0.84 at 2 (0.80–0.84 at 1).
pub(crate) const HADOOP_LANE_COST: usize = 2;

/// The longest key (at least [`MAX_LANE_LEN`], at most [`MAX_ANY_LEN`]) that a vector's lanes
/// hash, its longer keys being hashed one by one: the cheapest of the vector's lengths, each
/// costing `cost` ([`PAIR_LANE_COST`], [`HADOOP_LANE_COST`]) for each of its bytes, plus the
/// longer keys' bytes. Many long keys go to the lanes; one far longer than the rest goes alone.
#[inline(always)]
fn lane_reach(vector: &[&[u8]], cost: usize) -> usize {
    let mut long = [0usize; GROUP];
    let mut n = 0;
    for key in vector {
        if key.len() > MAX_LANE_LEN {
            long[n] = key.len();
            n += 1;
        }
    }
    let long = &mut long[..n];
    long.sort_unstable();
    // Reaching each length in turn, the keys past it (the longer ones) hashed one by one.
    let mut longer: usize = long.iter().sum();
    let (mut best, mut reach) = (cost * MAX_LANE_LEN + longer, MAX_LANE_LEN);
    for &len in long.iter() {
        longer -= len;
        let total = cost * len + longer;
        if len <= MAX_ANY_LEN && total < best {
            (best, reach) = (total, len);
        }
    }
    reach
}

/// [`hash_lanes`] of keys of any length, `len` their exact lengths: the words of each block
/// taken from `row(r)`, the keys' words 8r..8r + 8, asked for once each and in order, as the
/// blocks reach them.
#[inline(always)]
pub(crate) fn hash_lanes_any<V: LaneOps>(len: V, mut row: impl FnMut(usize) -> [V; 8], pc: V) -> (V, V) {
    // Rows `first` and `first + 1`: a block's three words are in one or two rows in a row.
    let (mut rows, mut first) = ([row(0), row(1)], 0);
    hash_lanes_by_word(
        len,
        |i| {
            while i >= 8 * (first + 2) {
                first += 1;
                rows = [rows[1], row(first + 1)];
            }
            rows[i / 8 - first][i % 8]
        },
        pc,
    )
}

/// [`hash_lanes_any`] with the keys' words given one at a time, word i by `word(i)`, in order.
#[inline(always)]
fn hash_lanes_by_word<V: LaneOps>(len: V, mut word: impl FnMut(usize) -> V, pc: V) -> (V, V) {
    let init = len.add(V::splat(0xdead_beef_u32).add(pc));
    let (mut a, mut b, mut c) = (init.add(word(0)), init.add(word(1)), init.add(word(2)));
    let mut n = 12;
    while V::any_over(len, n) {
        let w = n as usize / 4;
        mix_in(len, n, (&mut a, &mut b, &mut c), [word(w), word(w + 1), word(w + 2)]);
        n += 12;
    }
    finish(&mut a, &mut b, &mut c);
    (V::where_zero(len, init, c), V::where_zero(len, init, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lanes take many long keys, and leave one key far longer than the rest, or a lone
    /// long key among short ones, to be hashed one by one.
    #[test]
    fn lane_reach_takes_many_long_keys_and_leaves_a_lone_one() {
        let bytes = vec![b'x'; 2 * MAX_ANY_LEN];
        let reach_at = |lengths: &[usize], cost| lane_reach(&lengths.iter().map(|&n| &bytes[..n]).collect::<Vec<_>>(), cost);
        let reach = |lengths: &[usize]| reach_at(lengths, PAIR_LANE_COST);
        assert_eq!(reach(&[100; 16]), 100);
        assert_eq!(reach(&[[100; 15].as_slice(), &[1000]].concat()), 100);
        assert_eq!(reach(&[[10; 15].as_slice(), &[300]].concat()), MAX_LANE_LEN);
        assert_eq!(reach(&[[10; 8].as_slice(), &[80, 90, 70, 100, 65, 99, 98, 97]].concat()), 100);
        assert_eq!(reach(&[MAX_ANY_LEN + 1; 16]), MAX_LANE_LEN);
        assert_eq!(reach(&[MAX_ANY_LEN; 16]), MAX_ANY_LEN);
        assert_eq!(reach(&[5, 64, 0]), MAX_LANE_LEN);
        // Two keys of 100 bytes among short ones: hashed one by one for a pair of hashes, in
        // the lanes for Hadoop's k.
        let two_long = [[10; 14].as_slice(), &[100, 100]].concat();
        assert_eq!(reach(&two_long), MAX_LANE_LEN);
        assert_eq!(reach_at(&two_long, HADOOP_LANE_COST), 100);
    }
}
