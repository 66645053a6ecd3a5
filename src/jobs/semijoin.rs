//! The semi-join job: the global filter is built by the all-reduce and left on every worker (or
//! read from a file), then every worker scans its own probe splits and keeps the records whose key
//! the filter answers "maybe". Probe records never cross the network. With `--exact`, the
//! survivors' keys are checked against the build keys (broadcast to every process, or both
//! exchanged by key and looked up shard by shard), and only true matches are written.
//!
//! With `--anti` (which needs `--exact`) the job keeps the other records: those whose key is not
//! on the build side (a left anti-join, Spark's `left_anti`). A record the filter answers
//! "definitely absent" for is kept at once; only the filter's "maybe" answers are checked
//! against the build keys, and those that match are dropped.

use super::build::{filter_plan, shared_filter, size_filter, SizedSpec, Sizing};
use super::shard_join::{send_kept_keys, shard_join};
use super::steal::ProbeClaims;
use super::probe_side::Marks;
use super::{all_reports, broadcast_keys, check_keys_found, every_key, global_filter, global_shared_filter, input_reports, join_workers, KeepKeys, SharedKeys};
use crate::keyset::{DistinctKeys, KeyArena, KeyCounts, KeySet};
use crate::allreduce::{Gather, LocalMerge};
use crate::cluster::{Agreement, ClusterConfig};
use crate::error::{Error, Result};
use crate::compressed::OutputCompression;
use crate::filter::BloomFilter;
use crate::query_filter::QueryFilter;
use crate::shared_filter::{FilterPer, SharedFilter};
use crate::format::{self, StoredFilter};
use crate::hashing::Scheme;
use crate::spec::Layout;
use crate::output::{self, part_name, TaskFile};
use crate::report::{mb_per_sec, Progress, Timeline, WorkerReport};
use crate::scan::{Header, RecordBatch, ScanOptions, ScanStats, Source};
use crate::splits::{resolve_inputs, Input};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use timely::worker::Worker;

mod plan;
mod shuffle;

pub use plan::{plan, SemijoinPlan};

/// Where the global filter comes from.
#[derive(Clone, Debug)]
pub enum FilterSource {
    /// Built from the build side's inputs by the distributed build.
    Build { inputs: Vec<PathBuf>, scan: ScanOptions, sizing: Sizing, scheme: Scheme, layout: Layout, seed: u32, filter_per: FilterPer },
    /// Read from a filter file (every process reads it).
    File(PathBuf),
}

/// How `--exact` removes the Bloom step's false positives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExactStrategy {
    /// Broadcast when the build keys fit the broadcast limit, shuffle otherwise.
    Auto,
    /// Every process gets all build keys in a compact hash set and checks its survivors locally
    /// (Spark's broadcast hash join): no probe data crosses the network.
    Broadcast,
    /// Survivors' keys and build keys are exchanged by key, and each worker looks up the
    /// survivors of its shard of the keys (`jobs::shard_join`): for build sides too large to copy to
    /// every process.
    Shuffle,
    /// Every process gets all probe keys in a compact hash set; the build side is read past it,
    /// marking the probe keys it holds, and the probe side read again for the records whose
    /// key is marked (`jobs::probe_side`): for build sides much larger than
    /// the probe side. No Bloom filter is built.
    ProbeSide,
}

/// The strategy as `--exact-strategy` and the statistics name it.
impl std::fmt::Display for ExactStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ExactStrategy::Auto => "auto",
            ExactStrategy::Broadcast => "broadcast",
            ExactStrategy::Shuffle => "shuffle",
            ExactStrategy::ProbeSide => "probe-side",
        })
    }
}

/// Everything the semi-join needs, validated by the CLI.
#[derive(Clone, Debug)]
pub struct SemijoinConfig {
    pub filter: FilterSource,
    pub probe_inputs: Vec<PathBuf>,
    pub probe_scan: ScanOptions,
    pub output: PathBuf,
    pub exact: bool,
    /// Keep the records whose key is not on the build side instead (needs `exact`).
    pub anti: bool,
    pub exact_strategy: ExactStrategy,
    /// Most build-key bytes `Auto` broadcasts.
    pub broadcast_limit: u64,
    pub overwrite: bool,
    /// How the part files are compressed.
    pub compression: OutputCompression,
    pub cluster: ClusterConfig,
    pub progress: bool,
}

/// One worker's account of its probe splits.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeReport {
    pub worker: usize,
    pub scan: ScanStats,
    /// Records the filter answered "maybe" for.
    pub bloom_survivors: u64,
    /// Records this worker wrote: to its part file, and to the outputs of the splits it took.
    pub records_out: u64,
    /// What the records the filter dropped would have cost an exact join's key exchange:
    /// their key bytes plus 12 bytes of worker and sequence number each.
    pub pruned_exchange_bytes: u64,
    /// Splits this worker took from another worker, of its process or another, and read for
    /// it (see `jobs::steal`).
    pub taken_splits: u64,
    /// The broadcast's key set this worker's process held: its keys, and the bytes of its
    /// tables (see [`KeySet::table_bytes`]).
    #[serde(default)]
    pub key_set: Option<(u64, u64)>,
    /// The probe keys a build key matched, each once (the probe-side join only): the same on
    /// every worker, which all hold the merged marks.
    #[serde(default)]
    pub probe_keys_matched: Option<u64>,
    pub elapsed_secs: f64,
    pub error: Option<String>,
}

/// The job's statistics, printed and written to `_SUCCESS`.
#[derive(Clone, Debug, Serialize)]
pub struct SemijoinStats {
    pub output: String,
    /// How the part files are compressed: `none` or the codec's name (`gzip`, `zstd`, ...).
    pub output_compression: String,
    pub processes: usize,
    pub workers_per_process: usize,
    pub filter: String,
    pub build_records: Option<u64>,
    pub build_keys: Option<u64>,
    pub build_malformed: Option<u64>,
    /// Build records whose key is NULL (`--null-key`): not inserted.
    pub build_null_keys: Option<u64>,
    /// The global filter's size and shape, fill and estimated false-positive rate: None for the
    /// probe-side join, which builds none.
    pub bits: Option<u64>,
    pub hashes: Option<u32>,
    pub seed: Option<u32>,
    pub fill_ratio: Option<f64>,
    pub estimated_fpp: Option<f64>,
    pub probe_records: u64,
    pub probe_bytes: u64,
    pub probe_malformed: u64,
    /// Probe records whose key is NULL (`--null-key`): they match nothing, so the semi-join
    /// drops them and the anti-join keeps them.
    pub probe_null_keys: u64,
    pub malformed_examples: Vec<String>,
    /// Probe records the filter answered "maybe" for: every record with a key that is not
    /// NULL, in the probe-side join, which has no Bloom step.
    pub bloom_survivors: u64,
    pub records_out: u64,
    /// Fraction of probe records the filter dropped (of those with a key that is not NULL).
    pub fraction_pruned: f64,
    pub exact: bool,
    /// An anti-join: the records out are those whose key is not on the build side.
    pub anti: bool,
    /// `broadcast`, `shuffle` or `probe-side` (`--exact` only).
    pub exact_strategy: Option<ExactStrategy>,
    /// Build-key bytes the workers held for the broadcast, as text and numbers as bits: what
    /// is sent to every process, at most (bits go to other processes as gaps where those are
    /// fewer bytes). The broadcast strategy only.
    pub broadcast_key_bytes: Option<u64>,
    /// The keys of the broadcast's set (each once) and the bytes of its tables in a process
    /// (the largest of the processes'): the broadcast strategy's build keys, the probe-side
    /// join's probe keys.
    pub key_set_keys: Option<u64>,
    pub key_set_table_bytes: Option<u64>,
    /// The probe keys a build key matched, each once: the probe-side join only.
    pub probe_keys_matched: Option<u64>,
    /// Bloom survivors the exact join found unmatched (`--exact` only, but for the probe-side
    /// join, which has no Bloom step): removed, or with `--anti` kept.
    pub false_positives_removed: Option<u64>,
    /// Exchange bytes the Bloom step kept off the network (the shuffle strategy only).
    pub network_bytes_saved_by_bloom: Option<u64>,
    pub elapsed_secs: f64,
    pub mb_per_sec: f64,
    pub warnings: Vec<String>,
    /// The part files written into another host's output directory (the processes do not share
    /// it), so not beside this `_SUCCESS`.
    pub parts_elsewhere: Vec<String>,
    /// When worker 0 had its workers running, the global filter, its own probe done and every
    /// part committed.
    pub timeline: Timeline,
    pub per_worker_build: Vec<WorkerReport>,
    pub per_worker_probe: Vec<ProbeReport>,
}

