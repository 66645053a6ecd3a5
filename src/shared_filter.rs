//! One filter per process, filled by all its workers at once: the build's alternative to a
//! partial filter per worker when the filter is large.
//!
//! Each worker of a job usually fills a partial filter of its own, and the partials are OR-merged
//! (see [`allreduce`](crate::allreduce)). That holds one copy of the filter per worker: a 1 GiB
//! filter on a 32-core machine run with `-w 32` would need 32 GiB. A [`SharedFilter`] is one
//! copy per process instead: the workers set its bits with atomic ORs (a counting filter's
//! counters with compare-and-swaps), which need no lock and lose no insert whatever the order,
//! so the process's words are the merge of what its workers inserted, as the merged partials'
//! would be (an OR of bits, a saturating sum of counters). Between processes the merge is
//! unchanged: local worker i merges its local range of the shared words with its counterparts,
//! through [`LocalRange`].
//!
//! The atomics cost where the filter fits the cache: `build -w 2` of 20M keys took 1.10 s into
//! a shared 24 MB filter against 0.70 s in partials (medians of 5 interleaved runs). Past the
//! cache, where every insert misses it either way, sharing was as fast or faster (240 MB:
//! 1.29–2.31 s shared, 1.49–2.36 in partials; 1.8 GB: 5.0–5.8 and 7.1–12.3 s), and the memory is
//! one copy in place of one a worker. See [`FilterPer`].

use crate::allreduce::Mergeable;
use crate::counting::{insert_counts_into, CountCheck, CountEvery, CounterSink, CountingBloomFilter, COUNTERS_PER_WORD, COUNTER_MAX};
use crate::filter::{insert_batch_into, BitSink, BloomFilter};
use crate::format::StoredFilter;
use crate::hashing::{BlockKernel, BlockProbe};
use crate::spec::FilterSpec;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// How many copies of the filter a job's build holds: one per worker (partials, merged), or one
/// per process ([`SharedFilter`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FilterPer {
    /// Per process where the filter is large (at least [`SHARED_FROM_BYTES`]) or a copy per
    /// worker would not fit in the memory available, and the process has several workers;
    /// per worker otherwise.
    #[default]
    Auto,
    Worker,
    Process,
}

/// The filter size from which `auto` shares one filter among a process's workers: far past every
/// cache, where each insert misses it whether the filter is shared or not, and where a copy per
/// worker starts to weigh on a machine's memory.
pub const SHARED_FROM_BYTES: u64 = 1 << 30;

impl FilterPer {
    /// Whether a process of `workers` workers shares one filter of `bytes` bytes, with `available`
    /// bytes of memory.
    pub fn shares(self, bytes: u64, workers: usize, available: u64) -> bool {
        match self {
            FilterPer::Worker => false,
            FilterPer::Process => true,
            FilterPer::Auto => workers > 1 && (bytes >= SHARED_FROM_BYTES || bytes.saturating_mul(workers as u64) > available),
        }
    }
}

/// A filter (plain or counting) that the workers of a process insert into through shared
/// references.
///
/// Its words are reached through a raw pointer taken when it was made: atomically while
/// workers insert, then, once every insert is over, as plain words by one worker per range
/// ([`LocalRange`]) and at last whole by the worker that [`take`](Self::take)s the filter.
pub struct SharedFilter {
    /// The filter whose words the pointer reaches; taken out whole at the end.
    filter: Mutex<Option<StoredFilter>>,
    words: *mut u64,
    word_count: usize,
    spec: FilterSpec,
    kernel: BlockKernel,
    /// Its words are 4-bit counters, incremented (by compare-and-swap), not bits.
    counting: bool,
}

// SAFETY: the words are written by several threads only through atomic operations (`insert_batch`),
// and otherwise only under the exclusive access that the unsafe methods' callers promise.
unsafe impl Sync for SharedFilter {}
// SAFETY: the pointer reaches the heap block of the filter the struct owns.
unsafe impl Send for SharedFilter {}

impl SharedFilter {
    /// Shares `filter` (empty, or holding bits already) among the workers of a process.
    pub fn new(mut filter: BloomFilter) -> Self {
        let (spec, kernel) = (*filter.spec(), filter.kernel());
        let words = filter.bits_mut().words_mut();
        let (ptr, word_count) = (words.as_mut_ptr(), words.len());
        SharedFilter { filter: Mutex::new(Some(StoredFilter::Plain(filter))), words: ptr, word_count, spec, kernel, counting: false }
    }

