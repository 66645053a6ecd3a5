//! `bloomflow merge FILE FILE... -o OUT`: the OR of compatible filters (a saturating counter add
//! for counting filters); and `bloomflow intersect`, their AND (the smaller of each pair of
//! counters). Nothing is written unless every input is compatible. With `--fold`, filters whose
//! sizes differ are first folded to a common size (see
//! [`BloomFilter::folded`](bloomflow::BloomFilter::folded)).

use anyhow::{bail, Context};
use bloomflow::format::{self, StoredFilter};
use bloomflow::FilterSpec;
use std::path::{Path, PathBuf};

/// The arguments of `bloomflow merge` and `bloomflow intersect`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Two or more filter files with the same scheme, layout, seed, m and k.
    #[arg(required = true, num_args = 2..)]
    files: Vec<PathBuf>,
    /// Where to write the result.
    #[arg(short, long)]
    output: PathBuf,
    /// Filters whose sizes differ, all else alike, are first folded to the greatest common
    /// divisor of their sizes, each to the filter its keys would have made at that size: merged,
    /// the result is the filter one build of all their keys would make, exactly, with the
    /// false-positive rate of that size (printed). Filters a day, each sized for its day's keys,
    /// combine this way.
    #[arg(long)]
    fold: bool,
}

/// How the filters combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Combine {
    /// OR (`merge`): the keys of any of them.
    Union,
    /// AND (`intersect`): only the keys all of them may hold.
    Intersection,
}

impl Combine {
    /// The command, as its messages name it.
    fn command(self) -> &'static str {
        match self {
            Combine::Union => "merge",
            Combine::Intersection => "intersect",
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    combine(&args.files, &args.output, args.fold, Combine::Union)
}

pub fn run_intersect(args: Args) -> anyhow::Result<()> {
    combine(&args.files, &args.output, args.fold, Combine::Intersection)
}

/// Combines `files` as `how` says into `output`, folding them to a common size first where
/// `fold` allows it; writes nothing unless every file combines.
fn combine(files: &[PathBuf], output: &Path, fold: bool, how: Combine) -> anyhow::Result<()> {
    let command = how.command();
    let mut files = files.iter();
    let first = files.next().expect("clap requires two files");
    let mut combined = format::load(first)?;
    let mut folded = false;
    for path in files {
        let mut next = format::load(path)?;
        let context = || match how {
            Combine::Union => format!("cannot merge {} into {}", path.display(), first.display()),
            Combine::Intersection => format!("cannot intersect {} with {}", path.display(), first.display()),
        };
        let (a, b) = (*combined.spec(), *next.spec());
        // Alike but in size (a dynamic filter's rows do not fold).
        let dynamic = |f: &StoredFilter| matches!(f, StoredFilter::Dynamic(_));
        if !dynamic(&combined) && !dynamic(&next) && a.bits != b.bits && a.check_compatible(&FilterSpec { bits: a.bits, ..b }).is_ok() {
            if !fold {
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
            combined = fold_to(combined, common, first)?;
            next = fold_to(next, common, path)?;
            folded = true;
        }
        match (&mut combined, &next, how) {
            (StoredFilter::Plain(a), StoredFilter::Plain(b), Combine::Union) => a.union(b).with_context(context)?,
            (StoredFilter::Plain(a), StoredFilter::Plain(b), Combine::Intersection) => a.intersect(b).with_context(context)?,
            (StoredFilter::Counting(a), StoredFilter::Counting(b), Combine::Union) => a.merge(b).with_context(context)?,
            (StoredFilter::Counting(a), StoredFilter::Counting(b), Combine::Intersection) => a.intersect(b).with_context(context)?,
            (StoredFilter::Dynamic(_), ..) | (_, StoredFilter::Dynamic(_), _) => bail!(
                "{}: a Hadoop DynamicBloomFilter's rows hold keys by the order they were added, which another filter's \
                 bits do not follow: {command} does not take it (query and semijoin --filter read it)",
                context()
            ),
            (a, b, _) => bail!("{}: filters are incompatible: kind differs ({} vs {})", context(), a.kind(), b.kind()),
        }
    }
    if folded {
        note_folded(&combined, command)?;
    }
    format::write(output, &combined)?;
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
fn note_folded(combined: &StoredFilter, command: &str) -> anyhow::Result<()> {
    let (bits, fpp) = (combined.spec().bits, combined.estimated_fpp());
    if fpp >= 0.5 {
        bail!(
            "folded to m = {bits} bits, the greatest common divisor of the filters' sizes, the {command}ed filter would answer \
             \"maybe\" for {:.0}% of absent keys: nothing written. Build the filters at sizes that share a larger divisor \
             (one a multiple of the other, say)",
            fpp * 100.0
        );
    }
    eprintln!("bloomflow {command}: folded to m = {bits} bits; estimated false-positive rate of the {command}ed filter {fpp:.6}");
    Ok(())
}
