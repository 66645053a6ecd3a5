//! lookup3 `hashlittle2` of 8 keys to a vector with AVX2, for CPUs without AVX-512: the same
//! lanes as [`super::lookup3_x16`], with half as many per vector and rotates of two shifts.
//! Its reading of the keys into transposed words (`transposed_words`) serves both: a key is
//! read as 32 bytes where it is and the bytes past its end cleared, and a key near the end of
//! its page is copied into a padded buffer (a byte-masked AVX-512 load of each key, tried
//! first, made the AVX-512 hash slower than the scalar one on a Zen 4).
//! Keys of up to 64 bytes are hashed in the lanes (a second row of 32 bytes read for a vector
//! with a key over 32), a round with a longer key again, whole, as many rows as it needs (up to
//! `MAX_ANY_LEN`, for the native pairs and Hadoop's Jenkins hashes alike; past it, one by one);
//! answers are bit for bit those of
//! [`super::lookup3::hashlittle2`] (see the test below).
//! With eight words for each of the two vectors, the words take all 16 of AVX2's registers, yet
//! batched queries of keys of 8-20 bytes took the same time as with six (5.0-5.1 against
//! 5.0-5.2 ns, two interleaved runs of the filter benchmark).

use super::lookup3_lanes::{hadoop_lanes, hash_lanes_into, rehash_long_hadoop_vectors, rehash_long_vectors, KeyWords, LaneOps, MAX_LANE_LEN};
use super::lookup3_x16::MAX_KEYS;
use super::{Pairs, GROUP};
use std::arch::x86_64::*;

/// Keys per vector: one 32-bit lane each.
const LANES: usize = 8;

/// The lengths [`transposed_words`] gives in place of those over [`MAX_LANE_LEN`].
const LEN_CAP: usize = MAX_LANE_LEN + 1;

/// Vectors hashed side by side: independent chains of dependent operations. Batched queries in
/// the filter benchmark (n = 10^6) took 7.3 ns with one, 6.3 with two, and 20 with four, whose
/// states do not fit the 16 vector registers and spill.
const VECTORS: usize = 2;

/// The keys of one round of vectors.
const ROUND: usize = LANES * VECTORS;

/// Whether the CPU has AVX2 (std caches the answer).
#[inline(always)]
pub fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// One 32-bit lane per key, [`ROUND`] keys.
type Lanes = [__m256i; VECTORS];

impl LaneOps for Lanes {
    const KEYS: usize = ROUND;

    // SAFETY (all): only called from functions compiled for AVX2; stores are of the 8
    // lanes of each vector, inside the `KEYS` values given.
    #[inline(always)]
    fn splat(x: u32) -> Self {
        [unsafe { _mm256_set1_epi32(x as i32) }; VECTORS]
    }

    #[inline(always)]
    fn store(self, out: &mut [u32]) {
        assert!(out.len() >= ROUND);
        for (v, lanes) in self.into_iter().enumerate() {
            unsafe { _mm256_storeu_si256(out.as_mut_ptr().add(v * LANES) as *mut _, lanes) };
        }
    }

    #[inline(always)]
    fn load(values: &[u32]) -> Self {
        assert!(values.len() >= ROUND);
        std::array::from_fn(|v| unsafe { _mm256_loadu_si256(values.as_ptr().add(v * LANES) as *const _) })
    }

    #[inline(always)]
    fn add(self, other: Self) -> Self {
        std::array::from_fn(|v| unsafe { _mm256_add_epi32(self[v], other[v]) })
    }

    #[inline(always)]
    fn sub(self, other: Self) -> Self {
        std::array::from_fn(|v| unsafe { _mm256_sub_epi32(self[v], other[v]) })
    }

    #[inline(always)]
    fn xor(self, other: Self) -> Self {
        std::array::from_fn(|v| unsafe { _mm256_xor_si256(self[v], other[v]) })
    }

    #[inline(always)]
    fn rot<const K: i32>(self) -> Self {
        // Shift counts as registers: a const generic cannot give the immediate 32 - K. With
        // constant counts the compiler emits the immediate forms.
        std::array::from_fn(|v| unsafe {
            let (left, right) = (_mm_cvtsi32_si128(K), _mm_cvtsi32_si128(32 - K));
            _mm256_or_si256(_mm256_sll_epi32(self[v], left), _mm256_srl_epi32(self[v], right))
        })
    }

