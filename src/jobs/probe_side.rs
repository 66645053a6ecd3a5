//! The exact join's probe-side strategy (`--exact-strategy probe-side`), for a build side much
//! larger than the probe side: every process holds the probe side's keys, each once, in an exact
//! set (broadcast as a build side's keys are for the broadcast strategy); each worker reads its
//! splits of the build side past that set and marks the keys it holds; the marks are ORed by the
//! all-reduce, as partial filters are; and each worker reads its probe splits again, keeping the
//! records whose key is marked (or, for an anti-join, is not). No Bloom filter is built: only
//! the probe keys and the marks cross the network, and the build side's keys are never held
//! (DuckDB builds a join's hash table on its smaller side for the same reason).
//!
//! The marks are bits of the set's places (see [`KeySet::positions_batch`]): every process
//! built its set from the same pieces in the same order, so a key has the same place in each,
//! which the job checks (see [`KeySet::layout_digest`]) before it merges marks. Most build keys
//! are not probe keys, so the set keeps sketches of its long keys, asked before their tables
//! while most keys of a worker's batches are absent (see [`KeySet::positions_batch_sketched`]).

use super::Partial;
use crate::allreduce::Mergeable;
use crate::keyset::KeySet;
use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;

/// A worker's marks: a bit for each place of the probe keys' set (see
/// [`KeySet::places`]), set where a build key it read is held there. Merged by OR.
pub(crate) struct Marks {
    /// The probe keys; None in a placeholder.
    set: Option<Arc<KeySet>>,
    words: Vec<u64>,
    /// The places of a batch's keys, reused from batch to batch.
    places: RefCell<Vec<Option<usize>>>,
    /// Whether the next batch of build keys asks the set's sketches first (see
    /// [`KeySet::positions_batch_sketched`]): where at least half of the last batch's keys
    /// were absent.
    ask_sketches: bool,
}

impl Marks {
    /// No key of `set` marked yet.
    pub(crate) fn new(set: Arc<KeySet>, tick: &mut dyn FnMut()) -> Marks {
        let words = crate::limits::zeroed_written_ticking(set.places().div_ceil(64), tick);
        Marks { set: Some(set), words, places: RefCell::new(Vec::new()), ask_sketches: true }
    }

    fn set(&self) -> &KeySet {
        self.set.as_deref().expect("marks of a set, not a placeholder")
    }

    /// Whether each key is a probe key marked (by a build key equal to it): `answers` gets one
    /// per key.
    pub(crate) fn contains_batch(&self, keys: &[&[u8]], answers: &mut Vec<bool>) {
        let mut places = self.places.borrow_mut();
        self.set().positions_batch(keys, &mut places);
        answers.clear();
        answers.extend(places.iter().map(|place| place.is_some_and(|at| self.words[at / 64] & (1 << (at % 64)) != 0)));
    }

    /// Probe keys marked, each once.
    pub(crate) fn marked(&self) -> u64 {
        self.words.iter().map(|w| w.count_ones() as u64).sum()
    }
}

impl Mergeable for Marks {
    fn word_count(&self) -> usize {
        self.words.len()
    }

    fn words_in(&self, range: Range<usize>) -> &[u64] {
        &self.words[range]
    }

    fn words_in_mut(&mut self, range: Range<usize>) -> &mut [u64] {
        &mut self.words[range]
    }

    fn merge_words(ours: &mut [u64], theirs: &[u64]) {
        ours.iter_mut().zip(theirs).for_each(|(o, t)| *o |= t);
    }
}

/// A build scan marks the probe keys its keys equal.
impl Partial for Marks {
    fn insert_batch(&mut self, keys: &[&[u8]]) -> crate::error::Result<()> {
        let places = self.places.get_mut();
        let set = self.set.as_deref().expect("marks of a set, not a placeholder");
        match self.ask_sketches {
            true => set.positions_batch_sketched(keys, places),
            false => set.positions_batch(keys, places),
        }
        let mut held = 0;
        for &at in places.iter().flatten() {
            self.words[at / 64] |= 1 << (at % 64);
            held += 1;
        }
        self.ask_sketches = held * 2 <= keys.len();
        Ok(())
    }

    fn placeholder() -> Self {
        Marks { set: None, words: vec![0], places: RefCell::new(Vec::new()), ask_sketches: false }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyset::KeyArena;

    /// The probe keys' set, with sketches of its long keys, as the job builds it.
    fn set_of(keys: &[&[u8]]) -> Arc<KeySet> {
        let mut arena = KeyArena::with_capacity(1 << 16);
        arena.push_all(keys);
        let pieces: Vec<&[u8]> = arena.pieces().into_iter().map(|piece| &arena.as_bytes()[piece]).collect();
        Arc::new(KeySet::from_partitions(vec![crate::keyset::PartitionBuilder::new(arena.counts(), 0, 1).sketching().build(&pieces)]))
    }

    /// A probe key is answered yes once a build key equal to it is marked, in this worker's
    /// marks or in another's merged into them; a key the set does not hold never is.
    #[test]
    fn marks_answer_for_the_probe_keys_a_build_key_equals() {
        let probe: Vec<Vec<u8>> = (0..3000u32).map(|i| if i % 3 == 0 { format!("{i}").into_bytes() } else { format!("a key of some length {i}").into_bytes() }).collect();
        let probe: Vec<&[u8]> = probe.iter().map(|k| &k[..]).collect();
        let set = set_of(&probe);
        let (mut ours, mut theirs) = (Marks::new(Arc::clone(&set), &mut || {}), Marks::new(Arc::clone(&set), &mut || {}));
        ours.insert_batch(&[probe[3], probe[10], b"not a probe key"]).unwrap();
        theirs.insert_batch(&[probe[2999], probe[10]]).unwrap();
        let mut answers = Vec::new();
        ours.contains_batch(&[probe[3], probe[10], probe[2999], probe[4], b"not a probe key"], &mut answers);
        assert_eq!(answers, [true, true, false, false, false]);
        let len = ours.word_count();
        Marks::merge_words(ours.words_in_mut(0..len), theirs.words_in(0..len));
        ours.contains_batch(&[probe[3], probe[10], probe[2999], probe[4], b"not a probe key"], &mut answers);
        assert_eq!(answers, [true, true, true, false, false]);
        assert_eq!(ours.marked(), 3);
        // The sketches are asked while most build keys of a batch are absent, and not once most
        // are held; the marks are the same either way.
        assert!(!ours.ask_sketches, "2 of 3 held");
        ours.insert_batch(&[probe[7], b"absent 1", b"absent 2"]).unwrap();
        assert!(ours.ask_sketches, "1 of 3 held");
        ours.insert_batch(&[probe[1], probe[5], b"not a probe key"]).unwrap();
        assert!(!ours.ask_sketches, "2 of 3 held");
        assert_eq!(ours.marked(), 6);
    }
}
