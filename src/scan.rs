//! Scanning a worker's share of the input: plans the splits of a set of inputs once per process
//! (identically on every process), then lets each worker read its own splits and hands every
//! record's key and raw bytes to the job. This is the per-record hot path of both jobs: one
//! buffer per split, no allocation per record.

use crate::error::{Error, Result, UNCOUNTED_LINE};
use crate::records::{bom_len, composite_key, key_or_null, simply_quoted_composite_key, simply_quoted_field_within, trim_line_end, unescape_quotes, unquoted_composite_key, unquoted_field_within, Key, KeyError, KeyRules, KeyType, RecordFormat};
use std::ops::Range;
use crate::compressed::{CompressedSplitReader, Compression};
use crate::bzip2_blocks::Bzip2SplitReader;
use crate::bytemask::ByteIter;
use crate::splits::{self, line_number, Input, LineEnds, Split, SplitReader, TextStart};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// How many malformed records are described in the report (the rest are only counted).
pub const MALFORMED_EXAMPLES: usize = 5;

/// Settings of a scan.
#[derive(Clone, Debug)]
pub struct ScanOptions {
    pub format: RecordFormat,
    pub key: Key,
    pub split_size: u64,
    pub max_record: usize,
    /// A malformed record is an error instead of being counted.
    pub strict: bool,
    /// How keys are encoded before hashing.
    pub key_rules: KeyRules,
    /// The codec of standard input, where given; else it is told by its first bytes.
    pub stdin_compression: Option<crate::compressed::Compression>,
    /// The text that stands for SQL's NULL in a key field (`--null-key`): such a record has no
    /// key, and joins nothing. `None`: every field is text (an empty one is the empty key).
    pub null_key: Option<Vec<u8>>,
    /// Records whose key is NULL are passed on, marked (see [`RecordBatch::nulls`]): an
    /// anti-join keeps them. Otherwise they are counted and dropped, as a filter's build and a
    /// semi-join's probe have no use for them.
    pub keep_null_records: bool,
}

/// The inputs of one side of a job, cut into splits.
#[derive(Debug)]
pub struct Source {
    pub inputs: Vec<Input>,
    pub splits: Vec<Split>,
    /// The key's 0-based field indexes per input (`None` for standard input with a named key,
    /// resolved from its header when it is read).
    key_index: Vec<Option<Vec<usize>>>,
    /// How each input's lines end, from its first bytes (standard input's are told as it is
    /// read).
    line_ends: Vec<LineEnds>,
    /// The first header line found among the file inputs.
    pub header: Option<Header>,
    /// The first file input whose header names other columns than
    /// [`header`](Self::header): its records do not have the columns that header names.
    /// (Boxed: it is rare, and the source is moved about.)
    pub other_header: Option<Box<Header>>,
    pub options: ScanOptions,
}

/// A header line and the input it was read from.
#[derive(Clone, Debug)]
pub struct Header {
    /// The line, with its terminator.
    pub line: Vec<u8>,
    /// The input's name, as errors give it.
    pub input: String,
}

impl Header {
    /// Whether `line` names the same columns in the same order (line ends aside: CRLF and LF
    /// files may be mixed).
    pub fn same_columns(&self, line: &[u8]) -> bool {
        trim_line_end(&self.line) == trim_line_end(line)
    }

    /// Says that `other`'s header differs from this one, naming both inputs and headers.
    pub fn differs_from(&self, other: &Header) -> String {
        let line = |h: &[u8]| String::from_utf8_lossy(trim_line_end(h)).into_owned();
        format!("{} has the header {:?}, {} has {:?}", other.input, line(&other.line), self.input, line(&self.line))
    }
}

/// What a worker's scan saw.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScanStats {
    /// Records read (header lines and blank lines not counted).
    pub records: u64,
    /// Bytes read, terminators and headers included.
    pub bytes: u64,
    /// Records without a usable key, skipped.
    pub malformed: u64,
    /// Records whose key is NULL (see [`ScanOptions::null_key`]).
    pub null_keys: u64,
    /// Descriptions (`file:line: reason`) of the first few malformed records.
    pub malformed_examples: Vec<String>,
}

impl ScanStats {
    /// Adds another worker's figures.
    pub fn absorb(&mut self, other: &ScanStats) {
        self.records += other.records;
        self.bytes += other.bytes;
        self.malformed += other.malformed;
        self.null_keys += other.null_keys;
        for e in &other.malformed_examples {
            if self.malformed_examples.len() < MALFORMED_EXAMPLES {
                self.malformed_examples.push(e.clone());
            }
        }
    }
}

impl Source {
    /// Resolves the inputs, plans splits for `peers` workers and finds the key's field index in
    /// every file.
    pub fn plan(paths: &[PathBuf], options: ScanOptions, peers: usize) -> Result<Source> {
        Self::plan_inputs(splits::resolve_inputs(paths)?, options, peers)
    }

    /// [`plan`](Self::plan) of inputs already resolved (by [`splits::resolve_inputs`]).
    pub fn plan_inputs(inputs: Vec<Input>, options: ScanOptions, peers: usize) -> Result<Source> {
        if inputs.iter().all(|i| i.size() == Some(0)) {
            let names: Vec<String> = inputs.iter().map(Input::name).collect();
            return Err(Error::Job(format!("the input is empty: {} (0 bytes)", names.join(", "))));
        }
        let total: u64 = inputs.iter().filter_map(Input::size).sum();
        let split_size = splits::balanced_split_size(options.split_size, total, peers);
        // Balanced bzip2 splits stay large (each decodes a block past its end); a smaller size
        // asked for is used as it is.
        let bzip2_split_size = split_size.max(options.split_size.min(splits::MIN_BALANCED_BZIP2_SPLIT));
        // With --multiline a planned split could start inside a quoted field: a plain file's
        // splits are moved to records' starts, and a bzip2 file, whose splits could not be, is
        // one (below, once the line ends are known).
        let splits = match options.format.multiline {
            true => splits::plan_splits(&inputs, split_size, u64::MAX)?,
            false => splits::plan_splits(&inputs, split_size, bzip2_split_size)?,
        };
        let mut key_index = Vec::with_capacity(inputs.len());
        let mut line_ends = Vec::with_capacity(inputs.len());
        let (mut header, mut other_header) = (None::<Header>, None);
        for input in &inputs {
            // One read of each file's first bytes tells its line ends and, mostly, its header.
            let start = match input {
                Input::File { path, len, compression, .. } if *len > 0 => Some(crate::compressed::text_start(path, *compression, options.max_record)?),
                _ => None,
            };
            let ends = match (input, &start) {
                (Input::Stdin, _) => LineEnds::Detect,
                (_, Some(start)) => LineEnds::of(start),
                (_, None) => LineEnds::Lf,
            };
            line_ends.push(ends);
            let index = match input {
                Input::Stdin => options.key.indexes(),
                Input::File { path, compression, .. } => {
                    // (A compressed file can hold nothing: then it has no header line either.)
                    let first = match &start {
                        Some(start) if options.format.has_header => {
                            Some(first_line(path, *compression, &options, ends, start)?).filter(|line| !line.is_empty())
                        }
                        _ => None,
                    };
                    match (&header, &first) {
                        (None, Some(line)) => header = Some(Header { line: line.clone(), input: input.name() }),
                        (Some(h), Some(line)) if other_header.is_none() && !h.same_columns(line) => {
                            other_header = Some(Box::new(Header { line: line.clone(), input: input.name() }))
                        }
                        _ => {}
                    }
                    match &first {
                        None if options.key.has_names() => None, // an empty file: nothing to read
                        _ => Some(options.key.resolve(first.as_deref(), options.format.delimiter, &input.name())?),
                    }
                }
            };
            key_index.push(index);
        }
        let splits = match options.format.multiline {
            true => splits::align_to_records(splits, &inputs, &line_ends, options.format.delimiter, options.max_record)?,
            false => splits,
        };
        Ok(Source { inputs, splits, key_index, line_ends, header, other_header, options })
    }

    /// The splits global worker `me` of `peers` reads.
    pub fn splits_of(&self, me: usize, peers: usize) -> impl Iterator<Item = &Split> {
        self.splits.iter().filter(move |s| s.worker(peers) == me)
    }

    /// Bytes the splits of workers `workers` cover (standard input counts as 0: unknown).
    pub fn bytes_of(&self, workers: std::ops::Range<usize>, peers: usize) -> u64 {
        self.splits
            .iter()
            .filter(|s| workers.contains(&s.worker(peers)))
            .map(|s| if s.is_stdin() { 0 } else { s.end - s.start })
            .sum()
    }

    /// How the lines of input `input` (an index into [`inputs`](Self::inputs)) end.
    pub fn line_ends(&self, input: usize) -> LineEnds {
        self.line_ends[input]
    }

    /// Total bytes of the file inputs.
    pub fn total_bytes(&self) -> u64 {
        self.inputs.iter().filter_map(|i| i.size()).sum()
    }

    /// Reads the splits of worker `me` and hands their records to `on_batch`, a batch at a time
    /// (each record with its key; see [`RecordBatch`]). Stops early, without error, once `abort`
    /// is set by another worker's failure. `progress` gets the bytes read, in steps.
    pub fn scan_worker(
        &self,
        me: usize,
        peers: usize,
        abort: &AtomicBool,
        progress: &AtomicU64,
        on_batch: impl FnMut(&RecordBatch) -> Result<()>,
    ) -> Result<ScanStats> {
        let mut own = self.splits_of(me, peers).map(|s| s.index);
        self.scan_feed(&mut own, abort, progress, on_batch)
    }