    // Lengths compare as signed 32-bit lanes: [`transposed_words`] caps them at 65.
    #[inline(always)]
    fn where_over(len: Self, n: u32, yes: Self, no: Self) -> Self {
        std::array::from_fn(|v| unsafe { _mm256_blendv_epi8(no[v], yes[v], _mm256_cmpgt_epi32(len[v], _mm256_set1_epi32(n as i32))) })
    }

    #[inline(always)]
    fn where_zero(len: Self, yes: Self, no: Self) -> Self {
        std::array::from_fn(|v| unsafe { _mm256_blendv_epi8(no[v], yes[v], _mm256_cmpeq_epi32(len[v], _mm256_setzero_si256())) })
    }

    #[inline(always)]
    fn any_over(len: Self, n: u32) -> bool {
        any_over(len, n as i32)
    }
}

/// `hashlittle2(keys[i], pc, 0)` for the (at most [`MAX_KEYS`]) keys, as (`out.c[i]`,
/// `out.b[i]`); the other lanes of the last round of vectors hash empty keys, and those past it
/// are left as they were.
///
/// # Safety
/// The CPU must have AVX2 ([`available`]).
#[inline]
#[target_feature(enable = "avx2")]
pub unsafe fn hashlittle2_wide(keys: &[&[u8]], pc: u32, out: &mut Pairs) {
    if in_rounds(keys, true, |len, words, at| hash_lanes_into::<Lanes>(len, words, pc, out, at)) {
        rehash_long_vectors::<Lanes>(keys, pc, out, |keys, r| row_of_round(keys, r));
    }
}

/// Words 8r..8r + 8 of a round's keys, [`row_of_eight`] of each of its vectors.
#[inline]
#[target_feature(enable = "avx2")]
fn row_of_round(keys: &[&[u8]], r: usize) -> [Lanes; 8] {
    let (first, second) = (row_of_eight(keys, r), row_of_eight(keys.get(LANES..).unwrap_or(&[]), r));
    let mut row = [[_mm256_setzero_si256(); VECTORS]; 8];
    for (w, row) in row.iter_mut().enumerate() {
        *row = [first[w], second[w]];
    }
    row
}

/// Hadoop's Jenkins hashes of the (at most [`MAX_KEYS`]) keys: `rows[j][i]` is key i's hash j,
/// lookup3 `hashlittle` of the key seeded with its hash j − 1, the first seeded with 0, as
/// Hadoop's `HashFunction` computes a key's positions. Columns past the keys of the last round
/// of vectors are left as they were.
///
/// # Safety
/// The CPU must have AVX2 ([`available`]).
#[inline]
#[target_feature(enable = "avx2")]
pub unsafe fn hadoop_hashes_wide(keys: &[&[u8]], rows: &mut [[u32; GROUP]]) {
    if in_rounds(keys, true, |len, words, at| hadoop_lanes::<Lanes>(len, words, rows, at)) {
        rehash_long_hadoop_vectors::<Lanes>(keys, rows, |keys, r| row_of_round(keys, r));
    }
}

/// Calls `hash` with the lengths and the transposed words of each round of [`ROUND`] keys
/// (empty keys past the last) and the round's first key's index; returns whether any key is
/// over [`MAX_LANE_LEN`] bytes, for the caller to hash again: that key alone, or with
/// `skip_long` its whole round, which `hash` is then not called for.
///
/// # Safety
/// The CPU must have AVX2. (Always inlined into its callers, which are compiled for it.)
#[inline(always)]
unsafe fn in_rounds(keys: &[&[u8]], skip_long: bool, mut hash: impl FnMut(Lanes, KeyWords<Lanes>, usize)) -> bool {
    debug_assert!(keys.len() <= MAX_KEYS);
    let mut long = false;
    for (round, keys) in keys.chunks(ROUND).enumerate() {
        // Written out for the two vectors: through `array::from_fn`, whose own code is not
        // compiled for AVX2, the loads were once called instead of inlined.
        const _: () = assert!(VECTORS == 2);
        let (mut spare, mut second_spare) = ([&[][..]; LANES], [&[][..]; LANES]);
        let (first_keys, second_keys) = (eight_keys(keys, &mut spare), eight_keys(keys.get(LANES..).unwrap_or(&[]), &mut second_spare));
        // SAFETY (both, and the two below): the caller's promise that the CPU has AVX2.
        let (first, first_len) = unsafe { transposed_words::<8>(first_keys) };
        let (second, second_len) = unsafe { transposed_words::<8>(second_keys) };
        let len = [first_len, second_len];
        if skip_long && any_over(len, MAX_LANE_LEN as i32) {
            long = true;
            continue;
        }
        let words = std::array::from_fn(|w| [first[w], second[w]]);
        let rest = any_over(len, 32).then(|| {
            // SAFETY: as above.
            let (first, second) = unsafe { (transposed_words::<8>(&eight_tails(first_keys)).0, transposed_words::<8>(&eight_tails(second_keys)).0) };
            std::array::from_fn(|w| [first[w], second[w]])
        });
        hash(len, KeyWords { first: &words, rest: rest.as_ref() }, round * ROUND);
        long |= any_over(len, MAX_LANE_LEN as i32);
    }
    long
}

