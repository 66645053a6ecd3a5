//! Which code tests a key's bits in its block: the portable test, or the AVX2 or AVX-512 one,
//! chosen at run time by what the CPU has. They answer alike (tests in `filter.rs` and in each
//! kernel's module); they differ only in instructions per query. A filter's kernel also decides
//! whether Hadoop's and Spark's batches hash their keys in AVX2 lanes (a vector kernel) or one
//! at a time (the portable one); the scan's AVX2 code asks the same cap ([`BlockKernel::allowed`]).

use std::sync::OnceLock;

/// The environment variable that caps the kernel: `avx2` keeps the AVX-512 test off (on CPUs
/// that lower their clock for 512-bit instructions, say), `portable` every vector path.
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
    /// x86-64 with AVX2.
    Avx2,
    /// x86-64 with AVX-512 F, BW, VL and DQ; batches are also hashed and probed in vectors.
    Avx512,
}

impl BlockKernel {
    /// Every kernel, fastest last.
    pub const ALL: [BlockKernel; 3] = [BlockKernel::Portable, BlockKernel::Avx2, BlockKernel::Avx512];

    /// The fastest kernel this CPU runs, and no faster than the environment's [`KERNEL_VAR`]
    /// allows.
    pub fn detect() -> Self {
        BlockKernel::ALL.into_iter().rev().find(|&kernel| kernel.allowed() && kernel.runs()).unwrap_or(BlockKernel::Portable)
    }

    /// Whether the environment's [`KERNEL_VAR`] allows code of this kernel's instruction set,
    /// whether or not the CPU has it: the scan's AVX2 code asks, so that `portable` turns off
    /// every vector path.
    #[inline]
    pub fn allowed(self) -> bool {
        self <= *CAP.get_or_init(cap_from_env)
    }

    /// The kernel a name given to [`KERNEL_VAR`] (or printed by [`name`](Self::name)) stands for.
    pub fn from_name(name: &str) -> Option<Self> {
        BlockKernel::ALL.into_iter().find(|kernel| kernel.name() == name)
    }

    /// Whether this CPU runs this kernel. Every kernel takes any number of hashes: the vector
    /// tests take a remix's 7 positions at a time.
    #[inline(always)]
    pub fn runs(self) -> bool {
        match self {
            BlockKernel::Portable => true,
            #[cfg(target_arch = "x86_64")]
            BlockKernel::Avx2 => super::block_avx2::available(),
            #[cfg(target_arch = "x86_64")]
            BlockKernel::Avx512 => super::block_avx512::available(),
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

/// `test` of the (up to 7) positions one remix holds, extended to any k: each run of 7 positions
/// comes from its own remix, remix(z + i) for the run starting at position i, as
/// [`BlockBits`](super::BlockBits) draws them (z is the probe's first remix).
#[inline(always)]
pub(crate) fn test_runs(line: &[u64; 8], z: u64, k: u32, test: impl Fn(&[u64; 8], u64, u32) -> bool) -> bool {
    const RUN: u32 = super::POSITIONS_PER_REMIX;
    if k <= RUN {
        return test(line, z, k);
    }
    let mut all = test(line, z, RUN);
    for start in (RUN..k).step_by(RUN as usize) {
        all &= test(line, super::remix(z.wrapping_add(start as u64)), (k - start).min(RUN));
    }
    all
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
    let mut rng = crate::xorshift::XorShift::new(0x9E37_79B9_7F4A_7C15);
    let mut next = || rng.next();
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

/// What the tests of every vector kernel's `probes` check: for random hash pairs, in filters
/// from one block to 2^32 − 1, `probes` writes `BlockProbe::new`'s probe for every pair.
#[cfg(all(test, target_arch = "x86_64"))]
pub(crate) fn check_probes(probes: impl Fn(&super::Pairs, u64, &mut [super::BlockProbe; super::GROUP])) {
    use super::{BlockProbe, Pairs, GROUP};
    let mut rng = crate::xorshift::XorShift::new(0x2545_F491_4F6C_DD1D);
    let mut next = || rng.next();
    for blocks in [1, 2, 3, 1000, 195_313, 1 << 20, (1 << 31) + 7, u32::MAX as u64] {
        for _ in 0..200 {
            let mut pairs = Pairs::default();
            for i in 0..GROUP {
                (pairs.c[i], pairs.b[i]) = (next() as u32, next() as u32);
            }
            let mut out = [BlockProbe::default(); GROUP];
            probes(&pairs, blocks, &mut out);
            for (i, got) in out.iter().enumerate() {
                let want = BlockProbe::new(pairs.c[i], pairs.b[i], blocks);
                assert_eq!((got.block, got.remixed()), (want.block, want.remixed()), "pair {i}, {blocks} blocks");
            }
        }
    }
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
        assert!(BlockKernel::Portable.runs());
    }

    /// `test_runs` of a 7-position test answers as the positions tested one by one do, for k
    /// up to 32 (five remixes).
    #[test]
    fn test_runs_extends_a_seven_position_test_to_every_k() {
        use crate::hashing::BlockProbe;
        let seven = |line: &[u64; 8], z: u64, k: u32| {
            assert!(k <= 7, "a run of {k} positions");
            (0..k).all(|j| {
                let p = (z >> (9 * j)) & 511;
                line[(p >> 6) as usize] >> (p & 63) & 1 == 1
            })
        };
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let (mut yes, mut no) = (0, 0);
        for round in 0..20_000u64 {
            x = crate::hashing::remix(x.wrapping_add(round));
            // Dense lines (about 15/16 of the bits set), so that long runs of positions pass.
            let line: [u64; 8] = std::array::from_fn(|i| {
                let w = |s: u64| crate::hashing::remix(x ^ (i as u64) << 8 ^ s);
                w(1) | w(2) | w(3) | w(4)
            });
            let probe = BlockProbe::new((x >> 32) as u32, x as u32, 1);
            for k in 1..=32 {
                let want = probe.bits(k).all(|p| line[(p >> 6) as usize] >> (p & 63) & 1 == 1);
                assert_eq!(test_runs(&line, probe.remixed(), k, seven), want, "k {k}");
                if want { yes += 1 } else { no += 1 }
            }
        }
        assert!(yes > 10_000 && no > 10_000, "both answers exercised: {yes} yes, {no} no");
    }
}