    /// Shares the counting filter `filter` among the workers of a process.
    pub fn new_counting(mut filter: CountingBloomFilter) -> Self {
        let spec = *filter.spec();
        let words = filter.words_mut();
        let (ptr, word_count) = (words.as_mut_ptr(), words.len());
        let filter = Mutex::new(Some(StoredFilter::Counting(filter)));
        SharedFilter { filter, words: ptr, word_count, spec, kernel: BlockKernel::detect(), counting: true }
    }

    /// Whether its words are a counting filter's counters.
    pub fn is_counting(&self) -> bool {
        self.counting
    }

    /// The number of words.
    pub fn word_count(&self) -> usize {
        self.word_count
    }

    /// Inserts a batch of keys, as [`BloomFilter::insert_batch`] (or
    /// [`CountingBloomFilter::insert_batch`]) does, while other threads may insert theirs: each
    /// word is changed atomically. The insert count is not kept: the job sums its workers'.
    pub fn insert_batch(&self, keys: &[&[u8]]) {
        match self.counting {
            false => insert_batch_into(self.spec, self.kernel, &mut AtomicBits { words: self.words as *const AtomicU64 }, keys),
            true => {
                self.insert_counts_checked(keys, &mut CountEvery);
            }
        }
    }

    /// Counts the keys of a batch that `check` keeps, each hashed once for both, as
    /// [`CountingBloomFilter::insert_batch`] would count them, while other threads may count
    /// theirs. Returns how many it kept. The filter must be a counting one.
    pub(crate) fn insert_counts_checked(&self, keys: &[&[u8]], check: &mut impl CountCheck) -> u64 {
        assert!(self.counting, "only a counting filter's counts are checked");
        let words = self.words as *const AtomicU64;
        insert_counts_into(self.spec, &mut AtomicCounters { words, word_count: self.word_count }, keys, check)
    }

    /// The filter, whole, for the one worker that writes or shares it.
    ///
    /// # Safety
    /// Every insert and every [`LocalRange`] access must be over, and must happen before this
    /// call (a barrier between them); no insert and no range may be used after it.
    pub unsafe fn take(&self) -> Option<StoredFilter> {
        self.filter.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take()
    }

    /// A view of `range` of the words, for the merge between processes, whose words merge as
    /// `F`'s do: [`BloomFilter`] for a plain filter, [`CountingBloomFilter`] for a counting one
    /// (see [`is_counting`](Self::is_counting)).
    ///
    /// # Safety
    /// From the view's first use to its last, no insert may run, no other view may overlap
    /// `range`, and the filter may not be taken; the view must not be used after the filter is
    /// taken or dropped.
    pub unsafe fn local_range<F: Mergeable>(&self, range: Range<usize>) -> LocalRange<F> {
        assert!(range.end <= self.word_count, "a range inside the filter's words");
        LocalRange { words: self.words, word_count: self.word_count, range, merges_as: PhantomData }
    }
}

/// The shared words as a batched insert sets them: ORed atomically, a word at a time, each
/// word's new bits gathered first (a probe's k bits fall in one cache line, often two in a
/// word) and the OR skipped when they are all set already, as they more and more are.
struct AtomicBits {
    words: *const AtomicU64,
}

impl AtomicBits {
    #[inline(always)]
    fn or(&mut self, word: usize, mask: u64) {
        // SAFETY: `word` is that of a position below the filter's bit length, inside its words,
        // which outlive the insert (see `SharedFilter::take`).
        let word = unsafe { &*self.words.add(word) };
        if word.load(Ordering::Relaxed) & mask != mask {
            word.fetch_or(mask, Ordering::Relaxed);
        }
    }
}

impl BitSink for AtomicBits {
    #[inline(always)]
    fn lines(&self) -> *const u8 {
        self.words as *const u8
    }

    #[inline(always)]
    fn set_probe(&mut self, k: u32, probe: &BlockProbe) {
        let mut masks = [0u64; 8];
        probe.for_each_bit(k, |bit| masks[(bit >> 6) as usize] |= 1u64 << (bit & 63));
        for (i, &mask) in masks.iter().enumerate().filter(|(_, &mask)| mask != 0) {
            self.or(probe.block * 8 + i, mask);
        }
    }

    #[inline(always)]
    fn set(&mut self, pos: u64) {
        self.or((pos / 64) as usize, 1u64 << (pos % 64));
    }
}

/// The shared counters as a batched count increments them: each by a compare-and-swap of its
/// word, which fails and is tried again only when another worker changed the word meanwhile.
struct AtomicCounters {
    words: *const AtomicU64,
    word_count: usize,
}

impl CounterSink for AtomicCounters {
    fn words(&self) -> *const u64 {
        self.words as *const u64
    }

    fn word_count(&self) -> usize {
        self.word_count
    }

