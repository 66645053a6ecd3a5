//! `bloomflow query FILE [KEY]...`: keys from the arguments, or one per line from standard input.

use bloomflow::format;
use super::args::KeyTypeArg;
use bloomflow::records::{KeyRules, KeyType};
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
    /// How keys are hashed: `long` parses each as a signed 64-bit decimal and hashes it as
    /// Spark's putLong (for filters of Spark long columns).
    #[arg(long, value_enum, default_value_t = KeyTypeArg::Bytes)]
    key_type: KeyTypeArg,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let filter = format::load(&args.file)?.into_plain();
    let rules = KeyRules {
        key_type: match args.key_type {
            KeyTypeArg::Bytes => KeyType::Bytes,
            KeyTypeArg::Long => KeyType::Long,
        },
        reject_empty: false,
    };
    let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    if !args.keys.is_empty() {
        for key in &args.keys {
            answer(&filter, &rules, key.as_bytes(), &mut out)?;
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
            answer(&filter, &rules, key, &mut out)?;
        }
    }
    out.flush()?;
    Ok(())
}

fn answer(filter: &BloomFilter, rules: &KeyRules, key: &[u8], out: &mut impl Write) -> anyhow::Result<()> {
    let mut buf = [0u8; 8];
    let hashed = rules.encode(key, &mut buf).map_err(|e| anyhow::anyhow!("{}", e.describe(0)))?;
    let present = filter.contains(hashed);
    out.write_all(key)?;
    out.write_all(if present { b"\tmaybe\n" } else { b"\tno\n" })?;
    Ok(())
}
