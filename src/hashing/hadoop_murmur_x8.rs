//! Hadoop's `MurmurHash` ([`super::hadoop_murmur`]) of 8 keys to a vector with AVX2, each lane
//! with its own seed: a Hadoop Murmur filter's k hashes of a key, each seeded with the one
//! before, for a group of keys at once ([`super::hadoop_rows`]).
//!
//! The keys' bytes are read and transposed by the avx2 lookup3's code ([`super::lookup3_x8`]).
//! Round r of every lane runs at once: lanes whose key has more than r whole words mix word r,
//! the lane whose words end at r mixes its trailing bytes (Hadoop's reversed, sign-extended
//! tail, computed for every lane beforehand), and the others keep their hash. Keys of up to 64
//! bytes are hashed in the lanes (a round per word: a vector of short keys stops at its
//! longest); a vector with a longer key is hashed again, its keys' words read a row of 32 bytes
//! at a time as far as the lanes' reach for its keys' lengths goes, and its keys past that one
//! by one. Answers are bit for bit the scalar hash's (see the tests below). At 24 bytes, a build
//! keyed on the probe's 30-byte payloads hashed them all one by one.

use super::hadoop_murmur::hash;
use super::lookup3_lanes::{chain_past_reach, long_vector, HADOOP_LANE_COST, MAX_LANE_LEN};
use super::lookup3_x8::{eight_keys, row_of_eight, with_words_to_64};
use super::GROUP;
use std::arch::x86_64::*;

/// Keys per vector: one 32-bit lane each.
const LANES: usize = 8;

/// MurmurHash2's multiplier.
const M: i32 = 0x5bd1_e995;

/// Hadoop's Murmur hashes of the (at most [`GROUP`]) keys: `rows[j][i]` is key i's hash j, the
/// key's `MurmurHash` seeded with its hash j − 1, the first seeded with 0, as Hadoop's
/// `HashFunction` computes a key's positions. Columns past the keys of the last vector are
/// left as they were.
///
/// # Safety
/// The CPU must have AVX2 ([`super::lookup3_x8::available`]).
#[target_feature(enable = "avx2")]
pub unsafe fn hadoop_hashes_wide(keys: &[&[u8]], rows: &mut [[u32; GROUP]]) {
    debug_assert!(keys.len() <= GROUP);
    let mut long = false;
    for (v, eight) in keys.chunks(LANES).enumerate() {
        let mut spare = [&[][..]; LANES];
        long |= with_words_to_64(eight_keys(eight, &mut spare), |words, len| {
            // A vector with a key over 64 bytes is hashed by `rehash_long_vectors` instead.
            if _mm256_movemask_epi8(_mm256_cmpgt_epi32(len, _mm256_set1_epi32(MAX_LANE_LEN as i32))) != 0 {
                return true;
            }
            LaneKeys::new(words, len).hash_into(rows, v * LANES);
            false
        });
    }
    if long {
        rehash_long_vectors(keys, rows);
    }
}

/// [`hadoop_hashes_wide`] of each vector with a key over [`MAX_LANE_LEN`] bytes: its keys of
/// up to the reach `long_vector` picks in the lanes, their words read once for all
/// the hashes, and its longer keys one by one. A `-w 1` build of a Hadoop Murmur filter of 4M
/// rows keyed on 100-byte URLs, which hashed them all one by one, k times each, took 1.18–1.35 s;
/// 0.47–0.48 s so (3 interleaved runs).
#[inline]
#[target_feature(enable = "avx2")]
fn rehash_long_vectors(keys: &[&[u8]], rows: &mut [[u32; GROUP]]) {
    let mut words = Vec::new();
    for (v, vector) in keys.chunks(LANES).enumerate() {
        let Some((reach, lengths)) = long_vector(vector, HADOOP_LANE_COST) else { continue };
        // Every word of a key of up to `reach` bytes, and the one its trailing bytes are in.
        words.clear();
        words.resize(8 * (reach / 32 + 1), _mm256_setzero_si256());
        for (r, row) in words.chunks_exact_mut(8).enumerate() {
            row.copy_from_slice(&row_of_eight(vector, r));
        }
        // SAFETY: `lengths` holds GROUP ≥ LANES values; an unaligned load needs no alignment.
        let len = unsafe { _mm256_loadu_si256(lengths.as_ptr() as *const __m256i) };
        LaneKeys::new(&words, len).hash_into(rows, v * LANES);
        chain_past_reach(vector, reach, rows, v * LANES, hash);
    }
}

/// 8 keys in lanes, with what every hash of them needs: their words, lengths, whole words, and
/// their trailing bytes' value.
struct LaneKeys<'w> {
    words: &'w [__m256i],
    len: __m256i,
    whole: __m256i,
    /// Lanes with trailing bytes.
    has_tail: __m256i,
    /// Hadoop's tail: with t(i) the i-th trailing byte sign-extended and n of them, the xor of
    /// t(i) << 8·(n − 1 − i).
    tail: __m256i,
}

