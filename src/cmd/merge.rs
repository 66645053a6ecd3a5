//! `bloomflow merge FILE FILE... -o OUT`: the OR of compatible filters (a saturating counter add
//! for counting filters). Nothing is written unless every input is compatible. With `--fold`,
//! filters whose sizes differ are first folded to a common size (see
//! [`BloomFilter::folded`](bloomflow::BloomFilter::folded)).

use anyhow::{bail, Context};
use bloomflow::format::{self, StoredFilter};
use bloomflow::FilterSpec;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Two or more filter files with the same scheme, layout, seed, m and k.
    #[arg(required = true, num_args = 2..)]
    files: Vec<PathBuf>,
    /// Where to write the merged filter.
    #[arg(short, long)]
    output: PathBuf,
    /// Filters whose sizes differ, all else alike, are folded to the greatest common divisor of
    /// their sizes and then merged: the
    /// result is the filter of that size that one build of all their keys would make, exactly,
    /// with the false-positive rate of that size (printed). Filters a day, each sized for its
    /// day's keys, merge into one this way.
    #[arg(long)]
    fold: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut files = args.files.iter();
    let first = files.next().expect("clap requires two files");
    let mut merged = format::load(first)?;
    let mut folded = false;
    for path in files {
        let mut next = format::load(path)?;
        let context = || format!("cannot merge {} into {}", path.display(), first.display());
        let (a, b) = (*merged.spec(), *next.spec());
        // Alike but in size (a dynamic filter's rows do not fold).
        let dynamic = |f: &StoredFilter| matches!(f, StoredFilter::Dynamic(_));
        if !dynamic(&merged) && !dynamic(&next) && a.bits != b.bits && a.check_compatible(&FilterSpec { bits: a.bits, ..b }).is_ok() {
            if !args.fold {
                bail!(
                    "{}: filters are incompatible: number of bits (m) differs ({} vs {}); --fold folds both to \
                     the greatest common divisor of their sizes",
                    context(),
                    a.bits,
                    b.bits
                );
            }
            // Each size is whole units of what a fold keeps whole (a bit, a block, Spark's
            // word), and so is their divisor: gcd(u·x, u·y) = u·gcd(x, y).
            let common = gcd(a.bits, b.bits);
            merged = fold_to(merged, common, first)?;
            next = fold_to(next, common, path)?;
            folded = true;
        }
        match (&mut merged, &next) {
            (StoredFilter::Plain(a), StoredFilter::Plain(b)) => a.union(b).with_context(context)?,
            (StoredFilter::Counting(a), StoredFilter::Counting(b)) => a.merge(b).with_context(context)?,
            (StoredFilter::Dynamic(_), _) | (_, StoredFilter::Dynamic(_)) => bail!(
                "{}: a Hadoop DynamicBloomFilter's rows hold keys by the order they were added, and ORed with another \
                 filter's they would answer \"maybe\" far more often: merge does not take it (query and semijoin --filter read it)",
                context()
            ),
            (a, b) => bail!(
                "cannot merge {} into {}: filters are incompatible: kind differs ({} vs {})",
                path.display(),
                first.display(),
                a.kind(),
                b.kind()
            ),
        }
    }
    if folded {
        note_folded(&merged)?;
    }
    format::write(&args.output, &merged)?;
    Ok(())
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// `filter` folded to `bits` (itself where it is that size already), sized explicitly from
/// then on: the (n, p) it was sized for no longer describe it.
fn fold_to(filter: StoredFilter, bits: u64, path: &Path) -> anyhow::Result<StoredFilter> {
    let from = filter.spec().bits;
    if from == bits {
        return Ok(filter);
    }
    let factor = from / bits;
    let refused = || anyhow::anyhow!("{}: cannot fold its {from} bits by {factor} to {bits}", path.display());
    Ok(match filter {
        StoredFilter::Plain(f) => StoredFilter::Plain(f.folded(factor).ok_or_else(refused)?.sized_for(0, 0.0)),
        StoredFilter::Counting(c) => StoredFilter::Counting(c.folded(factor).ok_or_else(refused)?.sized_for(0, 0.0)),
        StoredFilter::Dynamic(_) => unreachable!("merge folds no dynamic filter"),
    })
}

/// Says on standard error what size the folded filters merged at, and the false-positive rate
/// that leaves; refuses a fold that leaves a filter answering "maybe" for half the absent keys
/// or more (sizes that share only a small divisor, such as 10,000 and 10,001 bits: one bit).
fn note_folded(merged: &StoredFilter) -> anyhow::Result<()> {
    let (bits, fpp) = (merged.spec().bits, merged.estimated_fpp());
    if fpp >= 0.5 {
        bail!(
            "folded to m = {bits} bits, the greatest common divisor of the filters' sizes, the merged filter would answer \
             \"maybe\" for {:.0}% of absent keys: nothing written. Build the filters at sizes that share a larger divisor \
             (one a multiple of the other, say)",
            fpp * 100.0
        );
    }
    eprintln!("bloomflow merge: folded to m = {bits} bits; estimated false-positive rate of the merged filter {fpp:.6}");
    Ok(())
}
