//! The distributed jobs: each runs on every worker of every process through `timely::execute`.

pub mod build;
mod claims;
mod join_key;
mod rounds;
mod probe_side;
mod shard_join;
pub mod semijoin;
mod steal;
pub mod subtract;

use crate::allreduce::{owned_range, scatter_round, scatter_rounds, BloomMerge, Gather, LocalMerge, Mergeable, Slice, Topology};
use crate::shared_filter::SharedFilter;
use crate::counting::CountingBloomFilter;
use crate::filter::BloomFilter;
use crate::keyset::{BitsPiece, GapsPiece, KeyArena, KeyCounts, KeySet, PartitionBuilder};
use shard_join::BuildKeys;
use crate::report::WorkerReport;
use crate::scan::{ScanStats, Source, SplitFeed};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use crate::messages::OneAtATime;
use timely::dataflow::channels::pact::{Exchange, ExchangeCore};
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::operators::probe::Handle as ProbeHandle;
use timely::dataflow::operators::{Input, Probe};
use timely::worker::Worker;
use timely::ExchangeData;

/// How long an idle worker parks before looking again (it is woken earlier by any message).
pub(crate) const PARK: Option<Duration> = Some(Duration::from_millis(50));

/// A partial filter a worker fills from the splits it reads, merged with the others' by the
/// all-reduce: a plain filter, or a counting one (`build --counting`, and the counts of the keys
/// to remove in a `subtract` job).
pub(crate) trait Partial: Mergeable + 'static {
    /// Inserts a batch of keys; an error fails the worker's scan (and the job).
    fn insert_batch(&mut self, keys: &[&[u8]]) -> crate::error::Result<()>;
    /// A filter of one position, left in the finished dataflow's hands once the merge is done.
    fn placeholder() -> Self;
}

impl Partial for BloomFilter {
    fn insert_batch(&mut self, keys: &[&[u8]]) -> crate::error::Result<()> {
        BloomFilter::insert_batch(self, keys);
        Ok(())
    }

    fn placeholder() -> Self {
        BloomFilter::new(crate::spec::FilterSpec::native(1, 1, 0).expect("valid"))
    }
}

impl Partial for CountingBloomFilter {
    fn insert_batch(&mut self, keys: &[&[u8]]) -> crate::error::Result<()> {
        CountingBloomFilter::insert_batch(self, keys);
        Ok(())
    }

    fn placeholder() -> Self {
        CountingBloomFilter::new(crate::spec::FilterSpec::native(1, 1, 0).expect("valid"))
    }
}

/// What a build scan does with its keys besides inserting them into the filter.
pub(crate) enum KeepKeys<'a> {
    /// Nothing more (a filter is all the job wants).
    No,
    /// Keeps them for an exact broadcast join (each once, where they repeat: see
    /// [`KeyArena::holding_each_key_once`]), up to a limit of bytes. Past it, the job will
    /// fall back to the shuffle join: the keys kept and every later one go into its build input
    /// where one is given (`auto`), so that the build side is read once.
    UpTo(&'a mut KeyArena, u64, Option<&'a mut BuildKeys>),
    /// Sends them into an exact shuffle join's build input, which then needs no second read.
    Send(&'a mut BuildKeys),
}

/// Runs inside a timely worker: reads the splits of `source` it claims (see [`claims`]) into its
/// partial filter (made by `empty`, sized as every other worker's, which must call the tick it
/// is given as it zeroes a large filter), then takes part in the all-reduce, even when its own
/// scan failed, so that no peer waits forever: through `local` where every worker is in this
/// process, else through timely's exchange. Returns the filter, which holds the global filter
/// on the receivers of `gather`, and this worker's report; exchange reports with [`all_reports`]
/// to learn whether the job as a whole succeeded.
#[allow(clippy::too_many_arguments)]
pub(crate) fn global_filter<P: Partial>(
    worker: &mut Worker,
    source: &Source,
    empty: impl FnOnce(&mut dyn FnMut()) -> P,
    gather: Gather,
    abort: &AtomicBool,
    progress: &AtomicU64,
    keep: KeepKeys,
    local: &LocalMerge,
) -> (P, WorkerReport) {
    let me = worker.index();
    let made = RefCell::new(None);
    let report = scan_keys(
        worker,
        source,
        // The partial is made (zeroed) while claims are answered: worker 0 hands out the splits.
        |tick| *made.borrow_mut() = Some(empty(tick)),
        |keys| made.borrow_mut().as_mut().expect("made before the scan").insert_batch(keys),
        abort,
        progress,
        keep,
    );
    let mut filter = made.into_inner().expect("made before the scan");
    let topology = wait_for_local_scans(worker, local);
    // All the workers in this process: merged through their shared memory alone.
    if topology.processes == 1 {
        local.merge(me, &mut filter, gather);
        return (filter, report);
    }
    let i = topology.local_index(me);
    local.reduce(i, &mut filter);
    let filter = Rc::new(RefCell::new(filter));
    merge_between_processes(worker, &filter, gather, topology);
    if topology.process_receives(me, gather) {
        local.gather(i, &mut *filter.borrow_mut(), gather.receives(me));
    }

    // The finished dataflow may still hold its handles on the filter: move it out, leaving a
    // one-bit placeholder, rather than copy it.
    let filter = std::mem::replace(&mut *filter.borrow_mut(), P::placeholder());
    (filter, report)
}

