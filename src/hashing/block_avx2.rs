//! The blocked layout's membership test with AVX2: all (up to 7) in-block positions of a key are
//! tested at once, in eight 32-bit lanes, instead of one load, shift and mask each. A query is
//! short, and its instruction count decides how many cache misses the CPU keeps in flight across
//! consecutive queries; this test takes about 15 instructions where the scalar one takes 50.
//! (It took 26 when it masked each position to 9 bits, built the one straddling z's two halves
//! from both, and tested sign bits: callgrind counted 11 fewer per single-key query and 9 per
//! batched one without them, and batched queries took 8-20% less time in interleaved runs.)
//! Selected at run time; the scalar test in `filter.rs` is the reference (see the test below).

use std::arch::x86_64::*;

/// The largest k this test handles: the positions one remix holds.
pub const MAX_K: u32 = super::POSITIONS_PER_REMIX;

/// Whether the CPU has AVX2, and BMI2 for the kernel's scalar code (every CPU with AVX2 since
/// Haswell and Excavator has it; see [`super::block_avx512::available`]). std caches the answer.
#[inline(always)]
pub fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("bmi2")
}

/// The position each lane of [`test`] holds: positions 0-7 leave the extraction in this order.
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

/// [`ONES`]' row for k ≤ 7, which [`test_demanding`] takes: loaded once for a batch's tests.
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

/// [`test`], with the demand of its k made by [`demand`].
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
}
