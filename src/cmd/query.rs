//! `bloomflow query FILE [KEY]...`: keys from the arguments, or one per line from standard input.

use super::keys::{KeyArgs, KeyEncoder};
use bloomflow::format;
use bloomflow::records::KeyForm;
use bloomflow::{CountingBloomFilter, FilterSpec, QueryFilter};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The filter file (or a BloomMapFile directory, whose `bloom` file is read).
    file: PathBuf,
    /// Keys to look up; when none are given, one key per line is read from standard input
    /// (a trailing CR is dropped, so CRLF input works; an empty line is the empty key; gzip,
    /// zstd, bzip2, LZ4-frame or Snappy-framed input is decompressed).
    keys: Vec<String>,
    /// Print how many times each key may have been inserted (`KEY<TAB>N`, the smallest of its
    /// counters, as Hadoop's approximateCount; 0 for a key that is definitely absent) instead of
    /// maybe or no: for counting filters (`build --counting`).
    #[arg(long)]
    count: bool,
    #[command(flatten)]
    key_args: KeyArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let asked = match format::load(&args.file)? {
        format::StoredFilter::Counting(counting) if args.count => Asked::Counts(counting),
        other if args.count => anyhow::bail!("{}: --count needs a counting filter (build --counting), and this is a {} filter", args.file.display(), other.kind()),
        other => Asked::Answers(other.into_query_filter()),
    };
    let encoder = args.key_args.encoder(&args.keys, asked.key_form(), asked.spec().scheme).map_err(|e| anyhow::anyhow!("{}: {e}", args.file.display()))?;
    let mut answerer = Answerer { asked, encoder, answers: Vec::new(), text: AnswerText::default() };
    let mut out = std::io::stdout().lock();
    // The answer lines are written to `out` in large blocks as they fill.
    let answered = args.key_args.for_each_batch(&args.keys, |keys, place| {
        answerer.answer(keys, place)?;
        answerer.text.write_if_full(&mut out)?;
        Ok(())
    });
    // The answers of the batches before a key that failed are written too; its error is the
    // one told.
    let written = answerer.text.write_to(&mut out);
    answered?;
    written?;
    out.flush()?;
    Ok(())
}

/// What `query` asks about each key: whether a filter may hold it, or (`--count`) how many
/// times a counting filter may hold it.
enum Asked {
    Answers(QueryFilter),
    Counts(CountingBloomFilter),
}

impl Asked {
    fn key_form(&self) -> Option<KeyForm> {
        match self {
            Asked::Answers(filter) => filter.key_form(),
            Asked::Counts(counting) => counting.key_form(),
        }
    }

    fn spec(&self) -> &FilterSpec {
        match self {
            Asked::Answers(filter) => filter.spec(),
            Asked::Counts(counting) => counting.spec(),
        }
    }
}

/// Answers keys a batch at a time, keeping its buffers from one batch to the next.
struct Answerer {
    asked: Asked,
    encoder: KeyEncoder,
    answers: Vec<bool>,
    /// The answer lines not written yet.
    text: AnswerText,
}

impl Answerer {
    /// Adds `key<TAB>maybe` or `key<TAB>no` (with `--count`, `key<TAB>N`) for each of `keys`, in
    /// order, to `self.text`: `no` (0) for a NULL key, without a lookup. A key that cannot be
    /// encoded fails the command, named by `place(i)` (where key `i` came from).
    fn answer(&mut self, keys: &[&[u8]], place: &dyn Fn(usize) -> String) -> anyhow::Result<()> {
        let Answerer { asked, encoder, answers, text } = self;
        encoder.encode(keys, place, |hashed, nulls| {
            let filter = match asked {
                Asked::Answers(filter) => filter,
                Asked::Counts(counting) => {
                    for ((key, hashed), &is_null) in keys.iter().zip(hashed).zip(nulls) {
                        text.push_count(key, if is_null { 0 } else { counting.approximate_count(hashed) });
                    }
                    return;
                }
            };
            filter.contains_batch(hashed, answers);
            for ((key, &maybe), &is_null) in keys.iter().zip(answers.iter()).zip(nulls) {
                text.push(key, maybe && !is_null);
            }
        })
    }
}

