//! Spark's two Murmur3 hashes of a key ([`super::spark_murmur3`]), 8 keys to a vector with AVX2:
//! h1 seeded with the filter's seed, h2 seeded with h1, as Spark's `BloomFilterImpl` computes a
//! key's positions from them. One key at a time each hash is a loop of a round per 4-byte word
//! and per trailing byte, and h2 waits for h1: about 105 instructions a key for both (the ids of
//! the benchmark's probe, callgrind), 50 in lanes.
//!
//! In lanes, the keys' bytes are read and transposed by the avx2 lookup3's code
//! ([`super::lookup3_x8`]), and round r of every lane runs at once: lanes whose key has more
//! than r whole words take word r, lanes in their trailing bytes take their next byte
//! (sign-extended, as Spark's `hashUnsafeBytes` does), and lanes whose key is done keep their
//! hash. Keys of up to 64 bytes are hashed in the lanes (a vector of short keys stops at its
//! longest), and a vector with a longer one again, with as many words as it needs (a lone key
//! far longer than the rest one by one); answers are bit for bit the scalar hash's (see the
//! tests below).

use super::lookup3_lanes::{long_vector, PAIR_LANE_COST, MAX_LANE_LEN};
use super::lookup3_x8::{eight_keys, row_of_eight, with_words_to_64};
use super::spark_murmur3::hash_bytes;
use super::{BlockKernel, Pairs, Positions, Scheme, GROUP};
use std::arch::x86_64::*;

/// Keys per vector: one 32-bit lane each.
const LANES: usize = 8;

/// A Spark filter's hash pairs of a group of keys, computed in lanes, and each key's positions
/// from its pair: what the filter's batched inserts and chained queries take.
#[derive(Clone, Copy)]
pub struct SparkPairs {
    v2: bool,
    seed: u32,
    k: u32,
    m: u64,
    pairs: Pairs,
}

impl SparkPairs {
    /// For a filter of `scheme`, `seed`, `m` bits and `k` hashes; None where it is not Spark's,
    /// or `kernel` is the portable one, or the CPU has no AVX2, for the caller to hash one key at
    /// a time.
    pub fn new(scheme: Scheme, seed: u32, k: u32, m: u64, kernel: BlockKernel) -> Option<SparkPairs> {
        let seed = scheme.spark_seed(seed)?;
        let v2 = scheme == Scheme::SparkV2;
        super::lanes_allowed(kernel).then(|| SparkPairs { v2, seed, k, m, pairs: Pairs::default() })
    }

    /// Hashes `keys` (at most [`GROUP`]), replacing the keys it held.
    #[inline]
    pub fn hash(&mut self, keys: &[&[u8]]) {
        // SAFETY: `new` made pairs only where the CPU has AVX2.
        unsafe { pairs_wide(keys, self.seed, &mut self.pairs) };
    }

    /// The positions of the key in `column`.
    #[inline(always)]
    pub fn positions(&self, column: usize) -> Positions<'static> {
        Positions::spark(self.v2, self.pairs.c[column], self.pairs.b[column], self.k, self.m)
    }
}

/// `(h1, h2)` of each of the (at most [`GROUP`]) keys into (`out.c[i]`, `out.b[i]`): h1 the
/// Murmur3 of the key seeded with `seed`, h2 that seeded with h1. The other lanes of the last
/// vector hash empty keys, and those past it are left as they were.
///
/// # Safety
/// The CPU must have AVX2 ([`super::lookup3_x8::available`]).
#[target_feature(enable = "avx2")]
pub unsafe fn pairs_wide(keys: &[&[u8]], seed: u32, out: &mut Pairs) {
    debug_assert!(keys.len() <= GROUP);
    let mut long = false;
    for (v, eight) in keys.chunks(LANES).enumerate() {
        let mut spare = [&[][..]; LANES];
        let (h1, h2, len) = with_words_to_64(eight_keys(eight, &mut spare), |words, len| {
            if _mm256_movemask_epi8(_mm256_cmpgt_epi32(len, _mm256_set1_epi32(MAX_LANE_LEN as i32))) != 0 {
                // Hashed whole by `rehash_long_vectors`.
                return (len, len, len);
            }
            let h1 = hash_lanes(words, len, _mm256_set1_epi32(seed as i32));
            (h1, hash_lanes(words, len, h1), len)
        });
        // SAFETY (both): `out`'s arrays hold GROUP values and v < GROUP / LANES.
        unsafe {
            _mm256_storeu_si256(out.c.as_mut_ptr().add(v * LANES) as *mut __m256i, h1);
            _mm256_storeu_si256(out.b.as_mut_ptr().add(v * LANES) as *mut __m256i, h2);
        }
        long |= _mm256_movemask_epi8(_mm256_cmpgt_epi32(len, _mm256_set1_epi32(MAX_LANE_LEN as i32))) != 0;
    }
    if long {
        rehash_long_vectors(keys, seed, out);
    }
}

