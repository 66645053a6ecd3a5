//! `bloomflow remove FILE [KEY]...`: takes keys out of a counting filter, from the arguments or
//! one per line from standard input. All or nothing: the filter is written (atomically) only
//! once every key is removed, so a key that cannot be removed leaves the file as it was.

use super::keys::KeyArgs;
use anyhow::Context;
use bloomflow::format::{self, StoredFilter};
use bloomflow::Error;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
#[command(after_help = "Remove only keys that were inserted (once per insert): a key never inserted that the \
filter answers `maybe` for (a false positive) takes counts that other keys' answers rest on, and can make \
one of them answer `no`. A key the filter answers `no` for is refused, so that mistake is caught where it \
shows.")]
pub struct Args {
    /// The counting filter file (`build --counting`).
    file: PathBuf,
    /// Keys to remove, once each; when none are given, one key per line is read from standard
    /// input (as `query` reads them). A key inserted several times is removed once per line.
    keys: Vec<String>,
    /// Where to write the filter after the removals. Default: the filter file itself, replaced
    /// atomically.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Skip (and count) keys the filter answers `no` for, instead of failing on the first.
    #[arg(long)]
    skip_absent: bool,
    #[command(flatten)]
    key_args: KeyArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let file = args.file.display();
    let mut filter = format::load(&args.file)?.into_counting().map_err(|why| anyhow::anyhow!("{file}: {why}"))?;
    let mut encoder = args.key_args.encoder(&args.keys, filter.key_form(), filter.spec().scheme).map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
    let (mut removed, mut absent, mut nulls) = (0u64, 0u64, 0u64);
    args.key_args.for_each_batch(&args.keys, |keys, place| {
        encoder.encode(keys, place, |hashed, is_null| {
            for (i, (key, &null)) in hashed.iter().zip(is_null).enumerate() {
                if null {
                    // A NULL key is never inserted by a build: there is nothing to remove.
                    nulls += 1;
                    continue;
                }
                match filter.remove(key) {
                    Ok(()) => removed += 1,
                    Err(Error::NotAMember) if args.skip_absent => absent += 1,
                    Err(Error::NotAMember) => anyhow::bail!(
                        "{}: key {:?} is definitely not in {file} (the filter answers `no` for it), so it cannot be removed; \
                         nothing was written (give --skip-absent to skip such keys)",
                        place(i),
                        String::from_utf8_lossy(keys[i])
                    ),
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(())
        })?
    })?;
    let output = args.output.as_ref().unwrap_or(&args.file);
    format::write(output, &StoredFilter::Counting(filter)).with_context(|| format!("nothing was removed from {file}"))?;
    println!("bloomflow remove: removed {removed} key(s); wrote {}", output.display());
    if absent > 0 {
        println!("  skipped {absent} key(s) the filter answers `no` for (--skip-absent)");
    }
    if nulls > 0 {
        println!("  skipped {nulls} NULL key(s) (--null-key), which no build inserts");
    }
    Ok(())
}
