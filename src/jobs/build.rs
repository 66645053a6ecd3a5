//! The build job: every worker of every process reads its own splits into a partial filter (or,
//! with `--filter-per process`, into one filter its process's workers share), the partials are
//! merged by the all-reduce (OR-merged; a counting filter's counters added), and worker 0 writes
//! the global filter.

use super::{every_key, global_filter, global_shared_filter, input_reports, join_workers, KeepKeys, Partial};
use crate::shared_filter::{FilterPer, SharedFilter};
use crate::allreduce::{Gather, LocalMerge};
use crate::cluster::{Agreement, ClusterConfig};
use crate::error::{Error, Result};
use crate::counting::CountingBloomFilter;
use crate::filter::BloomFilter;
use crate::format::{self, StoredFilter};
use crate::params;
use crate::records::KeyForm;
use crate::report::{mb_per_sec, Progress, Timeline, WorkerReport};
use crate::scan::{ScanOptions, ScanStats, Source};
use crate::hashing::Scheme;
use crate::spec::{FilterSpec, Layout};
use crate::compressed::{expansion, CompressedSplitReader, Compression, Expansion};
use crate::splits::{self, Input, Split, SplitReader};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Instant;

/// How the filter is sized.
#[derive(Clone, Debug, PartialEq)]
pub enum Sizing {
    /// n expected items at false-positive rate p.
    Expected { items: u64, fpp: f64 },
    /// Explicit m bits and k hashes.
    Explicit { bits: u64, hashes: u32 },
    /// n estimated from the inputs' sizes and a sample of their record lengths, at rate p.
    Estimate { fpp: f64 },
}

/// Everything the build job needs, validated by the CLI.
#[derive(Clone, Debug)]
pub struct BuildConfig {
    pub inputs: Vec<PathBuf>,
    pub scan: ScanOptions,
    pub sizing: Sizing,
    /// The hashing scheme, which also decides the output's file format.
    pub scheme: Scheme,
    pub layout: Layout,
    pub seed: u32,
    /// Build a counting filter (4-bit counters; native or Hadoop format), from which keys can be
    /// removed, instead of a plain one.
    pub counting: bool,
    /// Where worker 0 writes the filter; `None` builds and reports only.
    pub output: Option<PathBuf>,
    /// One copy of the filter per worker, or one per process (see [`FilterPer`]).
    pub filter_per: FilterPer,
    pub cluster: ClusterConfig,
    pub progress: bool,
}

/// The filter's identity and what it was sized for, decided identically on every process.
#[derive(Clone, Debug)]
pub struct SizedSpec {
    pub spec: FilterSpec,
    pub expected_items: u64,
    pub target_fpp: f64,
    /// How the size was chosen, in words, for the summary.
    pub note: String,
    /// Whether the expected items were estimated from the inputs' size (see `estimate_items`).
    pub estimated: bool,
}

impl SizedSpec {
    /// Where the filter was sized for keys estimated from the inputs' size and holds far fewer
    /// distinct keys (under an eighth), a warning naming the `--expected-items` that would size
    /// it for them. Its fill says how many it holds: n ≈ −(m/k)·ln(1 − fill). A build side
    /// whose 20M rows repeat 1M distinct keys got a filter for the 27M records it estimated:
    /// 32 MiB where 1.2 MB would do. No warning for a filter of a page (4 KiB) or less, where
    /// nothing worth saying is saved (a header line and no records once suggested 64 B instead
    /// of 64 B). `counting`: the filter's positions are 4-bit counters (`bits_set` counts those
    /// above zero).
    pub fn oversized_warning(&self, bits_set: u64, counting: bool) -> Option<String> {
        let (keys, suggested) = self.distinct_keys(bits_set)?;
        if keys.saturating_mul(8) >= self.expected_items {
            return None;
        }
        let bytes = |bits: u64| bits / if counting { 2 } else { 8 };
        if bytes(self.spec.bits) <= 4096 {
            return None;
        }
        let needed = FilterSpec::sized_for(self.spec.scheme, self.spec.layout, suggested, self.target_fpp, self.spec.seed).ok()?;
        Some(format!(
            "the filter was sized for {} keys estimated from the input's size, but its fill shows about {keys} distinct keys \
             (the input repeats its keys): --expected-items {suggested} would size it at {} instead of {}",
            self.expected_items,
            crate::limits::human_bytes(bytes(needed.bits)),
            crate::limits::human_bytes(bytes(self.spec.bits))
        ))
    }
}

impl SizedSpec {
    /// Where the filter was sized from the inputs' size: the distinct keys its fill shows it
    /// holds, and the expected items to size a filter for them (see [`Self::keys_of_fill`]).
    fn distinct_keys(&self, bits_set: u64) -> Option<(u64, u64)> {
        self.estimated.then(|| self.keys_of_fill(bits_set)).flatten()
    }

    /// The distinct keys the filter's fill shows it holds, n ≈ −(m/k)·ln(1 − fill), and the
    /// expected items to size a filter for them: a tenth more, in two significant digits (the
    /// fill's figure is an estimate). None for a full filter.
    fn keys_of_fill(&self, bits_set: u64) -> Option<(u64, u64)> {
        let (m, k) = (self.spec.bits as f64, self.spec.hashes as f64);
        let fill = bits_set as f64 / m;
        if !(0.0..1.0).contains(&fill) {
            return None;
        }
        let keys = (-(m / k) * (1.0 - fill).ln()).ceil().max(1.0) as u64;
        Some((keys, round_up_to_two_digits(keys + keys.div_ceil(10))))
    }