/// The filter side, planned on every process before the workers start. (The build side's
/// source is boxed: it is several times the size of the other variant.)
enum PlannedFilter {
    /// Built from the build side: in a partial per worker, or in one filter per process that its
    /// workers share (see [`FilterPer`]).
    Build { source: Box<Source>, sized: Box<SizedSpec>, shared: Option<SharedFilter> },
    File { path: PathBuf, filter: Arc<QueryFilter> },
}

/// What every process of the job must agree on: both sides' plans, the filter and the output.
fn job_agreement(config: &SemijoinConfig, planned: &PlannedFilter, probe: &Source) -> Agreement {
    let (filter, build_files, build_bytes) = match planned {
        PlannedFilter::Build { source, sized, .. } => (filter_plan(source, sized), source.inputs.len() as u64, source.total_bytes()),
        // The file's bits are summed by their count: another file of the same identity differs.
        PlannedFilter::File { path, filter } => (format!("{path:?} {:?} {} {}", filter.spec(), filter.items_inserted(), filter.bits_set()), 1, 0),
    };
    let plan = format!(
        "semijoin\n{filter}\n{probe:?}\nexact {} anti {} {:?} {} compression {:?} output {:?}",
        config.exact, config.anti, config.exact_strategy, config.broadcast_limit, config.compression, config.output
    );
    Agreement::new(config.cluster.workers, build_files + probe.inputs.len() as u64, build_bytes + probe.total_bytes(), &plan)
}

/// Both sides planned, after the checks that fail a job before any work: the steps [`run`]
/// and [`plan`] share.
struct Prepared {
    planned: PlannedFilter,
    probe: Source,
    /// Whether the job holds the probe keys (see [`Job::plans_probe_side`]).
    probe_side: bool,
}

fn prepare(config: &SemijoinConfig) -> Result<Prepared> {
    let cluster = &config.cluster;
    if config.exact && matches!(config.filter, FilterSource::File(_)) {
        return Err(Error::invalid("--exact", "needs the build side (--build): a filter file holds no keys to join with"));
    }
    if config.anti && !config.exact {
        return Err(Error::invalid(
            "--anti",
            "needs --exact: a record the filter answers \"maybe\" for by a false positive has no match and must be kept",
        ));
    }
    // Both sides' inputs, resolved first: the output must be none of them.
    let build_inputs = match &config.filter {
        FilterSource::Build { inputs, .. } => resolve_inputs(inputs)?,
        FilterSource::File(_) => Vec::new(),
    };
    let probe_inputs = resolve_inputs(&config.probe_inputs)?;
    if build_inputs.contains(&Input::Stdin) && probe_inputs.contains(&Input::Stdin) {
        // The build side would read it all and the probe find it empty: a job of no records.
        return Err(Error::invalid("input", "standard input (-) is given as both --build and --probe, and it can be read only once"));
    }
    output::check_not_an_input(&config.output, build_inputs.iter().chain(&probe_inputs))?;
    let planned = match &config.filter {
        FilterSource::Build { scan, sizing, scheme, layout, seed, .. } => {
            let source = Source::plan_inputs(build_inputs, scan.clone(), cluster.peers())?;
            let sized = size_filter(sizing, &source, *scheme, *layout, *seed)?;
            // The filter its workers share, where they share one, is made by `run`.
            PlannedFilter::Build { source: Box::new(source), sized: Box::new(sized), shared: None }
        }
        FilterSource::File(path) => {
            let filter = format::load(path)?.into_query_filter();
            let probe = &config.probe_scan;
            if let Some(form) = filter.key_form() {
                form.check(probe.key.field_count(), probe.key_rules.key_type, "--probe-key").map_err(|e| Error::Job(format!("{}: {e}", path.display())))?;
            }
            filter.spec().scheme.check_key_type(probe.key_rules.key_type).map_err(|e| Error::Job(format!("{}: {e}", path.display())))?;
            PlannedFilter::File { path: path.clone(), filter: Arc::new(filter) }
        }
    };
    // A probe key the filter's scheme cannot hold (an empty key, for Hadoop) cannot match.
    let mut probe_scan = config.probe_scan.clone();
    probe_scan.key_rules.reject_empty = match &planned {
        PlannedFilter::Build { sized, .. } => sized.spec.scheme.refuses_empty_keys(),
        PlannedFilter::File { filter, .. } => filter.spec().scheme.refuses_empty_keys(),
    };
    // A NULL key joins nothing: the anti-join keeps its record, the semi-join drops it.
    probe_scan.keep_null_records = config.anti;
    let probe = Source::plan_inputs(probe_inputs, probe_scan, cluster.peers())?;
    if let (Some(first), Some(other)) = (&probe.header, &probe.other_header) {
        return Err(header_mismatch(first, other));
    }
    if config.exact_strategy == ExactStrategy::ProbeSide && probe.splits.iter().any(|split| split.is_stdin()) {
        return Err(Error::invalid("--exact-strategy", "probe-side reads the probe side twice, and standard input (-) can be read only once"));
    }
    let probe_side = Job::plans_probe_side(config.exact, config.exact_strategy, &planned, &probe);
    Ok(Prepared { planned, probe, probe_side })
}

/// A filter read from the file at `path`, in words: a dynamic filter's rows counted.
fn read_from(path: &Path, filter: &QueryFilter) -> String {
    match filter {
        QueryFilter::Rows(rows) => format!("read from {} (a Hadoop DynamicBloomFilter: {} rows of the size below, asked in turn)", path.display(), rows.rows().len()),
        QueryFilter::One(_) => format!("read from {}", path.display()),
    }
}

/// The warnings of either side's inputs: an input given twice.
fn input_warnings(planned: &PlannedFilter, probe: &Source) -> Vec<String> {
    let build = match planned {
        PlannedFilter::Build { source, .. } => crate::splits::repeated_input(&source.inputs),
        PlannedFilter::File { .. } => None,
    };
    let build = build.map(|w| format!("build side: {w}"));
    build.into_iter().chain(crate::splits::repeated_input(&probe.inputs).map(|w| format!("probe side: {w}"))).collect()
}

