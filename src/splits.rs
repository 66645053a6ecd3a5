//! Splits, by Hadoop's TextInputFormat rules: every input file is cut into byte ranges; a record
//! belongs to the split holding its first byte. A split reader therefore skips a partial first line
//! (unless it starts at offset 0) and reads past its end to finish its last line. A compressed
//! file (see `compressed`) cannot be read from its middle, so it is one split, read whole, as
//! Hadoop reads it. Split i goes to global worker i mod peers, so the assignment is the same on
//! every process — except where workers claim splits as they go (`jobs::claims`, the filter
//! build). Under `--multiline`, whose records may hold newlines, a plain file's splits are moved
//! to records' starts ([`align_to_records`]) and end there.

use crate::bytemask::ByteIter;
use crate::compressed::Compression;
use crate::error::{Error, Result, UNCOUNTED_LINE};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Default split size: 64 MiB, as HDFS blocks.
pub const DEFAULT_SPLIT_SIZE: u64 = 64 << 20;
/// Default limit on one record's length.
pub const DEFAULT_MAX_RECORD: usize = 64 << 20;

/// One input: a regular file (its size and [`FileStamp`] when the job planned its splits), or
/// standard input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    File { path: PathBuf, len: u64, compression: Compression, stamp: FileStamp },
    Stdin,
}

/// Which file an input was, and when it was last modified, as the job planned its splits of it:
/// with its size, what [`FileStamp::check`] compares after each split is read, so that a file
/// changed under a running job fails the job instead of giving records partly as they were and
/// partly as they are (a file rewritten in place, or replaced by another at the same path, read
/// on as if nothing had happened; only one cut short was noticed, as it ended early).
///
/// Its `Debug` form shows none of its fields: a job's processes compare the `Debug` forms of
/// their plans, and each machine stamps its own copy of a file, with its own inode and time.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    modified: Option<std::time::SystemTime>,
    /// (device, inode) on Unix; elsewhere the modification time alone tells a change.
    identity: Option<(u64, u64)>,
}

impl std::fmt::Debug for FileStamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FileStamp")
    }
}

impl FileStamp {
    /// The stamp of the file whose metadata is `meta`.
    pub fn of(meta: &std::fs::Metadata) -> Self {
        #[cfg(unix)]
        let identity = {
            use std::os::unix::fs::MetadataExt;
            Some((meta.dev(), meta.ino()))
        };
        #[cfg(not(unix))]
        let identity = None;
        FileStamp { modified: meta.modified().ok(), identity }
    }

    /// Fails unless the file at `path` is still the file of this stamp, of `len` bytes, not
    /// modified since ([`Error::InputChanged`], saying what changed). A rewrite within the
    /// modification time's resolution that keeps the size goes unseen (nanoseconds on ext4,
    /// XFS, Btrfs and tmpfs).
    pub fn check(&self, path: &Path, len: u64) -> Result<()> {
        let meta = match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::InputChanged { path: path.to_path_buf(), what: "it was removed".into() });
            }
            meta => meta.map_err(|e| Error::io(path, e))?,
        };
        let now = FileStamp::of(&meta);
        let what = if now.identity != self.identity {
            "another file replaced it at the same path".to_string()
        } else if meta.len() != len {
            let how = if meta.len() < len { "shrank" } else { "grew" };
            format!("it {how} from {len} to {} bytes", meta.len())
        } else if now.modified != self.modified {
            match now.modified.zip(self.modified).and_then(|(now, then)| now.duration_since(then).ok()) {
                Some(later) => format!("it was modified, its size kept: its modification time moved {:.3} s later", later.as_secs_f64()),
                None => "its modification time changed, its size did not".to_string(),
            }
        } else {
            return Ok(());
        };
        Err(Error::InputChanged { path: path.to_path_buf(), what })
    }
}

impl Input {
    /// The name used in messages.
    pub fn name(&self) -> String {
        match self {
            Input::File { path, .. } => path.display().to_string(),
            Input::Stdin => "<stdin>".into(),
        }
    }

    /// The size in bytes, when known.
    pub fn size(&self) -> Option<u64> {
        match self {
            Input::File { len, .. } => Some(*len),
            Input::Stdin => None,
        }
    }
}

/// Expands the user's input arguments: files as they are, directories into the regular files
/// beneath them, subdirectories included (a partitioned table's `date=…/` directories, as Spark
/// reads them), in sorted path order, globs into the files and directories they match
/// ([`crate::globs`]), `-` as standard input. Hidden and `_`-prefixed entries (`_SUCCESS`,
/// `_temporary/`, `.part-00000.crc`) are skipped at every level, as Hadoop skips them.
/// A pipe, socket or device, given or found, is an error.
pub fn resolve_inputs(args: &[PathBuf]) -> Result<Vec<Input>> {
    if args.is_empty() {
        return Err(Error::invalid("input", "no input given"));
    }
    let mut inputs = Vec::new();
    for arg in args {
        if arg.as_os_str() == "-" {
            if inputs.contains(&Input::Stdin) {
                return Err(Error::invalid("input", "standard input (-) given twice"));
            }
            inputs.push(Input::Stdin);
            continue;
        }
        match std::fs::metadata(arg) {
            // A pattern is one only where no path of its name exists.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && crate::globs::is_glob(arg) => {
                let matched = crate::globs::expand(arg)?;
                if matched.is_empty() {
                    return Err(Error::invalid(
                        "input",
                        format!("{}: the glob matches no file or directory (hidden `_` and `.` names left out, as Hadoop leaves them)", arg.display()),
                    ));
                }
                for path in &matched {
                    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
                    resolve_path(path, meta, &mut inputs)?;
                }
            }
            meta => resolve_path(arg, meta.map_err(|e| Error::io(arg, e))?, &mut inputs)?,
        }
    }
    Ok(inputs)
}

/// A warning where two of `inputs` are one file (a path given twice, a file given beside its
/// directory, a link to another input): its records are read twice, as Hadoop and Spark read a
/// path given twice, which doubles the semi-join's output records and a counting filter's
/// counts. Files are told apart by device and inode where the system has them, else by path.
pub fn repeated_input(inputs: &[Input]) -> Option<String> {
    let mut seen = std::collections::HashMap::new();
    let (mut repeats, mut said) = (Vec::new(), std::collections::HashSet::new());
    for input in inputs {
        let Input::File { path, stamp, .. } = input else { continue };
        let id = stamp.identity.map_or_else(|| Err(path.as_path()), Ok);
        if let Some(first) = seen.insert(id, path) {
            let repeat = if first == path { format!("{} is given twice", path.display()) } else { format!("{} and {} are one file", first.display(), path.display()) };
            if said.insert(repeat.clone()) {
                repeats.push(repeat);
            }
        }
    }
    let (first, more) = repeats.split_first()?;
    let (others, its) = match more.len() {
        0 => (String::new(), "its"),
        // A few named: a directory given twice repeats every file beneath it.
        n => (format!(" (and {n} more: {}{})", more[..n.min(3)].join("; "), if n > 3 { "; …" } else { "" }), "their"),
    };
    Some(format!("{first}{others}: {its} records are read twice, as Hadoop and Spark read a path given twice"))
}