    #[inline(always)]
    fn increment(&mut self, pos: u64) {
        let shift = (pos % COUNTERS_PER_WORD) * 4;
        // SAFETY: `pos` is below the filter's counter count, its word inside the words, which
        // outlive the insert (see `SharedFilter::take`).
        let word = unsafe { &*self.words.add((pos / COUNTERS_PER_WORD) as usize) };
        let mut current = word.load(Ordering::Relaxed);
        // Saturated counters stay at 15.
        while (current >> shift) & 0xF < COUNTER_MAX as u64 {
            match word.compare_exchange_weak(current, current + (1 << shift), Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => current = now,
            }
        }
    }
}

/// One worker's range of a [`SharedFilter`]'s words, merged with the same range of the other
/// processes' filters by the all-reduce, as `F`'s words merge: the words outside the range are
/// never reached through it, so the workers of a process merge their ranges at the same time.
pub struct LocalRange<F> {
    words: *mut u64,
    word_count: usize,
    range: Range<usize>,
    merges_as: PhantomData<fn() -> F>,
}

impl<F> LocalRange<F> {
    /// The words `within`, which must lie inside the view's range.
    fn slice(&self, within: Range<usize>) -> (*mut u64, usize) {
        assert!(self.range.start <= within.start && within.end <= self.range.end, "words {within:?} outside the worker's range {:?}", self.range);
        // SAFETY: inside the filter's words (checked when the view was made).
        (unsafe { self.words.add(within.start) }, within.len())
    }
}

impl<F: Mergeable> Mergeable for LocalRange<F> {
    fn word_count(&self) -> usize {
        self.word_count
    }

    fn words_in(&self, range: Range<usize>) -> &[u64] {
        let (ptr, len) = self.slice(range);
        // SAFETY: no other thread writes the view's range while it is used (`local_range`).
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }

    fn words_in_mut(&mut self, range: Range<usize>) -> &mut [u64] {
        let (ptr, len) = self.slice(range);
        // SAFETY: no other thread reads or writes the view's range while it is used.
        unsafe { std::slice::from_raw_parts_mut(ptr, len) }
    }