    /// Where the filter was sized for a false-positive rate (estimated keys or
    /// `--expected-items`) and holds so many more distinct keys that its rate, estimated from
    /// its fill (`estimated_fpp`), is over `UNDERSIZED` (1.5) times the target: a warning naming
    /// the `--expected-items` that would meet it. Ten percent more keys than a filter was sized
    /// for already make its rate about 1.5 times the target (with the usual k of 7, the rate
    /// grows as the keys to the power k·ln 2). A build of a bzip2 file whose expansion was
    /// sampled low got a filter for 1.47M keys and 2M of them, a rate of 2.6% for a target of
    /// 1%, and said nothing.
    pub fn undersized_warning(&self, bits_set: u64, estimated_fpp: f64) -> Option<String> {
        if self.target_fpp <= 0.0 || estimated_fpp <= self.target_fpp * UNDERSIZED {
            return None;
        }
        let (keys, suggested) = self.keys_of_fill(bits_set)?;
        let how = if self.estimated { " estimated from the input's size" } else { "" };
        Some(format!(
            "the filter was sized for {} keys{how}, but its fill shows about {keys} distinct keys: its estimated false-positive rate is {}, \
             above the target {}: --expected-items {suggested} would meet it",
            self.expected_items,
            three_digits(estimated_fpp),
            params::Rate(self.target_fpp)
        ))
    }

    /// The global filter folded (see [`BloomFilter::folded`]) by the largest factor of its
    /// size (its bits, or blocks) that still holds its distinct keys at the target
    /// false-positive rate, where it was sized from the inputs' size (which counts every copy
    /// of a key that repeats) and holds few enough keys for a fold: byte for byte the filter of
    /// that size and the same hashes (`--bits`, `--hashes`), in the same one pass over the
    /// input. (The estimate's size is made to have many factors: see `foldable`.) None where
    /// it cannot be folded: sized otherwise, or one whose keys need more than half its size.
    pub fn fold<F: Foldable>(&self, filter: &F) -> Option<F> {
        // A fold that misses the rate is made for nothing: a few tries, then none.
        const TRIES: usize = 8;
        let (_, wanted) = self.distinct_keys(filter.positions_set())?;
        let needed = FilterSpec::sized_for(self.spec.scheme, self.spec.layout, wanted, self.target_fpp, self.spec.seed).ok()?.bits;
        let units = self.spec.bits / crate::filter::fold_unit(self.spec.layout);
        let largest = self.spec.bits / needed.max(1);
        divisors(units)
            .into_iter()
            .rev()
            .filter(|&factor| (2..=largest).contains(&factor))
            // (Spark's whole words or a Hadoop int may refuse a size: no try spent on it.)
            .filter_map(|factor| filter.folded(factor))
            .take(TRIES)
            // Folded, its own estimate must meet the rate still (the hashes stay as they were).
            .find(|folded| folded.estimated_fpp() <= self.target_fpp)
            .map(|folded| folded.sized_for(wanted, self.target_fpp))
    }
}

/// A filter that folds to a whole fraction of its size (see [`SizedSpec::fold`]): a plain
/// filter's bits, or a counting filter's counters, each the filter of that size.
pub trait Foldable: Sized {
    /// Its positions set: bits set, or counters above zero.
    fn positions_set(&self) -> u64;
    /// Folded by `factor` ([`BloomFilter::folded`], [`CountingBloomFilter::folded`]).
    fn folded(&self, factor: u64) -> Option<Self>;
    fn estimated_fpp(&self) -> f64;
    /// Records the (n, p) it was sized for.
    fn sized_for(self, n: u64, p: f64) -> Self;
}

impl Foldable for BloomFilter {
    fn positions_set(&self) -> u64 {
        self.bits_set()
    }
    fn folded(&self, factor: u64) -> Option<Self> {
        BloomFilter::folded(self, factor)
    }
    fn estimated_fpp(&self) -> f64 {
        BloomFilter::estimated_fpp(self)
    }
    fn sized_for(self, n: u64, p: f64) -> Self {
        BloomFilter::sized_for(self, n, p)
    }
}

impl Foldable for CountingBloomFilter {
    fn positions_set(&self) -> u64 {
        self.counters_set()
    }
    fn folded(&self, factor: u64) -> Option<Self> {
        CountingBloomFilter::folded(self, factor)
    }
    fn estimated_fpp(&self) -> f64 {
        CountingBloomFilter::estimated_fpp(self)
    }
    fn sized_for(self, n: u64, p: f64) -> Self {
        CountingBloomFilter::sized_for(self, n, p)
    }
}

/// Folds the global filter, of the job's identity `sized.spec`, where [`SizedSpec::fold`] does:
/// the bits it had then.
fn fold_in_place<F: Foldable>(filter: &mut F, sized: &SizedSpec) -> Option<u64> {
    *filter = sized.fold(filter)?;
    Some(sized.spec.bits)
}

/// `spec` rounded up to a size that folds by many factors (see [`SizedSpec::fold`]): its bits,
/// or in the blocked layout its blocks, a multiple of a step of at most a 64th of them, for 1.6%
/// more bits at most. The step is a least common multiple of 1..n (2520, say) times a power of
/// two, whose divisors include every number up to n: the probe's 20M amounts
/// (about 1M distinct) had a 31 MiB filter folded by 16, a power of two, to 2.0 MiB, where
/// they need 1.3. (A Hadoop filter's size must stay within an int: one that rounding would
/// pass is left as it is.)
fn foldable(spec: FilterSpec) -> Result<FilterSpec> {
    let unit = crate::filter::fold_unit(spec.layout);
    let units = spec.bits / unit;
    let step = fold_step(units / 64);
    Ok(FilterSpec::with_size(spec.scheme, spec.layout, units.div_ceil(step) * step * unit, spec.hashes, spec.seed).unwrap_or(spec))
}

/// The divisors of `n`, in increasing order (by trial up to √n: a million divisions for a
/// filter of 2^40 bits).
fn divisors(n: u64) -> Vec<u64> {
    let (mut low, mut high) = (Vec::new(), Vec::new());
    for i in (1..).take_while(|&i| i * i <= n) {
        if n.is_multiple_of(i) {
            low.push(i);
            if i * i != n {
                high.push(n / i);
            }
        }
    }
    low.extend(high.into_iter().rev());
    low
}

/// The largest lcm(1..n) that is at most `limit`, doubled while it stays so (1 where none is).
fn fold_step(limit: u64) -> u64 {
    const LCMS: [u64; 11] = [1, 2, 6, 12, 60, 420, 840, 2_520, 27_720, 360_360, 720_720];
    let base = LCMS.iter().copied().rev().find(|&base| base <= limit).unwrap_or(1);
    let doublings = (limit / base).checked_ilog2().unwrap_or(0);
    base << doublings
}

