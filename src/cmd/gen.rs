//! `bloomflow gen semijoin-bench`: the benchmark data of ../shared/PEERS.md at any scale.

use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    dataset: Dataset,
}

#[derive(clap::Subcommand, Debug)]
enum Dataset {
    /// `build.csv` (customers) and `probe.csv` (events) of the events ⋉ customers semi-join.
    SemijoinBench(SemijoinBench),
}

#[derive(clap::Args, Debug)]
struct SemijoinBench {
    /// Rows of build.csv.
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    build_rows: u64,
    /// Rows of probe.csv (20M make the 1.5 GB file of the benchmark).
    #[arg(long, default_value_t = 20_000_000, value_name = "N")]
    probe_rows: u64,
    /// Output directory (created if missing).
    #[arg(short, long, value_name = "DIR")]
    output: PathBuf,
    /// Generator threads.
    #[arg(short = 'w', long, default_value_t = 1, value_name = "N")]
    workers: usize,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.dataset {
        Dataset::SemijoinBench(a) => {
            // Threads past the machine's are no faster; a mistyped count failed to spawn them.
            if !(1..=bloomflow::cluster::MAX_WORKERS).contains(&a.workers) {
                anyhow::bail!("invalid --workers: {} is not between 1 and {} generator threads", a.workers, bloomflow::cluster::MAX_WORKERS);
            }
            let started = std::time::Instant::now();
            bloomflow::gen::semijoin_bench(&a.output, a.build_rows, a.probe_rows, a.workers)?;
            eprintln!(
                "wrote {} ({} rows) and {} ({} rows) in {:.2} s",
                a.output.join("build.csv").display(),
                a.build_rows,
                a.output.join("probe.csv").display(),
                a.probe_rows,
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
    }
}
