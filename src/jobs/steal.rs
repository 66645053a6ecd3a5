//! Work stealing among the workers of one process for the semi-join's probe, without changing
//! what any part file holds.
//!
//! Probe splits are assigned (split i to worker i mod peers), so that each worker's part file
//! holds its splits' records in input order whoever is faster. But a worker can fall behind its
//! siblings for reasons of the host's (on a shared 2-vCPU host the two workers of `-w 2` ended
//! their probe 5–62 ms apart, in 300 ms), and the job waits for the last. Here a worker whose own
//! splits are done takes the last unstarted split of the sibling with the most left, reads it
//! into a scratch file, and hands the file back; the owner appends the outputs of its taken
//! splits, in input order, after its own. A split is taken from the back of its owner's list,
//! the owner reads from the front, so the taken ones always come after everything the owner
//! reads itself, and the part file's bytes stay the same.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// What a worker reads next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Task {
    /// One of its own splits: into its part file.
    Own(usize),
    /// A split taken from sibling `owner`: into a scratch file handed back to the owner.
    Taken { split: usize, owner: usize },
}

/// The probe splits of one process's workers (local indices), shared between them.
pub(crate) struct ProbeQueues {
    state: Mutex<State>,
    /// Signalled whenever a taken split's output is handed back (or abandoned).
    handed_back: Condvar,
}

#[derive(Default)]
struct State {
    /// Each worker's unstarted splits, in input order: the front is read next by the owner.
    unstarted: Vec<VecDeque<usize>>,
    /// Splits a sibling took: their owner, and their output once read.
    taken: Vec<TakenSplit>,
}

struct TakenSplit {
    owner: usize,
    split: usize,
    output: Option<PathBuf>,
}

const LOCKED: &str = "no worker panics holding the queues' lock";

impl ProbeQueues {
    pub(crate) fn new(workers: usize) -> Self {
        ProbeQueues { state: Mutex::new(State { unstarted: vec![VecDeque::new(); workers], taken: Vec::new() }), handed_back: Condvar::new() }
    }

    /// Gives worker `me` its splits, in input order.
    pub(crate) fn fill(&self, me: usize, splits: impl IntoIterator<Item = usize>) {
        self.state.lock().expect(LOCKED).unstarted[me].extend(splits);
    }

    /// The next split for worker `me`: its own next one, or else the last unstarted split of
    /// the sibling with the most unstarted ones, where `can_take` allows it (standard input
    /// cannot be read elsewhere). None when there is nothing left to read.
    pub(crate) fn next(&self, me: usize, can_take: impl Fn(usize) -> bool) -> Option<Task> {
        let mut state = self.state.lock().expect(LOCKED);
        if let Some(split) = state.unstarted[me].pop_front() {
            return Some(Task::Own(split));
        }
        let owner = (0..state.unstarted.len())
            .filter(|&w| w != me && state.unstarted[w].back().is_some_and(|&s| can_take(s)))
            .max_by_key(|&w| state.unstarted[w].len())?;
        let split = state.unstarted[owner].pop_back().expect("a split to take");
        state.taken.push(TakenSplit { owner, split, output: None });
        Some(Task::Taken { split, owner })
    }

    /// Hands back the output of taken split `split`, read into the scratch file `output`.
    pub(crate) fn hand_back(&self, split: usize, output: PathBuf) {
        let mut state = self.state.lock().expect(LOCKED);
        match state.taken.iter_mut().find(|t| t.split == split) {
            Some(t) => t.output = Some(output),
            None => crate::output::discard(&output),
        }
        self.handed_back.notify_all();
    }

    /// Gives up taken split `split` (its reader failed, or the job is failing): its owner
    /// stops waiting for it, and the job fails on the reader's report.
    pub(crate) fn abandon(&self, split: usize) {
        let mut state = self.state.lock().expect(LOCKED);
        state.taken.retain(|t| t.split != split);
        self.handed_back.notify_all();
    }

