//! `bloomflow query FILE [KEY]...`: keys from the arguments, or one per line from standard input.

use bloomflow::format;
use bloomflow::BloomFilter;
use std::io::{BufRead, BufWriter, Write};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The filter file.
    file: PathBuf,
    /// Keys to look up; when none are given, one key per line is read from standard input
    /// (a trailing CR is dropped, so CRLF input works).
    keys: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let filter = format::load(&args.file)?.into_plain();
    let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    if !args.keys.is_empty() {
        for key in &args.keys {
            answer(&filter, key.as_bytes(), &mut out)?;
        }
    } else {
        let mut input = std::io::stdin().lock();
        let mut line = Vec::new();
        loop {
            line.clear();
            if input.read_until(b'\n', &mut line)? == 0 {
                break;
            }
            let key = line.strip_suffix(b"\n").unwrap_or(&line);
            let key = key.strip_suffix(b"\r").unwrap_or(key);
            answer(&filter, key, &mut out)?;
        }
    }
    out.flush()?;
    Ok(())
}

fn answer(filter: &BloomFilter, key: &[u8], out: &mut impl Write) -> std::io::Result<()> {
    out.write_all(key)?;
    out.write_all(if filter.contains(key) { b"\tmaybe\n" } else { b"\tno\n" })
}
