//! Flag groups shared by the job commands, and their validation into library settings: no code
//! below the CLI looks at raw flags.

use anyhow::{bail, Context};
use bloomflow::cluster::ClusterConfig;
use bloomflow::compressed::Compression;
use bloomflow::jobs::build::Sizing;
use bloomflow::params;
use bloomflow::hashing::{HadoopHash, Scheme};
use bloomflow::shared_filter::FilterPer;
use bloomflow::spec::Layout;
use clap::ValueEnum;
use bloomflow::records::{Key, KeyRules, KeyType, RecordFormat};
use bloomflow::scan::ScanOptions;
use bloomflow::splits::{DEFAULT_MAX_RECORD, DEFAULT_SPLIT_SIZE};
use std::path::PathBuf;
use std::time::Duration;

/// timely's cluster flags.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Cluster")]
pub struct ClusterArgs {
    /// Worker threads per process.
    #[arg(short = 'w', long, default_value_t = 1, value_name = "N")]
    pub workers: usize,
    /// Number of processes in the job.
    #[arg(short = 'n', long, default_value_t = 1, value_name = "N")]
    pub processes: usize,
    /// This process's index, 0-based.
    #[arg(short = 'p', long, default_value_t = 0, value_name = "I")]
    pub process: usize,
    /// File of `host:port` lines, one per process, in process order (default: localhost:2101...).
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,
    /// Seconds to wait for every peer process before failing.
    #[arg(long, default_value_t = 60, value_name = "SECS")]
    pub connect_timeout: u64,
    /// Never draw a progress bar (one is drawn only when stderr is a terminal).
    #[arg(long)]
    pub no_progress: bool,
}

impl ClusterArgs {
    pub fn config(&self) -> anyhow::Result<ClusterConfig> {
        if self.connect_timeout == 0 {
            bail!("invalid --connect-timeout: must be at least 1 second");
        }
        Ok(ClusterConfig::new(
            self.workers,
            self.processes,
            self.process,
            self.hostfile.as_ref(),
            Duration::from_secs(self.connect_timeout),
        )?)
    }
}

/// How the delimited input is read.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Input")]
pub struct InputArgs {
    /// Field delimiter: one byte; `\t` or `tab` for TSV, `\001` or `\x01` for Hive's Ctrl-A.
    #[arg(short = 'd', long, default_value = ",", value_name = "C")]
    pub delimiter: String,
    /// The inputs have no header line (then key fields are 1-based indexes).
    #[arg(long)]
    pub no_header: bool,
    /// The text that stands for NULL in a key field: such a record has no key, so it joins
    /// nothing (the semi-join drops it, the anti-join keeps it, a build skips it). `''` reads
    /// an empty field as Spark, DuckDB and Polars do, `'\N'` as Hive writes NULL; a quoted
    /// field is always text. Default: none, and an empty field is the empty key.
    #[arg(long, value_name = "TEXT")]
    pub null_key: Option<String>,
    /// Quoted fields may hold line breaks, as Spark's `multiLine` and RFC 4180 read them: a
    /// record ends at the first newline outside quotes. A plain file's splits then start at
    /// record starts found near their planned ones (where none is found, a split joins the one
    /// before); a compressed file is read whole by one worker.
    #[arg(long)]
    pub multiline: bool,
    /// Fail on the first malformed record instead of counting and skipping it.
    #[arg(long)]
    pub strict: bool,
    /// Bytes per split, the unit of work: workers claim a filter input's splits as they go; a
    /// semi-join's probe splits are dealt to workers round-robin. A number, or one with a
    /// suffix k, m, g or t, 1024-based as in Hadoop's and Spark's settings (`128m`, `64MiB`).
    #[arg(long, default_value_t = DEFAULT_SPLIT_SIZE, value_name = "BYTES", value_parser = params::parse_bytes)]
    pub split_size: u64,
    /// Longest record accepted, in bytes (with a suffix as --split-size takes it).
    #[arg(long, default_value_t = DEFAULT_MAX_RECORD as u64, value_name = "BYTES", value_parser = params::parse_bytes)]
    pub max_record_bytes: u64,
    /// The codec of standard input (`-`), for a stream its first bytes do not tell: Hadoop's
    /// Snappy and LZ4 framing (`hadoop fs -cat part-00000.snappy | bloomflow ...`), or `none`
    /// for text that must not be taken for a codec's. Default: told by its first bytes (gzip,
    /// zstd, bzip2, the lz4 tool's frames, snzip's framing), else text.
    #[arg(long, value_name = "CODEC", value_parser = codec_parser())]
    pub stdin_compression: Option<Compression>,
}