/// The first 8 of `keys` in place, or, where there are fewer, all of them followed by empty
/// keys in `spare`: a whole vector's worth, so that the loads and the transpose below test no
/// key count, and the usual whole vector is read where it is, not copied.
#[inline(always)]
pub(super) fn eight_keys<'a, 'k>(keys: &'a [&'k [u8]], spare: &'a mut [&'k [u8]; LANES]) -> &'a [&'k [u8]; LANES] {
    match keys.first_chunk::<LANES>() {
        Some(eight) => eight,
        None => {
            *spare = std::array::from_fn(|i| keys.get(i).copied().unwrap_or(&[]));
            spare
        }
    }
}

/// Words 8r..8r + 8 of the first 8 of `keys` (bytes 32r..32r + 32, zero past each key's end;
/// empty keys past the last), transposed: a row of a vector's keys for
/// [`rehash_long_vectors`].
///
/// Each key's row is read on its own and the lengths of the rows made in registers: handed to
/// [`transposed_words`] as slices, the slices written one by one were read back as vectors at
/// once, which the CPU cannot forward from the stores, and the reads waited for them (40% of
/// this function's time on a build keyed on 100-byte URLs).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn row_of_eight(keys: &[&[u8]], r: usize) -> [__m256i; 8] {
    let mut spare = [&[][..]; LANES];
    let keys = eight_keys(keys, &mut spare);
    let mut rows = [_mm256_setzero_si256(); LANES];
    let mut n = [0i32; LANES];
    for i in 0..LANES {
        let rest = keys[i].get(32 * r..).unwrap_or(&[]);
        n[i] = rest.len().min(32) as i32;
        rows[i] = read_row(rest);
    }
    let len = _mm256_setr_epi32(n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7]);
    keep_key_bytes(transpose::<8>(rows), len)
}

/// The bytes of 8 keys past their first 32 (empty for a key of 32 bytes or fewer): what a second
/// [`transposed_words`] reads as their words 8..16.
#[inline(always)]
pub(super) fn eight_tails<'k>(keys: &[&'k [u8]; LANES]) -> [&'k [u8]; LANES] {
    std::array::from_fn(|i| keys[i].get(32..).unwrap_or(&[]))
}

/// Calls `hash` with the words of the 8 keys, as [`transposed_words`] gives them, and their
/// lengths: 6 words where no key is over 24 bytes, 8 where none is over 32, else 16 (bytes
/// 32..64 read as a second row). For the Murmur lanes, which take the words a round each, the
/// fewer the words the fewer the rounds: with 8 words or more for every vector, a build keyed on
/// 8-digit ids took 4-5% longer.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn with_words_to_64<R>(keys: &[&[u8]; LANES], mut hash: impl FnMut(&[__m256i], __m256i) -> R) -> R {
    let (rows, len) = match rows_in_place(keys) {
        Some(found) => found,
        None => rows_one_by_one(keys),
    };
    let over = |n: i32| _mm256_movemask_epi8(_mm256_cmpgt_epi32(len, _mm256_set1_epi32(n))) != 0;
    if !over(24) {
        hash(&keep_key_bytes(transpose::<6>(rows), len), len)
    } else if !over(32) {
        hash(&keep_key_bytes(transpose::<8>(rows), len), len)
    } else {
        let (first, rest) = (keep_key_bytes(transpose::<8>(rows), len), transposed_words::<8>(&eight_tails(keys)).0);
        let words: [__m256i; 16] = std::array::from_fn(|w| if w < 8 { first[w] } else { rest[w - 8] });
        hash(&words, len)
    }
}