/// Answer lines, `key<TAB>maybe` or `key<TAB>no`, assembled in one buffer and written to
/// standard output in blocks of about [`BLOCK`](Self::BLOCK) bytes, whole lines each. Written
/// piece by piece through a `BufWriter`, each key and each answer took a call to `memcpy`, and
/// the `BufWriter` copied them again: 28% of the query's time (`perf`, 20M keys of 8 digits).
#[derive(Default)]
struct AnswerText {
    /// Zeroed once and reused, so that the copies below write into initialized bytes: the
    /// lines are `bytes[..len]`.
    bytes: Vec<u8>,
    len: usize,
}

impl AnswerText {
    /// Room past the end of a key for the answer, written as one 8-byte word ([`copy_short`]
    /// writes only the key's own bytes).
    const SLACK: usize = 8;
    /// The size of a block written: standard output's line buffering passes a block that ends
    /// in a newline straight to the file, uncopied.
    const BLOCK: usize = 1 << 18;

    /// Writes the lines to `out` once they fill a block.
    fn write_if_full(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        if self.len >= Self::BLOCK { self.write_to(out) } else { Ok(()) }
    }

    /// Writes the lines to `out` and empties the buffer.
    fn write_to(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        let written = out.write_all(&self.bytes[..self.len]);
        self.len = 0;
        written
    }

    /// Makes room for a line of `key` and an answer; returns where the key will end.
    #[inline(always)]
    fn room_for(&mut self, key: &[u8]) -> usize {
        let end = self.len + key.len();
        if end + Self::SLACK > self.bytes.len() {
            self.bytes.resize((end + Self::SLACK).max(2 * self.bytes.len()), 0);
        }
        end
    }

    #[inline(always)]
    fn push(&mut self, key: &[u8], maybe: bool) {
        let end = self.room_for(key);
        copy_short(&mut self.bytes[self.len..], key);
        // The answer as 8 bytes, the line's length counting only its own.
        let (answer, len): (&[u8; 8], usize) = if maybe { (b"\tmaybe\n\0", 7) } else { (b"\tno\n\0\0\0\0", 4) };
        self.bytes[end..end + 8].copy_from_slice(answer);
        self.len = end + len;
    }

    /// Adds `key<TAB>count` (for `--count`, off the answers' fast path).
    fn push_count(&mut self, key: &[u8], count: u8) {
        let end = self.room_for(key);
        self.bytes[self.len..end].copy_from_slice(key);
        // `\t`, 1–3 digits and `\n`, within the room for an answer, written without allocating.
        let digits = [count / 100, count / 10 % 10, count % 10];
        let first = if count >= 100 { 0 } else if count >= 10 { 1 } else { 2 };
        let mut at = end;
        for byte in std::iter::once(b'\t').chain(digits[first..].iter().map(|d| b'0' + d)).chain([b'\n']) {
            self.bytes[at] = byte;
            at += 1;
        }
        self.len = at;
    }
}

/// Copies `src` to the start of `dst`. The usual key of 4 to 16 bytes is copied as two
/// overlapping fixed-size words, inline, instead of by a call to `memcpy` (written as slice
/// copies, the compiler called it).
#[inline(always)]
fn copy_short(dst: &mut [u8], src: &[u8]) {
    fn words<const W: usize>(dst: &mut [u8], src: &[u8]) {
        let n = src.len();
        let (head, tail) = (src.first_chunk::<W>(), src.last_chunk::<W>());
        *dst.first_chunk_mut::<W>().expect("room for the key") = *head.expect("a key of W bytes or more");
        *dst[n - W..].first_chunk_mut::<W>().expect("room for the key") = *tail.expect("a key of W bytes or more");
    }
    match src.len() {
        8..=16 => words::<8>(dst, src),
        4..=7 => words::<4>(dst, src),
        n => dst[..n].copy_from_slice(src),
    }
}