/// The job's statistics, printed and written with `--stats-json`.
#[derive(Clone, Debug, Serialize)]
pub struct BuildStats {
    pub output: Option<String>,
    pub processes: usize,
    pub workers_per_process: usize,
    /// A counting filter (4-bit counters) was built: `bits_set` and the rates are of its
    /// counters above zero.
    pub counting: bool,
    /// `worker`: a partial filter per worker, merged; `process`: one filter per process, filled
    /// by its workers together (see [`FilterPer`]).
    pub filter_per: &'static str,
    pub records: u64,
    pub bytes: u64,
    pub malformed: u64,
    pub malformed_examples: Vec<String>,
    /// Records whose key is NULL (`--null-key`): skipped, as Spark's filter aggregate skips them.
    pub null_keys: u64,
    pub keys_inserted: u64,
    pub elapsed_secs: f64,
    pub mb_per_sec: f64,
    pub bits: u64,
    pub hashes: u32,
    pub seed: u32,
    pub bits_set: u64,
    pub fill_ratio: f64,
    pub estimated_fpp: f64,
    pub target_fpp: f64,
    pub expected_items: u64,
    pub sizing: String,
    /// The bits the filter had before it was folded to fit its distinct keys (see
    /// [`SizedSpec::fold`]), where it was.
    pub folded_from_bits: Option<u64>,
    /// When worker 0 had its workers running, the filter merged and the file written.
    pub timeline: Timeline,
    pub per_worker: Vec<WorkerReport>,
    /// Things about the job its user should know, such as an input given twice.
    pub warnings: Vec<String>,
}

/// Sizes the filter from the user's choice; an estimate reads a sample of the inputs.
pub fn size_filter(sizing: &Sizing, source: &Source, scheme: Scheme, layout: Layout, seed: u32) -> Result<SizedSpec> {
    match *sizing {
        Sizing::Expected { items, fpp } => Ok(SizedSpec {
            spec: FilterSpec::sized_for(scheme, layout, items, fpp, seed)?,
            expected_items: items,
            target_fpp: fpp,
            note: format!("sized for {items} expected items at false-positive rate {}", params::Rate(fpp)),
            estimated: false,
        }),
        Sizing::Explicit { bits, hashes } => {
            let spec = FilterSpec::with_size(scheme, layout, bits, hashes, seed)?;
            let rounded = match spec.bits {
                m if m == bits => String::new(),
                m => format!(" (rounded up to {m}, a whole number of {})", if layout == Layout::Blocked { "512-bit blocks" } else { "64-bit words" }),
            };
            Ok(SizedSpec { spec, expected_items: 0, target_fpp: 0.0, note: format!("explicit size: {bits} bits{rounded}, {hashes} hashes"), estimated: false })
        }
        Sizing::Estimate { fpp } => {
            let (items, note) = estimate_items(source)?;
            Ok(SizedSpec {
                spec: foldable(FilterSpec::sized_for(scheme, layout, items, fpp, seed)?)?,
                expected_items: items,
                target_fpp: fpp,
                note: format!("{note}; sized for it at false-positive rate {} (give --expected-items to size exactly)", params::Rate(fpp)),
                estimated: true,
            })
        }
    }
}

/// A rate of (0, 1] in three significant digits: 0.488, 0.0260, 0.000300.
fn three_digits(rate: f64) -> String {
    let digits = (2 - rate.log10().floor() as i32).clamp(0, 20) as usize;
    format!("{rate:.digits$}")
}

/// `n` rounded up to its two most significant decimal digits (1,094,624 → 1,100,000).
fn round_up_to_two_digits(n: u64) -> u64 {
    let unit = 10u64.pow((n.checked_ilog10().unwrap_or(0)).saturating_sub(1));
    n.div_ceil(unit).saturating_mul(unit)
}

/// How many times its target a filter's estimated false-positive rate may be before the job
/// warns that it was sized for too few keys ([`SizedSpec::undersized_warning`]).
const UNDERSIZED: f64 = 1.5;

/// Bytes read by each of the sample's windows.
const SAMPLE_BYTES: u64 = 1 << 20;
/// Windows of the sample over the plain inputs; and how many compressed files are sampled from
/// their start, spread over their list.
const SAMPLE_FILES: usize = 16;
/// Margin over the sampled mean, since other records may be shorter than the sample's.
const ESTIMATE_MARGIN: f64 = 1.25;

/// An upper estimate of the number of keys: the input bytes over the mean record length of a
/// sample, plus a margin. The plain files are sampled in windows spread evenly over all their
/// bytes ([`sample_windows`]), since a corpus whose first files or first megabytes hold records
/// of another length than the rest (older files, a sorted column) would size the filter for the
/// wrong number of keys. Compressed files, which can be read only from their start, are sampled
/// at the start of a few spread over their list ([`spread_evenly`]), and the first of each codec
/// among them; each counts as its size times its codec's expansion, pooled over the files of the
/// codec sampled ([`Expansion`]): measured on the first file alone, a corpus whose first file
/// compressed worse than the rest would be sized for a fraction of its keys. Every process
/// computes the same figure from the same files.
fn estimate_items(source: &Source) -> Result<(u64, String)> {
    if source.inputs.contains(&Input::Stdin) {
        return Err(Error::invalid(
            "expected items",
            "the size of standard input is unknown: give --expected-items N (or --bits and --hashes)",
        ));
    }
    let compression = |i: &Input| match i {
        Input::File { compression, .. } => *compression,
        Input::Stdin => Compression::None,
    };
    let (plain_records, plain_bytes) = sample_plain(source)?;
    let (records, bytes, expansions) = sample_compressed(source)?;
    let (records, bytes) = (records + plain_records, bytes + plain_bytes);
    let mean = if records == 0 { 1.0 } else { bytes as f64 / records as f64 };
    let expansion_of = |codec: Compression| expansions.iter().find(|x| x.codec == codec).map_or(1.0, |x| x.pooled.ratio());
    let total: f64 = source.inputs.iter().map(|i| i.size().unwrap_or(0) as f64 * expansion_of(compression(i))).sum();
    let items = ((total / mean * ESTIMATE_MARGIN).ceil() as u64).max(1);
    let notes: Vec<String> = expansions.iter().map(|x| format!("{} files at {:.1}x their size, measured on {} of them", x.codec.name(), x.pooled.ratio(), x.files)).collect();
    let notes = if notes.is_empty() { String::new() } else { format!(" ({})", notes.join("; ")) };
    Ok((
        items,
        format!("estimated at most {items} keys from {total:.0} input bytes{notes} at a sampled mean of {mean:.1} bytes per record (+25%)"),
    ))
}

