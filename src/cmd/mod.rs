//! The command line: one subcommand per file (`intersect` beside `merge`, whose steps it shares), each with its clap arguments and a `run`.

mod args;
mod build;
mod demo;
mod fold;
mod gen;
mod info;
mod keys;
mod merge;
mod query;
mod remove;
mod semijoin;
mod subtract;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Build Bloom filters over very large delimited data and use them to prune joins, as a
/// distributed timely-dataflow job.
#[derive(Parser, Debug)]
#[command(name = "bloomflow", version, about, long_about = None, after_help = "Environment:\n  BLOOMFLOW_KERNEL  avx512, avx2 or portable: the fastest vector code to run, for blocked-layout queries, the hashing of batches and the scan (default: the fastest this CPU runs)")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Build a Bloom filter over a key field of delimited inputs, across workers and processes.
    Build(build::Args),
    /// Run build, semi-join, exact semi-join and anti-join on the bundled sample data, into ./bloomflow-demo/.
    Demo(demo::Args),
    /// Shrink a filter sized for far more keys than it holds to a whole fraction of its size that
    /// still meets its false-positive rate.
    Fold(fold::Args),
    /// Generate benchmark data.
    Gen(gen::Args),
    /// Show a filter file's kind, format, parameters and fill statistics.
    Info(info::Args),
    /// AND compatible filters into one file: a filter that may hold only the keys all of them
    /// may hold (Hadoop's `and`, Spark's `intersectInPlace`).
    Intersect(merge::Args),
    /// Ask a filter whether keys may be present (`maybe`) or are definitely absent (`no`).
    Query(query::Args),
    /// OR compatible filters into one file.
    Merge(merge::Args),
    /// Remove keys from a counting filter (`build --counting`), from the arguments or standard input.
    Remove(remove::Args),
    /// Keep the probe records whose key may be on the build side (Bloom join pruning), or with
    /// --exact --anti those whose key is not.
    Semijoin(semijoin::Args),
    /// Remove the keys of a key field of delimited inputs from a counting filter, across workers
    /// and processes (the inverse of `build --counting`).
    Subtract(subtract::Args),
}

/// Runs the chosen subcommand.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Build(args) => build::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Fold(args) => fold::run(args),
        Command::Gen(args) => gen::run(args),
        Command::Info(args) => info::run(args),
        Command::Intersect(args) => merge::run_intersect(args),
        Command::Query(args) => query::run(args),
        Command::Merge(args) => merge::run(args),
        Command::Remove(args) => remove::run(args),
        Command::Semijoin(args) => semijoin::run(args),
        Command::Subtract(args) => subtract::run(args),
    }?;
    Ok(ExitCode::SUCCESS)
}
