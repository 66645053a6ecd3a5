//! The blocked layout's membership test with AVX2: all (up to 7) in-block positions of a key are
//! tested at once, in eight 32-bit lanes, instead of one load, shift and mask each. A query is
//! short, and its instruction count decides how many cache misses the CPU keeps in flight across
//! consecutive queries; this test takes about 15 instructions where the scalar one takes 50.
//! (It took 26 when it masked each position to 9 bits, built the one straddling z's two halves
//! from both, and tested sign bits: callgrind counted 11 fewer per single-key query and 9 per
//! batched one without them, and batched queries took 8-20% less time in interleaved runs.)
//! Selected at run time; the scalar test in `filter.rs` is the reference (see the test below).
//! A batch's probes (block and remix) are also computed here, four keys to a vector ([`probes`]).

use super::{BlockProbe, Pairs, GROUP};
use std::arch::x86_64::*;

/// The largest k this test handles: the positions one remix holds.
pub const MAX_K: u32 = super::POSITIONS_PER_REMIX;

/// Whether the CPU has AVX2, and BMI2 for the kernel's scalar code (every CPU with AVX2 since
/// Haswell and Excavator has it; see [`super::block_avx512::available`]). std caches the answer.
#[inline(always)]
pub fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("bmi2")
}

/// The position each lane of [`test()`] holds: positions 0-7 leave the extraction in this order.
const LANE_POSITION: [u32; 8] = [0, 1, 4, 5, 2, 3, 6, 7];

/// Per k, a 1 in the lanes whose position is below k, 0 in the rest: a lane's 1 is shifted
/// to its position's bit to make the mask the line must cover, and a 0 makes no demand.
static ONES: [[u32; 8]; 8] = {
    let mut table = [[0u32; 8]; 8];
    let mut k = 0;
    while k < 8 {
        let mut lane = 0;
        while lane < 8 {
            table[k][lane] = (LANE_POSITION[lane] < k as u32) as u32;
            lane += 1;
        }
        k += 1;
    }
    table
};

/// Whether all k ≤ 7 positions of remixed hash `z` are set in `line`. Position j is bits
/// 9j..9j+9 of z: bit (p & 31) of the line's 32-bit word p >> 5.
///
/// # Safety
/// The CPU must have AVX2 ([`available`]).
#[inline]
#[target_feature(enable = "avx2")]
pub unsafe fn test(line: &[u64; 8], z: u64, k: u32) -> bool {
    test_demanding(line, z, demand(k))
}

/// `ONES`' row for k ≤ 7, which [`test_demanding`] takes: loaded once for a batch's tests.
///
/// # Safety
/// The CPU must have AVX2 ([`available`]).
#[inline]
#[target_feature(enable = "avx2")]
pub unsafe fn demand(k: u32) -> __m256i {
    debug_assert!(k <= MAX_K);
    // SAFETY: a row of ONES is 32 bytes; an unaligned load needs no alignment.
    unsafe { _mm256_loadu_si256(ONES[k as usize].as_ptr() as *const __m256i) }
}

/// [`test()`], with the demand of its k made by [`demand`].
///
/// # Safety
/// The CPU must have AVX2 ([`available`]).
#[inline]
#[target_feature(enable = "avx2")]
pub unsafe fn test_demanding(line: &[u64; 8], z: u64, ones: __m256i) -> bool {
    // z shifted down to each position in four 64-bit lanes twice; the low 32 bits of each lane
    // then gathered into eight lanes in LANE_POSITION's order. Bits above a position's 9 are
    // left in place: every step below reads only the bits it needs.
    let zz = _mm256_set1_epi64x(z as i64);
    let first_four = _mm256_srlv_epi64(zz, _mm256_setr_epi64x(0, 9, 18, 27));
    let last_four = _mm256_srlv_epi64(zz, _mm256_setr_epi64x(36, 45, 54, 63));
    let pos = _mm256_castps_si256(_mm256_shuffle_ps::<0b10_00_10_00>(_mm256_castsi256_ps(first_four), _mm256_castsi256_ps(last_four)));
    // The 32-bit word of each position: from the line's first or second half (vpermd reads
    // the index's low 3 bits, bits 5-7 of the position), chosen by bit 8 of the position moved
    // to the sign bit (which is all vblendvps reads).
    let word = _mm256_srli_epi32::<5>(pos);
    // SAFETY (both loads): `line` is 64 bytes; unaligned loads need no alignment.
    let first = _mm256_loadu_si256(line.as_ptr() as *const __m256i);
    let second = _mm256_loadu_si256(line.as_ptr().add(4) as *const __m256i);
    let from_first = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(first, word));
    let from_second = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(second, word));
    let in_second = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(pos));
    let words = _mm256_castps_si256(_mm256_blendv_ps(from_first, from_second, in_second));
    // Each tested position's bit, and none in the lanes at and above k; vptest's carry says
    // whether the words cover them all.
    let wanted = _mm256_sllv_epi32(ones, _mm256_and_si256(pos, _mm256_set1_epi32(31)));
    _mm256_testc_si256(words, wanted) == 1
}

