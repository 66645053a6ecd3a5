//! A filter's identity: the scheme, layout, seed, m and k that decide which bits a key sets.
//! Two filters can be combined only when their identities are equal.

use crate::error::{Error, Result};
use crate::hashing::{NativePositions, Scheme};
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
    /// A native, standard-layout spec with explicit m and k, validated.
    pub fn native(bits: u64, hashes: u32, seed: u32) -> Result<Self> {
        params::validate_bits_hashes(bits, hashes)?;
        Ok(FilterSpec {
            scheme: Scheme::Native,
            layout: Layout::Standard,
            seed,
            bits,
            hashes,
        })
    }

    /// A native spec sized for `n` expected items at false-positive rate `p`.
    pub fn native_for(n: u64, p: f64, seed: u32) -> Result<Self> {
        let (m, k) = params::optimal_params(n, p)?;
        Self::native(m, k, seed)
    }

    /// The k positions of `key`.
    #[inline]
    pub fn positions(&self, key: &[u8]) -> NativePositions {
        match self.scheme {
            Scheme::Native => NativePositions::new(key, self.seed, self.bits, self.hashes),
        }
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