/// Runs the semi-join on this process. Returns the statistics on process 0, `None` elsewhere.
pub fn run(config: SemijoinConfig) -> Result<Option<SemijoinStats>> {
    let started = Instant::now();
    let cluster = config.cluster.clone();
    let Prepared { mut planned, probe, probe_side } = prepare(&config)?;
    if let (PlannedFilter::Build { sized, shared, .. }, FilterSource::Build { filter_per, .. }) = (&mut planned, &config.filter) {
        // Not where the join holds the probe keys, which builds no filter: a build side of
        // terabytes would have had a filter of gigabytes made (and its pages written), or
        // refused as past the memory, for nothing. (Should the probe keys prove past the limit,
        // its workers fill partials, checked then: see `run_worker`.)
        if !probe_side {
            *shared = shared_filter(*filter_per, false, sized, cluster.workers)?;
        }
    }
    // Held until the job ends, when it waits for the old output's removal.
    let replaced = output::prepare(&config.output, config.overwrite, cluster.process)?;

    let peers = cluster.peers();
    let mine = cluster.process * cluster.workers..(cluster.process + 1) * cluster.workers;
    let build_bytes = match &planned {
        PlannedFilter::Build { source, .. } => source.bytes_of(mine.clone(), peers),
        PlannedFilter::File { .. } => 0,
    };
    // The probe-side join reads the probe side twice.
    let probe_bytes = probe.bytes_of(mine, peers) * (1 + probe_side as u64);
    let progress_total = Arc::new(AtomicU64::new(build_bytes + probe_bytes));
    let counter = Arc::new(AtomicU64::new(0));
    let progress = Progress::start(config.progress, "semijoin", Arc::clone(&progress_total), Arc::clone(&counter));
    let abort = Arc::new(AtomicBool::new(false));
    let assigned = (0..peers).map(|w| probe.splits_of(w, peers).map(|s| s.index).collect()).collect();
    let job = Arc::new(Job {
        planned,
        probe,
        dir: config.output.clone(),
        exact: config.exact,
        anti: config.anti,
        exact_strategy: config.exact_strategy,
        probe_side,
        broadcast_limit: config.broadcast_limit,
        compression: config.compression,
        shared_keys: SharedKeys::new(cluster.workers),
        local_merge: LocalMerge::new(cluster.workers),
        shared_query: OnceLock::new(),
        probe_claims: ProbeClaims::new(&config.output, assigned),
        cluster: cluster.clone(),
        started,
    });

    let agreement = {
        let job = Arc::clone(&job);
        move || job_agreement(&config, &job.planned, &job.probe)
    };
    let guards = crate::cluster::execute(&cluster, agreement, move |worker| {
        job.run_worker(worker, &abort, &counter)
    })?;

    let joined = join_workers(guards);
    progress.finish();
    drop(replaced);
    joined
}

/// The processes of `workers` (global indices), as a list: "1, 2".
fn processes_of(workers: &[usize], per_process: usize) -> String {
    let mut processes: Vec<usize> = workers.iter().map(|w| w / per_process).collect();
    processes.dedup();
    processes.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
}

/// A worker's part file after its probe: finished, or, where other processes took splits of its
/// own ([`Stealing::lost`]), open for their outputs, which it appends once every worker is done.
enum Part {
    Finished(PathBuf),
    Open(Box<TaskFile>),
}

/// What a worker made or lost by the taking of probe splits (see [`steal`](super::steal)).
/// Dropped with files left (the job failed before its probe), it removes them, and the output
/// directory where that leaves it empty.
struct Stealing {
    dir: PathBuf,
    /// Its announcement, kept until the job commits: a worker that sees worker 0's then knows
    /// that its part goes beside worker 0's `_SUCCESS`.
    announcement: Vec<PathBuf>,
    /// The failure to announce the worker, reported when its probe begins.
    unannounced: Option<Error>,
    /// Its claims, removed once every worker is done claiming.
    claims: Vec<PathBuf>,
    /// The outputs of the splits it took, removed once their owners have appended them (or the
    /// job failed).
    outputs: Vec<PathBuf>,
    /// Its splits that others took, in input order, whose outputs are not appended yet.
    lost: Vec<usize>,
}

impl Stealing {
    /// Announces worker `me` at once, before the build: every worker of a job then announces
    /// before the build's last exchange, which no worker passes before all reach it, so no worker
    /// can run out of splits and look for some to take before another has announced itself.
    /// (Announced when its probe began, a worker could be too late for a quick other process,
    /// which then took nothing.)
    fn announce(claims: &ProbeClaims, me: usize, dir: &Path) -> Stealing {
        let mut stealing = Stealing { dir: dir.to_path_buf(), announcement: Vec::new(), unannounced: None, claims: Vec::new(), outputs: Vec::new(), lost: Vec::new() };
        match claims.announce(me) {
            Ok(announcement) => stealing.announcement.push(announcement),
            Err(e) => stealing.unannounced = Some(e),
        }
        stealing
    }
}

impl Drop for Stealing {
    fn drop(&mut self) {
        if !(self.announcement.is_empty() && self.claims.is_empty() && self.outputs.is_empty()) {
            ProbeClaims::remove(&mut self.announcement);
            ProbeClaims::remove(&mut self.claims);
            ProbeClaims::remove(&mut self.outputs);
            output::remove_if_empty(&self.dir);
        }
    }
}

/// The planned job, shared by the workers of this process.
struct Job {
    planned: PlannedFilter,
    probe: Source,
    dir: PathBuf,
    exact: bool,
    anti: bool,
    exact_strategy: ExactStrategy,
    /// Whether the exact join holds the probe side's keys (see [`Job::plans_probe_side`]).
    probe_side: bool,
    broadcast_limit: u64,
    compression: OutputCompression,
    /// The broadcast build keys, shared by this process's workers.
    shared_keys: SharedKeys,
    /// The merge of this process's workers' partial filters.
    local_merge: LocalMerge,
    /// The global filter, where this process's workers built one together: taken by the first
    /// of them and shared by all.
    shared_query: OnceLock<Arc<QueryFilter>>,
    /// The claims on probe splits, by which idle workers take busy ones' splits.
    probe_claims: ProbeClaims,
    cluster: ClusterConfig,
    started: Instant,
}