/// Adds the inputs of `path` (of metadata `meta`): a regular file itself, a directory the files
/// beneath it.
fn resolve_path(path: &Path, meta: std::fs::Metadata, inputs: &mut Vec<Input>) -> Result<()> {
    if meta.is_dir() {
        let mut files = Vec::new();
        files_beneath(path, &mut Vec::new(), &mut files)?;
        // Each name made once, not at every comparison (a tenth of the instructions of a
        // semi-join of 5,000 one-line files went to making names).
        files.sort_by_cached_key(|a| a.name());
        if files.is_empty() {
            return Err(Error::invalid("input", format!("{}: directory holds no input files", path.display())));
        }
        inputs.extend(files);
    } else if !meta.is_file() {
        return Err(not_a_regular_file(path));
    } else {
        // Checked now so that a missing permission fails before the job starts.
        File::open(path).map_err(|e| Error::io(path, e))?;
        inputs.push(Input::File { path: path.to_path_buf(), len: meta.len(), compression: Compression::of(path)?, stamp: FileStamp::of(&meta) });
    }
    Ok(())
}

/// The error for an input that is neither a directory nor a regular file: a pipe (`<(zcat …)`,
/// a FIFO), a socket or a device has no length to plan splits by. Such an input read as an empty
/// file, and its data was lost without a word; inside an input directory it was skipped, as
/// silently. (Never opened: opening a FIFO waits for its writer.)
fn not_a_regular_file(path: &Path) -> Error {
    Error::invalid(
        "input",
        format!("{}: not a regular file (a pipe, socket or device): give its data as standard input, `-`", path.display()),
    )
}

/// Whether a file name is hidden from jobs, as Hadoop's `FileInputFormat` hides it: a name
/// starting with `_` (`_SUCCESS`, `_temporary/`) or `.` (`.crc` checksums). Inputs skip such
/// names, and an output directory holds only them and part files.
pub fn is_hidden(name: &str) -> bool {
    name.starts_with('_') || name.starts_with('.')
}

/// Adds the input files beneath directory `dir` to `files`. `open` holds the directories being
/// listed, as their canonical paths, so that a symbolic link back up the tree is refused rather
/// than followed forever.
fn files_beneath(dir: &Path, open: &mut Vec<PathBuf>, files: &mut Vec<Input>) -> Result<()> {
    let canonical = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
    if open.contains(&canonical) {
        return Err(Error::invalid("input", format!("{}: a symbolic link loops back to {}", dir.display(), canonical.display())));
    }
    open.push(canonical);
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if is_hidden(&name) {
            continue;
        }
        let path = entry.path();
        let meta = std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?;
        if meta.is_dir() {
            files_beneath(&path, open, files)?;
        } else if meta.is_file() {
            let compression = Compression::of(&path)?;
            files.push(Input::File { path, len: meta.len(), compression, stamp: FileStamp::of(&meta) });
        } else {
            return Err(not_a_regular_file(&path));
        }
    }
    open.pop();
    Ok(())
}

/// A byte range of one input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    /// Position in the job's split list: decides the worker.
    pub index: usize,
    /// Index into the job's inputs.
    pub input: usize,
    pub start: u64,
    /// Exclusive; `u64::MAX` for standard input (read to its end).
    pub end: u64,
}

impl Split {
    /// The global worker that reads this split: split i goes to worker i mod peers, but standard
    /// input goes to worker 0, since only process 0 has it (the other processes' standard input
    /// is not the job's). Dealt as the others, standard input given after a file (`a.csv -`)
    /// went to a worker of another process in a multi-process job, which read its own empty
    /// standard input: the records piped in were silently lost.
    pub fn worker(&self, peers: usize) -> usize {
        if self.is_stdin() { 0 } else { self.index % peers }
    }

    /// Whether this is the split of standard input, the only one read to its end.
    pub fn is_stdin(&self) -> bool {
        self.end == u64::MAX
    }
}

/// Splits each worker should get at least, so that the work evens out between workers: under
/// the static assignment a worker with one split more waits for nothing else, and where splits
/// are claimed (the filter build) the job's tail is at most the last split, a 64th of a share.
pub const SPLITS_PER_WORKER: u64 = 64;
/// The smallest split the balancing chooses (a split has a fixed cost: a file open, a seek).
pub const MIN_BALANCED_SPLIT: u64 = 1 << 20;

/// The smallest bzip2 split the balancing chooses: a split decodes one block (up to 900 kB of
/// text) past its end to finish its last record, so a split of 8 MiB, some 20 blocks, reads
/// about 5% more than its share.
pub const MIN_BALANCED_BZIP2_SPLIT: u64 = 8 << 20;

/// The split size used: the requested one, lowered for inputs too small to give every one of
/// `peers` workers [`SPLITS_PER_WORKER`] splits, but not below 1 MiB. Every process computes
/// the same from the same inputs.
pub fn balanced_split_size(requested: u64, total_bytes: u64, peers: usize) -> u64 {
    let balanced = total_bytes.div_ceil(peers.max(1) as u64 * SPLITS_PER_WORKER).max(MIN_BALANCED_SPLIT);
    requested.min(balanced)
}

/// Cuts every input into splits of at most `split_size` bytes. An empty file has no split;
/// standard input is one split, and so is a compressed file, whatever its size (its range is
/// then its compressed bytes, which weigh it against other splits and measure progress), but
/// for bzip2, which is cut as plain text is (see `bzip2_blocks`).
///
/// A bzip2 file is cut into splits of `bzip2_split_size` bytes.
pub fn plan_splits(inputs: &[Input], split_size: u64, bzip2_split_size: u64) -> Result<Vec<Split>> {
    if split_size == 0 {
        return Err(Error::invalid("split size", "must be at least 1 byte"));
    }
    let mut splits = Vec::new();
    for (input_index, input) in inputs.iter().enumerate() {
        match input {
            Input::Stdin => splits.push(Split { index: splits.len(), input: input_index, start: 0, end: u64::MAX }),
            Input::File { len: 0, .. } => {}
            Input::File { len, compression, .. } if !compression.splittable() => {
                splits.push(Split { index: splits.len(), input: input_index, start: 0, end: *len })
            }
            &Input::File { len, compression, .. } => {
                let size = if compression == Compression::Bzip2 { bzip2_split_size.max(1) } else { split_size };
                let mut start = 0;
                while start < len {
                    let end = start.saturating_add(size).min(len);
                    splits.push(Split { index: splits.len(), input: input_index, start, end });
                    start = end;
                }
            }
        }
    }
    Ok(splits)
}

/// How far past a split's planned start a record start is looked for under `--multiline`
/// ([`align_to_records`]). The usual records give one within a line or two of the first quote;
/// a text with fewer quotes than one in this many bytes gives none, and is read in fewer splits.
pub const MULTILINE_PROBE: usize = 1 << 20;