/// [`global_filter`] where the workers of each process fill one [`SharedFilter`] (see
/// [`FilterPer`](crate::shared_filter::FilterPer)): the process's words are the merge of its
/// workers' inserts once their scans are over (an OR of bits, a saturating sum of counters),
/// and between processes local worker i merges its local range of them as it would its
/// partial's.
/// Each batch of keys goes to `insert`, which inserts into `shared` what it will (all of them,
/// for a build). Returns this worker's report; once it has returned on every worker of the
/// process, `shared` holds the global filter where `gather` names a worker of this process,
/// and may be taken ([`SharedFilter::take`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn global_shared_filter(
    worker: &mut Worker,
    source: &Source,
    shared: &SharedFilter,
    insert: impl FnMut(&[&[u8]]) -> crate::error::Result<()>,
    gather: Gather,
    abort: &AtomicBool,
    progress: &AtomicU64,
    keep: KeepKeys,
    local: &LocalMerge,
) -> WorkerReport {
    let report = scan_keys(worker, source, |_| {}, insert, abort, progress, keep);
    let topology = wait_for_local_scans(worker, local);
    // Every insert of the process happens before any range is merged: a barrier.
    local.wait();
    if topology.processes > 1 {
        match shared.is_counting() {
            false => merge_shared_range::<BloomFilter>(worker, shared, gather, topology),
            true => merge_shared_range::<CountingBloomFilter>(worker, shared, gather, topology),
        }
        local.wait();
    }
    report
}

/// The insert of a [`global_shared_filter`] that inserts every key it reads (a build's).
pub(crate) fn every_key(shared: &SharedFilter) -> impl FnMut(&[&[u8]]) -> crate::error::Result<()> + '_ {
    move |keys| {
        shared.insert_batch(keys);
        Ok(())
    }
}

/// This worker's local range of a filter its process shares, merged between processes as `F`'s
/// words merge, once every insert of the process is over and before any worker takes it.
fn merge_shared_range<F: Mergeable + 'static>(worker: &mut Worker, shared: &SharedFilter, gather: Gather, topology: Topology) {
    let range = owned_range(topology.local_index(worker.index()), topology.local, shared.word_count());
    // SAFETY: every insert of this process is over (the caller's barrier); the local workers'
    // ranges do not overlap; the view is used only until the merge is over, and no worker takes
    // the filter before the caller's next barrier.
    let view = Rc::new(RefCell::new(unsafe { shared.local_range::<F>(range) }));
    merge_between_processes(worker, &view, gather, topology);
}