    fn merge_words(ours: &mut [u64], theirs: &[u64]) {
        F::merge_words(ours, theirs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashing::{HadoopHash, Scheme};
    use crate::spec::Layout;

    /// Inserts each list of keys from a thread of its own, all at once, in batches of `batch`.
    fn insert_from_threads(shared: &SharedFilter, keys: &[Vec<String>], batch: usize) {
        std::thread::scope(|scope| {
            for ours in keys {
                scope.spawn(move || {
                    let ours: Vec<&[u8]> = ours.iter().map(|k| k.as_bytes()).collect();
                    ours.chunks(batch).for_each(|batch| shared.insert_batch(batch));
                });
            }
        });
    }

    /// The plain filter taken from a shared one.
    fn plain(taken: Option<StoredFilter>) -> BloomFilter {
        match taken {
            Some(StoredFilter::Plain(filter)) => filter,
            _ => panic!("a plain filter, taken once"),
        }
    }

    /// Counters that many threads increment at once saturate at 15, as one thread's do.
    #[test]
    fn shared_counters_saturate_as_one_threads_do() {
        let spec = FilterSpec::native(512 * 4, 3, 0).expect("valid");
        let key: &[u8] = b"often";
        let shared = SharedFilter::new_counting(CountingBloomFilter::new(spec));
        std::thread::scope(|scope| {
            for _ in 0..4 {
                let shared = &shared;
                scope.spawn(move || (0..10).for_each(|_| shared.insert_batch(&[key])));
            }
        });
        let mut expected = CountingBloomFilter::new(spec);
        (0..40).for_each(|_| expected.insert(key));
        // SAFETY: the threads are joined; nothing else uses the filter.
        let Some(StoredFilter::Counting(got)) = (unsafe { shared.take() }) else { panic!("a counting filter") };
        assert_eq!(got.words(), expected.words());
        assert_eq!(got.approximate_count(key), 15);
    }

    /// Threads inserting into one shared filter at once set the same bits as one filter that
    /// took every key, for both layouts and the foreign schemes, with every kernel.
    #[test]
    fn threads_inserting_at_once_set_the_bits_of_one_filter_of_every_key() {
        let keys: Vec<Vec<String>> = (0..3).map(|t| (0..20_000).map(|i| format!("key-{t}-{i}")).collect()).collect();
        let specs = [
            FilterSpec::native_for(60_000, 0.01, 7).expect("valid"),
            FilterSpec::with_layout(Scheme::Native, Layout::Blocked, 7, 512 * 1200, 5).expect("valid"),
            FilterSpec::with_layout(Scheme::NativeLookup3, Layout::Standard, 7, 600_000, 5).expect("valid"),
            FilterSpec::new(Scheme::Hadoop(HadoopHash::Jenkins), 0, 600_000, 5).expect("valid"),
            FilterSpec::new(Scheme::Hadoop(HadoopHash::Murmur), 0, 600_000, 5).expect("valid"),
            FilterSpec::new(Scheme::SparkV2, 3, 600_000 / 64 * 64, 5).expect("valid"),
        ];
        for spec in specs {
            for kernel in [BlockKernel::Portable, BlockKernel::Avx2, BlockKernel::Avx512] {
                let mut expected = BloomFilter::new(spec).with_kernel(kernel);
                keys.iter().flatten().for_each(|k| expected.insert(k.as_bytes()));
                let shared = SharedFilter::new(BloomFilter::new(spec).with_kernel(kernel));
                insert_from_threads(&shared, &keys, 1000);
                // SAFETY: the threads are joined; nothing else uses the filter.
                let got = plain(unsafe { shared.take() });
                assert_eq!(got.bits().words(), expected.bits().words(), "{spec:?} {kernel:?}");
                // SAFETY: as above.
                assert!(unsafe { shared.take() }.is_none(), "taken once only");

                let mut expected = CountingBloomFilter::new(spec);
                keys.iter().flatten().for_each(|k| expected.insert(k.as_bytes()));
                let shared = SharedFilter::new_counting(CountingBloomFilter::new(spec));
                insert_from_threads(&shared, &keys, 1000);
                // SAFETY: as above.
                let Some(StoredFilter::Counting(got)) = (unsafe { shared.take() }) else { panic!("a counting filter") };
                assert_eq!(got.words(), expected.words(), "counting {spec:?} {kernel:?}");
            }
        }
    }

    /// Threads that insert at once into a filter of few cache lines, often into the same word
    /// at the same moment, lose no bit: every round gives the bits of one filter of all keys.
    /// (With a plain load and store in place of the atomic OR, rounds lose bits.)
    #[test]
    fn threads_racing_for_the_same_words_lose_no_bit() {
        let spec = FilterSpec::with_layout(Scheme::NativeLookup3, Layout::Blocked, 1, 512 * 16, 2).expect("valid");
        for round in 0..20 {
            let keys: Vec<Vec<String>> = (0..4).map(|t| (0..1500).map(|i| format!("{round}-{t}-{i}")).collect()).collect();
            let mut expected = BloomFilter::new(spec);
            keys.iter().flatten().for_each(|k| expected.insert(k.as_bytes()));
            let shared = SharedFilter::new(BloomFilter::new(spec));
            insert_from_threads(&shared, &keys, 1);
            // SAFETY: the threads are joined; nothing else uses the filter.
            let got = plain(unsafe { shared.take() });
            assert_eq!(got.bits().words(), expected.bits().words(), "round {round}");
        }
    }

    /// `auto` shares a filter of 1 GiB or more, or one whose copies would not fit, and only
    /// among several workers; the other choices are as asked.
    #[test]
    fn auto_shares_a_large_filter_or_one_whose_copies_would_not_fit() {
        let gib = 1u64 << 30;
        assert!(!FilterPer::Auto.shares(24 << 20, 2, u64::MAX));
        assert!(FilterPer::Auto.shares(gib, 2, u64::MAX));
        assert!(!FilterPer::Auto.shares(gib, 1, u64::MAX), "one worker has no one to share with");
        assert!(FilterPer::Auto.shares(100 << 20, 4, 300 << 20), "four copies would not fit");
        assert!(!FilterPer::Auto.shares(100 << 20, 2, 300 << 20), "two copies fit");
        assert!(FilterPer::Process.shares(1, 1, u64::MAX));
        assert!(!FilterPer::Worker.shares(8 * gib, 32, 0));
    }

    /// A local range reads and writes its own words only, and refuses others.
    #[test]
    fn a_local_range_reaches_its_own_words_only() {
        let spec = FilterSpec::native(64 * 100, 3, 0).expect("valid");
        let shared = SharedFilter::new(BloomFilter::new(spec));
        {
            // SAFETY: no insert runs, and the one view is gone before the filter is taken.
            let mut view = unsafe { shared.local_range::<BloomFilter>(10..20) };
            assert_eq!(view.word_count(), 100);
            view.words_in_mut(12..14).copy_from_slice(&[1, 2]);
            assert_eq!(view.words_in(10..20)[2..4], [1, 2]);
            let outside = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| view.words_in(5..12).len()));
            assert!(outside.is_err(), "a range outside the view was reached");
        }
        // SAFETY: as above.
        let filter = plain(unsafe { shared.take() });
        assert_eq!(filter.bits().words()[12..14], [1, 2]);
        assert_eq!(filter.bits().count_ones(), 2);
    }
}