/// Moves the start of each split of a plain file to a record start that is certain under
/// `--multiline` (quoted fields may hold newlines): the first found past the planned start
/// ([`crate::records::certain_record_start`]), which the split before then ends at. Where none
/// is found within [`MULTILINE_PROBE`] bytes, the split is joined to the one before. Every split
/// then holds whole records, read from a record's start as a reader of the whole input would
/// read them, and no record is read twice or lost. A compressed file is one split.
///
/// Spark reads a `multiLine` CSV file whole, in one task: so did bloomflow, before this. Every
/// process computes the same splits from the same bytes; the probes read a few KiB a split
/// where quotes are common, up to [`MULTILINE_PROBE`] where they are rare, and no more than
/// 4 MiB and a sixteenth of an input in all (`probe_budget`).
pub fn align_to_records(splits: Vec<Split>, inputs: &[Input], line_ends: &[LineEnds], delimiter: u8, max_record: usize) -> Result<Vec<Split>> {
    let mut aligned: Vec<Split> = Vec::with_capacity(splits.len());
    // The bytes the probes of the current input have read.
    let mut probed = 0u64;
    for split in splits {
        let plain = matches!(&inputs[split.input], Input::File { compression: Compression::None, .. });
        let previous = aligned.last_mut().filter(|p| p.input == split.input);
        let (Some(previous), true, Input::File { path, len, .. }) = (previous, plain, &inputs[split.input]) else {
            aligned.push(Split { index: aligned.len(), ..split });
            probed = 0;
            continue;
        };
        let found = match probed < probe_budget(*len) {
            true => record_start_near(path, split.start, line_ends[split.input], delimiter, max_record)?,
            false => (None, 0),
        };
        probed += found.1;
        match found.0 {
            Some(start) if start > previous.start && start < *len => {
                previous.end = start;
                aligned.push(Split { index: aligned.len(), start, end: split.end.max(start), ..split });
            }
            // (A split left empty by a record that runs past its end grows to the next start.)
            _ => previous.end = previous.end.max(split.end),
        }
    }
    Ok(aligned)
}

/// The first record start past the line that holds byte `at - 1` of the plain file `path` that
/// is certain under `--multiline`, as [`align_to_records`] moves a split's start to; None if
/// there is none within [`MULTILINE_PROBE`] bytes. Where a sample of the file may start reading.
pub fn multiline_record_start(path: &Path, at: u64, ends: LineEnds, delimiter: u8, max_record: usize) -> Result<Option<u64>> {
    Ok(record_start_near(path, at, ends, delimiter, max_record)?.0)
}

/// The bytes the probes of an input of `len` bytes may read, past which its later splits are
/// joined to the ones before: 4 MiB and a sixteenth of the input. Where no probe finds a record
/// start, each reads [`MULTILINE_PROBE`] bytes and parses them twice: on a 105 MB text whose
/// quoted fields all read as records themselves, its 127 probes took 2.4 s, more than a
/// reading of the whole text took.
fn probe_budget(len: u64) -> u64 {
    4 * MULTILINE_PROBE as u64 + len / 16
}

/// The first record start past the line that holds byte `at - 1` of the plain file `path`
/// which is certain whatever state that line's newline is in (see [`align_to_records`]); None
/// if there is none within [`MULTILINE_PROBE`] bytes past that line. And the bytes looked at:
/// up to the start, or all those read.
fn record_start_near(path: &Path, at: u64, ends: LineEnds, delimiter: u8, max_record: usize) -> Result<(Option<u64>, u64)> {
    let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
    let from = at - 1;
    file.seek(SeekFrom::Start(from)).map_err(|e| Error::io(path, e))?;
    // A few KiB usually hold the answer: read more only if they do not.
    let (mut window, mut want) = (Vec::new(), 4096usize);
    loop {
        let before = window.len();
        (&mut file).take((want - before) as u64).read_to_end(&mut window).map_err(|e| Error::io(path, e))?;
        if ends == LineEnds::Cr {
            cr_to_lf(&mut window[before..]);
        }
        let whole = window.len() < want;
        let past_line = memchr::memchr(b'\n', &window).map_or(window.len(), |i| i + 1);
        let past = &window[past_line..];
        if let Some(start) = crate::records::certain_record_start(past, delimiter, max_record) {
            return Ok((Some(from + (past_line + start) as u64), (past_line + start) as u64));
        }
        if whole || past.len() >= MULTILINE_PROBE || past_line > MULTILINE_PROBE {
            return Ok((None, window.len() as u64));
        }
        want = (2 * want).min(past_line + MULTILINE_PROBE);
    }
}

/// How a file's lines end. Hadoop's `LineReader` ends a line at LF, CRLF or a CR alone;
/// bloomflow's scan looks for LF only (a CR before it is dropped), so a file whose lines end in
/// CR alone (as classic Mac OS and some exports write them) is read with each CR as an LF.
/// Without that, its whole text would be one record: a small file would give a filter of one
/// key, or none, and no error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LineEnds {
    /// LF or CRLF; a CR anywhere else is data.
    #[default]
    Lf,
    /// CR alone: every CR read ends a line (an LF, should one come later, ends one too, so a
    /// CRLF reads as a line and an empty one, which is skipped, as Hadoop's reader takes it).
    Cr,
    /// Not known before reading: the reader tells them from its first bytes, as from a
    /// [`TextStart`] (standard input, which cannot be looked at first).
    Detect,
}

impl LineEnds {
    /// Bytes of a file's text that [`detect`](Self::detect) looks at: enough for many lines.
    pub const SAMPLE: usize = 64 << 10;

    /// The line ends of a text whose first bytes are `sample` (`whole`: the text is no longer):
    /// CR alone if they hold no LF and a CR that ends a line, one with a byte after it in the
    /// sample or at the text's very end (a CR that ends the sample might be a CRLF's first half).
    pub fn detect(sample: &[u8], whole: bool) -> LineEnds {
        if memchr::memchr(b'\n', sample).is_some() {
            return LineEnds::Lf;
        }
        let ending = if whole { sample } else { &sample[..sample.len().saturating_sub(1)] };
        if memchr::memchr(b'\r', ending).is_some() { LineEnds::Cr } else { LineEnds::Lf }
    }

    /// [`detect`](Self::detect) of a [`TextStart`].
    pub fn of(start: &TextStart) -> LineEnds {
        Self::detect(&start.bytes, start.whole)
    }
}

/// The first bytes of a text: what its line ends and its first line are told from, with one
/// read of its file. At least [`LineEnds::SAMPLE`] bytes, and on to a line end that is not the
/// last byte (a header longer than the sample, whose CR would otherwise go unseen), up to a
/// limit.
#[derive(Clone, Debug, Default)]
pub struct TextStart {
    pub bytes: Vec<u8>,
    /// The bytes are the whole text.
    pub whole: bool,
}

impl TextStart {
    /// The start of the text `source` reads, which stops looking for a line end once past
    /// `limit` bytes.
    pub fn read(mut source: impl Read, limit: usize) -> std::io::Result<TextStart> {
        let mut bytes = Vec::new();
        let mut want = LineEnds::SAMPLE;
        loop {
            let from = bytes.len();
            // (`read_to_end` neither zeroes the buffer first nor, for a small file, allocates
            // more than the file: a zeroed sample cost about 4 us a file.)
            source.by_ref().take((want - from) as u64).read_to_end(&mut bytes)?;
            if bytes.len() < want {
                return Ok(TextStart { bytes, whole: true });
            }
            if ends_a_line(&bytes, from.saturating_sub(1)) || bytes.len() > limit {
                return Ok(TextStart { bytes, whole: false });
            }
            want = 2 * bytes.len();
        }
    }

