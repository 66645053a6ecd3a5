//! The merge of partial filters (OR for bits, saturating addition for a counting filter's
//! counters: see [`Mergeable`]) as a bandwidth-optimal all-reduce, hierarchical: first
//! through shared memory between the workers of each process, then on timely between processes.
//!
//! Local worker i of every process owns word range i of the bit array (its *local range*). The
//! workers of a process first OR their partials' words of each local range into the partial of
//! the range's owner ([`LocalMerge::reduce`]). Between processes, the local range i is cut again
//! among the processes' workers of index i: each sends each counterpart its piece of the range
//! (reduce-scatter) in bounded chunks; the counterpart ORs them into its partial, whose piece
//! then holds the global bits, and sends its piece to the counterparts that need the global
//! filter (gather). Last, the workers of a receiving process copy the local ranges they lack
//! from their siblings ([`LocalMerge::gather`]): the writer for the build job, every worker for
//! the semi-join. Only words of one process's merged partial cross the network: about 2·m bits
//! per process whatever its worker count (a flat all-reduce over all workers sent about 2·m per
//! worker). The reduce-scatter goes in rounds, and an owner sends each round's words on as soon
//! as that round is complete, so the gather overlaps the rest of the scatter (2 processes, a 24 MB
//! filter: about 17 -> 16 ms, two interleaved series of 9 and 11). The result is the same OR,
//! bit for bit, for any number of workers or processes.

use crate::bits::or_words;
use crate::counting::CountingBloomFilter;
use crate::filter::BloomFilter;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::ops::Range;
use std::rc::Rc;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Barrier;
use crate::messages::OneAtATime;
use timely::dataflow::channels::pact::ExchangeCore;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::Stream;

/// A partial filter the all-reduce merges, as an array of words and how two partials' words
/// combine. Both combinations are associative and commutative, so the merged words are the same
/// whatever the number of workers and processes, and whichever merged first.
pub trait Mergeable {
    /// The number of words.
    fn word_count(&self) -> usize;
    /// The words of `range`. The all-reduce reaches the words by ranges only, so that a worker
    /// may hold a view of its own range of a filter its process shares
    /// ([`LocalRange`](crate::shared_filter::LocalRange)).
    fn words_in(&self, range: Range<usize>) -> &[u64];
    fn words_in_mut(&mut self, range: Range<usize>) -> &mut [u64];
    /// Merges `theirs` into `ours`, word by word (both of one length).
    fn merge_words(ours: &mut [u64], theirs: &[u64]);
}

/// A plain filter's bits merge by OR.
impl Mergeable for BloomFilter {
    fn word_count(&self) -> usize {
        self.bits().words().len()
    }

    fn words_in(&self, range: Range<usize>) -> &[u64] {
        &self.bits().words()[range]
    }

    fn words_in_mut(&mut self, range: Range<usize>) -> &mut [u64] {
        &mut self.bits_mut().words_mut()[range]
    }

    fn merge_words(ours: &mut [u64], theirs: &[u64]) {
        or_words(ours, theirs);
    }
}

/// A counting filter's counters add, saturating at 15: the counters of the inserts of both.
impl Mergeable for CountingBloomFilter {
    fn word_count(&self) -> usize {
        self.words().len()
    }

    fn words_in(&self, range: Range<usize>) -> &[u64] {
        &self.words()[range]
    }

    fn words_in_mut(&mut self, range: Range<usize>) -> &mut [u64] {
        &mut self.words_mut()[range]
    }

    fn merge_words(ours: &mut [u64], theirs: &[u64]) {
        crate::counting::add_counters(ours, theirs);
    }
}

/// Words per message: 256 KiB, so no message is a giant allocation. Between processes, timely's
/// send buffers are 1 MiB: a 1 MiB payload plus its header outgrew them, and every message took a
/// fresh 2 MiB buffer. With 256 KiB a 2-process build of a 24 MB filter took 294 ms where it took
/// 315 (median of 9, interleaved); in one process it makes no difference.
pub const CHUNK_WORDS: usize = 1 << 15;

