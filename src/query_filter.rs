//! The filter a query or a semi-join asks: one Bloom filter (a counting filter's counters above
//! zero, read as bits), or the rows of a Hadoop `DynamicBloomFilter`, which answer together.

use crate::dynamic::DynamicBloomFilter;
use crate::filter::BloomFilter;
use crate::records::KeyForm;
use crate::spec::FilterSpec;

/// A filter as queries see it.
#[derive(Clone, Debug, PartialEq)]
pub enum QueryFilter {
    One(BloomFilter),
    Rows(DynamicBloomFilter),
}

impl QueryFilter {
    /// Answers many keys at once (see [`BloomFilter::contains_batch`]): false means the key was
    /// definitely never inserted.
    #[inline]
    pub fn contains_batch(&self, keys: &[&[u8]], answers: &mut Vec<bool>) {
        match self {
            QueryFilter::One(f) => f.contains_batch(keys, answers),
            QueryFilter::Rows(rows) => rows.contains_batch(keys, answers),
        }
    }

    /// The identity (of every row, for a dynamic filter).
    pub fn spec(&self) -> &FilterSpec {
        match self {
            QueryFilter::One(f) => f.spec(),
            QueryFilter::Rows(rows) => rows.spec(),
        }
    }

    /// How the keys were encoded, where the file records it (Hadoop's files do not).
    pub fn key_form(&self) -> Option<KeyForm> {
        match self {
            QueryFilter::One(f) => f.key_form(),
            QueryFilter::Rows(_) => None,
        }
    }

    /// The keys inserted, as recorded (0 where the file does not record it).
    pub fn items_inserted(&self) -> u64 {
        match self {
            QueryFilter::One(f) => f.items_inserted(),
            QueryFilter::Rows(rows) => rows.items_inserted().unwrap_or(0),
        }
    }

    /// The bytes its bits take in memory (of all rows).
    pub fn bytes(&self) -> u64 {
        let rows = match self {
            QueryFilter::One(_) => 1,
            QueryFilter::Rows(rows) => rows.rows().len() as u64,
        };
        self.spec().bits.div_ceil(8).saturating_mul(rows)
    }

    /// The bits set (in all rows).
    pub fn bits_set(&self) -> u64 {
        match self {
            QueryFilter::One(f) => f.bits_set(),
            QueryFilter::Rows(rows) => rows.bits_set(),
        }
    }

    /// Fraction of the bits set (of all rows).
    pub fn fill_ratio(&self) -> f64 {
        match self {
            QueryFilter::One(f) => f.fill_ratio(),
            QueryFilter::Rows(rows) => rows.fill_ratio(),
        }
    }

    /// The false-positive rate a query of an absent key has now.
    pub fn estimated_fpp(&self) -> f64 {
        match self {
            QueryFilter::One(f) => f.estimated_fpp(),
            QueryFilter::Rows(rows) => rows.estimated_fpp(),
        }
    }
}
