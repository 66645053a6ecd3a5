//! Hashing schemes: how a key's bytes become k bit positions. The scheme is part of a filter's
//! identity: bloomflow's native one, and Hadoop's and Spark's, reproduced bit for bit so that
//! their filter files can be read, written and merged (see ../shared/interop/README.md).

#[cfg(target_arch = "x86_64")]
pub mod block_avx2;
#[cfg(target_arch = "x86_64")]
pub mod block_avx512;
pub mod block_kernel;
pub mod lookup3;
#[cfg(target_arch = "x86_64")]
mod lookup3_lanes;
#[cfg(target_arch = "x86_64")]
pub mod lookup3_x16;
#[cfg(target_arch = "x86_64")]
pub mod lookup3_x8;
pub mod hadoop_murmur;
#[cfg(target_arch = "x86_64")]
pub mod hadoop_murmur_x8;
#[cfg(target_arch = "x86_64")]
pub mod hadoop_rows;
pub mod native;
pub mod spark_murmur3;
#[cfg(target_arch = "x86_64")]
pub mod spark_murmur3_x8;

pub use block_kernel::BlockKernel;
pub use native::{mulshift, native_hash, NativePositions};
use serde::{Deserialize, Serialize};

/// The hash function of a Hadoop filter (`Hash.JENKINS_HASH` = 0, `Hash.MURMUR_HASH` = 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HadoopHash {
    Jenkins,
    Murmur,
}

impl HadoopHash {
    /// Hadoop's `Hash.hash(bytes, len, seed)`.
    #[inline]
    pub fn hash(self, key: &[u8], seed: u32) -> u32 {
        match self {
            HadoopHash::Jenkins => lookup3::hash(key, seed),
            HadoopHash::Murmur => hadoop_murmur::hash(key, seed),
        }
    }

    /// The type byte of Hadoop's file header.
    pub fn type_code(self) -> u8 {
        match self {
            HadoopHash::Jenkins => 0,
            HadoopHash::Murmur => 1,
        }
    }
}

/// The hashing scheme of a filter: part of its identity, since it decides which bits a key sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Scheme {
    /// bloomflow's own: Jenkins lookup2 twice, enhanced double hashing, multiply-shift.
    Native,
    /// bloomflow's faster variant: Jenkins lookup3 `hashlittle2` once (64 bits in one pass),
    /// then the same enhanced double hashing and multiply-shift.
    NativeLookup3,
    /// `org.apache.hadoop.util.bloom`: seed-chained hashes, `abs(h % m)`.
    Hadoop(HadoopHash),
    /// `org.apache.spark.util.sketch` V1: Murmur3 h1, h2; `h1 + i·h2` in 32-bit arithmetic.
    SparkV1,
    /// Spark V2 (the default from Spark 4.1): seeded Murmur3; `h1·(2^31−1) + i·h2` in 64 bits.
    SparkV2,
}

impl std::fmt::Display for Scheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Scheme::Native => "native-lookup2-edh",
            Scheme::NativeLookup3 => "native-lookup3-edh",
            Scheme::Hadoop(HadoopHash::Jenkins) => "hadoop-jenkins",
            Scheme::Hadoop(HadoopHash::Murmur) => "hadoop-murmur",
            Scheme::SparkV1 => "spark-v1-murmur3",
            Scheme::SparkV2 => "spark-v2-murmur3",
        })
    }
}

impl Scheme {
    /// The most hash functions a filter of this scheme may have: 32 for native filters (the
    /// sizing formula's clamp); more for foreign files, whose writers allow it, but bounded so
    /// that a hostile header cannot make every query loop for ever.
    pub fn max_hashes(self) -> u32 {
        match self {
            Scheme::Native | Scheme::NativeLookup3 => 32,
            _ => 1024,
        }
    }

    /// The most bits a filter of this scheme can have: Hadoop stores m as an int; Spark stores
    /// the word count as an int.
    pub fn max_bits(self) -> u64 {
        match self {
            Scheme::Native | Scheme::NativeLookup3 => crate::params::MAX_BITS,
            Scheme::Hadoop(_) => i32::MAX as u64,
            Scheme::SparkV1 | Scheme::SparkV2 => i32::MAX as u64 * 64,
        }
    }

    /// bloomflow's own schemes, which may use the blocked layout.
    pub fn is_native(self) -> bool {
        matches!(self, Scheme::Native | Scheme::NativeLookup3)
    }