/// A run of filter words addressed to one worker.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Slice {
    /// The receiving worker.
    pub to: u32,
    /// Index of the first word.
    pub offset: u64,
    #[serde(with = "crate::messages::words_as_bytes")]
    pub words: Vec<u64>,
}

/// Routes each slice to its `to` worker, one message per slice.
fn to_receiver() -> ExchangeCore<OneAtATime<Slice>, impl FnMut(&Slice) -> u64 + 'static> {
    ExchangeCore::new_core(|s: &Slice| s.to as u64)
}

/// Who receives the merged filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gather {
    /// One worker (the build job's writer).
    To(usize),
    /// Every worker (the semi-join's broadcast).
    All,
}

impl Gather {
    /// Whether `worker` receives the global filter.
    pub fn receives(self, worker: usize) -> bool {
        match self {
            Gather::To(w) => w == worker,
            Gather::All => true,
        }
    }
}

/// The workers of a job as timely numbers them: worker g is local worker g % local of process
/// g / local. It says which words each worker merges at each level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Topology {
    pub processes: usize,
    /// Workers per process.
    pub local: usize,
}

impl Topology {
    fn peers(self) -> usize {
        self.processes * self.local
    }

    fn process_of(self, worker: usize) -> usize {
        worker / self.local
    }

    /// The worker's index among its process's workers.
    pub fn local_index(self, worker: usize) -> usize {
        worker % self.local
    }

    fn worker(self, process: usize, local_index: usize) -> usize {
        process * self.local + local_index
    }

    /// The words worker `owner` merges between processes: its process's piece of its local
    /// range (the whole local range when there is one process).
    pub fn owned(self, owner: usize, words: usize) -> Range<usize> {
        let local = owned_range(self.local_index(owner), self.local, words);
        let piece = owned_range(self.process_of(owner), self.processes, local.len());
        local.start + piece.start..local.start + piece.end
    }

    /// The workers that exchange words with `worker` between processes: those of its local
    /// index in every other process.
    fn counterparts(self, worker: usize) -> impl Iterator<Item = usize> {
        let (me, i) = (self.process_of(worker), self.local_index(worker));
        (0..self.processes).filter(move |&p| p != me).map(move |p| self.worker(p, i))
    }

    /// Whether any worker of `worker`'s process receives the global filter.
    pub fn process_receives(self, worker: usize, gather: Gather) -> bool {
        match gather {
            Gather::To(w) => self.process_of(w) == self.process_of(worker),
            Gather::All => true,
        }
    }

    /// The counterparts that `owner` sends its merged words to: those of the receiving
    /// processes (each then holds the global words of its local range).
    fn gather_counterparts(self, owner: usize, gather: Gather) -> impl Iterator<Item = usize> {
        self.counterparts(owner).filter(move |&w| self.process_receives(w, gather))
    }
}

/// The word range worker `owner` of `peers` merges: an even cut of `words`.
pub fn owned_range(owner: usize, peers: usize, words: usize) -> Range<usize> {
    let cut = |i: usize| ((i as u128 * words as u128) / peers as u128) as usize;
    cut(owner)..cut(owner + 1)
}

/// Chunks sent to each owner per reduce-scatter round: the rounds bound the memory in flight
/// (2 MiB per peer) while keeping their number, each a progress round trip, small (32 per round
/// measured no faster).
pub const ROUND_CHUNKS: usize = 8;

/// The words of `owner`'s range that reduce-scatter round `round` carries (and that are final,
/// merged from every process, once the round is complete): the round's [`ROUND_CHUNKS`] chunks
/// of the range, empty past its end.
pub fn round_words(topology: Topology, owner: usize, words: usize, round: usize) -> Range<usize> {
    let range = topology.owned(owner, words);
    let first = (range.start + round * ROUND_CHUNKS * CHUNK_WORDS).min(range.end);
    first..(first + ROUND_CHUNKS * CHUNK_WORDS).min(range.end)
}

