//! The counting Bloom filter: a 4-bit counter per position instead of a bit, so that keys can be
//! removed. Counters saturate at 15; a saturated counter is never decremented, since it may stand
//! for more inserts than it can count (decrementing it could create a false negative).

use crate::bits::BitArray;
use crate::error::{Error, Result};
use crate::filter::BloomFilter;
use crate::records::KeyForm;
use crate::hashing::{BlockKernel, BlockProbe};
use crate::spec::{FilterSpec, Layout, BLOCK_BITS};

/// Largest value a counter holds.
pub const COUNTER_MAX: u8 = 15;
pub(crate) const COUNTERS_PER_WORD: u64 = 16;

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
        Self::with_words(spec, crate::limits::zeroed_huge(words_for_counters(spec.bits) as usize))
    }

    /// An empty counting filter for a job's partial, calling `tick` as it zeroes it, in 4 KiB
    /// pages (see [`crate::limits::zeroed_written_ticking`]). Its pages are written before the
    /// first insert reads them: read first, a page maps the kernel's zero page, and the insert's
    /// write then flushed every CPU's TLB entry for it (in a 2-worker build of 20M keys into
    /// 120 MB of counters, a quarter of the time went to that and to faulting pages in).
    pub fn new_partial(spec: FilterSpec, tick: &mut dyn FnMut()) -> Self {
        Self::with_words(spec, crate::limits::zeroed_written_ticking(words_for_counters(spec.bits) as usize, tick))
    }

    /// An empty counting filter for the workers of a process to share
    /// ([`SharedFilter`](crate::shared_filter::SharedFilter)), zeroed by `threads` threads at
    /// once, as the partials it stands for would be.
    pub fn new_shared(spec: FilterSpec, threads: usize) -> Self {
        Self::with_words(spec, crate::limits::zeroed_huge_parallel(words_for_counters(spec.bits) as usize, threads))
    }

    fn with_words(spec: FilterSpec, words: Vec<u64>) -> Self {
        CountingBloomFilter {
            spec,
            words,
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
        let mut counters = Counters(&mut self.words);
        self.spec.positions(key).for_each(|pos| counters.increment(pos));
        self.items_inserted += 1;
    }

    /// False means `key` is definitely not a member.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.spec.positions(key).all(|pos| self.counter(pos) > 0)
    }

    /// How many times `key` may have been inserted, as Hadoop's `approximateCount` answers: the
    /// smallest of its k counters (0: definitely not a member; 15: 15 or more, the counters
    /// being saturated). Never less than the true count of a key inserted and not removed.
    pub fn approximate_count(&self, key: &[u8]) -> u8 {
        self.spec.positions(key).map(|pos| self.counter(pos)).min().unwrap_or(0)
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
        add_counters(&mut self.words, &other.words);
        self.items_inserted += other.items_inserted;
        Ok(())
    }

    /// Keeps each counter at the smaller of its own and `other`'s: a filter that may hold only
    /// the keys both may hold (of the same identity). A key inserted into both keeps a count of
    /// at least one at each of its positions, and removing it later leaves every other such
    /// key's counts whole, since each key in both adds one to both counters. (Hadoop's
    /// `CountingBloomFilter.and` ANDs the counters' bits instead, which can leave a count no key
    /// gave: 2 AND 1 is 0, and a key in both then answers "no".)
    pub fn intersect(&mut self, other: &CountingBloomFilter) -> Result<()> {
        self.spec.check_compatible(&other.spec)?;
        self.key_form = crate::filter::joint_key_form(self.key_form, other.key_form)?;
        for (ours, &theirs) in self.words.iter_mut().zip(&other.words) {
            *ours = min_nibbles(*ours, theirs);
        }
        self.items_inserted = self.items_inserted.min(other.items_inserted);
        Ok(())
    }

    /// Takes the counts of `removals` (a counting filter of the keys to remove, of the same
    /// identity) out of this filter's counters: what [`remove`](Self::remove) of each of those
    /// keys does, in any order, when it succeeds for them all. Saturated counters stay at 15. A
    /// counter that holds fewer than the removals count (the removals' own saturated counters
    /// count 15 or more) is refused with [`Error::Undercount`], and nothing changes: removing the
    /// keys one by one would have found some key's counter at zero, whatever the order.
    pub fn subtract(&mut self, removals: &CountingBloomFilter) -> Result<()> {
        self.spec.check_compatible(&removals.spec)?;
        crate::filter::joint_key_form(self.key_form, removals.key_form)?;
        let pairs = || self.words.iter().zip(&removals.words).enumerate();
        if let Some((i, lane)) = pairs().find_map(|(i, (&ours, &theirs))| subtract_nibbles(ours, theirs).err().map(|lane| (i, lane))) {
            let counter = (i as u64) * COUNTERS_PER_WORD + lane as u64;
            return Err(Error::Undercount { counter, holds: self.counter(counter), removing: removals.counter(counter) });
        }
        for (ours, &theirs) in self.words.iter_mut().zip(&removals.words) {
            *ours = subtract_nibbles(*ours, theirs).expect("checked above");
        }
        self.items_inserted = self.items_inserted.saturating_sub(removals.items_inserted);
        Ok(())
    }

    /// Inserts every key of a batch (as the jobs' scans hand them over), as [`insert`] of each
    /// in turn would. A large filter's counters are cache misses: the positions of a group of
    /// keys are computed and their words prefetched while the group before is counted, so that
    /// the misses overlap (a `-w 1` build of 2M keys into 12 MiB of counters, three runs of
    /// each: 0.57–0.72 s one key at a time, 0.26–0.31 s batched).
    ///
    /// [`insert`]: CountingBloomFilter::insert
    pub fn insert_batch(&mut self, keys: &[&[u8]]) {
        self.insert_batch_checked(keys, &mut CountEvery);
    }

    /// [`insert_batch`](Self::insert_batch) of the keys of a batch that `check` keeps, each
    /// hashed once for both.
    pub(crate) fn insert_batch_checked(&mut self, keys: &[&[u8]], check: &mut impl CountCheck) {
        self.items_inserted += insert_counts_into(self.spec, &mut Counters(&mut self.words), keys, check);
    }

    /// Records the (n, p) this filter was sized for, reported by `info`.
    pub fn sized_for(mut self, n: u64, p: f64) -> Self {
        self.expected_items = n;
        self.target_fpp = p;
        self
    }

    /// Sets the count of keys inserted (the jobs sum their workers' counts).
    pub fn set_items_inserted(&mut self, n: u64) {
        self.items_inserted = n;
    }

    /// How many counters are above zero: the bits set of [`to_bloom_filter`], counted without
    /// making it.
    ///
    /// [`to_bloom_filter`]: CountingBloomFilter::to_bloom_filter
    pub fn counters_set(&self) -> u64 {
        self.words.iter().map(|&w| above_zero_marks(w).count_ones() as u64).sum()
    }

    /// The estimated false-positive rate of the plain filter of its counters above zero
    /// ([`BloomFilter::estimated_fpp`] of [`to_bloom_filter`]), without making it.
    ///
    /// [`to_bloom_filter`]: CountingBloomFilter::to_bloom_filter
    pub fn estimated_fpp(&self) -> f64 {
        match self.spec.layout {
            Layout::Standard => crate::params::fpp_from_fill(self.counters_set() as f64 / self.spec.bits as f64, self.spec.hashes),
            Layout::Blocked => {
                let words_per_block = (BLOCK_BITS / COUNTERS_PER_WORD) as usize;
                let blocks = self.words.chunks(words_per_block).map(|block| block.iter().map(|&w| above_zero_marks(w).count_ones()).sum());
                crate::filter::blocked_fpp(self.spec.hashes, blocks)
            }
        }
    }

    /// How many counters are saturated (at 15): they are never decremented, so a key whose
    /// counters all saturated cannot be removed, and answers `maybe` for good.
    pub fn saturated_counters(&self) -> u64 {
        // Bit 4i of the AND is set where all four bits of counter i are (the padding is zeros).
        self.words.iter().map(|&w| (w & w >> 1 & w >> 2 & w >> 3 & 0x1111_1111_1111_1111).count_ones() as u64).sum()
    }

    /// This filter as one of a `factor`-th of its counters would be, had every key been
    /// inserted there instead, as [`BloomFilter::folded`] folds bits: each counter of the result
    /// is the saturating sum of the counters that fold onto it. A counter holds min(15, n) for
    /// the n increments at its position, and min(15, Σ min(15, nᵢ)) = min(15, Σ nᵢ), so the
    /// result is counter for counter the filter of that size (`--bits`, `--hashes`). None where
    /// the bits cannot fold by `factor` (see [`BloomFilter::folded`]).
    pub fn folded(&self, factor: u64) -> Option<CountingBloomFilter> {
        let spec = self.spec;
        let folded_spec = crate::filter::folded_spec(spec, factor)?;
        let target = |pos: u64| match spec.layout {
            _ if !spec.scheme.is_native() => pos % folded_spec.bits,
            Layout::Blocked => pos / BLOCK_BITS / factor * BLOCK_BITS + pos % BLOCK_BITS,
            Layout::Standard => pos / factor,
        };
        let mut folded = CountingBloomFilter::with_words(folded_spec, vec![0; words_for_counters(folded_spec.bits) as usize]);
        // Where each word's 16 counters fold onto one word's (a block's words onto its fold's;
        // a remainder's, its size whole words), the words are added sixteen counters at once.
        let folded_words = words_for_counters(folded_spec.bits) as usize;
        let words_per_block = (BLOCK_BITS / COUNTERS_PER_WORD) as usize;
        let by_words = match spec.layout {
            _ if !spec.scheme.is_native() => folded_spec.bits.is_multiple_of(COUNTERS_PER_WORD),
            Layout::Blocked => true,
            Layout::Standard => false,
        };
        let word_target = |i: usize| match spec.layout {
            _ if !spec.scheme.is_native() => i % folded_words,
            _ => i / words_per_block / factor as usize * words_per_block + i % words_per_block,
        };
        // A filter worth folding is mostly zeros: only its words, or counters, above zero are
        // visited.
        for (i, &word) in self.words.iter().enumerate().filter(|(_, &word)| word != 0) {
            if by_words {
                let at = &mut folded.words[word_target(i)];
                *at = saturating_add_nibbles(*at, word);
                continue;
            }
            let mut marks = above_zero_marks(word);
            while marks != 0 {
                let lane = marks.trailing_zeros() as u64;
                let pos = i as u64 * COUNTERS_PER_WORD + lane / 4;
                let at = target(pos);
                let sum = (folded.counter(at) + ((word >> lane) & 0xF) as u8).min(COUNTER_MAX);
                folded.set_counter(at, sum);
                marks &= marks - 1;
            }
        }
        folded.items_inserted = self.items_inserted;
        (folded.expected_items, folded.target_fpp, folded.key_form) = (self.expected_items, self.target_fpp, self.key_form);
        Some(folded)
    }

    /// The plain filter with a bit set wherever a counter is non-zero.
    pub fn to_bloom_filter(&self) -> BloomFilter {
        // Four words of counters make one word of bits, 16 bits each.
        let words: Vec<u64> = self.words.chunks(4).map(|four| four.iter().rev().fold(0, |bits, &w| bits << 16 | non_zero_counters(w))).collect();
        let bits = BitArray::from_words(words, self.spec.bits);
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
    /// The counters' words, for the jobs' merge of partials: only merges of whole filters'
    /// counters keep them meaningful.
    pub(crate) fn words_mut(&mut self) -> &mut [u64] {
        &mut self.words
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

/// Where a batched count increments its counters: a filter's own words ([`Counters`]), or a
/// process's filter that all its workers fill at once
/// ([`SharedFilter`](crate::shared_filter::SharedFilter), by compare-and-swap).
pub(crate) trait CounterSink {
    /// The counters' words, for prefetching only.
    fn words(&self) -> *const u64;
    fn word_count(&self) -> usize;
    /// Increments counter `pos`, saturating at 15.
    fn increment(&mut self, pos: u64);
    /// Increments the k counters of a blocked-layout probe, each saturating at 15.
    #[inline(always)]
    fn increment_probe(&mut self, probe: &BlockProbe, k: u32) {
        let base = probe.block as u64 * BLOCK_BITS;
        probe.for_each_bit(k, |bit| self.increment(base + bit as u64));
    }
}

/// A counting filter's own words, incremented in place.
struct Counters<'a>(&'a mut [u64]);

impl CounterSink for Counters<'_> {
    #[inline(always)]
    fn words(&self) -> *const u64 {
        self.0.as_ptr()
    }

    fn word_count(&self) -> usize {
        self.0.len()
    }

    #[inline(always)]
    fn increment(&mut self, pos: u64) {
        increment_in_word(&mut self.0[(pos / COUNTERS_PER_WORD) as usize], pos % COUNTERS_PER_WORD);
    }

    /// The block's words bounds-checked once, not once a counter (`subtract -w 1` of 2M keys,
    /// callgrind: 1,106.2M instructions before, 1,053.8M after).
    #[inline(always)]
    fn increment_probe(&mut self, probe: &BlockProbe, k: u32) {
        const BLOCK_WORDS: usize = (BLOCK_BITS / COUNTERS_PER_WORD) as usize;
        let block: &mut [u64; BLOCK_WORDS] = (&mut self.0[probe.block * BLOCK_WORDS..][..BLOCK_WORDS]).try_into().expect("a block's words");
        probe.for_each_bit(k, |bit| {
            let bit = bit as u64;
            increment_in_word(&mut block[(bit / COUNTERS_PER_WORD) as usize % BLOCK_WORDS], bit % COUNTERS_PER_WORD);
        });
    }
}