/// Reads the splits this worker claims (see [`claims`]) and hands each batch of keys to
/// `insert`, and to `keep` besides; `prepare` runs first, given the tick that keeps claims
/// answered (worker 0 hands out the splits), to make the worker's partial filter.
fn scan_keys(
    worker: &mut Worker,
    source: &Source,
    prepare: impl FnOnce(&mut dyn FnMut()),
    mut insert: impl FnMut(&[&[u8]]) -> crate::error::Result<()>,
    abort: &AtomicBool,
    progress: &AtomicU64,
    mut keep: KeepKeys,
) -> WorkerReport {
    let me = worker.index();
    // Splits are claimed, not assigned: the partials' OR is the same whoever read what.
    let mut feed = claims::Claims::new(worker, source);
    prepare(&mut || feed.tick());
    let started = Instant::now();
    let mut report = WorkerReport { worker: me, ..Default::default() };
    let mut keys = 0u64;
    let mut overflow = false;
    let scanned = source.scan_feed(&mut feed, abort, progress, |batch| {
        insert(batch.keys)?;
        keys += batch.len() as u64;
        match &mut keep {
            KeepKeys::UpTo(arena, limit, _) if !overflow => {
                arena.push_all(batch.keys);
                if arena.len_bytes() as u64 > *limit {
                    arena.let_copies_go();
                    overflow = arena.len_bytes() as u64 > *limit;
                }
            }
            // Past the limit, the keys kept wait for the end of the scan (sent at once, they
            // would all queue in the join's channels), later ones go as they come.
            KeepKeys::UpTo(_, _, Some(input)) | KeepKeys::Send(input) => batch.keys.iter().for_each(|k| input.send(k)),
            KeepKeys::UpTo(_, _, None) | KeepKeys::No => {}
        }
        Ok(())
    });
    drop(feed);
    report.keys = keys;
    if let KeepKeys::UpTo(arena, _, spill) = &mut keep {
        if overflow {
            if let Some(input) = spill {
                shard_join::send_kept_keys(worker, arena, input);
            }
            arena.clear();
        } else {
            // However few keys it kept (an arena asks itself from 1 MiB on), so that no copies
            // are broadcast or counted in the set's size.
            arena.let_copies_go();
        }
        report.collected_key_bytes = (!overflow).then(|| arena.len_bytes() as u64);
        let counts = arena.counts();
        (report.collected_keys, report.collected_number_keys, report.collected_short_keys, report.collected_big_number_keys) = (counts.keys, counts.numbers, counts.short, counts.big);
        report.collected_numbers_range = counts.numbers_range;
    }
    match scanned {
        Ok(scan) => report.scan = scan,
        Err(err) => {
            report.error = Some(err.to_string());
            abort.store(true, Ordering::Relaxed);
        }
    }
    report.elapsed_secs = started.elapsed().as_secs_f64();
    report
}

/// Returns once every worker of this process is done with its scan, and the job's topology.
fn wait_for_local_scans(worker: &mut Worker, local: &LocalMerge) -> Topology {
    let topology = Topology { processes: worker.peers() / local.workers(), local: local.workers() };
    if topology.local > 1 {
        // Worker 0 answers split claims only while it steps: no worker may wait at the local
        // merge's barriers before every worker is done with its scan. Exchanging a message
        // with every worker makes sure of that.
        all_reports(worker, ());
    }
    topology
}

/// The all-reduce between processes, on timely: this worker's local range of `filter`, merged
/// by its process already, is reduce-scattered with its counterparts in the other processes,
/// and the merged words gathered where `gather` asks for them.
fn merge_between_processes<P: Mergeable + 'static>(worker: &mut Worker, filter: &Rc<RefCell<P>>, gather: Gather, topology: Topology) {
    let me = worker.index();
    // Made only now, after the scan (every worker makes its dataflows in the same order, and
    // timely holds slices that arrive for one not made yet): the claims stepped during the scan
    // must not run the merge into the partial the scan is filling.
    let probe = ProbeHandle::new();
    let mut slices_in = worker.dataflow::<u64, _, _>(|scope| {
        let (slices_in, slices) = scope.new_input::<Vec<Slice>>();
        slices
            .bloom_merge(Rc::clone(filter), gather, topology)
            .bloom_collect(Rc::clone(filter))
            .probe_with(&probe);
        slices_in
    });

    // Reduce-scatter in rounds of a few chunks per owner, so that the data in flight from this
    // worker stays bounded whatever the filter's size.
    let rounds = scatter_rounds(topology, filter.borrow().word_count());
    for round in 0..rounds {
        let batch = scatter_round(&*filter.borrow(), topology, me, round);
        for slice in batch {
            // Each slice leaves at once, so the next is copied out while this one travels.
            slices_in.send(slice);
            slices_in.flush();
        }
        slices_in.advance_to(round as u64 + 1);
        worker.step_or_park_while(PARK, || probe.less_than(slices_in.time()));
    }
    drop(slices_in);
    worker.step_or_park_while(PARK, || !probe.done());
}

