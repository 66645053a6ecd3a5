//! lookup3 `hashlittle2` of 16 keys at once with AVX-512: one 32-bit lane per key, the same
//! adds, xors and rotates as [`super::lookup3`] on all 16 keys together. A batch of keys is
//! hashed this way before its probes are computed; on keys of a few bytes the hash is most of a
//! batched query's instructions, and here it takes a few per key instead of about 60.
//!
//! Keys of up to 24 bytes (lookup3's at most one mixed block and one finished tail, which covers
//! ids, dates, names and short strings) are hashed in the lanes; a longer key's lane is computed
//! and then replaced by the scalar hash. Answers are bit for bit those of
//! [`super::lookup3::hashlittle2`] (see the test below).

use super::lookup3_lanes::{hash_group, rehash_long_keys, LaneOps, MAX_LANE_LEN};
use super::lookup3_x8::load_within_page;
pub use super::Pairs;
use std::arch::x86_64::*;

/// Keys per vector: one 32-bit lane each.
pub const LANES: usize = 16;

/// Vectors hashed side by side: the hash of one vector is a chain of about 50 dependent
/// operations, and four independent chains keep the vector units busy where one left them
/// waiting (one vector per call took 4.4 ns per key, more than the scalar hash's 4.2).
const VECTORS: usize = 4;

/// The most keys one call hashes: a whole [`Pairs`].
pub const MAX_KEYS: usize = LANES * VECTORS;
const _: () = assert!(MAX_KEYS == super::GROUP);

/// Whether the CPU has what [`hashlittle2_wide`] needs: AVX-512F, and BW with VL for the
/// byte-masked loads that read a key without reading past its end.
#[inline(always)]
pub fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vl")
}

/// One 32-bit lane per key, [`MAX_KEYS`] keys.
type Lanes = [__m512i; VECTORS];

/// `hashlittle2(keys[i], pc, 0)` for the (at most [`MAX_KEYS`]) keys, as (`out.c[i]`,
/// `out.b[i]`); the lanes past the keys hold hashes of nothing.
///
/// # Safety
/// The CPU must have AVX-512F, BW and VL ([`available`]).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub unsafe fn hashlittle2_wide(keys: &[&[u8]], pc: u32, out: &mut Pairs) {
    debug_assert!(keys.len() <= MAX_KEYS);
    let words: [[__m512i; 6]; VECTORS] = std::array::from_fn(|v| transposed_words(keys.get(v * LANES..).unwrap_or(&[])));
    if hash_group::<Lanes>(keys, std::array::from_fn(|w| std::array::from_fn(|v| words[v][w])), pc, out, 0) {
        rehash_long_keys(keys, pc, out);
    }
}

/// The first (up to) 24 bytes of `key` in a 256-bit vector, zero past the key's end.
///
/// A byte-masked load would read exactly the key's bytes, but on the Zen 4 this was measured
/// on it made the whole hash slower than the scalar one (4.4 ns per key against 1.9 with
/// [`load_within_page`]). So the masked load is taken only by a key that starts in the last 32
/// bytes of a page, where the next page may be unmapped.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn load_key(key: &[u8]) -> __m256i {
    let n = key.len().min(MAX_LANE_LEN);
    load_within_page(key, n).unwrap_or_else(|| {
        // SAFETY: the mask selects bytes 0..n of the key, which are inside it; masked-off bytes
        // are not read (AVX-512 suppresses their faults).
        unsafe { _mm256_maskz_loadu_epi8(((1u64 << n) - 1) as __mmask32, key.as_ptr() as *const i8) }
    })
}