/// Increments counter `lane` (0..16) of `word`, saturating at 15.
#[inline(always)]
fn increment_in_word(word: &mut u64, lane: u64) {
    let shift = lane * 4;
    if (*word >> shift) & 0xF < COUNTER_MAX as u64 {
        *word += 1 << shift;
    }
}

/// Which keys of a batched count are counted, asked once their positions are computed: so that
/// a job that checks its keys against a filter of the same identity first (`subtract`, whose
/// keys must be in the filter they are removed from) hashes each key once for both.
pub(crate) trait CountCheck {
    /// Which keys of the batch to count, their blocked-layout probes being `probes`: key i
    /// where the answer's item i is true; `None` for all of them.
    fn keeps_probes(&mut self, probes: &[BlockProbe]) -> Option<&[bool]>;
    /// Whether to count key `i` of the batch, whose positions are `positions`.
    fn keeps_positions(&mut self, i: usize, positions: &[u64]) -> bool;
}

/// Counts every key: the batched insert.
pub(crate) struct CountEvery;

impl CountCheck for CountEvery {
    #[inline(always)]
    fn keeps_probes(&mut self, _: &[BlockProbe]) -> Option<&[bool]> {
        None
    }

    #[inline(always)]
    fn keeps_positions(&mut self, _: usize, _: &[u64]) -> bool {
        true
    }
}

