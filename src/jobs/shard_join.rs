//! The exact shuffle join's dataflow: build keys and Bloom survivors are exchanged by key, each
//! worker answers for its shard of the keys from an exact hash set of them, and each match goes
//! back to the worker that read the record, as its number.
//!
//! A survivor is looked up once, as it arrives, and then forgotten: unlike a join of two
//! arranged collections (differential-dataflow's `semijoin`, the tests' oracle), nothing here
//! keeps the survivors, so memory does not grow with the probe. The build side's keys are held
//! once, spread over the workers, in the compact [`KeySet`] the broadcast join uses. They
//! travel in pieces, a shard's keys side by side (see [`BuildKeys`]), not one record each.

use super::join_key::JoinKey;
use crate::keyset::{GrowingSet, KeyArena, KeySet};
use std::cell::RefCell;
use std::rc::Rc;
use timely::container::CapacityContainerBuilder;
use crate::messages::OneAtATime;
use timely::dataflow::channels::pact::{Exchange, ExchangeCore};
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

/// Build keys on their way to the worker that holds their shard: that worker, and the keys,
/// length-prefixed as a [`KeyArena`] holds them.
type KeyPiece = (u32, Vec<u8>);

/// Bytes of a shard's build keys gathered before they leave.
const PIECE_BYTES: usize = 64 << 10;

/// The join on one worker: its inputs, the build keys and the survivors (at the timestamp of
/// their round), and its outputs, the numbers of this worker's survivors that matched (in any
/// order, each once) and a probe whose frontier passes a round's timestamp once every answer of
/// the round is in `matched`.
pub struct ShardJoin {
    /// None once this worker has sent all its build keys (dropping it sends the last pieces
    /// and closes the input).
    pub build: Option<BuildKeys>,
    pub survivors: Handle<u64, Survivor>,
    pub matched: Rc<RefCell<Vec<u64>>>,
    pub answered: ProbeHandle<u64>,
}

/// The worker that holds `key`'s shard (modulo the workers), as a hash every process computes
/// alike.
fn shard_of(key: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    foldhash::quality::FixedState::with_seed(0x9E37_79B9_7F4A_7C15).hash_one(key)
}

/// The build keys' input of a shuffle join. Each key joins the piece of its shard, and a piece
/// leaves once it holds [`PIECE_BYTES`]; the last pieces leave when this is dropped, which
/// then closes the input. Sent one record each, through timely's exchange, every key was
/// written into a container, read back to be routed and written into another: a fifth of a
/// shuffle join's samples with the 20M-row probe as its build side, most of them waiting on
/// memory (the containers are allocated afresh as they cycle between the workers' threads).
pub struct BuildKeys {
    input: Handle<u64, KeyPiece>,
    pieces: Vec<Vec<u8>>,
    /// [`PIECE_BYTES`], but in tests.
    piece_bytes: usize,
}

impl BuildKeys {
    /// Sends `key` to its shard.
    #[inline]
    pub fn send(&mut self, key: &[u8]) {
        let shard = (shard_of(key) % self.pieces.len() as u64) as usize;
        let piece = &mut self.pieces[shard];
        crate::records::push_with_length(piece, key);
        if piece.len() >= self.piece_bytes {
            let full = std::mem::replace(piece, Vec::with_capacity(self.piece_bytes + 64));
            self.input.send((shard as u32, full));
            // At once, and as a message of its own (see `shard_join`'s exchange of pieces).
            self.input.flush();
        }
    }
}

impl Drop for BuildKeys {
    fn drop(&mut self) {
        for (shard, piece) in self.pieces.iter_mut().enumerate().filter(|(_, piece)| !piece.is_empty()) {
            self.input.send((shard as u32, std::mem::take(piece)));
        }
    }
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

/// A shard's build keys as they arrive: every copy in an arena, or, once they prove to repeat,
/// each once in a set that grows as they come (see [`GrowingSet`]).
enum ShardKeys {
    /// The keys, asked whether they repeat as the arena says (see
    /// [`KeyArena::repeat_check_due`]).
    Arena(KeyArena),
    Growing(GrowingSet),
}

impl ShardKeys {
    /// An arena that holds numbers as bits where they are dense (the benchmark's ids, 20M of
    /// them as the build side, took 180 MB of text over the shards), and estimates its distinct
    /// keys: the shard gets every copy of its keys, and its set is sized for the distinct ones.
    fn new(huge_pages: bool) -> ShardKeys {
        ShardKeys::Arena(KeyArena::default().holding_numbers_as_bits(huge_pages).estimating_distinct())
    }