/// Words 0..6 of each of the first 16 keys, zero-padded past its end, as six vectors with key
/// i in lane i (lanes past the keys hold zeros).
///
/// Each key's first 24 bytes are read ([`load_key`]) into a 256-bit half; the halves are
/// paired into 512-bit registers and transposed in three rounds of shuffles.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
fn transposed_words(keys: &[&[u8]]) -> [__m512i; 6] {
    let load = |i: usize| keys.get(i).map_or(_mm256_setzero_si256(), |key| load_key(key));
    // pairs[j]: key 2j's words 0..8 in lanes 0..8, key 2j + 1's in lanes 8..16.
    let pairs: [__m512i; 8] = std::array::from_fn(|j| _mm512_inserti64x4::<1>(_mm512_castsi256_si512(load(2 * j)), load(2 * j + 1)));

    // Round 1: four keys (two pairs) at a time, words 0..4 and words 4..8, word-major: lane
    // 4w + t holds word w of key t.
    let lo4 = _mm512_setr_epi32(0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27);
    let hi4 = _mm512_add_epi32(lo4, _mm512_set1_epi32(4));
    let quad = |x: usize, idx: __m512i| _mm512_permutex2var_epi32(pairs[2 * x], idx, pairs[2 * x + 1]);
    let (q_lo, q_hi): ([__m512i; 4], [__m512i; 4]) = (std::array::from_fn(|x| quad(x, lo4)), std::array::from_fn(|x| quad(x, hi4)));

    // Round 2: eight keys (two quads) at a time, two words each, word-major: lane 8w + t.
    let first2 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    let next2 = _mm512_add_epi32(first2, _mm512_set1_epi32(8));
    let oct = |q: &[__m512i; 4], half: usize, idx: __m512i| _mm512_permutex2var_epi32(q[2 * half], idx, q[2 * half + 1]);
    // Per half of the keys (0..8, 8..16): words 0-1, 2-3, 4-5.
    let w01 = [oct(&q_lo, 0, first2), oct(&q_lo, 1, first2)];
    let w23 = [oct(&q_lo, 0, next2), oct(&q_lo, 1, next2)];
    let w45 = [oct(&q_hi, 0, first2), oct(&q_hi, 1, first2)];

    // Round 3: the two halves of the keys side by side, one word per register.
    let even = |w: &[__m512i; 2]| _mm512_shuffle_i64x2::<0b01_00_01_00>(w[0], w[1]);
    let odd = |w: &[__m512i; 2]| _mm512_shuffle_i64x2::<0b11_10_11_10>(w[0], w[1]);
    [even(&w01), odd(&w01), even(&w23), odd(&w23), even(&w45), odd(&w45)]
}

impl LaneOps for Lanes {
    const KEYS: usize = MAX_KEYS;

    // SAFETY (all): only called from functions compiled for AVX-512F; loads and stores are of
    // the 16 lanes of each vector, inside the `KEYS` values given.
    #[inline(always)]
    fn splat(x: u32) -> Self {
        [unsafe { _mm512_set1_epi32(x as i32) }; VECTORS]
    }

    #[inline(always)]
    fn load(values: &[u32]) -> Self {
        assert!(values.len() >= MAX_KEYS);
        std::array::from_fn(|v| unsafe { _mm512_loadu_si512(values.as_ptr().add(v * LANES) as *const _) })
    }

    #[inline(always)]
    fn store(self, out: &mut [u32]) {
        assert!(out.len() >= MAX_KEYS);
        for (v, lanes) in self.into_iter().enumerate() {
            unsafe { _mm512_storeu_si512(out.as_mut_ptr().add(v * LANES) as *mut _, lanes) };
        }
    }

    #[inline(always)]
    fn add(self, other: Self) -> Self {
        std::array::from_fn(|v| unsafe { _mm512_add_epi32(self[v], other[v]) })
    }

    #[inline(always)]
    fn sub(self, other: Self) -> Self {
        std::array::from_fn(|v| unsafe { _mm512_sub_epi32(self[v], other[v]) })
    }

    #[inline(always)]
    fn xor(self, other: Self) -> Self {
        std::array::from_fn(|v| unsafe { _mm512_xor_si512(self[v], other[v]) })
    }

    #[inline(always)]
    fn rot<const K: i32>(self) -> Self {
        std::array::from_fn(|v| unsafe { _mm512_rol_epi32::<K>(self[v]) })
    }

    #[inline(always)]
    fn where_over_12(len: Self, yes: Self, no: Self) -> Self {
        std::array::from_fn(|v| unsafe { _mm512_mask_mov_epi32(no[v], _mm512_cmpgt_epu32_mask(len[v], _mm512_set1_epi32(12)), yes[v]) })
    }