impl Job {
    fn run_worker(&self, worker: &mut Worker, abort: &AtomicBool, counter: &AtomicU64) -> Result<Option<SemijoinStats>> {
        let me = worker.index();
        let mut timeline = Timeline::default();
        timeline.mark("workers running", self.started);
        let mut stealing = Stealing::announce(&self.probe_claims, me, &self.dir);
        if let PlannedFilter::File { .. } = self.planned {
            // No build, whose last exchange would come after every announcement: wait for every
            // worker to have announced itself, so that none runs out of splits before another
            // can be taken from.
            all_reports(worker, ());
        }
        // 1. The global filter on every worker (and, for a broadcast exact join, the build keys),
        // or the probe keys' set and the build side's marks; 2. this worker's probe splits,
        // pruned, into its part file in _temporary/.
        let held = match self.probe_side {
            true => self.hold_probe_keys(worker, abort, counter)?,
            false => None,
        };
        if held.is_some() {
            timeline.mark("probe keys held", self.started);
        }
        if let (true, None, PlannedFilter::Build { sized, .. }) = (self.probe_side, &held, &self.planned) {
            // Past the limit after all: the filter is built in a partial per worker.
            let (bytes, workers) = (sized.spec.bits.div_ceil(8), self.cluster.workers as u64);
            crate::limits::check_allocation(bytes.saturating_mul(workers), &format!("the filter ({} bits, one partial per worker, {workers} worker(s))", sized.spec.bits))?;
        }
        let Probed { filter, strategy, build: build_reports, report, part } = match held {
            Some(set) => self.join_probe_side(worker, set, abort, counter, &mut stealing, &mut timeline)?,
            None => self.bloom_and_probe(worker, abort, counter, &mut stealing, &mut timeline)?,
        };
        timeline.mark("own probe done", self.started);

        // 3. Commit, Hadoop style: parts move out of _temporary/ only once every worker has
        // written its part, and _SUCCESS is written only once every part has moved. A process
        // that dies before then leaves nothing that looks like output.
        let reports: Vec<ProbeReport> = all_reports(worker, report).into_iter().map(|(_, r)| r).collect();
        // Every worker is done claiming. Every worker has announced itself, and worker 0 keeps
        // its announcement until the job commits: not seeing it, this worker writes its part into
        // a directory of its own host's, not beside `_SUCCESS`. (The others' announcements go
        // now, so that none is left for worker 0 to find when it clears the temporary area.)
        ProbeClaims::remove(&mut stealing.claims);
        let beside_worker_0 = me == 0 || self.probe_claims.announced(0);
        if me != 0 {
            ProbeClaims::remove(&mut stealing.announcement);
        }
        let failure = reports.iter().find_map(|r| r.error.clone());
        let failure = failure.or_else(|| {
            check_keys_found(reports.iter().map(|r| (&r.scan, r.scan.records - r.scan.malformed)), "probe").err().map(|e| e.to_string())
        });
        let committed = match (&failure, part) {
            (None, Some(part)) => self.complete(part, &stealing.lost).and_then(|part| output::commit_task(&self.dir, &part)).map_err(|e| e.to_string()),
            (_, part) => {
                if let Some(Part::Finished(part)) = part {
                    output::discard(&part);
                }
                Err(String::new())
            }
        };
        let commits: Vec<(usize, (Option<String>, bool))> = all_reports(worker, (committed.as_ref().err().cloned(), beside_worker_0));
        // Every owner is done appending: what this worker read for others goes (if its owner
        // has not removed it, as after a failure), and so does worker 0's announcement.
        ProbeClaims::remove(&mut stealing.outputs);
        ProbeClaims::remove(&mut stealing.announcement);
        let elsewhere: Vec<usize> = commits.iter().filter(|(_, (_, beside))| !beside).map(|&(w, _)| w).collect();
        let failure = failure.or_else(|| commits.into_iter().find_map(|(_, (e, _))| e));
        if let Some(failure) = failure {
            output::abort_task(&self.dir, &part_name(me, self.compression.codec));
            return Err(Error::Job(failure));
        }
        crate::cleanup::unregister(&self.dir.join(part_name(me, self.compression.codec)));
        if me != 0 {
            // Where this process's output directory is not process 0's (each host its own
            // disk), no one else removes its emptied temporary area.
            let _ = std::fs::remove_dir(self.dir.join(output::TEMPORARY));
            return Ok(None);
        }
        timeline.mark("parts committed", self.started);
        let stats = self.stats(filter.as_deref(), strategy, build_reports, reports, &elsewhere, timeline);
        let json = serde_json::to_vec_pretty(&stats).expect("statistics serialise");
        output::write_success(&self.dir, &json)?;
        Ok(Some(stats))
    }

    /// The global filter on every worker (and, for a broadcast exact join, the build keys),
    /// then this worker's probe splits, pruned by it (and by the exact join), into its part file
    /// in _temporary/.
    fn bloom_and_probe(&self, worker: &mut Worker, abort: &AtomicBool, counter: &AtomicU64, stealing: &mut Stealing, timeline: &mut Timeline) -> Result<Probed> {
        let me = worker.index();
        let limit = match self.exact_strategy {
            ExactStrategy::Auto => self.broadcast_limit,
            _ => u64::MAX,
        };
        let collecting = self.exact && self.exact_strategy != ExactStrategy::Shuffle;
        // The shuffle join, where it may be needed, is made now (every worker makes it, at the
        // same point among its dataflows), so that the build side is read once: asked for, it
        // takes the build keys as the build reads them; with `auto`, the keys the build kept
        // and any past the limit, if the limit is passed.
        // Numbers collected as bits, here or in the shuffle's shards, ask for huge pages beside a
        // large filter (see `KeyArena::holding_numbers_as_bits`).
        let huge_pages = match &self.planned {
            PlannedFilter::Build { sized, .. } => sized.spec.bits / 8 > crate::keyset::BITS_IN_HUGE_PAGES_PAST,
            PlannedFilter::File { .. } => false,
        };
        let mut shuffle = (self.exact && self.exact_strategy != ExactStrategy::Broadcast).then(|| shard_join(worker, huge_pages));
        // Room for as many key bytes as the build side has (keys are shorter than their lines),
        // up to the limit and 256 MiB: address space only, so that the arena never reallocates.
        let build_bytes = match &self.planned {
            PlannedFilter::Build { source, .. } if collecting => source.total_bytes(),
            _ => 0,
        };
        let mut keys = KeyArena::with_capacity(build_bytes.min(limit).min(256 << 20) as usize).holding_numbers_as_bits(huge_pages).holding_each_key_once();
        let keep = match shuffle.as_mut().and_then(|join| join.build.as_mut()) {
            spill if collecting => KeepKeys::UpTo(&mut keys, limit, spill),
            Some(input) => KeepKeys::Send(input),
            None => KeepKeys::No,
        };
        let (filter, build_reports) = match &self.planned {
            PlannedFilter::Build { source, sized, shared } => {
                let (filter, report) = match shared {
                    Some(shared) => {
                        let report = global_shared_filter(worker, source, shared, every_key(shared), Gather::All, abort, counter, keep, &self.local_merge);
                        // SAFETY: every worker of this process is past its last use of the shared
                        // filter's words (`global_shared_filter` returns after it, behind a
                        // barrier): the first worker here takes it, and all share it.
                        let filter = self.shared_query.get_or_init(|| match unsafe { shared.take() } {
                            Some(StoredFilter::Plain(filter)) => Arc::new(QueryFilter::One(folded(filter, sized))),
                            _ => unreachable!("a semi-join shares a plain filter, taken once"),
                        });
                        (Arc::clone(filter), report)
                    }
                    None => {
                        let empty = |tick: &mut dyn FnMut()| BloomFilter::new_partial(sized.spec, tick).sized_for(sized.expected_items, sized.target_fpp);
                        let (filter, report) = global_filter(worker, source, empty, Gather::All, abort, counter, keep, &self.local_merge);
                        (Arc::new(QueryFilter::One(folded(filter, sized))), report)
                    }
                };
                (filter, input_reports(worker, report, "build")?)
            }
            PlannedFilter::File { filter, .. } => (Arc::clone(filter), Vec::new()),
        };
        timeline.mark("filter ready", self.started);
        // Every worker sees the same reports, so every worker chooses alike (or fails alike).
        let strategy = self.exact.then(|| self.choose_strategy(&build_reports));
        if strategy != Some(ExactStrategy::Shuffle) {
            shuffle = None; // not needed: its inputs close, and the empty join ends
        }
        if let Some(join) = shuffle.as_mut() {
            let mut input = join.build.take().expect("the build input is open until the build is over");
            // The keys kept, where the limit was passed elsewhere; then the input closes.
            send_kept_keys(worker, &std::mem::take(&mut keys), &mut input);
        }

        // 2. This worker's probe splits, pruned by the filter, into its part file in _temporary/.
        let started = Instant::now();
        let mut report = ProbeReport { worker: me, ..Default::default() };
        let outcome = match strategy {
            None => self.probe_bloom(me, Some(&filter), None, abort, counter, &mut report, stealing),
            Some(ExactStrategy::Shuffle) => {
                let join = shuffle.take().expect("made before the build");
                self.probe_exact(worker, join, &filter, abort, counter, &mut report, stealing)
            }
            Some(_) => {
                let counts = build_reports.iter().map(collected_counts).fold(KeyCounts::default(), KeyCounts::merge);
                let counts = for_distinct_keys(worker, &keys, counts);
                let set = broadcast_keys(worker, std::mem::take(&mut keys), counts, &self.receivers(), &self.shared_keys, false);
                report.key_set = Some((set.len() as u64, set.table_bytes()));
                self.probe_bloom(me, Some(&filter), Some(Exact::Keys(&set)), abort, counter, &mut report, stealing)
            }
        };
        let part = probe_outcome(outcome, &mut report, started, abort);
        Ok(Probed { filter: Some(filter), strategy, build: build_reports, report, part })
    }

