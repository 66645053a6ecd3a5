//! The exact shuffle join's dataflow: build keys and Bloom survivors are exchanged by key, each
//! worker answers for its shard of the keys from an exact hash set of them, and each match goes
//! back to the worker that read the record, as its number.
//!
//! A survivor is looked up once, as it arrives, and then forgotten: unlike a join of two
//! arranged collections (differential-dataflow's `semijoin`, the tests' oracle), nothing here
//! keeps the survivors, so memory does not grow with the probe. The build side's keys are held
//! once, spread over the workers, in the compact [`KeySet`] the broadcast join uses.

use super::join_key::JoinKey;
use crate::keyset::{KeyArena, KeySet};
use std::cell::RefCell;
use std::rc::Rc;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::operators::probe::Handle as ProbeHandle;
use timely::dataflow::operators::vec::input::Handle;
use timely::dataflow::operators::Probe;
use timely::dataflow::operators::Input as _;
use timely::worker::Worker;

/// A Bloom survivor on its way to the worker that holds its key's shard: its key, the worker
/// that read it, and its number there.
pub type Survivor = (JoinKey, u32, u64);

/// A match on its way back: the worker that read the survivor, and its number there.
type Match = (u32, u64);

/// The join on one worker: its inputs, the build keys and the survivors (at the timestamp of
/// their round), and its outputs, the numbers of this worker's survivors that matched (in any
/// order, each once) and a probe whose frontier passes a round's timestamp once every answer of
/// the round is in `matched`.
pub struct ShardJoin {
    /// None once this worker has sent all its build keys (dropping the handle closes it).
    pub build: Option<Handle<u64, JoinKey>>,
    pub survivors: Handle<u64, Survivor>,
    pub matched: Rc<RefCell<Vec<u64>>>,
    pub answered: ProbeHandle<u64>,
}

/// The worker that holds `key`'s shard, as a hash every process computes alike. An inline key
/// is hashed as its words: hashed through its derived `Hash`, the words went to the hasher as 24
/// bytes, by foldhash's out-of-line path for long inputs, and routing the build keys took a
/// tenth of a shuffle join's samples (the 20M-row probe as the build side, `-w 2`: 1.77 → 1.53 s,
/// medians of 6 interleaved runs).
fn shard_of(key: &JoinKey) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = foldhash::quality::FixedState::with_seed(0x9E37_79B9_7F4A_7C15).build_hasher();
    match key {
        JoinKey::Inline(words, len) => {
            words.iter().for_each(|&word| hasher.write_u64(word));
            hasher.write_u8(*len);
        }
        JoinKey::Long(bytes) => hasher.write(bytes),
    }
    hasher.finish()
}

/// Looks up survivors in a batch: their keys' bytes side by side, so that the key set's batched
/// lookup can prefetch the table slots of a group of keys before it reads any (one at a time, a
/// lookup waits for its cache miss: a fifth of the shuffle semi-join's time went to them).
#[derive(Default)]
struct Lookup {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    answers: Vec<bool>,
}

impl Lookup {
    /// Passes the survivors of `data` whose key is in `set` to `give`, as matches; empties `data`.
    fn matches(&mut self, set: &KeySet, data: &mut Vec<Survivor>, give: impl FnOnce(&mut dyn Iterator<Item = Match>)) {
        self.bytes.clear();
        self.ends.clear();
        for (key, _, _) in data.iter() {
            key.with_bytes(|bytes| self.bytes.extend_from_slice(bytes));
            self.ends.push(self.bytes.len());
        }
        let keys: Vec<&[u8]> = self.ends.iter().scan(0, |start, &end| Some(&self.bytes[std::mem::replace(start, end)..end])).collect();
        set.contains_batch(&keys, &mut self.answers);
        give(&mut data.drain(..).zip(&self.answers).filter(|(_, &found)| found).map(|((_, w, n), _)| (w, n)));
    }
}

