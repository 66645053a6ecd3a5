//! The blocked layout's membership test with AVX2: all (up to 7) in-block positions of a key are
//! tested at once, in eight 32-bit lanes, instead of one load, shift and mask each. A query is
//! short, and its instruction count decides how many cache misses the CPU keeps in flight across
//! consecutive queries; this test takes about 20 instructions where the scalar one takes 50.
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

/// Sign bits set in the lanes at and above k, which then pass whatever they hold.
static PASS: [[i32; 8]; 8] = {
    let mut table = [[0i32; 8]; 8];
    let mut k = 0;
    while k < 8 {
        let mut lane = k;
        while lane < 8 {
            table[k][lane] = i32::MIN;
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
    debug_assert!(k <= MAX_K);
    let (lo, hi) = (z as u32 as i32, (z >> 32) as u32 as i32);
    // Lanes 0-2 and 4-6 shift one half of z down; lane 3 straddles the halves (bits 27..36).
    let halves = _mm256_setr_epi32(lo, lo, lo, lo, hi, hi, hi, hi);
    let down = _mm256_srlv_epi32(halves, _mm256_setr_epi32(0, 9, 18, 27, 4, 13, 22, 31));
    let up = _mm256_sllv_epi32(_mm256_set1_epi32(hi), _mm256_setr_epi32(32, 32, 32, 5, 32, 32, 32, 32));
    let pos = _mm256_and_si256(_mm256_or_si256(down, up), _mm256_set1_epi32(511));
    // The 32-bit word of each position: from the line's first or second half (vpermd reads
    // the index's low 3 bits), chosen by bit 8 of the position moved to the sign bit.
    let word = _mm256_srli_epi32::<5>(pos);
    // SAFETY (both loads): `line` is 64 bytes; unaligned loads need no alignment.
    let first = _mm256_loadu_si256(line.as_ptr() as *const __m256i);
    let second = _mm256_loadu_si256(line.as_ptr().add(4) as *const __m256i);
    let from_first = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(first, word));
    let from_second = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(second, word));
    let in_second = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(pos));
    let words = _mm256_castps_si256(_mm256_blendv_ps(from_first, from_second, in_second));
    // Each tested bit shifted up to the sign bit: by 31 - (pos & 31).
    let tested = _mm256_sllv_epi32(words, _mm256_andnot_si256(pos, _mm256_set1_epi32(31)));
    let pass = _mm256_loadu_si256(PASS[k as usize].as_ptr() as *const __m256i);
    _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_or_si256(tested, pass))) == 0xFF
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
