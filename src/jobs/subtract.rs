//! The subtract job, the inverse of a counting build: takes the keys of delimited inputs out of
//! a counting filter, across all the workers of all the processes.
//!
//! Every process loads the filter. Each worker reads the splits it claims, checks each key
//! against the filter (a key it answers `no` for was never inserted), and counts the keys in a
//! partial counting filter of the filter's identity. The partials are added by the all-reduce, as
//! a counting build's are, and process 0 takes the total out of the filter's counters
//! ([`CountingBloomFilter::subtract`]) and writes it. All or nothing: a counter that holds fewer
//! than the keys count there fails the job before anything is written, which is exactly when
//! removing the keys one by one, in any order, would have met a key answered `no`.

use super::build::{check_writable, shared_filter, FilterCopies, InputPlan, SizedSpec};
use super::{global_filter, global_shared_filter, input_reports, join_workers, KeepKeys, Partial};
use crate::shared_filter::FilterPer;
use crate::allreduce::{Gather, LocalMerge, Mergeable};
use crate::cluster::{Agreement, ClusterConfig};
use crate::counting::{CountCheck, CountingBloomFilter};
use crate::hashing::BlockProbe;
use crate::error::{Error, Result};
use crate::filter::BloomFilter;
use crate::records::KeyType;
use crate::format::{self, StoredFilter};
use crate::report::{mb_per_sec, Progress, Timeline, WorkerReport};
use crate::scan::{ScanOptions, ScanStats, Source};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Instant;

/// Everything the subtract job needs, validated by the CLI.
#[derive(Clone, Debug)]
pub struct SubtractConfig {
    /// The counting filter the keys are taken out of.
    pub filter: PathBuf,
    pub inputs: Vec<PathBuf>,
    /// How the inputs are read; the keys are hashed as `key_type` says, and empty keys refused
    /// where the filter's scheme refuses them.
    pub scan: ScanOptions,
    /// How keys are hashed; `None`: as the filter file records, else as bytes.
    pub key_type: Option<KeyType>,
    /// Where process 0 writes the filter after the removals (the filter file itself to replace
    /// it, atomically).
    pub output: PathBuf,
    /// Skip (and count) keys the filter answers `no` for instead of failing on the first.
    pub skip_absent: bool,
    /// The counts of the keys to remove in a partial per worker, or in one per process (see
    /// [`FilterPer`]).
    pub filter_per: FilterPer,
    pub cluster: ClusterConfig,
    pub progress: bool,
}

/// The job's statistics, printed and written with `--stats-json`.
#[derive(Clone, Debug, Serialize)]
pub struct SubtractStats {
    pub filter: String,
    pub output: String,
    pub processes: usize,
    pub workers_per_process: usize,
    pub records: u64,
    pub bytes: u64,
    pub malformed: u64,
    pub malformed_examples: Vec<String>,
    /// Records whose key is NULL (`--null-key`): skipped, as a build skips them.
    pub null_keys: u64,
    /// `worker` or `process`: where the counts of the keys to remove were kept (see
    /// [`FilterPer`]).
    pub filter_per: &'static str,
    pub keys_removed: u64,
    /// Keys the filter answers `no` for, skipped (`--skip-absent`).
    pub absent_keys_skipped: u64,
    /// The filter's count of keys inserted, before and after: None for a Hadoop file, which
    /// does not record it.
    pub items_before: Option<u64>,
    pub items_after: Option<u64>,
    /// Counters above zero after the removals, and those at 15 (never decremented).
    pub counters_set: u64,
    pub saturated_counters: u64,
    pub elapsed_secs: f64,
    pub mb_per_sec: f64,
    /// When worker 0 had its workers running and the counts merged, and the filter written.
    pub timeline: Timeline,
    pub per_worker: Vec<WorkerReport>,
    /// Things about the job its user should know, such as an input given twice.
    pub warnings: Vec<String>,
}

/// A worker's partial: the counts of the keys it read that the filter may hold.
struct Removals {
    counts: CountingBloomFilter,
    check: KeyCheck,
}