/// Waits for this process's workers: the result one of them returned (worker 0 of process 0
/// returns the job's statistics), or the first failure. (A panic in a worker's job ends the
/// process before this returns: see [`crate::cluster::execute`].)
pub(crate) fn join_workers<T: Send + 'static>(guards: timely::communication::WorkerGuards<crate::error::Result<Option<T>>>) -> crate::error::Result<Option<T>> {
    let mut result = None;
    let mut failure = None;
    for outcome in guards.join() {
        match outcome {
            Ok(Ok(Some(r))) => result = result.or(Some(r)),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => failure = failure.or(Some(e)),
            Err(panic) => failure = failure.or(Some(crate::error::Error::Job(format!("a worker failed: {panic}")))),
        }
    }
    failure.map_or(Ok(result), Err)
}

/// Fails a job in which records were read but none had a usable key: a wrong `--key` or
/// `--delimiter` rather than bad data, and a filter or join built from nothing would mislead.
/// (Records whose key is NULL are not the key's fault: a side of NULLs only passes.) Every
/// worker sees the same reports, so every process fails alike.
pub(crate) fn check_keys_found<'a>(workers: impl Iterator<Item = (&'a ScanStats, u64)>, side: &str) -> crate::error::Result<()> {
    let mut total = ScanStats::default();
    let mut keys = 0;
    for (scan, k) in workers {
        total.absorb(scan);
        keys += k;
    }
    if total.malformed > 0 && keys == 0 {
        let example = total.malformed_examples.first().cloned().unwrap_or_default();
        return Err(crate::error::Error::Job(format!(
            "none of the {} {side} records has a usable key (first: {example}); check the key field and --delimiter",
            total.records
        )));
    }
    Ok(())
}

/// Every worker's report of a scan of keys (a build's, a subtract's, a semi-join's scan of either
/// side, named `side` in the error), in worker order, or the first worker's failure, or an error
/// where no record had a usable key.
pub(crate) fn input_reports(worker: &mut Worker, report: WorkerReport, side: &str) -> crate::error::Result<Vec<WorkerReport>> {
    let reports: Vec<WorkerReport> = all_reports(worker, report).into_iter().map(|(_, r)| r).collect();
    if let Some(failure) = crate::report::first_failure(&reports) {
        return Err(crate::error::Error::Job(failure));
    }
    check_keys_found(reports.iter().map(|r| (&r.scan, r.keys)), side)?;
    Ok(reports)
}

/// Sends `report` to every worker and returns every worker's report, in worker order: how each
/// worker learns the job's totals and whether any worker failed.
pub(crate) fn all_reports<R: ExchangeData + Clone>(worker: &mut Worker, report: R) -> Vec<(usize, R)> {
    let (me, peers) = (worker.index(), worker.peers());
    let received = Rc::new(RefCell::new(Vec::new()));
    let probe = ProbeHandle::new();
    let mut input = worker.dataflow::<u64, _, _>(|scope| {
        let (input, sent) = scope.new_input::<Vec<(u32, u32, R)>>();
        sent.collect_reports(Rc::clone(&received)).probe_with(&probe);
        input
    });
    for to in 0..peers {
        input.send((to as u32, me as u32, report.clone()));
    }
    drop(input);
    worker.step_or_park_while(PARK, || !probe.done());
    let mut reports = received.take();
    reports.sort_by_key(|(from, _)| *from);
    reports
}

/// What the workers of one process share: the broadcast build keys and the exact key set that
/// all of them build from those keys, one hash partition each, at the same time.
pub(crate) struct SharedKeys {
    /// The build keys, as the process's first worker received them; released once the set is
    /// built.
    pieces: std::sync::Mutex<Option<std::sync::Arc<Vec<KeyPiece>>>>,
    /// The partitions of the set, one by each worker of the process.
    partitions: std::sync::Mutex<Vec<Option<crate::keyset::Partition>>>,
    set: std::sync::OnceLock<std::sync::Arc<KeySet>>,
    barrier: std::sync::Barrier,
    local_workers: usize,
}

impl SharedKeys {
    pub(crate) fn new(local_workers: usize) -> Self {
        SharedKeys {
            pieces: std::sync::Mutex::new(None),
            partitions: std::sync::Mutex::new((0..local_workers).map(|_| None).collect()),
            set: std::sync::OnceLock::new(),
            barrier: std::sync::Barrier::new(local_workers),
            local_workers,
        }
    }
}

