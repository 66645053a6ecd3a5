//! A filter's identity: the scheme, layout, seed, m and k that decide which bits a key sets.
//! Two filters can be combined only when their identities are equal.

use crate::error::{Error, Result};
use crate::hashing::{BlockProbe, KeyHash, PairHash, Positions, Scheme};
use crate::params;
use serde::{Deserialize, Serialize};

/// How positions are laid out over the bit array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Layout {
    /// Positions spread over the whole array (the classic Bloom filter).
    Standard,
    /// All k positions of a key inside one 512-bit, cache-line-aligned block (Putze, Sanders &
    /// Singler 2007): one cache miss per query instead of k, at the price of a few more bits per
    /// key for the same false-positive rate. Native schemes only.
    Blocked,
}

/// Bits in a block of the blocked layout: one 64-byte cache line.
pub const BLOCK_BITS: u64 = 512;

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Layout::Standard => f.write_str("standard"),
            Layout::Blocked => f.write_str("blocked"),
        }
    }
}

/// Everything that decides which bits a key sets. Filters with equal specs can be ORed and ANDed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilterSpec {
    pub scheme: Scheme,
    pub layout: Layout,
    pub seed: u32,
    /// m, the number of bits (or counters).
    pub bits: u64,
    /// k, the number of hash functions.
    pub hashes: u32,
}

impl FilterSpec {
    /// A standard-layout spec of any scheme, validated against that scheme's limits.
    pub fn new(scheme: Scheme, seed: u32, bits: u64, hashes: u32) -> Result<Self> {
        Self::with_layout(scheme, Layout::Standard, seed, bits, hashes)
    }

    /// A spec of any scheme and layout, validated.
    pub fn with_layout(scheme: Scheme, layout: Layout, seed: u32, bits: u64, hashes: u32) -> Result<Self> {
        if bits == 0 || bits > scheme.max_bits() {
            return Err(Error::invalid("bits", format!("{bits} is not between 1 and {} ({scheme} filters)", scheme.max_bits())));
        }
        if hashes == 0 || hashes > scheme.max_hashes() {
            return Err(Error::invalid("hashes", format!("{hashes} is not between 1 and {} ({scheme} filters)", scheme.max_hashes())));
        }
        if matches!(scheme, Scheme::SparkV1 | Scheme::SparkV2) && !bits.is_multiple_of(64) {
            return Err(Error::invalid("bits", format!("{bits} is not a whole number of 64-bit words, as Spark filters are")));
        }
        if matches!(scheme, Scheme::SparkV1 | Scheme::Hadoop(_)) && seed != 0 {
            return Err(Error::invalid("seed", format!("{scheme} filters have no seed (got {seed})")));
        }
        if layout == Layout::Blocked {
            if !scheme.is_native() {
                return Err(Error::invalid("layout", format!("the blocked layout is for native filters, not {scheme}")));
            }
            if !bits.is_multiple_of(BLOCK_BITS) {
                return Err(Error::invalid("bits", format!("{bits} is not a whole number of {BLOCK_BITS}-bit blocks")));
            }
        }
        Ok(FilterSpec { scheme, layout, seed, bits, hashes })
    }

    /// A native, standard-layout spec with explicit m and k, validated.
    pub fn native(bits: u64, hashes: u32, seed: u32) -> Result<Self> {
        params::validate_bits_hashes(bits, hashes)?;
        Self::new(Scheme::Native, seed, bits, hashes)
    }

    /// A native spec sized for `n` expected items at false-positive rate `p`.
    pub fn native_for(n: u64, p: f64, seed: u32) -> Result<Self> {
        let (m, k) = params::optimal_params(n, p)?;
        Self::native(m, k, seed)
    }

    /// A spec of `scheme` and `layout` sized for `n` items at rate `p`: Spark's own formulas for
    /// Spark (so the same (n, p) gives the same filter as `BloomFilter.create(n, p)`), a search
    /// that accounts for the blocking penalty for the blocked layout, Bloom's formulas otherwise.
    pub fn sized_for(scheme: Scheme, layout: Layout, n: u64, p: f64, seed: u32) -> Result<Self> {
        match (scheme, layout) {
            (Scheme::SparkV1 | Scheme::SparkV2, _) => {
                let (requested, k) = params::spark_params(n, p)?;
                Self::with_layout(scheme, layout, seed, requested.div_ceil(64) * 64, k)
            }
            (_, Layout::Blocked) => {
                let (m, k) = params::blocked_params(n, p)?;
                Self::with_layout(scheme, layout, seed, m, k)
            }
            _ => {
                let (m, k) = params::optimal_params(n, p)?;
                Self::with_layout(scheme, layout, seed, m, k)
            }
        }
    }

