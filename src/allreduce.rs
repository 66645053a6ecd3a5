//! The OR-merge of partial filters as a bandwidth-optimal all-reduce on timely.
//!
//! Worker w owns word range w of the bit array. Every worker sends each owner its slice of that
//! range (reduce-scatter) in bounded chunks; the owner ORs them into its own partial, whose range
//! then holds the global bits. Owners send their merged range to whoever needs the global filter
//! (gather): the writer for the build job, every worker for the semi-join. The reduce-scatter goes
//! in rounds, and an owner sends each round's words on as soon as that round is complete, so the
//! gather overlaps the rest of the scatter (2 processes, a 24 MB filter: about 17 -> 16 ms, two
//! interleaved series of 9 and 11; in one process no change). Per-worker traffic stays
//! about 2·m bits whatever the worker count, and the result is the same OR, bit for bit, for any
//! number of workers or processes.

use crate::bits::or_words;
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
    fn receivers(self, peers: usize) -> Range<usize> {
        match self {
            Gather::To(w) => w..w + 1,
            Gather::All => 0..peers,
        }
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
/// merged from every peer, once the round is complete): the round's [`ROUND_CHUNKS`] chunks of
/// the range, empty past its end.
pub fn round_words(owner: usize, peers: usize, words: usize, round: usize) -> Range<usize> {
    let range = owned_range(owner, peers, words);
    let first = (range.start + round * ROUND_CHUNKS * CHUNK_WORDS).min(range.end);
    first..(first + ROUND_CHUNKS * CHUNK_WORDS).min(range.end)
}

/// The slices that carry `words[range]` to worker `to`, a chunk each.
fn chunks_to(words: &[u64], range: Range<usize>, to: usize) -> impl Iterator<Item = Slice> + '_ {
    range.clone().step_by(CHUNK_WORDS).map(move |start| {
        let end = (start + CHUNK_WORDS).min(range.end);
        Slice { to: to as u32, offset: start as u64, words: words[start..end].to_vec() }
    })
}

/// The slices worker `me` sends in reduce-scatter round `round`: at most [`ROUND_CHUNKS`]
/// chunks to each other owner. Empty once every chunk has been sent.
pub fn scatter_round(filter: &BloomFilter, me: usize, peers: usize, round: usize) -> Vec<Slice> {
    let words = filter.bits().words();
    (0..peers)
        .filter(|&owner| owner != me)
        .flat_map(|owner| chunks_to(words, round_words(owner, peers, words.len(), round), owner))
        .collect()
}

/// Rounds needed to scatter every chunk.
pub fn scatter_rounds(words: usize, peers: usize) -> usize {
    (0..peers).map(|o| owned_range(o, peers, words).len().div_ceil(CHUNK_WORDS * ROUND_CHUNKS)).max().unwrap_or(0)
}

/// The reduce-scatter and gather steps as timely operators.
pub trait BloomMerge<'scope> {
    /// ORs each slice into the receiving owner's partial; as each round completes, sends the
    /// owner's words that round made final to the receivers of `gather`.
    fn bloom_merge(self, filter: Rc<RefCell<BloomFilter>>, gather: Gather) -> Self;
    /// Copies each merged range into the receiving worker's filter. The (empty) output stream
    /// lets a probe tell when every range has arrived.
    fn bloom_collect(self, filter: Rc<RefCell<BloomFilter>>) -> Self;
}