    /// The text's first line, as a reader of lines ending in `ends` gives it (with its
    /// terminator, a CR made an LF), if the sample holds all of it.
    pub fn first_line(&self, ends: LineEnds) -> Option<Vec<u8>> {
        let end = if ends == LineEnds::Cr { memchr::memchr2(b'\n', b'\r', &self.bytes) } else { memchr::memchr(b'\n', &self.bytes) };
        match end {
            Some(i) if ends == LineEnds::Cr => Some([&self.bytes[..i], b"\n"].concat()),
            Some(i) => Some(self.bytes[..=i].to_vec()),
            None if self.whole => Some(self.bytes.clone()),
            None => None,
        }
    }
}

/// Whether `bytes` from `from` on hold a line end, LF or CR, that is surely one: not in the last
/// byte, where a CR may be the first half of a CRLF not read yet. How a sample of a text's first
/// bytes (a [`TextStart`], or standard input's first read) knows it has read enough.
fn ends_a_line(bytes: &[u8], from: usize) -> bool {
    memchr::memchr2(b'\n', b'\r', &bytes[from..bytes.len() - 1]).is_some()
}

/// How a reader knows the number of a line, for its messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Numbering {
    /// It began at its text's first line: its records are the lines.
    FromReaderStart,
    /// It began inside a plain file, whose lines before it can be counted.
    CountedInFile,
    /// It began inside a text whose lines before it are not read.
    Unknown,
}

/// The error for file `path`, which ended before byte `planned`, where the job's plan of its
/// splits (made from its size when the job started) had one end: it shrank while the job read
/// it, and the records past its new end would be missing from the job's output without a word
/// (Hadoop's line reader ends such a split quietly).
pub(crate) fn shrank(path: &Path, planned: u64) -> Error {
    // The size now, not where the read stopped: a split that starts past the new end seeks
    // there and reads nothing.
    let now = std::fs::metadata(path).map(|m| format!(" (it holds {} bytes now)", m.len())).unwrap_or_default();
    let why = format!("the file ends before byte {planned} where the job planned a split of it to end{now}: it shrank while the job read it");
    Error::io(path, std::io::Error::new(std::io::ErrorKind::UnexpectedEof, why))
}

/// Reads the records (lines) of one split with large reads and no per-line allocation.
pub struct SplitReader<R> {
    source: R,
    buf: Vec<u8>,
    /// Unconsumed bytes are buf[pos..filled].
    pos: usize,
    filled: usize,
    /// File offset of `buf[pos]`.
    offset: u64,
    end: u64,
    /// Where the source says the split's records end, once it knows (a bzip2 split, once it has
    /// decoded its last block): `end` follows it.
    ends_at: Option<Arc<AtomicU64>>,
    eof: bool,
    max_record: usize,
    name: String,
    /// Records returned so far, and how the number of a line is known: counted from the
    /// reader's start, or from the file's start, or not at all.
    records: u64,
    numbering: Numbering,
    /// With [`LineEnds::Cr`], each CR read is turned into an LF as it arrives, so that every
    /// step after the read, which looks for LF, sees the lines.
    line_ends: LineEnds,
    /// With `--multiline`, the delimiter of records whose quoted fields may hold newlines: the
    /// ranges given end at records' ends, not at every line's.
    multiline: Option<u8>,
    /// Whether the source must reach `end` before it ends: a split of a file, planned from its
    /// size when the job started (a file that ends sooner shrank while the job read it).
    planned: bool,
}

/// Bytes asked of each `read`. The kernel copies them into the buffer and the scan reads them
/// back at once: at 256 KiB the buffer stays in a core's L2 cache (1 MiB here) between the two,
/// where 1 MiB evicted itself. Measured, interleaved, on the 1.5 GB probe: semijoin `--exact`
/// `-w 2` 0.32 -> 0.31 s, Bloom-only 0.27 -> 0.26 s, with less spread; `-w 1` unchanged.
pub(crate) const READ_SIZE: usize = 256 << 10;

impl SplitReader<File> {
    /// Opens `split` of a file input, positioned at the first record that starts in it.
    pub fn open(path: &Path, split: &Split, max_record: usize) -> Result<Self> {
        Self::open_with(path, split, max_record, Vec::new(), LineEnds::Lf)
    }

    /// [`open`](Self::open), reading into `buffer` (the one a reader of an earlier split gave
    /// back with [`into_buffer`](SplitReader::into_buffer)): a worker reading one split after
    /// another allocates and zeroes its buffer once, not once per split. Its lines end in
    /// `line_ends`.
    pub fn open_with(path: &Path, split: &Split, max_record: usize, buffer: Vec<u8>, line_ends: LineEnds) -> Result<Self> {
        let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
        let seek_to = split.start.saturating_sub(1);
        file.seek(SeekFrom::Start(seek_to)).map_err(|e| Error::io(path, e))?;
        // A small split needs no full-size buffer (it grows if a record runs past the split); a
        // reused one is kept as it is.
        let capacity = (split.end - seek_to).saturating_add(4096).min(READ_SIZE as u64) as usize;
        let mut reader =
            SplitReader::with_buffer(file, seek_to, split.end, max_record, path.display().to_string(), buffer, capacity).with_line_ends(line_ends);
        reader.planned = true;
        if split.start > 0 {
            // The record holding byte start-1 belongs to an earlier split; skip through its
            // newline. If byte start-1 is itself a newline, this skips just that byte.
            reader.skip_line()?;
        }
        Ok(reader)
    }
}

impl<R: Read> SplitReader<R> {
    /// A reader over `source`, whose first byte is at file offset `offset`, for records starting
    /// before `end`.
    pub fn new(source: R, offset: u64, end: u64, max_record: usize, name: String) -> Self {
        Self::with_capacity(source, offset, end, max_record, name, READ_SIZE)
    }

    /// As `new`, with a first buffer of `capacity` bytes.
    pub fn with_capacity(source: R, offset: u64, end: u64, max_record: usize, name: String, capacity: usize) -> Self {
        Self::with_buffer(source, offset, end, max_record, name, Vec::new(), capacity)
    }

    /// As `with_capacity`, in `buffer`, grown to `capacity` bytes if it is shorter (its contents
    /// do not matter: only bytes read into it are ever looked at).
    pub(crate) fn with_buffer(source: R, offset: u64, end: u64, max_record: usize, name: String, mut buffer: Vec<u8>, capacity: usize) -> Self {
        if buffer.len() < capacity.max(1) {
            buffer.resize(capacity.max(1), 0);
        }
        SplitReader {
            source,
            buf: buffer,
            pos: 0,
            filled: 0,
            offset,
            end,
            ends_at: None,
            eof: false,
            max_record,
            name,
            records: 0,
            numbering: if offset == 0 { Numbering::FromReaderStart } else { Numbering::CountedInFile },
            line_ends: LineEnds::Lf,
            multiline: None,
            planned: false,
        }
    }

