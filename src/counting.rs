//! The counting Bloom filter: a 4-bit counter per position instead of a bit, so that keys can be
//! removed. Counters saturate at 15; a saturated counter is never decremented, since it may stand
//! for more inserts than it can count (decrementing it could create a false negative).

use crate::bits::BitArray;
use crate::error::{Error, Result};
use crate::filter::BloomFilter;
use crate::records::KeyForm;
use crate::spec::FilterSpec;

/// Largest value a counter holds.
pub const COUNTER_MAX: u8 = 15;
const COUNTERS_PER_WORD: u64 = 16;

/// Number of u64 words holding `m` 4-bit counters.
pub fn words_for_counters(m: u64) -> u64 {
    m.div_ceil(COUNTERS_PER_WORD)
}

/// A Bloom filter whose positions hold 4-bit saturating counters.
#[derive(Clone, Debug, PartialEq)]
pub struct CountingBloomFilter {
    spec: FilterSpec,
    /// Counter i is the nibble (i % 16) of word i / 16, least significant nibble first.
    words: Vec<u64>,
    items_inserted: u64,
    expected_items: u64,
    target_fpp: f64,
    /// How its keys were encoded, where known (native files record it).
    key_form: Option<KeyForm>,
}

impl CountingBloomFilter {
    /// An empty counting filter of a given identity.
    pub fn new(spec: FilterSpec) -> Self {
        CountingBloomFilter {
            spec,
            words: vec![0; words_for_counters(spec.bits) as usize],
            items_inserted: 0,
            expected_items: 0,
            target_fpp: 0.0,
            key_form: None,
        }
    }

    /// An empty counting filter sized for `n` items at rate `p`, seed 0.
    pub fn with_rate(n: u64, p: f64) -> Result<Self> {
        let mut f = Self::new(FilterSpec::native_for(n, p, 0)?);
        f.expected_items = n;
        f.target_fpp = p;
        Ok(f)
    }

    /// Reassembles a counting filter from its parts (used by the file reader).
    pub fn from_parts(spec: FilterSpec, words: Vec<u64>, items_inserted: u64, expected_items: u64, target_fpp: f64) -> Self {
        assert_eq!(words.len() as u64, words_for_counters(spec.bits));
        let mut f = CountingBloomFilter { spec, words, items_inserted, expected_items, target_fpp, key_form: None };
        f.clear_padding();
        f
    }

    fn clear_padding(&mut self) {
        let tail = self.spec.bits % COUNTERS_PER_WORD;
        if tail != 0 {
            if let Some(last) = self.words.last_mut() {
                *last &= (1u64 << (tail * 4)) - 1;
            }
        }
    }

    #[inline]
    pub fn counter(&self, i: u64) -> u8 {
        ((self.words[(i / COUNTERS_PER_WORD) as usize] >> ((i % COUNTERS_PER_WORD) * 4)) & 0xF) as u8
    }

    #[inline]
    fn set_counter(&mut self, i: u64, v: u8) {
        let word = &mut self.words[(i / COUNTERS_PER_WORD) as usize];
        let shift = (i % COUNTERS_PER_WORD) * 4;
        *word = (*word & !(0xF << shift)) | ((v as u64) << shift);
    }

    /// Increments the k counters of `key`, saturating at 15.
    pub fn insert(&mut self, key: &[u8]) {
        for pos in self.spec.positions(key) {
            let c = self.counter(pos);
            if c < COUNTER_MAX {
                self.set_counter(pos, c + 1);
            }
        }
        self.items_inserted += 1;
    }

