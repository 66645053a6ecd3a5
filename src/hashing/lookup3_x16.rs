//! lookup3 `hashlittle2` of 16 keys at once with AVX-512: one 32-bit lane per key, the same
//! adds, xors and rotates as [`super::lookup3`] on all 16 keys together. A batch of keys is
//! hashed this way before its probes are computed; on keys of a few bytes the hash is most of a
//! batched query's instructions, and here it takes a few per key instead of about 60.
//!
//! Keys of up to 64 bytes (lookup3's at most five mixed blocks and one finished tail, which
//! covers ids, dates, names, UUIDs, digests in hex and the like) are hashed in the lanes from
//! two rows of 32 bytes; a vector with a longer key is hashed whole by a loop over as many rows
//! as it needs (up to `MAX_ANY_LEN`, past which a key is hashed by the scalar hash). Answers
//! are bit for bit those of [`super::lookup3::hashlittle2`] (see the tests below).
//!
//! The keys' bytes are read and transposed by the AVX2 hash's code ([`super::lookup3_x8`]), 8
//! keys at a time, and two such halves joined into each 512-bit vector: what AVX-512 adds is
//! the rounds' one-instruction rotates and compares into mask registers, on 16 lanes at once.

use super::lookup3_lanes::{hash_lanes_into, rehash_long_vectors, KeyWords, LaneOps, MAX_LANE_LEN};
use super::lookup3_x8::{eight_keys, eight_tails, row_of_eight, transposed_words};
pub use super::Pairs;
use std::arch::x86_64::*;

/// Keys per vector: one 32-bit lane each.
pub const LANES: usize = 16;

/// The most keys one call hashes: a whole [`Pairs`], a vector at a time. (Two or four vectors
/// side by side, as independent chains of operations, made batched queries slower on the
/// Zen 4 this was measured on: 0.90-0.95x the avx2 kernel's time with two, 0.93-0.95x with
/// four, 0.79-0.88x with one.)
pub const MAX_KEYS: usize = 64;
const _: () = assert!(MAX_KEYS == super::GROUP && MAX_KEYS.is_multiple_of(LANES));

/// Whether the CPU has what [`hashlittle2_wide`] needs: AVX-512F, and BW with VL, which every
/// AVX-512 CPU has and which the other AVX-512 code here asks for.
#[inline(always)]
pub fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vl")
}

/// `hashlittle2(keys[i], pc, 0)` for the (at most [`MAX_KEYS`]) keys, as (`out.c[i]`,
/// `out.b[i]`); the other lanes of the last vector hash empty keys, and those past it are left
/// as they were.
///
/// # Safety
/// The CPU must have AVX-512F, BW and VL ([`available`]), and so AVX2.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
pub unsafe fn hashlittle2_wide(keys: &[&[u8]], pc: u32, out: &mut Pairs) {
    debug_assert!(keys.len() <= MAX_KEYS);
    // Words 0..8 and the lengths (over 64 as 65) of the first 8 of `keys`, empty keys past its
    // end, and their words 8..16. Closures, which have this function's features and inline: as
    // a function of its own it was called, its results passed through memory, and batched
    // queries took 0.95x the avx2 kernel's time instead of 0.86-0.88x.
    let eight_words = |keys: &[&[u8]]| {
        let mut spare = [&[][..]; 8];
        transposed_words::<8>(eight_keys(keys, &mut spare))
    };
    let eight_rest = |keys: &[&[u8]]| {
        let mut spare = [&[][..]; 8];
        transposed_words::<8>(&eight_tails(eight_keys(keys, &mut spare))).0
    };
    let join = |low: __m256i, high: __m256i| _mm512_inserti64x4::<1>(_mm512_castsi256_si512(low), high);
    let mut long = false;
    for (v, keys) in keys.chunks(LANES).enumerate() {
        let (low, low_len) = eight_words(keys);
        let (high, high_len) = eight_words(keys.get(8..).unwrap_or(&[]));
        let len = join(low_len, high_len);
        if <__m512i as LaneOps>::any_over(len, MAX_LANE_LEN as u32) {
            // Hashed whole below.
            long = true;
            continue;
        }
        let first: [__m512i; 8] = std::array::from_fn(|w| join(low[w], high[w]));
        let rest = <__m512i as LaneOps>::any_over(len, 32).then(|| {
            let (low, high) = (eight_rest(keys), eight_rest(keys.get(8..).unwrap_or(&[])));
            std::array::from_fn(|w| join(low[w], high[w]))
        });
        hash_lanes_into::<__m512i>(len, KeyWords { first: &first, rest: rest.as_ref() }, pc, out, v * LANES);
    }
    if long {
        rehash_long_vectors::<__m512i>(keys, pc, out, |keys, r| {
            let (low, high) = (row_of_eight(keys, r), row_of_eight(keys.get(8..).unwrap_or(&[]), r));
            let mut row = [_mm512_setzero_si512(); 8];
            for (w, row) in row.iter_mut().enumerate() {
                *row = join(low[w], high[w]);
            }
            row
        });
    }
}