    /// Makes [`next_lines`](Self::next_lines) end its ranges at records' ends where quoted
    /// fields may hold newlines (`--multiline`), fields being cut at `delimiter`; `None`: at
    /// every line's end. A reader given a delimiter must start at a record's start and end at
    /// one, as the splits [`align_to_records`] makes do: it gives the records up to its end.
    pub fn set_multiline(&mut self, delimiter: Option<u8>) {
        self.multiline = delimiter;
    }

    /// Makes the reader read lines that end in `line_ends` (before it reads anything).
    pub fn with_line_ends(mut self, line_ends: LineEnds) -> Self {
        debug_assert_eq!(self.filled, 0, "set before the first read");
        self.line_ends = line_ends;
        self
    }

    /// Makes the reader stop at the offset `end` holds, which its source sets once it knows it
    /// (before it gives any byte past it).
    pub(crate) fn ending_at(mut self, end: Arc<AtomicU64>) -> Self {
        self.end = end.load(Ordering::Relaxed);
        self.ends_at = Some(end);
        self
    }

    /// Moves unconsumed bytes to the front and reads more; grows the buffer for long lines.
    fn refill(&mut self) -> Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.line_ends == LineEnds::Detect {
            return self.read_sample();
        }
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.filled, 0);
            self.filled -= self.pos;
            self.pos = 0;
        }
        if self.filled == self.buf.len() {
            if self.buf.len() > self.max_record {
                return Err(self.too_long());
            }
            let grown = (self.buf.len() * 2).min(self.max_record + 1);
            self.buf.resize(grown.max(self.buf.len() + 1), 0);
        }
        loop {
            match self.source.read(&mut self.buf[self.filled..]) {
                Ok(0) => {
                    self.reached_eof()?;
                    return Ok(self.filled > self.pos);
                }
                Ok(n) => {
                    if self.line_ends == LineEnds::Cr {
                        cr_to_lf(&mut self.buf[self.filled..self.filled + n]);
                    }
                    self.filled += n;
                    if let Some(end) = &self.ends_at {
                        self.end = end.load(Ordering::Relaxed);
                    }
                    return Ok(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io(&self.name, e)),
            }
        }
    }

    /// Notes the source's end, refusing one before the split's planned end ([`shrank`]).
    fn reached_eof(&mut self) -> Result<()> {
        self.eof = true;
        let read_to = self.offset + (self.filled - self.pos) as u64;
        if self.planned && read_to < self.end {
            return Err(shrank(Path::new(&self.name), self.end));
        }
        Ok(())
    }

    /// Discards bytes through the next newline.
    pub(crate) fn skip_line(&mut self) -> Result<()> {
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[self.pos..self.filled]) {
                self.offset += (i + 1) as u64;
                self.pos += i + 1;
                return Ok(());
            }
            self.offset += (self.filled - self.pos) as u64;
            self.pos = self.filled;
            if !self.refill()? {
                return Ok(());
            }
        }
    }

    /// The next record that starts in this split, with its terminator (LF or CRLF, or the LF a
    /// CR was made with [`LineEnds::Cr`]; absent on a last line without one), and its file
    /// offset. `None` once past the split.
    #[inline]
    pub fn next_record(&mut self) -> Result<Option<(u64, &[u8])>> {
        if self.offset >= self.end {
            return Ok(None);
        }
        let mut searched = 0;
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[self.pos + searched..self.filled]) {
                let start = self.pos;
                let len = searched + i + 1;
                return self.consume(start, len).map(Some);
            }
            searched = self.filled - self.pos;
            if !self.refill()? {
                if self.filled == self.pos {
                    return Ok(None);
                }
                // A last line without a newline.
                let (start, len) = (self.pos, self.filled - self.pos);
                return self.consume(start, len).map(Some);
            }
        }
    }

    #[inline]
    fn consume(&mut self, start: usize, len: usize) -> Result<(u64, &[u8])> {
        if len > self.max_record {
            return Err(self.too_long());
        }
        let offset = self.offset;
        self.pos = start + len;
        self.offset += len as u64;
        self.records += 1;
        Ok((offset, &self.buf[start..start + len]))
    }

    /// Makes the reader give no line numbers: it starts inside a text whose lines before it
    /// are never read (a bzip2 split after the first).
    pub(crate) fn uncounted(mut self) -> Self {
        self.numbering = Numbering::Unknown;
        self
    }

    fn too_long(&self) -> Error {
        let line = match self.numbering {
            Numbering::FromReaderStart => self.records + 1,
            Numbering::CountedInFile => line_number(Path::new(&self.name), self.offset, self.line_ends).unwrap_or(UNCOUNTED_LINE),
            Numbering::Unknown => UNCOUNTED_LINE,
        };
        Error::Malformed {
            path: self.name.clone(),
            line,
            reason: format!(
                "record is longer than the limit of {} bytes (--max-record-bytes){}",
                self.max_record,
                if self.multiline.is_some() { "; with --multiline, a quote left open makes the rest of the input one record" } else { "" }
            ),
        }
    }

    /// The first read of a reader told [`LineEnds::Detect`]: reads until it has a sample as a
    /// [`TextStart`] is (at least [`LineEnds::SAMPLE`] bytes and a line end, or the whole text,
    /// or a full buffer), tells its line ends from it and reads on with them (the sample's CRs
    /// made LFs where they end lines).
    #[cold]
    fn read_sample(&mut self) -> Result<bool> {
        debug_assert_eq!((self.pos, self.filled), (0, 0), "the first read");
        let want = LineEnds::SAMPLE.min(self.buf.len());
        // The bytes before this hold no line end (each byte is looked at once, however few
        // each read gives).
        let mut looked = 0;
        while self.filled < self.buf.len() {
            match self.source.read(&mut self.buf[self.filled..]) {
                Ok(0) => {
                    self.reached_eof()?;
                    break;
                }
                Ok(n) => self.filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(&self.name, e)),
            }
            if self.filled >= want {
                if ends_a_line(&self.buf[..self.filled], looked) {
                    break;
                }
                looked = self.filled - 1;
            }
        }
        self.line_ends = LineEnds::detect(&self.buf[..self.filled], self.eof);
        if self.line_ends == LineEnds::Cr {
            cr_to_lf(&mut self.buf[..self.filled]);
        }
        Ok(self.filled > 0)
    }

    /// Every complete record in the buffer that starts in this split, as one range of
    /// [`buffer`]: whole lines, each with its terminator (the input's last line may lack one),
    /// the first at the returned file offset. Empty once the split is done; reads more when
    /// the buffer holds no complete record. The range stays valid until the next call.
    ///
    /// The caller walks the lines itself ([`run_lines`]), or as it looks for their fields
    /// (`scan`): one pass over the bytes, where finding a batch's lines here first made two
    /// (see `scan::direct_lines`). `taken` is the number of records of this reader the caller
    /// has taken so far, by which a record over the limit is numbered.
    ///
    /// [`buffer`]: SplitReader::buffer
    pub fn next_lines(&mut self, taken: u64) -> Result<(u64, std::ops::Range<usize>)> {
        self.records = taken;
        loop {
            let offset = self.offset;
            if offset >= self.end {
                return Ok((offset, self.pos..self.pos));
            }
            let ready = &self.buf[self.pos..self.filled];
            let complete = match self.multiline {
                // The split ends at a record's start (`align_to_records`): the records ready
                // are those that end, up to it.
                Some(delimiter) => {
                    let (bom, limit) = (bom_at(offset, ready), ready.len().min((self.end - offset) as usize));
                    crate::records::late_record_end(&ready[bom.min(limit)..limit], delimiter).map(|end| bom + end)
                }
                None => {
                    // The split's last record holds its byte end - 1, and ends at the first
                    // newline from there; if that is not in the buffer yet, the records before
                    // it are ready.
                    let last = (self.end - offset - 1).min(ready.len() as u64) as usize;
                    memchr::memchr(b'\n', &ready[last..]).map(|i| last + i + 1).or_else(|| memchr::memrchr(b'\n', &ready[..last]).map(|i| i + 1))
                }
            };
            let len = match complete {
                Some(len) => len,
                // The input's last line, without a newline (or nothing: the split is done).
                None if self.eof => ready.len(),
                None => {
                    self.refill()?;
                    continue;
                }
            };
            if len > self.max_record {
                self.check_lengths(len)?;
            }
            let start = self.pos;
            self.pos += len;
            self.offset += len as u64;
            return Ok((offset, start..start + len));
        }
    }

    /// Fails for the first of the next `len` bytes' records that is longer than the limit:
    /// only a limit below the buffer's size lets one be read whole.
    #[cold]
    fn check_lengths(&mut self, len: usize) -> Result<()> {
        let mut start = 0;
        let ready = &self.buf[self.pos..self.pos + len];
        let ends: Vec<usize> = match self.multiline {
            Some(delimiter) => {
                let bom = bom_at(self.offset, ready);
                crate::records::record_ends(&ready[bom..], delimiter).map(|end| bom + end).collect()
            }
            None => memchr::memchr_iter(b'\n', ready).map(|i| i + 1).collect(),
        };
        for end in ends.into_iter().chain(std::iter::once(len)) {
            if end - start > self.max_record {
                self.offset += start as u64;
                return Err(self.too_long());
            }
            // Lines, by which records are numbered: more than one for a record of --multiline.
            self.records += memchr::memchr_iter(b'\n', &self.buf[self.pos + start..self.pos + end]).count().max(1) as u64;
            start = end;
        }
        Ok(())
    }

    /// The buffer that [`next_lines`](SplitReader::next_lines)' ranges index.
    pub fn buffer(&self) -> &[u8] {
        &self.buf
    }

    /// The reader's buffer, for the reader of the next split ([`SplitReader::open_with`]).
    pub fn into_buffer(self) -> Vec<u8> {
        self.buf
    }

    /// Bytes consumed so far, as a file offset.
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