/// Whether any lane of `len` (lengths of at most 65) is over `x`.
#[inline(always)]
fn any_over(len: Lanes, x: i32) -> bool {
    // SAFETY: only called from functions compiled for AVX2.
    len.iter().fold(0, |any, &len| any | unsafe { _mm256_movemask_epi8(_mm256_cmpgt_epi32(len, _mm256_set1_epi32(x))) }) != 0
}

/// Words 0..W (W = 6 or 8) of each of the 8 keys, zero past its end, as W vectors with key i
/// in lane i, and the keys' lengths in lanes, those over [`MAX_LANE_LEN`] as one more
/// (such a key is hashed again one by one; one more, so that the lanes can tell).
///
/// Each key's first 32 bytes are read as one vector ([`rows_in_place`], or where that may not
/// be read, [`rows_one_by_one`]), the 8 × 8 words are transposed, and the bytes past each key's
/// end are cleared in the transposed words, 8 keys to an instruction.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn transposed_words<const W: usize>(keys: &[&[u8]; LANES]) -> ([__m256i; W], __m256i) {
    let (rows, len) = match rows_in_place(keys) {
        Some(found) => found,
        None => rows_one_by_one(keys),
    };
    (keep_key_bytes(transpose(rows), len), len)
}

/// Whether `&[u8]` is laid out as (pointer, length), which [`rows_in_place`] reads 8 of as
/// vectors. Rust does not promise the layout of a slice reference; every compiler so far has
/// used this one, and the compiler folds this test to a constant.
#[inline(always)]
fn slices_are_pointer_then_length() -> bool {
    let bytes = [0u8; 3];
    let slice: &[u8] = &bytes[1..];
    // SAFETY: a slice reference is two words, whichever their order; reading a pointer as an
    // integer is defined.
    let words: [usize; 2] = unsafe { std::mem::transmute(slice) };
    words == [slice.as_ptr() as usize, slice.len()]
}

/// Each key's first 32 bytes read where it is, as a row, unmasked, and the keys' lengths
/// (over 64 as 65): the usual case, with its tests done 4 keys to an instruction. None where a key
/// is empty (its pointer may be dangling) or starts in the last 32 bytes of its page (the next
/// page may be unmapped): one vector in thirty of the filter benchmark's keys.
///
/// One by one, reading each key's length, capping it, testing its pointer and storing its
/// length took 16 instructions a key; here it takes about 5.
#[inline]
#[target_feature(enable = "avx2")]
fn rows_in_place(keys: &[&[u8]; LANES]) -> Option<([__m256i; LANES], __m256i)> {
    if !slices_are_pointer_then_length() {
        return None;
    }
    let at = keys.as_ptr() as *const __m256i;
    // SAFETY: the 8 slice references are 128 bytes at `at`: (pointer, length) pairs, two to a
    // vector (checked above); unaligned loads need no alignment.
    let pairs: [__m256i; 4] = std::array::from_fn(|i| unsafe { _mm256_loadu_si256(at.add(i)) });
    // Per 128-bit half, the pointers (or the lengths) of two pairs' vectors: keys 0, 2, 1, 3
    // (and 4, 6, 5, 7) as 64-bit lanes.
    let take = |x: __m256i, y: __m256i, lengths: bool| {
        let (x, y) = (_mm256_castsi256_pd(x), _mm256_castsi256_pd(y));
        _mm256_castpd_si256(if lengths { _mm256_unpackhi_pd(x, y) } else { _mm256_unpacklo_pd(x, y) })
    };
    let pointers = [take(pairs[0], pairs[1], false), take(pairs[2], pairs[3], false)];
    let lengths = [take(pairs[0], pairs[1], true), take(pairs[2], pairs[3], true)];
    // (pointer + 32) & 0xfe0 == 0 in the last 32 bytes of a page, as in [`read_within_page`].
    let at_page_end = |p: __m256i| _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_add_epi64(p, _mm256_set1_epi64x(32)), _mm256_set1_epi64x(4096 - 32)), _mm256_setzero_si256());
    let empty = |n: __m256i| _mm256_cmpeq_epi64(n, _mm256_setzero_si256());
    let refused = _mm256_or_si256(_mm256_or_si256(at_page_end(pointers[0]), at_page_end(pointers[1])), _mm256_or_si256(empty(lengths[0]), empty(lengths[1])));
    if _mm256_testz_si256(refused, refused) == 0 {
        return None;
    }
    // Lengths over 64 as 65 (signed compares: no slice is longer than isize::MAX), then the low
    // halves of the 64-bit lanes, in key order.
    let capped = lengths.map(|n| {
        let cap = _mm256_set1_epi64x(LEN_CAP as i64);
        _mm256_blendv_epi8(n, cap, _mm256_cmpgt_epi64(n, cap))
    });
    let low_halves = _mm256_castps_si256(_mm256_shuffle_ps::<0b10_00_10_00>(_mm256_castsi256_ps(capped[0]), _mm256_castsi256_ps(capped[1])));
    // Now keys 0, 2, 4, 6 | 1, 3, 5, 7.
    let len = _mm256_permutevar8x32_epi32(low_halves, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    // SAFETY: each key is not empty and its first byte is not in the last 32 bytes of its page
    // (tested above), so the 32 bytes there are in mapped memory; the bytes past the key are
    // cleared by `keep_key_bytes`.
    let rows = std::array::from_fn(|i| unsafe { read_32(keys[i].as_ptr()) });
    Some((rows, len))
}