/// The batched count of a counting filter of identity `spec` into `sink` (see
/// [`CountingBloomFilter::insert_batch`]), of the keys `check` keeps. Returns how many it kept.
pub(crate) fn insert_counts_into<S: CounterSink>(spec: FilterSpec, sink: &mut S, keys: &[&[u8]], check: &mut impl CountCheck) -> u64 {
    if spec.layout == Layout::Blocked && spec.scheme.is_native() {
        return insert_blocked_counts(spec, sink, keys, check);
    }
    const GROUP: usize = 16;
    let k = spec.hashes as usize;
    let (mut counting, mut next) = (Vec::new(), Vec::new());
    let mut groups = keys.chunks(GROUP);
    let (words, word_count) = (sink.words(), sink.word_count());
    let positions_of = |group: Option<&[&[u8]]>, into: &mut Vec<u64>| {
        into.clear();
        for key in group.into_iter().flatten() {
            for pos in spec.positions(key) {
                prefetch_word(words, word_count, (pos / COUNTERS_PER_WORD) as usize);
                into.push(pos);
            }
        }
    };
    positions_of(groups.next(), &mut counting);
    let (mut first, mut kept) = (0, 0);
    while !counting.is_empty() {
        positions_of(groups.next(), &mut next);
        debug_assert_eq!(counting.len() % k, 0, "k positions a key");
        for (i, positions) in (first..).zip(counting.chunks_exact(k)) {
            if check.keeps_positions(i, positions) {
                positions.iter().for_each(|&pos| sink.increment(pos));
                kept += 1;
            }
        }
        first += counting.len() / k;
        std::mem::swap(&mut counting, &mut next);
    }
    kept
}