/// Records and their bytes in windows spread over the plain inputs ([`sample_windows`]; under
/// `--multiline`, moved to records' starts by [`at_record_starts`]).
fn sample_plain(source: &Source) -> Result<(u64, u64)> {
    let plain: Vec<(usize, u64)> = source.inputs.iter().enumerate().filter_map(|(i, input)| match input {
        Input::File { len, compression: Compression::None, .. } => Some((i, *len)),
        _ => None,
    }).collect();
    let windows = sample_windows(&plain, SAMPLE_FILES as u64, SAMPLE_BYTES);
    let format = &source.options.format;
    let windows = match format.multiline {
        true => at_record_starts(windows, source, format.delimiter)?,
        false => windows.into_iter().map(|window| (window, Reading::Lines)).collect(),
    };
    let (mut records, mut bytes) = (0u64, 0u64);
    for (window, reading) in windows {
        let Input::File { path, .. } = &source.inputs[window.input] else { continue };
        let ends = source.line_ends(window.input);
        let mut reader = SplitReader::open_with(path, &window, source.options.max_record, Vec::new(), ends)?;
        let (r, b) = sample_records(&mut reader, format.has_header && window.start == 0, reading)?;
        records += r;
        bytes += b;
    }
    Ok((records, bytes))
}

/// Records and their bytes at the start of compressed inputs spread over their list
/// ([`spread_evenly`]) and the first of each codec; and each codec's expansion pooled over the
/// files of it sampled, with their number.
fn sample_compressed(source: &Source) -> Result<(u64, u64, Vec<CodecExpansion>)> {
    let codec_of = |index: usize| match &source.inputs[index] {
        Input::File { compression, .. } => *compression,
        Input::Stdin => Compression::None,
    };
    let all: Vec<usize> = (0..source.inputs.len()).filter(|&i| codec_of(i) != Compression::None).collect();
    let mut sampled = spread_evenly(&all, SAMPLE_FILES);
    for codec in Compression::CODECS {
        if !sampled.iter().any(|&i| codec_of(i) == codec) {
            sampled.extend(all.iter().copied().find(|&i| codec_of(i) == codec));
        }
    }
    let format = &source.options.format;
    let reading = match format.multiline {
        true => Reading::Records(format.delimiter),
        false => Reading::Lines,
    };
    let (mut records, mut bytes) = (0u64, 0u64);
    let mut expansions: Vec<CodecExpansion> = Vec::new();
    for index in sampled {
        let Input::File { path, compression: codec, .. } = &source.inputs[index] else { continue };
        let this = expansion(path, *codec, SAMPLE_BYTES)?;
        match expansions.iter_mut().find(|x| x.codec == *codec) {
            Some(x) => (x.pooled, x.files) = (x.pooled.pooled_with(this), x.files + 1),
            None => expansions.push(CodecExpansion { codec: *codec, pooled: this, files: 1 }),
        }
        let reader = CompressedSplitReader::open_compressed(path, *codec, SAMPLE_BYTES, source.options.max_record, Vec::new())?.0;
        let (r, b) = sample_records(&mut reader.with_line_ends(source.line_ends(index)), format.has_header, reading)?;
        records += r;
        bytes += b;
    }
    Ok((records, bytes, expansions))
}

/// A codec's expansion, pooled over the `files` of it sampled.
struct CodecExpansion {
    codec: Compression,
    pooled: Expansion,
    files: usize,
}

/// At most `n` of `items`, spread evenly over them (the first among them); all of them if
/// there are no more than `n`.
fn spread_evenly(items: &[usize], n: usize) -> Vec<usize> {
    match items.len() <= n {
        true => items.to_vec(),
        false => (0..n).map(|i| items[i * items.len() / n]).collect(),
    }
}

/// The byte ranges sampled of the plain inputs `files` (each its index and length): `windows`
/// ranges of `window` bytes, their starts evenly spaced over the files' bytes taken end to end
/// (the first at the first file's start), each cut at its file's end; or every file whole when
/// they hold no more than the windows would read. A window read as a split counts the records
/// that start in it, read whole.
fn sample_windows(files: &[(usize, u64)], windows: u64, window: u64) -> Vec<Split> {
    let total: u64 = files.iter().map(|&(_, len)| len).sum();
    if total <= windows.saturating_mul(window) {
        return files.iter().filter(|&&(_, len)| len > 0).map(|&(input, len)| Split { index: 0, input, start: 0, end: len }).collect();
    }
    let mut spans = Vec::with_capacity(windows as usize);
    // The files' first bytes in the end-to-end numbering, and the file each window starts in.
    let (mut file, mut file_start) = (0, 0u64);
    for w in 0..windows {
        let at = (total as u128 * w as u128 / windows as u128) as u64;
        while at >= file_start + files[file].1 {
            file_start += files[file].1;
            file += 1;
        }
        let (input, len) = files[file];
        let start = at - file_start;
        spans.push(Split { index: 0, input, start, end: (start + window).min(len) });
    }
    spans
}