impl<'scope> BloomMerge<'scope> for Stream<'scope, u64, Vec<Slice>> {
    fn bloom_merge(self, filter: Rc<RefCell<BloomFilter>>, gather: Gather) -> Self {
        let peers = self.scope().peers();
        let me = self.scope().index();
        self.unary_frontier::<OneAtATime<Slice>, _, _, _>(to_receiver(), "BloomMerge", move |cap, _info| {
            let mut cap = Some(cap);
            // Rounds whose merged words have gone to the receivers.
            let mut gathered = 0usize;
            move |(input, frontier), output| {
                input.for_each(|_time, data| {
                    let mut f = filter.borrow_mut();
                    let words = f.bits_mut().words_mut();
                    for slice in data.drain(..) {
                        let start = slice.offset as usize;
                        or_words(&mut words[start..start + slice.words.len()], &slice.words);
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
                    let words = f.bits().words();
                    let first = round_words(me, peers, words.len(), gathered).start;
                    let last = match complete {
                        usize::MAX => owned_range(me, peers, words.len()).end,
                        next => round_words(me, peers, words.len(), next).start,
                    };
                    let mut session = output.session_with_builder(c);
                    for to in gather.receivers(peers).filter(|&w| w != me) {
                        for slice in chunks_to(words, first..last, to) {
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

    fn bloom_collect(self, filter: Rc<RefCell<BloomFilter>>) -> Self {
        self.unary::<OneAtATime<Slice>, _, _, _>(to_receiver(), "BloomCollect", move |_cap, _info| {
            move |input, _output| {
                input.for_each(|_time, data| {
                    let mut f = filter.borrow_mut();
                    let words = f.bits_mut().words_mut();
                    for slice in data.drain(..) {
                        let start = slice.offset as usize;
                        words[start..start + slice.words.len()].copy_from_slice(&slice.words);
                    }
                });
            }
        })
    }
}

/// The all-reduce of a job whose workers are all threads of one process, through their shared
/// memory: each worker ORs the other partials' words of its own range straight into its partial,
/// then each receiver of `gather` copies the other ranges from their owners' partials. No word is
/// copied into a message. Timely's exchange, which a job of several processes needs, copied each
/// round's words into messages and back: on two workers, 14–18 ms for a 24 MB filter after the
/// scans, in 8 rounds of about 2 ms.
///
/// Every worker of the process calls [`LocalMerge::merge`] once with its partial (after a failed
/// scan too, so that none waits forever at a barrier); all partials have the same size.
pub struct LocalMerge {
    /// Each worker's words, while the merge runs.
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

    /// Merges worker `me`'s partial `filter` with the others': afterwards it holds the global
    /// filter where `me` receives it (see [`Gather`]), and otherwise its own range of it.
    pub fn merge(&self, me: usize, filter: &mut BloomFilter, gather: Gather) {
        let peers = self.partials.len();
        let words = filter.bits_mut().words_mut();
        let n = words.len();
        // From here to the last barrier this worker's words are reached through raw pointers
        // only, each worker writing only where no other reads (see the SAFETY notes).
        self.partials[me].store(words.as_mut_ptr(), Ordering::Release);
        self.lengths[me].store(n, Ordering::Release);
        self.barrier.wait();
        let ptrs: Vec<*mut u64> = self.partials.iter().map(|p| p.load(Ordering::Acquire)).collect();
        assert!(self.lengths.iter().all(|l| l.load(Ordering::Acquire) == n), "every worker's partial has the same size");
        let range_of = |owner: usize| owned_range(owner, peers, n);

        // Reduce: worker w ORs every partial's range w into its own partial's range w. It
        // writes only its own range of its own partial, which no other worker reads now; it
        // reads range w of the others, which no worker writes now.
        let mine = range_of(me);
        // SAFETY: `mine` lies inside this worker's partial of `n` words; see above for why no
        // other thread touches it during this phase.
        let merged = unsafe { std::slice::from_raw_parts_mut(ptrs[me].add(mine.start), mine.len()) };
        for (_, &p) in ptrs.iter().enumerate().filter(|&(w, _)| w != me) {
            // SAFETY: each other worker's partial has `n` words and stays alive until the last
            // barrier; its range `mine` is written by no one in this phase.
            let theirs = unsafe { std::slice::from_raw_parts(p.add(mine.start), mine.len()) };
            or_words(merged, theirs);
        }
        self.barrier.wait();

        // Gather: each receiver copies every other owner's merged range from the owner's
        // partial into the same range of its own. It writes only ranges of its own partial that
        // are not its own range, which no worker reads now; every worker reads only owners'
        // own ranges, which no worker writes now.
        if gather.receivers(peers).any(|w| w == me) {
            for (owner, &p) in ptrs.iter().enumerate().filter(|&(w, _)| w != me) {
                let range = range_of(owner);
                // SAFETY: as above; `range` lies inside both partials, and the two differ.
                unsafe { std::ptr::copy_nonoverlapping(p.add(range.start), ptrs[me].add(range.start), range.len()) };
            }
        }
        // No worker may go on (and change or free its partial) while another still reads it.
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
                    if gather.receivers(workers).any(|r| r == w) {
                        assert_eq!(words, all, "{workers} workers, {gather:?}, receiver {w}");
                    } else {
                        let range = owned_range(w, workers, all.len());
                        assert_eq!(words[range.clone()], all[range], "{workers} workers, {gather:?}, worker {w}");
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