/// The slices that carry `words[range]` to worker `to`, a chunk each.
fn chunks_to(filter: &impl Mergeable, range: Range<usize>, to: usize) -> impl Iterator<Item = Slice> + '_ {
    range.clone().step_by(CHUNK_WORDS).map(move |start| {
        let end = (start + CHUNK_WORDS).min(range.end);
        Slice { to: to as u32, offset: start as u64, words: filter.words_in(start..end).to_vec() }
    })
}

/// The slices worker `me` sends in reduce-scatter round `round`: at most [`ROUND_CHUNKS`]
/// chunks to each counterpart. Empty once every chunk has been sent.
pub fn scatter_round(filter: &impl Mergeable, topology: Topology, me: usize, round: usize) -> Vec<Slice> {
    let words = filter.word_count();
    topology.counterparts(me).flat_map(|owner| chunks_to(filter, round_words(topology, owner, words, round), owner)).collect()
}

/// Rounds needed to scatter every chunk (the same for every worker).
pub fn scatter_rounds(topology: Topology, words: usize) -> usize {
    (0..topology.peers()).map(|o| topology.owned(o, words).len().div_ceil(CHUNK_WORDS * ROUND_CHUNKS)).max().unwrap_or(0)
}

/// The reduce-scatter and gather steps as timely operators.
pub trait BloomMerge<'scope> {
    /// Merges each slice into the receiving owner's partial; as each round completes, sends the
    /// owner's words that round made final to its counterparts in the processes that `gather`
    /// names.
    fn bloom_merge<P: Mergeable + 'static>(self, filter: Rc<RefCell<P>>, gather: Gather, topology: Topology) -> Self;
    /// Copies each merged range into the receiving worker's filter. The (empty) output stream
    /// lets a probe tell when every range has arrived.
    fn bloom_collect<P: Mergeable + 'static>(self, filter: Rc<RefCell<P>>) -> Self;
}

impl<'scope> BloomMerge<'scope> for Stream<'scope, u64, Vec<Slice>> {
    fn bloom_merge<P: Mergeable + 'static>(self, filter: Rc<RefCell<P>>, gather: Gather, topology: Topology) -> Self {
        let me = self.scope().index();
        self.unary_frontier::<OneAtATime<Slice>, _, _, _>(to_receiver(), "BloomMerge", move |cap, _info| {
            let mut cap = Some(cap);
            // Rounds whose merged words have gone to the receivers.
            let mut gathered = 0usize;
            move |(input, frontier), output| {
                input.for_each(|_time, data| {
                    let mut f = filter.borrow_mut();
                    for slice in data.drain(..) {
                        let start = slice.offset as usize;
                        P::merge_words(f.words_in_mut(start..start + slice.words.len()), &slice.words);
                    }
                });
                let Some(c) = cap.as_mut() else { return };
                // Slices of round r travel at time r: the rounds before the frontier are
                // complete, and every round once the frontier is empty.
                let frontier_min = frontier.frontier().iter().min().copied();
                if let Some(t) = frontier_min.filter(|t| c.time() < t) {
                    // Track the input, so that a probe downstream sees each round complete.
                    c.downgrade(&t);
                }
                let complete = frontier_min.map_or(usize::MAX, |t| t as usize);
                if complete > gathered {
                    // The words of the rounds just completed are final: send them on now, while
                    // later rounds are still being scattered.
                    let f = filter.borrow();
                    let words = f.word_count();
                    let first = round_words(topology, me, words, gathered).start;
                    let last = match complete {
                        usize::MAX => topology.owned(me, words).end,
                        next => round_words(topology, me, words, next).start,
                    };
                    let mut session = output.session_with_builder(c);
                    for to in topology.gather_counterparts(me, gather) {
                        for slice in chunks_to(&*f, first..last, to) {
                            session.give(slice);
                        }
                    }
                    gathered = complete;
                }
                if complete == usize::MAX {
                    cap = None;
                }
            }
        })
    }

    fn bloom_collect<P: Mergeable + 'static>(self, filter: Rc<RefCell<P>>) -> Self {
        self.unary::<OneAtATime<Slice>, _, _, _>(to_receiver(), "BloomCollect", move |_cap, _info| {
            move |input, _output| {
                input.for_each(|_time, data| {
                    let mut f = filter.borrow_mut();
                    for slice in data.drain(..) {
                        let start = slice.offset as usize;
                        f.words_in_mut(start..start + slice.words.len()).copy_from_slice(&slice.words);
                    }
                });
            }
        })
    }
}