/// Which keys of a batch are counted for removal: those the filter may hold. A key it answers
/// `no` for was never inserted: it fails the job, or is skipped and counted with
/// `--skip-absent`. Asked by the count itself ([`CountCheck`]), with the probes it computed, so
/// that each key is hashed once for the check and the count: `subtract -w 1` of 2M keys,
/// callgrind, 1,147.6M instructions with the check a batched query of its own, 1,106.2M so
/// (1,053.8M with the counts' block bounds-checked once a key).
struct KeyCheck {
    /// The filter's counters above zero, as bits.
    present: Arc<BloomFilter>,
    /// The filter file, for messages.
    filter: Arc<str>,
    skip_absent: bool,
    /// Keys skipped as absent.
    absent: u64,
    /// The first key of the batch being counted that the filter answers `no` for.
    first_absent: Option<usize>,
    /// The filter's answers for the keys of the batch being counted.
    answers: Vec<bool>,
}

impl KeyCheck {
    fn new(present: Arc<BloomFilter>, filter: Arc<str>, skip_absent: bool) -> Self {
        KeyCheck { present, filter, skip_absent, absent: 0, first_absent: None, answers: Vec::new() }
    }

    /// Has `count` count the keys of the batch the filter may hold, asking this check about
    /// each; fails on a key it answers `no` for unless such keys are skipped.
    fn count_present(&mut self, keys: &[&[u8]], count: impl FnOnce(&[&[u8]], &mut Self)) -> Result<()> {
        self.first_absent = None;
        count(keys, self);
        match self.first_absent {
            Some(i) if !self.skip_absent => Err(Error::Job(format!(
                "{}: key {:?} is definitely not in the filter (it answers `no` for it): it was never inserted, so it cannot be removed; \
                 nothing was written (give --skip-absent to skip such keys)",
                self.filter,
                String::from_utf8_lossy(keys[i])
            ))),
            _ => Ok(()),
        }
    }
}

impl CountCheck for KeyCheck {
    fn keeps_probes(&mut self, probes: &[BlockProbe]) -> Option<&[bool]> {
        self.present.contains_probes(probes, &mut self.answers);
        if let Some(i) = self.answers.iter().position(|&maybe| !maybe) {
            self.first_absent = Some(i);
            self.absent += self.answers.iter().filter(|&&maybe| !maybe).count() as u64;
        }
        Some(&self.answers)
    }

    #[inline(always)]
    fn keeps_positions(&mut self, i: usize, positions: &[u64]) -> bool {
        let maybe = self.present.contains_positions(positions);
        if !maybe {
            self.absent += 1;
            self.first_absent.get_or_insert(i);
        }
        maybe
    }
}

impl Mergeable for Removals {
    fn word_count(&self) -> usize {
        self.counts.word_count()
    }

    fn words_in(&self, range: std::ops::Range<usize>) -> &[u64] {
        self.counts.words_in(range)
    }

    fn words_in_mut(&mut self, range: std::ops::Range<usize>) -> &mut [u64] {
        self.counts.words_in_mut(range)
    }

    fn merge_words(ours: &mut [u64], theirs: &[u64]) {
        <CountingBloomFilter as Mergeable>::merge_words(ours, theirs);
    }
}

impl Partial for Removals {
    fn insert_batch(&mut self, keys: &[&[u8]]) -> Result<()> {
        let counts = &mut self.counts;
        self.check.count_present(keys, |keys, check| counts.insert_batch_checked(keys, check))
    }

    fn placeholder() -> Self {
        let present = Arc::new(<BloomFilter as Partial>::placeholder());
        let check = KeyCheck::new(present, Arc::from(""), false);
        Removals { counts: <CountingBloomFilter as Partial>::placeholder(), check }
    }
}

/// The filter as the processes of a job compare it: its identity, key count and key form (a
/// process that loaded another file would count keys the others did not check).
fn filter_plan(filter: &CountingBloomFilter) -> String {
    format!("{:?} {} {:?}", filter.spec(), filter.items_inserted(), filter.key_form())
}

/// What every process of the job must agree on: the plan of its inputs and the filter's.
fn job_agreement(workers: usize, source: &Source, filter_plan: &str) -> Agreement {
    let plan = format!("subtract\n{source:?}\n{filter_plan}");
    Agreement::new(workers, source.inputs.len() as u64, source.total_bytes(), &plan)
}