    /// The two 32-bit hashes a native scheme derives every position from.
    #[inline(always)]
    pub fn native_pair(self, key: &[u8], seed: u32) -> (u32, u32) {
        match self {
            Scheme::NativeLookup3 => Lookup3Pair::pair(key, seed),
            _ => Lookup2Pair::pair(key, seed),
        }
    }

    /// Whether keys of `key_type` can be in a filter of this scheme: not a long key (Spark's
    /// `putLong`, 8 little-endian bytes) in a Hadoop filter, since Hadoop has no such key (its
    /// `LongWritable` writes itself big-endian), so every such key would be answered "no".
    /// Nor a Hadoop `Writable`'s serialization in a Spark filter, which hashes strings, binaries
    /// and longs only. Refused with the reason (the caller names the file).
    pub fn check_key_type(self, key_type: crate::records::KeyType) -> crate::Result<()> {
        if key_type == crate::records::KeyType::Long && matches!(self, Scheme::Hadoop(_)) {
            return Err(crate::Error::invalid(
                "--key-type",
                format!("long hashes keys as Spark's putLong (8 little-endian bytes), which no Hadoop filter holds, and this is a {self} filter"),
            ));
        }
        if key_type.is_writable() && matches!(self, Scheme::SparkV1 | Scheme::SparkV2) {
            return Err(crate::Error::invalid(
                "--key-type",
                format!("{key_type} hashes keys as a Hadoop Writable serializes them, which no Spark filter holds, and this is a {self} filter"),
            ));
        }
        Ok(())
    }

    /// Hadoop refuses empty keys (`key length must be > 0`).
    pub fn refuses_empty_keys(self) -> bool {
        matches!(self, Scheme::Hadoop(_))
    }

    /// The k positions of `key` in a filter of `m` bits seeded with `seed`.
    #[inline]
    pub fn positions(self, key: &[u8], seed: u32, m: u64, k: u32) -> Positions<'_> {
        match self {
            Scheme::Native | Scheme::NativeLookup3 => {
                let (a, b) = self.native_pair(key, seed);
                Positions::Native(NativePositions::from_hashes(a, b, m, k))
            }
            Scheme::Hadoop(hash) => Positions::Hadoop { key, hash, h: 0, i: 0, k, m },
            Scheme::SparkV1 | Scheme::SparkV2 => {
                let h1 = spark_murmur3::hash_bytes(key, self.spark_seed(seed).unwrap_or_default());
                let h2 = spark_murmur3::hash_bytes(key, h1);
                Positions::spark(self == Scheme::SparkV2, h1, h2, k, m)
            }
        }
    }

    /// The seed of a Spark filter's first hash (h1): V1 seeds it with 0, V2 with the filter's
    /// seed. None for the other schemes.
    pub fn spark_seed(self, seed: u32) -> Option<u32> {
        match self {
            Scheme::SparkV1 => Some(0),
            Scheme::SparkV2 => Some(seed),
            _ => None,
        }
    }
}

/// Keys hashed and probed together by the blocked layout's batched operations.
pub const GROUP: usize = 64;

/// Whether Hadoop's and Spark's batches hash their keys in AVX2 lanes under `kernel`: where it
/// is a vector kernel and the CPU has AVX2. So `BLOOMFLOW_KERNEL=portable` turns off every
/// vector path, and a test can run the one-by-one path on any CPU.
#[cfg(target_arch = "x86_64")]
fn lanes_allowed(kernel: BlockKernel) -> bool {
    kernel >= BlockKernel::Avx2 && lookup3_x8::available()
}

/// The hash pairs of a group of keys, one array per half, as the vector hashes write them:
/// key i's pair is (`c[i]`, `b[i]`), named after lookup3's two outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct Pairs {
    pub c: [u32; GROUP],
    pub b: [u32; GROUP],
}

impl Default for Pairs {
    fn default() -> Self {
        Pairs { c: [0; GROUP], b: [0; GROUP] }
    }
}

/// A native scheme's hash pair as a type, for the hot loops of the blocked layout: each is
/// compiled once per scheme, with its hash inline and without the other scheme's code. One
/// function holding both (lookup3 inline, lookup2 as calls) saved and restored registers for
/// the calls on every key: a single-key lookup3 query took 187 instructions that way, 175 this
/// way (callgrind).
pub trait PairHash {
    /// The (a, b) pair of [`Scheme::native_pair`].
    fn pair(key: &[u8], seed: u32) -> (u32, u32);