    /// Whether every process holds the probe side's keys (see [`probe_side`](super::probe_side)).
    /// Never where the job does not build its filter from the build side, or reads standard
    /// input on the probe side (which it would read twice); always where asked for (`run`
    /// refused standard input); with `auto`, where the build side's files are at least
    /// [`PROBE_SIDE_RATIO`] times the probe side's (and the probe keys prove to fit
    /// `--broadcast-limit`: see [`hold_probe_keys`](Self::hold_probe_keys)).
    fn plans_probe_side(exact: bool, strategy: ExactStrategy, planned: &PlannedFilter, probe: &Source) -> bool {
        let PlannedFilter::Build { source, .. } = planned else { return false };
        let reads_stdin = probe.splits.iter().any(|split| split.is_stdin());
        exact
            && !reads_stdin
            && match strategy {
                ExactStrategy::ProbeSide => true,
                ExactStrategy::Auto => source.total_bytes() >= probe.total_bytes().saturating_mul(PROBE_SIDE_RATIO),
                _ => false,
            }
    }

    /// The probe keys' set on every process (see [`probe_side`](super::probe_side)): every
    /// worker reads the probe splits it claims and keeps their keys, each once, and they are
    /// broadcast as a build side's keys are. None, with `auto`, where the keys kept pass
    /// `--broadcast-limit` on some worker: the job then joins as it would have (the probe side is
    /// read again either way).
    fn hold_probe_keys(&self, worker: &mut Worker, abort: &AtomicBool, counter: &AtomicU64) -> Result<Option<Arc<KeySet>>> {
        let limit = match self.exact_strategy {
            ExactStrategy::Auto => self.broadcast_limit,
            _ => u64::MAX,
        };
        let room = self.probe.total_bytes().min(limit).min(256 << 20) as usize;
        let mut keys = KeyArena::with_capacity(room).holding_numbers_as_bits(false).holding_each_key_once();
        let report = super::scan_keys(worker, &self.probe, |_| {}, |_| Ok(()), abort, counter, KeepKeys::UpTo(&mut keys, limit, None));
        let reports = input_reports(worker, report, "probe")?;
        if reports.iter().any(|r| r.collected_key_bytes.is_none()) {
            return Ok(None);
        }
        let counts = reports.iter().map(collected_counts).fold(KeyCounts::default(), KeyCounts::merge);
        let counts = for_distinct_keys(worker, &keys, counts);
        // Most build keys, of a side 4 times the probe's or more, are not probe keys.
        let set = broadcast_keys(worker, keys, counts, &self.receivers(), &self.shared_keys, true);
        if self.cluster.processes > 1 {
            // The marks of one process mean the same keys in another only where both sets place
            // every key alike, as sets built from the same pieces in the same order do.
            let digests = all_reports(worker, set.layout_digest());
            if digests.iter().any(|(_, digest)| *digest != digests[0].1) {
                return Err(Error::Job("the processes built their sets of probe keys differently, so their marks cannot be merged: \
                                       an internal error (rerun with --exact-strategy broadcast or shuffle)".into()));
            }
        }
        Ok(Some(set))
    }

    /// The probe-side join (see [`probe_side`](super::probe_side)), given the probe keys' set:
    /// this worker's build splits mark the probe keys they hold, the marks are merged on every
    /// worker, and its probe splits are read again into its part file, each record kept where
    /// its key is marked (or, for an anti-join, is not).
    fn join_probe_side(&self, worker: &mut Worker, set: Arc<KeySet>, abort: &AtomicBool, counter: &AtomicU64, stealing: &mut Stealing, timeline: &mut Timeline) -> Result<Probed> {
        let me = worker.index();
        let PlannedFilter::Build { source, .. } = &self.planned else { unreachable!("planned only where the job builds from the build side") };
        let empty = |tick: &mut dyn FnMut()| Marks::new(Arc::clone(&set), tick);
        let (marks, report) = global_filter(worker, source, empty, Gather::All, abort, counter, KeepKeys::No, &self.local_merge);
        let build = input_reports(worker, report, "build")?;
        timeline.mark("build side marked", self.started);
        let started = Instant::now();
        let key_set = Some((set.len() as u64, set.table_bytes()));
        let mut report = ProbeReport { worker: me, key_set, probe_keys_matched: Some(marks.marked()), ..Default::default() };
        let outcome = self.probe_bloom(me, None, Some(Exact::Marked(&marks)), abort, counter, &mut report, stealing);
        let part = probe_outcome(outcome, &mut report, started, abort);
        Ok(Probed { filter: None, strategy: Some(ExactStrategy::ProbeSide), build, report, part })
    }

    /// Opens this worker's part file with the probe header in it: the files' header, known
    /// from the plan, or else `read_header`, one read from standard input by this worker.
    fn open_part(&self, me: usize, read_header: Option<&[u8]>) -> Result<TaskFile> {
        let mut part = TaskFile::create(&self.dir, &part_name(me, self.compression.codec), self.compression)?;
        if let Some(header) = self.probe.header.as_ref().map(|h| &h.line[..]).or(read_header) {
            write_line(&mut part, header)?;
        }
        Ok(part)
    }