impl LaneOps for __m512i {
    const KEYS: usize = LANES;

    // SAFETY (all): only called from functions compiled for AVX-512F; stores are of the 16
    // lanes, inside the `KEYS` values given.
    #[inline(always)]
    fn splat(x: u32) -> Self {
        unsafe { _mm512_set1_epi32(x as i32) }
    }

    #[inline(always)]
    fn store(self, out: &mut [u32]) {
        assert!(out.len() >= LANES);
        unsafe { _mm512_storeu_si512(out.as_mut_ptr() as *mut _, self) };
    }

    #[inline(always)]
    fn load(values: &[u32]) -> Self {
        assert!(values.len() >= LANES);
        unsafe { _mm512_loadu_si512(values.as_ptr() as *const _) }
    }

    #[inline(always)]
    fn add(self, other: Self) -> Self {
        unsafe { _mm512_add_epi32(self, other) }
    }

    #[inline(always)]
    fn sub(self, other: Self) -> Self {
        unsafe { _mm512_sub_epi32(self, other) }
    }

    #[inline(always)]
    fn xor(self, other: Self) -> Self {
        unsafe { _mm512_xor_si512(self, other) }
    }

    #[inline(always)]
    fn rot<const K: i32>(self) -> Self {
        unsafe { _mm512_rol_epi32::<K>(self) }
    }

    #[inline(always)]
    fn where_over(len: Self, n: u32, yes: Self, no: Self) -> Self {
        unsafe { _mm512_mask_mov_epi32(no, _mm512_cmpgt_epu32_mask(len, _mm512_set1_epi32(n as i32)), yes) }
    }

    #[inline(always)]
    fn where_zero(len: Self, yes: Self, no: Self) -> Self {
        unsafe { _mm512_mask_mov_epi32(no, _mm512_cmpeq_epu32_mask(len, _mm512_setzero_si512()), yes) }
    }

    #[inline(always)]
    fn any_over(len: Self, n: u32) -> bool {
        unsafe { _mm512_cmpgt_epu32_mask(len, _mm512_set1_epi32(n as i32)) != 0 }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::hashing::lookup3::hashlittle2;

    /// Against the scalar hash: every length 0..=80 (both sides of the lanes' 64) in every lane,
    /// at every offset in the buffer, groups of every size 0..=16, keys ending at the buffer's
    /// end, and three seeds.
    #[test]
    fn equals_the_scalar_hash_for_every_length_lane_and_group_size() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX-512F/BW/VL");
            return;
        }
        // SAFETY: the CPU has what the function needs (checked above).
        let checked = against_the_scalar((0..=LANES).chain([31, 47, MAX_KEYS]), |keys, seed, out| unsafe { hashlittle2_wide(keys, seed, out) });
        let bytes = crate::xorshift::XorShift::new(0x2545_F491_4F6C_DD1D).bytes(800);
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