/// [`rows_in_place`] for a vector that holds an empty key or one at a page's end: each key
/// read as a row on its own ([`read_within_page`], or a copy where that cannot read it), its
/// length stored and the lengths loaded as one. Out of line, so that the usual path saves no
/// registers for it.
#[cold]
#[inline(never)]
#[target_feature(enable = "avx2")]
fn rows_one_by_one(keys: &[&[u8]; LANES]) -> ([__m256i; LANES], __m256i) {
    let mut lens = [0u32; LANES];
    let mut rows = [_mm256_setzero_si256(); LANES];
    for i in 0..LANES {
        lens[i] = keys[i].len().min(LEN_CAP) as u32;
        rows[i] = read_row(keys[i]);
    }
    // SAFETY: `lens` is 32 bytes; an unaligned load needs no alignment.
    (rows, unsafe { _mm256_loadu_si256(lens.as_ptr() as *const __m256i) })
}

/// The first 32 bytes of `key` (fewer where it is shorter, then whatever follows them, which
/// the caller clears): [`read_within_page`], or where that cannot read them, [`load_padded`].
#[inline]
#[target_feature(enable = "avx2")]
fn read_row(key: &[u8]) -> __m256i {
    let n = key.len().min(32);
    match read_within_page(key, n) {
        Some(row) => row,
        None => load_padded(key, n),
    }
}

/// [`read_within_page`] for a key at the end of a page, about one in a hundred: out of line, so that
/// the registers of the usual path are not saved around a call to copy the bytes.
#[cold]
#[inline(never)]
#[target_feature(enable = "avx2")]
fn load_padded(key: &[u8], n: usize) -> __m256i {
    let mut padded = [0u8; 32];
    padded[..n].copy_from_slice(&key[..n]);
    // SAFETY: `padded` is 32 bytes; an unaligned load needs no alignment.
    unsafe { _mm256_loadu_si256(padded.as_ptr() as *const __m256i) }
}

/// The 32 bytes from `key`'s start, its first `n` ≤ 32 bytes and whatever follows them (which
/// the caller clears); None where they would reach into the next page, which may be unmapped.
/// No branch but the page's: an empty key reads [`KEEP`]'s zeros instead of its pointer, which
/// may be dangling.
#[inline]
#[target_feature(enable = "avx2")]
fn read_within_page(key: &[u8], n: usize) -> Option<__m256i> {
    debug_assert!(n <= key.len() && n <= 32);
    let ptr = if n == 0 { KEEP.0[32..].as_ptr() } else { key.as_ptr() };
    // Whether ptr is in the last 32 bytes of its page (the first of them too, which is
    // needless but harmless): one add and one test.
    if (ptr as usize).wrapping_add(32) & (4096 - 32) == 0 {
        return None;
    }
    // SAFETY: the 32 bytes at `ptr` are in the page of the key's first byte (or of KEEP's
    // zeros), which is mapped.
    Some(unsafe { read_32(ptr) })
}

/// The 32 bytes at `ptr`, read by an instruction of its own: a Rust read must stay inside the
/// key, and these 32 bytes may run past it.
///
/// # Safety
/// The 32 bytes at `ptr` must be mapped memory.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn read_32(ptr: *const u8) -> __m256i {
    let bytes: __m256i;
    // SAFETY: the caller's promise; the read has no other effect.
    unsafe {
        std::arch::asm!("vmovdqu {v}, ymmword ptr [{p}]", p = in(reg) ptr, v = out(ymm_reg) bytes, options(pure, readonly, nostack, preserves_flags));
    }
    bytes
}

