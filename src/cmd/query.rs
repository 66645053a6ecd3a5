//! `bloomflow query FILE [KEY]...`: keys from the arguments, or one per line from standard input.

use bloomflow::format;
use super::args::KeyTypeArg;
use bloomflow::records::{bom_len, composite_key_of_every_field, trim_line_end, KeyForm, KeyRules, KeyType};
use bloomflow::splits::{run_lines, LineEnds, SplitReader, DEFAULT_MAX_RECORD};
use bloomflow::BloomFilter;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The filter file.
    file: PathBuf,
    /// Keys to look up; when none are given, one key per line is read from standard input
    /// (a trailing CR is dropped, so CRLF input works; an empty line is the empty key; gzip,
    /// zstd, bzip2, LZ4-frame or Snappy-framed input is decompressed).
    keys: Vec<String>,
    /// How keys are hashed: `long` parses each as a signed 64-bit decimal and hashes it as
    /// Spark's putLong (for filters of Spark long columns). Default: the type the filter file
    /// records (native files written by `build`), else `bytes`.
    #[arg(long, value_enum)]
    key_type: Option<KeyTypeArg>,
    /// Each key is a composite key's fields separated by this delimiter (CSV quoting applies),
    /// for a filter built with several key fields (`-k a,b`): `--composite , 'x,42'`.
    #[arg(long, value_name = "C")]
    composite: Option<String>,
    /// The codec of standard input, for a stream its first bytes do not tell (Hadoop's Snappy
    /// and LZ4 framing), or `none` for plain text. Default: told by its first bytes.
    #[arg(long, value_name = "CODEC", value_parser = super::args::codec_parser())]
    stdin_compression: Option<bloomflow::compressed::Compression>,
    /// The text that stands for NULL, as the jobs' `--null-key` reads it: a key written so (for
    /// `--composite`, a key with an unquoted field written so) has no value, joins nothing in
    /// the jobs, and is answered `no` without a lookup; with `--key-type long`, it is not parsed.
    /// Default: none, and every key is looked up.
    #[arg(long, value_name = "TEXT")]
    null_key: Option<String>,
}

/// Keys answered together from standard input: the filter's batched query hashes them in vectors
/// and prefetches their cache lines before testing any (see `BloomFilter::contains_batch`).
const BATCH: usize = 1024;

pub fn run(args: Args) -> anyhow::Result<()> {
    if !args.keys.is_empty() && args.stdin_compression.is_some() {
        anyhow::bail!("--stdin-compression is for keys read from standard input, and keys were given as arguments");
    }
    let filter = format::load(&args.file)?.into_plain();
    let mut encoding = KeyEncoding::for_filter(&args, filter.key_form()).map_err(|e| anyhow::anyhow!("{}: {e}", args.file.display()))?;
    // The checks of the jobs' --null-key: what separates a composite key's fields, a quote or a
    // line end is in no unquoted field (and a line end in no key read from a line).
    encoding.null = args.null_key.as_deref().map(|text| super::args::null_text("--null-key", text, encoding.composite.unwrap_or(b'\n'))).transpose()?;
    let mut answerer = Answerer { filter: &filter, encoding, encoded: Vec::new(), composed: Vec::new(), answers: Vec::new(), nulls: Vec::new(), text: AnswerText::default() };
    let mut out = std::io::stdout().lock();
    let answered = answer_all(&args, &mut answerer, &mut out);
    // The answers of the batches before a key that failed are written too; its error is the
    // one told.
    let written = answerer.text.write_to(&mut out);
    answered?;
    written?;
    out.flush()?;
    Ok(())
}

/// Answers the keys of the arguments or of standard input, writing the answer lines to `out`
/// in large blocks and leaving the last in `answerer.text`.
fn answer_all(args: &Args, answerer: &mut Answerer, out: &mut impl Write) -> anyhow::Result<()> {
    if !args.keys.is_empty() {
        let keys: Vec<&[u8]> = args.keys.iter().map(|k| k.as_bytes()).collect();
        answerer.answer(&keys, |i| format!("key argument {}", i + 1))?;
    } else {
        // Lines come in batches straight from a large read buffer, as the jobs read their splits.
        // (Decompressed first if it is compressed, as the jobs' standard input is.)
        let stdin = bloomflow::compressed::stdin(args.stdin_compression).map_err(|e| anyhow::anyhow!("<stdin>: {e}"))?;
        let mut reader = SplitReader::new(stdin, 0, u64::MAX, DEFAULT_MAX_RECORD, "<stdin>".into()).with_line_ends(LineEnds::Detect);
        let mut keys = Vec::with_capacity(BATCH);
        let mut first_line = 1;
        loop {
            let (_, run) = reader.next_lines(first_line - 1)?;
            if run.is_empty() {
                break;
            }
            let buf = reader.buffer();
            let mut at = run.start;
            if first_line == 1 {
                // A byte order mark is dropped where the input starts, as the jobs drop it.
                at += bom_len(&buf[run.clone()]);
            }
            let mut lines = run_lines(&buf[at..run.end]);
            loop {
                let mut batch = bloomflow::scan::recycle(std::mem::take(&mut keys));
                batch.extend(lines.by_ref().take(BATCH).map(trim_line_end));
                let taken = batch.len() as u64;
                if taken > 0 {
                    answerer.answer(&batch, |i| format!("standard input line {}", first_line + i as u64))?;
                    answerer.text.write_if_full(out)?;
                    first_line += taken;
                }
                keys = bloomflow::scan::recycle(batch);
                if taken < BATCH as u64 {
                    break;
                }
            }
        }
    }
    Ok(())
}

