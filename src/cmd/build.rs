//! `bloomflow build INPUT... --key FIELD -o FILE`: the distributed filter build.

use super::args::{ClusterArgs, InputArgs, SizingArgs, FAST_FILTER};
use bloomflow::jobs::build::{self, BuildConfig, BuildPlan, BuildStats, FilterCopies, InputPlan};
use bloomflow::limits::human_bytes;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Input files, directories (the files beneath them, in sorted order), globs (quoted, as
    /// Hadoop takes them: `'logs/2026-11-*/part-*'`, `{a,b}`, `[0-9]`) or `-` for standard input. Files
    /// named `.gz`, `.zst`, `.deflate`, `.bz2`, `.snappy` or `.lz4` (Hadoop's framing) are
    /// decompressed; each is one split, read whole, but for `.bz2`, which is split at its blocks
    /// as Hadoop splits it.
    #[arg(required = true, value_name = "INPUT")]
    inputs: Vec<PathBuf>,
    /// The key field: a column name from the header, or a 1-based index. Several, comma-separated
    /// or repeated (`-k a,b`), make one composite key.
    #[arg(short, long, value_name = "FIELD", required = true, value_delimiter = ',')]
    key: Vec<String>,
    /// Where to write the filter (.bloom); written by process 0 only.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Also write the statistics as JSON to this file.
    #[arg(long, value_name = "FILE")]
    stats_json: Option<PathBuf>,
    /// Build a counting filter: a 4-bit counter per position instead of a bit (4 times the
    /// memory and file size), so that keys can later be removed with `bloomflow remove` or
    /// `subtract`. Native or Hadoop format (Hadoop's `CountingBloomFilter`; Spark has none);
    /// `query`, `info`, `merge` and `semijoin --filter` read it as a plain filter.
    #[arg(long)]
    counting: bool,
    /// Print the job's plan and stop, building and writing nothing: its inputs and splits, the
    /// filter's size (estimated from a sample of the inputs, unless given) and the memory its
    /// copies take in a process, with the checks a build makes before it starts. Peers are not
    /// contacted. With `--stats-json`, the plan is written as JSON.
    #[arg(long)]
    plan: bool,
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    sizing: SizingArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let (scheme, layout) = args.sizing.shape(FAST_FILTER)?;
    let scan = args.input.scan(&args.key, "--key", args.sizing.key_rules(scheme))?;
    args.input.check_stdin_used(&args.inputs)?;
    let config = BuildConfig {
        inputs: args.inputs,
        scan,
        sizing: args.sizing.sizing()?,
        scheme,
        layout,
        seed: args.sizing.seed()?,
        counting: args.counting,
        output: Some(args.output),
        filter_per: args.sizing.filter_per.into(),
        cluster: args.cluster.config()?,
        progress: !args.cluster.no_progress,
    };
    if args.plan {
        let plan = build::plan(&config)?;
        print_plan(&plan);
        return super::args::write_stats_json(args.stats_json.as_deref(), &plan);
    }
    let Some(stats) = build::run(config)? else { return Ok(()) };
    print_summary(&stats);
    super::args::write_stats_json(args.stats_json.as_deref(), &stats)
}

/// The summary's lines of a job that reads one input: its workers, what it read, what it
/// skipped.
pub(super) fn print_input_lines((processes, workers): (usize, usize), (records, bytes): (u64, u64), (malformed, examples): (u64, &[String]), null_keys: u64) {
    println!("  workers            {processes} process(es) x {workers} worker(s)");
    println!("  records            {records}");
    println!("  bytes              {bytes} ({})", human_bytes(bytes));
    println!("  malformed records  {malformed}{}", if malformed > 0 { " (skipped)" } else { "" });
    for e in examples {
        println!("    {e}");
    }
    if null_keys > 0 {
        println!("  NULL keys          {null_keys} (skipped)");
    }
}

pub fn print_summary(s: &BuildStats) {
    println!("bloomflow build: wrote {}", s.output.as_deref().unwrap_or("(nothing)"));
    print_input_lines((s.processes, s.workers_per_process), (s.records, s.bytes), (s.malformed, &s.malformed_examples), s.null_keys);
    println!("  keys inserted      {}", s.keys_inserted);
    println!("  elapsed            {:.3} s", s.elapsed_secs);
    println!("  timeline           {} (worker 0, since the start)", s.timeline.describe());
    println!("  throughput         {:.1} MB/s", s.mb_per_sec);
    if s.counting {
        println!("  counters (m)       {} of 4 bits ({})", s.bits, human_bytes(s.bits.div_ceil(2)));
    } else {
        println!("  bits (m)           {} ({})", s.bits, human_bytes(s.bits.div_ceil(8)));
    }
    println!("  hashes (k)         {}", s.hashes);
    println!("  filter copies      one per {}", s.filter_per);
    println!("  fill ratio         {:.6}{}", s.fill_ratio, if s.counting { " (counters above zero)" } else { "" });
    println!("  estimated fpp      {:.6}", s.estimated_fpp);
    println!("  sizing             {}", s.sizing);
    print_warnings(s.malformed, &s.warnings);
}

/// The lines of `build --plan`, laid out as the summary's.
pub fn print_plan(p: &BuildPlan) {
    println!("bloomflow build: plan only (nothing built or written)");
    println!("  workers            {} process(es) x {} worker(s)", p.processes, p.workers_per_process);
    let (inputs, splits) = describe_inputs(&p.input);
    println!("  inputs             {inputs}");
    println!("  splits             {splits}");
    match p.counting {
        true => println!("  counters (m)       {} of 4 bits ({})", p.bits, human_bytes(p.copies.filter_bytes)),
        false => println!("  bits (m)           {} ({})", p.bits, human_bytes(p.copies.filter_bytes)),
    }
    println!("  hashes (k)         {}", p.hashes);
    println!("  filter copies      {}", describe_copies(&p.copies, p.workers_per_process));
    println!("  sizing             {}", p.sizing);
    print_warnings(0, &p.warnings);
}

/// A plan's inputs and splits, each in a line's words.
pub(super) fn describe_inputs(p: &InputPlan) -> (String, String) {
    let compressed = match p.compressed_inputs {
        0 => String::new(),
        n => format!(", {n} of them compressed (bytes as stored)"),
    };
    let stdin = if p.standard_input { ", and standard input (of unknown size)" } else { "" };
    (
        format!("{} file(s), {} bytes ({}){compressed}{stdin}", p.inputs, p.bytes, human_bytes(p.bytes)),
        format!("{}, the largest {} bytes ({}), claimed by the workers as they go", p.splits, p.largest_split, human_bytes(p.largest_split)),
    )
}

/// A plan's filter copies in a process, and their memory, in a line's words.
pub(super) fn describe_copies(c: &FilterCopies, workers_per_process: usize) -> String {
    let copies = match c.filter_per {
        "process" => "one per process, shared by its workers".to_string(),
        _ => format!("one per worker, {workers_per_process} in a process"),
    };
    format!("{copies}: {} ({} bytes) a process", human_bytes(c.process_filter_bytes), c.process_filter_bytes)
}

/// A job's warnings, on standard error: its malformed records skipped, and the others.
pub(super) fn print_warnings(malformed: u64, warnings: &[String]) {
    if malformed > 0 {
        eprintln!("bloomflow: warning: {malformed} malformed record(s) skipped (use --strict to fail instead)");
    }
    for w in warnings {
        eprintln!("bloomflow: warning: {w}");
    }
}
