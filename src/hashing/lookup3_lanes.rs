//! lookup3 `hashlittle2` with one 32-bit vector lane per key: the recipe shared by the AVX-512
//! ([`super::lookup3_x16`]) and AVX2 ([`super::lookup3_x8`]) hashes, written once over the lane
//! operations ([`LaneOps`]) that each implements. The AVX2 hash reads and transposes the keys'
//! bytes into words (the AVX-512 one joins two of its halves); the rounds, the choice between
//! one and two blocks, the empty key and the keys too long for the lanes are here.

use super::{Pairs, GROUP};

/// The longest key the Murmur hashes' lanes take (Hadoop's and Spark's); longer ones are hashed
/// one by one.
pub(crate) const MAX_LANE_LEN: usize = 24;

/// The longest key the lookup3 lanes hash (the native pairs', AVX-512's and AVX2's, and
/// Hadoop's Jenkins hashes): two mixed blocks and a tail of up to 8 bytes, the 32 bytes of a
/// key's row ([`super::lookup3_x8`]'s transpose). Keys of 25-32 bytes, the
/// probe's payloads among them, were hashed in the lanes and then again one by one: a build
/// keyed on those 29-byte keys spent a fifth of its time there.
pub(crate) const MAX_WIDE_LANE_LEN: usize = 32;

/// Lane-wise u32 arithmetic on a group of vectors: what lookup3's rounds need. The methods are
/// inlined into functions compiled for the instructions they use.
pub(crate) trait LaneOps: Copy {
    /// The keys (lanes) of the group.
    const KEYS: usize;
    /// `x` in every lane.
    fn splat(x: u32) -> Self;
    /// The lanes into `KEYS` values.
    fn store(self, out: &mut [u32]);
    fn add(self, other: Self) -> Self;
    fn sub(self, other: Self) -> Self;
    fn xor(self, other: Self) -> Self;
    fn rot<const K: i32>(self) -> Self;
    /// `yes` in the lanes whose `len` is over `n`, `no` in the others.
    fn where_over(len: Self, n: u32, yes: Self, no: Self) -> Self;
    /// `yes` in the lanes whose `len` is 0, `no` in the others.
    fn where_zero(len: Self, yes: Self, no: Self) -> Self;
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
/// `words` are the keys' first 24 bytes (or 32) as six (eight) zero-padded little-endian words,
/// word w of key i in lane i of `words[w]`; `len` their lengths in lanes (each exact up to 24
/// bytes, or 32 with eight words: a longer key gets a wrong answer here, which the caller
/// replaces by the scalar hash's); `over` whether any key is over 12 bytes, and over 24 (only
/// with eight words).
#[inline(always)]
pub(crate) fn hash_lanes<V: LaneOps>(len: V, words: &[V], over: (bool, bool), pc: V) -> (V, V) {
    let init = len.add(V::splat(0xdead_beef_u32).add(pc));
    // The first 12 bytes; then, for keys of 13..=24 bytes, mix and add the next 12 (words 3..5
    // are zero for shorter keys, but the mix is not, so it is kept only where the key is long);
    // for keys of 25..=32 bytes, mix again and add the last 8. A group with no key over 12
    // bytes (ids, codes) skips the mixes: one predictable branch.
    let (mut a, mut b, mut c) = (init.add(words[0]), init.add(words[1]), init.add(words[2]));
    if over.0 {
        let (mut ma, mut mb, mut mc) = (a, b, c);
        mix(&mut ma, &mut mb, &mut mc);
        let (mut ta, mut tb, mut tc) = (ma.add(words[3]), mb.add(words[4]), mc.add(words[5]));
        if over.1 {
            let (mut na, mut nb, mut nc) = (ta, tb, tc);
            mix(&mut na, &mut nb, &mut nc);
            ta = V::where_over(len, 24, na.add(words[6]), ta);
            tb = V::where_over(len, 24, nb.add(words[7]), tb);
            tc = V::where_over(len, 24, nc, tc);
        }
        a = V::where_over(len, 12, ta, a);
        b = V::where_over(len, 12, tb, b);
        c = V::where_over(len, 12, tc, c);
    }
    finish(&mut a, &mut b, &mut c);
    // An empty key is not finished: its hashes are the initial values.
    (V::where_zero(len, init, c), V::where_zero(len, init, b))
}

/// [`hash_lanes`] with one seed for every lane, into `out.c[at..]` and `out.b[at..]`.
#[inline(always)]
pub(crate) fn hash_lanes_into<V: LaneOps>(len: V, words: &[V], over: (bool, bool), pc: u32, out: &mut Pairs, at: usize) {
    let (c, b) = hash_lanes(len, words, over, V::splat(pc));
    c.store(&mut out.c[at..at + V::KEYS]);
    b.store(&mut out.b[at..at + V::KEYS]);
}

/// Hadoop's Jenkins hashes of `V::KEYS` keys (see [`hash_lanes`] for `len`, `words` and
/// `over`): row j of `rows` gets each key's hash j, `hashlittle(key, hash j − 1)`, the
/// first seeded with 0, key i's in column `at + i`. Each hash is seeded with the one before, a
/// different seed in every lane, which is as cheap in lanes as one seed; the key's words are
/// read and transposed once for all of them.
#[inline(always)]
pub(crate) fn hadoop_lanes<V: LaneOps>(len: V, words: &[V], over: (bool, bool), rows: &mut [[u32; GROUP]], at: usize) {
    let mut h = V::splat(0);
    for row in rows {
        h = hash_lanes(len, words, over, h).0;
        h.store(&mut row[at..at + V::KEYS]);
    }
}

/// Replaces the rows of Hadoop's hashes in lanes (lookup3's [`hadoop_lanes`], or the avx2
/// Murmur's) for the keys over `max_len` bytes (the lanes' longest) by the scalar `hash`'s,
/// each seeded with the one before.
#[inline(always)]
pub(crate) fn rehash_long_hadoop_keys(keys: &[&[u8]], rows: &mut [[u32; GROUP]], hash: impl Fn(&[u8], u32) -> u32, max_len: usize) {
    for (i, key) in keys.iter().enumerate() {
        if key.len() > max_len {
            let mut h = 0;
            for row in rows.iter_mut() {
                h = hash(key, h);
                row[i] = h;
            }
        }
    }
}

/// Replaces the lanes' answers for the keys over `max_len` bytes (the lanes' longest) by the
/// scalar hash's.
#[inline(always)]
pub(crate) fn rehash_long_keys(keys: &[&[u8]], pc: u32, out: &mut Pairs, max_len: usize) {
    for (i, key) in keys.iter().enumerate() {
        if key.len() > max_len {
            (out.c[i], out.b[i]) = super::lookup3::hashlittle2(key, pc, 0);
        }
    }
}