/// The merge among the workers of one process, through their shared memory: each worker merges
/// the other partials' words of its own local range straight into its partial ([`reduce`]), and each
/// worker that receives the global filter copies the other ranges from their owners' partials
/// ([`gather`]). No word is copied into a message. Timely's exchange copied each round's words
/// into messages and back: on two workers of one process, 14–18 ms for a 24 MB filter after the
/// scans, in 8 rounds of about 2 ms.
///
/// Every worker of the process calls each phase once with its partial (after a failed scan too,
/// so that none waits forever at a barrier); all partials have the same size.
///
/// [`reduce`]: LocalMerge::reduce
/// [`gather`]: LocalMerge::gather
pub struct LocalMerge {
    /// Each worker's words, while a phase runs.
    partials: Vec<AtomicPtr<u64>>,
    /// Each partial's length in words: all must be equal.
    lengths: Vec<AtomicUsize>,
    barrier: Barrier,
}

impl LocalMerge {
    pub fn new(workers: usize) -> Self {
        LocalMerge {
            partials: (0..workers).map(|_| AtomicPtr::new(std::ptr::null_mut())).collect(),
            lengths: (0..workers).map(|_| AtomicUsize::new(0)).collect(),
            barrier: Barrier::new(workers),
        }
    }

    /// The workers of the process.
    pub fn workers(&self) -> usize {
        self.partials.len()
    }

    /// Waits until every worker of the process has called it: for the merge of a filter they
    /// share, whose inserts must all be over before any worker merges its range.
    pub fn wait(&self) {
        self.barrier.wait();
    }

    /// Merges the partial `filter` of local worker `me` with its siblings': afterwards it holds
    /// the process's filter where `me` receives it (see [`Gather`]), and otherwise its own
    /// range of it. The whole merge of a job of one process.
    pub fn merge<P: Mergeable>(&self, me: usize, filter: &mut P, gather: Gather) {
        self.reduce(me, filter);
        self.gather(me, filter, gather.receives(me));
    }

    /// Local worker `me` merges every sibling's words of its local range into its own partial's.
    pub fn reduce<P: Mergeable>(&self, me: usize, filter: &mut P) {
        // Worker w writes only its own range of its own partial, which no other worker reads
        // in this phase; it reads range w of the others, which no worker writes.
        self.phase(me, filter, |ptrs, range_of| {
            let mine = range_of(me);
            // SAFETY: `mine` lies inside this worker's partial; no other thread touches it now.
            let merged = unsafe { std::slice::from_raw_parts_mut(ptrs[me].add(mine.start), mine.len()) };
            for (_, &p) in ptrs.iter().enumerate().filter(|&(w, _)| w != me) {
                // SAFETY: each other partial has as many words and stays alive until the
                // phase's last barrier; its range `mine` is written by no one in this phase.
                let theirs = unsafe { std::slice::from_raw_parts(p.add(mine.start), mine.len()) };
                P::merge_words(merged, theirs);
            }
        });
    }

