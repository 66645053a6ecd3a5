//! A filter's identity: the scheme, layout, seed, m and k that decide which bits a key sets.
//! Two filters can be combined only when their identities are equal.

use crate::error::{Error, Result};
use crate::hashing::{Positions, Scheme};
use crate::params;
use serde::{Deserialize, Serialize};

/// How positions are laid out over the bit array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Layout {
    /// Positions spread over the whole array (the classic Bloom filter).
    Standard,
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Layout::Standard => f.write_str("standard"),
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
        if bits == 0 || bits > scheme.max_bits() {
            return Err(Error::invalid("bits", format!("{bits} is not between 1 and {} ({scheme} filters)", scheme.max_bits())));
        }
        if hashes == 0 || hashes > scheme.max_hashes() {
            return Err(Error::invalid("hashes", format!("{hashes} is not between 1 and {} ({scheme} filters)", scheme.max_hashes())));
        }
        if matches!(scheme, Scheme::SparkV1 | Scheme::SparkV2) && bits % 64 != 0 {
            return Err(Error::invalid("bits", format!("{bits} is not a whole number of 64-bit words, as Spark filters are")));
        }
        if matches!(scheme, Scheme::SparkV1 | Scheme::Hadoop(_)) && seed != 0 {
            return Err(Error::invalid("seed", format!("{scheme} filters have no seed (got {seed})")));
        }
        Ok(FilterSpec { scheme, layout: Layout::Standard, seed, bits, hashes })
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

    /// A spec of `scheme` sized for `n` items at rate `p`: Spark's own formulas for Spark (so the
    /// same (n, p) gives the same filter as `BloomFilter.create(n, p)`), Bloom's for the others.
    pub fn sized_for(scheme: Scheme, n: u64, p: f64, seed: u32) -> Result<Self> {
        match scheme {
            Scheme::SparkV1 | Scheme::SparkV2 => {
                let (requested, k) = params::spark_params(n, p)?;
                Self::new(scheme, seed, requested.div_ceil(64) * 64, k)
            }
            _ => {
                let (m, k) = params::optimal_params(n, p)?;
                Self::new(scheme, seed, m, k)
            }
        }
    }

    /// A spec of `scheme` with explicit m and k (Spark rounds m up to whole 64-bit words).
    pub fn with_size(scheme: Scheme, bits: u64, hashes: u32, seed: u32) -> Result<Self> {
        match scheme {
            Scheme::SparkV1 | Scheme::SparkV2 => Self::new(scheme, seed, bits.div_ceil(64) * 64, hashes),
            _ => Self::new(scheme, seed, bits, hashes),
        }
    }

    /// The k positions of `key`.
    #[inline]
    pub fn positions<'k>(&self, key: &'k [u8]) -> Positions<'k> {
        self.scheme.positions(key, self.seed, self.bits, self.hashes)
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