    /// Reads the splits `feed` gives, until it gives no more (see [`scan_worker`](Self::scan_worker)).
    pub fn scan_feed(
        &self,
        feed: &mut impl SplitFeed,
        abort: &AtomicBool,
        progress: &AtomicU64,
        mut on_batch: impl FnMut(&RecordBatch) -> Result<()>,
    ) -> Result<ScanStats> {
        let mut stats = ScanStats::default();
        // One read buffer for all the splits of this worker's files.
        let mut buffer = Vec::new();
        while !abort.load(Ordering::Relaxed) {
            let Some(index) = feed.next_split() else { break };
            let split = &self.splits[index];
            let mut tick = FeedTick { every: feed.tick_every(), tick: || feed.tick() };
            // The split's read, as a closure so that a failed one is seen after the check below.
            let mut read = || -> Result<()> {
                let ends = self.line_ends[split.input];
                match &self.inputs[split.input] {
                    Input::File { path, compression: Compression::None, .. } => {
                        let mut reader = SplitReader::open_with(path, split, self.options.max_record, std::mem::take(&mut buffer), ends)?;
                        self.scan_split(&mut reader, split, split.start == 0, self.key_index[split.input].clone(), None, abort, progress, &mut tick, &mut stats, &mut on_batch)?;
                        buffer = reader.into_buffer();
                    }
                    Input::File { path, compression: Compression::Bzip2, .. } => {
                        let (mut reader, read, from_text_start) = Bzip2SplitReader::open_bzip2(path, split, self.options.max_record, std::mem::take(&mut buffer), ends)?;
                        self.scan_split(&mut reader, split, from_text_start, self.key_index[split.input].clone(), Some(&read), abort, progress, &mut tick, &mut stats, &mut on_batch)?;
                        buffer = reader.into_buffer();
                    }
                    // A stream cut short where one of its members or frames ends decodes without
                    // an error: the file's stamp, checked below, tells.
                    &Input::File { ref path, compression, .. } => {
                        let (reader, read) = CompressedSplitReader::open_compressed(path, compression, u64::MAX, self.options.max_record, std::mem::take(&mut buffer))?;
                        let mut reader = reader.with_line_ends(ends);
                        self.scan_split(&mut reader, split, true, self.key_index[split.input].clone(), Some(&read), abort, progress, &mut tick, &mut stats, &mut on_batch)?;
                        buffer = reader.into_buffer();
                    }
                    Input::Stdin => {
                        let stdin = crate::compressed::stdin(self.options.stdin_compression).map_err(|e| Error::io("<stdin>", e))?;
                        let mut reader = SplitReader::new(stdin, 0, u64::MAX, self.options.max_record, "<stdin>".into()).with_line_ends(ends);
                        self.scan_split(&mut reader, split, true, self.key_index[split.input].clone(), None, abort, progress, &mut tick, &mut stats, &mut on_batch)?;
                    }
                }
                Ok(())
            };
            let read = read();
            // A file still as it was planned, after its split is read (whether or not the read
            // succeeded: a change is the likelier cause of another error); and the empty files
            // this split answers for, which have no split of their own.
            for input in std::iter::once(split.input).chain(self.unsplit_inputs(index)) {
                if let Input::File { path, len, stamp, .. } = &self.inputs[input] {
                    stamp.check(path, *len)?;
                }
            }
            read?;
        }
        Ok(stats)
    }

    /// The inputs without a split (files empty when the job planned it) whose stamps split
    /// `index` checks once it is read: those between the input of the split before it and its
    /// own, and for the last split, those after its input. Each is checked by one split, so a
    /// file empty when planned and written to during the job fails the job too.
    fn unsplit_inputs(&self, index: usize) -> impl Iterator<Item = usize> {
        let input = self.splits[index].input;
        let before = index.checked_sub(1).map_or(0, |previous| self.splits[previous].input + 1)..input;
        let after = if index + 1 == self.splits.len() { input + 1..self.inputs.len() } else { 0..0 };
        before.chain(after)
    }

    /// The per-record hot path: lines come in batches from the reader's buffer; a batch without
    /// any quote (the usual case) splits its lines with plain `memchr`; keys that had to be
    /// unescaped or encoded go to a small arena. Nothing is allocated per record. Progress is
    /// told in the bytes of the split's range: its records' bytes, or for a compressed file the
    /// compressed bytes read so far (`compressed`). `from_text_start`: the reader begins at its
    /// input's first line (which may be a header, and is numbered 1).
    #[allow(clippy::too_many_arguments)]
    fn scan_split<R: Read>(
        &self,
        reader: &mut SplitReader<R>,
        split: &Split,
        from_text_start: bool,
        key_index: Option<Vec<usize>>,
        compressed: Option<&AtomicU64>,
        abort: &AtomicBool,
        progress: &AtomicU64,
        tick: &mut FeedTick<impl FnMut()>,
        stats: &mut ScanStats,
        on_batch: &mut impl FnMut(&RecordBatch) -> Result<()>,
    ) -> Result<()> {
        let mut lines = SplitLines {
            source: self,
            input: &self.inputs[split.input],
            line_ends: self.line_ends[split.input],
            fields: KeyFields::new(key_index),
            skip_header: self.options.format.has_header && from_text_start,
            from_text_start,
            line: 0,
            set_aside: SetAside::default(),
            quoted_tries: QuotedTries::default(),
        };
        reader.set_multiline(self.options.format.multiline.then_some(self.options.format.delimiter));
        // A byte order mark is dropped where the input starts, as Hadoop drops it.
        let mut at_input_start = from_text_start;
        let mut ticks = ProgressTicks { progress, compressed, read: 0, reported: 0, ticked: 0 };
        // The batch's slices borrow the reader's buffer anew each time; their vectors' memory
        // is kept across batches, empty, in these.
        let (mut spare_keys, mut spare_records): (Vec<&[u8]>, Vec<&[u8]>) = (Vec::new(), Vec::new());
        loop {
            let (region_offset, region) = reader.next_lines(lines.line)?;
            if region.is_empty() {
                break;
            }
            let buf = reader.buffer();
            let mut region = Region { buf, offset: region_offset, start: region.start, end: region.end, at: region.start, quote: 0 };
            if std::mem::take(&mut at_input_start) {
                region.at += bom_len(&buf[region.start..region.end]);
            }
            region.quote = region.quote_from(region.at);
            let mut batch_from = region.start;
            while region.at < region.end {
                let mut keys = recycle(std::mem::take(&mut spare_keys));
                let mut records = recycle(std::mem::take(&mut spare_records));
                let header = lines.fill_batch(&mut region, &mut keys, &mut records, stats)?;
                let set_aside = &lines.set_aside;
                keys.extend(set_aside.items.iter().map(|(_, k)| k.get(buf, &set_aside.arena)));
                records.extend(set_aside.items.iter().map(|(r, _)| &buf[r.clone()]));
                let batch_bytes = (region.at - batch_from) as u64;
                batch_from = region.at;
                stats.bytes += batch_bytes;
                on_batch(&RecordBatch { keys: &keys, records: &records, nulls: &lines.set_aside.nulls, header: header.map(|r| &buf[r]) })?;
                (spare_keys, spare_records) = (recycle(keys), recycle(records));
                if ticks.after(batch_bytes, tick, abort) {
                    return Ok(());
                }
            }
        }
        ticks.finish();
        Ok(())
    }

    /// Counts a malformed record, or fails for `--strict` and for errors that make the rest of
    /// the input untrustworthy.
    fn malformed(&self, err: KeyError, index: usize, input: &Input, line: u64, stats: &mut ScanStats) -> Result<()> {
        let reason = err.describe(index);
        if self.options.strict || err.is_fatal() {
            return Err(Error::Malformed { path: input.name(), line, reason });
        }
        stats.malformed += 1;
        if stats.malformed_examples.len() < MALFORMED_EXAMPLES {
            stats.malformed_examples.push(crate::error::located(&input.name(), line, &reason));
        }
        Ok(())
    }
}

/// Where a split's key is: from the plan, or from the header the split starts with.
struct KeyFields {
    indexes: Option<Vec<usize>>,
    /// The key's one field, where it has one: the fast path's case.
    single: Option<usize>,
    /// The key's first field: the one a malformed record is described by.
    first: usize,
}

impl KeyFields {
    fn new(indexes: Option<Vec<usize>>) -> Self {
        let (single, first) = match indexes.as_deref() {
            Some(&[index]) => (Some(index), index),
            Some(indexes) => (None, indexes[0]),
            None => (None, 0),
        };
        KeyFields { indexes, single, first }
    }

    /// The fast path that reads the lines of a key of these fields and of `key_type`, if one
    /// does: every key but a composite one of other types than bytes (none before the header
    /// names the fields).
    fn fast_path(&self, key_type: KeyType) -> Option<FastPath<'_>> {
        match (key_type, self.single, self.indexes.as_deref()) {
            (KeyType::Bytes, Some(index), _) => Some(FastPath::Bytes(index)),
            (_, Some(index), _) => Some(FastPath::SetAside(index)),
            (KeyType::Bytes, None, Some(indexes)) => Some(FastPath::Composite(indexes)),
            _ => None,
        }
    }
}

/// The fast paths of [`SplitLines::fill_batch`], by key.
#[derive(Clone, Copy)]
enum FastPath<'i> {
    /// A one-field byte key, the field's index: keys and records are slices of the buffer
    /// ([`direct_lines`]).
    Bytes(usize),
    /// A one-field key set aside with its record ([`set_aside_lines`]): of another type,
    /// encoded into the arena, or of bytes after a line set aside in the batch.
    SetAside(usize),
    /// A composite key of byte fields, assembled in the arena ([`composite_lines`]).
    Composite(&'i [usize]),
}

/// A feed's [`tick`](SplitFeed::tick), and the bytes to read between two.
struct FeedTick<F> {
    every: u64,
    tick: F,
}