    /// Where `receives`, local worker `me` copies every sibling's local range from the
    /// sibling's partial into the same range of its own. Every worker of the process calls it,
    /// receiver or not.
    pub fn gather<P: Mergeable>(&self, me: usize, filter: &mut P, receives: bool) {
        // A receiver writes only ranges of its own partial that are not its own range, which
        // no worker reads in this phase; every worker reads only owners' own ranges, which no
        // worker writes.
        self.phase(me, filter, |ptrs, range_of| {
            if receives {
                for (owner, &p) in ptrs.iter().enumerate().filter(|&(w, _)| w != me) {
                    let range = range_of(owner);
                    // SAFETY: as above; `range` lies inside both partials, and the two differ.
                    unsafe { std::ptr::copy_nonoverlapping(p.add(range.start), ptrs[me].add(range.start), range.len()) };
                }
            }
        });
    }

    /// Publishes this worker's words, waits for every sibling's, runs `work` on them all, and
    /// waits for every sibling to finish before the partial may be used again.
    fn phase<P: Mergeable>(&self, me: usize, filter: &mut P, work: impl FnOnce(&[*mut u64], &dyn Fn(usize) -> Range<usize>)) {
        let workers = self.workers();
        let n = filter.word_count();
        let words = filter.words_in_mut(0..n);
        // From here to the last barrier this worker's words are reached through raw pointers
        // only, each worker writing only where no other reads (see the SAFETY notes).
        self.partials[me].store(words.as_mut_ptr(), Ordering::Release);
        self.lengths[me].store(n, Ordering::Release);
        self.barrier.wait();
        let ptrs: Vec<*mut u64> = self.partials.iter().map(|p| p.load(Ordering::Acquire)).collect();
        assert!(self.lengths.iter().all(|l| l.load(Ordering::Acquire) == n), "every worker's partial has the same size");
        work(&ptrs, &|owner| owned_range(owner, workers, n));
        // No worker may go on (and change or free its partial, or publish it for the next
        // phase) while another still reads it.
        self.barrier.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads merging their partials through shared memory get the OR of all of them: the
    /// receivers whole, the others in their own range.
    #[test]
    fn a_local_merge_gives_the_or_of_the_partials() {
        let spec = crate::spec::FilterSpec::native(100_000, 3, 7).expect("valid");
        for workers in [1, 2, 3] {
            for gather in [Gather::All, Gather::To(0)] {
                let keys = |w: usize| (0..1000).map(move |i| format!("{w}-{i}"));
                let mut expected = BloomFilter::new(spec);
                let partials: Vec<BloomFilter> = (0..workers)
                    .map(|w| {
                        let mut f = BloomFilter::new(spec);
                        keys(w).for_each(|k| {
                            f.insert(k.as_bytes());
                            expected.insert(k.as_bytes());
                        });
                        f
                    })
                    .collect();
                let merge = LocalMerge::new(workers);
                let merged: Vec<BloomFilter> = std::thread::scope(|s| {
                    let handles: Vec<_> = partials
                        .into_iter()
                        .enumerate()
                        .map(|(w, mut f)| {
                            let merge = &merge;
                            s.spawn(move || {
                                merge.merge(w, &mut f, gather);
                                f
                            })
                        })
                        .collect();
                    handles.into_iter().map(|h| h.join().expect("no panic")).collect()
                });
                let all = expected.bits().words();
                for (w, f) in merged.iter().enumerate() {
                    let words = f.bits().words();
                    if gather.receives(w) {
                        assert_eq!(words, all, "{workers} workers, {gather:?}, receiver {w}");
                    } else {
                        let range = owned_range(w, workers, all.len());
                        assert_eq!(words[range.clone()], all[range], "{workers} workers, {gather:?}, worker {w}");
                    }
                }
            }
        }
    }

    /// The merge of processes of several workers, played out in one thread with the topology's
    /// own ranges and sends: every receiver ends with the OR of all partials, and between
    /// processes each word leaves each process once in the reduce-scatter ((P − 1)·n words in
    /// all, where a flat all-reduce over P·W workers sent (P·W − 1)·n).
    #[test]
    fn a_hierarchical_merge_gives_the_or_and_sends_each_word_once_per_process() {
        let mut rng = crate::xorshift::XorShift::new(0xB10F);
        // 40M bits: 625,000 words, several reduce-scatter rounds.
        for (bits, shapes) in [(100_000, &[(2, 1), (2, 2), (3, 2), (2, 3), (4, 3)][..]), (40_000_000, &[(2, 2), (3, 2)][..])] {
            let spec = crate::spec::FilterSpec::native(bits, 3, 7).expect("valid");
            for &(processes, local) in shapes {
                let topology = Topology { processes, local };
                let mut partials: Vec<BloomFilter> = (0..topology.peers()).map(|_| BloomFilter::new(spec)).collect();
                let mut expected = vec![0u64; partials[0].bits().words().len()];
                for f in &mut partials {
                    for (w, e) in f.bits_mut().words_mut().iter_mut().zip(&mut expected) {
                        *w = rng.next() & rng.next() & rng.next();
                        *e |= *w;
                    }
                }
                let n = expected.len();
                let words_of = |partials: &[BloomFilter], w: usize, r: Range<usize>| partials[w].bits().words()[r].to_vec();
                // Within each process, local worker i ORs its siblings' local range i.
                for worker in 0..topology.peers() {
                    let range = owned_range(topology.local_index(worker), local, n);
                    let first = worker - topology.local_index(worker);
                    for sibling in (first..first + local).filter(|&s| s != worker) {
                        let theirs = words_of(&partials, sibling, range.clone());
                        or_words(&mut partials[worker].bits_mut().words_mut()[range.clone()], &theirs);
                    }
                }
                // Between processes: the reduce-scatter, round by round, then the gather.
                let mut scattered = 0;
                for round in 0..scatter_rounds(topology, n) {
                    let slices: Vec<Slice> = (0..topology.peers()).flat_map(|me| scatter_round(&partials[me], topology, me, round)).collect();
                    for slice in slices {
                        let (to, start) = (slice.to as usize, slice.offset as usize);
                        assert!(topology.owned(to, n).contains(&start), "{topology:?}: a slice for worker {to} outside its range");
                        scattered += slice.words.len();
                        or_words(&mut partials[to].bits_mut().words_mut()[start..start + slice.words.len()], &slice.words);
                    }
                }
                assert_eq!(scattered, (processes - 1) * n, "{topology:?}: words scattered between processes");
                for gather in [Gather::All, Gather::To(0), Gather::To(topology.peers() - 1)] {
                    let mut merged = partials.clone();
                    for owner in 0..topology.peers() {
                        let range = topology.owned(owner, n);
                        for to in topology.gather_counterparts(owner, gather) {
                            let words = words_of(&partials, owner, range.clone());
                            merged[to].bits_mut().words_mut()[range.clone()].copy_from_slice(&words);
                        }
                    }
                    // Within each receiving process, receivers copy their siblings' local ranges.
                    let after_network = merged.clone();
                    for worker in (0..topology.peers()).filter(|&w| topology.process_receives(w, gather) && gather.receives(w)) {
                        let first = worker - topology.local_index(worker);
                        for sibling in (first..first + local).filter(|&s| s != worker) {
                            let range = owned_range(topology.local_index(sibling), local, n);
                            let words = words_of(&after_network, sibling, range.clone());
                            merged[worker].bits_mut().words_mut()[range].copy_from_slice(&words);
                        }
                    }
                    for worker in (0..topology.peers()).filter(|&w| gather.receives(w)) {
                        assert!(merged[worker].bits().words() == expected, "{topology:?}, {gather:?}: receiver {worker}");
                    }
                }
            }
        }
    }

    #[test]
    fn owned_ranges_cover_the_words_exactly() {
        for peers in 1..7 {
            for words in [0, 1, 5, 64, 1000] {
                let mut next = 0;
                for o in 0..peers {
                    let r = owned_range(o, peers, words);
                    assert_eq!(r.start, next);
                    next = r.end;
                }
                assert_eq!(next, words);
            }
        }
    }
}