/// The probes of a group's keys whose hash pairs are `pairs` ([`BlockProbe::new`] for each
/// (`pairs.c[i]`, `pairs.b[i]`)), four to a vector, in a filter of `blocks` < 2^32 blocks. One by
/// one, a probe took 21 instructions (its block, the remix's two 64-bit multiplies, shifts and
/// moves); four to a vector, about 8 each.
///
/// The block is the high half of x · blocks, x = c << 32 | b, from two 32 × 32-bit multiplies
/// (exact for blocks < 2^32: x_hi · blocks + (x_lo · blocks >> 32) < 2^64), as in
/// [`super::block_avx512::probes`]. AVX2 has no 64-bit lane multiply: the remix's are made of
/// three 32 × 32-bit ones each (`mul64`).
///
/// # Safety
/// The CPU must have AVX2 ([`available`]).
#[inline]
#[target_feature(enable = "avx2")]
pub unsafe fn probes(pairs: &Pairs, blocks: u64, out: &mut [BlockProbe; GROUP]) {
    debug_assert!(blocks < 1 << 32);
    // In every 32-bit lane, though vpmuludq reads only the low one of each pair: with zero
    // high halves the compiler saw 64-bit multiplies and made each of three.
    let n = _mm256_set1_epi32(blocks as i32);
    for v in 0..GROUP / 8 {
        // SAFETY: lanes 8v..8v + 8 are inside both arrays; unaligned loads need no alignment.
        let (c, b) = unsafe { (_mm256_loadu_si256(pairs.c.as_ptr().add(8 * v) as *const _), _mm256_loadu_si256(pairs.b.as_ptr().add(8 * v) as *const _)) };
        // x as (b, c) dword pairs, b low. The unpacks work within 128-bit halves: the first
        // holds keys 0, 1, 4, 5 of the eight, the second keys 2, 3, 6, 7.
        for (x, first) in [(_mm256_unpacklo_epi32(b, c), 0), (_mm256_unpackhi_epi32(b, c), 2)] {
            let low_product = _mm256_srli_epi64::<32>(_mm256_mul_epu32(x, n));
            let block = _mm256_srli_epi64::<32>(_mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64::<32>(x), n), low_product));
            let mut z = _mm256_xor_si256(x, _mm256_srli_epi64::<30>(x));
            z = mul64(z, 0xBF58_476D_1CE4_E5B9);
            z = _mm256_xor_si256(z, _mm256_srli_epi64::<27>(z));
            z = mul64(z, 0x94D0_49BB_1331_11EB);
            z = _mm256_xor_si256(z, _mm256_srli_epi64::<31>(z));
            // (block, z) of the half's first key in each 128-bit lane, then of its second.
            let (even, odd) = (_mm256_unpacklo_epi64(block, z), _mm256_unpackhi_epi64(block, z));
            let at = out[8 * v + first..].as_mut_ptr() as *mut __m256i;
            // SAFETY: `BlockProbe` is `repr(C)` (block: usize, z: u64), 16 bytes: keys `first`
            // and `first + 1` are the 32 bytes at `at`, keys `first + 4` and `first + 5` those
            // 64 bytes on, all inside `out`; unaligned stores need no alignment.
            unsafe {
                _mm256_storeu_si256(at, _mm256_permute2x128_si256::<0x20>(even, odd));
                _mm256_storeu_si256(at.add(2), _mm256_permute2x128_si256::<0x31>(even, odd));
            }
        }
    }
}

/// Each 64-bit lane of `x` times `k`, modulo 2^64: x_lo · k_lo + ((x_hi · k_lo + x_lo · k_hi) << 32),
/// whose last term drops the x_hi · k_hi that overflows.
#[inline]
#[target_feature(enable = "avx2")]
fn mul64(x: __m256i, k: u64) -> __m256i {
    // vpmuludq reads each lane's low 32 bits: the full constant stands for k_lo.
    let (k_lo, k_hi) = (_mm256_set1_epi64x(k as i64), _mm256_set1_epi64x((k >> 32) as i64));
    let cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64::<32>(x), k_lo), _mm256_mul_epu32(x, k_hi));
    _mm256_add_epi64(_mm256_mul_epu32(x, k_lo), _mm256_slli_epi64::<32>(cross))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_the_scalar_test_for_every_k() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        // SAFETY: the CPU has AVX2 (checked above).
        crate::hashing::block_kernel::check_against_scalar(0..=MAX_K, |line, z, k| unsafe { test(line, z, k) });
    }

    /// The vector probes equal `BlockProbe::new`'s for random pairs, from one block to 2^32 − 1.
    #[test]
    fn probes_equal_the_scalar_probes() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        // SAFETY: the CPU has the features (checked above).
        crate::hashing::block_kernel::check_probes(|pairs, blocks, out| unsafe { probes(pairs, blocks, out) });
    }
}