/// The length of the byte order mark that `ready`, at file (or text) offset `offset`, starts
/// with where it is the input's start: `--multiline`'s records are read past it, as the scan
/// reads them. Read as a record's first bytes, it hid the quote of a first field that opens
/// with one, whose line breaks then ended records (a file of one such record, without a final
/// newline, failed as an unclosed quote).
fn bom_at(offset: u64, ready: &[u8]) -> usize {
    if offset == 0 { crate::records::bom_len(ready) } else { 0 }
}

/// The lines of a run of [`SplitReader::next_lines`], each with its terminator (the last may
/// lack one).
pub fn run_lines(run: &[u8]) -> RunLines<'_> {
    RunLines { run, start: 0, newlines: ByteIter::new(run, b'\n') }
}

/// The iterator of [`run_lines`].
pub struct RunLines<'a> {
    run: &'a [u8],
    /// Where the next line starts.
    start: usize,
    newlines: ByteIter<'a>,
}

impl<'a> Iterator for RunLines<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let end = match self.newlines.next() {
            Some(newline) => newline + 1,
            None if self.start < self.run.len() => self.run.len(),
            None => return None,
        };
        let line = &self.run[self.start..end];
        self.start = end;
        Some(line)
    }
}

/// Every CR in `bytes` made an LF (a loop the compiler vectorizes: about as fast as the copy
/// that read the bytes).
pub(crate) fn cr_to_lf(bytes: &mut [u8]) {
    for b in bytes {
        if *b == b'\r' {
            *b = b'\n';
        }
    }
}