/// Counts a split's bytes into the shared progress counter, and looks at the abort flag, once
/// every [`PROGRESS_STEP`]: both are shared by every worker, and touched once per batch the
/// workers would pass their cache line back and forth. Ticks the feed as often as it asks.
struct ProgressTicks<'p> {
    progress: &'p AtomicU64,
    /// For a compressed input, its compressed bytes read so far, which progress counts.
    compressed: Option<&'p AtomicU64>,
    read: u64,
    reported: u64,
    ticked: u64,
}

impl ProgressTicks<'_> {
    fn position(&self) -> u64 {
        self.compressed.map_or(self.read, |c| c.load(Ordering::Relaxed))
    }

    /// Counts a batch of `bytes`, ticks the feed as often as it asks, and at each step tells
    /// whether the job is aborting (the scan then stops).
    #[inline]
    fn after(&mut self, bytes: u64, tick: &mut FeedTick<impl FnMut()>, abort: &AtomicBool) -> bool {
        self.read += bytes;
        let now = self.position();
        if now - self.ticked >= tick.every {
            (tick.tick)();
            self.ticked = now;
        }
        if now - self.reported < PROGRESS_STEP {
            return false;
        }
        self.progress.fetch_add(now - self.reported, Ordering::Relaxed);
        self.reported = now;
        abort.load(Ordering::Relaxed)
    }

    /// Counts what is left at the split's end.
    fn finish(&self) {
        self.progress.fetch_add(self.position() - self.reported, Ordering::Relaxed);
    }
}

/// A run of whole lines in the reader's buffer, being cut into batches.
struct Region<'b> {
    buf: &'b [u8],
    /// The input offset of `buf[start]`.
    offset: u64,
    start: usize,
    end: usize,
    /// Where the next line starts.
    at: usize,
    /// Where the next quote is (`end` if none): lines before it take the fast path; the line
    /// holding it takes the general one, which parses quotes.
    quote: usize,
}

impl Region<'_> {
    fn quote_from(&self, from: usize) -> usize {
        memchr::memchr(b'"', &self.buf[from..self.end]).map_or(self.end, |i| from + i)
    }
}

/// What a batch holds besides the keys and records taken straight from the buffer, and the
/// general path's scratch space, kept from batch to batch.
#[derive(Default)]
struct SetAside {
    /// Lines whose key is not a slice of the buffer (see [`KeyAt`]), and every line after the
    /// first of them, so that the batch keeps its lines' order.
    items: Vec<(Range<usize>, KeyAt)>,
    /// The keys that had to be unescaped or encoded.
    arena: Vec<u8>,
    /// The batch's records whose key is NULL (see [`RecordBatch::nulls`]).
    nulls: Vec<usize>,
    /// A quoted field is unescaped here, then copied to the arena.
    scratch: Vec<u8>,
    /// A composite key is assembled here, then copied to the arena.
    composite: Vec<u8>,
    /// A key of a type other than bytes, as it is hashed.
    encoded: Vec<u8>,
}

/// One split's scan, between its batches: where the key is, whether the header is still to come,
/// the line count, and what the batch set aside.
struct SplitLines<'s> {
    source: &'s Source,
    input: &'s Input,
    line_ends: LineEnds,
    fields: KeyFields,
    skip_header: bool,
    /// Exact line numbers are known only for a split read from the start of its input.
    from_text_start: bool,
    line: u64,
    set_aside: SetAside,
    quoted_tries: QuotedTries,
}

/// When the fast path for lines with quotes is tried ([`take_fast_lines`]): after it takes no
/// line (the key has an escaped quote, say), it is not tried for the next lines with quotes:
/// none after one such miss, one after the next, then three, seven, up to 63, until it takes a
/// line again. Tried on every line, a build of a file whose every line held an escaped quote
/// (which the fast path then left) took 0.49–0.52 s, against 0.40–0.43 s through the general
/// path alone.
#[derive(Default)]
struct QuotedTries {
    /// Lines with quotes left to the general path before the next try.
    skip: u32,
    /// How many the next miss skips.
    after_miss: u32,
}

impl QuotedTries {
    /// Whether to try this line with quotes (else it is counted off the lines to skip).
    fn try_now(&mut self) -> bool {
        if self.skip == 0 {
            return true;
        }
        self.skip -= 1;
        false
    }

    /// Notes how many lines a try took.
    fn took(&mut self, lines: usize) {
        if lines > 0 {
            self.after_miss = 0;
        } else {
            self.skip = self.after_miss;
            self.after_miss = (self.after_miss * 2 + 1).min(63);
        }
    }
}

impl SplitLines<'_> {
    /// Fills a batch with up to [`BATCH_LINES`] lines of `region`: the usual lines through the
    /// fast path, up to the first that it leaves to the general one (a line with a quote, an
    /// empty or malformed line, a NULL key, the header), which takes that one line. Returns the
    /// header's range if the batch skipped it. The lines set aside go after `keys` and
    /// `records`, which the caller appends (their keys may be in the arena).
    #[inline]
    fn fill_batch<'r: 'b, 'b>(&mut self, region: &mut Region<'r>, keys: &mut Vec<&'b [u8]>, records: &mut Vec<&'b [u8]>, stats: &mut ScanStats) -> Result<Option<Range<usize>>> {
        let opts = &self.source.options;
        let set_aside = &mut self.set_aside;
        set_aside.items.clear();
        set_aside.arena.clear();
        set_aside.nulls.clear();
        // In locals, which stay in registers across the calls below (a tenth fewer instructions
        // per quoted line than through `region` and `self`).
        let (buf, end_of_region) = (region.buf, region.end);
        let (mut at, mut quote, mut line) = (region.at, region.quote, self.line);
        let mut header = None;
        let mut taken = 0;
        while taken < BATCH_LINES && at < end_of_region {
            let path = match self.fields.fast_path(opts.key_rules.key_type) {
                _ if self.skip_header => None,
                // Set-aside lines hold the rest of the batch, which byte keys, that go straight
                // to `keys`, must join there.
                Some(FastPath::Bytes(index)) if !self.set_aside.items.is_empty() => Some(FastPath::SetAside(index)),
                path => path,
            };
            if let Some(path) = path {
                let set_aside = &mut self.set_aside;
                let (delimiter, rules, null) = (opts.format.delimiter, opts.key_rules, opts.null_key.as_deref());
                let take = |lines: Range<usize>, quoted, max| {
                    let run = |index| Run { buf, lines: lines.clone(), delimiter, index, max };
                    match (path, quoted) {
                        // (A quoted key is never NULL, but one that reads as the NULL text is
                        // left to the general path, which knows how it was written.)
                        (FastPath::Bytes(index), false) => direct_lines_leaving::<false>(run(index), rules.reject_empty, null, keys, records),
                        (FastPath::Bytes(index), true) => direct_lines_leaving::<true>(run(index), rules.reject_empty, null, keys, records),
                        (FastPath::SetAside(index), false) => set_aside_lines::<false>(run(index), rules, null, set_aside),
                        (FastPath::SetAside(index), true) => set_aside_lines::<true>(run(index), rules, null, set_aside),
                        (FastPath::Composite(indexes), quoted) => {
                            let run = CompositeRun { buf, lines: lines.clone(), delimiter, indexes, null, max };
                            match quoted {
                                false => composite_lines::<false>(run, set_aside),
                                true => composite_lines::<true>(run, set_aside),
                            }
                        }
                    }
                };
                match take_fast_lines(region, (&mut at, &mut quote), &mut taken, &mut line, stats, &mut self.quoted_tries, take) {
                    FastEnd::Stop => break,
                    FastEnd::Again => continue,
                    FastEnd::General => {}
                }
            }
            let mut end = memchr::memchr(b'\n', &buf[at..end_of_region]).map_or(end_of_region, |i| at + i + 1);
            let quoted = end > quote;
            let first_line = line + 1;
            if quoted && opts.format.multiline {
                // The record runs on to the newline that ends it outside quotes (the region
                // ends at a record's end); its lines are counted.
                let line_end = end;
                end = crate::records::record_ends(&buf[at..end_of_region], opts.format.delimiter).next().map_or(end_of_region, |len| at + len);
                // (Most quoted records end with their first line: counting took a tenth of a
                // scan of such records.)
                if end != line_end {
                    line += memchr::memchr_iter(b'\n', &buf[at..end - 1]).count() as u64;
                }
            }
            let range = at..end;
            (taken, at) = (taken + 1, end);
            if quoted {
                quote = region.quote_from(end);
            }
            line += 1;
            if self.skip_header {
                self.skip_header = false;
                header = Some(range.clone());
                if self.fields.indexes.is_none() {
                    let text = trim_line_end(&buf[range]);
                    self.fields = KeyFields::new(Some(opts.key.resolve(Some(text), opts.format.delimiter, &self.input.name())?));
                }
                continue;
            }
            let place = LinePlace { line: first_line, offset: region.offset + (range.start - region.start) as u64 };
            self.general_record(buf, range, quoted, place, keys, records, stats)?;
        }
        (region.at, region.quote, self.line) = (at, quote, line);
        Ok(header)
    }

    /// A line the fast path left, not the header: an empty line is passed over; a record whose
    /// key is NULL is counted (and kept in its place where the scan keeps them); a malformed one
    /// is counted and described, or fails the scan; any other goes into the batch, its key from
    /// the buffer or the arena.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn general_record<'b>(&mut self, buf: &'b [u8], range: Range<usize>, quoted: bool, place: LinePlace, keys: &mut Vec<&'b [u8]>, records: &mut Vec<&'b [u8]>, stats: &mut ScanStats) -> Result<()> {
        let opts = &self.source.options;
        let text = trim_line_end(&buf[range.clone()]);
        if text.is_empty() {
            return Ok(());
        }
        stats.records += 1;
        let SetAside { items, arena, nulls, scratch, composite, encoded } = &mut self.set_aside;
        let (delimiter, null) = (opts.format.delimiter, opts.null_key.as_deref());
        // The field a malformed record is described by.
        let mut failed = self.fields.first;
        let key = match self.fields.single {
            Some(index) => key_or_null(text, delimiter, index, quoted, null, scratch),
            None => {
                let indexes = self.fields.indexes.as_deref().expect("key indexes are resolved before the first record");
                composite_key(text, delimiter, indexes, quoted, null, scratch, composite).map(|present| present.then_some(&composite[..])).map_err(|(index, e)| {
                    failed = index;
                    e
                })
            }
        };
        let key = match key {
            Ok(Some(key)) => key,
            Ok(None) => {
                stats.null_keys += 1;
                if opts.keep_null_records {
                    // In its place in the batch, with an empty key that nothing looks up.
                    nulls.push(keys.len() + items.len());
                    if items.is_empty() {
                        keys.push(&buf[range.start..range.start]);
                        records.push(&buf[range]);
                    } else {
                        items.push((range.clone(), KeyAt::Buffer(range.start..range.start)));
                    }
                }
                return Ok(());
            }
            Err(err) => return self.malformed_at(err, failed, place, stats),
        };
        match opts.key_rules.encode(key, encoded) {
            Ok(key) => match locate_key(buf, key, arena) {
                KeyAt::Buffer(key) if items.is_empty() => {
                    keys.push(&buf[key]);
                    records.push(&buf[range]);
                }
                key => items.push((range, key)),
            },
            Err(err) => return self.malformed_at(err, failed, place, stats),
        }
        Ok(())
    }

    /// Counts (or fails for) a malformed record at `place`. Finding its line number may mean
    /// counting newlines from the file's start: done only for the records that are described.
    #[cold]
    fn malformed_at(&self, err: KeyError, field: usize, place: LinePlace, stats: &mut ScanStats) -> Result<()> {
        let opts = &self.source.options;
        let described = opts.strict || err.is_fatal() || stats.malformed_examples.len() < MALFORMED_EXAMPLES;
        let line = if described { self.line_number(place) } else { 0 };
        self.source.malformed(err, field, self.input, line, stats)
    }

    /// The number of the line at `place`: counted by the scan where the split was read from its
    /// input's start, else from the file ([`UNCOUNTED_LINE`] for a bzip2 split after the
    /// first, whose lines before it are not counted).
    fn line_number(&self, place: LinePlace) -> u64 {
        match self.input {
            _ if self.from_text_start => place.line,
            Input::File { path, compression: Compression::None, .. } => line_number(path, place.offset, self.line_ends).unwrap_or(UNCOUNTED_LINE),
            _ => UNCOUNTED_LINE,
        }
    }
}

