//! `bloomflow fold FILE -o OUT [--fpp P]`: shrinks a filter sized for far more keys than it
//! holds to the smallest whole fraction of its size that holds them at the false-positive
//! rate, as a build folds a filter it sized from its inputs' size (see
//! [`SizedSpec::fold`](bloomflow::jobs::build::SizedSpec::fold)).

use anyhow::bail;
use bloomflow::format::{self, StoredFilter};
use bloomflow::jobs::build::{Foldable, SizedSpec};
use bloomflow::FilterSpec;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
#[command(after_help = "The folded filter is, bit for bit (counter for counter), the filter of that size and \
the same hashes that a build of the same keys would make; its false-positive rate is that of the smaller size. \
The fold factor divides the size: a size with many factors (as a build's estimated sizes are made) folds \
closest to what the keys need.")]
pub struct Args {
    /// The filter file: plain or counting, of any scheme (a Hadoop DynamicBloomFilter's rows do
    /// not fold).
    file: PathBuf,
    /// Where to write the folded filter (written unchanged where no fold keeps the rate).
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// The false-positive rate the folded filter must keep, by the estimate from its fill.
    /// Default: the rate the filter was sized for (recorded by `build` in native files).
    #[arg(long, value_name = "P")]
    fpp: Option<f64>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let file = args.file.display();
    match format::load(&args.file)? {
        StoredFilter::Plain(f) => {
            let (spec, p) = (*f.spec(), rate(&args, f.target_fpp())?);
            write(&args.output, fold(f, spec, p), spec, p, StoredFilter::Plain)
        }
        StoredFilter::Counting(c) => {
            let (spec, p) = (*c.spec(), rate(&args, c.target_fpp())?);
            write(&args.output, fold(c, spec, p), spec, p, StoredFilter::Counting)
        }
        StoredFilter::Dynamic(_) => bail!("{file}: a Hadoop DynamicBloomFilter's rows do not fold: fold takes a plain or counting filter"),
    }
}

/// The rate the folded filter must keep: `--fpp`, else the one the filter was sized for.
fn rate(args: &Args, sized_for: f64) -> anyhow::Result<f64> {
    let p = match args.fpp {
        Some(p) => p,
        None if sized_for > 0.0 => sized_for,
        None => bail!("{}: the file records no false-positive rate it was sized for: give --fpp", args.file.display()),
    };
    if !(p > 0.0 && p < 1.0) {
        bail!("invalid --fpp {p}: expected a rate between 0 and 1, such as 0.01");
    }
    Ok(p)
}

/// `filter` folded by the largest factor of its size that keeps its estimated rate at most
/// `p`, or `Err(filter)` where none does.
fn fold<F: Foldable>(filter: F, spec: FilterSpec, p: f64) -> Result<F, F> {
    let sized = SizedSpec { spec, expected_items: 0, target_fpp: p, note: String::new(), estimated: true };
    sized.fold(&filter).ok_or(filter)
}

/// Writes the outcome, folded or not, and says which on standard error.
fn write<F>(output: &Path, outcome: Result<F, F>, spec: FilterSpec, p: f64, stored: impl Fn(F) -> StoredFilter) -> anyhow::Result<()> {
    let folded = outcome.is_ok();
    let stored = stored(outcome.unwrap_or_else(|unchanged| unchanged));
    format::write(output, &stored)?;
    let (bits, fpp) = (stored.spec().bits, stored.estimated_fpp());
    if folded {
        eprintln!(
            "bloomflow fold: m = {} -> {bits} bits (by {}); estimated false-positive rate {fpp:.6} (at most {p})",
            spec.bits,
            spec.bits / bits
        );
    } else {
        eprintln!(
            "bloomflow fold: no fold of its {} bits keeps the estimated false-positive rate at most {p} (it is {fpp:.6}): written unchanged",
            spec.bits
        );
    }
    Ok(())
}
