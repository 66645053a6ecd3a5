//! Splits handed out as workers ask for them, as Hadoop's scheduler gives map tasks to whichever
//! node asks next: a worker slowed by its core, its disk or a busy neighbour then reads fewer
//! splits instead of holding the whole job up while the others wait at the merge.
//!
//! Worker 0 hands the splits out, biggest first; every worker sends it a claim and gets back the
//! next split, or nothing once all are out. A worker keeps one claim ahead of the split it reads,
//! and answers and receives claims every MiB it reads ([`SplitFeed::tick`]), so a claim costs no
//! waiting; the last splits (one per worker) go only to workers that are idle, since a split
//! held ahead by a slow worker is one a fast worker could have read. Claims suit only work whose
//! result does not depend on which worker read what: the filter build (an OR of the partial
//! filters), not the semi-join's part files.
//!
//! Standard input is read where the static assignment puts it (the process that has it), and
//! never claimed.

use crate::messages::OneAtATime;
use crate::scan::{SplitFeed, Source};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::ExchangeCore;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::operators::vec::input::Handle;
use timely::dataflow::operators::vec::Input;
use timely::worker::Worker;

/// A claim: the claimant, and whether it claims ahead (the split after the one it is about to
/// read) rather than for now.
type Claim = (u32, bool);

/// The coordinator's answer to a claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
enum Answer {
    /// Read this split.
    Split(u32),
    /// A claim ahead while the last splits remain: they go only to workers that are idle, so
    /// that none sits on a split another could have read while it finished its own.
    Later,
    /// Every split is out.
    Done,
}

/// Worker 0's side: the splits not handed out yet, biggest first.
struct Dispenser {
    left: std::vec::IntoIter<u32>,
    /// Splits kept for idle workers' claims: one per worker.
    reserve: usize,
}

impl Dispenser {
    /// `splits` as (index, bytes).
    fn new(mut splits: Vec<(u32, u64)>, peers: usize) -> Self {
        // The big splits first and the small last, so that the job ends on short work.
        splits.sort_by_key(|&(index, bytes)| (std::cmp::Reverse(bytes), index));
        let order: Vec<u32> = splits.into_iter().map(|(index, _)| index).collect();
        Dispenser { left: order.into_iter(), reserve: peers }
    }

    fn answer(&mut self, ahead: bool) -> Answer {
        if ahead && self.left.len() <= self.reserve {
            return Answer::Later;
        }
        self.left.next().map_or(Answer::Done, Answer::Split)
    }
}

/// A worker's feed of claimed splits. Every worker must create one (it builds a dataflow) and
/// drop it once done, before the job goes on.
pub(crate) struct Claims<'w> {
    worker: &'w mut Worker,
    claims: Option<Handle<u64, Claim>>,
    answers: Rc<RefCell<VecDeque<Answer>>>,
    /// Claims sent and not yet answered.
    outstanding: usize,
    /// Whether to keep claiming ahead (until the coordinator answers `Later`).
    ahead: bool,
    /// Splits that only this worker may read (standard input), read first.
    own: std::vec::IntoIter<usize>,
}

impl<'w> Claims<'w> {
    pub(crate) fn new(worker: &'w mut Worker, source: &Source) -> Self {
        let (me, peers) = (worker.index(), worker.peers());
        let claimable = |s: &&crate::splits::Split| !s.is_stdin();
        let splits: Vec<(u32, u64)> = source.splits.iter().filter(claimable).map(|s| (s.index as u32, s.end - s.start)).collect();
        let own: Vec<usize> = source.splits.iter().filter(|s| !claimable(s) && s.worker(peers) == me).map(|s| s.index).collect();
        let answers = Rc::new(RefCell::new(VecDeque::new()));
        let sink = Rc::clone(&answers);
        let claims = worker.dataflow::<u64, _, _>(|scope| {
            let mut dispenser = Dispenser::new(splits, peers);
            let (claims, stream) = scope.new_input::<Claim>();
            // Both exchanges ship each claim and each answer as a message of its own at once:
            // timely's default builder holds small records back until it has 8 KiB of them.
            stream
                .unary::<CapacityContainerBuilder<Vec<(u32, Answer)>>, _, _, _>(
                    ExchangeCore::<OneAtATime<Claim>, _>::new_core(|_: &Claim| 0),
                    "HandOutSplits",
                    // On worker 0: answers in the order claims arrive.
                    move |_cap, _info| {
                        move |input, output| {
                            input.for_each(|time, data| {
                                let mut session = output.session(&time);
                                for (from, ahead) in data.drain(..) {
                                    session.give((from, dispenser.answer(ahead)));
                                }
                            });
                        }
                    },
                )
                .unary::<CapacityContainerBuilder<Vec<()>>, _, _, _>(
                    ExchangeCore::<OneAtATime<(u32, Answer)>, _>::new_core(|&(to, _): &(u32, Answer)| to as u64),
                    "ReceiveSplits",
                    move |_cap, _info| {
                        move |input, _output| {
                            input.for_each(|_time, data| sink.borrow_mut().extend(data.drain(..).map(|(_, answer)| answer)));
                        }
                    },
                );
            claims
        });
        Claims { worker, claims: Some(claims), answers, outstanding: 0, ahead: true, own: own.into_iter() }
    }