    /// The header of standard input in `batch`, where the part files have no header from the
    /// plan: the worker that reads standard input writes it into its part. Where they have
    /// one, standard input's must name the same columns, since its records go under it.
    fn header_read<'b>(&self, batch: &RecordBatch<'b>) -> Result<Option<&'b [u8]>> {
        match (batch.header, &self.probe.header) {
            (Some(read), None) => Ok(Some(read)),
            (Some(read), Some(planned)) if !planned.same_columns(read) => {
                Err(header_mismatch(planned, &Header { line: read.to_vec(), input: Input::Stdin.name() }))
            }
            _ => Ok(None),
        }
    }

    /// The exact strategy for this job: broadcast when every worker kept its keys and their
    /// total fits the limit (or broadcast was asked for), shuffle otherwise.
    fn choose_strategy(&self, build: &[WorkerReport]) -> ExactStrategy {
        let collected: Option<u64> = build.iter().map(|r| r.collected_key_bytes).sum();
        match (self.exact_strategy, collected) {
            (ExactStrategy::Shuffle, _) | (ExactStrategy::Auto, None) => ExactStrategy::Shuffle,
            (ExactStrategy::Auto, Some(bytes)) if bytes > self.broadcast_limit => ExactStrategy::Shuffle,
            _ => ExactStrategy::Broadcast,
        }
    }

    /// The first worker of every process: the receivers of broadcast keys.
    fn receivers(&self) -> Vec<usize> {
        (0..self.cluster.processes).map(|p| p * self.cluster.workers).collect()
    }

    /// Reads worker `me`'s probe splits into `part`, each batch through `on_batch`, and then,
    /// while other workers that share the output directory still have unclaimed splits, takes
    /// theirs (see [`steal`](super::steal)): a taken split is read into a scratch file that its
    /// owner appends to its own part, after its own splits (as soon as it is read, if a sibling
    /// took it, else once every worker is done), so each part holds what it would have held
    /// without the taking. A worker takes splits only while it has written at most a quarter of
    /// the records it read: a taken split's output is written twice (to the scratch file, then
    /// to the part), which costs more than the wait it saves when most records are kept, as in
    /// an anti-join. Returns the scan's figures and the number of splits taken; `stealing` gets
    /// the claims made, the outputs written for others and the splits of `me`'s that other
    /// processes took (whose outputs are still to be appended).
    #[allow(clippy::too_many_arguments)]
    fn probe_splits(
        &self,
        me: usize,
        abort: &AtomicBool,
        counter: &AtomicU64,
        part: &mut TaskFile,
        stealing: &mut Stealing,
        on_batch: &mut impl FnMut(&RecordBatch, &mut TaskFile) -> Result<u64>,
    ) -> Result<(ScanStats, u64)> {
        let (mut taken, mut written) = (0, 0);
        let mut stats = self.read_own_splits(me, abort, stealing, |split| {
            self.probe.scan_feed(&mut std::iter::once(split), abort, counter, |b| {
                written += on_batch(b, part)?;
                Ok(())
            })
        })?;
        while !abort.load(Ordering::Relaxed) && written * 4 <= stats.records {
            let takeable = |split: usize| !self.probe.splits[split].is_stdin();
            let Some((task, claim)) = self.probe_claims.take(me, takeable)? else { break };
            stealing.claims.push(claim);
            let read = self.read_taken(task.split, abort, counter, &mut |b, scratch| {
                written += on_batch(b, scratch)?;
                Ok(())
            });
            let output = read.as_ref().ok().and_then(|(_, output)| output.clone());
            self.probe_claims.taken_read(task.split, output.clone());
            stats.absorb(&read?.0);
            taken += output.is_some() as u64;
            stealing.outputs.extend(output);
        }
        self.append_taken_here(part, stealing, abort)?;
        Ok((stats, taken))
    }

    /// Reads worker `me`'s own probe splits with `read`, in input order, each once claimed: from
    /// the first that another worker took, the rest are `stealing.lost` (taken from the back).
    fn read_own_splits(&self, me: usize, abort: &AtomicBool, stealing: &mut Stealing, mut read: impl FnMut(usize) -> Result<ScanStats>) -> Result<ScanStats> {
        let mut stats = ScanStats::default();
        if let Some(e) = stealing.unannounced.take() {
            return Err(e);
        }
        let own = self.probe_claims.assigned(me);
        for (i, &split) in own.iter().enumerate() {
            // (Once another worker fails, the scans stop early and so does the taking.)
            if abort.load(Ordering::Relaxed) {
                break;
            }
            match self.probe_claims.claim(me, split)? {
                Some(claim) => stealing.claims.push(claim),
                None => {
                    stealing.lost = own[i..].to_vec();
                    break;
                }
            }
            stats.absorb(&read(split)?);
        }
        Ok(stats)
    }

    /// Appends to `part` the outputs of this worker's splits that its siblings took, in order,
    /// now; from the first one another process took, they wait until every worker is done
    /// ([`complete`](Self::complete)).
    fn append_taken_here(&self, part: &mut TaskFile, stealing: &mut Stealing, abort: &AtomicBool) -> Result<()> {
        let mut chunk = Vec::new();
        while let Some(output) = stealing.lost.first().and_then(|&split| self.probe_claims.read_here(split, abort)) {
            append_and_discard(part, &output, &mut chunk)?;
            stealing.lost.remove(0);
        }
        Ok(())
    }

    /// Reads taken split `split` into a scratch file: its output, or None if the job is failing
    /// (another worker aborted it mid-read; the unfinished file is removed).
    fn read_taken(
        &self,
        split: usize,
        abort: &AtomicBool,
        counter: &AtomicU64,
        on_batch: &mut impl FnMut(&RecordBatch, &mut TaskFile) -> Result<()>,
    ) -> Result<(ScanStats, Option<PathBuf>)> {
        let mut scratch = TaskFile::create_scratch(&self.dir, &ProbeClaims::taken_name(split))?;
        let scanned = self.probe.scan_feed(&mut std::iter::once(split), abort, counter, |b| on_batch(b, &mut scratch))?;
        let output = if abort.load(Ordering::Relaxed) { None } else { Some(scratch.finish()?) };
        Ok((scanned, output))
    }

    /// Appends to an open part the outputs of its splits that other processes took (`lost`, in
    /// input order), once every worker is done, and finishes it.
    fn complete(&self, part: Part, lost: &[usize]) -> Result<PathBuf> {
        let mut part = match part {
            Part::Finished(path) => return Ok(path),
            Part::Open(part) => part,
        };
        let mut chunk = Vec::new();
        for &split in lost {
            append_and_discard(&mut part, &self.probe_claims.taken_output(split), &mut chunk)?;
        }
        part.finish()
    }

    /// The Bloom step (none without a `filter`, as in the probe-side join: every key survives
    /// it), and with `exact` the check of each survivor against the broadcast build keys (or the
    /// probe keys a build key marked): survivors go straight to the part file (with `--anti`,
    /// the records the filter dropped and the survivors that did not match, in input order).
    #[allow(clippy::too_many_arguments)]
    fn probe_bloom(
        &self,
        me: usize,
        filter: Option<&QueryFilter>,
        exact: Option<Exact>,
        abort: &AtomicBool,
        counter: &AtomicU64,
        report: &mut ProbeReport,
        stealing: &mut Stealing,
    ) -> Result<Part> {
        let mut part = self.open_part(me, None)?;
        let (mut survivors, mut kept, mut pruned_bytes) = (0u64, 0u64, 0u64);
        let mut answers = Vec::with_capacity(crate::scan::BATCH_LINES);
        let (mut maybe, mut matches) = (Vec::new(), Vec::new());
        let mut spare_keys: Vec<&[u8]> = Vec::new();
        let mut on_batch = |batch: &RecordBatch, part: &mut TaskFile| -> Result<u64> {
            let before = kept;
            // Standard input's header comes before its first records, which no batch before
            // it held: the part holds no record yet.
            if let Some(header) = self.header_read(batch)? {
                write_line(part, header)?;
            }
            match filter {
                Some(filter) => filter.contains_batch(batch.keys, &mut answers),
                // No Bloom step: every key is looked up.
                None => {
                    answers.clear();
                    answers.resize(batch.keys.len(), true);
                }
            }
            batch.unmatch_nulls(&mut answers);
            maybe.clear();
            for (i, (key, &yes)) in batch.keys.iter().zip(&answers).enumerate() {
                if yes {
                    maybe.push(i);
                } else {
                    pruned_bytes += survivor_wire_bytes(key);
                }
            }
            // A NULL key would not have been exchanged either.
            pruned_bytes -= batch.nulls.len() as u64 * survivor_wire_bytes(b"");
            survivors += maybe.len() as u64;
            if let Some(exact) = exact {
                let mut keys = crate::scan::recycle(std::mem::take(&mut spare_keys));
                keys.extend(maybe.iter().map(|&i| batch.keys[i]));
                exact.contains_batch(&keys, &mut matches);
                spare_keys = crate::scan::recycle(keys);
            } else {
                matches.clear();
                matches.resize(maybe.len(), true);
            }
            if self.anti {
                // Every record but the survivors that matched, in order.
                let mut checked = maybe.iter().zip(&matches).peekable();
                for (i, record) in batch.records.iter().enumerate() {
                    let matched = match checked.peek() {
                        Some(&(&m, &matched)) if m == i => {
                            checked.next();
                            matched
                        }
                        _ => false,
                    };
                    if !matched {
                        kept += 1;
                        write_line(part, record)?;
                    }
                }
                return Ok(kept - before);
            }
            for (&i, &matched) in maybe.iter().zip(&matches) {
                if matched {
                    kept += 1;
                    write_line(part, batch.records[i])?;
                }
            }
            Ok(kept - before)
        };
        (report.scan, report.taken_splits) = self.probe_splits(me, abort, counter, &mut part, stealing, &mut on_batch)?;
        report.bloom_survivors = survivors;
        report.records_out = kept;
        report.pruned_exchange_bytes = pruned_bytes;
        part_after_probe(part, stealing)
    }

    /// The job's statistics; `elsewhere`: the workers whose parts are in another host's output
    /// directory.
    fn stats(&self, filter: Option<&QueryFilter>, strategy: Option<ExactStrategy>, build: Vec<WorkerReport>, probe: Vec<ProbeReport>, elsewhere: &[usize], timeline: Timeline) -> SemijoinStats {
        let elapsed = self.started.elapsed().as_secs_f64();
        let mut scan = ScanStats::default();
        for r in &probe {
            scan.absorb(&r.scan);
        }
        let mut build_scan = ScanStats::default();
        for r in &build {
            build_scan.absorb(&r.scan);
        }
        let built = matches!(self.planned, PlannedFilter::Build { .. });
        let survivors: u64 = probe.iter().map(|r| r.bloom_survivors).sum();
        let out: u64 = probe.iter().map(|r| r.records_out).sum();
        // A record whose key is NULL is not looked up.
        let looked_up = scan.records - scan.null_keys;
        let fraction_pruned = if looked_up > 0 { 1.0 - survivors as f64 / looked_up as f64 } else { 0.0 };
        let spec = filter.map(QueryFilter::spec);
        let estimated_fpp = filter.map(QueryFilter::estimated_fpp);
        let mut warnings = input_warnings(&self.planned, &self.probe);
        if let PlannedFilter::Build { sized, .. } = &self.planned {
            // (A folded filter fits its keys.)
            if let Some(filter) = filter.filter(|filter| filter.spec().bits == sized.spec.bits) {
                warnings.extend(sized.oversized_warning(filter.bits_set(), false).map(|w| format!("build side: {w}")));
                warnings.extend(sized.undersized_warning(filter.bits_set(), filter.estimated_fpp()).map(|w| format!("build side: {w}")));
            }
        }
        if let Some(estimated_fpp) = estimated_fpp.filter(|&fpp| fpp > 0.5) {
            warnings.push(format!(
                "the filter's estimated false-positive rate is {estimated_fpp:.3}: it is too small for its keys \
                 (give a larger --expected-items, or --bits)"
            ));
        }
        // A file that does not record how its keys were encoded (Hadoop's, Spark's) answers "no"
        // for every key encoded otherwise: say so, rather than leave an empty output unexplained.
        if !built && looked_up > 0 && survivors == 0 && filter.is_some_and(|f| f.key_form().is_none() && f.bits_set() > 0) {
            warnings.push(format!(
                "the filter answered \"no\" for every one of the {looked_up} probe keys: if its keys were encoded otherwise than \
                 --key-type {} encodes them (a Spark filter of a long column needs --key-type long, a BloomMapFile's bloom file of Text keys \
                 --key-type text), every record was dropped",
                self.probe.options.key_rules.key_type
            ));
        }
        // An anti-join keeps what the filter drops: a filter that drops little is its usual case.
        if looked_up > 0 && fraction_pruned < 0.1 && !self.anti && filter.is_some() {
            warnings.push(format!(
                "the filter dropped only {:.1}% of probe records: the join is not selective, or the filter is too small",
                fraction_pruned * 100.0
            ));
        }
        let parts_elsewhere: Vec<String> = elsewhere.iter().map(|&w| part_name(w, self.compression.codec)).collect();
        if !parts_elsewhere.is_empty() {
            warnings.push(format!(
                "the part files of process(es) {} ({}) are not in {}: those processes see it as a directory of their own host's \
                 (give an output directory on a shared file system to have every part beside _SUCCESS)",
                processes_of(elsewhere, self.cluster.workers),
                parts_elsewhere.join(", "),
                self.dir.display()
            ));
        }
        let build_bytes = if built { build_scan.bytes } else { 0 };
        SemijoinStats {
            parts_elsewhere,
            output: self.dir.display().to_string(),
            output_compression: self.compression.codec.name().into(),
            processes: self.cluster.processes,
            workers_per_process: self.cluster.workers,
            filter: match &self.planned {
                PlannedFilter::Build { .. } if filter.is_none() => "none: the probe side's keys were held, and the build side read past them".into(),
                PlannedFilter::Build { sized, shared, .. } => {
                    let copies = if shared.is_some() { "one filter per process, filled by its workers together" } else { "a partial per worker, merged" };
                    let bits = filter.map_or(sized.spec.bits, |filter| filter.spec().bits);
                    let folded = match bits == sized.spec.bits {
                        true => String::new(),
                        false => format!("; folded from {} to {bits} bits, which its fill showed its distinct keys to need", sized.spec.bits),
                    };
                    format!("built from the build side ({copies}); {}{folded}", sized.note)
                }
                PlannedFilter::File { path, filter } => read_from(path, filter),
            },
            build_records: built.then_some(build_scan.records),
            build_keys: built.then(|| build.iter().map(|r| r.keys).sum()),
            build_malformed: built.then_some(build_scan.malformed),
            build_null_keys: built.then_some(build_scan.null_keys),
            bits: spec.map(|spec| spec.bits),
            hashes: spec.map(|spec| spec.hashes),
            seed: spec.map(|spec| spec.seed),
            fill_ratio: filter.map(QueryFilter::fill_ratio),
            estimated_fpp,
            probe_records: scan.records,
            probe_bytes: scan.bytes,
            probe_malformed: scan.malformed,
            probe_null_keys: scan.null_keys,
            malformed_examples: scan.malformed_examples,
            bloom_survivors: survivors,
            records_out: out,
            fraction_pruned,
            exact: self.exact,
            anti: self.anti,
            exact_strategy: strategy,
            broadcast_key_bytes: (strategy == Some(ExactStrategy::Broadcast)).then(|| build.iter().filter_map(|r| r.collected_key_bytes).sum()),
            key_set_keys: probe.iter().filter_map(|r| r.key_set).map(|(keys, _)| keys).max(),
            key_set_table_bytes: probe.iter().filter_map(|r| r.key_set).map(|(_, bytes)| bytes).max(),
            probe_keys_matched: probe.iter().find_map(|r| r.probe_keys_matched),
            false_positives_removed: (self.exact && filter.is_some()).then(|| match self.anti {
                // Records out: those the filter dropped or that have a NULL key, and the
                // survivors with no match.
                true => out - (scan.records - scan.malformed - survivors),
                false => survivors - out,
            }),
            network_bytes_saved_by_bloom: (strategy == Some(ExactStrategy::Shuffle)).then(|| probe.iter().map(|r| r.pruned_exchange_bytes).sum()),
            elapsed_secs: elapsed,
            mb_per_sec: mb_per_sec(scan.bytes + build_bytes, elapsed),
            warnings,
            timeline,
            per_worker_build: build,
            per_worker_probe: probe,
        }
    }
}