/// Where a line is: the lines the scan has counted up to it (its number where the split was
/// read from its input's start), and its offset in its input.
#[derive(Clone, Copy)]
struct LinePlace {
    line: u64,
    offset: u64,
}

/// Where the fast paths left a batch ([`take_fast_lines`]).
enum FastEnd {
    /// The batch is full, or the region read.
    Stop,
    /// At a line without quotes, after lines with them: the unquoted reading's.
    Again,
    /// At a line that the general path must read.
    General,
}

/// The fast paths' turn in [`SplitLines::fill_batch`], from `at`, the next quote at `quote`:
/// `take(lines, quoted, max)` reads up to `max` of `lines` and returns how many it took and
/// where the next starts; it reads the lines up to the quote without quotes, then, from the
/// line with the quote on, the lines with quotes that it can read (`quoted`), whose quoted
/// fields are whole fields (see [`direct_lines_with`]), as `tries` has it try them. Moves `at`,
/// `quote`, the lines taken and counted and the records past the lines taken.
#[inline(always)]
fn take_fast_lines(
    region: &Region,
    (at, quote): (&mut usize, &mut usize),
    taken: &mut usize,
    line: &mut u64,
    stats: &mut ScanStats,
    tries: &mut QuotedTries,
    mut take: impl FnMut(Range<usize>, bool, usize) -> (usize, usize),
) -> FastEnd {
    let mut step = |lines: Range<usize>, quoted: bool, at: &mut usize, taken: &mut usize| {
        let (took, next) = take(lines, quoted, BATCH_LINES - *taken);
        (*taken, *at) = (*taken + took, next);
        *line += took as u64;
        stats.records += took as u64;
        took
    };
    step(*at..*quote, false, at, taken);
    let stop = |at: usize, taken: usize| taken == BATCH_LINES || at == region.end;
    if stop(*at, *taken) {
        return FastEnd::Stop;
    }
    if *quote == region.end || !tries.try_now() {
        return FastEnd::General;
    }
    let took = step(*at..region.end, true, at, taken);
    tries.took(took);
    if *at > *quote {
        *quote = region.quote_from(*at);
    }
    match (stop(*at, *taken), took > 0) {
        (true, _) => FastEnd::Stop,
        (false, true) => FastEnd::Again,
        (false, false) => FastEnd::General,
    }
}

/// An empty vector of slices with `v`'s allocation, for another lifetime: a loop whose slices
/// borrow a buffer anew each iteration keeps one allocation instead of one per iteration. (The
/// vector holds no references once cleared, and collecting into a vector of the same layout
/// reuses the source's allocation.)
pub fn recycle<'b>(mut v: Vec<&[u8]>) -> Vec<&'b [u8]> {
    v.clear();
    v.into_iter().map(|_| -> &'b [u8] { unreachable!("the vector is empty") }).collect()
}

/// Which splits a worker reads, one after another: its own under the static assignment (any
/// iterator of split indexes), or those it claims as it goes (`jobs::claims`).
pub trait SplitFeed {
    /// The index of the next split to read; `None` once there are no more.
    fn next_split(&mut self) -> Option<usize>;

    /// Called every [`tick_every`](Self::tick_every) bytes read: a feed that talks to other
    /// workers answers and receives their messages here, so that none waits for this worker's
    /// split to end.
    fn tick(&mut self) {}

    /// Bytes read between [`tick`](Self::tick)s.
    fn tick_every(&self) -> u64 {
        PROGRESS_STEP
    }
}

impl<I: Iterator<Item = usize>> SplitFeed for I {
    fn next_split(&mut self) -> Option<usize> {
        self.next()
    }
}

/// Bytes read between updates of the shared progress counter (and checks of the abort flag).
pub const PROGRESS_STEP: u64 = 1 << 20;

/// Lines read and handed over per batch.
pub const BATCH_LINES: usize = 128;

/// Records and their keys, a batch at a time: `keys[i]` is the key of `records[i]` (the raw
/// record, with its line terminator). Malformed records, headers and blank lines are not in it.
pub struct RecordBatch<'a> {
    pub keys: &'a [&'a [u8]],
    pub records: &'a [&'a [u8]],
    /// The positions, ascending, of the records whose key is NULL, where the scan keeps them
    /// ([`ScanOptions::keep_null_records`]): their key is empty, and must be taken for no key
    /// (see [`unmatch_nulls`](Self::unmatch_nulls)).
    pub nulls: &'a [usize],
    /// The header line skipped in this batch, with its terminator, if one was: the only way a
    /// job learns standard input's header, which no plan could read ahead.
    pub header: Option<&'a [u8]>,
}

impl RecordBatch<'_> {
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Answers "no match" for the records whose key is NULL, in `answers` (one per record, from
    /// a filter's or a key set's lookup of [`keys`](Self::keys)): NULL equals nothing, not even
    /// the empty key their place holds.
    #[inline]
    pub fn unmatch_nulls(&self, answers: &mut [bool]) {
        for &i in self.nulls {
            answers[i] = false;
        }
    }
}

/// Where a key of the current batch is: in the reader's buffer, or copied to the arena (an
/// unescaped quoted key, a long's 8 bytes).
#[derive(Clone)]
enum KeyAt {
    Buffer(Range<usize>),
    Arena(Range<usize>),
}

impl KeyAt {
    fn get<'a>(&self, buf: &'a [u8], arena: &'a [u8]) -> &'a [u8] {
        match self {
            KeyAt::Buffer(r) => &buf[r.clone()],
            KeyAt::Arena(r) => &arena[r.clone()],
        }
    }
}

/// What [`direct_lines`] reads: up to `max` whole lines of `buf[lines]`, whose keys are
/// field `index` (from 0) of fields separated by `delimiter`.
#[derive(Clone)]
struct Run<'b> {
    buf: &'b [u8],
    lines: Range<usize>,
    delimiter: u8,
    index: usize,
    max: usize,
}

/// The fast path of [`Source::scan_split`] for a one-field byte key, over lines without quotes
/// (or with `QUOTED`, lines whose quoted fields are whole fields, see [`direct_lines_with`]):
/// the lines of a [`Run`], from its start, each line's key and record pushed as slices of its
/// buffer, in a loop with none of the general path's cases. Stops at the first line it cannot
/// take as it is (empty, without the field, with a key that it `leaves` to the general path:
/// an empty key that Hadoop's filters refuse, a NULL; or not ending in the run, which ends
/// where a quote or the input's end without a newline is) and returns the lines taken and
/// where the next begins.
///
/// The lines are found as their keys are, in one pass over the bytes, and the loop is a
/// function of its own, whose values fit in registers (inlined into the scan, it kept most on
/// the stack; its keys and records are written at one index into the vectors' spare room, as
/// pushes kept a length and a capacity each). It is compiled a second time for AVX2, chosen at
/// run time (unless `BLOOMFLOW_KERNEL=portable`), whose 32-byte compares find newlines and
/// delimiters (`bytemask::mask64` is two 32-byte halves, which the compiler joins into one
/// compare each). Callgrind, against the
/// reader finding a batch's lines first and this loop then finding their keys and pushing
/// them: the semi-join `--exact` 265.0 → 214.5 instructions a probe record, the build of the
/// 2M-row probe 608.4 → 505.9 million. (Made once for both cases, the test for a NULL cost 6
/// instructions a line with no NULL text given.)
#[inline(never)]
fn direct_lines<'b, const QUOTED: bool>(run: Run<'b>, leaves: impl Fn(&[u8]) -> bool, keys: &mut Vec<&'b [u8]>, records: &mut Vec<&'b [u8]>) -> (usize, usize) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && crate::hashing::BlockKernel::Avx2.allowed() {
        // SAFETY: the CPU has AVX2.
        return unsafe { direct_lines_avx2::<QUOTED>(run, leaves, keys, records) };
    }
    direct_lines_with::<QUOTED>(run, leaves, keys, records)
}

