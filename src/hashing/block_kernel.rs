//! Which code tests a key's bits in its block: the portable test, or the AVX2 or AVX-512 one,
//! chosen at run time by what the CPU has. They answer alike (tests in `filter.rs` and in each
//! kernel's module); they differ only in instructions per query.

use std::sync::OnceLock;

/// The environment variable that caps the kernel: `avx2` keeps the AVX-512 test off (on CPUs
/// that lower their clock for 512-bit instructions, say), `portable` both vector tests.
pub const KERNEL_VAR: &str = "BLOOMFLOW_KERNEL";

/// The fastest kernel [`BlockKernel::detect`] may choose, read from [`KERNEL_VAR`] once.
static CAP: OnceLock<BlockKernel> = OnceLock::new();

fn cap_from_env() -> BlockKernel {
    parse_cap(std::env::var(KERNEL_VAR).ok().as_deref()).unwrap_or_else(|warning| {
        eprintln!("bloomflow: {warning}");
        BlockKernel::Avx512
    })
}

/// The cap a value of [`KERNEL_VAR`] sets: none (the fastest) when unset or empty; a warning
/// for a name that is no kernel's. A warning, not an error: the variable tunes speed only, and
/// every kernel answers alike.
fn parse_cap(value: Option<&str>) -> Result<BlockKernel, String> {
    match value {
        None | Some("") => Ok(BlockKernel::Avx512),
        Some(name) => BlockKernel::from_name(name)
            .ok_or_else(|| format!("ignoring {KERNEL_VAR}={name:?}: expected avx512, avx2 or portable")),
    }
}

/// A blocked-layout membership test, in order of speed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
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

    /// The fastest kernel this CPU runs for k hashes, and no faster than the environment's
    /// [`KERNEL_VAR`] allows.
    pub fn detect(k: u32) -> Self {
        let cap = *CAP.get_or_init(cap_from_env);
        BlockKernel::ALL.into_iter().rev().find(|&kernel| kernel <= cap && kernel.runs(k)).unwrap_or(BlockKernel::Portable)
    }

    /// The kernel a name given to [`KERNEL_VAR`] (or printed by [`name`](Self::name)) stands for.
    pub fn from_name(name: &str) -> Option<Self> {
        BlockKernel::ALL.into_iter().find(|kernel| kernel.name() == name)
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

/// What the tests of every vector kernel check: on 200,000 random lines, from sparse to nearly
/// full, and every k in `ks`, `test` answers as the positions tested one by one do, and both
/// answers occur often.
#[cfg(all(test, target_arch = "x86_64"))]
pub(crate) fn check_against_scalar(ks: std::ops::RangeInclusive<u32>, test: impl Fn(&[u64; 8], u64, u32) -> bool) {
    let scalar = |line: &[u64; 8], z: u64, k: u32| {
        (0..k).all(|j| {
            let p = (z >> (9 * j)) & 511;
            line[(p >> 6) as usize] >> (p & 63) & 1 == 1
        })
    };
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (mut yes, mut no) = (0, 0);
    for round in 0..200_000 {
        let density = round % 4;
        let line: [u64; 8] = std::array::from_fn(|_| (0..=density).fold(0, |w, _| w | next()));
        let z = next();
        for k in ks.clone() {
            let want = scalar(&line, z, k);
            assert_eq!(test(&line, z, k), want, "line {line:x?} z {z:#x} k {k}");
            if want { yes += 1 } else { no += 1 }
        }
    }
    assert!(yes > 100_000 && no > 100_000, "both answers exercised: {yes} yes, {no} no");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_caps_the_kernel_by_name() {
        assert_eq!(parse_cap(None), Ok(BlockKernel::Avx512));
        assert_eq!(parse_cap(Some("")), Ok(BlockKernel::Avx512));
        for kernel in BlockKernel::ALL {
            assert_eq!(parse_cap(Some(kernel.name())), Ok(kernel));
        }
        let warning = parse_cap(Some("sse9")).unwrap_err();
        assert!(warning.contains("BLOOMFLOW_KERNEL=\"sse9\"") && warning.contains("expected avx512, avx2 or portable"), "{warning}");
    }

    #[test]
    fn kernels_are_ordered_by_speed_and_portable_always_runs() {
        assert!(BlockKernel::Portable < BlockKernel::Avx2 && BlockKernel::Avx2 < BlockKernel::Avx512);
        for k in [1, 7, 8, 32] {
            assert!(BlockKernel::Portable.runs(k));
        }
        // No vector kernel takes a k beyond one remix's positions.
        assert!(!BlockKernel::Avx2.runs(8) && !BlockKernel::Avx512.runs(8));
    }
}