/// Replaces the lanes' answers for the keys over [`MAX_LANE_LEN`] bytes: each vector of 8 keys
/// that holds one is hashed again in the lanes with all the words of its keys up to its
/// [`long_vector`] reach, read a row of 32 bytes at a time, and its longer keys one by one.
/// Builds of a Spark filter at `-w 1` (3 interleaved runs, the same bytes): keyed on 100-byte
/// URLs 0.52–0.60 s with each hashed one by one, 0.38–0.40 so; on keys a quarter each of 5–60,
/// 5–60, 61–600 and 900–1500 bytes 0.37–0.44 against 0.39–0.41, about 5% slower in the usual
/// runs (the same with the lanes' reach capped at 256 bytes).
#[inline]
#[target_feature(enable = "avx2")]
fn rehash_long_vectors(keys: &[&[u8]], seed: u32, out: &mut Pairs) {
    let mut words = Vec::new();
    for (v, eight) in keys.chunks(LANES).enumerate() {
        let Some((reach, lengths)) = long_vector(eight, PAIR_LANE_COST) else { continue };
        // Rows of 8 words each, in a loop: an iterator's closure, compiled for AVX2, would be
        // called from the iterator's code, which is not, instead of inlined.
        words.clear();
        for r in 0..reach.div_ceil(32) {
            let row = row_of_eight(eight, r);
            for word in row {
                words.push(word);
            }
        }
        // SAFETY: `lengths` holds GROUP ≥ 8 values; an unaligned load needs no alignment.
        let len = unsafe { _mm256_loadu_si256(lengths.as_ptr() as *const __m256i) };
        let partial = trailing_words(&words, len);
        let h1 = hash_lanes_with(&words, len, partial, _mm256_set1_epi32(seed as i32));
        let h2 = hash_lanes_with(&words, len, partial, h1);
        // SAFETY (both): `out`'s arrays hold GROUP values and v < GROUP / LANES.
        unsafe {
            _mm256_storeu_si256(out.c.as_mut_ptr().add(v * LANES) as *mut __m256i, h1);
            _mm256_storeu_si256(out.b.as_mut_ptr().add(v * LANES) as *mut __m256i, h2);
        }
        for (i, key) in eight.iter().enumerate().filter(|(_, key)| key.len() > reach) {
            out.c[v * LANES + i] = hash_bytes(key, seed);
            out.b[v * LANES + i] = hash_bytes(key, out.c[v * LANES + i]);
        }
    }
}

/// Spark's Murmur3 of 8 keys, each lane with its own `seed`: `words` the keys' bytes as
/// zero-padded little-endian words transposed (word w of key i in lane i of `words[w]`; 6, 8 or
/// 16 words of their first 64 bytes, or as many as [`rehash_long_vectors`] reads, past which
/// the keys have no bytes), `len` their lengths (a key with bytes past the words gets a wrong
/// answer, which the caller replaces).
#[inline]
#[target_feature(enable = "avx2")]
fn hash_lanes(words: &[__m256i], len: __m256i, seed: __m256i) -> __m256i {
    hash_lanes_with(words, len, trailing_words(words, len), seed)
}

/// The word holding each lane's trailing bytes, the one after its whole words: a blend of every
/// word, made once for both of a key's hashes.
#[inline]
#[target_feature(enable = "avx2")]
fn trailing_words(words: &[__m256i], len: __m256i) -> __m256i {
    let whole = _mm256_srli_epi32::<2>(len);
    (0..words.len()).fold(_mm256_setzero_si256(), |partial, w| _mm256_blendv_epi8(partial, words[w], _mm256_cmpeq_epi32(whole, _mm256_set1_epi32(w as i32))))
}