/// A codec by the name [`Compression::name`] gives it (`gzip`, `zstd`, `deflate`, `bzip2`,
/// `snappy`, `lz4` or `none`), for `--compress` and `--stdin-compression`.
pub fn codec_parser() -> impl clap::builder::TypedValueParser<Value = Compression> {
    use clap::builder::TypedValueParser;
    let codecs = || std::iter::once(Compression::None).chain(Compression::CODECS);
    clap::builder::PossibleValuesParser::new(codecs().map(Compression::name))
        .map(move |name| codecs().find(|c| c.name() == name).expect("a possible value names a codec"))
}

impl InputArgs {
    /// Refuses `--stdin-compression` when no input is standard input: it would do nothing, and
    /// the user meant some input to be read with it.
    pub fn check_stdin_used<'a>(&self, inputs: impl IntoIterator<Item = &'a PathBuf>) -> anyhow::Result<()> {
        let mut inputs = inputs.into_iter();
        if self.stdin_compression.is_some() && !inputs.any(|p| p.as_os_str() == "-") {
            bail!("--stdin-compression is for standard input, and no input is `-`");
        }
        Ok(())
    }

    pub fn format(&self) -> anyhow::Result<RecordFormat> {
        Ok(RecordFormat { delimiter: parse_delimiter("--delimiter", &self.delimiter)?, has_header: !self.no_header, multiline: self.multiline })
    }

    /// Scan settings for the key fields `keys` (each as `--key` takes it) given with `flag`,
    /// hashed by `key_rules`.
    pub fn scan(&self, keys: &[String], flag: &str, key_rules: KeyRules) -> anyhow::Result<ScanOptions> {
        self.scan_as(self.format()?, keys, flag, key_rules, self.null_key())
    }

    /// `--null-key`, as [`scan_as`](Self::scan_as) takes it: with its flag's name.
    pub fn null_key(&self) -> Option<(&str, &str)> {
        self.null_key.as_deref().map(|text| ("--null-key", text))
    }

    /// [`scan`](Self::scan) of inputs in `format` with the NULL text `null_key` (the flag that
    /// gave it, and the text), where one side of a job has its own.
    pub fn scan_as(&self, format: RecordFormat, keys: &[String], flag: &str, key_rules: KeyRules, null_key: Option<(&str, &str)>) -> anyhow::Result<ScanOptions> {
        if self.split_size == 0 {
            bail!("invalid --split-size: must be at least 1 byte");
        }
        if self.max_record_bytes == 0 {
            bail!("invalid --max-record-bytes: must be at least 1 byte");
        }
        let key = Key::parse(keys, format.has_header).with_context(|| format!("invalid {flag}"))?;
        let null_key = null_key.map(|(flag, text)| null_text(flag, text, format.delimiter)).transpose()?;
        if key.is_composite() && key_rules.key_type != KeyType::Bytes {
            bail!("invalid {flag}: --key-type {} takes a key of one field, not {}", key_rules.key_type, keys.join(","));
        }
        Ok(ScanOptions {
            format,
            key,
            split_size: self.split_size,
            max_record: usize::try_from(self.max_record_bytes).context("invalid --max-record-bytes: more than this machine addresses")?,
            strict: self.strict,
            key_rules,
            stdin_compression: self.stdin_compression,
            null_key,
            keep_null_records: false,
        })
    }
}

