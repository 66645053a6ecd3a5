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

#[cfg(test)]
mod tests {
    use super::*;

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
