//! Keys given on the command line or read from standard input, and made into the bytes a
//! filter hashes as the jobs made them: shared by `query` and `remove`.

use super::args::KeyTypeArg;
use bloomflow::hashing::Scheme;
use bloomflow::records::{bom_len, composite_key_of_every_field, trim_line_end, KeyForm, KeyRules, KeyType};
use bloomflow::splits::{run_lines, LineEnds, SplitReader, DEFAULT_MAX_RECORD};

/// How keys are written, for commands that take them from the arguments or standard input.
#[derive(clap::Args, Debug)]
pub struct KeyArgs {
    /// How keys are hashed: `long` parses each as a signed 64-bit decimal and hashes it as
    /// Spark's putLong (for filters of Spark long columns); `text`, `long-writable`,
    /// `int-writable` and `bytes-writable` as Hadoop's Writables serialize them (for a
    /// BloomMapFile's filter).
    /// Default: the type the filter file records (native files written by `build`), else `bytes`.
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
    /// `--composite`, a key with an unquoted field written so) has no value and joins nothing in
    /// the jobs: `query` answers it `no` without a lookup, `remove` skips it (builds skip it);
    /// with `--key-type long`, it is not parsed. Default: none, and every key is a value.
    #[arg(long, value_name = "TEXT")]
    null_key: Option<String>,
}

/// Keys handled together from standard input: a filter's batched query hashes them in vectors
/// and prefetches their cache lines before testing any (see `BloomFilter::contains_batch`).
const BATCH: usize = 1024;

impl KeyArgs {
    /// How keys are made into the bytes hashed, for a filter whose keys were made as `form`
    /// records (where known): keys made otherwise would be answered "no", so a mismatch is
    /// refused. `keys` are the keys given as arguments.
    pub fn encoder(&self, keys: &[String], form: Option<KeyForm>, scheme: Scheme) -> anyhow::Result<KeyEncoder> {
        if !keys.is_empty() && self.stdin_compression.is_some() {
            anyhow::bail!("--stdin-compression is for keys read from standard input, and keys were given as arguments");
        }
        let mut encoding = KeyEncoding::for_filter(self, form)?;
        scheme.check_key_type(encoding.rules.key_type)?;
        // The checks of the jobs' --null-key: what separates a composite key's fields, a quote or a
        // line end is in no unquoted field (and a line end in no key read from a line).
        encoding.null = self.null_key.as_deref().map(|text| super::args::null_text("--null-key", text, encoding.composite.unwrap_or(b'\n'))).transpose()?;
        Ok(KeyEncoder { encoding, encoded: Vec::new(), composed: Vec::new(), nulls: Vec::new() })
    }

    /// Calls `batch` with the keys of the arguments, if any, else with each batch of the lines of
    /// standard input, and with where each key of the batch came from (by its index), for
    /// messages. Stops at the first error `batch` returns.
    pub fn for_each_batch(&self, keys: &[String], mut batch: impl FnMut(&[&[u8]], &dyn Fn(usize) -> String) -> anyhow::Result<()>) -> anyhow::Result<()> {
        if !keys.is_empty() {
            let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
            return batch(&keys, &|i| format!("key argument {}", i + 1));
        }
        // Lines come in batches straight from a large read buffer, as the jobs read their splits.
        // (Decompressed first if it is compressed, as the jobs' standard input is.)
        let stdin = bloomflow::compressed::stdin(self.stdin_compression).map_err(|e| anyhow::anyhow!("<stdin>: {e}"))?;
        let mut reader = SplitReader::new(stdin, 0, u64::MAX, DEFAULT_MAX_RECORD, "<stdin>".into()).with_line_ends(LineEnds::Detect);
        let mut keys = Vec::with_capacity(BATCH);
        let mut first_line = 1;
        loop {
            let (_, run) = reader.next_lines(first_line - 1)?;
            if run.is_empty() {
                return Ok(());
            }
            let buf = reader.buffer();
            let mut at = run.start;
            if first_line == 1 {
                // A byte order mark is dropped where the input starts, as the jobs drop it.
                at += bom_len(&buf[run.clone()]);
            }
            let mut lines = run_lines(&buf[at..run.end]);
            loop {
                let mut lines_batch = bloomflow::scan::recycle(std::mem::take(&mut keys));
                lines_batch.extend(lines.by_ref().take(BATCH).map(trim_line_end));
                let taken = lines_batch.len() as u64;
                if taken > 0 {
                    batch(&lines_batch, &|i| format!("standard input line {}", first_line + i as u64))?;
                    first_line += taken;
                }
                keys = bloomflow::scan::recycle(lines_batch);
                if taken < BATCH as u64 {
                    break;
                }
            }
        }
    }
}

/// How keys are made into the bytes a filter hashes, from the flags and, where the filter
/// file records it, the filter's key form.
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
    fn for_filter(args: &KeyArgs, form: Option<KeyForm>) -> anyhow::Result<KeyEncoding> {
        // The type asked for, else the filter's, else bytes.
        let key_type = args.key_type.map(KeyType::from).or(form.map(|form| form.key_type)).unwrap_or(KeyType::Bytes);
        let composite = match &args.composite {
            None => None,
            Some(_) if key_type != KeyType::Bytes => anyhow::bail!("--composite keys are bytes: --key-type {key_type} takes a key of one field"),
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

/// Makes keys into the bytes hashed a batch at a time, keeping its buffers from one batch to the
/// next.
pub struct KeyEncoder {
    encoding: KeyEncoding,
    /// The keys of a `--key-type` other than bytes, as they are hashed.
    encoded: Vec<Vec<u8>>,
    /// Composite keys as they are hashed.
    composed: Vec<Vec<u8>>,
    /// Which keys of the batch are NULL (`--null-key`).
    nulls: Vec<bool>,
}

impl KeyEncoder {
    /// Calls `then` with the bytes hashed for each of `keys`, in order, and whether each is
    /// NULL (a NULL key's bytes are a stand-in, not to be looked up). A key that cannot be
    /// encoded fails, named by `place(i)` (where key `i` came from).
    pub fn encode<R>(&mut self, keys: &[&[u8]], place: &dyn Fn(usize) -> String, then: impl FnOnce(&[&[u8]], &[bool]) -> R) -> anyhow::Result<R> {
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
                Ok(then(&hashed, &self.nulls))
            }
            (KeyType::Bytes, None) => {
                self.nulls.extend(keys.iter().map(|&key| Some(key) == null));
                Ok(then(keys, &self.nulls))
            }
            (_, _) => {
                self.encoded.resize_with(keys.len(), Vec::new);
                for (i, (&key, encoded)) in keys.iter().zip(&mut self.encoded).enumerate() {
                    let is_null = Some(key) == null;
                    // A NULL is not parsed: an empty key stands in for it.
                    if is_null {
                        encoded.clear();
                    } else {
                        self.encoding.rules.encode(key, encoded).map_err(|e| anyhow::anyhow!("{}: {}", place(i), e.describe(0)))?;
                    }
                    self.nulls.push(is_null);
                }
                let hashed: Vec<&[u8]> = self.encoded[..keys.len()].iter().map(Vec::as_slice).collect();
                Ok(then(&hashed, &self.nulls))
            }
        }
    }
}