/// [`insert_counts_into`] in the blocked layout, where a key's k counters lie in one block of
/// 512 (4 cache lines): the keys' probes are computed first, hashed a group at a time in vectors
/// as a plain filter's are, then each probe's lines are prefetched a group of probes ahead of
/// its count. A build of the 20M-row probe into 95 MiB of counters, to the merged filter
/// (medians of 3): `-w 1` 2.42 -> 2.13 s, `-w 2` 1.36 -> 1.29 s against the positions' iterator
/// key by key; the whole `-w 2` job 1.64 -> 1.38 s (5 interleaved). What is left waits on
/// memory: a key's counters span 3.3 of the block's 4 lines on average, and `perf` puts most
/// samples on the prefetches, whose misses fill the CPU's buffers (an L2 hint instead measured
/// the same).
fn insert_blocked_counts<S: CounterSink>(spec: FilterSpec, sink: &mut S, keys: &[&[u8]], check: &mut impl CountCheck) -> u64 {
    const AHEAD: usize = 16;
    let mut probes = Vec::with_capacity(keys.len());
    crate::filter::block_probes(spec, BlockKernel::detect(), keys, &mut probes);
    let k = spec.hashes;
    let keep = check.keeps_probes(&probes);
    for (i, probe) in probes.iter().enumerate() {
        if let Some(ahead) = probes.get(i + AHEAD) {
            prefetch_block_lines(sink, ahead, k);
        }
        if keep.is_none_or(|keep| keep[i]) {
            sink.increment_probe(probe, k);
        }
    }
    keep.map_or(probes.len(), |keep| keep.iter().filter(|&&kept| kept).count()) as u64
}

/// Prefetches the cache lines of a block (128 counters each) that a probe's counters lie in.
#[inline(always)]
fn prefetch_block_lines<S: CounterSink>(sink: &S, probe: &BlockProbe, k: u32) {
    const COUNTERS_PER_LINE: u32 = 128;
    let mut lines = 0u32;
    probe.for_each_bit(k, |bit| lines |= 1 << (bit / COUNTERS_PER_LINE));
    let first_word = probe.block * (BLOCK_BITS / COUNTERS_PER_WORD) as usize;
    while lines != 0 {
        let line = lines.trailing_zeros() as usize;
        prefetch_word(sink.words(), sink.word_count(), first_word + line * (COUNTERS_PER_LINE as usize / COUNTERS_PER_WORD as usize));
        lines &= lines - 1;
    }
}

/// Prefetches word `i` of the `count` words at `words`, if there is one.
#[inline(always)]
fn prefetch_word(words: *const u64, count: usize, i: usize) {
    if i < count {
        prefetch(words.wrapping_add(i));
    }
}