    #[inline(always)]
    fn where_zero(len: Self, yes: Self, no: Self) -> Self {
        std::array::from_fn(|v| unsafe { _mm512_mask_mov_epi32(no[v], _mm512_cmpeq_epu32_mask(len[v], _mm512_setzero_si512()), yes[v]) })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::hashing::lookup3::hashlittle2;

    /// Against the scalar hash: every length 0..=40 (both sides of the lanes' 24) in every lane,
    /// at every offset in the buffer, groups of every size 0..=16, keys ending at the buffer's
    /// end, and three seeds.
    #[test]
    fn equals_the_scalar_hash_for_every_length_lane_and_group_size() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX-512F/BW/VL");
            return;
        }
        let bytes = crate::xorshift::XorShift::new(0x2545_F491_4F6C_DD1D).bytes(800);
        let mut checked = 0;
        for seed in [0, 7, 0x9e37_79b9] {
            for start in 0..41 {
                for group in (0..=LANES).chain([31, 47, MAX_KEYS]) {
                    // Lane i gets length (start + 3i) % 41 at offset 17i + (start % 13).
                    let keys: Vec<&[u8]> = (0..group)
                        .map(|i| {
                            let len = (start + 3 * i) % 41;
                            let at = 5 * i + start % 13;
                            &bytes[at..at + len]
                        })
                        .collect();
                    let mut out = Pairs::default();
                    // SAFETY: the CPU has what the function needs (checked above).
                    unsafe { hashlittle2_wide(&keys, seed, &mut out) };
                    for (i, key) in keys.iter().enumerate() {
                        assert_eq!((out.c[i], out.b[i]), hashlittle2(key, seed, 0), "lane {i} of {group}, length {}, seed {seed}", key.len());
                        checked += 1;
                    }
                }
            }
        }
        // Keys that end at the buffer's last byte.
        let tail: Vec<&[u8]> = (0..LANES).map(|i| &bytes[bytes.len() - i..]).collect();
        let mut out = Pairs::default();
        // SAFETY: as above.
        unsafe { hashlittle2_wide(&tail, 1, &mut out) };
        for (i, key) in tail.iter().enumerate() {
            assert_eq!((out.c[i], out.b[i]), hashlittle2(key, 1, 0), "tail key of length {i}");
        }
        assert!(checked > 15_000, "{checked} lanes checked");
    }

    /// Keys that end at the last byte before an unreadable page, which a read past the key
    /// would fault on: every length 0..=30, from groups of 1 to 31 keys.
    #[test]
    fn reads_nothing_past_a_key_at_the_end_of_a_page() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX-512F/BW/VL");
            return;
        }
        // SAFETY: the CPU has what the function needs (checked above).
        at_the_end_of_a_page(|group, out| unsafe { hashlittle2_wide(group, 3, out) });
    }

    /// Checks a wide hash (`hash`, seed 3) on keys that end at the last byte before an
    /// unreadable page: every length 0..=30, from groups of 1, 16 and 31 keys.
    pub(crate) fn at_the_end_of_a_page(hash: impl Fn(&[&[u8]], &mut Pairs)) {
        const PAGE: usize = 4096;
        // SAFETY: a fresh anonymous mapping of two pages, the second made unreadable; it is
        // unmapped at the end and nothing else refers to it.
        unsafe {
            let base = libc::mmap(std::ptr::null_mut(), 2 * PAGE, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0);
            assert_ne!(base, libc::MAP_FAILED);
            assert_eq!(libc::mprotect((base as *mut u8).add(PAGE) as *mut libc::c_void, PAGE, libc::PROT_NONE), 0);
            let page = std::slice::from_raw_parts_mut(base as *mut u8, PAGE);
            for (i, byte) in page.iter_mut().enumerate() {
                *byte = (i as u8).wrapping_mul(151).wrapping_add(7);
            }
            let keys: Vec<&[u8]> = (0..=30).map(|len| &page[PAGE - len..]).collect();
            for group in [1, 16, keys.len()] {
                for start in 0..=keys.len() - group {
                    let group = &keys[start..start + group];
                    let mut out = Pairs::default();
                    hash(group, &mut out);
                    for (i, key) in group.iter().enumerate() {
                        assert_eq!((out.c[i], out.b[i]), hashlittle2(key, 3, 0), "key of length {} at the page's end", key.len());
                    }
                }
            }
            libc::munmap(base, 2 * PAGE);
        }
    }
}
