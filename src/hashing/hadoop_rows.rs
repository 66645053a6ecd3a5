//! A Hadoop filter's positions of many keys at once. Each of a key's k positions is a hash of
//! the whole key, seeded with the hash before (Hadoop's `HashFunction`): one key at a time
//! that is k hashes of about 70 instructions each (Jenkins), most of a batched insert's work.
//! The avx2 lookup3 ([`super::lookup3_x8`]) and Murmur ([`super::hadoop_murmur_x8`]) compute
//! them for a group of [`GROUP`] keys in lanes, each lane with its own seed, reading and
//! transposing the keys' bytes once for all k hashes: about 7 instructions a Jenkins hash. A
//! `-w 1` build of 2M keys (k = 7) into a Jenkins filter took 957 instructions a record hashed
//! one by one, 495 so (callgrind), and the same file.

use super::{hadoop_position, BlockKernel, HadoopHash, GROUP};

/// The k hashes of groups of keys, held in slots of one group each: a batched insert uses one
/// slot, a chained query a ring of them (keys stay in its chain while later keys are hashed).
pub struct HadoopRows {
    hash: HadoopHash,
    /// Slot s holds rows `s·k .. (s + 1)·k`; row j of a slot holds hash j of each of its keys.
    rows: Vec<[u32; GROUP]>,
    k: usize,
    m: u64,
}

impl HadoopRows {
    /// Rows for `slots` groups of keys in a filter of `m` bits with `k` hashes by `hash`; None
    /// where `kernel` is the portable one or the CPU has no AVX2, for the caller to hash one
    /// key at a time.
    pub fn new(hash: HadoopHash, k: u32, m: u64, slots: usize, kernel: BlockKernel) -> Option<HadoopRows> {
        let k = k as usize;
        super::lanes_allowed(kernel).then(|| HadoopRows { hash, rows: vec![[0; GROUP]; slots * k], k, m })
    }

    /// Hashes `keys` (at most [`GROUP`]) into `slot`, replacing the keys it held.
    #[inline]
    pub fn hash(&mut self, slot: usize, keys: &[&[u8]]) {
        let rows = &mut self.rows[slot * self.k..(slot + 1) * self.k];
        // SAFETY (both): `new` made rows only where the CPU has AVX2.
        match self.hash {
            HadoopHash::Jenkins => unsafe { super::lookup3_x8::hadoop_hashes_wide(keys, rows) },
            HadoopHash::Murmur => unsafe { super::hadoop_murmur_x8::hadoop_hashes_wide(keys, rows) },
        }
    }

    /// Position `j` (from 0) of the key in `column` of `slot`.
    #[inline(always)]
    pub fn position(&self, slot: usize, column: usize, j: usize) -> u64 {
        hadoop_position(self.rows[slot * self.k + j][column], self.m)
    }

    /// Every position of the key in `column` of `slot`, into `out` (k slots).
    #[inline(always)]
    pub fn positions(&self, slot: usize, column: usize, out: &mut [u64]) {
        let rows = &self.rows[slot * self.k..(slot + 1) * self.k];
        out.iter_mut().zip(rows).for_each(|(pos, row)| *pos = hadoop_position(row[column], self.m));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashing::Positions;
    use proptest::prelude::*;

    proptest! {
        /// For any keys (lengths on both sides of the lanes' 24, 32 and 64 bytes and of rows of
        /// 32 past them, the empty key among them), any k and m: the rows give each key the
        /// positions Hadoop's iterator does.
        #[test]
        fn rows_give_the_iterators_positions(
            keys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..=GROUP),
            k in 1u32..12,
            m in 1u64..(1 << 31),
            slot in 0usize..3,
            murmur in any::<bool>(),
        ) {
            let hash = if murmur { HadoopHash::Murmur } else { HadoopHash::Jenkins };
            let Some(mut rows) = HadoopRows::new(hash, k, m, 3, BlockKernel::detect()) else { return Ok(()) };
            let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            rows.hash(slot, &keys);
            let mut all = vec![0; k as usize];
            for (column, key) in keys.iter().enumerate() {
                let want: Vec<u64> = Positions::Hadoop { key, hash, h: 0, i: 0, k, m }.collect();
                rows.positions(slot, column, &mut all);
                prop_assert_eq!(&all, &want, "key {:?}", key);
                let one_by_one: Vec<u64> = (0..k as usize).map(|j| rows.position(slot, column, j)).collect();
                prop_assert_eq!(one_by_one, want);
            }
        }
    }
}