/// [`hash_lanes`] with the lanes' [`trailing_words`] given.
#[inline]
#[target_feature(enable = "avx2")]
fn hash_lanes_with(words: &[__m256i], len: __m256i, partial: __m256i, seed: __m256i) -> __m256i {
    // Each lane's whole words, and its rounds: one per whole word, then one per trailing byte.
    let whole = _mm256_srli_epi32::<2>(len);
    let rounds = _mm256_add_epi32(whole, _mm256_and_si256(len, _mm256_set1_epi32(3)));
    let mut h = seed;
    for r in 0..(words.len() as i32 + 3) {
        let round = _mm256_set1_epi32(r);
        let active = _mm256_cmpgt_epi32(rounds, round);
        if _mm256_testz_si256(active, active) != 0 {
            break;
        }
        // In its trailing bytes, a lane takes byte r − whole of `partial`, sign-extended: shifted
        // to the top byte, then back arithmetically. (Lanes still in their words take garbage
        // here, and word r below.)
        let up = _mm256_sub_epi32(_mm256_set1_epi32(24), _mm256_slli_epi32::<3>(_mm256_sub_epi32(round, whole)));
        let byte = _mm256_srai_epi32::<24>(_mm256_sllv_epi32(partial, up));
        let word = words.get(r as usize).copied().unwrap_or(_mm256_setzero_si256());
        let k1 = _mm256_blendv_epi8(byte, word, _mm256_cmpgt_epi32(whole, round));
        h = _mm256_blendv_epi8(h, mix_h1(h, mix_k1(k1)), active);
    }
    fmix(h, len)
}

/// `x` rotated left by `K` bits in every lane (`K` and `32 − K` as shift counts).
#[inline]
#[target_feature(enable = "avx2")]
fn rotl<const K: i32, const REST: i32>(x: __m256i) -> __m256i {
    debug_assert_eq!(K + REST, 32);
    _mm256_or_si256(_mm256_slli_epi32::<K>(x), _mm256_srli_epi32::<REST>(x))
}

#[inline]
#[target_feature(enable = "avx2")]
fn mix_k1(k1: __m256i) -> __m256i {
    let k1 = _mm256_mullo_epi32(k1, _mm256_set1_epi32(0xcc9e_2d51_u32 as i32));
    _mm256_mullo_epi32(rotl::<15, 17>(k1), _mm256_set1_epi32(0x1b87_3593))
}

#[inline]
#[target_feature(enable = "avx2")]
fn mix_h1(h1: __m256i, k1: __m256i) -> __m256i {
    let h1 = rotl::<13, 19>(_mm256_xor_si256(h1, k1));
    // h1 · 5 + 0xe6546b64
    _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32::<2>(h1), h1), _mm256_set1_epi32(0xe654_6b64_u32 as i32))
}

#[inline]
#[target_feature(enable = "avx2")]
fn fmix(h1: __m256i, len: __m256i) -> __m256i {
    let h1 = _mm256_xor_si256(h1, len);
    let h1 = _mm256_xor_si256(h1, _mm256_srli_epi32::<16>(h1));
    let h1 = _mm256_mullo_epi32(h1, _mm256_set1_epi32(0x85eb_ca6b_u32 as i32));
    let h1 = _mm256_xor_si256(h1, _mm256_srli_epi32::<13>(h1));
    let h1 = _mm256_mullo_epi32(h1, _mm256_set1_epi32(0xc2b2_ae35_u32 as i32));
    _mm256_xor_si256(h1, _mm256_srli_epi32::<16>(h1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the scalar hashes: every length 0..=80 (both sides of the lanes' 24, 32 and 64,
    /// every number of trailing bytes) in every lane, groups of every size up to 64, three
    /// seeds, keys that end at an unreadable page, and trailing bytes of 0x80 and over, which
    /// Spark sign-extends.
    #[test]
    fn equals_the_scalar_hashes_for_every_length_lane_and_group_size() {
        let scalar = |key: &[u8], seed| {
            let h1 = hash_bytes(key, seed);
            (h1, hash_bytes(key, h1))
        };
        // SAFETY: the CPU has AVX2 (checked above).
        crate::hashing::lookup3_x16::tests::check_wide_pairs(|keys, seed, out| unsafe { pairs_wide(keys, seed, out) }, scalar);
    }

    /// Against the scalar hashes on keys over the lanes' first 64 bytes, hashed again in the
    /// lanes, and on keys left to the scalar hash.
    #[test]
    fn equals_the_scalar_hashes_on_long_keys() {
        if !crate::hashing::lookup3_x8::available() {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        let scalar = |key: &[u8], seed| {
            let h1 = hash_bytes(key, seed);
            (h1, hash_bytes(key, h1))
        };
        // SAFETY: the CPU has AVX2 (checked above).
        crate::hashing::lookup3_x16::tests::long_keys_against(|keys, seed, out| unsafe { pairs_wide(keys, seed, out) }, scalar);
    }
}