impl<'w> LaneKeys<'w> {
    /// `words`: the keys' first 24, 32 or 64 bytes as zero-padded little-endian words, transposed
    /// (word w of key i in lane i of `words[w]`; the keys have no bytes past them); `len` their
    /// lengths.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn new(words: &'w [__m256i], len: __m256i) -> Self {
        let whole = _mm256_srli_epi32::<2>(len);
        let n = _mm256_and_si256(len, _mm256_set1_epi32(3));
        // The word holding each lane's trailing bytes, the one after its whole words.
        let partial = (0..words.len()).fold(_mm256_setzero_si256(), |partial, w| _mm256_blendv_epi8(partial, words[w], _mm256_cmpeq_epi32(whole, _mm256_set1_epi32(w as i32))));
        let t = |i: i32| -> __m256i {
            // Byte i of the partial word at the top, then back arithmetically: sign-extended.
            let byte = _mm256_srai_epi32::<24>(_mm256_sllv_epi32(partial, _mm256_set1_epi32(24 - 8 * i)));
            let shifted = _mm256_sllv_epi32(byte, _mm256_slli_epi32::<3>(_mm256_sub_epi32(n, _mm256_set1_epi32(i + 1))));
            // Only bytes the key has (i < n); the shift above is then 0 to 16.
            _mm256_and_si256(shifted, _mm256_cmpgt_epi32(n, _mm256_set1_epi32(i)))
        };
        let tail = _mm256_xor_si256(_mm256_xor_si256(t(0), t(1)), t(2));
        let has_tail = _mm256_cmpgt_epi32(n, _mm256_setzero_si256());
        LaneKeys { words, len, whole, has_tail, tail }
    }

    /// The keys' hashes, each seeded with the one before (the first with 0), into columns
    /// `at..at + LANES` of `rows`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn hash_into(&self, rows: &mut [[u32; GROUP]], at: usize) {
        debug_assert!(at + LANES <= GROUP);
        let mut h = _mm256_setzero_si256();
        for row in rows.iter_mut() {
            h = self.hash(h);
            // SAFETY: a row holds GROUP values, and at + LANES ≤ GROUP.
            unsafe { _mm256_storeu_si256(row.as_mut_ptr().add(at) as *mut __m256i, h) };
        }
    }

    /// Each key's `MurmurHash` seeded with its lane of `seed`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn hash(&self, seed: __m256i) -> __m256i {
        let m = _mm256_set1_epi32(M);
        let mut h = _mm256_xor_si256(seed, self.len);
        for r in 0..=self.words.len() as i32 {
            let round = _mm256_set1_epi32(r);
            let in_words = _mm256_cmpgt_epi32(self.whole, round);
            let at_tail = _mm256_and_si256(_mm256_cmpeq_epi32(self.whole, round), self.has_tail);
            if _mm256_testz_si256(_mm256_or_si256(in_words, at_tail), _mm256_set1_epi32(-1)) != 0 {
                break;
            }
            // A whole word: k *= m; k ^= k >> 24; k *= m; h *= m; h ^= k.
            let word = self.words.get(r as usize).copied().unwrap_or(_mm256_setzero_si256());
            let k = _mm256_mullo_epi32(word, m);
            let k = _mm256_mullo_epi32(_mm256_xor_si256(k, _mm256_srli_epi32::<24>(k)), m);
            let mixed = _mm256_xor_si256(_mm256_mullo_epi32(h, m), k);
            // The trailing bytes: h ^= tail; h *= m.
            let tailed = _mm256_mullo_epi32(_mm256_xor_si256(h, self.tail), m);
            h = _mm256_blendv_epi8(_mm256_blendv_epi8(h, tailed, at_tail), mixed, in_words);
        }
        let h = _mm256_xor_si256(h, _mm256_srli_epi32::<13>(h));
        let h = _mm256_mullo_epi32(h, m);
        _mm256_xor_si256(h, _mm256_srli_epi32::<15>(h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashing::Pairs;

    /// Against the scalar hash, each key's first two hashes (the second seeded with the first):
    /// every length 0..=80 (both sides of the lanes' 24, 32 and 64, every number of trailing
    /// bytes) in every lane, groups of every size up to 64, keys that end at an unreadable page,
    /// and trailing bytes of 0x80 and over, which Hadoop sign-extends.
    #[test]
    fn equals_the_scalar_hash_for_every_length_lane_and_group_size() {
        // A key's first two hashes as a pair; Hadoop's first is seeded with 0 whatever the seed.
        let first_two = |keys: &[&[u8]], _, out: &mut Pairs| {
            let mut rows = [[0u32; GROUP]; 2];
            // SAFETY: the CPU has AVX2 (`check_wide_pairs` calls only where it does).
            unsafe { hadoop_hashes_wide(keys, &mut rows) };
            (out.c, out.b) = (rows[0], rows[1]);
        };
        let scalar = |key: &[u8], _| {
            let h = hash(key, 0);
            (h, hash(key, h))
        };
        crate::hashing::lookup3_x16::tests::check_wide_pairs(first_two, scalar);
    }

    /// Against the scalar chain on long keys, the first two hashes as a pair: groups of one
    /// length (each side of the rows of 32 bytes and of MAX_ANY_LEN), of lengths mixed from 0 to
    /// past MAX_ANY_LEN, and of short keys with one long key in each place.
    #[test]
    fn equals_the_scalar_hash_on_long_keys() {
        if !crate::hashing::lookup3_x8::available() {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        let first_two = |keys: &[&[u8]], _, out: &mut Pairs| {
            let mut rows = [[0u32; GROUP]; 2];
            // SAFETY: the CPU has AVX2 (checked above).
            unsafe { hadoop_hashes_wide(keys, &mut rows) };
            (out.c, out.b) = (rows[0], rows[1]);
        };
        crate::hashing::lookup3_x16::tests::long_keys_against(first_two, |key, _| {
            let h = hash(key, 0);
            (h, hash(key, h))
        });
    }

    /// A Hadoop Murmur filter's k hashes of long keys against the scalar chain.
    #[test]
    fn hashes_equal_the_scalar_chain_on_long_keys() {
        if !crate::hashing::lookup3_x8::available() {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        // SAFETY: the CPU has AVX2 (checked above).
        crate::hashing::lookup3_x16::tests::hadoop_chain_on_long_keys(|keys, rows| unsafe { hadoop_hashes_wide(keys, rows) }, hash);
    }
}
