//! `bloomflow demo`: the whole pipeline (build, semi-join, exact semi-join, anti-join) on the sample data
//! bundled in the binary, written under `./bloomflow-demo/`, with the commands to do the same on
//! one's own data.

use bloomflow::cluster::ClusterConfig;
use bloomflow::hashing::Scheme;
use bloomflow::spec::Layout;
use bloomflow::jobs::build::{self, BuildConfig, Sizing};
use bloomflow::jobs::semijoin::{self, ExactStrategy, FilterSource, SemijoinConfig};
use bloomflow::records::{Key, KeyField, RecordFormat};
use bloomflow::scan::ScanOptions;
use bloomflow::splits::DEFAULT_MAX_RECORD;
use std::path::{Path, PathBuf};

const CUSTOMERS: &[u8] = include_bytes!("../../data/customers.csv");
const EVENTS: &[u8] = include_bytes!("../../data/events.csv");
/// Small splits, so that the few-MB sample is shared among the workers as a large input would be.
const DEMO_SPLIT: u64 = 256 << 10;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where to write the sample data and the results.
    #[arg(long, default_value = "bloomflow-demo", value_name = "DIR")]
    dir: PathBuf,
    /// Worker threads.
    #[arg(short = 'w', long, default_value_t = 2, value_name = "N")]
    workers: usize,
}

fn scan(key: &str) -> ScanOptions {
    ScanOptions {
        format: RecordFormat { delimiter: b',', has_header: true, multiline: false },
        key: Key::single(KeyField::Name(key.into())),
        split_size: DEMO_SPLIT,
        max_record: DEFAULT_MAX_RECORD,
        strict: false,
        key_rules: Default::default(),
        stdin_compression: None,
        null_key: None,
        keep_null_records: false,
    }
}

fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::write(path, bytes).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    bloomflow::cluster::check_workers(args.workers)?;
    let dir = &args.dir;
    let data = dir.join("data");
    std::fs::create_dir_all(&data).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", data.display()))?;
    let (customers, events) = (data.join("customers.csv"), data.join("events.csv"));
    write(&customers, CUSTOMERS)?;
    write(&events, EVENTS)?;
    let cluster = ClusterConfig::local(args.workers);
    let w = args.workers;
    println!("== bloomflow demo: {} customers (build side), {} events (probe side), {w} workers\n",
        CUSTOMERS.iter().filter(|&&b| b == b'\n').count() - 1,
        EVENTS.iter().filter(|&&b| b == b'\n').count() - 1);

    println!("== 1. build a filter over customers.csv's customer_id\n");
    let filter = dir.join("customers.bloom");
    let stats = build::run(BuildConfig {
        inputs: vec![customers.clone()],
        scan: scan("customer_id"),
        sizing: Sizing::Expected { items: 3000, fpp: 0.01 },
        scheme: Scheme::NativeLookup3,
        layout: Layout::Blocked,
        seed: 0,
        counting: false,
        output: Some(filter.clone()),
        filter_per: Default::default(),
        cluster: cluster.clone(),
        progress: false,
    })?
    .expect("a single process is process 0");
    super::build::print_summary(&stats);

    println!("\n== 2. prune events.csv with it (Bloom semi-join: no probe record crosses the network)\n");
    let pruned = dir.join("pruned");
    semijoin_step(FilterSource::File(filter.clone()), &events, &pruned, Join::Bloom, &cluster)?;

    println!("\n== 3. the same join made exact: the build keys, broadcast to every process, remove the false positives\n");
    let exact = dir.join("exact");
    let build_side = FilterSource::Build {
        inputs: vec![customers.clone()],
        scan: scan("customer_id"),
        sizing: Sizing::Expected { items: 3000, fpp: 0.01 },
        scheme: Scheme::NativeLookup3,
        layout: Layout::Blocked,
        seed: 0,
        filter_per: Default::default(),
    };
    semijoin_step(build_side.clone(), &events, &exact, Join::Exact, &cluster)?;

    println!("\n== 4. the other records: events of customers not in customers.csv (exact anti-join)\n");
    let unknown = dir.join("unknown");
    semijoin_step(build_side, &events, &unknown, Join::Anti, &cluster)?;

    let (c, e, f) = (customers.display(), events.display(), filter.display());
    println!("\n== done. Results are in {}/: the filter, pruned/, exact/ and unknown/ (part files and _SUCCESS).", dir.display());
    println!("\nThe same on your own data:\n");
    println!("  bloomflow build {c} -k customer_id --expected-items 3000 -o {f} -w {w}");
    println!("  bloomflow query {f} 3 4");
    println!("  bloomflow semijoin --filter {f} --probe {e} --probe-key customer_id -o {} --overwrite -w {w}", pruned.display());
    println!("  bloomflow semijoin --build {c} --build-key customer_id --probe {e} --probe-key customer_id --exact -o {} --overwrite -w {w}", exact.display());
    println!("  bloomflow semijoin --build {c} --build-key customer_id --probe {e} --probe-key customer_id --exact --anti -o {} --overwrite -w {w}", unknown.display());
    println!("  jobs/local-cluster.sh 2 1 -- build {c} -k customer_id -o {f}     # as 2 processes");
    Ok(())
}

/// Which join a demo step runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Join {
    Bloom,
    Exact,
    Anti,
}

/// Runs one semi-join of the demo into `output` and prints its summary.
fn semijoin_step(filter: FilterSource, events: &Path, output: &Path, join: Join, cluster: &ClusterConfig) -> anyhow::Result<()> {
    let stats = semijoin::run(SemijoinConfig {
        filter,
        probe_inputs: vec![events.to_path_buf()],
        probe_scan: scan("customer_id"),
        output: output.to_path_buf(),
        exact: join != Join::Bloom,
        anti: join == Join::Anti,
        exact_strategy: ExactStrategy::Auto,
        broadcast_limit: 64 << 20,
        overwrite: true,
        compression: bloomflow::compressed::OutputCompression::NONE,
        cluster: cluster.clone(),
        progress: false,
    })?
    .expect("a single process is process 0");
    super::semijoin::print_summary(&stats);
    Ok(())
}
