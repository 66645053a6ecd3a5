//! `bloomflow semijoin`: keep the probe records whose key may be on the build side (or, with
//! `--anti --exact`, those whose key is not).

use super::args::{parse_delimiter, ClusterArgs, InputArgs, SizingArgs, FAST_FILTER};
use bloomflow::hashing::Scheme;
use bloomflow::records::KeyRules;
use bloomflow::Layout;
use bloomflow::scan::ScanOptions;
use super::build::{describe_copies, describe_inputs, print_warnings};
use bloomflow::jobs::semijoin::{self, ExactStrategy, FilterSource, SemijoinConfig, SemijoinPlan, SemijoinStats};
use bloomflow::compressed::{Compression, OutputCompression};
use bloomflow::limits::human_bytes;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
#[command(group = clap::ArgGroup::new("side").required(true).args(["build", "filter"]))]
pub struct Args {
    /// Build-side inputs (files, directories, quoted globs or `-`; `.gz`, `.zst`, `.deflate`,
    /// `.bz2`, `.snappy` and `.lz4` files are decompressed): the keys to keep.
    #[arg(long, num_args = 1.., value_name = "INPUT", requires = "build_key")]
    build: Vec<PathBuf>,
    /// The build side's key field (name or 1-based index); several, comma-separated or repeated,
    /// make a composite key.
    #[arg(long, value_name = "FIELD", value_delimiter = ',')]
    build_key: Vec<String>,
    /// A prebuilt filter to prune with, instead of building one (a filter file, or a
    /// BloomMapFile directory).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["build", "build_key", "build_delimiter", "build_no_header", "build_multiline", "build_null_key"])]
    filter: Option<PathBuf>,
    /// Probe-side inputs (files, directories, quoted globs or `-`): the records to prune.
    #[arg(long, required = true, num_args = 1.., value_name = "INPUT")]
    probe: Vec<PathBuf>,
    /// The probe side's key field (name or 1-based index); a composite key names as many fields
    /// as the build side's, in the same order.
    #[arg(long, value_name = "FIELD", required = true, value_delimiter = ',')]
    probe_key: Vec<String>,
    /// Output directory: part-WWWWW per worker, then _SUCCESS.
    #[arg(short, long, value_name = "DIR")]
    output: PathBuf,
    /// Remove the Bloom step's false positives with an exact join (needs --build).
    #[arg(long)]
    exact: bool,
    /// How --exact joins: broadcast the build keys to every process (when they fit
    /// --broadcast-limit, with auto), or shuffle the keys, each worker joining a shard of them;
    /// or, for a build side much larger than the probe side (with auto: 4 times its files'
    /// bytes, where the probe keys fit --broadcast-limit), hold the probe keys in every process,
    /// mark those the build side holds, and read the probe side again (probe-side).
    #[arg(long, value_enum, default_value_t = StrategyArg::Auto, requires = "exact")]
    exact_strategy: StrategyArg,
    /// Keep the probe records whose key is NOT on the build side instead (a left anti-join, as
    /// Spark's left_anti). Needs --exact: a false positive of the filter must not drop a record.
    #[arg(long)]
    anti: bool,
    /// Most build-key bytes the auto strategy broadcasts to every process (with a suffix as
    /// --split-size takes it: `64m`).
    #[arg(long, default_value_t = 64 << 20, value_name = "BYTES", value_parser = bloomflow::params::parse_bytes)]
    broadcast_limit: u64,
    /// Replace an existing output directory.
    #[arg(long)]
    overwrite: bool,
    /// Compress the part files: gzip (part-NNNNN.gz, at gzip's usual level), zstd
    /// (part-NNNNN.zst, at zstd's), deflate (part-NNNNN.deflate, zlib streams as Hadoop's
    /// DefaultCodec writes), bzip2 (part-NNNNN.bz2, slow but splittable), snappy or lz4
    /// (part-NNNNN.snappy, part-NNNNN.lz4: raw blocks in Hadoop's framing, as its SnappyCodec
    /// and Lz4Codec write them), named as Hadoop names compressed parts; bloomflow reads them all.
    #[arg(long, value_name = "CODEC", default_value = "none", value_parser = super::args::codec_parser())]
    compress: Compression,
    /// The codec's level, instead of its usual one: 0–9 for gzip and deflate (6 by default; 1 is
    /// fastest), 1–22 for zstd (3 by default), 1–9 for bzip2 (9 by default); snappy and lz4 have none.
    #[arg(long, value_name = "N", requires = "compress")]
    compress_level: Option<i32>,
    /// Also write the statistics (which _SUCCESS holds too) as JSON to this file.
    #[arg(long, value_name = "FILE")]
    stats_json: Option<PathBuf>,
    /// Print the job's plan and stop, reading no record (but the build side's size estimate's
    /// sample) and writing nothing: both sides' inputs and splits, the filter's size and the
    /// memory its copies take in a process, and how the join goes, with the checks the job
    /// makes before it starts. Peers are not contacted. With `--stats-json`, the plan is
    /// written as JSON.
    #[arg(long)]
    plan: bool,
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    sides: SideFormatArgs,
    #[command(flatten)]
    sizing: SizingArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// One side's own input format, where the two sides differ (a dimension table exported with a
/// header, a fact table as Hive writes it: no header, Ctrl-A between fields): each flag replaces
/// `-d` or `--no-header` for its side.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Input")]
struct SideFormatArgs {
    /// The build side's field delimiter, instead of -d's.
    #[arg(long, value_name = "C", requires = "build")]
    build_delimiter: Option<String>,
    /// The build side has no header line (its key fields are then 1-based indexes).
    #[arg(long, requires = "build")]
    build_no_header: bool,
    /// The build side's quoted fields may hold line breaks (as --multiline, for this side only).
    #[arg(long, requires = "build")]
    build_multiline: bool,
    /// The text of NULL in the build side's key fields, instead of --null-key's.
    #[arg(long, value_name = "TEXT", requires = "build")]
    build_null_key: Option<String>,
    /// The probe side's field delimiter, instead of -d's.
    #[arg(long, value_name = "C")]
    probe_delimiter: Option<String>,
    /// The probe side has no header line (its key fields are then 1-based indexes).
    #[arg(long)]
    probe_no_header: bool,
    /// The probe side's quoted fields may hold line breaks (as --multiline, for this side only).
    #[arg(long)]
    probe_multiline: bool,
    /// The text of NULL in the probe side's key fields, instead of --null-key's.
    #[arg(long, value_name = "TEXT")]
    probe_null_key: Option<String>,
}

/// One side's own format flags (`--{side}-delimiter`, `--{side}-no-header`,
/// `--{side}-multiline`, `--{side}-null-key`).
struct OwnFormat<'a> {
    delimiter: Option<&'a str>,
    no_header: bool,
    multiline: bool,
    null_key: Option<&'a str>,
}