/// Gives every process all the build keys in one exact set: each worker sends its keys once to
/// the first worker of every process (`receivers`), its numbers as the bits it collected them
/// in (see [`KeyArena::take_bits`]); then every worker of the process builds one partition of
/// the set from them, at the same time, and they share the whole. `counts`: all the workers'
/// keys, by kind. `sketched`: the set is to be asked mostly about keys it does not hold, and
/// its partitions keep sketches of their keys (see [`PartitionBuilder::sketching`]).
pub(crate) fn broadcast_keys(worker: &mut Worker, mut keys: KeyArena, counts: KeyCounts, receivers: &[usize], shared: &SharedKeys, sketched: bool) -> std::sync::Arc<KeySet> {
    let me = worker.index();
    let received = Rc::new(RefCell::new(Vec::<KeyPiece>::new()));
    let probe = ProbeHandle::new();
    let mut input = worker.dataflow::<u64, _, _>(|scope| {
        let (input, pieces) = scope.new_input::<Vec<KeyPiece>>();
        let sink = Rc::clone(&received);
        pieces
            .unary::<timely::container::CapacityContainerBuilder<Vec<()>>, _, _, _>(
                ExchangeCore::<OneAtATime<KeyPiece>, _>::new_core(|p: &KeyPiece| p.to as u64),
                "GatherKeys",
                move |_cap, _info| {
                    move |input, _output| {
                        input.for_each(|_time, data| sink.borrow_mut().append(data));
                    }
                },
            )
            .probe_with(&probe);
        input
    });
    // Alone, this process's receiver gets the keys whole, without a copy (timely hands data to
    // a worker of the same process as it is). With other processes, every receiver gets them
    // in the same pieces of about 1 MiB, which every process sorts into the same order (see
    // `KeyPiece::order`): so every process builds the same set, which places every key alike
    // (see `KeySet::positions_batch`).
    let process_of = |w: usize| w / shared.local_workers;
    let local = receivers.iter().copied().find(|&to| process_of(to) == process_of(me));
    let bits = keys.take_bits();
    let remote = receivers.iter().copied().filter(|&to| Some(to) != local).collect::<Vec<_>>();
    let mut sent = 0u64;
    let mut send = |bytes: Vec<u8>, pieces: Vec<std::ops::Range<usize>>, bits_at: Option<u32>| {
        let bytes = std::sync::Arc::new(bytes);
        let mut order = || {
            sent += 1;
            (me as u64) << 32 | sent
        };
        for range in pieces.into_iter().filter(|_| !remote.is_empty()) {
            // Words of bits: the piece's first word; sent as gaps where those are fewer bytes.
            let at = bits_at.map(|at| at + (range.start / 8) as u32);
            let gaps = at.map(|_| crate::keyset::encode_gaps(&bytes[range.clone()])).filter(|gaps| gaps.len() < range.len());
            let order = order();
            let piece = match gaps {
                Some(gaps) => KeyPiece { to: 0, order, range: 0..gaps.len(), keys: std::sync::Arc::new(gaps), bits_at: at, gaps_of: Some(range.len() as u32) },
                None => KeyPiece { to: 0, order, keys: std::sync::Arc::clone(&bytes), range, bits_at: at, gaps_of: None },
            };
            for &to in remote.iter().chain(&local) {
                // Each piece leaves at once, so the next is serialized while this one travels.
                input.send(KeyPiece { to: to as u32, ..piece.clone() });
                input.flush();
            }
        }
        if let Some(to) = local.filter(|_| !bytes.is_empty() && remote.is_empty()) {
            let range = 0..bytes.len();
            input.send(KeyPiece { to: to as u32, order: order(), bits_at, keys: bytes, range, gaps_of: None });
        }
    };
    let pieces = keys.pieces();
    send(keys.into_bytes(), pieces, None);
    if let Some(bits) = bits {
        // Pieces of whole words.
        let pieces = (0..bits.bytes.len()).step_by(crate::keyset::PIECE).map(|start| start..(start + crate::keyset::PIECE).min(bits.bytes.len())).collect();
        send(bits.bytes, pieces, Some(bits.at));
    }
    drop(input);
    // The partition's tables are made while the keys travel.
    // One step first, so that the news that this worker's input is closed leaves before it.
    worker.step();
    let mut builder = PartitionBuilder::new(counts, me % shared.local_workers, shared.local_workers);
    if sketched {
        builder = builder.sketching();
    }
    worker.step_or_park_while(PARK, || !probe.done());
    const LOCKED: &str = "no worker panics holding the lock";
    let local = me % shared.local_workers;
    if local == 0 {
        let mut pieces = received.take();
        pieces.sort_unstable_by_key(|piece| piece.order);
        *shared.pieces.lock().expect(LOCKED) = Some(std::sync::Arc::new(pieces));
    }
    shared.barrier.wait();
    let pieces = shared.pieces.lock().expect(LOCKED).clone().expect("the process's first worker received the keys");
    let (numbers, text): (Vec<&KeyPiece>, Vec<&KeyPiece>) = pieces.iter().partition(|piece| piece.bits_at.is_some());
    let (gaps, bits): (Vec<&KeyPiece>, Vec<&KeyPiece>) = numbers.into_iter().partition(|piece| piece.gaps_of.is_some());
    let at = |piece: &KeyPiece| piece.bits_at.expect("a piece of bits");
    let bits: Vec<BitsPiece> = bits.into_iter().map(|piece| BitsPiece { at: at(piece), bytes: piece.as_ref() }).collect();
    // Gaps are checked as they are received.
    let gaps: Vec<GapsPiece> = gaps.into_iter().map(|piece| GapsPiece::checked_before(at(piece), piece.as_ref(), piece.gaps_of.expect("gaps") as usize)).collect();
    // The partition may keep the text it was sent in, rather than copies of its long keys.
    builder.hold_in_place(text.iter().map(|piece| std::sync::Arc::clone(&piece.keys)).collect());
    let partition = builder.build_with_bits(&text, &bits, &gaps);
    drop((bits, gaps, text));
    drop(pieces);
    shared.partitions.lock().expect(LOCKED)[local] = Some(partition);
    shared.barrier.wait();
    if local == 0 {
        shared.pieces.lock().expect(LOCKED).take();
        let partitions = std::mem::take(&mut *shared.partitions.lock().expect(LOCKED));
        let set = KeySet::from_partitions(partitions.into_iter().map(|p| p.expect("every worker built its partition")).collect());
        let _ = shared.set.set(std::sync::Arc::new(set));
    }
    shared.barrier.wait();
    std::sync::Arc::clone(shared.set.get().expect("the process's first worker assembled the set"))
}