/// 32 bytes of ones, then 32 of zeros: the 32 from offset 32 - n keep the first n bytes of a
/// vector. One load, where comparing n with each byte's index took four instructions a key.
/// Aligned, so that its zeros never end a page (an empty key reads them).
#[repr(align(64))]
struct Keep([u8; 64]);
static KEEP: Keep = {
    let mut keep = [0u8; 64];
    let mut i = 0;
    while i < 32 {
        keep[i] = 0xff;
        i += 1;
    }
    Keep(keep)
};

/// Words 0..W (W ≤ 8) of 8 rows of 8 words as W vectors, word w of row i in lane i of vector
/// w: the 8 × 8 word transpose of unpacks and 128-bit permutes (the words past W not made).
#[inline]
#[target_feature(enable = "avx2")]
fn transpose<const W: usize>(r: [__m256i; LANES]) -> [__m256i; W] {
    // Per 128-bit half: (words 0-1 | 4-5) and (2-3 | 6-7) of row pairs, then of row quads.
    let t: [__m256i; 8] = std::array::from_fn(|i| {
        let (x, y) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
        if i % 2 == 0 { _mm256_unpacklo_epi32(x, y) } else { _mm256_unpackhi_epi32(x, y) }
    });
    // u[4q + j]: words j (low half) and j + 4 (high half) of rows 4q..4q + 4.
    let u: [__m256i; 8] = std::array::from_fn(|i| {
        let (q, j) = (i / 4, i % 4);
        let (x, y) = (t[4 * q + j / 2], t[4 * q + j / 2 + 2]);
        if j % 2 == 0 { _mm256_unpacklo_epi64(x, y) } else { _mm256_unpackhi_epi64(x, y) }
    });
    // Word w < 4 is the low halves of u[w] and u[w + 4], word w ≥ 4 their high halves.
    std::array::from_fn(|w| {
        if w < 4 { _mm256_permute2x128_si256::<0x20>(u[w], u[w + 4]) } else { _mm256_permute2x128_si256::<0x31>(u[w - 4], u[w]) }
    })
}

/// `words` with the bytes at and past each lane's length `len` (at most 65) cleared: byte b of
/// word w is kept where 4w + b < len, each lane's length copied to its four bytes and compared
/// with those indexes, two instructions a word for 8 keys. (Shifting a lane of ones by the bytes
/// to clear took six: the compiler guards a variable shift of 32 or more.)
#[inline]
#[target_feature(enable = "avx2")]
fn keep_key_bytes<const W: usize>(words: [__m256i; W], len: __m256i) -> [__m256i; W] {
    let len_in_bytes = _mm256_shuffle_epi8(len, _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12));
    let mut first = 0;
    words.map(|word| {
        let index = _mm256_add_epi8(_mm256_set1_epi32(0x0302_0100), _mm256_set1_epi8(first));
        first += 4;
        _mm256_and_si256(word, _mm256_cmpgt_epi8(len_in_bytes, index))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the scalar hash: every length 0..=80 in every lane, groups of every size up to
    /// 64, keys ending at an unreadable page, long keys, and three seeds.
    #[test]
    fn equals_the_scalar_hash_for_every_length_lane_and_group_size() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        // SAFETY (both): the CPU has AVX2 (checked above).
        let checked = crate::hashing::lookup3_x16::tests::against_the_scalar((0..=17).chain([31, 33, 47, MAX_KEYS]), |keys, seed, out| unsafe { hashlittle2_wide(keys, seed, out) });
        assert!(checked > 15_000, "{checked} lanes checked");
        crate::hashing::lookup3_x16::tests::at_the_end_of_a_page(|group, out| unsafe { hashlittle2_wide(group, 3, out) });
        crate::hashing::lookup3_x16::tests::long_keys_against_the_scalar(|keys, seed, out| unsafe { hashlittle2_wide(keys, seed, out) });
    }

    /// Hadoop's k Jenkins hashes against the scalar chain, on long keys.
    #[test]
    fn hadoop_hashes_equal_the_scalar_chain_on_long_keys() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        // SAFETY: the CPU has AVX2 (checked above).
        crate::hashing::lookup3_x16::tests::hadoop_chain_on_long_keys(|keys, rows| unsafe { hadoop_hashes_wide(keys, rows) }, crate::hashing::lookup3::hash);
    }
}
