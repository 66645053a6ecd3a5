//! Hadoop's `DynamicBloomFilter` (org.apache.hadoop.util.bloom; Guo, Wu, Chen and Luo, "Theory
//! and Network Applications of Dynamic Bloom Filters", INFOCOM 2006): a filter that grows with
//! its keys instead of being sized for them first. It is a list of rows, each a standard
//! Bloom filter of one identity (m, k, hash); keys go into the last row until it holds `nr`
//! (records per row), then a new, empty row is added. A key may be present if any row says
//! so. Hadoop's `BloomMapFile` keeps one beside its data, in its `bloom` file.
//!
//! The rows cannot be ORed into one filter of their m without raising the false-positive rate
//! far above Hadoop's (two half-full rows ORed are three quarters full), so queries ask the
//! rows in turn. bloomflow reads and writes the rows as they are; its jobs never build one,
//! since which key lands in which row depends on the order of the inserts, which a distributed
//! build does not fix.

use crate::error::{Error, Result};
use crate::filter::BloomFilter;
use crate::spec::FilterSpec;

/// Rows of standard Bloom filters of one identity, as Hadoop's `DynamicBloomFilter` holds them.
#[derive(Clone, Debug, PartialEq)]
pub struct DynamicBloomFilter {
    rows: Vec<BloomFilter>,
    /// Hadoop's `nr`: the keys a row takes before the next row is added.
    records_per_row: u32,
    /// Hadoop's `currentNbRecord`: the keys added to the last row.
    last_row_records: u32,
}

impl DynamicBloomFilter {
    /// One empty row of identity `spec`, taking `records_per_row` keys before the next row is
    /// added: Hadoop's `new DynamicBloomFilter(vectorSize, nbHash, hashType, nr)`.
    pub fn new(spec: FilterSpec, records_per_row: u32) -> Self {
        DynamicBloomFilter { rows: vec![BloomFilter::new(spec)], records_per_row, last_row_records: 0 }
    }

    /// The filter of `rows`, which must be at least one and of one identity.
    pub fn from_rows(rows: Vec<BloomFilter>, records_per_row: u32, last_row_records: u32) -> Result<Self> {
        let first = rows.first().ok_or_else(|| Error::invalid("rows", "a dynamic Bloom filter has at least one row"))?;
        for row in &rows[1..] {
            first.spec().check_compatible(row.spec())?;
        }
        Ok(DynamicBloomFilter { rows, records_per_row, last_row_records })
    }

    /// Adds `key` as Hadoop's `add` does: to the last row, after adding a new row if the last
    /// one holds `records_per_row` keys already.
    pub fn insert(&mut self, key: &[u8]) {
        if self.last_row_records >= self.records_per_row {
            self.rows.push(BloomFilter::new(*self.spec()));
            self.last_row_records = 0;
        }
        self.rows.last_mut().expect("at least one row").insert(key);
        self.last_row_records += 1;
    }

    /// False means `key` was definitely never inserted: no row may hold it. Rows of a native
    /// scheme are asked from one hash of the key ([`FilterSpec::key_hash`]), not one a row.
    pub fn contains(&self, key: &[u8]) -> bool {
        match self.spec().key_hash(key) {
            Some(hash) => self.rows.iter().any(|row| row.contains_hash(hash)),
            None => self.rows.iter().any(|row| row.contains(key)),
        }
    }

    /// Answers many keys at once, each row's batched query in turn
    /// ([`BloomFilter::contains_batch`]): the first row is asked about every key, each later row
    /// only about the keys the rows before it answered "no" for.
    pub fn contains_batch(&self, keys: &[&[u8]], answers: &mut Vec<bool>) {
        let (first, later) = self.rows.split_first().expect("at least one row");
        first.contains_batch(keys, answers);
        let (mut asked, mut row_answers) = (Vec::new(), Vec::new());
        for row in later {
            let unanswered: Vec<usize> = (0..keys.len()).filter(|&i| !answers[i]).collect();
            if unanswered.is_empty() {
                return;
            }
            asked.clear();
            asked.extend(unanswered.iter().map(|&i| keys[i]));
            row.contains_batch(&asked, &mut row_answers);
            for (&i, &maybe) in unanswered.iter().zip(&row_answers) {
                answers[i] = maybe;
            }
        }
    }

    /// The identity every row has.
    pub fn spec(&self) -> &FilterSpec {
        self.rows[0].spec()
    }

    /// The rows, the first added first.
    pub fn rows(&self) -> &[BloomFilter] {
        &self.rows
    }

    /// The rows, taken out.
    pub fn into_rows(self) -> Vec<BloomFilter> {
        self.rows
    }

    /// Hadoop's `nr`: the keys a row takes before the next row is added.
    pub fn records_per_row(&self) -> u32 {
        self.records_per_row
    }

    /// Hadoop's `currentNbRecord`: the keys added to the last row.
    pub fn last_row_records(&self) -> u32 {
        self.last_row_records
    }

    /// The keys inserted, as Hadoop's counts imply them: `records_per_row` in every row but
    /// the last. None where the counts are not a `DynamicBloomFilter`'s own (a last row holding
    /// more than a row takes).
    pub fn items_inserted(&self) -> Option<u64> {
        (self.last_row_records <= self.records_per_row)
            .then(|| (self.rows.len() as u64 - 1) * self.records_per_row as u64 + self.last_row_records as u64)
    }