/// Whole build keys (see [`KeyArena::pieces`]) for worker `to`: about 1 MiB of them, or all of a
/// worker's for a receiver in its own process; or, with `bits_at`, words of a worker's numbers
/// as bits (see [`DenseWords`](crate::keyset::DenseWords)), from word `bits_at` on (the numbers
/// from 64·`bits_at`). A piece shares its worker's keys rather than copying them out: a receiver in
/// another process gets the piece's bytes serialized straight from them, one in this process
/// the keys themselves.
#[derive(Clone)]
struct KeyPiece {
    to: u32,
    /// The sending worker (high 32 bits), then the piece's number among those it sent: pieces
    /// are taken in this order, whatever the order they arrived in.
    order: u64,
    keys: std::sync::Arc<Vec<u8>>,
    range: std::ops::Range<usize>,
    bits_at: Option<u32>,
    /// Where the bytes are the gaps of bits (see [`encode_gaps`](crate::keyset::encode_gaps)),
    /// as they travel to another process: the bytes of bits they stand for (a received piece's
    /// are checked to fit them).
    gaps_of: Option<u32>,
}

impl AsRef<[u8]> for KeyPiece {
    fn as_ref(&self) -> &[u8] {
        &self.keys[self.range.clone()]
    }
}

/// A [`KeyPiece`] as it is sent.
#[derive(serde::Serialize)]
struct KeyPieceOut<'a> {
    to: u32,
    order: u64,
    bits_at: Option<u32>,
    gaps_of: Option<u32>,
    #[serde(with = "crate::messages::bytes")]
    keys: &'a [u8],
}

/// A [`KeyPiece`] as it is received.
#[derive(serde::Deserialize)]
struct KeyPieceIn {
    to: u32,
    order: u64,
    bits_at: Option<u32>,
    gaps_of: Option<u32>,
    #[serde(with = "crate::messages::bytes")]
    keys: Vec<u8>,
}

impl serde::Serialize for KeyPiece {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        KeyPieceOut { to: self.to, order: self.order, bits_at: self.bits_at, gaps_of: self.gaps_of, keys: self.as_ref() }.serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for KeyPiece {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let KeyPieceIn { to, order, bits_at, gaps_of, keys } = KeyPieceIn::deserialize(d)?;
        if gaps_of.is_some_and(|len| !crate::keyset::gaps_fit(&keys, len as usize)) {
            return Err(serde::de::Error::custom("malformed gaps of bits"));
        }
        let range = 0..keys.len();
        Ok(KeyPiece { to, order, keys: std::sync::Arc::new(keys), range, bits_at, gaps_of })
    }
}

