//! Filter files: reading any supported format into a filter, and writing one.

pub mod native;

use crate::counting::CountingBloomFilter;
use crate::error::Result;
use crate::filter::BloomFilter;
use std::path::Path;

/// A filter as stored in a file: plain or counting.
#[derive(Clone, Debug, PartialEq)]
pub enum StoredFilter {
    Plain(BloomFilter),
    Counting(CountingBloomFilter),
}

impl StoredFilter {
    /// The kind, as `info` names it.
    pub fn kind(&self) -> &'static str {
        match self {
            StoredFilter::Plain(_) => "bloom",
            StoredFilter::Counting(_) => "counting-bloom",
        }
    }

    /// The plain filter (a counting filter converted), for queries and joins.
    pub fn into_plain(self) -> BloomFilter {
        match self {
            StoredFilter::Plain(f) => f,
            StoredFilter::Counting(c) => c.to_bloom_filter(),
        }
    }
}

/// Reads a filter file of any supported format.
pub fn load(path: &Path) -> Result<StoredFilter> {
    native::read(path)
}
