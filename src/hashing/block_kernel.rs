//! Which code tests a key's bits in its block: the portable test, or the AVX2 or AVX-512 one,
//! chosen at run time by what the CPU has. They answer alike (tests in `filter.rs` and in each
//! kernel's module); they differ only in instructions per query.

/// A blocked-layout membership test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKernel {
    /// Plain Rust, any CPU and any k: the reference.
    Portable,
    /// x86-64 with AVX2, k ≤ 7.
    Avx2,
    /// x86-64 with AVX-512F, k ≤ 7.
    Avx512,
}

impl BlockKernel {
    /// Every kernel, fastest last.
    pub const ALL: [BlockKernel; 3] = [BlockKernel::Portable, BlockKernel::Avx2, BlockKernel::Avx512];

    /// The fastest kernel this CPU runs for k hashes.
    #[inline(always)]
    pub fn detect(k: u32) -> Self {
        if BlockKernel::Avx512.runs(k) {
            BlockKernel::Avx512
        } else if BlockKernel::Avx2.runs(k) {
            BlockKernel::Avx2
        } else {
            BlockKernel::Portable
        }
    }

    /// Whether this CPU runs this kernel for k hashes (the vector tests hold one remix's
    /// positions, so k ≤ 7).
    #[inline(always)]
    pub fn runs(self, k: u32) -> bool {
        match self {
            BlockKernel::Portable => true,
            #[cfg(target_arch = "x86_64")]
            BlockKernel::Avx2 => k <= super::block_avx2::MAX_K && super::block_avx2::available(),
            #[cfg(target_arch = "x86_64")]
            BlockKernel::Avx512 => k <= super::block_avx512::MAX_K && super::block_avx512::available(),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The name `info` and the benchmarks print.
    pub fn name(self) -> &'static str {
        match self {
            BlockKernel::Portable => "portable",
            BlockKernel::Avx2 => "avx2",
            BlockKernel::Avx512 => "avx512",
        }
    }
}