    /// Takes the keys of a piece (encoded as an arena holds them).
    fn push(&mut self, piece: &[u8]) {
        match self {
            ShardKeys::Growing(set) => set.insert_encoded(piece),
            ShardKeys::Arena(arena) => {
                arena.push_encoded(piece);
                if arena.repeat_check_due() && arena.mostly_repeats() {
                    *self = ShardKeys::Growing(GrowingSet::from_arena(std::mem::take(arena)));
                }
            }
        }
    }

    /// The set of every key taken.
    fn into_set(self) -> KeySet {
        match self {
            ShardKeys::Arena(arena) => KeySet::from_arena(arena),
            ShardKeys::Growing(set) => set.into_set(),
        }
    }
}

/// Sends the keys kept in `arena` into a join's build input, giving the worker a step every MiB
/// of them, so that the join takes them in as they go rather than all at once.
pub fn send_kept_keys(worker: &mut Worker, arena: &KeyArena, input: &mut BuildKeys) {
    let mut bytes = 0;
    arena.for_each_key(|key| {
        input.send(key);
        bytes += key.len() + 1;
        if bytes >= super::rounds::STEP_BYTES as usize {
            bytes = 0;
            worker.step();
        }
    });
}

/// Makes the join's dataflow on `worker` (every worker must make it at the same point among its
/// dataflows). Its shard's numbers are held as bits in huge pages where `huge_pages` says (see
/// [`KeyArena::holding_numbers_as_bits`]).
pub fn shard_join(worker: &mut Worker, huge_pages: bool) -> ShardJoin {
    let (matched, answered) = (Rc::new(RefCell::new(Vec::new())), ProbeHandle::new());
    let sink = Rc::clone(&matched);
    let peers = worker.peers();
    worker.dataflow::<u64, _, _>(|scope| {
        let (build, build_keys) = scope.new_input::<Vec<KeyPiece>>();
        let (survivors, survivor_stream) = scope.new_input::<Vec<Survivor>>();
        build_keys
            .binary_frontier::<_, CapacityContainerBuilder<Vec<Match>>, _, _, _, _>(
                survivor_stream,
                // A message a piece: timely's own containers gather 8 KiB of records, here 256
                // pieces (16 MiB) for each worker sent to (with the 20M-row probe as the build
                // side, `-w 2`, a peak of 149 MiB against 110–117 MiB a message a piece).
                ExchangeCore::<OneAtATime<KeyPiece>, _>::new_core(|(shard, _): &KeyPiece| *shard as u64),
                Exchange::new(|(key, _, _): &Survivor| key.with_bytes(shard_of)),
                "LookUpSurvivors",
                |_cap, _info| {
                    let mut keys = Some(ShardKeys::new(huge_pages));
                    let mut set: Option<KeySet> = None;
                    let mut lookup = Lookup::default();
                    // Survivors that came before the last build key: this worker's peers may
                    // finish their build scans first.
                    let mut early: Vec<(timely::dataflow::operators::Capability<u64>, Vec<Survivor>)> = Vec::new();
                    move |(build_in, build_frontier), (survivors_in, _), output| {
                        build_in.for_each(|_time, data| {
                            let keys = keys.as_mut().expect("build keys arrive before the build input closes");
                            data.drain(..).for_each(|(_, piece)| keys.push(&piece));
                        });
                        if set.is_none() && build_frontier.is_empty() {
                            set = Some(keys.take().expect("the set is made once").into_set());
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
        let build = BuildKeys { input: build, pieces: vec![Vec::new(); peers], piece_bytes: PIECE_BYTES };
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
    /// longer than a join key holds inline, one empty, a third numbers (which a shard holds as
    /// bits).
    fn keys_of(w: usize) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let key = |i: u64| match i {
            1 => Vec::new(),
            i if i % 13 == 0 => format!("a key longer than twenty-four bytes, {i}").into_bytes(),
            i if i % 3 == 0 => i.to_string().into_bytes(),
            i => format!("k{i}").into_bytes(),
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(w as u64);
        let build = (0..400).map(|_| key(rng.gen_range(0..2000))).collect();
        let probe = (0..3000).map(|_| key(rng.gen_range(0..2000))).collect();
        (build, probe)
    }

    /// A shard whose build keys repeat holds each once, in a set that grows as they come, from
    /// the first time it asks (at 1 MiB of keys); one whose keys do not keeps them in its arena.
    /// Either way its set holds every key: long ones, short ones and numbers, and the 1,000 that
    /// come last, once each.
    #[test]
    fn a_shard_holds_keys_that_repeat_once_as_they_come() {
        let key = |i: u64| match i % 3 {
            0 => format!("a key long enough to be held as text, {i}").into_bytes(),
            1 => format!("s{i}").into_bytes(),
            _ => (i * 7).to_string().into_bytes(),
        };
        for (distinct, copies, grows) in [(3_000u64, 40, true), (60_000, 1, false)] {
            let mut keys = ShardKeys::new(false);
            let arriving: Vec<u64> = (0..copies).flat_map(|_| 0..distinct - 1_000).chain(distinct - 1_000..distinct).collect();
            // Whether the keys grew into a set, and whether the arena was ever past the check.
            let (mut grew, mut passed) = (false, false);
            for piece in arriving.chunks(500) {
                let mut encoded = KeyArena::default();
                piece.iter().for_each(|&k| encoded.push(&key(k)));
                keys.push(encoded.as_bytes());
                match &keys {
                    ShardKeys::Growing(_) => grew = true,
                    ShardKeys::Arena(arena) => passed |= arena.len_bytes() >= crate::keyset::FIRST_CHECK,
                }
            }
            // Grown at the first check (no arena past it), or never though past it.
            assert_eq!((grew, passed), (grows, !grows), "{distinct} keys");
            let set = keys.into_set();
            assert_eq!(set.len() as u64, distinct);
            assert!((0..distinct).all(|k| set.contains(&key(k))));
            assert!(!(distinct..distinct + 300).any(|k| set.contains(&key(k))));
        }
    }

    /// Shards spread keys evenly: ids, short codes and long keys, over 2 and 3 workers, each
    /// worker's share within 3% of even.
    #[test]
    fn shards_spread_keys_evenly() {
        let keys: Vec<Vec<u8>> = (0..30_000u32)
            .map(|i| match i % 3 {
                0 => i.to_string().into_bytes(),
                1 => format!("c{i:x}").into_bytes(),
                _ => format!("a key longer than twenty-four bytes, {i}").into_bytes(),
            })
            .collect();
        for peers in [2u64, 3] {
            let mut counts = vec![0usize; peers as usize];
            keys.iter().for_each(|key| counts[(shard_of(key) % peers) as usize] += 1);
            let even = keys.len() / peers as usize;
            assert!(counts.iter().all(|&n| n.abs_diff(even) * 100 <= 3 * even), "{counts:?} over {peers}");
        }
    }

    /// On 3 workers, each sending its build keys in pieces of a few keys and its survivors in
    /// rounds (one worker's shard holding its numbers in huge pages): once the join's frontier
    /// passes a round, every match of the round is in (checked against the keys every worker
    /// sent); and the matches are exactly what differential-dataflow's `semijoin` finds.
    #[test]
    fn matches_what_differential_dataflows_semijoin_finds() {
        let guards = timely::execute(timely::Config::process(3), |worker| {
            let (me, peers) = (worker.index(), worker.peers());
            let (build, probe) = keys_of(me);
            let all_build: BTreeSet<Vec<u8>> = (0..peers).flat_map(|w| keys_of(w).0).collect();

            let ShardJoin { build: build_in, survivors: mut survivors_in, matched, answered } = shard_join(worker, me == 1);
            let mut build_in = build_in.expect("a new join takes build keys");
            // Pieces of a few keys, so that each shard's keys come in many.
            build_in.piece_bytes = 64;
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
                build_in.send(key);
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