/// [`direct_lines`], leaving to the general path the keys it must see: an empty key where keys
/// must not be empty (Hadoop's filters refuse them), and one that reads as the NULL text. Made
/// twice, so that a scan without a NULL text makes no test for one.
#[inline(always)]
fn direct_lines_leaving<'b, const QUOTED: bool>(run: Run<'b>, reject_empty: bool, null: Option<&[u8]>, keys: &mut Vec<&'b [u8]>, records: &mut Vec<&'b [u8]>) -> (usize, usize) {
    match null {
        None => direct_lines::<QUOTED>(run, |key| reject_empty && key.is_empty(), keys, records),
        Some(null) => direct_lines::<QUOTED>(run, |key| reject_empty && key.is_empty() || key == null, keys, records),
    }
}

/// [`direct_lines`] compiled for AVX2.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn direct_lines_avx2<'b, const QUOTED: bool>(run: Run<'b>, leaves: impl Fn(&[u8]) -> bool, keys: &mut Vec<&'b [u8]>, records: &mut Vec<&'b [u8]>) -> (usize, usize) {
    direct_lines_with::<QUOTED>(run, leaves, keys, records)
}

/// The body of [`direct_lines`], for each CPU it is compiled for. `QUOTED`: the lines with
/// quotes, each read by [`simply_quoted_field_within`], which stops at a line without one (for
/// the unquoted reading, which is faster: it reads a line only up to its key) and at a line
/// whose quotes it cannot read (for the general path).
#[inline(always)]
fn direct_lines_with<'b, const QUOTED: bool>(run: Run<'b>, leaves: impl Fn(&[u8]) -> bool, keys: &mut Vec<&'b [u8]>, records: &mut Vec<&'b [u8]>) -> (usize, usize) {
    let Run { buf, lines, delimiter, index, max } = run;
    let mut start = lines.start;
    let mut taken = 0;
    keys.reserve(max);
    records.reserve(max);
    // Written into the vectors' spare room, at one index: pushed, each kept its own length
    // and capacity, more values than the loop has registers for.
    let (key_slots, record_slots) = (&mut keys.spare_capacity_mut()[..max], &mut records.spare_capacity_mut()[..max]);
    for newline in ByteIter::new(&buf[lines.clone()], b'\n') {
        let end = lines.start + newline + 1;
        let record = &buf[start..end];
        let text = line_text(record);
        // The rest of the buffer may be read past the line, and ignored.
        let key = line_key::<QUOTED>(&buf[start..], text.len(), delimiter, index);
        match key {
            // Not a blank line (no record), nor a key that the general path must see, nor one
            // to unescape (the general path sets it aside, and `set_aside_lines` then reads on).
            Some((key, false)) if !(text.is_empty() || leaves(key)) => {
                key_slots[taken].write(key);
                record_slots[taken].write(record);
            }
            _ => break,
        }
        start = end;
        taken += 1;
        if taken == max {
            break;
        }
    }
    // SAFETY (both): the first `taken` spare slots were written, above.
    unsafe {
        keys.set_len(keys.len() + taken);
        records.set_len(records.len() + taken);
    }
    (taken, start)
}

/// Field `index` of the line `room[..len]` (the room after it may be read and ignored), for the
/// fast paths of one-field keys: read as an unquoted line, or with `QUOTED` as a line with
/// quotes whose quoted fields are whole fields (None for a line without quotes, which the
/// unquoted reading takes). None where the reading leaves the line to the general path. With
/// the key, whether it holds escaped quotes, to be unescaped (see
/// [`crate::records::unescape_quotes`]).
#[inline(always)]
fn line_key<const QUOTED: bool>(room: &[u8], len: usize, delimiter: u8, index: usize) -> Option<(&[u8], bool)> {
    match QUOTED {
        false => unquoted_field_within(room, len, delimiter, index).ok().map(|key| (key, false)),
        true => simply_quoted_field_within(room, len, delimiter, index).and_then(|read| read.quotes.then_some((read.key, read.escaped))),
    }
}

/// A line that ends in a newline without it: only a carriage return before it is left to trim.
#[inline(always)]
fn line_text(record: &[u8]) -> &[u8] {
    &record[..record.len() - 1 - record.ends_with(b"\r\n") as usize]
}

/// Lines for [`composite_lines`]: those of `lines` in `buf`, keyed on the fields at `indexes`,
/// at most `max` of them.
struct CompositeRun<'b, 'i> {
    buf: &'b [u8],
    lines: Range<usize>,
    delimiter: u8,
    indexes: &'i [usize],
    null: Option<&'i [u8]>,
    max: usize,
}

/// The fast path for a composite key of byte fields, as [`direct_lines`] is for one field: the
/// lines of a [`CompositeRun`], each line's key assembled straight into the batch's arena and
/// set aside with its record. Stops at the first line it cannot take as it is (empty, short of
/// a field, with a NULL field, past [`crate::records::unquoted_composite_key`]'s fields, or not
/// ending in the run) and returns the lines taken and where the next begins. Each line through
/// the general path was found on its own (`memchr`), its key assembled apart and then copied:
/// a `-w 1` build of the probe keyed on `payload,customer_id` took 1.37–1.40 s so, 1.11–1.16 s
/// through this path (3 interleaved runs; `-w 2` 0.72–0.77 and 0.59–0.63 s). `QUOTED`: lines
/// with quotes, each whole field, as [`direct_lines`] takes them.
fn composite_lines<const QUOTED: bool>(run: CompositeRun, set_aside: &mut SetAside) -> (usize, usize) {
    let CompositeRun { buf, lines, delimiter, indexes, null, max } = run;
    let SetAside { items, arena, .. } = set_aside;
    let mut start = lines.start;
    let mut taken = 0;
    for newline in ByteIter::new(&buf[lines.clone()], b'\n') {
        let end = lines.start + newline + 1;
        let record = &buf[start..end];
        let text = line_text(record);
        let from = arena.len();
        // (A blank line is one field, and a composite key asks for two or more: it is short of
        // one, and left to the general path, which passes over it.)
        let key = match QUOTED {
            false => unquoted_composite_key(text, delimiter, indexes, null, arena),
            true => simply_quoted_composite_key(&buf[start..], text.len(), delimiter, indexes, null, arena),
        };
        match key {
            Some(Ok(true)) => items.push((start..end, KeyAt::Arena(from..arena.len()))),
            _ => {
                arena.truncate(from);
                break;
            }
        }
        start = end;
        taken += 1;
        if taken == max {
            break;
        }
    }
    (taken, start)
}

/// The fast path for a one-field key of a type other than bytes (a number as Spark's `putLong`
/// or a Hadoop `Writable` hashes it, Hadoop's `Text`), as [`composite_lines`] is for composite
/// keys: the lines of a [`Run`], each key found as [`direct_lines`] finds it and encoded
/// straight into the batch's arena, set aside with its record. Stops at the first line it cannot
/// take as it is (blank, without the field, with a key that reads as the NULL text or does not
/// encode: the general path counts or reports those) and returns the lines taken and where the
/// next begins. Through the general path, each line found on its own, a `-w 1` Spark build of
/// the probe's `customer_id` as longs took 1.81–2.06 s; through this one (and with the numbers
/// parsed by hand) 1.45–1.59 s, as bytes 1.12–1.24 s (2 interleaved runs each).
///
/// Byte keys come here too once a line of their batch is set aside (its key unescaped, say):
/// each set aside as the range of the buffer it is, where [`direct_lines`] would have put it
/// before the set-aside line. They went to the general path, for the rest of the batch: a build
/// of 4M rows whose every hundredth key held an escaped quote took 0.15–0.18 s so at `-w 1`,
/// 0.13–0.14 s through this path (0.10–0.11 s for the file without those keys).
fn set_aside_lines<const QUOTED: bool>(run: Run, rules: KeyRules, null: Option<&[u8]>, set_aside: &mut SetAside) -> (usize, usize) {
    let Run { buf, lines, delimiter, index, max } = run;
    let SetAside { items, arena, encoded, scratch, .. } = set_aside;
    let mut start = lines.start;
    let mut taken = 0;
    for newline in ByteIter::new(&buf[lines.clone()], b'\n') {
        let end = lines.start + newline + 1;
        let text = line_text(&buf[start..end]);
        let key = line_key::<QUOTED>(&buf[start..], text.len(), delimiter, index);
        // (A quoted key reading as the NULL text is not NULL: the general path tells them apart.)
        let Some((key, escaped)) = key.filter(|&(key, _)| !text.is_empty() && null != Some(key)) else { break };
        let key = if escaped { unescape_quotes(key, scratch) } else { key };
        let Ok(key) = rules.encode(key, encoded) else { break };
        items.push((start..end, locate_key(buf, key, arena)));
        start = end;
        taken += 1;
        if taken == max {
            break;
        }
    }
    (taken, start)
}

/// Records where `key` is: a range of `buf` when it is a slice of it, else a copy in `arena`.
#[inline]
fn locate_key(buf: &[u8], key: &[u8], arena: &mut Vec<u8>) -> KeyAt {
    let (start, end) = (buf.as_ptr() as usize, buf.as_ptr() as usize + buf.len());
    let k = key.as_ptr() as usize;
    if k >= start && k + key.len() <= end {
        KeyAt::Buffer(k - start..k - start + key.len())
    } else {
        let from = arena.len();
        arena.extend_from_slice(key);
        KeyAt::Arena(from..arena.len())
    }
}