/// Under `--multiline`, where a window inside a file could start in a quoted field, the sample's
/// windows moved to records' starts as the job's splits are: each to the first certain one past
/// its start, within reach. A window with none (a text whose quotes read as well from inside a
/// field as from outside) is read from its first line start both ways ([`Reading::Unknown`]).
/// Sampled from each file's start only, as it was until the forty-third round, a file whose
/// first megabytes held longer records than the rest was sized for a fraction of its keys.
fn at_record_starts(windows: Vec<Split>, source: &Source, delimiter: u8) -> Result<Vec<(Split, Reading)>> {
    let mut moved = Vec::with_capacity(windows.len());
    for window in windows {
        let Input::File { path, len, .. } = &source.inputs[window.input] else { continue };
        let start = match window.start {
            0 => Some(0),
            at => splits::multiline_record_start(path, at, source.line_ends(window.input), delimiter, source.options.max_record)?,
        };
        match start {
            Some(start) if start < *len => {
                let end = (start + (window.end - window.start)).min(*len);
                moved.push((Split { start, end, ..window }, Reading::Records(delimiter)))
            }
            Some(_) => {}
            None => moved.push((window, Reading::Unknown(delimiter))),
        }
    }
    Ok(moved)
}

/// How a sample's records are told apart.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Reading {
    /// A record a line.
    Lines,
    /// Under `--multiline` (its delimiter), from a record's start.
    Records(u8),
    /// Under `--multiline`, from a line start that may be inside a quoted field: of the two
    /// readings, from outside a field and from inside one, the one that finds shorter records,
    /// so that the estimate stays an upper one whichever is true.
    Unknown(u8),
}

/// Records and their bytes in a sample reader, the header not counted. Under `--multiline`,
/// records, not lines ([`Reading`]): a file of notes that hold line breaks would otherwise be
/// sized for its lines, several times its keys.
fn sample_records<R: std::io::Read>(reader: &mut SplitReader<R>, has_header: bool, reading: Reading) -> Result<(u64, u64)> {
    let (mut records, mut bytes, mut first) = (0u64, 0u64, has_header);
    let mut text = Vec::new();
    while let Some((_, rec)) = reader.next_record()? {
        if reading != Reading::Lines {
            text.extend_from_slice(rec);
            continue;
        }
        if std::mem::take(&mut first) {
            continue;
        }
        records += 1;
        bytes += rec.len() as u64;
    }
    Ok(match reading {
        Reading::Lines => (records, bytes),
        Reading::Records(delimiter) => records_of(&text, delimiter, has_header),
        Reading::Unknown(delimiter) => {
            let outside = records_of(&text, delimiter, false);
            // Read from inside a field, the text's first record runs on past that field's close.
            let inside = crate::records::quoted_field_end(&text, 0).map_or((0, 0), |closed| records_of(&text[closed..], delimiter, false));
            // The reading with more records a byte: a·d > c·b compares a/b with c/d.
            match inside.0 as u128 * outside.1 as u128 > outside.0 as u128 * inside.1 as u128 {
                true => inside,
                false => outside,
            }
        }
    })
}

/// Records and their bytes in `text`, which starts at a record's start, under `--multiline`
/// (`delimiter`); the header, if `has_header`, not counted. A record the sample cuts short
/// counts as one (of its bytes in the sample): the estimate stays an upper one.
fn records_of(text: &[u8], delimiter: u8, has_header: bool) -> (u64, u64) {
    let mut starts: Vec<usize> = std::iter::once(0).chain(crate::records::record_ends(text, delimiter)).collect();
    if starts.last() == Some(&text.len()) {
        starts.pop();
    }
    let header = (has_header as usize).min(starts.len());
    let from = starts.get(header).map_or(text.len(), |&start| start);
    ((starts.len() - header) as u64, (text.len() - from) as u64)
}