    /// The pairs of a group of at most [`GROUP`] keys, in code compiled for
    /// AVX-512 (the blocked layout's `avx512` kernel): one key at a time unless the scheme's
    /// hash has a wide form.
    ///
    /// # Safety
    /// The CPU must run the `avx512` kernel ([`BlockKernel::Avx512`]).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn pairs_avx512(keys: &[&[u8]], seed: u32, out: &mut Pairs) {
        Self::pairs(keys, seed, out)
    }

    /// [`pairs_avx512`](Self::pairs_avx512) for the `avx2` kernel.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn pairs_avx2(keys: &[&[u8]], seed: u32, out: &mut Pairs) {
        Self::pairs(keys, seed, out)
    }

    /// The pairs of a group of at most [`GROUP`] keys, one key at a time.
    #[inline(always)]
    fn pairs(keys: &[&[u8]], seed: u32, out: &mut Pairs) {
        for (i, key) in keys.iter().enumerate() {
            (out.c[i], out.b[i]) = Self::pair(key, seed);
        }
    }
}

/// [`Scheme::NativeLookup3`]'s pair: lookup3 `hashlittle2` once.
pub struct Lookup3Pair;

/// [`Scheme::Native`]'s pair: lookup2 twice.
pub struct Lookup2Pair;

impl PairHash for Lookup3Pair {
    #[inline(always)]
    fn pair(key: &[u8], seed: u32) -> (u32, u32) {
        lookup3::hashlittle2(key, seed, 0)
    }

    /// Sixteen keys to a vector ([`lookup3_x16`]).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn pairs_avx512(keys: &[&[u8]], seed: u32, out: &mut Pairs) {
        // SAFETY: the caller runs the avx512 kernel, which needs what the wide hash needs.
        unsafe { lookup3_x16::hashlittle2_wide(keys, seed, out) };
    }

    /// Eight keys to a vector ([`lookup3_x8`]).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn pairs_avx2(keys: &[&[u8]], seed: u32, out: &mut Pairs) {
        // SAFETY: the caller checked that the CPU has AVX2.
        unsafe { lookup3_x8::hashlittle2_wide(keys, seed, out) };
    }
}

impl PairHash for Lookup2Pair {
    #[inline(always)]
    fn pair(key: &[u8], seed: u32) -> (u32, u32) {
        native_hash(key, seed)
    }
}

/// Where a key lives in the blocked layout: its block (by multiply-shift of the 64-bit hash
/// x = a << 32 | b) and, inside the block's 512 bits, k positions taken 9 bits at a time from a
/// remix of x (remixed again every 7 positions), so that they do not correlate with the block.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)] // block, then z: the AVX-512 kernel writes probes as pairs of 64-bit lanes
pub struct BlockProbe {
    pub block: usize,
    z: u64,
}

/// A key's hash under a native scheme and seed: the two 32-bit words all its positions are
/// drawn from (by double hashing in the standard layout, by block and remix in the blocked
/// one), with the blocked layout's remix of them, which depends on no filter's size. Made by
/// [`FilterSpec::key_hash`](crate::FilterSpec::key_hash), it stands for the key in every filter
/// of that scheme and seed, whatever their size, layout or number: a key asked of many filters
/// (a filter a day, a dynamic filter's rows) is hashed once. sbbf-rs-safe's queries take a hash
/// computed by the caller in the same way. It keeps the scheme and seed it was made for, so
/// that a filter of another refuses it instead of answering for some other key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyHash {
    /// The pair as one word, a << 32 | b.
    pub(crate) x: u64,
    /// remix(x), the blocked layout's in-block positions.
    pub(crate) z: u64,
    /// The scheme and seed, as [`KeyHash::identity`] of them.
    pub(crate) identity: u64,
}

impl KeyHash {
    /// The hash of a key whose native pair is (a, b) under `scheme` and `seed`.
    #[inline(always)]
    pub(crate) fn new(a: u32, b: u32, scheme: Scheme, seed: u32) -> Self {
        let x = ((a as u64) << 32) | b as u64;
        KeyHash { x, z: remix(x), identity: Self::identity(scheme, seed) }
    }

    /// The scheme and seed in one word, compared with one instruction on every query: the
    /// scheme's number (1 and 2 for the native schemes, 0 for the others, which make no key
    /// hash) above the seed.
    #[inline(always)]
    pub(crate) fn identity(scheme: Scheme, seed: u32) -> u64 {
        let number = match scheme {
            Scheme::Native => 1,
            Scheme::NativeLookup3 => 2,
            _ => 0,
        };
        (number << 32) | seed as u64
    }