impl SideFormatArgs {
    fn build(&self) -> OwnFormat<'_> {
        OwnFormat { delimiter: self.build_delimiter.as_deref(), no_header: self.build_no_header, multiline: self.build_multiline, null_key: self.build_null_key.as_deref() }
    }

    fn probe(&self) -> OwnFormat<'_> {
        OwnFormat { delimiter: self.probe_delimiter.as_deref(), no_header: self.probe_no_header, multiline: self.probe_multiline, null_key: self.probe_null_key.as_deref() }
    }
}

/// The scan settings of one side, keyed on `keys` (given with `--{side}-key`): `-d`,
/// `--no-header`, `--multiline` and `--null-key`, unless the side's own flags replace them.
/// Keys are hashed by `rules`.
fn side_scan(args: &Args, side: &str, keys: &[String], own: OwnFormat, rules: KeyRules) -> anyhow::Result<ScanOptions> {
    let mut format = args.input.format()?;
    if let Some(text) = own.delimiter {
        format.delimiter = parse_delimiter(&format!("--{side}-delimiter"), text)?;
    }
    format.has_header &= !own.no_header;
    format.multiline |= own.multiline;
    let own_null = format!("--{side}-null-key");
    let null_key = own.null_key.map(|text| (own_null.as_str(), text)).or(args.input.null_key());
    args.input.scan_as(format, keys, &format!("--{side}-key"), rules, null_key)
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum StrategyArg {
    Auto,
    Broadcast,
    Shuffle,
    ProbeSide,
}

/// The build side of a job that builds its filter, of `scheme` and `layout`.
fn build_side(args: &Args, scheme: Scheme, layout: Layout) -> anyhow::Result<FilterSource> {
    if args.build_key.is_empty() {
        anyhow::bail!("--build needs --build-key");
    }
    if args.build_key.len() != args.probe_key.len() {
        anyhow::bail!(
            "--build-key names {} field(s) and --probe-key {}: a composite key needs as many on both sides, in the same order",
            args.build_key.len(),
            args.probe_key.len()
        );
    }
    let sides = &args.sides;
    let scan = side_scan(args, "build", &args.build_key, sides.build(), args.sizing.key_rules(scheme))?;
    let (sizing, seed, filter_per) = (args.sizing.sizing()?, args.sizing.seed()?, args.sizing.filter_per.into());
    Ok(FilterSource::Build { inputs: args.build.clone(), scan, sizing, scheme, layout, seed, filter_per })
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let (filter, probe_rules) = match &args.filter {
        // The filter's file says its scheme: the job checks `--key-type` against it (a Spark
        // filter of longs takes `--key-type long` without `--format spark`) and refuses empty
        // keys where its scheme does.
        Some(path) => (FilterSource::File(path.clone()), KeyRules { key_type: args.sizing.key_type.into(), reject_empty: false }),
        None => {
            let (scheme, layout) = args.sizing.shape(FAST_FILTER)?;
            (build_side(&args, scheme, layout)?, args.sizing.key_rules(scheme))
        }
    };
    let sides = &args.sides;
    let probe_scan = side_scan(&args, "probe", &args.probe_key, sides.probe(), probe_rules)?;
    args.input.check_stdin_used(args.build.iter().chain(&args.probe))?;
    let config = SemijoinConfig {
        filter,
        probe_inputs: args.probe.clone(),
        probe_scan,
        output: args.output.clone(),
        exact: args.exact,
        anti: args.anti,
        exact_strategy: match args.exact_strategy {
            StrategyArg::Auto => ExactStrategy::Auto,
            StrategyArg::Broadcast => ExactStrategy::Broadcast,
            StrategyArg::Shuffle => ExactStrategy::Shuffle,
            StrategyArg::ProbeSide => ExactStrategy::ProbeSide,
        },
        broadcast_limit: args.broadcast_limit,
        overwrite: args.overwrite,
        compression: OutputCompression::new(args.compress, args.compress_level)?,
        cluster: args.cluster.config()?,
        progress: !args.cluster.no_progress,
    };
    if args.plan {
        let plan = semijoin::plan(&config)?;
        print_plan(&plan);
        return super::args::write_stats_json(args.stats_json.as_deref(), &plan);
    }
    let Some(stats) = semijoin::run(config)? else { return Ok(()) };
    print_summary(&stats);
    super::args::write_stats_json(args.stats_json.as_deref(), &stats)
}

/// The lines of `semijoin --plan`, laid out as the summary's.
pub fn print_plan(p: &SemijoinPlan) {
    println!("bloomflow semijoin: plan only (nothing read, built or written)");
    println!("  workers             {} process(es) x {} worker(s)", p.processes, p.workers_per_process);
    if let Some(build) = &p.build {
        let (inputs, splits) = describe_inputs(build);
        println!("  build inputs        {inputs}");
        println!("  build splits        {splits}");
    }
    let (inputs, splits) = describe_inputs(&p.probe);
    println!("  probe inputs        {inputs}");
    println!("  probe splits        {splits}");
    println!("  filter              {}", p.filter);
    println!("  filter size         m = {} bits ({}), k = {}", p.bits, human_bytes(p.bits.div_ceil(8)), p.hashes);
    println!("  filter copies       {}", describe_copies(&p.copies, p.workers_per_process));
    println!("  join                {}", p.join);
    println!("  to read             {} ({} bytes)", human_bytes(p.bytes_to_read), p.bytes_to_read);
    let compressed = if p.output_compression == "none" { String::new() } else { format!(", {}-compressed", p.output_compression) };
    println!("  output              {}: {} part file(s){compressed} and _SUCCESS", p.output, p.part_files);
    print_warnings(0, &p.warnings);
}

pub fn print_summary(s: &SemijoinStats) {
    let compressed = if s.output_compression == "none" { String::new() } else { format!(", {}-compressed", s.output_compression) };
    println!("bloomflow semijoin: wrote {} (part files{compressed} and _SUCCESS)", s.output);
    println!("  workers             {} process(es) x {} worker(s)", s.processes, s.workers_per_process);
    println!("  filter              {}", s.filter);
    if let (Some(records), Some(keys)) = (s.build_records, s.build_keys) {
        let done = if s.bits.is_some() { "inserted" } else { "looked up among the probe keys" };
        println!("  build records       {records} ({keys} keys {done}, {} malformed{})", s.build_malformed.unwrap_or(0), nulls(s.build_null_keys.unwrap_or(0)));
    }
    if let (Some(bits), Some(hashes), Some(fill), Some(fpp)) = (s.bits, s.hashes, s.fill_ratio, s.estimated_fpp) {
        println!("  filter size         m = {bits} bits ({}), k = {hashes}", human_bytes(bits.div_ceil(8)));
        println!("  fill ratio          {fill:.6}");
        println!("  estimated fpp       {fpp:.6}");
    }
    println!("  probe records       {} ({}, {} malformed{})", s.probe_records, human_bytes(s.probe_bytes), s.probe_malformed, nulls(s.probe_null_keys));
    for e in &s.malformed_examples {
        println!("    {e}");
    }
    let taken: u64 = s.per_worker_probe.iter().map(|w| w.taken_splits).sum();
    if taken > 0 {
        println!("  splits taken        {taken} probe split(s) read by idle workers for busier ones (the parts are as without)");
    }
    if s.bits.is_some() {
        println!("  bloom survivors     {} ({:.2}% pruned)", s.bloom_survivors, s.fraction_pruned * 100.0);
    }
    match (s.false_positives_removed, s.exact_strategy) {
        (Some(fp), Some(strategy)) if s.anti => println!("  false positives     {fp} kept by the exact anti-join ({strategy} strategy)"),
        (Some(fp), Some(strategy)) => println!("  false positives     {fp} removed by the exact join ({strategy} strategy)"),
        _ => {}
    }
    if let Some(bytes) = s.broadcast_key_bytes {
        println!("  broadcast           {} of build keys held for the broadcast to every process", human_bytes(bytes));
    }
    if let (Some(keys), Some(bytes)) = (s.key_set_keys, s.key_set_table_bytes) {
        let side = if s.exact_strategy == Some(ExactStrategy::ProbeSide) { "probe" } else { "build" };
        println!("  key set             {keys} distinct {side} keys in {} of tables a process", human_bytes(bytes));
    }
    if let Some(matched) = s.probe_keys_matched {
        println!("  probe keys matched  {matched} of them on the build side (probe-side strategy: no Bloom step)");
    }
    if let Some(saved) = s.network_bytes_saved_by_bloom {
        println!("  network saved       {} of key exchange kept off the network by the Bloom step", human_bytes(saved));
    }
    if s.anti {
        println!("  records out         {} (without a match on the build side)", s.records_out);
    } else {
        println!("  records out         {}", s.records_out);
    }
    println!("  elapsed             {:.3} s ({:.1} MB/s)", s.elapsed_secs, s.mb_per_sec);
    println!("  timeline            {} (worker 0, since the start)", s.timeline.describe());
    for w in &s.warnings {
        eprintln!("bloomflow: warning: {w}");
    }
}

/// The summary's count of records whose key is NULL, where there are any.
fn nulls(count: u64) -> String {
    if count == 0 { String::new() } else { format!(", {count} with a NULL key") }
}