    /// Against the scalar hash on keys over the lanes' first 64 bytes, hashed again in the
    /// lanes, and over MAX_ANY_LEN, hashed one by one.
    #[test]
    fn equals_the_scalar_hash_on_long_keys() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX-512F/BW/VL");
            return;
        }
        // SAFETY: the CPU has what the function needs (checked above).
        long_keys_against_the_scalar(|keys, seed, out| unsafe { hashlittle2_wide(keys, seed, out) });
    }

    /// Checks a wide hash against the scalar one on long keys, two seeds: groups of 64 keys all
    /// of one length (each side of the rows of 32 bytes, of the blocks of 12 and of
    /// MAX_ANY_LEN), groups of 1 to 64 keys of lengths mixed from 0 to past MAX_ANY_LEN, and
    /// groups of short keys with one long key in each place.
    pub(crate) fn long_keys_against_the_scalar(wide: impl Fn(&[&[u8]], u32, &mut Pairs)) {
        long_keys_against(wide, |key, seed| hashlittle2(key, seed, 0))
    }

    /// [`long_keys_against_the_scalar`] of any wide hash, against `scalar`'s pair of a key and
    /// a seed.
    pub(crate) fn long_keys_against(wide: impl Fn(&[&[u8]], u32, &mut Pairs), scalar: impl Fn(&[u8], u32) -> (u32, u32)) {
        use crate::hashing::lookup3_lanes::MAX_ANY_LEN;
        let bytes = crate::xorshift::XorShift::new(0x5851_F42D_4C95_7F2D).bytes(MAX_ANY_LEN + 2000);
        let check = |keys: &[&[u8]], what: &str| {
            for seed in [0, 0x9e37_79b9] {
                let mut out = Pairs::default();
                wide(keys, seed, &mut out);
                for (i, key) in keys.iter().enumerate() {
                    assert_eq!((out.c[i], out.b[i]), scalar(key, seed), "{what}: lane {i} of {}, length {}, seed {seed}", keys.len(), key.len());
                }
            }
        };
        let one_length = [65, 72, 95, 96, 97, 100, 108, 128, 129, 200, 255, 256, 257, MAX_ANY_LEN - 1, MAX_ANY_LEN, MAX_ANY_LEN + 1, MAX_ANY_LEN + 13];
        for len in one_length {
            let keys: Vec<&[u8]> = (0..MAX_KEYS).map(|i| &bytes[7 * i..7 * i + len]).collect();
            check(&keys, "one length");
        }
        let mixed = [0, 5, 64, 65, 96, 97, 300, MAX_ANY_LEN + 1, 12, MAX_ANY_LEN, 33, 150, 1, 77];
        for group in (1..=MAX_KEYS).step_by(7).chain([16, 32, MAX_KEYS]) {
            for start in 0..mixed.len() {
                let keys: Vec<&[u8]> = (0..group).map(|i| {
                    let (len, at) = (mixed[(start + i) % mixed.len()], (11 * i + start) % 900);
                    &bytes[at..at + len]
                }).collect();
                check(&keys, "mixed lengths");
            }
        }
        for group in [1, 16, 17, 40] {
            for long in 0..group {
                let keys: Vec<&[u8]> = (0..group).map(|i| if i == long { &bytes[i..i + 333] } else { &bytes[3 * i..3 * i + i % 20] }).collect();
                check(&keys, "one long key");
            }
        }
    }

    /// Checks a wide Hadoop hash, `wide(keys, rows)` giving each key's k hashes (row j its hash
    /// j), against the chain of the scalar `hash`, each seeded with the one before (the first
    /// with 0): five hashes of keys of lengths mixed from 0 to past MAX_ANY_LEN, in groups of 1
    /// to 64 keys.
    pub(crate) fn hadoop_chain_on_long_keys(wide: impl Fn(&[&[u8]], &mut [[u32; MAX_KEYS]]), hash: impl Fn(&[u8], u32) -> u32) {
        use crate::hashing::lookup3_lanes::MAX_ANY_LEN;
        let bytes = crate::xorshift::XorShift::new(0x1405_7B7E_F767_814F).bytes(MAX_ANY_LEN + 2000);
        let lengths = [0, 5, 64, 65, 96, 97, 300, MAX_ANY_LEN + 1, 12, MAX_ANY_LEN, 33, 150, 1, 77, 100, 100, 100];
        for group in [1, 2, 8, 9, 16, 17, 40, MAX_KEYS] {
            for start in 0..lengths.len() {
                let keys: Vec<&[u8]> = (0..group).map(|i| {
                    let (len, at) = (lengths[(start + i) % lengths.len()], (13 * i + start) % 900);
                    &bytes[at..at + len]
                }).collect();
                let mut rows = vec![[0u32; MAX_KEYS]; 5];
                wide(&keys, &mut rows);
                for (i, key) in keys.iter().enumerate() {
                    let mut h = 0;
                    for (j, row) in rows.iter().enumerate() {
                        h = hash(key, h);
                        assert_eq!(row[i], h, "hash {j} of key {i} of {group}, length {}", key.len());
                    }
                }
            }
        }
    }

    /// Checks a wide hash against the scalar one for groups of the sizes in `groups`, three
    /// seeds and 81 starts: in a group of a start, key i is (start + 3i) % 81 bytes long (every
    /// length 0..=80 in every lane, both sides of the lanes' 24 and 64; vectors of keys all over
    /// 32 bytes and vectors of keys on both sides of it) at offset 5i + start % 13.
    /// Returns the keys checked.
    pub(crate) fn against_the_scalar(groups: impl Iterator<Item = usize> + Clone, wide: impl Fn(&[&[u8]], u32, &mut Pairs)) -> usize {
        against(groups, wide, |key, seed| hashlittle2(key, seed, 0))
    }

    /// [`against_the_scalar`] of any wide hash, against `scalar`'s pair of a key and a seed.
    pub(crate) fn against(groups: impl Iterator<Item = usize> + Clone, wide: impl Fn(&[&[u8]], u32, &mut Pairs), scalar: impl Fn(&[u8], u32) -> (u32, u32)) -> usize {
        let bytes = crate::xorshift::XorShift::new(0x2545_F491_4F6C_DD1D).bytes(800);
        let mut checked = 0;
        for seed in [0, 7, 0x9e37_79b9] {
            for start in 0..81 {
                for group in groups.clone() {
                    let keys: Vec<&[u8]> = (0..group)
                        .map(|i| {
                            let len = (start + 3 * i) % 81;
                            let at = 5 * i + start % 13;
                            &bytes[at..at + len]
                        })
                        .collect();
                    let mut out = Pairs::default();
                    wide(&keys, seed, &mut out);
                    for (i, key) in keys.iter().enumerate() {
                        assert_eq!((out.c[i], out.b[i]), scalar(key, seed), "lane {i} of {group}, length {}, seed {seed}", key.len());
                        checked += 1;
                    }
                }
            }
        }
        checked
    }

    /// Checks a wide hash of pairs against `scalar` as [`against`] and [`at_a_pages_end`] do (seed
    /// 3 there), and on keys of every length up to 23 made of bytes of 0x80 and over, which Java
    /// sign-extends: the checks of the avx2 Murmur hashes, run only where the CPU has AVX2.
    pub(crate) fn check_wide_pairs(wide: impl Fn(&[&[u8]], u32, &mut Pairs), scalar: impl Fn(&[u8], u32) -> (u32, u32)) {
        if !crate::hashing::lookup3_x8::available() {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        let checked = against((0..=17).chain([31, 33, 47, MAX_KEYS]), &wide, &scalar);
        assert!(checked > 15_000, "{checked} lanes checked");
        at_a_pages_end(|group, out| wide(group, 3, out), |key| scalar(key, 3));
        let high: Vec<Vec<u8>> = (0..=23).map(|len| (0..len).map(|i| 0x80 | (i as u8 * 37)).collect()).collect();
        let high: Vec<&[u8]> = high.iter().map(Vec::as_slice).collect();
        let mut out = Pairs::default();
        wide(&high, 0, &mut out);
        for (i, key) in high.iter().enumerate() {
            assert_eq!((out.c[i], out.b[i]), scalar(key, 0), "high bytes, length {}", key.len());
        }
    }

    /// Keys that end at the last byte before an unreadable page, which a read past the key
    /// would fault on: every length 0..=150, from groups of 1 to 64 keys.
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
    /// unreadable page: every length 0..=150 (the bytes past a key's first 32 read apart, and
    /// its later rows of 32 bytes, near the page's end too), from groups of 1, 16 and 64 keys.
    pub(crate) fn at_the_end_of_a_page(hash: impl Fn(&[&[u8]], &mut Pairs)) {
        at_a_pages_end(hash, |key| hashlittle2(key, 3, 0))
    }

    /// [`at_the_end_of_a_page`] of any wide hash, against `scalar`'s pair of a key.
    pub(crate) fn at_a_pages_end(hash: impl Fn(&[&[u8]], &mut Pairs), scalar: impl Fn(&[u8]) -> (u32, u32)) {
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
            let keys: Vec<&[u8]> = (0..=150).map(|len| &page[PAGE - len..]).collect();
            for group in [1, 16, MAX_KEYS] {
                for start in 0..=keys.len() - group {
                    let group = &keys[start..start + group];
                    let mut out = Pairs::default();
                    hash(group, &mut out);
                    for (i, key) in group.iter().enumerate() {
                        assert_eq!((out.c[i], out.b[i]), scalar(key), "key of length {} at the page's end", key.len());
                    }
                }
            }
            libc::munmap(base, 2 * PAGE);
        }
    }
}