    /// Waits until every split taken from worker `me` is handed back, and returns their outputs
    /// in input order, forgetting them. Stops waiting once `abort` is set (another worker
    /// failed, and so does the job): then it returns what was handed back.
    pub(crate) fn outputs_of(&self, me: usize, abort: &AtomicBool) -> Vec<PathBuf> {
        let mut state = self.state.lock().expect(LOCKED);
        while !abort.load(Ordering::Relaxed) && state.taken.iter().any(|t| t.owner == me && t.output.is_none()) {
            // A timeout, so that an abort raised without a hand-back is seen too.
            state = self.handed_back.wait_timeout(state, Duration::from_millis(5)).expect(LOCKED).0;
        }
        // Splits still being read (after an abort) stay, for `leftovers_of`.
        state.remove_outputs(|t| t.owner == me && t.output.is_some())
    }

    /// The outputs handed back to worker `me` and not collected (its job failed first): for
    /// removal, once no sibling is reading any more.
    pub(crate) fn leftovers_of(&self, me: usize) -> Vec<PathBuf> {
        self.state.lock().expect(LOCKED).remove_outputs(|t| t.owner == me)
    }
}

impl State {
    /// Forgets the taken splits `selected` picks, and returns the outputs of those handed back,
    /// in input order.
    fn remove_outputs(&mut self, selected: impl Fn(&TakenSplit) -> bool) -> Vec<PathBuf> {
        let (mut chosen, rest): (Vec<TakenSplit>, Vec<TakenSplit>) = std::mem::take(&mut self.taken).into_iter().partition(|t| selected(t));
        self.taken = rest;
        chosen.sort_by_key(|t| t.split);
        chosen.into_iter().filter_map(|t| t.output).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The owner reads from the front, a sibling takes from the back of the longest list, and
    /// the owner gets the taken splits' outputs in input order, after waiting for them.
    #[test]
    fn taken_splits_come_from_the_back_and_go_back_in_order() {
        let queues = ProbeQueues::new(3);
        queues.fill(0, [0, 3, 6, 9, 12]);
        queues.fill(1, [1, 4]);
        assert_eq!(queues.next(0, |_| true), Some(Task::Own(0)));
        // Worker 2 has none: it takes from worker 0, which has the most left.
        assert_eq!(queues.next(2, |_| true), Some(Task::Taken { split: 12, owner: 0 }));
        assert_eq!(queues.next(2, |_| true), Some(Task::Taken { split: 9, owner: 0 }));
        // Now workers 0 and 1 have two each; a split that cannot be taken stays.
        assert_eq!(queues.next(2, |s| s != 6 && s != 4), None);
        assert_eq!(queues.next(1, |_| true), Some(Task::Own(1)));
        assert_eq!(queues.next(0, |_| true), Some(Task::Own(3)));
        let abort = AtomicBool::new(false);
        std::thread::scope(|s| {
            let waiting = s.spawn(|| queues.outputs_of(0, &abort));
            queues.hand_back(9, "nine".into());
            std::thread::sleep(Duration::from_millis(20));
            assert!(!waiting.is_finished(), "split 12 is not handed back yet");
            queues.hand_back(12, "twelve".into());
            assert_eq!(waiting.join().expect("no panic"), [PathBuf::from("nine"), PathBuf::from("twelve")]);
        });
        assert!(queues.outputs_of(0, &abort).is_empty(), "collected once");
        assert_eq!(queues.next(0, |_| true), Some(Task::Own(6)));
    }

    /// An abandoned split is not waited for, nor is anything once the job aborts.
    #[test]
    fn an_abandoned_split_or_an_abort_ends_the_wait() {
        let queues = ProbeQueues::new(2);
        queues.fill(0, [0, 2, 4]);
        let abort = AtomicBool::new(false);
        assert_eq!(queues.next(1, |_| true), Some(Task::Taken { split: 4, owner: 0 }));
        assert_eq!(queues.next(1, |_| true), Some(Task::Taken { split: 2, owner: 0 }));
        queues.abandon(4);
        queues.hand_back(2, "two".into());
        assert_eq!(queues.outputs_of(0, &abort), [PathBuf::from("two")]);
        assert_eq!(queues.next(1, |_| true), Some(Task::Taken { split: 0, owner: 0 }));
        abort.store(true, Ordering::Relaxed);
        assert!(queues.outputs_of(0, &abort).is_empty());
        // Handed back after the owner stopped waiting: left for removal.
        queues.hand_back(0, "zero".into());
        assert_eq!(queues.leftovers_of(0), [PathBuf::from("zero")]);
        assert!(queues.leftovers_of(0).is_empty());
    }
}