/// Loads the counting filter of `config`, refusing a plain one, and sets the scan's key rules
/// by it, refusing keys of another form than its keys'.
fn load_counting(config: &mut SubtractConfig) -> Result<CountingBloomFilter> {
    let name = config.filter.display();
    let filter = format::load(&config.filter)?.into_counting().map_err(|why| Error::Job(format!("{name}: {why}")))?;
    let rules = &mut config.scan.key_rules;
    rules.key_type = config.key_type.or(filter.key_form().map(|form| form.key_type)).unwrap_or(KeyType::Bytes);
    rules.reject_empty = filter.spec().scheme.refuses_empty_keys();
    if let Some(form) = filter.key_form() {
        form.check(config.scan.key.field_count(), rules.key_type, "--key").map_err(|e| Error::Job(format!("{name}: {e}")))?;
    }
    filter.spec().scheme.check_key_type(rules.key_type).map_err(|e| Error::Job(format!("{name}: {e}")))?;
    Ok(filter)
}

/// The filter loaded and the inputs planned into splits, after the checks that fail a job
/// before any work: the steps [`run`] and [`plan`] share.
fn prepare(config: &mut SubtractConfig) -> Result<(CountingBloomFilter, Source)> {
    let inputs = crate::splits::resolve_inputs(&config.inputs)?;
    if config.cluster.process == 0 {
        check_writable(&config.output)?;
    }
    crate::output::check_not_an_input(&config.output, &inputs)?;
    crate::output::check_not_an_input(&config.filter, &inputs)?;
    let filter = load_counting(config)?;
    let source = Source::plan_inputs(inputs, config.scan.clone(), config.cluster.peers())?;
    Ok((filter, source))
}

/// The counts of the keys to remove: a counting filter of `filter`'s identity (a partial per
/// worker or one per process).
fn counts_sized(filter: &CountingBloomFilter) -> SizedSpec {
    SizedSpec { spec: *filter.spec(), expected_items: 0, target_fpp: 0.0, note: String::new(), estimated: false }
}

/// What a subtract job would do, worked out without reading its records: `subtract --plan`,
/// for a removal of terabytes' keys whose memory its user wants to know before starting it.
#[derive(Clone, Debug, Serialize)]
pub struct SubtractPlan {
    pub processes: usize,
    pub workers_per_process: usize,
    #[serde(flatten)]
    pub input: InputPlan,
    /// The counting filter and its shape, and the keys it records.
    pub filter: String,
    pub bits: u64,
    pub hashes: u32,
    pub items_inserted: u64,
    /// The copies of the keys' counts in a process (a counting filter of the filter's size).
    #[serde(flatten)]
    pub copies: FilterCopies,
    /// The filter as loaded in every process: its counters, and its bits, which check each key.
    pub loaded_filter_bytes: u64,
    pub output: String,
    pub warnings: Vec<String>,
}

/// The plan of the subtract job `config` asks for ([`SubtractPlan`]): what [`run`] decides
/// before its workers start, with the same checks and errors, and nothing read or written.
pub fn plan(mut config: SubtractConfig) -> Result<SubtractPlan> {
    let (filter, source) = prepare(&mut config)?;
    let spec = *filter.spec();
    Ok(SubtractPlan {
        processes: config.cluster.processes,
        workers_per_process: config.cluster.workers,
        input: InputPlan::of(&source),
        filter: config.filter.display().to_string(),
        bits: spec.bits,
        hashes: spec.hashes,
        items_inserted: filter.items_inserted(),
        copies: FilterCopies::planned(config.filter_per, true, &counts_sized(&filter), config.cluster.workers)?,
        loaded_filter_bytes: spec.bits.div_ceil(2).saturating_add(spec.bits.div_ceil(8)),
        output: config.output.display().to_string(),
        warnings: crate::splits::repeated_input(&source.inputs).into_iter().collect(),
    })
}