    /// The pair (a, b).
    #[inline(always)]
    pub(crate) fn pair(&self) -> (u32, u32) {
        Self::pair_of(self.x)
    }

    /// The pair (a, b) of a key hash's first word, x = a << 32 | b.
    #[inline(always)]
    pub(crate) fn pair_of(x: u64) -> (u32, u32) {
        ((x >> 32) as u32, x as u32)
    }

    /// Where the key lives in a blocked filter of `blocks` blocks.
    #[inline(always)]
    pub(crate) fn block_probe(&self, blocks: u64) -> BlockProbe {
        BlockProbe::of_hash(self.x, self.z, blocks)
    }
}

/// The splitmix64 finaliser: a bijective remix of all 64 bits.
#[inline(always)]
pub(crate) fn remix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl BlockProbe {
    #[inline(always)]
    pub fn new(a: u32, b: u32, blocks: u64) -> Self {
        let x = ((a as u64) << 32) | b as u64;
        BlockProbe { block: mulshift(x, blocks) as usize, z: remix(x) }
    }

    /// The probe of a [`KeyHash`] whose words are `x` and `z` = remix(x).
    #[inline(always)]
    pub(crate) fn of_hash(x: u64, z: u64, blocks: u64) -> Self {
        BlockProbe { block: mulshift(x, blocks) as usize, z }
    }

    /// The remixed hash the in-block positions are taken from, 9 bits each.
    #[inline(always)]
    pub fn remixed(&self) -> u64 {
        self.z
    }

    /// The k in-block bit positions (0..512), passed to `f` in order: the same positions as
    /// [`bits`](BlockProbe::bits), with the usual k ≤ 7 (one remix holds 7 positions of 9 bits)
    /// as a plain shift loop, free of the iterator's per-position remix check.
    #[inline(always)]
    pub fn for_each_bit(&self, k: u32, mut f: impl FnMut(u32)) {
        if k <= POSITIONS_PER_REMIX {
            let mut z = self.z;
            for _ in 0..k {
                f((z & 511) as u32);
                z >>= 9;
            }
        } else {
            self.bits(k).for_each(f);
        }
    }

    /// The k in-block bit positions (0..512), in order.
    #[inline(always)]
    pub fn bits(&self, k: u32) -> BlockBits {
        BlockBits { z0: self.z, z: self.z, i: 0, k }
    }
}

/// In-block positions of 9 bits each taken from one 64-bit remix.
pub(crate) const POSITIONS_PER_REMIX: u32 = 7;

/// The in-block positions of a [`BlockProbe`]: 9 bits at a time of its remixed hash, remixed
/// again every 7 positions.
#[derive(Clone, Copy, Debug)]
pub struct BlockBits {
    z0: u64,
    z: u64,
    i: u32,
    k: u32,
}

impl Iterator for BlockBits {
    type Item = u32;

    #[inline(always)]
    fn next(&mut self) -> Option<u32> {
        if self.i == self.k {
            return None;
        }
        if self.i > 0 && self.i.is_multiple_of(POSITIONS_PER_REMIX) {
            self.z = remix(self.z0.wrapping_add(self.i as u64));
        }
        let bit = (self.z & 511) as u32;
        self.z >>= 9;
        self.i += 1;
        Some(bit)
    }
}

/// The positions of one key, in order, under any scheme.
#[derive(Clone, Debug)]
pub enum Positions<'a> {
    Native(NativePositions),
    /// h = hash(key, previous h), starting from 0; position `abs(h % m)` in Java int arithmetic.
    Hadoop { key: &'a [u8], hash: HadoopHash, h: u32, i: u32, k: u32, m: u64 },
    /// for i in 1..=k: c = h1 + i·h2 (int), c = ~c if negative, position c mod m.
    SparkV1 { h1: i32, h2: i32, i: u32, k: u32, m: u64 },
    /// c = h1·(2^31−1); for each position: c += h2, index = ~c if negative, position index mod m.
    SparkV2 { c: i64, h2: i64, i: u32, k: u32, m: u64 },
    /// The blocked layout: `base` is the block's first bit.
    Blocked { base: u64, bits: BlockBits },
}