/// Sends the keys kept in `arena` into a join's build input, giving the worker a step every MiB
/// of them, so that the join takes them in as they go rather than all at once.
pub fn send_kept_keys(worker: &mut Worker, arena: &KeyArena, input: &mut Handle<u64, JoinKey>) {
    let mut bytes = 0;
    arena.for_each_key(|key| {
        input.send(JoinKey::new(key));
        bytes += key.len() + 1;
        if bytes >= super::rounds::STEP_BYTES as usize {
            bytes = 0;
            worker.step();
        }
    });
}

/// Makes the join's dataflow on `worker` (every worker must make it at the same point among its
/// dataflows).
pub fn shard_join(worker: &mut Worker) -> ShardJoin {
    let (matched, answered) = (Rc::new(RefCell::new(Vec::new())), ProbeHandle::new());
    let sink = Rc::clone(&matched);
    worker.dataflow::<u64, _, _>(|scope| {
        let (build, build_keys) = scope.new_input::<Vec<JoinKey>>();
        let (survivors, survivor_stream) = scope.new_input::<Vec<Survivor>>();
        build_keys
            .binary_frontier::<_, CapacityContainerBuilder<Vec<Match>>, _, _, _, _>(
                survivor_stream,
                Exchange::new(shard_of),
                Exchange::new(|(key, _, _): &Survivor| shard_of(key)),
                "LookUpSurvivors",
                |_cap, _info| {
                    let mut arena = Some(KeyArena::default());
                    let mut set: Option<KeySet> = None;
                    let mut lookup = Lookup::default();
                    // Survivors that came before the last build key: this worker's peers may
                    // finish their build scans first.
                    let mut early: Vec<(timely::dataflow::operators::Capability<u64>, Vec<Survivor>)> = Vec::new();
                    move |(build_in, build_frontier), (survivors_in, _), output| {
                        build_in.for_each(|_time, data| {
                            let arena = arena.as_mut().expect("build keys arrive before the build input closes");
                            data.drain(..).for_each(|key| key.with_bytes(|bytes| arena.push(bytes)));
                        });
                        if set.is_none() && build_frontier.is_empty() {
                            let arena = arena.take().expect("the set is made once");
                            let bytes = arena.as_bytes();
                            let pieces: Vec<&[u8]> = arena.pieces().into_iter().map(|piece| &bytes[piece]).collect();
                            set = Some(KeySet::build(&pieces, arena.counts()));
                        }
                        let output_index = output.output_index();
                        survivors_in.for_each(|cap, data| match &set {
                            Some(set) => lookup.matches(set, data, |found| output.session(&cap).give_iterator(found)),
                            None => early.extend(cap.retain_least(output_index).map(|cap| (cap, std::mem::take(data)))),
                        });
                        if let Some(set) = &set {
                            for (cap, mut data) in early.drain(..) {
                                lookup.matches(set, &mut data, |found| output.session(&cap).give_iterator(found));
                            }
                        }
                    }
                },
            )
            .unary::<CapacityContainerBuilder<Vec<()>>, _, _, _>(Exchange::new(|&(w, _): &Match| w as u64), "CollectMatches", move |_cap, _info| {
                move |input, _output| {
                    input.for_each(|_time, data| sink.borrow_mut().extend(data.drain(..).map(|(_, n)| n)));
                }
            })
            .probe_with(&answered);
        ShardJoin { build: Some(build), survivors, matched, answered }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use differential_dataflow::input::Input as _;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeSet;
    use timely::dataflow::operators::Inspect;

    /// The keys worker `w` of a test job sends: build keys and probe keys drawn from 2000, some
    /// longer than a join key holds inline, one empty.
    fn keys_of(w: usize) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let key = |i: u64| match i {
            1 => Vec::new(),
            i if i % 13 == 0 => format!("a key longer than twenty-four bytes, {i}").into_bytes(),
            i => format!("k{i}").into_bytes(),
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(w as u64);
        let build = (0..400).map(|_| key(rng.gen_range(0..2000))).collect();
        let probe = (0..3000).map(|_| key(rng.gen_range(0..2000))).collect();
        (build, probe)
    }

    /// Shards spread keys evenly: ids, short codes and long keys, over 2 and 3 workers, each
    /// worker's share within 3% of even.
    #[test]
    fn shards_spread_keys_evenly() {
        let keys: Vec<JoinKey> = (0..30_000u32)
            .map(|i| match i % 3 {
                0 => JoinKey::new(i.to_string().as_bytes()),
                1 => JoinKey::new(format!("c{i:x}").as_bytes()),
                _ => JoinKey::new(format!("a key longer than twenty-four bytes, {i}").as_bytes()),
            })
            .collect();
        for peers in [2u64, 3] {
            let mut counts = vec![0usize; peers as usize];
            keys.iter().for_each(|key| counts[(shard_of(key) % peers) as usize] += 1);
            let even = keys.len() / peers as usize;
            assert!(counts.iter().all(|&n| n.abs_diff(even) * 100 <= 3 * even), "{counts:?} over {peers}");
        }
    }

    /// On 3 workers, each sending its survivors in rounds: once the join's frontier passes a
    /// round, every match of the round is in (checked against the keys every worker sent); and
    /// the matches are exactly what differential-dataflow's `semijoin` finds.
    #[test]
    fn matches_what_differential_dataflows_semijoin_finds() {
        let guards = timely::execute(timely::Config::process(3), |worker| {
            let (me, peers) = (worker.index(), worker.peers());
            let (build, probe) = keys_of(me);
            let all_build: BTreeSet<Vec<u8>> = (0..peers).flat_map(|w| keys_of(w).0).collect();

            let ShardJoin { build: build_in, survivors: mut survivors_in, matched, answered } = shard_join(worker);
            let mut build_in = build_in.expect("a new join takes build keys");
            let oracle = Rc::new(RefCell::new(Vec::new()));
            let oracle_done = ProbeHandle::new();
            let (mut oracle_build, mut oracle_probe) = worker.dataflow::<u64, _, _>(|scope| {
                let (build_in, build) = scope.new_collection::<Vec<u8>, isize>();
                let (probe_in, probe) = scope.new_collection::<(Vec<u8>, (u32, u64)), isize>();
                let sink = Rc::clone(&oracle);
                probe.semijoin(build).inner.inspect(move |((_, found), _, _)| sink.borrow_mut().push(*found)).probe_with(&oracle_done);
                (build_in, probe_in)
            });

            for key in &build {
                build_in.send(JoinKey::new(key));
                oracle_build.insert(key.clone());
            }
            drop(build_in);
            let mut got = BTreeSet::new();
            for (round, numbers) in (0..probe.len() as u64).collect::<Vec<_>>().chunks(250).enumerate() {
                for &n in numbers {
                    survivors_in.send((JoinKey::new(&probe[n as usize]), me as u32, n));
                    oracle_probe.insert((probe[n as usize].clone(), (me as u32, n)));
                }
                survivors_in.advance_to(round as u64 + 1);
                worker.step_or_park_while(None, || answered.less_equal(&(round as u64)));
                got.extend(matched.borrow_mut().drain(..));
                let want: BTreeSet<u64> = (0..=*numbers.last().unwrap()).filter(|&n| all_build.contains(&probe[n as usize])).collect();
                assert_eq!(got, want, "worker {me}, round {round}");
            }
            drop(survivors_in);
            oracle_build.close();
            oracle_probe.close();
            worker.step_or_park_while(None, || !answered.done() || !oracle_done.done());
            assert!(matched.borrow().is_empty(), "no answers after the last round's");
            let found: BTreeSet<(u32, u64)> = oracle.borrow().iter().copied().collect();
            (me, got, found)
        })
        .unwrap();
        let (mut ours, mut differential) = (BTreeSet::new(), BTreeSet::new());
        for result in guards.join() {
            let (me, got, found) = result.unwrap();
            ours.extend(got.into_iter().map(|n| (me as u32, n)));
            differential.extend(found);
        }
        assert!(ours.len() > 1000, "{} matches", ours.len());
        assert_eq!(ours, differential);
    }
}