    /// The bits set, in all rows.
    pub fn bits_set(&self) -> u64 {
        self.rows.iter().map(BloomFilter::bits_set).sum()
    }

    /// Fraction of all rows' bits set.
    pub fn fill_ratio(&self) -> f64 {
        self.bits_set() as f64 / (self.spec().bits as f64 * self.rows.len() as f64)
    }

    /// Estimated distinct items inserted: the rows' estimates summed.
    pub fn estimated_items(&self) -> f64 {
        self.rows.iter().map(BloomFilter::estimated_items).sum()
    }

    /// The false-positive rate a query of an absent key has now: it is a false positive if any
    /// row gives one, so 1 − ∏(1 − pᵢ) over the rows' rates pᵢ.
    pub fn estimated_fpp(&self) -> f64 {
        1.0 - self.rows.iter().map(|row| 1.0 - row.estimated_fpp()).product::<f64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashing::{HadoopHash, Scheme};

    fn hadoop_spec() -> FilterSpec {
        FilterSpec::new(Scheme::Hadoop(HadoopHash::Jenkins), 0, 2000, 5).unwrap()
    }

    fn keys(range: std::ops::Range<u32>) -> Vec<Vec<u8>> {
        range.map(|i| format!("key-{i}").into_bytes()).collect()
    }

    /// Hadoop's `add`: `nr` keys a row, a new row for the key after them, so 250 keys at 100 a
    /// row make three rows holding 100, 100 and 50, each row exactly the filter of its keys.
    #[test]
    fn inserts_fill_rows_of_records_per_row_keys_as_hadoop_does() {
        let all = keys(0..250);
        let mut dynamic = DynamicBloomFilter::new(hadoop_spec(), 100);
        all.iter().for_each(|k| dynamic.insert(k));
        assert_eq!((dynamic.rows().len(), dynamic.last_row_records(), dynamic.items_inserted()), (3, 50, Some(250)));
        for (row, chunk) in dynamic.rows().iter().zip(all.chunks(100)) {
            let mut alone = BloomFilter::new(hadoop_spec());
            chunk.iter().for_each(|k| alone.insert(k));
            assert_eq!(row.bits(), alone.bits());
        }
    }

    /// A key is maybe present if any row says so: every key inserted, in any row, and, for
    /// absent keys, the OR of the rows' answers, batched or one at a time. Hadoop's rows, and
    /// native ones (asked from one hash of the key), in both layouts.
    #[test]
    fn answers_are_the_or_of_the_rows_answers() {
        let native = |layout| FilterSpec::with_size(Scheme::NativeLookup3, layout, 2048, 5, 7).unwrap();
        for spec in [hadoop_spec(), native(crate::Layout::Standard), native(crate::Layout::Blocked)] {
            let mut dynamic = DynamicBloomFilter::new(spec, 100);
            keys(0..250).iter().for_each(|k| dynamic.insert(k));
            let asked = keys(0..5000);
            let asked: Vec<&[u8]> = asked.iter().map(Vec::as_slice).collect();
            let mut batched = Vec::new();
            dynamic.contains_batch(&asked, &mut batched);
            let mut false_positives = 0;
            for (i, key) in asked.iter().enumerate() {
                let any_row = dynamic.rows().iter().any(|row| row.contains(key));
                assert_eq!((batched[i], dynamic.contains(key)), (any_row, any_row), "{:?}: key {i}", spec.scheme);
                assert!(i >= 250 || any_row, "false negative for key {i}");
                false_positives += (i >= 250 && any_row) as usize;
            }
            // Some absent keys are answered by the later rows only: the batch asked them.
            assert!(false_positives > 0);
        }
    }

    #[test]
    fn rows_of_different_identities_are_refused() {
        let other = FilterSpec::new(Scheme::Hadoop(HadoopHash::Jenkins), 0, 2001, 5).unwrap();
        let err = DynamicBloomFilter::from_rows(vec![BloomFilter::new(hadoop_spec()), BloomFilter::new(other)], 10, 0).unwrap_err();
        assert!(err.to_string().contains("2000") && err.to_string().contains("2001"), "{err}");
        assert!(DynamicBloomFilter::from_rows(Vec::new(), 10, 0).is_err());
    }

    /// The rate of a key that no row holds: 1 − ∏(1 − pᵢ), above each row's own.
    #[test]
    fn estimated_fpp_combines_the_rows_rates() {
        let mut dynamic = DynamicBloomFilter::new(hadoop_spec(), 100);
        keys(0..250).iter().for_each(|k| dynamic.insert(k));
        let rates: Vec<f64> = dynamic.rows().iter().map(BloomFilter::estimated_fpp).collect();
        let want = 1.0 - rates.iter().map(|p| 1.0 - p).product::<f64>();
        assert!((dynamic.estimated_fpp() - want).abs() < 1e-12);
        assert!(rates.iter().all(|&p| dynamic.estimated_fpp() > p));
        let bits: u64 = dynamic.rows().iter().map(BloomFilter::bits_set).sum();
        assert_eq!(dynamic.bits_set(), bits);
        assert!((dynamic.fill_ratio() - bits as f64 / 6000.0).abs() < 1e-12);
    }
}
