//! `semijoin --plan`: what a semi-join would do, worked out before its workers start, from the
//! same preparation as the job's ([`prepare`](super::prepare)).

use super::{input_warnings, prepare, read_from, ExactStrategy, FilterSource, PlannedFilter, Prepared, SemijoinConfig, PROBE_SIDE_RATIO};
use crate::error::Result;
use crate::jobs::build::{FilterCopies, InputPlan};
use crate::limits::human_bytes;
use crate::output;
use serde::Serialize;

/// What a semi-join would do, worked out without reading its records (but the build side's
/// size estimate's sample): `semijoin --plan`, for a join over terabytes whose filter, memory
/// and strategy its user wants to know before starting it.
#[derive(Clone, Debug, Serialize)]
pub struct SemijoinPlan {
    pub processes: usize,
    pub workers_per_process: usize,
    /// The build side's inputs, where the filter is built from them.
    pub build: Option<InputPlan>,
    pub probe: InputPlan,
    /// Where the filter comes from, in words.
    pub filter: String,
    /// The filter's size and shape: where the job holds the probe keys, that of the filter it
    /// builds should they pass `--broadcast-limit`.
    pub bits: u64,
    pub hashes: u32,
    pub seed: u32,
    #[serde(flatten)]
    pub copies: FilterCopies,
    pub exact: bool,
    pub anti: bool,
    /// The exact join's strategy, where it is known before the job runs (asked for, or
    /// probe-side as `auto` plans it); `auto` where it is chosen as the build side is read.
    pub exact_strategy: Option<ExactStrategy>,
    /// How the join goes, in words.
    pub join: String,
    /// The bytes the workers read: the build side's, and the probe side's once (twice where the
    /// job holds the probe keys).
    pub bytes_to_read: u64,
    pub output: String,
    pub part_files: usize,
    pub output_compression: String,
    pub warnings: Vec<String>,
}

/// The plan of the semi-join `config` asks for ([`SemijoinPlan`]): what [`run`](super::run)
/// decides before its workers start, with the same checks and errors, and nothing built, read
/// past the size estimate's sample, or written.
pub fn plan(config: &SemijoinConfig) -> Result<SemijoinPlan> {
    let Prepared { planned, probe, probe_side } = prepare(config)?;
    let workers = config.cluster.workers;
    let (build, filter, spec, copies) = match (&planned, &config.filter) {
        (PlannedFilter::Build { source, sized, .. }, FilterSource::Build { filter_per, .. }) => {
            let filter = match probe_side {
                true => format!(
                    "none while the probe side's keys are held; should they pass --broadcast-limit ({}) on a worker, built from the build side \
                     in a partial per worker as below; {}",
                    human_bytes(config.broadcast_limit),
                    sized.note
                ),
                false => format!("built from the build side; {}", sized.note),
            };
            // As `run` makes them: none checked where the probe keys are held.
            let copies = match probe_side {
                true => FilterCopies::per_worker(false, sized, workers),
                false => FilterCopies::planned(*filter_per, false, sized, workers)?,
            };
            (Some(InputPlan::of(source)), filter, sized.spec, copies)
        }
        (PlannedFilter::File { path, filter }, _) => {
            let bytes = filter.bytes();
            let copies = FilterCopies { filter_per: "process", filter_bytes: bytes, process_filter_bytes: bytes };
            (None, read_from(path, filter), *filter.spec(), copies)
        }
        (PlannedFilter::Build { .. }, FilterSource::File(_)) => unreachable!("a build side is planned from --build"),
    };
    output::check(&config.output, config.overwrite, config.cluster.process)?;
    let warnings = input_warnings(&planned, &probe);
    let build_bytes = build.as_ref().map_or(0, |b| b.bytes);
    Ok(SemijoinPlan {
        processes: config.cluster.processes,
        workers_per_process: workers,
        build,
        probe: InputPlan::of(&probe),
        filter,
        bits: spec.bits,
        hashes: spec.hashes,
        seed: spec.seed,
        copies,
        exact: config.exact,
        anti: config.anti,
        exact_strategy: config.exact.then_some(if probe_side { ExactStrategy::ProbeSide } else { config.exact_strategy }),
        join: describe_join(config, probe_side),
        bytes_to_read: build_bytes.saturating_add(probe.total_bytes().saturating_mul(1 + probe_side as u64)),
        output: config.output.display().to_string(),
        part_files: config.cluster.peers(),
        output_compression: config.compression.codec.name().into(),
        warnings,
    })
}

/// How the job `config` asks for joins, as planned: in words, for [`SemijoinPlan::join`].
fn describe_join(config: &SemijoinConfig, probe_side: bool) -> String {
    let limit = human_bytes(config.broadcast_limit);
    let auto = format!(
        "broadcast if the build keys the workers keep come to --broadcast-limit ({limit}) or less in all, \
         else shuffle: chosen as the build side is read"
    );
    let kept = if config.anti { "the probe records whose key is not on the build side" } else { "the probe records whose key is on the build side" };
    let how = match (config.exact, probe_side, config.exact_strategy) {
        (false, ..) => return "the Bloom step alone: the probe records whose key the filter may hold (its false positives kept)".into(),
        (true, true, ExactStrategy::Auto) => format!(
            "probe-side, as auto plans it for a build side of {PROBE_SIDE_RATIO} times the probe side's bytes or more: the probe keys \
             held in every process, marked by the build side, and the probe side read again; should the probe keys pass \
             --broadcast-limit ({limit}) on a worker, {auto}"
        ),
        (true, _, ExactStrategy::ProbeSide) | (true, true, _) => {
            "probe-side: the probe keys held in every process, marked by the build side, and the probe side read again".into()
        }
        (true, false, ExactStrategy::Auto) => auto,
        (true, false, ExactStrategy::Broadcast) => "broadcast: every process holds all the build keys".into(),
        (true, false, ExactStrategy::Shuffle) => "shuffle: the Bloom step's survivors and the build keys exchanged by key, each worker joining a shard".into(),
    };
    format!("exact: {kept}; {how}")
}