/// How the query makes its keys into the bytes it hashes, from the flags and, where the filter
/// file records it, the filter's key form: keys made otherwise would be answered "no", so a
/// mismatch is refused.
struct KeyEncoding {
    rules: KeyRules,
    /// The delimiter of a composite key's fields (`--composite`).
    composite: Option<u8>,
    /// The number of fields every composite key must have, where the filter records it.
    fields: Option<usize>,
    /// The text of a NULL key or field (`--null-key`).
    null: Option<Vec<u8>>,
}

impl KeyEncoding {
    fn for_filter(args: &Args, form: Option<KeyForm>) -> anyhow::Result<KeyEncoding> {
        // The type asked for, else the filter's, else bytes.
        let key_type = match (args.key_type, form) {
            (Some(KeyTypeArg::Bytes), _) => KeyType::Bytes,
            (Some(KeyTypeArg::Long), _) => KeyType::Long,
            (None, Some(form)) => form.key_type,
            (None, None) => KeyType::Bytes,
        };
        let composite = match &args.composite {
            None => None,
            Some(_) if key_type != KeyType::Bytes => anyhow::bail!("--composite keys are bytes: --key-type long takes a key of one field"),
            Some(d) => Some(super::args::parse_delimiter("--composite", d)?),
        };
        let fields = match form {
            Some(form) if form.fields > 1 && composite.is_none() => anyhow::bail!(
                "the filter was built over keys of {form}: give each key's fields with --composite DELIMITER (e.g. --composite ,)"
            ),
            // Each key's fields are counted as it is read.
            Some(form) if form.fields > 1 => Some(form.fields as usize),
            Some(form) => {
                let (fields, flag) = if composite.is_some() { (2, "--composite") } else { (1, "--key-type") };
                form.check(fields, key_type, flag)?;
                None
            }
            None => None,
        };
        Ok(KeyEncoding { rules: KeyRules { key_type, reject_empty: false }, composite, fields, null: None })
    }
}

/// Answers keys a batch at a time, keeping its buffers from one batch to the next.
struct Answerer<'f> {
    filter: &'f BloomFilter,
    encoding: KeyEncoding,
    /// The keys of `--key-type long` as the 8 bytes that are hashed.
    encoded: Vec<[u8; 8]>,
    /// Composite keys as they are hashed.
    composed: Vec<Vec<u8>>,
    answers: Vec<bool>,
    /// Which keys of the batch are NULL (`--null-key`): answered `no`.
    nulls: Vec<bool>,
    /// The answer lines not written yet.
    text: AnswerText,
}

impl Answerer<'_> {
    /// Adds `key<TAB>maybe` or `key<TAB>no` for each of `keys`, in order, to `self.text`. A key
    /// that cannot be encoded fails the command, named by `place(i)` (where key `i` came from).
    fn answer(&mut self, keys: &[&[u8]], place: impl Fn(usize) -> String) -> anyhow::Result<()> {
        let null = self.encoding.null.as_deref();
        self.nulls.clear();
        match (self.encoding.rules.key_type, self.encoding.composite) {
            (KeyType::Bytes, Some(delimiter)) => {
                let mut scratch = Vec::new();
                self.composed.resize_with(keys.len(), Vec::new);
                for (i, (key, composed)) in keys.iter().zip(&mut self.composed).enumerate() {
                    // The fields as the jobs make a composite key of them, NULLs included.
                    let (fields, present) = composite_key_of_every_field(key, delimiter, null, &mut scratch, composed).map_err(|(index, e)| anyhow::anyhow!("{}: {}", place(i), e.describe(index)))?;
                    if let Some(want) = self.encoding.fields.filter(|&want| want != fields) {
                        anyhow::bail!("{}: a key of {fields} field(s), where the filter's keys have {want}", place(i));
                    }
                    self.nulls.push(!present);
                }
                let hashed: Vec<&[u8]> = self.composed[..keys.len()].iter().map(Vec::as_slice).collect();
                self.filter.contains_batch(&hashed, &mut self.answers);
            }
            (KeyType::Bytes, None) => {
                self.nulls.extend(keys.iter().map(|&key| Some(key) == null));
                self.filter.contains_batch(keys, &mut self.answers);
            }
            (KeyType::Long, _) => {
                self.encoded.clear();
                for (i, &key) in keys.iter().enumerate() {
                    let is_null = Some(key) == null;
                    // A NULL is not parsed: zeros stand in for it, looked up and answered no.
                    let encoded = if is_null {
                        [0u8; 8]
                    } else {
                        let mut buf = [0u8; 8];
                        let encoded = self.encoding.rules.encode(key, &mut buf).map_err(|e| anyhow::anyhow!("{}: {}", place(i), e.describe(0)))?;
                        encoded.try_into().expect("a long is 8 bytes")
                    };
                    self.encoded.push(encoded);
                    self.nulls.push(is_null);
                }
                let hashed: Vec<&[u8]> = self.encoded.iter().map(|b| &b[..]).collect();
                self.filter.contains_batch(&hashed, &mut self.answers);
            }
        }
        for ((key, &maybe), &is_null) in keys.iter().zip(&self.answers).zip(&self.nulls) {
            self.text.push(key, maybe && !is_null);
        }
        Ok(())
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

    #[inline(always)]
    fn push(&mut self, key: &[u8], maybe: bool) {
        let end = self.len + key.len();
        if end + Self::SLACK > self.bytes.len() {
            self.bytes.resize((end + Self::SLACK).max(2 * self.bytes.len()), 0);
        }
        copy_short(&mut self.bytes[self.len..], key);
        // The answer as 8 bytes, the line's length counting only its own.
        let (answer, len): (&[u8; 8], usize) = if maybe { (b"\tmaybe\n\0", 7) } else { (b"\tno\n\0\0\0\0", 4) };
        self.bytes[end..end + 8].copy_from_slice(answer);
        self.len = end + len;
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