/// Delivers each `(to, from, report)` to worker `to`.
trait CollectReports<'scope, R> {
    fn collect_reports(self, into: Rc<RefCell<Vec<(usize, R)>>>) -> Self;
}

impl<'scope, R: ExchangeData + Clone> CollectReports<'scope, R> for timely::dataflow::Stream<'scope, u64, Vec<(u32, u32, R)>> {
    fn collect_reports(self, into: Rc<RefCell<Vec<(usize, R)>>>) -> Self {
        self.unary::<timely::container::CapacityContainerBuilder<Vec<(u32, u32, R)>>, _, _, _>(
            Exchange::new(|(to, _, _): &(u32, u32, R)| *to as u64),
            "CollectReports",
            move |_cap, _info| {
                move |input, _output| {
                    input.for_each(|_time, data| {
                        into.borrow_mut().extend(data.drain(..).map(|(_, from, r)| (from as usize, r)));
                    });
                }
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::KeyPiece;

    /// The broadcast's set, built by the two workers of a process from the keys both sent,
    /// holds every key, and holds the long keys in the pieces it received: it copies none.
    #[test]
    fn the_broadcast_set_holds_long_keys_in_the_pieces_received() {
        let keys_of = |w: usize| -> Vec<Vec<u8>> { (0..3_000).map(|i| format!("worker {w}'s long key {i}").into_bytes()).chain([b"k1".to_vec(), b"17".to_vec()]).collect() };
        let arena_of = move |w: usize| keys_of(w).iter().fold(crate::keyset::KeyArena::default(), |mut arena, key| {
            arena.push(key);
            arena
        });
        let counts = arena_of(0).counts().merge(arena_of(1).counts());
        let shared = std::sync::Arc::new(super::SharedKeys::new(2));
        let guards = timely::execute(timely::Config::process(2), move |worker| {
            let set = super::broadcast_keys(worker, arena_of(worker.index()), counts, &[0], &shared, false);
            let all_held = (0..2).flat_map(keys_of).all(|key| set.contains(&key));
            (all_held, set.contains(b"worker 2's long key 0"), set.copied_bytes())
        })
        .expect("the job runs");
        for result in guards.join() {
            assert_eq!(result.expect("the worker finishes"), (true, false, 0));
        }
    }

    /// A piece sent to another process carries its own range of the shared keys, no more.
    #[test]
    fn a_key_piece_travels_as_its_range() {
        let keys = std::sync::Arc::new(b"\x01a\x02bb\x03ccc".to_vec());
        for bits_at in [None, Some(7)] {
            let piece = KeyPiece { to: 3, order: 5 << 32 | 2, keys: std::sync::Arc::clone(&keys), range: 2..5, bits_at, gaps_of: None };
            let wire = bincode::serialize(&piece).expect("serializes");
            let back: KeyPiece = bincode::deserialize(&wire).expect("deserializes");
            assert_eq!((back.to, back.order, back.as_ref(), back.bits_at, back.gaps_of), (3, 5 << 32 | 2, &b"\x02bb"[..], bits_at, None));
        }
    }

    /// Bits sent as gaps arrive as the gaps of those bits, checked: gaps that point past their
    /// piece fail to arrive.
    #[test]
    fn bits_sent_as_gaps_arrive_checked() {
        let bits: Vec<u8> = (0..64u32).map(|i| if i % 5 == 0 { 0x81 } else { 0 }).collect();
        let gaps = crate::keyset::encode_gaps(&bits);
        let piece = KeyPiece { to: 1, order: 1, range: 0..gaps.len(), keys: std::sync::Arc::new(gaps), bits_at: Some(9), gaps_of: Some(64) };
        let back: KeyPiece = bincode::deserialize(&bincode::serialize(&piece).expect("serializes")).expect("deserializes");
        assert_eq!((back.bits_at, back.gaps_of), (Some(9), Some(64)));
        assert_eq!(crate::keyset::decode_gaps(back.as_ref(), 64), Some(bits.clone()));
        let short = KeyPiece { gaps_of: Some(60), ..piece };
        assert!(bincode::deserialize::<KeyPiece>(&bincode::serialize(&short).expect("serializes")).is_err(), "byte 60 is past 60 bytes");
    }
}