    fn claim(&mut self, ahead: bool) {
        if let Some(claims) = self.claims.as_mut() {
            claims.send((self.worker.index() as u32, ahead));
            claims.flush();
            self.outstanding += 1;
        }
    }
}

impl SplitFeed for Claims<'_> {
    fn next_split(&mut self) -> Option<usize> {
        if let Some(own) = self.own.next() {
            return Some(own);
        }
        // Between splits, answer and receive claims even when an answer is already here: the
        // ticks come only every MiB, and small splits may have none.
        self.worker.step();
        loop {
            let answer = self.answers.borrow_mut().pop_front();
            match answer {
                Some(Answer::Split(index)) => {
                    self.outstanding -= 1;
                    if self.ahead && self.outstanding == 0 {
                        self.claim(true);
                    }
                    return Some(index as usize);
                }
                Some(Answer::Later) => {
                    self.outstanding -= 1;
                    self.ahead = false;
                }
                Some(Answer::Done) => {
                    // Every split is out: claim no more, and let the dataflow finish.
                    self.claims = None;
                    return None;
                }
                None if self.claims.is_none() => return None,
                None => {
                    if self.outstanding == 0 {
                        self.claim(false);
                    }
                    let answers = Rc::clone(&self.answers);
                    self.worker.step_or_park_while(super::PARK, || answers.borrow().is_empty());
                }
            }
        }
    }

    fn tick(&mut self) {
        self.worker.step();
    }

    /// Worker 0, which answers the claims, steps every 128 KiB it reads, the others every MiB.
    /// With a tick a MiB, a worker that had claimed its next split while starting one of 1 MiB
    /// often found no answer at its end: at `-w 2` on the benchmark's build side, worker 1
    /// waited 1.5–9.8 ms in a scan of about 20 ms (0.2–5.1 ms with these ticks).
    fn tick_every(&self) -> u64 {
        if self.worker.index() == 0 && self.worker.peers() > 1 { 128 << 10 } else { crate::scan::PROGRESS_STEP }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_split_goes_out_once_biggest_first_and_the_last_only_to_idle_workers() {
        // Splits 0..10 of 100 bytes but the last of each of two files, shorter.
        let splits: Vec<(u32, u64)> = (0..10).map(|i| (i, if i == 4 || i == 9 { 30 + i as u64 } else { 100 })).collect();
        let mut dispenser = Dispenser::new(splits, 3);
        let mut out = Vec::new();
        // Claims ahead are answered while more than 3 (the workers) remain.
        while let Answer::Split(i) = dispenser.answer(true) {
            out.push(i);
        }
        assert_eq!(out, [0, 1, 2, 3, 5, 6, 7], "the full splits, in order");
        assert_eq!(dispenser.answer(true), Answer::Later);
        // Idle workers get the rest, the bigger of the short splits first, then Done.
        let rest: Vec<Answer> = (0..5).map(|_| dispenser.answer(false)).collect();
        assert_eq!(rest, [Answer::Split(8), Answer::Split(9), Answer::Split(4), Answer::Done, Answer::Done]);
        assert_eq!(dispenser.answer(true), Answer::Later, "a claim ahead once all are out is told to wait, then gets Done");
    }
}