impl<'a> Positions<'a> {
    /// A Spark filter's positions of a key from its two hashes: h1 seeded with
    /// [`Scheme::spark_seed`], h2 seeded with h1 (V2's if `v2`, else V1's).
    #[inline(always)]
    pub fn spark(v2: bool, h1: u32, h2: u32, k: u32, m: u64) -> Positions<'static> {
        if v2 {
            let c = (h1 as i32 as i64).wrapping_mul(i32::MAX as i64);
            Positions::SparkV2 { c, h2: h2 as i32 as i64, i: 0, k, m }
        } else {
            Positions::SparkV1 { h1: h1 as i32, h2: h2 as i32, i: 1, k, m }
        }
    }

    /// Writes the positions to come into `out`, as many as it holds (fewer if fewer are left),
    /// for the batches that need all of a key's positions at once. The scheme is matched once
    /// for them all, where the iterator matches at every position: through it, a Hadoop
    /// filter's batched inserts took 1,204 instructions a key, a Spark one's 791.
    pub fn fill(self, out: &mut [u64]) {
        match self {
            Positions::Native(p) => out.iter_mut().zip(p).for_each(|(slot, pos)| *slot = pos),
            Positions::Hadoop { key, hash, mut h, i, k, m } => {
                let out = first_slots(out, k - i);
                match hash {
                    HadoopHash::Jenkins => out.iter_mut().for_each(|slot| *slot = hadoop_next(lookup3::hash, key, &mut h, m)),
                    HadoopHash::Murmur => out.iter_mut().for_each(|slot| *slot = hadoop_next(hadoop_murmur::hash, key, &mut h, m)),
                }
            }
            Positions::SparkV1 { h1, h2, i, k, m } => out.iter_mut().zip(i..=k).for_each(|(slot, i)| *slot = spark_v1_position(h1, h2, i, m)),
            Positions::Blocked { base, bits } => out.iter_mut().zip(bits).for_each(|(slot, bit)| *slot = base + bit as u64),
            Positions::SparkV2 { mut c, h2, i, k, m } => first_slots(out, k - i).iter_mut().for_each(|slot| *slot = spark_v2_next(&mut c, h2, m)),
        }
    }
}

/// The first `n` slots of `out`, or all of them if it has fewer.
#[inline(always)]
fn first_slots(out: &mut [u64], n: u32) -> &mut [u64] {
    let n = out.len().min(n as usize);
    &mut out[..n]
}

/// A Hadoop filter's next position: `h = hash(key, h)`, then its [`hadoop_position`].
#[inline(always)]
fn hadoop_next(hash: impl Fn(&[u8], u32) -> u32, key: &[u8], h: &mut u32, m: u64) -> u64 {
    *h = hash(key, *h);
    hadoop_position(*h, m)
}

/// The position of Hadoop hash `h` in `m` bits: `Math.abs(h % m)` in Java's int arithmetic (the
/// remainder takes the sign of `h`).
#[inline(always)]
pub(crate) fn hadoop_position(h: u32, m: u64) -> u64 {
    ((h as i32) % (m as i32)).unsigned_abs() as u64
}

/// Spark V1's `i`-th position (from 1): `c = h1 + i·h2` in int arithmetic, `~c` if negative,
/// modulo `m`.
#[inline(always)]
fn spark_v1_position(h1: i32, h2: i32, i: u32, m: u64) -> u64 {
    let c = h1.wrapping_add((i as i32).wrapping_mul(h2));
    let c = if c < 0 { !c } else { c };
    c as u64 % m
}

/// Spark V2's next position: `c += h2` in long arithmetic, `~c` if negative, modulo `m`.
#[inline(always)]
fn spark_v2_next(c: &mut i64, h2: i64, m: u64) -> u64 {
    *c = c.wrapping_add(h2);
    let index = if *c < 0 { !*c } else { *c };
    index as u64 % m
}

impl Iterator for Positions<'_> {
    type Item = u64;

    #[inline(always)]
    fn next(&mut self) -> Option<u64> {
        match self {
            Positions::Native(p) => p.next(),
            Positions::Hadoop { key, hash, h, i, k, m } => {
                if *i == *k {
                    return None;
                }
                *i += 1;
                Some(hadoop_next(|key, seed| hash.hash(key, seed), key, h, *m))
            }
            Positions::SparkV1 { h1, h2, i, k, m } => {
                if *i > *k {
                    return None;
                }
                let position = spark_v1_position(*h1, *h2, *i, *m);
                *i += 1;
                Some(position)
            }
            Positions::Blocked { base, bits } => bits.next().map(|bit| *base + bit as u64),
            Positions::SparkV2 { c, h2, i, k, m } => {
                if *i == *k {
                    return None;
                }
                *i += 1;
                Some(spark_v2_next(c, *h2, *m))
            }
        }
    }
}