/// The global filter, folded to the size its distinct keys need where it was sized from the
/// build side's size (see [`SizedSpec::fold`]): every worker folds its copy alike, and probes a
/// smaller filter.
fn folded(filter: BloomFilter, sized: &SizedSpec) -> BloomFilter {
    sized.fold(&filter).unwrap_or(filter)
}

/// A worker's probe, as its report and its part (None where it failed, which its report says
/// and which aborts the job's other scans).
fn probe_outcome(outcome: Result<Part>, report: &mut ProbeReport, started: Instant, abort: &AtomicBool) -> Option<Part> {
    report.elapsed_secs = started.elapsed().as_secs_f64();
    match outcome {
        Ok(part) => Some(part),
        Err(e) => {
            report.error = Some(e.to_string());
            abort.store(true, Ordering::Relaxed);
            None
        }
    }
}

/// What a worker's filter side and probe left for the commit: the global filter (none for the
/// probe-side join), the exact strategy taken, every worker's build report, and this worker's
/// probe report and part.
struct Probed {
    filter: Option<Arc<QueryFilter>>,
    strategy: Option<ExactStrategy>,
    build: Vec<WorkerReport>,
    report: ProbeReport,
    part: Option<Part>,
}

/// What the Bloom step's survivors are checked against, for an exact join: the build keys, or
/// the probe keys that a build key marked (see [`probe_side`](super::probe_side)).
#[derive(Clone, Copy)]
enum Exact<'a> {
    Keys(&'a KeySet),
    Marked(&'a Marks),
}

impl Exact<'_> {
    /// Whether each key has a match on the build side.
    fn contains_batch(self, keys: &[&[u8]], answers: &mut Vec<bool>) {
        match self {
            Exact::Keys(set) => set.contains_batch(keys, answers),
            Exact::Marked(marks) => marks.contains_batch(keys, answers),
        }
    }
}