/// Runs the subtract job on this process. Returns the statistics on process 0 (which writes the
/// filter), `None` elsewhere.
pub fn run(mut config: SubtractConfig) -> Result<Option<SubtractStats>> {
    let started = Instant::now();
    let (mut filter, source) = prepare(&mut config)?;
    let source = Arc::new(source);
    let repeated = crate::splits::repeated_input(&source.inputs);
    let cluster = &config.cluster;
    let spec = *filter.spec();
    let sized = counts_sized(&filter);
    let shared = shared_filter(config.filter_per, true, &sized, cluster.workers)?.map(Arc::new);
    let shares = shared.is_some();
    let peers = cluster.peers();
    let my_workers = cluster.process * cluster.workers..(cluster.process + 1) * cluster.workers;
    let counter = Arc::new(AtomicU64::new(0));
    let progress = Progress::start(config.progress, "subtract", Arc::new(AtomicU64::new(source.bytes_of(my_workers, peers))), Arc::clone(&counter));
    let abort = Arc::new(AtomicBool::new(false));
    let present = Arc::new(filter.to_bloom_filter());
    let name: Arc<str> = Arc::from(config.filter.display().to_string());
    let skip_absent = config.skip_absent;
    let agreement = {
        let (source, plan) = (Arc::clone(&source), filter_plan(&filter));
        move || job_agreement(cluster.workers, &source, &plan)
    };
    let local = Arc::new(LocalMerge::new(cluster.workers));
    let guards = crate::cluster::execute(cluster, agreement, move |worker| {
        let mut timeline = Timeline::default();
        timeline.mark("workers running", started);
        let mut check = KeyCheck::new(Arc::clone(&present), Arc::clone(&name), skip_absent);
        let (counts, report) = match &shared {
            Some(shared) => {
                let insert = |keys: &[&[u8]]| {
                    check.count_present(keys, |keys, check| {
                        shared.insert_counts_checked(keys, check);
                    })
                };
                let mut report = global_shared_filter(worker, &source, shared, insert, Gather::To(0), &abort, &counter, KeepKeys::No, &local);
                report.absent_keys = check.absent;
                let counts = match worker.index() {
                    // SAFETY: every worker of this process is past its last use of the counts
                    // (`global_shared_filter` returns after it, behind a barrier).
                    0 => match unsafe { shared.take() } {
                        Some(StoredFilter::Counting(counts)) => counts,
                        _ => unreachable!("the counts are a counting filter, taken by worker 0 only"),
                    },
                    _ => <CountingBloomFilter as Partial>::placeholder(),
                };
                (counts, report)
            }
            None => {
                let empty = |tick: &mut dyn FnMut()| Removals { counts: CountingBloomFilter::new_partial(spec, tick), check };
                let (removals, mut report) = global_filter(worker, &source, empty, Gather::To(0), &abort, &counter, KeepKeys::No, &local);
                report.absent_keys = removals.check.absent;
                (removals.counts, report)
            }
        };
        timeline.mark("counts merged", started);
        let reports = input_reports(worker, report, "input")?;
        if worker.index() != 0 {
            return Ok(None);
        }
        let mut counts = counts;
        counts.set_items_inserted(reports.iter().map(|r| r.keys - r.absent_keys).sum());
        Ok(Some((counts, reports, timeline)))
    })?;
    let joined = join_workers(guards);
    progress.finish();
    let Some((counts, per_worker, mut timeline)) = joined? else { return Ok(None) };

    // Only native files record how many keys went in.
    let recorded = filter.spec().scheme.is_native();
    let items_before = recorded.then(|| filter.items_inserted());
    filter.subtract(&counts).map_err(|e| Error::Job(format!("{}: {e}; nothing was written", config.filter.display())))?;
    let written = StoredFilter::Counting(filter);
    format::write(&config.output, &written)?;
    timeline.mark("filter written", started);
    let StoredFilter::Counting(filter) = written else { unreachable!("written as a counting filter") };
    let elapsed = started.elapsed().as_secs_f64();
    let mut scan = ScanStats::default();
    per_worker.iter().for_each(|r| scan.absorb(&r.scan));
    Ok(Some(SubtractStats {
        filter: config.filter.display().to_string(),
        output: config.output.display().to_string(),
        processes: cluster.processes,
        workers_per_process: cluster.workers,
        records: scan.records,
        bytes: scan.bytes,
        malformed: scan.malformed,
        malformed_examples: scan.malformed_examples,
        null_keys: scan.null_keys,
        filter_per: if shares { "process" } else { "worker" },
        keys_removed: counts.items_inserted(),
        absent_keys_skipped: per_worker.iter().map(|r| r.absent_keys).sum(),
        items_before,
        items_after: recorded.then(|| filter.items_inserted()),
        counters_set: filter.counters_set(),
        saturated_counters: filter.saturated_counters(),
        elapsed_secs: elapsed,
        mb_per_sec: mb_per_sec(scan.bytes, elapsed),
        timeline,
        per_worker,
        warnings: repeated.into_iter().collect(),
    }))
}