/// Asks the CPU to bring the cache line of `word` in, without waiting for it.
#[inline(always)]
fn prefetch(word: *const u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching has no effect on memory and faults on no address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(word as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = word;
}

/// Adds the counters of `theirs` into `ours`, word by word, each saturating at 15: the merge
/// of two counting filters' words (and of the jobs' partials).
pub(crate) fn add_counters(ours: &mut [u64], theirs: &[u64]) {
    for (a, &b) in ours.iter_mut().zip(theirs) {
        *a = saturating_add_nibbles(*a, b);
    }
}

/// Adds sixteen 4-bit lanes at once, each saturating at 15, without a loop over the lanes: the
/// even and the odd lanes are added in the bytes of a word each (a sum is at most 30, so no
/// byte carries into the next), and a byte whose sum passed 15 is set to 15.
fn saturating_add_nibbles(a: u64, b: u64) -> u64 {
    const LOW: u64 = 0x0F0F_0F0F_0F0F_0F0F;
    let saturate = |sums: u64| {
        // 0x70 added to a byte of 16 or more sets its top bit: 1 in each byte past 15.
        let over = ((sums + 0x7070_7070_7070_7070) & 0x8080_8080_8080_8080) >> 7;
        (sums | (over * 0x0F)) & LOW
    };
    saturate((a & LOW) + (b & LOW)) | saturate(((a >> 4) & LOW) + ((b >> 4) & LOW)) << 4
}

/// The smaller of each pair of sixteen 4-bit lanes, at once. As in [`subtract_nibbles`], the
/// even and the odd lanes go in the bytes of a word each, `a`'s with bit 4 set: that bit
/// survives subtracting `b`'s lane exactly where `a`'s is at least as large, and picks `b`'s.
fn min_nibbles(a: u64, b: u64) -> u64 {
    const LOW: u64 = 0x0F0F_0F0F_0F0F_0F0F;
    const ENOUGH: u64 = 0x1010_1010_1010_1010;
    let smaller = |a: u64, b: u64| {
        let take_b = ((((a | ENOUGH) - b) & ENOUGH) >> 4) * 0x0F;
        (a & !take_b) | (b & take_b)
    };
    smaller(a & LOW, b & LOW) | smaller((a >> 4) & LOW, (b >> 4) & LOW) << 4
}

/// Subtracts sixteen 4-bit lanes at once, where `ours` is not saturated (15 stays 15), or says
/// which lane would go below zero. As in [`saturating_add_nibbles`], the even and the odd lanes
/// go in the bytes of a word each, each byte with bit 4 set first: that bit survives the
/// subtraction exactly where the lane held enough, and no byte borrows from the next.
fn subtract_nibbles(ours: u64, theirs: u64) -> std::result::Result<u64, u32> {
    const LOW: u64 = 0x0F0F_0F0F_0F0F_0F0F;
    const ENOUGH: u64 = 0x1010_1010_1010_1010;
    let saturated = (ours & ours >> 1 & ours >> 2 & ours >> 3 & 0x1111_1111_1111_1111) * 0xF;
    let theirs = theirs & !saturated;
    let even = ((ours & LOW) | ENOUGH) - (theirs & LOW);
    let odd = (((ours >> 4) & LOW) | ENOUGH) - ((theirs >> 4) & LOW);
    // Bit 4i set where lane i lacks: an even lane's flag moved down to its lane's first bit.
    let short = ((!even & ENOUGH) >> 4) | (!odd & ENOUGH);
    if short != 0 {
        return Err(short.trailing_zeros() / 4);
    }
    Ok((even & LOW) | (odd & LOW) << 4)
}

/// Bit 4i set where counter i of `word` is not zero (any of its bits set), the others clear:
/// as many bits as counters above zero (the padding past m is zeros).
#[inline]
fn above_zero_marks(word: u64) -> u64 {
    (word | word >> 1 | word >> 2 | word >> 3) & 0x1111_1111_1111_1111
}

/// The 16 counters of a word as 16 bits, bit i set where counter i is not zero.
fn non_zero_counters(word: u64) -> u64 {
    // The marks 4 apart packed together, halving the gaps at each step.
    let mut x = above_zero_marks(word);
    x = (x | x >> 3) & 0x0303_0303_0303_0303;
    x = (x | x >> 6) & 0x000F_000F_000F_000F;
    x = (x | x >> 12) & 0x0000_00FF_0000_00FF;
    (x | x >> 24) & 0xFFFF
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> CountingBloomFilter {
        CountingBloomFilter::new(FilterSpec::native(1000, 4, 0).unwrap())
    }

    /// A counting filter folded by 2, 3, 4, 6 or 8 (those that divide its size) is, counter for
    /// counter, the counting filter of that fraction of its size built from the same keys,
    /// saturated counters included (a tenth of the keys go in 20 times): both native schemes in
    /// both layouts and both Hadoop hashes; a factor that does not divide it is not folded.
    #[test]
    fn a_folded_counting_filter_is_the_smaller_filter_of_the_same_keys() {
        use crate::hashing::{HadoopHash, Scheme};
        let keys: Vec<Vec<u8>> = (0..3_000u32).flat_map(|i| std::iter::repeat_n(format!("key {i}").into_bytes(), if i % 10 == 0 { 20 } else { 1 })).collect();
        let keys: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        let cases = [
            (Scheme::Native, Layout::Standard),
            (Scheme::Native, Layout::Blocked),
            (Scheme::NativeLookup3, Layout::Standard),
            (Scheme::NativeLookup3, Layout::Blocked),
            (Scheme::Hadoop(HadoopHash::Jenkins), Layout::Standard),
            (Scheme::Hadoop(HadoopHash::Murmur), Layout::Standard),
        ];
        for (scheme, layout) in cases {
            let filled = |bits: u64| {
                let mut filter = CountingBloomFilter::new(FilterSpec::with_size(scheme, layout, bits, 5, if scheme.is_native() { 3 } else { 0 }).unwrap());
                filter.insert_batch(&keys);
                filter
            };
            // (A size whose folds are not whole words of counters as well, but for blocks.)
            let sizes: &[u64] = if layout == Layout::Blocked { &[512 * 48] } else { &[512 * 48, 8 * 3_073] };
            for &bits in sizes {
                let big = filled(bits);
                assert!(big.saturated_counters() > 0, "{scheme:?} {layout:?}: some counters saturate");
                let units = if layout == Layout::Blocked { bits / BLOCK_BITS } else { bits };
                for factor in [2, 3, 4, 6, 8].into_iter().filter(|f| units.is_multiple_of(*f)) {
                    let folded = big.folded(factor).expect("a factor of the size");
                    let direct = filled(bits / factor);
                    assert_eq!(folded.spec(), direct.spec(), "{scheme:?} {layout:?} {bits} / {factor}");
                    assert!(folded.words() == direct.words(), "{scheme:?} {layout:?} {bits} / {factor}");
                    assert_eq!(folded.items_inserted(), big.items_inserted());
                }
                assert!(big.folded(5).is_none() && big.folded(1).is_none(), "{scheme:?} {layout:?}");
            }
        }
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

    /// Random words, with lanes near the saturation point often, in every lane.
    fn words(seed: u64) -> impl Iterator<Item = (u64, u64)> {
        let mut rng = crate::xorshift::XorShift::new(seed);
        (0..100_000).map(move |round| {
            let (a, b) = (rng.next(), rng.next());
            // Every fourth pair: lanes of 7 or 8 in both, sums of 14, 15 and 16 (where
            // saturation starts).
            let near = |x: u64| 0x7777_7777_7777_7777 + (x & 0x1111_1111_1111_1111);
            if round % 4 == 0 { (near(a), near(b)) } else { (a, b) }
        })
    }

    /// The word-at-once addition equals adding lane by lane and saturating each.
    #[test]
    fn nibble_add_equals_the_lane_by_lane_sum() {
        let by_lane = |a: u64, b: u64| (0..16).fold(0u64, |out, lane| out | (((a >> (4 * lane)) & 0xF) + ((b >> (4 * lane)) & 0xF)).min(15) << (4 * lane));
        for (a, b) in words(0x1234_5678_9ABC_DEF1) {
            assert_eq!(saturating_add_nibbles(a, b), by_lane(a, b), "{a:#018x} + {b:#018x}");
        }
    }

    /// The word-at-once minimum equals the lane-by-lane one, equal lanes too.
    #[test]
    fn nibble_min_equals_the_lane_by_lane_minimum() {
        let by_lane = |a: u64, b: u64| (0..16).fold(0u64, |out, lane| out | (((a >> (4 * lane)) & 0xF).min((b >> (4 * lane)) & 0xF)) << (4 * lane));
        for (a, b) in words(0x0DD5_EED5_1234_0001) {
            for (x, y) in [(a, b), (b, a), (a, a), (a, a ^ 0x1111_1111_1111_1111)] {
                assert_eq!(min_nibbles(x, y), by_lane(x, y), "min({x:#018x}, {y:#018x})");
            }
        }
    }

    /// The intersection of two counting filters answers "maybe" for every key inserted into
    /// both, however often, and keeps doing so as such keys are removed one by one; it holds
    /// no count either filter lacks.
    #[test]
    fn intersect_keeps_the_keys_of_both_through_removals() {
        let spec = FilterSpec::native(4000, 4, 3).unwrap();
        let (mut a, mut b) = (CountingBloomFilter::new(spec), CountingBloomFilter::new(spec));
        let both: Vec<String> = (0..150).map(|i| format!("both{i}")).collect();
        for (i, k) in both.iter().enumerate() {
            // Counts that differ between the two: once in one, up to three times in the other.
            (0..1 + i % 3).for_each(|_| a.insert(k.as_bytes()));
            b.insert(k.as_bytes());
        }
        (0..150).for_each(|i| a.insert(format!("a only {i}").as_bytes()));
        (0..150).for_each(|i| b.insert(format!("b only {i}").as_bytes()));
        let mut both_filter = a.clone();
        both_filter.intersect(&b).unwrap();
        for counter in 0..spec.bits {
            assert!(both_filter.counter(counter) <= a.counter(counter).min(b.counter(counter)));
        }
        for (i, k) in both.iter().enumerate() {
            assert!(both.iter().skip(i).all(|k| both_filter.contains(k.as_bytes())), "after {i} removals");
            both_filter.remove(k.as_bytes()).unwrap();
        }
        let other = CountingBloomFilter::new(FilterSpec::native(1000, 4, 3).unwrap());
        assert!(both_filter.intersect(&other).is_err());
    }

    /// The word-at-once subtraction equals subtracting lane by lane: saturated lanes kept, the
    /// first lane that lacks named.
    #[test]
    fn nibble_subtraction_equals_the_lane_by_lane_difference() {
        let by_lane = |a: u64, b: u64| {
            let mut out = 0u64;
            for lane in 0..16u32 {
                let (x, y) = ((a >> (4 * lane)) & 0xF, (b >> (4 * lane)) & 0xF);
                let left = if x == 15 { 15 } else { x.checked_sub(y).ok_or(lane)? };
                out |= left << (4 * lane);
            }
            Ok(out)
        };
        for (a, b) in words(0x005E_ED0F_5AB7_4AC7) {
            // Pairs whose every lane holds enough too, or not just enough in one lane.
            let fewer = |x: u64| (0..16).fold(0u64, |out, lane| out | (((x >> (4 * lane)) & 0xF).min((b >> (4 * lane)) & 0xF)) << (4 * lane));
            for (ours, theirs) in [(a, b), (b, fewer(a)), (b, fewer(a) + (1u64 << (4 * (a % 16))) * ((a >> (4 * (a % 16))) & 0xF < 15) as u64)] {
                assert_eq!(subtract_nibbles(ours, theirs), by_lane(ours, theirs), "{ours:#018x} - {theirs:#018x}");
            }
        }
    }

    /// Subtracting a counting filter of keys equals removing them one by one; a filter of keys
    /// that were never all inserted is refused, naming the counter, and changes nothing.
    #[test]
    fn subtract_equals_removing_each_key() {
        let spec = FilterSpec::native(2000, 4, 9).unwrap();
        let (mut one_by_one, mut removals) = (CountingBloomFilter::new(spec), CountingBloomFilter::new(spec));
        let keys: Vec<String> = (0..300).map(|i| format!("key{}", i % 120)).collect();
        keys.iter().for_each(|k| one_by_one.insert(k.as_bytes()));
        let mut subtracted = one_by_one.clone();
        for k in keys.iter().step_by(3) {
            one_by_one.remove(k.as_bytes()).unwrap();
            removals.insert(k.as_bytes());
        }
        subtracted.subtract(&removals).unwrap();
        assert_eq!(subtracted.words(), one_by_one.words());
        assert_eq!(subtracted.items_inserted(), one_by_one.items_inserted());

        // Every key removed once more than inserted: some counter runs out.
        let before = subtracted.clone();
        let mut too_many = CountingBloomFilter::new(spec);
        keys.iter().chain(&keys).for_each(|k| too_many.insert(k.as_bytes()));
        let err = subtracted.subtract(&too_many).unwrap_err();
        let Error::Undercount { counter, holds, removing } = err else { panic!("{err}") };
        assert!(holds < removing && holds == before.counter(counter) && removing == too_many.counter(counter), "{err}");
        assert_eq!(subtracted.words(), before.words());
        assert!(subtracted.subtract(&CountingBloomFilter::new(FilterSpec::native(2000, 3, 9).unwrap())).is_err());
    }

    /// The counters above zero, counted in place, are the plain filter's bits and the counters
    /// read one by one, with counters at every value up to saturation; the estimated rate is
    /// the plain filter's, to the bit.
    #[test]
    fn counters_set_counts_the_counters_above_zero() {
        for layout in [Layout::Standard, Layout::Blocked] {
            let mut f = CountingBloomFilter::new(FilterSpec::with_size(crate::hashing::Scheme::NativeLookup3, layout, 4096, 4, 1).unwrap());
            assert_eq!(f.counters_set(), 0);
            // Key i inserted i % 20 times: counters from 1 to past 15.
            (0..300u32).for_each(|i| (0..i % 20).for_each(|_| f.insert(&i.to_le_bytes())));
            let by_counter = (0..f.spec().bits).filter(|&i| f.counter(i) > 0).count() as u64;
            assert!(by_counter > 0 && f.saturated_counters() > 0);
            assert_eq!((f.counters_set(), f.to_bloom_filter().bits_set()), (by_counter, by_counter), "{layout:?}");
            assert_eq!(f.estimated_fpp().to_bits(), f.to_bloom_filter().estimated_fpp().to_bits(), "{layout:?}");
        }
    }

    /// The packed bits of a word's non-zero counters equal the counters tested one by one.
    #[test]
    fn non_zero_counters_marks_each_counter_above_zero() {
        for (a, b) in words(0x0FED_CBA9_8765_4321) {
            // Sparse words too: few lanes non-zero.
            for word in [a, a & b, a & b & a.rotate_left(17)] {
                let by_lane = (0..16).fold(0u64, |bits, lane| bits | (((word >> (4 * lane)) & 0xF != 0) as u64) << lane);
                assert_eq!(non_zero_counters(word), by_lane, "{word:#018x}");
            }
        }
    }

    /// A batch's inserts count as the keys inserted one by one do, in batches of every size
    /// around the group's, with keys repeated so that counters saturate, in both layouts.
    #[test]
    fn insert_batch_counts_as_inserts_one_by_one() {
        for layout in [crate::spec::Layout::Standard, crate::spec::Layout::Blocked] {
            let spec = FilterSpec::with_size(crate::hashing::Scheme::NativeLookup3, layout, 4096, 5, 3).unwrap();
            let keys: Vec<String> = (0..3000).map(|i| format!("k{}", i % 170)).collect();
            let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
            let mut one_by_one = CountingBloomFilter::new(spec);
            keys.iter().for_each(|k| one_by_one.insert(k));
            for batch in [1, 15, 16, 17, 33, 1000, 3000] {
                let mut batched = CountingBloomFilter::new(spec);
                keys.chunks(batch).for_each(|chunk| batched.insert_batch(chunk));
                assert!(batched == one_by_one, "{layout:?}, batches of {batch}");
            }
            assert!(one_by_one.words.iter().any(|w| (0..16).any(|lane| w >> (4 * lane) & 0xF == 15)), "no counter saturated");
        }
    }

    /// Keeps the keys of a batch whose index is not a multiple of 3, asked by probes or by
    /// positions as the count computes them.
    struct EveryThirdSkipped(Vec<bool>);

    impl CountCheck for EveryThirdSkipped {
        fn keeps_probes(&mut self, probes: &[BlockProbe]) -> Option<&[bool]> {
            self.0 = (0..probes.len()).map(|i| !i.is_multiple_of(3)).collect();
            Some(&self.0)
        }

        fn keeps_positions(&mut self, i: usize, _: &[u64]) -> bool {
            !i.is_multiple_of(3)
        }
    }

    /// A checked batch counts exactly the keys its check keeps, as inserting those one by one
    /// does, in batches of every size around the groups', for the blocked layout's probes and
    /// the standard layout's positions (native and Hadoop), and reports how many it kept.
    #[test]
    fn insert_batch_checked_counts_the_kept_keys_only() {
        use crate::hashing::{HadoopHash, Scheme};
        use crate::spec::Layout;
        for (scheme, layout) in [(Scheme::NativeLookup3, Layout::Blocked), (Scheme::NativeLookup3, Layout::Standard), (Scheme::Hadoop(HadoopHash::Jenkins), Layout::Standard)] {
            let seed = if scheme.is_native() { 3 } else { 0 };
            let spec = FilterSpec::with_size(scheme, layout, 4096, 5, seed).unwrap();
            let keys: Vec<String> = (0..3000).map(|i| format!("k{}", i % 170)).collect();
            let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
            for batch in [1, 15, 16, 17, 33, 1000] {
                let (mut checked, mut one_by_one) = (CountingBloomFilter::new(spec), CountingBloomFilter::new(spec));
                keys.chunks(batch).for_each(|chunk| checked.insert_batch_checked(chunk, &mut EveryThirdSkipped(Vec::new())));
                keys.chunks(batch).flat_map(|chunk| chunk.iter().skip(1).step_by(3).chain(chunk.iter().skip(2).step_by(3))).for_each(|k| one_by_one.insert(k));
                assert!(checked.words == one_by_one.words, "{scheme} {layout:?}, batches of {batch}");
                let kept: usize = keys.chunks(batch).map(|chunk| (0..chunk.len()).filter(|i| !i.is_multiple_of(3)).count()).sum();
                assert_eq!(checked.items_inserted(), kept as u64, "{scheme} {layout:?}, batches of {batch}");
            }
        }
    }

    /// The saturated counters are those at 15, counted one by one, however the keys repeat.
    #[test]
    fn saturated_counters_counts_the_counters_at_15() {
        let spec = FilterSpec::with_size(crate::hashing::Scheme::NativeLookup3, crate::spec::Layout::Standard, 1000, 4, 1).unwrap();
        let mut f = CountingBloomFilter::new(spec);
        for round in 0..40 {
            for key in 0..(200 / (round + 1)) {
                f.insert(format!("k{key}").as_bytes());
            }
            let by_counter = (0..spec.bits).filter(|&i| f.counter(i) == COUNTER_MAX).count() as u64;
            assert_eq!(f.saturated_counters(), by_counter, "round {round}");
        }
        assert!(f.saturated_counters() > 0);
    }

    /// The plain filter of a counting filter answers as the filter of the same inserts does,
    /// bit for bit, for sizes that end inside a word of counters and of bits.
    #[test]
    fn to_bloom_filter_equals_the_plain_filter_of_the_same_keys() {
        for bits in [1u64, 15, 16, 17, 63, 64, 65, 1000, 4099] {
            // (A blocked filter's size is rounded up to whole blocks.)
            for layout in [crate::spec::Layout::Standard, crate::spec::Layout::Blocked] {
                let spec = FilterSpec::with_size(crate::hashing::Scheme::NativeLookup3, layout, bits, 3, 7).unwrap();
                let (mut counting, mut plain) = (CountingBloomFilter::new(spec), BloomFilter::new(spec));
                for i in 0..bits / 3 {
                    let key = format!("key{i}");
                    counting.insert(key.as_bytes());
                    plain.insert(key.as_bytes());
                }
                assert_eq!(counting.to_bloom_filter().bits(), plain.bits(), "{bits} bits, {layout:?}");
            }
        }
    }
}
