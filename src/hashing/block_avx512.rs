//! The blocked layout's membership test with AVX-512: a 512-bit register holds a whole 64-byte
//! line, so all (up to 7) in-block positions are tested with one permute, one rotate and one
//! masked test — 6 vector instructions where the AVX2 test takes about 20 (it must pick words
//! out of two 256-bit halves) and the scalar one about 50. Fewer instructions per query let the
//! CPU keep more queries' cache misses in flight. Selected at run time; the scalar test in
//! `filter.rs` is the reference (see the test below).

use super::lookup3_x16::MAX_KEYS;
use super::Pairs;
use super::BlockProbe;
use std::arch::x86_64::*;

/// The largest k this test handles: the positions one remix holds.
pub const MAX_K: u32 = super::POSITIONS_PER_REMIX;

/// Whether the CPU has AVX-512F, the BW and VL extensions the kernel's batched hash needs
/// ([`super::lookup3_x16`]), DQ for [`probes`], and BMI2, whose three-operand rotates and
/// shifts (`rorx`, `shrx`) take lookup3's scalar rounds in the single-key query from two
/// instructions to one (every AVX-512 CPU since 2017 has all five). std caches the answer.
#[inline(always)]
pub fn available() -> bool {
    super::lookup3_x16::available() && std::arch::is_x86_feature_detected!("avx512dq") && std::arch::is_x86_feature_detected!("bmi2")
}

/// Whether all k ≤ 7 positions of remixed hash `z` are set in `line`. Position j is bits
/// 9j..9j+9 of z: bit (p & 63) of the line's 64-bit word p >> 6.
///
/// Lane j holds s = z >> 9j. Its bits 6..8 are the word index, which is all the permute reads of
/// an index; its bits 0..5 are the bit, which is all a rotate reads of a count. So rotating the
/// gathered word right by s brings the tested bit to bit 0, without masking either field.
///
/// # Safety
/// The CPU must have AVX-512F ([`available`]).
#[inline]
#[target_feature(enable = "avx512f")]
pub unsafe fn test(line: &[u64; 8], z: u64, k: u32) -> bool {
    debug_assert!((1..=MAX_K).contains(&k));
    let s = _mm512_srlv_epi64(_mm512_set1_epi64(z as i64), _mm512_setr_epi64(0, 9, 18, 27, 36, 45, 54, 63));
    // SAFETY: `line` is 64 bytes; an unaligned load needs no alignment.
    let words = _mm512_permutexvar_epi64(_mm512_srli_epi64::<6>(s), unsafe { _mm512_loadu_si512(line.as_ptr() as *const _) });
    let tested = _mm512_rorv_epi64(words, s);
    // Lanes 0..k whose bit 0 is clear: none, when the key may be present.
    let lanes = ((1u32 << k) - 1) as __mmask8;
    _mm512_mask_testn_epi64_mask(lanes, tested, _mm512_set1_epi64(1)) == 0
}

/// The probes of up to 64 keys whose hash pairs are `pairs` ([`BlockProbe::new`] for each
/// (`pairs.c[i]`, `pairs.b[i]`)), eight to a vector, in a filter of `blocks` < 2^32 blocks.
///
/// The block is the high half of x · blocks, x = c << 32 | b, from two 32 × 32-bit multiplies
/// (exact for blocks < 2^32: x_hi · blocks + (x_lo · blocks >> 32) < 2^64); the remix is
/// splitmix64's, with 64-bit lane multiplies (AVX-512DQ).
///
/// # Safety
/// The CPU must have AVX-512F and DQ.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
pub fn probes(pairs: &Pairs, blocks: u64, out: &mut [BlockProbe; MAX_KEYS]) {
    debug_assert!(blocks < 1 << 32);
    let n = _mm512_set1_epi64(blocks as i64);
    // x of keys 0..8 and 8..16 of a vector: (b, c) dword pairs, b low.
    let first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    let second = _mm512_add_epi32(first, _mm512_set1_epi32(8));
    // (block, z) pairs of lanes 0..4 and 4..8.
    let (low, high) = (_mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11), _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15));
    for v in 0..MAX_KEYS / 16 {
        // SAFETY: lanes 16v..16v + 16 are inside both arrays.
        let (c, b) = unsafe {
            (_mm512_loadu_si512(pairs.c.as_ptr().add(16 * v) as *const _), _mm512_loadu_si512(pairs.b.as_ptr().add(16 * v) as *const _))
        };
        for (half, idx) in [first, second].into_iter().enumerate() {
            let x = _mm512_permutex2var_epi32(b, idx, c);
            let low_product = _mm512_srli_epi64::<32>(_mm512_mul_epu32(x, n));
            let block = _mm512_srli_epi64::<32>(_mm512_add_epi64(_mm512_mul_epu32(_mm512_srli_epi64::<32>(x), n), low_product));
            let mut z = _mm512_xor_si512(x, _mm512_srli_epi64::<30>(x));
            z = _mm512_mullo_epi64(z, _mm512_set1_epi64(0xBF58_476D_1CE4_E5B9_u64 as i64));
            z = _mm512_xor_si512(z, _mm512_srli_epi64::<27>(z));
            z = _mm512_mullo_epi64(z, _mm512_set1_epi64(0x94D0_49BB_1331_11EB_u64 as i64));
            z = _mm512_xor_si512(z, _mm512_srli_epi64::<31>(z));
            let at = out[16 * v + 8 * half..].as_mut_ptr() as *mut __m512i;
            // SAFETY: `BlockProbe` is `repr(C)` (block: usize, z: u64), 16 bytes; the eight
            // probes at `at` are inside `out`, and unaligned stores need no alignment.
            unsafe {
                _mm512_storeu_si512(at as *mut _, _mm512_permutex2var_epi64(block, low, z));
                _mm512_storeu_si512(at.add(1) as *mut _, _mm512_permutex2var_epi64(block, high, z));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_the_scalar_test_for_every_k() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX-512F");
            return;
        }
        // SAFETY: the CPU has AVX-512F (checked above).
        crate::hashing::block_kernel::check_against_scalar(1..=MAX_K, |line, z, k| unsafe { test(line, z, k) });
    }

    /// The vector probes equal `BlockProbe::new`'s for random pairs, from one block to 2^32 − 1.
    #[test]
    fn probes_equal_the_scalar_probes() {
        if !(available() && std::arch::is_x86_feature_detected!("avx512dq")) {
            eprintln!("skipped: this CPU has no AVX-512F/BW/VL/DQ");
            return;
        }
        // SAFETY: the CPU has the features (checked above).
        crate::hashing::block_kernel::check_probes(|pairs, blocks, out| unsafe { probes(pairs, blocks, out) });
    }
}
