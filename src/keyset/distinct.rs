//! How many distinct keys an arena holds as text, estimated as they come (HyperLogLog), so that
//! a key set made from it is sized for its distinct keys rather than for every copy.

use std::hash::BuildHasher;

/// Registers of the sketch: 2^12 of them, 4 KiB, a standard error of 1.04/√4096 = 1.6%.
const BITS: u32 = 12;
const REGISTERS: usize = 1 << BITS;

/// A HyperLogLog sketch (Flajolet, Fusy, Gandouet and Meunier, 2007) of keys: each register
/// keeps the longest run of leading zeros seen among the hashes that pick it.
#[derive(Clone, Debug)]
pub struct DistinctKeys {
    registers: Box<[u8; REGISTERS]>,
}

impl Default for DistinctKeys {
    fn default() -> Self {
        DistinctKeys { registers: Box::new([0; REGISTERS]) }
    }
}

impl DistinctKeys {
    /// Notes a key.
    #[inline]
    pub fn insert(&mut self, key: &[u8]) {
        // The register comes from the top bits, the run of zeros from the rest. foldhash's fast
        // hash spreads them well enough (the test below holds the estimate to 5%), and took
        // about 1% of a shuffle join's samples where its quality hash took more.
        let hash = foldhash::fast::FixedState::with_seed(0x2545_F491_4F6C_DD1D).hash_one(key);
        let register = (hash >> (64 - BITS)) as usize;
        // A guard bit past the rest, so that a run is at most 64 - BITS + 1 long.
        let rest = (hash << BITS) | (1 << (BITS - 1));
        let run = rest.leading_zeros() as u8 + 1;
        if run > self.registers[register] {
            self.registers[register] = run;
        }
    }

    /// Notes every key `other` noted: the sketch of both sets of keys together (each register
    /// the longer of the two runs), as if each key had been noted here.
    pub fn merge(&mut self, other: &DistinctKeys) {
        self.registers.iter_mut().zip(other.registers.iter()).for_each(|(ours, &theirs)| *ours = (*ours).max(theirs));
    }

    /// The registers, to send to another worker (see [`from_registers`](Self::from_registers)).
    pub fn registers(&self) -> Vec<u8> {
        self.registers.to_vec()
    }

    /// The sketch whose registers these are; None where they are not a sketch's.
    pub fn from_registers(registers: &[u8]) -> Option<DistinctKeys> {
        let registers: Box<[u8; REGISTERS]> = registers.to_vec().into_boxed_slice().try_into().ok()?;
        registers.iter().all(|&run| run as u32 <= 64 - BITS + 1).then_some(DistinctKeys { registers })
    }

    /// The estimated count of distinct keys noted: the harmonic mean of the registers' powers
    /// of two, or, for few keys (some registers still empty), linear counting of the empty ones.
    pub fn estimate(&self) -> u64 {
        let m = REGISTERS as f64;
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let sum: f64 = self.registers.iter().map(|&r| 2f64.powi(-(r as i32))).sum();
        let raw = alpha * m * m / sum;
        let empty = self.registers.iter().filter(|&&r| r == 0).count();
        let estimate = if raw <= 2.5 * m && empty > 0 { m * (m / empty as f64).ln() } else { raw };
        estimate.round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The estimate is within 5% of the distinct count (three standard errors), from a few keys
    /// to a million, each key given once or many times.
    #[test]
    fn estimates_the_distinct_keys_within_five_percent() {
        for (distinct, copies) in [(100u64, 1u64), (3_000, 7), (50_000, 1), (200_000, 3), (1_000_000, 1)] {
            let mut sketch = DistinctKeys::default();
            for copy in 0..copies {
                for i in 0..distinct {
                    // Copies in another order than the first.
                    let i = (i * 7919 + copy * 104_729) % distinct;
                    sketch.insert(format!("key-{i:016}").as_bytes());
                }
            }
            let estimate = sketch.estimate() as f64;
            let error = (estimate - distinct as f64).abs() / distinct as f64;
            assert!(error < 0.05, "{distinct} keys given {copies} time(s): estimated {estimate}");
        }
        assert_eq!(DistinctKeys::default().estimate(), 0);
    }

    /// Two workers' sketches merged estimate the keys of both together, within 5%, whether
    /// their keys overlap or not; registers travel and come back the same.
    #[test]
    fn merged_sketches_estimate_the_union() {
        let sketch_of = |keys: std::ops::Range<u64>| {
            let mut sketch = DistinctKeys::default();
            keys.for_each(|i| sketch.insert(format!("key-{i}").as_bytes()));
            sketch
        };
        for (a, b, union) in [(0..300_000, 200_000..500_000, 500_000f64), (0..100_000, 100_000..200_000, 200_000.0), (0..50_000, 0..50_000, 50_000.0)] {
            let (mut ours, theirs) = (sketch_of(a), sketch_of(b));
            let theirs = DistinctKeys::from_registers(&theirs.registers()).expect("a sketch's registers");
            ours.merge(&theirs);
            let error = (ours.estimate() as f64 - union).abs() / union;
            assert!(error < 0.05, "estimated {} of {union}", ours.estimate());
        }
        assert!(DistinctKeys::from_registers(&[0; 100]).is_none() && DistinctKeys::from_registers(&[99; REGISTERS]).is_none());
    }
}