/// Checks before any work that the output's directory exists and can be written, so that a job
/// over terabytes does not fail at its last step.
pub fn check_writable(output: &Path) -> Result<()> {
    if output.is_dir() {
        return Err(Error::io(output, std::io::Error::other("is a directory; expected a file path for the filter")));
    }
    let dir = match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let probe = dir.join(format!(".bloomflow-write-check-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| Error::io(output, e))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// The plan of a filter built from `source`, as processes compare it: its inputs' plan and the
/// filter's identity and sizing.
pub(super) fn filter_plan(source: &Source, sized: &SizedSpec) -> String {
    format!("{source:?}\n{:?} {} {}", sized.spec, sized.expected_items, sized.target_fpp)
}

/// The filter the workers of this process share, where they share one (see [`FilterPer`]),
/// once the memory the job's copies need is known to be available.
pub(crate) fn shared_filter(per: FilterPer, counting: bool, sized: &SizedSpec, local_workers: usize) -> Result<Option<SharedFilter>> {
    if !filter_copies(per, counting, sized, local_workers)? {
        return Ok(None);
    }
    let (n, p) = (sized.expected_items, sized.target_fpp);
    Ok(Some(match counting {
        true => SharedFilter::new_counting(CountingBloomFilter::new_shared(sized.spec, local_workers).sized_for(n, p)),
        false => SharedFilter::new(BloomFilter::new_shared(sized.spec, local_workers).sized_for(n, p)),
    }))
}

/// The bytes of one copy of a filter of `bits` positions: a bit each, or a 4-bit counter each
/// for a counting filter.
fn filter_bytes(counting: bool, bits: u64) -> u64 {
    match counting {
        true => bits.div_ceil(2),
        false => bits.div_ceil(8),
    }
}

/// Whether the workers of a process of `local_workers` share one filter (see [`FilterPer`]),
/// with the memory this machine has free; an error if the copies would not fit in it.
fn filter_copies(per: FilterPer, counting: bool, sized: &SizedSpec, local_workers: usize) -> Result<bool> {
    let workers = local_workers as u64;
    let bytes = filter_bytes(counting, sized.spec.bits);
    let what = match counting {
        true => format!("the counting filter ({} bits, a 4-bit counter each", sized.spec.bits),
        false => format!("the filter ({} bits", sized.spec.bits),
    };
    let shares = per.shares(bytes, local_workers, crate::limits::available_memory());
    match shares {
        false => crate::limits::check_allocation(bytes.saturating_mul(workers), &format!("{what}, one partial per worker, {workers} worker(s))"))?,
        true => crate::limits::check_allocation(bytes, &format!("{what}, one per process, shared by its {workers} worker(s))"))?,
    }
    Ok(shares)
}

/// What a build would do, worked out without reading its records (but the size estimate's
/// sample): `build --plan`, for a job over terabytes whose filter's size and memory its user
/// wants to know before starting it.
#[derive(Clone, Debug, Serialize)]
pub struct BuildPlan {
    pub processes: usize,
    pub workers_per_process: usize,
    #[serde(flatten)]
    pub input: InputPlan,
    pub counting: bool,
    pub bits: u64,
    pub hashes: u32,
    pub seed: u32,
    pub expected_items: u64,
    pub target_fpp: f64,
    pub sizing: String,
    #[serde(flatten)]
    pub copies: FilterCopies,
    /// Things about the job its user should know, such as an input given twice.
    pub warnings: Vec<String>,
}

/// A job's inputs as its plan shows them (`build --plan`, `semijoin --plan`).
#[derive(Clone, Debug, Serialize)]
pub struct InputPlan {
    /// Input files, and how many of them are compressed.
    pub inputs: usize,
    pub compressed_inputs: usize,
    /// Whether standard input is read too (its size unknown).
    pub standard_input: bool,
    /// The input files' bytes (compressed files' as stored).
    pub bytes: u64,
    /// The splits the workers claim, and the largest file split's bytes.
    pub splits: usize,
    pub largest_split: u64,
}

impl InputPlan {
    pub(crate) fn of(source: &Source) -> Self {
        InputPlan {
            inputs: source.inputs.iter().filter(|i| **i != Input::Stdin).count(),
            standard_input: source.inputs.contains(&Input::Stdin),
            compressed_inputs: source.inputs.iter().filter(|i| matches!(i, Input::File { compression, .. } if *compression != Compression::None)).count(),
            bytes: source.total_bytes(),
            splits: source.splits.len(),
            largest_split: source.splits.iter().filter(|s| !s.is_stdin()).map(|s| s.end - s.start).max().unwrap_or(0),
        }
    }
}

/// The copies of a job's filter in a process, as its plan shows them.
#[derive(Clone, Debug, Serialize)]
pub struct FilterCopies {
    /// `worker` or `process`, as the job would choose on this machine (see [`FilterPer`]).
    pub filter_per: &'static str,
    /// One copy's bytes, and the bytes of this process's copies.
    pub filter_bytes: u64,
    pub process_filter_bytes: u64,
}

impl FilterCopies {
    /// The copies a build of `sized` would make in a process of `local_workers`, after
    /// [`shared_filter`]'s check that they fit in memory.
    pub(crate) fn planned(per: FilterPer, counting: bool, sized: &SizedSpec, local_workers: usize) -> Result<Self> {
        let shares = filter_copies(per, counting, sized, local_workers)?;
        let bytes = filter_bytes(counting, sized.spec.bits);
        Ok(match shares {
            true => FilterCopies { filter_per: "process", filter_bytes: bytes, process_filter_bytes: bytes },
            false => Self::per_worker(counting, sized, local_workers),
        })
    }

    /// A partial a worker, unchecked: the filter a job makes only if it must (the probe-side
    /// join's, past the limit), checked then.
    pub(crate) fn per_worker(counting: bool, sized: &SizedSpec, local_workers: usize) -> Self {
        let bytes = filter_bytes(counting, sized.spec.bits);
        FilterCopies { filter_per: "worker", filter_bytes: bytes, process_filter_bytes: bytes.saturating_mul(local_workers as u64) }
    }
}

/// The plan of the build `config` asks for ([`BuildPlan`]): what [`run`] decides before its
/// workers start, with the same checks and errors, and nothing built or written.
pub fn plan(config: &BuildConfig) -> Result<BuildPlan> {
    let (source, sized) = prepare(config)?;
    Ok(BuildPlan {
        processes: config.cluster.processes,
        workers_per_process: config.cluster.workers,
        input: InputPlan::of(&source),
        counting: config.counting,
        bits: sized.spec.bits,
        hashes: sized.spec.hashes,
        seed: sized.spec.seed,
        expected_items: sized.expected_items,
        target_fpp: sized.target_fpp,
        sizing: sized.note.clone(),
        copies: FilterCopies::planned(config.filter_per, config.counting, &sized, config.cluster.workers)?,
        warnings: crate::splits::repeated_input(&source.inputs).into_iter().collect(),
    })
}

/// The inputs planned into splits and the filter sized, after the checks that fail a job
/// before any work: the steps [`run`] and [`plan`] share.
fn prepare(config: &BuildConfig) -> Result<(Source, SizedSpec)> {
    let inputs = crate::splits::resolve_inputs(&config.inputs)?;
    if let Some(out) = &config.output {
        if config.cluster.process == 0 {
            check_writable(out)?;
        }
        crate::output::check_not_an_input(out, &inputs)?;
    }
    let source = Source::plan_inputs(inputs, config.scan.clone(), config.cluster.peers())?;
    let sized = size_filter(&config.sizing, &source, config.scheme, config.layout, config.seed)?;
    if config.counting {
        format::counting_supported(sized.spec.scheme)?;
    }
    Ok((source, sized))
}

/// What every process of the job must agree on: the plan of its inputs and its filter.
fn job_agreement(workers: usize, source: &Source, sized: &SizedSpec) -> Agreement {
    let plan = format!("build\n{}", filter_plan(source, sized));
    Agreement::new(workers, source.inputs.len() as u64, source.total_bytes(), &plan)
}

/// Runs the build job on this process. Returns the statistics on process 0, `None` elsewhere.
pub fn run(config: BuildConfig) -> Result<Option<BuildStats>> {
    let started = Instant::now();
    let (source, sized) = prepare(&config)?;
    let source = Arc::new(source);
    let repeated = crate::splits::repeated_input(&source.inputs);
    let shared = shared_filter(config.filter_per, config.counting, &sized, config.cluster.workers)?;
    let cluster = &config.cluster;
    let peers = cluster.peers();
    let my_workers = cluster.process * cluster.workers..(cluster.process + 1) * cluster.workers;
    let counter = Arc::new(AtomicU64::new(0));
    let progress = Progress::start(config.progress, "build", Arc::new(AtomicU64::new(source.bytes_of(my_workers, peers))), Arc::clone(&counter));
    let abort = Arc::new(AtomicBool::new(false));
    let output = config.output.clone();
    let job_sized = sized.clone();
    let key_form = KeyForm::of(&config.scan.key, &config.scan.key_rules);
    let counting = config.counting;
    let shares = shared.is_some();
    let shared = shared.map(Arc::new);

    let agreement = {
        let (source, sized) = (Arc::clone(&source), sized.clone());
        move || job_agreement(cluster.workers, &source, &sized)
    };
    // This process's workers merge their partials through their shared memory first.
    let local = Arc::new(LocalMerge::new(cluster.workers));
    let guards = crate::cluster::execute(cluster, agreement, move |worker| {
        let mut timeline = Timeline::default();
        timeline.mark("workers running", started);
        let (spec, n, p) = (job_sized.spec, job_sized.expected_items, job_sized.target_fpp);
        let (mut filter, report) = if let Some(shared) = &shared {
            let report = global_shared_filter(worker, &source, shared, every_key(shared), Gather::To(0), &abort, &counter, KeepKeys::No, &local);
            let filter = match worker.index() {
                // SAFETY: every worker of this process is past its last use of the filter
                // (`global_shared_filter` returns after it, behind a barrier).
                0 => unsafe { shared.take() }.expect("the filter is taken by worker 0 only"),
                _ => StoredFilter::Plain(<BloomFilter as Partial>::placeholder()),
            };
            (filter, report)
        } else if counting {
            let empty = |tick: &mut dyn FnMut()| CountingBloomFilter::new_partial(spec, tick).sized_for(n, p);
            let (filter, report) = global_filter(worker, &source, empty, Gather::To(0), &abort, &counter, KeepKeys::No, &local);
            (StoredFilter::Counting(filter), report)
        } else {
            let empty = |tick: &mut dyn FnMut()| BloomFilter::new_partial(spec, tick).sized_for(n, p);
            let (filter, report) = global_filter(worker, &source, empty, Gather::To(0), &abort, &counter, KeepKeys::No, &local);
            (StoredFilter::Plain(filter), report)
        };
        timeline.mark("filter merged", started);
        let reports = input_reports(worker, report, "input")?;
        if worker.index() != 0 {
            return Ok(None);
        }
        filter.set_items_inserted(reports.iter().map(|r| r.keys).sum());
        filter.set_key_form(Some(key_form));
        let folded_from = match &mut filter {
            StoredFilter::Plain(plain) => fold_in_place(plain, &job_sized),
            StoredFilter::Counting(counters) => fold_in_place(counters, &job_sized),
            StoredFilter::Dynamic(_) => None,
        };
        let (spec, expected_items) = match &filter {
            StoredFilter::Plain(plain) => (*plain.spec(), plain.expected_items()),
            StoredFilter::Counting(counters) => (*counters.spec(), counters.expected_items()),
            StoredFilter::Dynamic(_) => (job_sized.spec, job_sized.expected_items),
        };
        let filter = &filter;
        let stats = || match filter {
            StoredFilter::Plain(plain) => (plain.bits_set(), plain.estimated_fpp()),
            // The rates are those of its counters above zero: the plain filter's bits, counted
            // without making it (a 31 MB allocation for 124 MiB of counters took 90-570 ms).
            StoredFilter::Counting(counters) => (counters.counters_set(), counters.estimated_fpp()),
            StoredFilter::Dynamic(rows) => (rows.bits_set(), rows.estimated_fpp()),
        };
        let ((bits_set, estimated_fpp), written) = beside(stats, || match &output {
            Some(path) => format::write(path, filter),
            None => Ok(()),
        });
        written?;
        timeline.mark(if output.is_some() { "filter written" } else { "statistics made" }, started);
        Ok(Some((bits_set, estimated_fpp, reports, timeline, (spec, expected_items, folded_from))))
    })?;

    let joined = join_workers(guards);
    progress.finish();
    let Some((bits_set, estimated_fpp, per_worker, timeline, (spec, expected_items, folded_from))) = joined? else { return Ok(None) };
    let elapsed = started.elapsed().as_secs_f64();
    let mut scan = ScanStats::default();
    for r in &per_worker {
        scan.absorb(&r.scan);
    }
    // A folded filter fits its keys: no warning that it is too large, or too small.
    let oversized = folded_from.is_none().then(|| sized.oversized_warning(bits_set, config.counting)).flatten();
    let undersized = folded_from.is_none().then(|| sized.undersized_warning(bits_set, estimated_fpp)).flatten();
    let sizing = match folded_from {
        Some(from) => format!(
            "{}; folded from {from} to {} bits, which its fill showed its distinct keys (about {expected_items} with a tenth more) to need",
            sized.note, spec.bits
        ),
        None => sized.note.clone(),
    };
    Ok(Some(BuildStats {
        output: config.output.as_ref().map(|p| p.display().to_string()),
        processes: cluster.processes,
        workers_per_process: cluster.workers,
        counting: config.counting,
        filter_per: if shares { "process" } else { "worker" },
        records: scan.records,
        bytes: scan.bytes,
        malformed: scan.malformed,
        malformed_examples: scan.malformed_examples,
        null_keys: scan.null_keys,
        keys_inserted: per_worker.iter().map(|r| r.keys).sum(),
        elapsed_secs: elapsed,
        mb_per_sec: mb_per_sec(scan.bytes, elapsed),
        bits: spec.bits,
        hashes: spec.hashes,
        seed: spec.seed,
        bits_set,
        fill_ratio: bits_set as f64 / spec.bits as f64,
        estimated_fpp,
        target_fpp: sized.target_fpp,
        expected_items,
        sizing,
        folded_from_bits: folded_from,
        timeline,
        per_worker,
        warnings: repeated.into_iter().chain(oversized).chain(undersized).collect(),
    }))
}

/// Runs `side` on a thread of its own while `main` runs here, and returns both results. The
/// build's serial end uses it to count the filter's bits (two passes over it, 3 ms for a 24 MB
/// filter) while the filter is written: every other worker is idle by then, so a core is free.
/// Where no thread can be started, `side` runs here after `main`.
fn beside<A: Send, B>(side: impl FnOnce() -> A + Send, main: impl FnOnce() -> B) -> (A, B) {
    // The thread takes `side` out of the cell; if it never starts, this thread takes it back.
    let side = std::sync::Mutex::new(Some(side));
    let take = || side.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take().expect("side run once");
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new().name("build-stats".into()).spawn_scoped(scope, || take()());
        let b = main();
        let a = match spawned {
            Ok(handle) => handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(_) => take()(),
        };
        (a, b)
    })
}

/// The expected false-positive rate at the sized-for item count, for messages.
pub fn planned_fpp(s: &SizedSpec) -> Option<f64> {
    (s.expected_items > 0).then(|| params::expected_fpp(s.spec.bits, s.spec.hashes, s.expected_items))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The divisors are every number that divides, in order; the fold's step is an lcm of
    /// 1..n times a power of two, at most its limit.
    #[test]
    fn divisors_and_fold_steps() {
        for n in [1u64, 2, 12, 49, 97, 5040, 509_040] {
            let want: Vec<u64> = (1..=n).filter(|d| n.is_multiple_of(*d)).collect();
            assert_eq!(divisors(n), want, "{n}");
        }
        assert_eq!([0, 1, 5, 11, 12, 500, 7_900, 20_000].map(fold_step), [1, 1, 4, 6, 12, 420, 5_040, 10_080]);
        assert!((1..=10).all(|d| fold_step(7_900).is_multiple_of(d)), "every number up to 10 divides the step");
    }
    use crate::filter::BloomFilter;

    /// Windows start evenly over the files end to end, each cut at its file's end, the first
    /// at the first byte; files that hold less than the windows would read are read whole.
    #[test]
    fn sample_windows_spread_over_all_the_files() {
        let spans = |files: &[(usize, u64)], windows, window| -> Vec<(usize, u64, u64)> {
            sample_windows(files, windows, window).iter().map(|s| (s.input, s.start, s.end)).collect()
        };
        assert_eq!(spans(&[(0, 1000)], 4, 10), [(0, 0, 10), (0, 250, 260), (0, 500, 510), (0, 750, 760)]);
        // Starts at 0, 300, 600, 900 of 1200 bytes, a window cut at the end of its file and
        // the empty file skipped.
        assert_eq!(spans(&[(2, 305), (3, 0), (5, 895)], 4, 10), [(2, 0, 10), (2, 300, 305), (5, 295, 305), (5, 595, 605)]);
        assert_eq!(spans(&[(0, 20), (1, 0), (2, 19)], 4, 10), [(0, 0, 20), (2, 0, 19)]);
        assert!(spans(&[], 4, 10).is_empty());
    }

    /// Files sampled whole are spread over the list, the first among them.
    #[test]
    fn spread_evenly_takes_the_first_and_spaces_the_rest() {
        let items: Vec<usize> = (100..110).collect();
        assert_eq!(spread_evenly(&items, 4), [100, 102, 105, 107]);
        assert_eq!(spread_evenly(&items, 10), items);
        assert_eq!(spread_evenly(&items[..3], 16), [100, 101, 102]);
        assert_eq!(spread_evenly(&items, 1), [100]);
    }

    /// A filter sized for keys estimated from the input's size that holds under an eighth as
    /// many distinct keys warns, naming a tenth more than its fill shows (in two digits); one
    /// that holds an eighth or more, or whose size was given, does not. Both layouts.
    #[test]
    fn a_filter_sized_for_far_more_keys_than_it_holds_names_the_expected_items() {
        for layout in [Layout::Blocked, Layout::Standard] {
            let sized = |items: u64, estimated: bool| SizedSpec {
                spec: FilterSpec::sized_for(Scheme::NativeLookup3, layout, items, 0.01, 0).unwrap(),
                expected_items: items,
                target_fpp: 0.01,
                note: String::new(),
                estimated,
            };
            let fill = |sized: &SizedSpec, keys: u64| {
                let mut filter = BloomFilter::new(sized.spec);
                (0..keys).for_each(|i| filter.insert(format!("key {i}").as_bytes()));
                filter.bits_set()
            };
            let big = sized(1_000_000, true);
            let warning = big.oversized_warning(fill(&big, 50_000), false).expect("an oversized filter warns");
            assert!(warning.contains("--expected-items 55000 ") || warning.contains("--expected-items 56000 "), "{layout:?}: {warning}");
            assert!(warning.contains("sized for 1000000 keys"), "{warning}");
            assert_eq!(big.oversized_warning(fill(&big, 130_000), false), None, "{layout:?}: an eighth of the keys");
            // Counters take half a byte: four times the bytes of bits.
            let counters = big.oversized_warning(fill(&big, 50_000), true).expect("an oversized counting filter warns");
            assert!(counters.contains(&format!("instead of {}", crate::limits::human_bytes(big.spec.bits / 2))), "{counters}");
            let given = sized(1_000_000, false);
            assert_eq!(given.oversized_warning(fill(&given, 50_000), false), None, "{layout:?}: sized as asked");
            // Ten keys estimated and none held: a few bytes to save, not worth a warning; a
            // page's worth of keys is, but not a page.
            assert_eq!(sized(10, true).oversized_warning(0, false), None, "{layout:?}: a few bytes to save");
            let page = sized(3_000, true);
            assert!(page.spec.bits / 8 <= 4096, "{layout:?}: {} bits", page.spec.bits);
            assert_eq!(page.oversized_warning(fill(&page, 10), false), None, "{layout:?}: a page to save");
            let pages = sized(4_500, true);
            assert!(pages.spec.bits / 8 > 4096, "{layout:?}: {} bits", pages.spec.bits);
            assert!(pages.oversized_warning(fill(&pages, 10), false).is_some(), "{layout:?}: more than a page to save");
        }
        assert_eq!([1_094_624, 995, 10, 7, 0].map(round_up_to_two_digits), [1_100_000, 1_000, 10, 7, 0]);
    }

    #[test]
    fn beside_returns_both_results_and_runs_the_side_on_another_thread() {
        let here = std::thread::current().id();
        let data = [1u64, 2, 3];
        let (side, main) = super::beside(|| (std::thread::current().id(), data.iter().sum::<u64>()), || data.len());
        assert_eq!(side.1, 6);
        assert_eq!(main, 3);
        assert_ne!(side.0, here, "the side ran on the calling thread");
    }
}
