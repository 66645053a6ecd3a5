//! `bloomflow merge FILE FILE... -o OUT`: the OR of compatible filters (a saturating counter add
//! for counting filters). Nothing is written unless every input is compatible.

use anyhow::{bail, Context};
use bloomflow::format::{self, StoredFilter};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Two or more filter files with the same scheme, layout, seed, m and k.
    #[arg(required = true, num_args = 2..)]
    files: Vec<PathBuf>,
    /// Where to write the merged filter.
    #[arg(short, long)]
    output: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut files = args.files.iter();
    let first = files.next().expect("clap requires two files");
    let mut merged = format::load(first)?;
    for path in files {
        let next = format::load(path)?;
        let context = || format!("cannot merge {} into {}", path.display(), first.display());
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
    format::write(&args.output, &merged)?;
    Ok(())
}