/// Writes a job's statistics as JSON to `path`, where `--stats-json` gave one.
pub fn write_stats_json(path: Option<&std::path::Path>, stats: &impl serde::Serialize) -> anyhow::Result<()> {
    if let Some(path) = path {
        let json = serde_json::to_vec_pretty(stats)?;
        std::fs::write(path, json).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// A field delimiter given to `flag`: one byte, `tab`, or a byte written as an escape: `\t`,
/// octal `\001` (as Hive's DDL writes its default, Ctrl-A) or hex `\x01`.
pub fn parse_delimiter(flag: &str, text: &str) -> anyhow::Result<u8> {
    let byte = match text {
        "\\t" | "tab" => Some(b'\t'),
        _ if text.len() == 1 => Some(text.as_bytes()[0]),
        _ => escaped_byte(text),
    };
    match byte {
        Some(b) if b != b'"' && b != b'\n' && b != b'\r' => Ok(b),
        _ => bail!("invalid {flag} {text:?}: expected one byte such as , or ; or \\t or \\001 (not a quote or line end)"),
    }
}

/// The text of NULL given to `flag` for fields split at `delimiter`, as the scan compares it
/// with an unquoted field: one that holds the delimiter, a quote or a line end could never be
/// such a field, so it would find no NULL at all.
pub fn null_text(flag: &str, text: &str, delimiter: u8) -> anyhow::Result<Vec<u8>> {
    if let Some(&b) = text.as_bytes().iter().find(|&&b| b == delimiter || b == b'"' || b == b'\n' || b == b'\r') {
        bail!("invalid {flag} {text:?}: it holds {:?}, which no unquoted field holds (the delimiter, a quote or a line end)", b as char);
    }
    Ok(text.as_bytes().to_vec())
}

/// A byte written as `\NNN` (three octal digits) or `\xHH` (two hex digits).
fn escaped_byte(text: &str) -> Option<u8> {
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    if let Some(hex) = text.strip_prefix("\\x").filter(|h| digits(h, 2)) {
        return u8::from_str_radix(hex, 16).ok();
    }
    text.strip_prefix('\\').filter(|o| o.len() == 3 && o.bytes().all(|b| (b'0'..=b'7').contains(&b))).and_then(|o| u8::from_str_radix(o, 8).ok())
}

/// A filter file format, and with it a hashing scheme.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatArg {
    /// bloomflow's `.bloom` (Jenkins lookup3 or lookup2, any size).
    Native,
    /// Hadoop's `org.apache.hadoop.util.bloom.BloomFilter` Writable.
    Hadoop,
    /// Spark's `org.apache.spark.util.sketch.BloomFilter`.
    Spark,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashArg {
    /// Native: Jenkins lookup2, twice (bloomflow's first scheme).
    Lookup2,
    /// Native: Jenkins lookup3 `hashlittle2`, once (faster; the default).
    Lookup3,
    /// Hadoop: `JenkinsHash` (lookup3 `hashlittle`), the default with --format hadoop.
    Jenkins,
    /// Hadoop: `MurmurHash`.
    Murmur,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutArg {
    /// k positions anywhere in the array.
    Standard,
    /// k positions in one 64-byte cache line (native filters).
    Blocked,
}

/// The filter a command builds when the user does not say.
#[derive(Clone, Copy, Debug)]
pub struct FilterDefaults {
    pub native_hash: HashArg,
    pub layout: LayoutArg,
}

/// Both jobs default to the fastest native filter: lookup3 and the blocked layout (lookup2 and
/// the standard layout remain for compatibility).
pub const FAST_FILTER: FilterDefaults = FilterDefaults { native_hash: HashArg::Lookup3, layout: LayoutArg::Blocked };

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyTypeArg {
    /// The key's bytes.
    Bytes,
    /// A signed 64-bit decimal, hashed as Spark's putLong.
    Long,
    /// The bytes as Hadoop's Text serializes them (a vint length first), as a BloomMapFile hashes them.
    Text,
    /// A signed 64-bit decimal as Hadoop's LongWritable serializes it (8 big-endian bytes).
    LongWritable,
    /// A signed 32-bit decimal as Hadoop's IntWritable serializes it (4 big-endian bytes).
    IntWritable,
    /// The bytes as Hadoop's BytesWritable serializes them (a big-endian int length first).
    BytesWritable,
}

impl From<KeyTypeArg> for KeyType {
    fn from(arg: KeyTypeArg) -> KeyType {
        match arg {
            KeyTypeArg::Bytes => KeyType::Bytes,
            KeyTypeArg::Long => KeyType::Long,
            KeyTypeArg::Text => KeyType::Text,
            KeyTypeArg::LongWritable => KeyType::LongWritable,
            KeyTypeArg::IntWritable => KeyType::IntWritable,
            KeyTypeArg::BytesWritable => KeyType::BytesWritable,
        }
    }
}

/// How the filter is sized, and in which format and scheme.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Filter")]
pub struct SizingArgs {
    /// Number of distinct keys expected (without it, an upper bound is estimated from the inputs).
    #[arg(long, value_name = "N", conflicts_with_all = ["bits", "hashes"], allow_negative_numbers = true)]
    pub expected_items: Option<u64>,
    /// Target false-positive rate, strictly between 0 and 1.
    #[arg(long, default_value_t = 0.01, value_name = "P", allow_negative_numbers = true)]
    pub fpp: f64,
    /// Explicit number of bits m (with --hashes).
    #[arg(long, value_name = "M", requires = "hashes", allow_negative_numbers = true)]
    pub bits: Option<u64>,
    /// Explicit number of hash functions k (with --bits): 1 to 32 for native filters.
    #[arg(long, value_name = "K", requires = "bits", allow_negative_numbers = true)]
    pub hashes: Option<u32>,
    /// Hash seed (native and Spark V2); filters built with different seeds cannot be merged.
    #[arg(long, default_value_t = 0, value_name = "S", allow_negative_numbers = true)]
    pub seed: i64,
    /// File format of the filter, which also decides its hashing scheme.
    #[arg(long, value_enum, default_value_t = FormatArg::Native)]
    pub format: FormatArg,
    /// Hash function: lookup2 or lookup3 for native filters, jenkins or murmur for Hadoop's.
    #[arg(long, value_enum)]
    pub hash: Option<HashArg>,
    /// Where a key's k bits go (native filters; default blocked).
    #[arg(long, value_enum)]
    pub layout: Option<LayoutArg>,
    /// Spark filter version (with --format spark): 2 is Spark 4.1+'s default, 1 earlier Sparks'.
    #[arg(long, value_name = "1|2", value_parser = clap::value_parser!(u8).range(1..=2))]
    pub spark_version: Option<u8>,
    /// How keys are hashed (long: with --format spark, as putLong; text, long-writable,
    /// int-writable, bytes-writable: with --format hadoop, as the Writable serializes them).
    #[arg(long, value_enum, default_value_t = KeyTypeArg::Bytes)]
    pub key_type: KeyTypeArg,
    /// Copies of the filter the build holds: one per worker, merged at the end (fastest for a
    /// filter that fits the cache), or one per process that its workers fill together (atomic
    /// ORs, or compare-and-swaps of counters: the memory of one copy, whatever -w). auto: per
    /// process for a filter of 1 GiB or more, or where a copy per worker would not fit in memory.
    /// The filter is the same.
    #[arg(long, value_enum, default_value_t = FilterPerArg::Auto)]
    pub filter_per: FilterPerArg,
}

/// Copies of the filter a build holds (see `--filter-per`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterPerArg {
    /// Per process for a filter of 1 GiB or more, or where a copy per worker would not fit.
    Auto,
    /// One partial filter per worker, OR-merged.
    Worker,
    /// One filter per process, filled by all its workers.
    Process,
}

impl From<FilterPerArg> for FilterPer {
    fn from(arg: FilterPerArg) -> FilterPer {
        match arg {
            FilterPerArg::Auto => FilterPer::Auto,
            FilterPerArg::Worker => FilterPer::Worker,
            FilterPerArg::Process => FilterPer::Process,
        }
    }
}

impl SizingArgs {
    pub fn sizing(&self) -> anyhow::Result<Sizing> {
        params::validate_fpp(self.fpp).context("invalid --fpp")?;
        Ok(match (self.expected_items, self.bits, self.hashes) {
            (Some(items), _, _) => {
                params::validate_items(items).context("invalid --expected-items")?;
                Sizing::Expected { items, fpp: self.fpp }
            }
            (None, Some(bits), Some(hashes)) => Sizing::Explicit { bits, hashes },
            _ => Sizing::Estimate { fpp: self.fpp },
        })
    }

    /// The hashing scheme the format and its options name.
    pub fn scheme(&self, defaults: FilterDefaults) -> anyhow::Result<Scheme> {
        if self.spark_version.is_some() && self.format != FormatArg::Spark {
            bail!("--spark-version is for --format spark");
        }
        if self.key_type == KeyTypeArg::Long && self.format != FormatArg::Spark {
            bail!("--key-type long is for --format spark (Spark's putLong)");
        }
        if KeyType::from(self.key_type).is_writable() && self.format != FormatArg::Hadoop {
            bail!("--key-type {} is for --format hadoop (keys as a Hadoop Writable serializes them)", KeyType::from(self.key_type));
        }
        Ok(match (self.format, self.hash) {
            (FormatArg::Native, None) => native_scheme(defaults.native_hash),
            (FormatArg::Native, Some(h @ (HashArg::Lookup2 | HashArg::Lookup3))) => native_scheme(h),
            (FormatArg::Hadoop, None | Some(HashArg::Jenkins)) => Scheme::Hadoop(HadoopHash::Jenkins),
            (FormatArg::Hadoop, Some(HashArg::Murmur)) => Scheme::Hadoop(HadoopHash::Murmur),
            (FormatArg::Spark, None) if self.spark_version == Some(1) => Scheme::SparkV1,
            (FormatArg::Spark, None) => Scheme::SparkV2,
            (format, Some(hash)) => bail!(
                "--hash {} is not a hash of --format {} (native: lookup2, lookup3; hadoop: jenkins, murmur; spark has its own)",
                hash.to_possible_value().expect("no skipped values").get_name(),
                format.to_possible_value().expect("no skipped values").get_name()
            ),
        })
    }

    /// The layout: the command's default for native filters, always standard for the others.
    pub fn layout(&self, scheme: Scheme, defaults: FilterDefaults) -> anyhow::Result<Layout> {
        match (self.layout, scheme.is_native()) {
            (Some(LayoutArg::Blocked), false) => bail!("--layout blocked is for native filters, not {scheme}"),
            (Some(LayoutArg::Blocked), true) => Ok(Layout::Blocked),
            (Some(LayoutArg::Standard), _) | (None, false) => Ok(Layout::Standard),
            (None, true) => Ok(match defaults.layout {
                LayoutArg::Standard => Layout::Standard,
                LayoutArg::Blocked => Layout::Blocked,
            }),
        }
    }

    /// The seed as the filter stores it: Spark's is a Java int, so negative seeds are accepted.
    pub fn seed(&self) -> anyhow::Result<u32> {
        if self.seed < i32::MIN as i64 || self.seed > u32::MAX as i64 {
            bail!("invalid --seed {}: must fit in 32 bits", self.seed);
        }
        Ok(self.seed as u32)
    }

    /// The scheme and layout the flags name, given the command's defaults.
    pub fn shape(&self, defaults: FilterDefaults) -> anyhow::Result<(Scheme, Layout)> {
        let scheme = self.scheme(defaults)?;
        Ok((scheme, self.layout(scheme, defaults)?))
    }

    /// The key rules of a filter of `scheme`.
    pub fn key_rules(&self, scheme: Scheme) -> KeyRules {
        KeyRules { key_type: self.key_type.into(), reject_empty: scheme.refuses_empty_keys() }
    }
}

fn native_scheme(hash: HashArg) -> Scheme {
    match hash {
        HashArg::Lookup3 => Scheme::NativeLookup3,
        _ => Scheme::Native,
    }
}
