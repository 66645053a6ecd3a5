//! `bloomflow subtract FILTER INPUT... --key FIELD`: the distributed removal of a dataset's keys
//! from a counting filter (see [`bloomflow::jobs::subtract`]).

use super::args::{ClusterArgs, FilterPerArg, InputArgs, KeyTypeArg};
use super::build::{describe_copies, describe_inputs, print_warnings};
use bloomflow::jobs::subtract::{self, SubtractConfig, SubtractPlan, SubtractStats};
use bloomflow::limits::human_bytes;
use bloomflow::records::{KeyRules, KeyType};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
#[command(after_help = "Subtract only keys that were inserted (once per insert): a key never inserted that the \
filter answers `maybe` for (a false positive) takes counts that other keys' answers rest on. A key the filter \
answers `no` for fails the job, and so does a counter that holds fewer than the keys count there; either way \
nothing is written.")]
pub struct Args {
    /// The counting filter file (`build --counting`).
    filter: PathBuf,
    /// Input files, directories, quoted globs or `-` for standard input, read as `build` reads them: each key
    /// of the key field is removed once per record.
    #[arg(required = true, value_name = "INPUT")]
    inputs: Vec<PathBuf>,
    /// The key field, as `build` takes it: a column name or a 1-based index; several make one
    /// composite key.
    #[arg(short, long, value_name = "FIELD", required = true, value_delimiter = ',')]
    key: Vec<String>,
    /// Where to write the filter after the removals. Default: the filter file itself, replaced
    /// atomically (process 0 writes it).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Skip (and count) keys the filter answers `no` for, instead of failing on the first.
    #[arg(long)]
    skip_absent: bool,
    /// How keys are hashed: `long` parses each as a signed 64-bit decimal (Spark's putLong);
    /// `text`, `long-writable`, `int-writable`, `bytes-writable` as Hadoop's Writables serialize
    /// them. Default: the type the filter file records, else `bytes`.
    #[arg(long, value_enum)]
    key_type: Option<KeyTypeArg>,
    /// Also write the statistics as JSON to this file.
    #[arg(long, value_name = "FILE")]
    stats_json: Option<PathBuf>,
    /// Where the counts of the keys to remove are kept, as `build --counting` keeps its
    /// counters: a partial per worker, merged, or one per process that its workers count into
    /// together; auto: per process for counts of 1 GiB or more, or where a partial per worker
    /// would not fit in memory.
    #[arg(long, value_enum, default_value_t = FilterPerArg::Auto)]
    filter_per: FilterPerArg,
    /// Print the job's plan and stop, reading no record and writing nothing: its inputs and
    /// splits, the filter's size, and the memory its counts of the keys to remove take in a
    /// process, with the checks the job makes before it starts. Peers are not contacted. With
    /// `--stats-json`, the plan is written as JSON.
    #[arg(long)]
    plan: bool,
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let key_type = args.key_type.map(KeyType::from);
    // The job sets the rules by the filter it loads; these only let the flags be checked.
    let rules = KeyRules { key_type: key_type.unwrap_or(KeyType::Bytes), reject_empty: false };
    let scan = args.input.scan(&args.key, "--key", rules)?;
    args.input.check_stdin_used(&args.inputs)?;
    let config = SubtractConfig {
        output: args.output.unwrap_or_else(|| args.filter.clone()),
        filter: args.filter,
        inputs: args.inputs,
        scan,
        key_type,
        skip_absent: args.skip_absent,
        filter_per: args.filter_per.into(),
        cluster: args.cluster.config()?,
        progress: !args.cluster.no_progress,
    };
    if args.plan {
        let plan = subtract::plan(config)?;
        print_plan(&plan);
        return super::args::write_stats_json(args.stats_json.as_deref(), &plan);
    }
    let Some(stats) = subtract::run(config)? else { return Ok(()) };
    print_summary(&stats);
    super::args::write_stats_json(args.stats_json.as_deref(), &stats)
}

/// The lines of `subtract --plan`, laid out as the summary's.
fn print_plan(p: &SubtractPlan) {
    println!("bloomflow subtract: plan only (nothing read or written)");
    println!("  workers            {} process(es) x {} worker(s)", p.processes, p.workers_per_process);
    let (inputs, splits) = describe_inputs(&p.input);
    println!("  inputs             {inputs}");
    println!("  splits             {splits}");
    println!("  filter             {}: {} counters of 4 bits, k = {}, {} keys recorded", p.filter, p.bits, p.hashes, p.items_inserted);
    println!("  loaded             {} a process (its counters, and its bits to check each key)", human_bytes(p.loaded_filter_bytes));
    println!("  counts copies      {}", describe_copies(&p.copies, p.workers_per_process));
    println!("  output             {}", p.output);
    print_warnings(0, &p.warnings);
}

fn print_summary(s: &SubtractStats) {
    println!("bloomflow subtract: removed {} key(s) from {}; wrote {}", s.keys_removed, s.filter, s.output);
    super::build::print_input_lines((s.processes, s.workers_per_process), (s.records, s.bytes), (s.malformed, &s.malformed_examples), s.null_keys);
    if s.absent_keys_skipped > 0 {
        println!("  absent keys        {} (skipped: the filter answers `no` for them)", s.absent_keys_skipped);
    }
    match (s.items_before, s.items_after) {
        (Some(before), Some(after)) => println!("  keys in filter     {before} -> {after}"),
        _ => println!("  keys in filter     (not recorded: the file's format has no count)"),
    }
    println!("  counters set       {}", s.counters_set);
    println!("  saturated counters {} (at 15, never decremented)", s.saturated_counters);
    println!("  counts kept        one per {}", s.filter_per);
    println!("  elapsed            {:.3} s", s.elapsed_secs);
    println!("  timeline           {} (worker 0, since the start)", s.timeline.describe());
    println!("  throughput         {:.1} MB/s", s.mb_per_sec);
    super::build::print_warnings(s.malformed, &s.warnings);
}