/// The first line of a file whose lines end in `ends` and whose text starts with `start`, with
/// its terminator (a CR made an LF), read without reading the rest: from `start`, which holds
/// it unless it is longer than `max_record` (then the file's reader refuses it).
fn first_line(path: &std::path::Path, compression: Compression, options: &ScanOptions, ends: LineEnds, start: &TextStart) -> Result<Vec<u8>> {
    let max_record = options.max_record;
    if options.format.multiline {
        return header_record(path, options.format.delimiter, ends, start);
    }
    if let Some(line) = start.first_line(ends).filter(|line| line.len() <= max_record) {
        return Ok(line[bom_len(&line)..].to_vec());
    }
    let line = |r: Option<(u64, &[u8])>| r.map(|(_, l)| l[bom_len(l)..].to_vec()).unwrap_or_default();
    match compression {
        Compression::None => {
            let split = Split { index: 0, input: 0, start: 0, end: 1 };
            Ok(line(SplitReader::open_with(path, &split, max_record, Vec::new(), ends)?.next_record()?))
        }
        compressed => {
            let reader = CompressedSplitReader::open_compressed(path, compressed, 1, max_record, Vec::new())?.0;
            Ok(line(reader.with_line_ends(ends).next_record()?))
        }
    }
}

/// The header of a `--multiline` input: its first record, whose quoted names may hold line
/// breaks (as a spreadsheet's wrapped column titles are exported), taken from the input's first
/// bytes, which must hold it whole.
fn header_record(path: &std::path::Path, delimiter: u8, ends: LineEnds, start: &TextStart) -> Result<Vec<u8>> {
    let mut bytes = start.bytes.clone();
    if ends == LineEnds::Cr {
        splits::cr_to_lf(&mut bytes);
    }
    let text = &bytes[bom_len(&bytes)..];
    let end = crate::records::record_ends(text, delimiter).next();
    match end {
        Some(end) => Ok(text[..end].to_vec()),
        None if start.whole => Ok(text.to_vec()),
        None => Err(Error::Malformed {
            path: path.display().to_string(),
            line: 1,
            reason: format!("the header record runs past the first {} bytes (a quote left open?)", start.bytes.len()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::KeyField;

    /// Comma-separated records without a header, keyed on the second field, strict, in splits
    /// of `split_size` bytes.
    fn csv_options(split_size: u64) -> ScanOptions {
        ScanOptions {
            format: RecordFormat { delimiter: b',', has_header: false, multiline: false },
            key: Key::single(KeyField::Index(2)),
            split_size,
            max_record: 1 << 20,
            strict: true,
            key_rules: KeyRules { key_type: KeyType::Bytes, reject_empty: false },
            stdin_compression: None,
            null_key: None,
            keep_null_records: false,
        }
    }

    /// Progress is told in the bytes the job's totals are made of: a plain file's own, and a
    /// compressed file's compressed bytes (not its longer text), so a bar ends at 100%.
    #[test]
    fn progress_ends_at_the_inputs_sizes_compressed_or_not() {
        let dir = tempfile::tempdir().unwrap();
        let text: Vec<u8> = (0..30_000).flat_map(|i: u32| format!("{i},k{i},{}\n", "x".repeat(i as usize % 40)).into_bytes()).collect();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut gz, &text).unwrap();
        let files = [("plain.csv", text.clone()), ("packed.csv.gz", gz.finish().unwrap()), ("packed.csv.zst", zstd::encode_all(&text[..], 3).unwrap())];
        for (name, bytes) in files {
            let path = dir.path().join(name);
            std::fs::write(&path, &bytes).unwrap();
            let source = Source::plan(&[path], csv_options(64 << 10), 1).unwrap();
            let (abort, progress) = (AtomicBool::new(false), AtomicU64::new(0));
            let mut records = 0;
            let stats = source.scan_worker(0, 1, &abort, &progress, |batch| {
                records += batch.len();
                Ok(())
            });
            let stats = stats.unwrap();
            assert_eq!((records, stats.records, stats.bytes), (30_000, 30_000, text.len() as u64), "{name}");
            assert_eq!(progress.load(Ordering::Relaxed), bytes.len() as u64, "{name}");
            assert_eq!(source.bytes_of(0..1, 1), bytes.len() as u64, "{name}");
        }
    }

    /// A feed is ticked as often as it asks (every 64 KiB read here: about 45 times in 3 MB of
    /// lines, less what each split's end leaves over), and by default once a MiB.
    #[test]
    fn feeds_are_ticked_as_often_as_they_ask() {
        struct Feed {
            splits: std::ops::Range<usize>,
            every: Option<u64>,
            ticks: u32,
        }
        impl SplitFeed for Feed {
            fn next_split(&mut self) -> Option<usize> {
                self.splits.next()
            }
            fn tick(&mut self) {
                self.ticks += 1;
            }
            fn tick_every(&self) -> u64 {
                self.every.unwrap_or(PROGRESS_STEP)
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lines.csv");
        let text: Vec<u8> = (0..100_000u32).flat_map(|i| format!("{i:08},k{i:020}\n").into_bytes()).collect();
        std::fs::write(&path, &text).unwrap();
        let source = Source::plan(&[path], csv_options(64 << 20), 1).unwrap();
        // Each split counts its own bytes: a split's last part short of a tick goes untold.
        let splits = source.splits.len() as u64;
        for (every, want) in [(Some(64u64 << 10), text.len() as u64 / (64 << 10)), (None, text.len() as u64 / PROGRESS_STEP)] {
            let mut feed = Feed { splits: 0..splits as usize, every, ticks: 0 };
            let (abort, progress) = (AtomicBool::new(false), AtomicU64::new(0));
            source.scan_feed(&mut feed, &abort, &progress, |_| Ok(())).unwrap();
            assert!((want.saturating_sub(splits)..=want).contains(&(feed.ticks as u64)), "every {every:?}: {} ticks in {splits} splits, about {want} wanted", feed.ticks);
        }
    }

    /// The fast path hands a batch over to the general one at its first empty or malformed
    /// line: every record after it is still read, in order, with its key, and the malformed ones
    /// are counted and described with their line numbers.
    #[test]
    fn lines_after_an_empty_or_malformed_line_are_read_alike() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mixed.csv");
        std::fs::write(&path, "1,a,x\n3,,z\n2,b,y\n\n4\n5,e,w\r\n6,f,v").unwrap();
        let first_field = dir.path().join("first.csv");
        std::fs::write(&first_field, "x,1\n\r\ny,2\n\n").unwrap();
        for (file, field, reject_empty) in [(&path, 2, false), (&path, 2, true), (&first_field, 1, false)] {
            let options = ScanOptions {
                format: RecordFormat { delimiter: b',', has_header: false, multiline: false },
                key: Key::single(KeyField::Index(field)),
                split_size: 64 << 10,
                max_record: 1 << 20,
                strict: false,
                key_rules: KeyRules { key_type: KeyType::Bytes, reject_empty },
                stdin_compression: None,
                null_key: None,
                keep_null_records: false,
            };
            let source = Source::plan(std::slice::from_ref(file), options, 1).unwrap();
            let (abort, progress) = (AtomicBool::new(false), AtomicU64::new(0));
            let mut read: Vec<(String, String)> = Vec::new();
            let stats = source
                .scan_worker(0, 1, &abort, &progress, |batch| {
                    let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
                    read.extend(batch.keys.iter().zip(batch.records).map(|(k, r)| (text(k), text(r))));
                    Ok(())
                })
                .unwrap();
            if field == 1 {
                // Blank lines, LF or CRLF, are no records, even where the key is the first field.
                assert_eq!(read, [("x".to_string(), "x,1\n".to_string()), ("y".to_string(), "y,2\n".to_string())]);
                assert_eq!((stats.records, stats.malformed), (2, 0));
                continue;
            }
            let mut want = vec![("a", "1,a,x\n"), ("", "3,,z\n"), ("b", "2,b,y\n"), ("e", "5,e,w\r\n"), ("f", "6,f,v")];
            let mut lines = vec![5];
            if reject_empty {
                want.remove(1);
                lines.insert(0, 2);
            }
            let want: Vec<(String, String)> = want.into_iter().map(|(k, r)| (k.to_string(), r.to_string())).collect();
            assert_eq!(read, want, "reject_empty {reject_empty}");
            assert_eq!((stats.records, stats.malformed), (6, lines.len() as u64), "reject_empty {reject_empty}");
            let described: Vec<&str> = stats.malformed_examples.iter().map(|e| e.split(':').nth(1).unwrap()).collect();
            assert_eq!(described, lines.iter().map(|l| l.to_string()).collect::<Vec<_>>(), "{:?}", stats.malformed_examples);
        }
    }

    /// Whatever the mix of lines (plain, quoted, with quotes around whole fields or not, blank,
    /// CRLF, short of the key's field, NULL, longer than a mask's window, an empty key) and
    /// however the file is cut into splits, the scan's batches hold every record with its key,
    /// in order, as the general path's `key_or_null` (or for a composite key, `composite_key`)
    /// and the key type's encoding find them line by line: the fast paths and the hand-overs
    /// between them and the general path keep every line and its order.
    #[test]
    fn the_scan_reads_every_mix_of_lines_as_the_general_path_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mix.csv");
        let mut rng = crate::xorshift::XorShift::new(0x9E37_79B9_7F4A_7C15);
        let mut text = Vec::new();
        for i in 0..3000 {
            let r = rng.next();
            let filler = "f".repeat((r >> 8) as usize % 90);
            // The first 300 lines are plain: runs longer than a batch.
            let line = match if i < 300 { 18 } else { r % 19 } {
                0 => String::new(),
                1 => format!("{i},\"q,{i}\",x"),
                2 => format!("{i},k{i},\"a\"\"b\""),
                3 => format!("{i}"),
                4 => format!("{i},NULL,x"),
                5 => format!("{i},\"NULL\",x"),
                6 => format!("{i},,x"),
                9 => format!("{i},\"k\"\"{i}\",x"),
                7 => format!("{filler},k{i}"),
                // Quotes around whole fields, the quoted reading's, and lines it leaves.
                10 => format!("\"{i}\",\"k{i}\",\"{filler}\""),
                11 => format!("{i},\"k{i}\""),
                12 => format!("\"{i}\",k{i},\"x\""),
                13 => format!("{i},\"\",x"),
                14 => format!("{i},\"k{i}\",x\"y"),
                15 => format!("{i},\"k{i}\"x,y"),
                16 => format!("\"{filler}\",\"k{i}{filler}\",\"x\""),
                17 => format!("{i},{i},{filler}"),
                8 => format!("\"{i}\",\"-{i}\",\"x\""),
                _ => format!("{i},k{i},{filler}"),
            };
            text.extend(line.as_bytes());
            text.extend(if r.is_multiple_of(5) { &b"\r\n"[..] } else { b"\n" });
        }
        text.extend(b"last,k-last");
        std::fs::write(&path, &text).unwrap();
        let nulls = [(None, false), (Some(b"NULL".to_vec()), false), (Some(b"NULL".to_vec()), true)];
        // One field (the second) as bytes, as Hadoop's `Text` and as a number, and a composite
        // key of the third and the second.
        let keys = [(vec!["2"], KeyType::Bytes), (vec!["3", "2"], KeyType::Bytes), (vec!["2"], KeyType::Text), (vec!["2"], KeyType::Long)];
        for ((null, keep_null_records), (fields, key_type)) in nulls.into_iter().flat_map(|null| keys.clone().map(|key| (null.clone(), key))) {
            let key = Key::parse(&fields, false).unwrap();
            let indexes = key.indexes().unwrap();
            let rules = KeyRules { key_type, reject_empty: false };
            // The oracle: every physical line on its own, through the general path's functions.
            let mut want: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            let (mut scratch, mut composite, mut encoded) = (Vec::new(), Vec::new(), Vec::new());
            for line in text.split_inclusive(|&b| b == b'\n') {
                let trimmed = trim_line_end(line);
                if trimmed.is_empty() {
                    continue;
                }
                let found = match indexes[..] {
                    [index] => key_or_null(trimmed, b',', index, true, null.as_deref(), &mut scratch).map(|key| key.map(<[u8]>::to_vec)),
                    _ => composite_key(trimmed, b',', &indexes, true, null.as_deref(), &mut scratch, &mut composite).map(|present| present.then(|| composite.clone())).map_err(|(_, e)| e),
                };
                match found.map(|key| key.map(|key| rules.encode(&key, &mut encoded).map(<[u8]>::to_vec))) {
                    Ok(Some(Ok(key))) => want.push((key, line.to_vec())),
                    Ok(None) if keep_null_records => want.push((Vec::new(), line.to_vec())),
                    _ => {}
                }
            }
            for split_size in [100, 777, 64 << 10] {
                let options = ScanOptions { strict: false, null_key: null.clone(), keep_null_records, key: key.clone(), key_rules: rules, ..csv_options(split_size) };
                let source = Source::plan(std::slice::from_ref(&path), options, 1).unwrap();
                let (abort, progress) = (AtomicBool::new(false), AtomicU64::new(0));
                let mut read: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                let mut by_split = source.splits.iter().map(|s| s.index).collect::<Vec<_>>().into_iter();
                let stats = source
                    .scan_feed(&mut by_split, &abort, &progress, |batch| {
                        assert!(batch.keys.len() <= BATCH_LINES && batch.keys.len() == batch.records.len());
                        read.extend(batch.keys.iter().zip(batch.records).map(|(k, r)| (k.to_vec(), r.to_vec())));
                        Ok(())
                    })
                    .unwrap();
                if let Some(i) = (0..read.len().min(want.len())).find(|&i| read[i] != want[i]) {
                    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                    panic!("{key_type:?}: record {i} read as {:?} {:?}, not {:?} {:?}", text(&read[i].0), text(&read[i].1), text(&want[i].0), text(&want[i].1));
                }
                assert_eq!(read.len(), want.len(), "null {null:?}, kept {keep_null_records}, split size {split_size}, key {fields:?} {key_type:?}");
                assert!(read == want, "null {null:?}, kept {keep_null_records}, split size {split_size}, key {fields:?} {key_type:?}");
                assert_eq!(stats.bytes, text.len() as u64);
            }
        }
    }

    /// With `--multiline`, a plain file is still read in many splits: each starts at a record's
    /// start (a record end read from the file's start), and the splits read in turn give every
    /// record once, whole, with its key, as one reader of the whole file does; with its lines
    /// ending in CR alone too. Where no record start can be told (a text whose quoted fields
    /// read as records themselves, so that the two readings stay out of step), the splits are
    /// joined.
    #[test]
    fn multiline_splits_start_at_records_and_read_each_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = crate::xorshift::XorShift::new(41);
        // Out of step everywhere: `"x\n",1\n` read from just past its first newline is `",1\n"`
        // (a quoted field) and `x\n` (a record), and so on to the end.
        let ambiguous = "\"x\n\",1\n".repeat(3000);
        for cr in [false, true] {
            let mut text = ambiguous.clone();
            for i in 0..6000 {
                let r = rng.next();
                let note = ["\"one\ntwo\"", "\"a, \"\"quoted\"\" word\n\nmore\"", "plain", "with a \"stray quote", "\"\"", "\"\n\""][(r % 6) as usize];
                let key = ["\"k{i}\nline\"", "\"k{i}\"", "k{i}"][(r >> 8) as usize % 3].replace("{i}", &i.to_string());
                let end = if !cr && (r >> 16).is_multiple_of(3) { "\r\n" } else { "\n" };
                text.push_str(&format!("{note},{key},{i}{end}"));
            }
            let lf = text.into_bytes();
            // The oracle: the records as read from the start, each with its key.
            let mut want: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            let (mut start, mut scratch) = (0, Vec::new());
            for end in crate::records::record_ends(&lf, b',') {
                let record = &lf[start..end];
                let key = key_or_null(trim_line_end(record), b',', 1, true, None, &mut scratch).unwrap().unwrap();
                want.push((key.to_vec(), record.to_vec()));
                start = end;
            }
            assert_eq!(start, lf.len());
            let ends: std::collections::HashSet<usize> = crate::records::record_ends(&lf, b',').collect();
            let path = dir.path().join(if cr { "cr.csv" } else { "lf.csv" });
            let file = if cr { lf.iter().map(|&b| if b == b'\n' { b'\r' } else { b }).collect() } else { lf.clone() };
            std::fs::write(&path, &file).unwrap();
            for split_size in [100, 777, 64 << 10] {
                let options = ScanOptions { format: RecordFormat { delimiter: b',', has_header: false, multiline: true }, ..csv_options(split_size) };
                let source = Source::plan(std::slice::from_ref(&path), options, 3).unwrap();
                let splits = &source.splits;
                let astray = splits.iter().find(|s| s.start > 0 && !ends.contains(&(s.start as usize)));
                assert!(astray.is_none(), "a split starts inside a record: {astray:?}");
                assert!(splits.windows(2).all(|w| w[0].end == w[1].start && w[0].start < w[0].end) && splits.last().unwrap().end == lf.len() as u64);
                // No start is found among the out-of-step records; many are after them.
                assert!(splits.len() > 1 && splits[1].start >= ambiguous.len() as u64, "{:?}", &splits[..2]);
                assert!(splits.len() as u64 >= (lf.len() - ambiguous.len()) as u64 / split_size * 9 / 10, "{} splits of {split_size}", splits.len());
                let (abort, progress) = (AtomicBool::new(false), AtomicU64::new(0));
                let mut read: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                let mut by_split = splits.iter().map(|s| s.index).collect::<Vec<_>>().into_iter();
                let stats = source
                    .scan_feed(&mut by_split, &abort, &progress, |batch| {
                        read.extend(batch.keys.iter().zip(batch.records).map(|(k, r)| (k.to_vec(), r.to_vec())));
                        Ok(())
                    })
                    .unwrap();
                assert_eq!(read.len(), want.len(), "cr {cr}, split size {split_size}");
                assert!(read == want, "cr {cr}, split size {split_size}");
                assert_eq!((stats.records, stats.bytes), (want.len() as u64, lf.len() as u64));
            }
        }
    }

    /// A compressed file cut short after the job planned it, where one of its members ends (so
    /// that its decoder ends without an error), fails the scan, naming it: its records past the
    /// cut would be missing. Read whole, it scans.
    #[test]
    fn a_compressed_file_that_shrank_after_planning_fails_the_scan() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.csv.gz");
        let member = |first: usize| {
            let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            (first..first + 500).for_each(|i| writeln!(encoder, "{i},k{i}").unwrap());
            encoder.finish().unwrap()
        };
        let first = member(0);
        std::fs::write(&path, [first.clone(), member(500)].concat()).unwrap();
        let scan = |source: &Source| {
            let (abort, progress) = (AtomicBool::new(false), AtomicU64::new(0));
            let mut records = 0;
            source
                .scan_worker(0, 1, &abort, &progress, |batch| {
                    records += batch.keys.len();
                    Ok(())
                })
                .map(|_| records)
        };
        let options = ScanOptions { format: RecordFormat { delimiter: b',', has_header: false, multiline: false }, ..csv_options(1 << 20) };
        let source = Source::plan(std::slice::from_ref(&path), options, 1).unwrap();
        assert_eq!(scan(&source).unwrap(), 1000);
        std::fs::write(&path, &first).unwrap();
        let message = scan(&source).unwrap_err().to_string();
        let shrank = format!("shrank from {} to {} bytes", source.total_bytes(), first.len());
        assert!(message.contains("in.csv.gz") && message.contains(&shrank), "{message}");
    }

    /// A file written to after the job planned its splits, its size kept, fails the scan of a
    /// split read after the write, naming it and saying what changed; so does one replaced by
    /// another file at its path, or removed (on Unix its open splits would read on), or given
    /// an earlier modification time. Unchanged, it scans.
    #[test]
    fn a_file_changed_after_planning_fails_the_scan() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.csv");
        let text: String = (0..1000).map(|i| format!("{i:04},k{i:04}\n")).collect();
        let scan = |source: &Source| {
            let (abort, progress) = (AtomicBool::new(false), AtomicU64::new(0));
            source.scan_worker(0, 1, &abort, &progress, |_| Ok(()))
        };
        let options = || ScanOptions { format: RecordFormat { delimiter: b',', has_header: false, multiline: false }, ..csv_options(1 << 20) };
        // Each change, made after planning, and what the error must say of it.
        let later = |path: &std::path::Path| {
            let file = std::fs::File::options().write(true).open(path).unwrap();
            file.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(2)).unwrap();
        };
        type Change<'a> = Box<dyn Fn(&std::path::Path) + 'a>;
        let changes: [(Change, &str); 5] = [
            (Box::new(|path| { std::fs::write(path, text.replace("k0500", "k9999")).unwrap(); later(path); }), "it was modified, its size kept: its modification time moved 2."),
            (Box::new(|path| { let other = path.with_extension("new"); std::fs::write(&other, &text).unwrap(); std::fs::rename(&other, path).unwrap(); }), "another file replaced it at the same path"),
            (Box::new(|path| std::fs::write(path, format!("{text}1000,k1000\n")).unwrap()), "it grew from 11000 to 11011 bytes"),
            (Box::new(|path| std::fs::remove_file(path).unwrap()), "it was removed"),
            (Box::new(|path| std::fs::File::options().write(true).open(path).unwrap().set_modified(std::time::SystemTime::UNIX_EPOCH).unwrap()), "its modification time changed, its size did not"),
        ];
        for (change, says) in changes {
            std::fs::write(&path, &text).unwrap();
            let source = Source::plan(std::slice::from_ref(&path), options(), 1).unwrap();
            assert_eq!(scan(&source).unwrap().records, 1000);
            change(&path);
            let message = scan(&source).unwrap_err().to_string();
            assert!(message.contains("in.csv: the file changed while the job read it") && message.contains(says), "{message}");
        }
    }

    /// Files empty when the job planned it have no split: the split that answers for each (the
    /// next file's first, or the last split for those after it) checks it too, so one written
    /// to during the job fails the scan, naming it. Unchanged, they scan.
    #[test]
    fn an_empty_file_written_to_after_planning_fails_the_scan() {
        let dir = tempfile::tempdir().unwrap();
        let names = ["a-empty.csv", "b.csv", "c-empty.csv", "d.csv", "e-empty.csv"];
        let paths: Vec<PathBuf> = names.iter().map(|name| dir.path().join(name)).collect();
        let text: String = (0..1000).map(|i| format!("{i:04},k{i:04}\n")).collect();
        for written in [0, 2, 4] {
            for (path, name) in paths.iter().zip(names) {
                std::fs::write(path, if name.contains("empty") { "" } else { text.as_str() }).unwrap();
            }
            let source = Source::plan(&paths, csv_options(4000), 1).unwrap();
            assert_eq!(source.splits.len(), 6, "three splits of each file with records");
            let (abort, progress) = (AtomicBool::new(false), AtomicU64::new(0));
            assert_eq!(source.scan_worker(0, 1, &abort, &progress, |_| Ok(())).unwrap().records, 2000);
            std::fs::write(&paths[written], "1,late\n").unwrap();
            let message = source.scan_worker(0, 1, &abort, &progress, |_| Ok(())).unwrap_err().to_string();
            assert!(message.contains(&format!("{}: the file changed while the job read it (it grew from 0 to 7 bytes)", names[written])), "{message}");
        }
    }

    /// With `--multiline`, a long stretch without quotes has record starts only where the limit
    /// on a record's length shows that no quoted field can be open: with a limit of 4 KiB, it
    /// is read in many splits; with 1 MiB (more than the text), in one until the quote that
    /// ends the stretch. Either way every record is read once, in order.
    #[test]
    fn multiline_splits_in_quote_free_text_follow_the_record_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rare.csv");
        let plain = |from: u32| (from..from + 5000).map(|i| format!("{i},k{i},x\n")).collect::<String>();
        let text = format!("{}9,\"k-quoted\nline\",y\n{}", plain(0), plain(5000));
        std::fs::write(&path, &text).unwrap();
        let mut want: Vec<Vec<u8>> = (0..10_000).map(|i| format!("k{i}").into_bytes()).collect();
        want.insert(5000, b"k-quoted\nline".to_vec());
        let quote = text.find('"').unwrap() as u64;
        for (max_record, many) in [(4096, true), (1 << 20, false)] {
            let options = ScanOptions {
                format: RecordFormat { delimiter: b',', has_header: false, multiline: true },
                max_record,
                ..csv_options(1000)
            };
            let source = Source::plan(std::slice::from_ref(&path), options, 2).unwrap();
            let before_quote = source.splits.iter().filter(|s| s.start < quote).count();
            assert_eq!(before_quote > 50, many, "{before_quote} splits before the quote, the limit {max_record}");
            let (abort, progress) = (AtomicBool::new(false), AtomicU64::new(0));
            let mut read: Vec<Vec<u8>> = Vec::new();
            let mut by_split = source.splits.iter().map(|s| s.index).collect::<Vec<_>>().into_iter();
            let each = |batch: &RecordBatch| {
                read.extend(batch.keys.iter().map(|k| k.to_vec()));
                Ok(())
            };
            source.scan_feed(&mut by_split, &abort, &progress, each).unwrap();
            assert!(read == want, "the limit {max_record}: {} records read", read.len());
        }
    }

    /// The fast paths compiled for AVX2 (which this CPU may run) and without it take the same
    /// lines, keys and records: the unquoted reading's, and the quoted one's.
    #[test]
    fn the_fast_path_reads_alike_with_and_without_avx2() {
        let lines = |quoted: bool| -> Vec<u8> {
            (0..2000u32)
                .flat_map(|i| match (i % 97, quoted) {
                    (0, _) => format!("{i}\n"),
                    (1, _) => "\r\n".to_string(),
                    (2, true) => format!("\"{i}\",\"k\"\"{i}\"\n"),
                    (_, false) => format!("{i},k{},{}\n", i * 7, "p".repeat(i as usize % 150)),
                    (_, true) => format!("\"{i}\",\"k{}\",\"{}\"\n", i * 7, "p".repeat(i as usize % 150)),
                }.into_bytes())
                .collect()
        };
        fn run(text: &[u8], portable: bool, quoted: bool) -> (Vec<&[u8]>, Vec<&[u8]>, Vec<usize>) {
            let (mut at, mut keys, mut records, mut takes) = (0, Vec::new(), Vec::new(), Vec::new());
            while at < text.len() {
                let run = Run { buf: text, lines: at..text.len(), delimiter: b',', index: 1, max: 100 };
                let (taken, next) = match (portable, quoted) {
                    (true, false) => direct_lines_with::<false>(run, |k| k.is_empty(), &mut keys, &mut records),
                    (false, false) => direct_lines::<false>(run, |k| k.is_empty(), &mut keys, &mut records),
                    (true, true) => direct_lines_with::<true>(run, |k| k.is_empty(), &mut keys, &mut records),
                    (false, true) => direct_lines::<true>(run, |k| k.is_empty(), &mut keys, &mut records),
                };
                takes.push(taken);
                // Past a line the fast path leaves (a short or blank one), as the general path goes.
                at = if taken == 0 { next + memchr::memchr(b'\n', &text[next..]).unwrap() + 1 } else { next };
            }
            (keys, records, takes)
        }
        for quoted in [false, true] {
            let text = lines(quoted);
            let (portable, chosen) = (run(&text, true, quoted), run(&text, false, quoted));
            // Each reading leaves the short and blank lines, the quoted one the escaped quotes too.
            assert_eq!(portable.0.len(), 2000 - (2 + quoted as usize) * 21, "quoted {quoted}");
            assert!(portable == chosen, "quoted {quoted}");
            let first: [&[u8]; 2] = if quoted { [b"k21", b"k28"] } else { [b"k14", b"k21"] };
            assert_eq!([portable.0[0], portable.0[1]], first, "quoted {quoted}");
        }
    }

    /// Misses in a row leave 0, 1, 3, 7, ... 63 lines with quotes to the general path before the
    /// next try; a try that takes lines starts over.
    #[test]
    fn the_quoted_fast_path_is_tried_less_after_each_miss() {
        let mut tries = QuotedTries::default();
        // How many lines are left untried after each miss.
        let mut after_miss = || {
            assert!(tries.try_now());
            tries.took(0);
            let mut skipped = 0;
            while !tries.try_now() {
                skipped += 1;
            }
            skipped
        };
        let skipped: Vec<u32> = (0..9).map(|_| after_miss()).collect();
        assert_eq!(skipped, [0, 1, 3, 7, 15, 31, 63, 63, 63]);
        tries.took(5);
        assert!(tries.try_now());
        tries.took(0);
        assert!(tries.try_now(), "a hit starts the misses over");
    }

    #[test]
    fn recycle_keeps_the_allocation() {
        let owned = vec![1u8, 2, 3];
        let mut v: Vec<&[u8]> = Vec::with_capacity(128);
        v.push(&owned);
        let ptr = v.as_ptr() as usize;
        let r = recycle(v);
        assert!(r.is_empty() && r.capacity() == 128 && r.as_ptr() as usize == ptr);
    }
}