    /// False means `key` is definitely not a member.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.spec.positions(key).all(|pos| self.counter(pos) > 0)
    }

    /// Decrements the k counters of `key`. A key that is definitely not a member is refused and
    /// nothing changes; saturated counters stay at 15.
    pub fn remove(&mut self, key: &[u8]) -> Result<()> {
        let mut positions: Vec<u64> = self.spec.positions(key).collect();
        positions.sort_unstable();
        // A position a key hashes to twice was incremented twice; it must hold that many.
        for run in positions.chunk_by(|a, b| a == b) {
            let c = self.counter(run[0]);
            if c != COUNTER_MAX && (c as usize) < run.len() {
                return Err(Error::NotAMember);
            }
        }
        for pos in positions {
            let c = self.counter(pos);
            if c != COUNTER_MAX {
                self.set_counter(pos, c - 1);
            }
        }
        self.items_inserted = self.items_inserted.saturating_sub(1);
        Ok(())
    }

    /// Adds `other`'s counters into `self`, saturating at 15. Refuses a different identity.
    pub fn merge(&mut self, other: &CountingBloomFilter) -> Result<()> {
        self.spec.check_compatible(&other.spec)?;
        self.key_form = crate::filter::joint_key_form(self.key_form, other.key_form)?;
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a = saturating_add_nibbles(*a, *b);
        }
        self.items_inserted += other.items_inserted;
        Ok(())
    }

    /// The plain filter with a bit set wherever a counter is non-zero.
    pub fn to_bloom_filter(&self) -> BloomFilter {
        let mut bits = BitArray::new(self.spec.bits);
        for i in 0..self.spec.bits {
            if self.counter(i) > 0 {
                bits.set(i);
            }
        }
        let mut filter = BloomFilter::from_parts(self.spec, bits, self.items_inserted, self.expected_items, self.target_fpp);
        filter.set_key_form(self.key_form);
        filter
    }

    /// How the filter's keys were encoded, where known.
    pub fn key_form(&self) -> Option<KeyForm> {
        self.key_form
    }

    /// Records how the filter's keys were encoded (written to native files).
    pub fn set_key_form(&mut self, form: Option<KeyForm>) {
        self.key_form = form;
    }

    pub fn spec(&self) -> &FilterSpec {
        &self.spec
    }
    pub fn words(&self) -> &[u64] {
        &self.words
    }
    pub fn items_inserted(&self) -> u64 {
        self.items_inserted
    }
    pub fn expected_items(&self) -> u64 {
        self.expected_items
    }
    pub fn target_fpp(&self) -> f64 {
        self.target_fpp
    }
}

/// Adds sixteen 4-bit lanes at once, each saturating at 15.
fn saturating_add_nibbles(a: u64, b: u64) -> u64 {
    let mut out = 0u64;
    for lane in 0..16 {
        let shift = lane * 4;
        let s = (((a >> shift) & 0xF) + ((b >> shift) & 0xF)).min(COUNTER_MAX as u64);
        out |= s << shift;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> CountingBloomFilter {
        CountingBloomFilter::new(FilterSpec::native(1000, 4, 0).unwrap())
    }

    #[test]
    fn insert_then_remove_restores_the_empty_filter() {
        let mut f = small();
        f.insert(b"a");
        f.insert(b"a");
        f.insert(b"b");
        f.remove(b"a").unwrap();
        assert!(f.contains(b"a") && f.contains(b"b"));
        f.remove(b"a").unwrap();
        f.remove(b"b").unwrap();
        assert!(f.words().iter().all(|&w| w == 0));
    }

    #[test]
    fn removing_a_non_member_is_refused_and_changes_nothing() {
        let mut f = small();
        f.insert(b"a");
        let before = f.clone();
        assert!(matches!(f.remove(b"zzz"), Err(Error::NotAMember)));
        assert_eq!(f, before);
    }

    #[test]
    fn saturated_counters_never_decrement() {
        let mut f = small();
        for _ in 0..20 {
            f.insert(b"hot");
        }
        let positions: Vec<u64> = f.spec().positions(b"hot").collect();
        assert!(positions.iter().all(|&p| f.counter(p) == COUNTER_MAX));
        for _ in 0..20 {
            f.remove(b"hot").unwrap();
        }
        assert!(positions.iter().all(|&p| f.counter(p) == COUNTER_MAX));
        assert!(f.contains(b"hot"));
    }

    #[test]
    fn merge_adds_with_saturation_and_converts_to_plain() {
        let mut a = small();
        let mut b = small();
        for _ in 0..10 {
            a.insert(b"k");
            b.insert(b"k");
        }
        b.insert(b"other");
        a.merge(&b).unwrap();
        let p = a.spec().positions(b"k").next().unwrap();
        assert_eq!(a.counter(p), COUNTER_MAX);
        let plain = a.to_bloom_filter();
        assert!(plain.contains(b"k") && plain.contains(b"other"));
        let mut direct = BloomFilter::new(*a.spec());
        direct.insert(b"k");
        direct.insert(b"other");
        assert_eq!(plain.bits(), direct.bits());
        let other = CountingBloomFilter::new(FilterSpec::native(1000, 5, 0).unwrap());
        assert!(a.merge(&other).is_err());
    }

    #[test]
    fn nibble_add_saturates_per_lane() {
        assert_eq!(saturating_add_nibbles(0xF1, 0x12), 0xF3);
        assert_eq!(saturating_add_nibbles(0x8, 0x9), 0xF);
        assert_eq!(saturating_add_nibbles(u64::MAX, 1), u64::MAX);
    }
}