/// The auto strategy holds the probe side's keys where the build side's files are at least this
/// many times the probe side's. The 20M-row probe's first 2M rows against its first 2M·r rows,
/// `-w 2`, the probe-side join against the broadcast join (2–3 runs each): at r = 4, the
/// payloads 0.53–0.57 s and 98 MiB against 0.72–0.73 s and 364 MiB, the amounts 0.36–0.42
/// against 0.44 s, the ids 0.30 s both (18 against 46 MiB); at r = 3, the ids 0.28–0.33 against
/// 0.25–0.28 s; at r = 1, the broadcast was faster on all three (0.20 against 0.29 s on the
/// payloads). (It was 8 until the probe-side join's sketches.) The probe side is read twice,
/// so a job held up by its storage rather than its CPUs reads a fifth more at r = 4.
pub const PROBE_SIDE_RATIO: u64 = 4;

/// A worker's part file after its probe: finished now where nothing is to be appended, so that
/// its sync overlaps others' work; else left open for the outputs of the splits other processes
/// took from it, its own records synced meanwhile. (The sync at its finish took 1–4.3 ms on the
/// 2 × 1 benchmark, mostly for up to 8 MB of its own records written since the last background
/// sync, whatever the appended outputs' size.)
fn part_after_probe(mut part: TaskFile, stealing: &Stealing) -> Result<Part> {
    Ok(match stealing.lost.is_empty() {
        true => Part::Finished(part.finish()?),
        false => {
            part.sync_so_far()?;
            Part::Open(Box::new(part))
        }
    })
}

/// The bytes one survivor takes on the wire in the exact shuffle join ([`Survivor`](super::shard_join::Survivor), bincode:
/// the key's length and bytes, the worker, the number): what the Bloom step saves the network
/// for each record it drops.
fn survivor_wire_bytes(key: &[u8]) -> u64 {
    8 + key.len() as u64 + 4 + 8
}

/// Refuses probe inputs whose headers differ: each part file starts with one header, which the
/// other input's records would sit under with their columns misnamed.
fn header_mismatch(first: &Header, other: &Header) -> Error {
    Error::invalid(
        "probe input",
        format!("{}: the part files carry one header, so every probe input must have the same columns in the same order", first.differs_from(other)),
    )
}

/// Appends the bytes of the scratch file at `path` to `part`, through `chunk` (grown to 1 MiB),
/// and removes the file, appended or not.
fn append_and_discard(part: &mut TaskFile, path: &Path, chunk: &mut Vec<u8>) -> Result<()> {
    chunk.resize(1 << 20, 0);
    let mut append = || -> Result<()> {
        let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        loop {
            let n = std::io::Read::read(&mut file, chunk).map_err(|e| Error::io(path, e))?;
            if n == 0 {
                return Ok(());
            }
            part.write(&chunk[..n])?;
        }
    };
    let appended = append();
    output::discard(path);
    appended
}

/// `counts`, every worker's keys kept, scaled to the distinct keys of them all (see
/// [`KeyCounts::for_distinct`]), as their merged sketches estimate them, where every worker
/// estimated its own (see [`KeyArena::distinct_sketch`]): a key kept by several workers, or
/// repeated too seldom for a worker to hold it once, is counted once. The 2M-row probe's amounts
/// (864,795 distinct) had a set sized for 2M keys, 24 MB of tables. Every worker computes the
/// same counts, so every process builds the same set.
fn for_distinct_keys(worker: &mut Worker, keys: &KeyArena, counts: KeyCounts) -> KeyCounts {
    let sketches = all_reports(worker, keys.distinct_sketch().map(DistinctKeys::registers));
    let mut union = DistinctKeys::default();
    for (_, registers) in &sketches {
        match registers.as_deref().and_then(DistinctKeys::from_registers) {
            Some(sketch) => union.merge(&sketch),
            None => return counts,
        }
    }
    counts.for_distinct(union.estimate())
}

/// The counts of the keys a worker kept, from its report.
fn collected_counts(report: &WorkerReport) -> KeyCounts {
    KeyCounts {
        keys: report.collected_keys,
        numbers: report.collected_number_keys,
        short: report.collected_short_keys,
        big: report.collected_big_number_keys,
        numbers_range: report.collected_numbers_range,
    }
}

/// Writes a record as it was, adding a newline to a last line that lacked one (so that records
/// from several inputs never run together).
#[inline]
fn write_line(part: &mut TaskFile, record: &[u8]) -> Result<()> {
    part.write(record)?;
    if !record.ends_with(b"\n") {
        part.write(b"\n")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::join_key::JoinKey;

    /// The summary names a strategy as `_SUCCESS` does.
    #[test]
    fn a_strategy_prints_as_the_statistics_name_it() {
        for strategy in [ExactStrategy::Auto, ExactStrategy::Broadcast, ExactStrategy::Shuffle, ExactStrategy::ProbeSide] {
            assert_eq!(serde_json::to_value(strategy).unwrap(), strategy.to_string());
        }
    }

    /// A taken split's output is appended to the part whole (past the 1 MiB chunk), as it is
    /// to a plain part and through the compressor to a gzip one, and then removed. One
    /// that cannot be opened or read is an error naming it, which fails the job rather than
    /// commit a part without it; the part keeps only what was appended.
    #[test]
    fn a_taken_output_is_appended_and_removed_or_its_failure_named() {
        use crate::compressed::Compression;
        for codec in [Compression::None, Compression::Gzip] {
            let dir = tempfile::tempdir().unwrap();
            let mut part = TaskFile::create(dir.path(), "part-00000", OutputCompression { codec, level: None }).unwrap();
            part.write(b"own\n").unwrap();
            let taken = dir.path().join("taken-00003");
            let body: Vec<u8> = (0..3_000_000usize).map(|i| b"0123456789\n"[i % 11]).collect();
            std::fs::write(&taken, &body).unwrap();
            let mut chunk = Vec::new();
            append_and_discard(&mut part, &taken, &mut chunk).unwrap();
            assert!(!taken.exists(), "an appended output is removed");
            part.write(b"more\n").unwrap();
            let missing = dir.path().join("taken-00004");
            let unreadable = dir.path().join("taken-00005");
            std::fs::create_dir(&unreadable).unwrap(); // opens, but a read of it fails
            for path in [&missing, &unreadable] {
                let err = append_and_discard(&mut part, path, &mut chunk).expect_err("nothing to append").to_string();
                assert!(err.contains(&path.display().to_string()), "{codec:?}: {err}");
            }
            let path = part.finish().unwrap();
            let mut text = Vec::new();
            let file = std::fs::File::open(&path).unwrap();
            match codec {
                Compression::Gzip => std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(file), &mut text),
                _ => std::io::Read::read_to_end(&mut { file }, &mut text),
            }
            .unwrap();
            assert!(text == [&b"own\n"[..], &body, b"more\n"].concat(), "{codec:?}: the part holds its own records, then the taken output's, in order");
        }
    }

    /// The statistic of exchange bytes saved counts what a survivor's update takes on the wire.
    #[test]
    fn survivor_wire_bytes_is_the_serialized_size_of_an_update() {
        for key in [&b""[..], b"1234567", &[9; 24], &[9; 100]] {
            let survivor: super::super::shard_join::Survivor = (JoinKey::new(key), 3, 1 << 40);
            assert_eq!(survivor_wire_bytes(key), bincode::serialized_size(&survivor).unwrap(), "{} bytes", key.len());
        }
    }
}
