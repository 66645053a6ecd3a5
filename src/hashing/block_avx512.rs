//! The blocked layout's membership test with AVX-512: a 512-bit register holds a whole 64-byte
//! line, so all (up to 7) in-block positions are tested with one permute, one rotate and one
//! masked test — 6 vector instructions where the AVX2 test takes about 20 (it must pick words
//! out of two 256-bit halves) and the scalar one about 50. Fewer instructions per query let the
//! CPU keep more queries' cache misses in flight. Selected at run time; the scalar test in
//! `filter.rs` is the reference (see the test below).

use std::arch::x86_64::*;

/// The largest k this test handles: the positions one remix holds.
pub const MAX_K: u32 = super::POSITIONS_PER_REMIX;

/// Whether the CPU has AVX-512F, and the BW and VL extensions the kernel's batched hash needs
/// ([`super::lookup3_x16`]; every AVX-512 CPU since 2017 has all three). std caches the answer.
#[inline(always)]
pub fn available() -> bool {
    super::lookup3_x16::available()
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
}