/// The 1-based line number of the record at `offset` in `path`, whose lines end in
/// `line_ends`, for error messages (counts the line ends before it; only ever called for the
/// few records that are reported).
pub fn line_number(path: &Path, offset: u64, line_ends: LineEnds) -> Option<u64> {
    let mut file = File::open(path).ok()?;
    let mut left = offset;
    let mut buf = vec![0u8; READ_SIZE];
    let mut lines = 1u64;
    while left > 0 {
        let want = (left as usize).min(buf.len());
        let n = file.read(&mut buf[..want]).ok()?;
        if n == 0 {
            break;
        }
        lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
        if line_ends == LineEnds::Cr {
            lines += memchr::memchr_iter(b'\r', &buf[..n]).count() as u64;
        }
        left -= n as u64;
    }
    Some(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every record of `data` read through splits of `size` bytes, with the records' offsets.
    fn read_all(data: &[u8], size: u64) -> Vec<(u64, Vec<u8>)> {
        read_all_ending(data, size, LineEnds::Lf)
    }

    /// [`read_all`] of a text whose lines end in `ends`.
    fn read_all_ending(data: &[u8], size: u64, ends: LineEnds) -> Vec<(u64, Vec<u8>)> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in");
        std::fs::write(&path, data).unwrap();
        let inputs = resolve_inputs(std::slice::from_ref(&path)).unwrap();
        let mut out = Vec::new();
        for split in plan_splits(&inputs, size, size).unwrap() {
            let mut r = SplitReader::open_with(&path, &split, 1 << 20, Vec::new(), ends).unwrap();
            while let Some((off, rec)) = r.next_record().unwrap() {
                assert!(off >= split.start && off < split.end);
                out.push((off, rec.to_vec()));
            }
        }
        out
    }

    fn whole(data: &[u8]) -> Vec<(u64, Vec<u8>)> {
        read_all(data, u64::MAX)
    }

    /// CR alone is told only where no LF comes first and a CR surely ends a line.
    #[test]
    fn line_ends_are_told_from_the_first_bytes() {
        use LineEnds::{Cr, Lf};
        for (text, whole, ends) in [
            (&b"id,k\r1,a\r2,b\r"[..], true, Cr),
            (b"id,k\r1,a", true, Cr),
            (b"id,k\r1,a", false, Cr),
            (b"id,k\r", true, Cr),
            // A sample that ends in a CR may be cut inside a CRLF.
            (b"id,k\r", false, Lf),
            (b"id,k\r\n1,a\r\n", true, Lf),
            (b"id,k\n1,a\r2,b\r", true, Lf),
            (b"id,k\n", true, Lf),
            (b"no line end at all", false, Lf),
            (b"", true, Lf),
        ] {
            assert_eq!(LineEnds::detect(text, whole), ends, "{:?}, whole: {whole}", String::from_utf8_lossy(text));
        }
        // From a reader: the sample's cut is known by the reader's end.
        let long_first_line = [vec![b'x'; LineEnds::SAMPLE - 1], b"\r\n".to_vec()].concat();
        let start = TextStart::read(&long_first_line[..], 1 << 20).unwrap();
        assert_eq!((LineEnds::of(&start), start.first_line(Lf)), (Lf, Some(long_first_line.clone())));
        let start = TextStart::read(&b"a\rb"[..], 1 << 20).unwrap();
        assert_eq!((LineEnds::of(&start), start.first_line(Cr)), (Cr, Some(b"a\n".to_vec())));
        for (text, ends, line) in [(&b"id\r\n1\r\n"[..], Lf, &b"id\r\n"[..]), (b"id\n", Lf, b"id\n"), (b"id", Lf, b"id"), (b"id\r1\r", Cr, b"id\n")] {
            assert_eq!(TextStart::read(text, 1 << 20).unwrap().first_line(ends), Some(line.to_vec()));
        }
        // A first line longer than the sample is read on to its end, a CR at any place.
        for at in [LineEnds::SAMPLE - 2, LineEnds::SAMPLE - 1, LineEnds::SAMPLE, 3 * LineEnds::SAMPLE] {
            let text = [vec![b'x'; at], b"\rnext\r".to_vec(), vec![b'y'; 2 * LineEnds::SAMPLE]].concat();
            let start = TextStart::read(&text[..], 1 << 20).unwrap();
            assert_eq!(LineEnds::of(&start), Cr, "CR at {at}");
            assert_eq!(start.first_line(Cr), Some([vec![b'x'; at], b"\n".to_vec()].concat()), "CR at {at}");
            // Past the limit, it is not looked for.
            assert_eq!(LineEnds::of(&TextStart::read(&text[..], LineEnds::SAMPLE / 2).unwrap()), if at < LineEnds::SAMPLE - 1 { Cr } else { Lf });
        }
    }

    /// A reader of CR-terminated lines gives the records of the text with each CR an LF, from
    /// any split, and counts lines by CRs (and LFs) where it must count them from the file.
    #[test]
    fn a_reader_of_cr_line_ends_reads_each_cr_as_an_lf() {
        let data = b"a,1\rbb,22\r\rccc,333\rlast-no-line-end";
        let expected: Vec<Vec<u8>> = [&b"a,1\n"[..], b"bb,22\n", b"\n", b"ccc,333\n", b"last-no-line-end"].map(|r| r.to_vec()).to_vec();
        for size in 1..=data.len() as u64 + 1 {
            let got: Vec<Vec<u8>> = read_all_ending(data, size, LineEnds::Cr).into_iter().map(|(_, rec)| rec).collect();
            assert_eq!(got, expected, "split size {size}");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in");
        std::fs::write(&path, data).unwrap();
        assert_eq!(line_number(&path, 14, LineEnds::Cr), Some(4));
        assert_eq!(line_number(&path, 14, LineEnds::Lf), Some(1));
    }

    /// A reader told to detect (standard input's) takes its first bytes as the sample, however
    /// few each read gives, and reads the rest with the line ends they show.
    #[test]
    fn a_reader_tells_line_ends_from_its_first_bytes() {
        /// Gives at most 7 bytes a read, as a slow pipe might.
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = buf.len().min(self.0.len()).min(7);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let records = |data: &[u8]| {
            let mut r = SplitReader::new(Trickle(data), 0, u64::MAX, 1 << 20, "in".into()).with_line_ends(LineEnds::Detect);
            let mut got = Vec::new();
            while let Some((_, rec)) = r.next_record().unwrap() {
                got.push(String::from_utf8(rec.to_vec()).unwrap());
            }
            got
        };
        // Past the sample, so that reads after it are made LFs too.
        let cr: String = (0..40_000).map(|i| format!("k{i}\r")).collect();
        assert!(cr.len() > READ_SIZE);
        let want: Vec<String> = (0..40_000).map(|i| format!("k{i}\n")).collect();
        assert_eq!(records(cr.as_bytes()), want);
        assert_eq!(records(b"a\rb\nc\r\n"), ["a\rb\n", "c\r\n"]);
        assert_eq!(records(b"a\rb"), ["a\n", "b"]);
        assert_eq!(records(b""), Vec::<String>::new());
        // A first line longer than the sample.
        let long = format!("{}\rk\r", "x".repeat(LineEnds::SAMPLE + 10));
        assert_eq!(records(long.as_bytes()), [format!("{}\n", "x".repeat(LineEnds::SAMPLE + 10)), "k\n".into()]);
    }

    #[test]
    fn every_split_size_reads_each_record_exactly_once() {
        let data = b"a,1\nbb,22\r\n\nccc,333\r\nlast-no-newline";
        let expected = whole(data);
        assert_eq!(expected.len(), 5);
        assert_eq!(expected[4].1, b"last-no-newline");
        for size in 1..=data.len() as u64 + 1 {
            assert_eq!(read_all(data, size), expected, "split size {size}");
        }
    }

    /// A file cut short after its splits were planned fails the splits that reach past its new
    /// end, in whichever line-end mode, naming it and where it ends, instead of giving fewer
    /// records; the splits before the cut read as planned.
    #[test]
    fn a_file_that_shrank_after_planning_fails_the_splits_past_its_end() {
        let data: Vec<u8> = (0..200).flat_map(|i| format!("{i},row-{i}\n").into_bytes()).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.csv");
        std::fs::write(&path, &data).unwrap();
        let inputs = resolve_inputs(std::slice::from_ref(&path)).unwrap();
        let splits = plan_splits(&inputs, 500, 500).unwrap();
        assert!(splits.len() > 3);
        let cut = 1200;
        std::fs::write(&path, &data[..cut]).unwrap();
        let read = |split: &Split, ends: LineEnds| -> Result<usize> {
            let mut r = SplitReader::open_with(&path, split, 1 << 20, Vec::new(), ends)?;
            let mut records = 0;
            while r.next_record()?.is_some() {
                records += 1;
            }
            Ok(records)
        };
        for ends in [LineEnds::Lf, LineEnds::Detect] {
            for split in &splits {
                match read(split, ends) {
                    Ok(records) => assert!(split.end <= cut as u64 && records > 0, "{split:?} read {records} records past the cut"),
                    Err(e) => {
                        assert!(split.end > cut as u64, "{split:?}: {e}");
                        let message = e.to_string();
                        assert!(message.contains("in.csv") && message.contains("shrank"), "{message}");
                        assert!(message.contains(&format!("ends before byte {}", split.end)) && message.contains(&format!("holds {cut} bytes now")), "{message}");
                    }
                }
            }
        }
    }

    #[test]
    fn runs_of_lines_give_the_same_records_as_one_at_a_time() {
        let data = b"a,1\nbb,22\r\n\nccc,333\r\nlast-no-newline";
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in");
        std::fs::write(&path, data).unwrap();
        let inputs = resolve_inputs(std::slice::from_ref(&path)).unwrap();
        for size in 1..=data.len() as u64 + 1 {
            let mut got = Vec::new();
            for split in plan_splits(&inputs, size, size).unwrap() {
                // A buffer smaller than a line, so that runs are cut where the buffer ends.
                let file = File::open(&path).unwrap();
                let mut r = SplitReader::open(&path, &split, 1 << 20).unwrap();
                if split.start == 0 {
                    r = SplitReader::with_capacity(file, 0, split.end, 1 << 20, "in".into(), 3);
                }
                let mut taken = 0;
                loop {
                    let (mut offset, run) = r.next_lines(taken).unwrap();
                    if run.is_empty() {
                        break;
                    }
                    for line in run_lines(&r.buffer()[run]) {
                        assert!(offset >= split.start && offset < split.end, "size {size}");
                        got.push((offset, line.to_vec()));
                        offset += line.len() as u64;
                        taken += 1;
                    }
                }
            }
            assert_eq!(got, whole(data), "split size {size}");
        }
    }

    /// A record longer than the limit and than the buffer: the run is never complete, and
    /// the buffer stops growing at the limit.
    #[test]
    fn a_run_whose_record_outgrows_the_limit_is_an_error() {
        let data = vec![b'x'; 3 << 20];
        let mut r = SplitReader::new(&data[..], 0, u64::MAX, 1 << 20, "big".into());
        let err = r.next_lines(0).unwrap_err().to_string();
        assert!(err.contains("big:1") && err.contains("longer than the limit"), "{err}");
    }

    /// A limit below the buffer's size: a run of whole lines is checked, and the first line
    /// over the limit is named by its number.
    #[test]
    fn a_run_with_a_line_over_a_small_limit_is_an_error_naming_it() {
        let data = b"short\nlonger line\nok\n";
        let mut r = SplitReader::new(&data[..], 0, u64::MAX, 8, "small".into());
        let err = r.next_lines(0).unwrap_err().to_string();
        assert!(err.contains("small") && err.contains(":2") && err.contains("longer than the limit of 8 bytes"), "{err}");
        let mut r = SplitReader::new(&data[..], 0, u64::MAX, 12, "small".into());
        let (_, run) = r.next_lines(0).unwrap();
        assert_eq!(&r.buffer()[run], &data[..]);
    }

    #[test]
    fn split_sizes_are_balanced_for_the_workers() {
        assert_eq!(balanced_split_size(64 << 20, 1_500_000_000, 2), 11_718_750);
        assert_eq!(balanced_split_size(64 << 20, 27_000_000, 2), 1 << 20);
        assert_eq!(balanced_split_size(64 << 20, 100 << 30, 4), 64 << 20);
        assert_eq!(balanced_split_size(7, 1 << 30, 2), 7);
    }

    /// Two inputs are one file where their device and inode are: a path given twice, a file
    /// beside its directory, a symbolic or hard link; distinct files are not, even of the same
    /// bytes.
    #[test]
    fn repeated_inputs_are_one_file_whatever_their_paths() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.csv"), dir.path().join("b.csv"));
        std::fs::write(&a, "x\n").unwrap();
        std::fs::write(&b, "x\n").unwrap();
        assert_eq!(repeated_input(&resolve_inputs(&[a.clone(), b.clone()]).unwrap()), None);
        let warning = repeated_input(&resolve_inputs(&[a.clone(), dir.path().to_path_buf()]).unwrap()).unwrap();
        assert!(warning.starts_with(&format!("{} is given twice", a.display())), "{warning}");
        assert!(repeated_input(&resolve_inputs(&[b.clone(), b.clone()]).unwrap()).unwrap().starts_with(&format!("{} is given twice", b.display())));
        let every = repeated_input(&resolve_inputs(&[a.clone(), b.clone(), a.clone(), b.clone(), b.clone()]).unwrap()).unwrap();
        let (shown_a, shown_b) = (a.display(), b.display());
        assert_eq!(every, format!("{shown_a} is given twice (and 1 more: {shown_b} is given twice): their records are read twice, as Hadoop and Spark read a path given twice"));
        #[cfg(unix)]
        {
            let link = dir.path().join("link");
            std::os::unix::fs::symlink(&a, &link).unwrap();
            let warning = repeated_input(&resolve_inputs(&[link.clone(), b, a.clone()]).unwrap()).unwrap();
            assert!(warning.starts_with(&format!("{} and {} are one file", link.display(), a.display())), "{warning}");
        }
    }

    /// The probes for `--multiline`'s record starts stop once they have looked at 4 MiB and a
    /// sixteenth of an input: after 5.6 MB whose two readings never agree, no later split of the
    /// input is probed and the whole input is one split; after 0.5 MB of it (probes that find a
    /// start just past it), the rest is split as usual.
    #[test]
    fn multiline_probes_stop_at_their_budget() {
        let dir = tempfile::tempdir().unwrap();
        let tail: String = (0..40_000).map(|i| format!("{i},\"k{i}\"\n")).collect();
        for (repeats, split) in [(800_000, false), (70_000, true)] {
            let path = dir.path().join(format!("head-{repeats}.csv"));
            let text = format!("{}{tail}", "\"x\n\",1\n".repeat(repeats));
            std::fs::write(&path, &text).unwrap();
            let inputs = resolve_inputs(&[path]).unwrap();
            let planned = plan_splits(&inputs, 64 << 10, u64::MAX).unwrap();
            let aligned = align_to_records(planned, &inputs, &[LineEnds::Lf], b',', DEFAULT_MAX_RECORD).unwrap();
            let in_tail = aligned.iter().filter(|s| s.start >= 7 * repeats as u64).count();
            assert_eq!(in_tail > 5, split, "{} splits, {in_tail} in the tail, after {repeats} out-of-step records", aligned.len());
        }
    }

    #[test]
    fn empty_file_has_no_splits() {
        assert!(read_all(b"", 10).is_empty());
    }

    #[test]
    fn a_line_longer_than_a_split() {
        let mut data = vec![b'x'; 5000];
        data.extend(b"\ny\n");
        let recs = read_all(&data, 7);
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].1.len(), 5001);
        assert_eq!(recs[1], (5001, b"y\n".to_vec()));
    }

    #[test]
    fn records_longer_than_the_limit_are_an_error() {
        let data = vec![b'x'; 3 << 20];
        let mut r = SplitReader::new(&data[..], 0, u64::MAX, 1 << 20, "big".into());
        let err = r.next_record().unwrap_err().to_string();
        assert!(err.contains("longer than the limit"), "{err}");
    }

    #[test]
    fn lines_are_counted_for_messages() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in");
        std::fs::write(&path, b"a\nb\nc\n").unwrap();
        assert_eq!(line_number(&path, 0, LineEnds::Lf), Some(1));
        assert_eq!(line_number(&path, 4, LineEnds::Lf), Some(3));
    }
}
