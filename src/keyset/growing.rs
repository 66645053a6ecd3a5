//! A key set built as its keys arrive, each held once: for keys that repeat, where holding
//! every copy until the set is made would take many times the set's memory.

use super::*;

/// A [`KeySet`] of one partition that takes keys as they come and grows as it needs to. Made
/// from an arena whose keys proved to repeat (see [`KeyArena::mostly_repeats`]): a shuffle
/// join's shard gets every copy of its build keys, and a fact table's foreign keys repeat. Held
/// in an arena until the build side was read, 20M rows of 28-byte keys with 1M distinct took
/// 690 MiB over the two shards of `-w 2`.
///
/// Long keys are copied into the set, as the pieces they come in are not kept. Numbers are held
/// as bits over the span the arena's numbers had when the set was made (see `Dense`); any
/// number outside it goes to the numbers' table, as every number does in a set that holds none
/// as bits.
pub struct GrowingSet {
    part: Part,
    dense: Dense,
}

impl GrowingSet {
    /// The set of `arena`'s keys, its tables sized for twice the distinct keys the arena holds
    /// (or estimates), for those yet to come.
    pub fn from_arena(mut arena: KeyArena) -> GrowingSet {
        let counts = arena.counts();
        let counts = match arena.distinct_estimate() {
            Some(distinct) => counts.for_distinct(distinct.saturating_mul(2)),
            None => counts,
        };
        let taken = arena.take_bits();
        let bits = DenseWords::pieces(&taken);
        let Partition(part, dense) = PartitionBuilder::new(counts, 0, 1).build_with_bits(&[arena.as_bytes()], &bits, &[]);
        GrowingSet { part, dense }
    }

    /// Holds the keys of `encoded` too (keys as an arena holds them), each once.
    pub fn insert_encoded(&mut self, encoded: &[u8]) {
        insert_keys(&mut self.part, self.dense, &[encoded], 0, 1);
    }

    /// The set, built.
    pub fn into_set(mut self) -> KeySet {
        self.part.bits.count();
        KeySet::from_partitions(vec![Partition(self.part, self.dense)])
    }
}