    /// A spec with explicit m and k (Spark rounds m up to whole 64-bit words, the blocked
    /// layout to whole 512-bit blocks).
    pub fn with_size(scheme: Scheme, layout: Layout, bits: u64, hashes: u32, seed: u32) -> Result<Self> {
        // A size past the limit is refused as it was given: rounded up, a number near u64::MAX
        // would wrap round to 0, and be refused as that.
        let bits = match (scheme, layout) {
            _ if bits > scheme.max_bits() => bits,
            (Scheme::SparkV1 | Scheme::SparkV2, _) => bits.div_ceil(64) * 64,
            (_, Layout::Blocked) => bits.div_ceil(BLOCK_BITS) * BLOCK_BITS,
            _ => bits,
        };
        Self::with_layout(scheme, layout, seed, bits, hashes)
    }

    /// The k positions of `key`.
    #[inline]
    pub fn positions<'k>(&self, key: &'k [u8]) -> Positions<'k> {
        match self.layout {
            Layout::Standard => self.scheme.positions(key, self.seed, self.bits, self.hashes),
            Layout::Blocked => {
                let probe = self.block_probe(key);
                Positions::Blocked { base: probe.block as u64 * BLOCK_BITS, bits: probe.bits(self.hashes) }
            }
        }
    }

    /// `key`'s hash under this spec's scheme and seed, for
    /// [`BloomFilter::contains_hash`](crate::BloomFilter::contains_hash) and
    /// [`insert_hash`](crate::BloomFilter::insert_hash) of any filter of that scheme and seed.
    /// None for Hadoop's and Spark's schemes, whose positions are not drawn from one pair.
    #[inline]
    pub fn key_hash(&self, key: &[u8]) -> Option<KeyHash> {
        self.scheme.is_native().then(|| {
            let (a, b) = self.scheme.native_pair(key, self.seed);
            KeyHash::new(a, b, self.scheme, self.seed)
        })
    }

    /// Where a key lives in the blocked layout.
    #[inline(always)]
    pub fn block_probe(&self, key: &[u8]) -> BlockProbe {
        let (a, b) = self.scheme.native_pair(key, self.seed);
        BlockProbe::new(a, b, self.bits / BLOCK_BITS)
    }

    /// [`block_probe`](Self::block_probe) with the scheme's hash given as a type `H`, which
    /// must be this spec's (the hot loops choose `H` once by the scheme, then call this).
    #[inline(always)]
    pub fn block_probe_by<H: PairHash>(&self, key: &[u8]) -> BlockProbe {
        let (a, b) = H::pair(key, self.seed);
        self.block_probe_of(a, b)
    }

    /// Where a key whose hash pair is (a, b) lives in the blocked layout.
    #[inline(always)]
    pub fn block_probe_of(&self, a: u32, b: u32) -> BlockProbe {
        BlockProbe::new(a, b, self.bits / BLOCK_BITS)
    }

    /// Refuses `other` with an error naming the first part of the identity that differs.
    pub fn check_compatible(&self, other: &FilterSpec) -> Result<()> {
        fn differ(what: &'static str, a: impl ToString, b: impl ToString) -> Error {
            Error::Incompatible {
                what,
                left: a.to_string(),
                right: b.to_string(),
            }
        }
        if self.scheme != other.scheme {
            return Err(differ("hashing scheme", self.scheme, other.scheme));
        }
        if self.layout != other.layout {
            return Err(differ("layout", self.layout, other.layout));
        }
        if self.seed != other.seed {
            return Err(differ("seed", self.seed, other.seed));
        }
        if self.bits != other.bits {
            return Err(differ("number of bits (m)", self.bits, other.bits));
        }
        if self.hashes != other.hashes {
            return Err(differ("number of hashes (k)", self.hashes, other.hashes));
        }
        Ok(())
    }
}
