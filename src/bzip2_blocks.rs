//! Splittable bzip2, as Hadoop's BZip2Codec splits it. A bzip2 stream is a series of blocks (up
//! to 900 kB of text each), each opened by a 48-bit magic, π's digits 0x314159265359, at any bit
//! position, and each checked by its own CRC. So a split of a compressed file can find the blocks
//! whose magic starts in its byte range, and decode each alone: copied to the start of a stream
//! of its own ("BZh9", the block's bits, the end-of-stream magic, the block's CRC as the
//! stream's). Bzip2 is slow to decode (about 43 MB of text a second per core), so a large file
//! read by one worker would hold the job up; in splits, every worker reads a part of it.
//!
//! Records are divided as Hadoop divides them (its LineRecordReader on a splittable codec): a
//! split owns the blocks whose magic starts in its range and, of their text, the records that
//! start in it or right after it. It reads on into the next blocks to finish its last record,
//! and it drops its first line unless no text comes before it (the next split does the same, so
//! every record is read once).
//!
//! A magic is 48 bits: in random compressed bits one turns up by chance about once per 30 TB.
//! Such a false magic cannot end a block (the block cut there fails its CRC, and is cut at the
//! next magic instead) and cannot start one (a block begun there fails to decode); a split whose
//! first magic fails finds the block around it from the one before, so that a false magic never
//! drops a real block, and a damaged file fails the job.

use crate::compressed::{decoding_error, Compression};
use crate::error::{Error, Result};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Opens every block.
const BLOCK_MAGIC: u64 = 0x3141_5926_5359;
/// Ends every stream, followed by the stream's CRC.
const END_MAGIC: u64 = 0x1772_4538_5090;
const MAGIC_MASK: u64 = (1 << 48) - 1;
/// The most compressed bits a block can take: 900 kB of text, which bzip2's first run-length
/// step cannot make longer, at worst a little over 8 bits a byte, plus its tables.
const MAX_BLOCK_BITS: u64 = 8 * 1_100_000;
/// Bytes read from the file at a time, at most; a small split reads less at a time.
const READ_CHUNK: usize = 4 << 20;
const MIN_READ_CHUNK: usize = 64 << 10;

/// A block or end-of-stream magic, at a bit offset of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marker {
    pub bit: u64,
    pub end_of_stream: bool,
}

/// For each byte value, the bit shifts at which a magic ending `shift` bits before the end of a
/// byte has that value as the byte before (bits 32 + shift to 40 + shift of the magic): most
/// bytes are no magic's at any shift, and are passed over after one look-up.
const BYTE_BEFORE_END: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut shift = 0;
    while shift < 8 {
        table[((BLOCK_MAGIC >> (8 - shift)) & 0xff) as usize] |= 1 << shift;
        table[((END_MAGIC >> (8 - shift)) & 0xff) as usize] |= 1 << shift;
        shift += 1;
    }
    table
};

/// Appends to `out`, in order, the magics that end in `bytes[from..]` and begin inside `bytes`
/// (which holds the file from byte `first_byte`): every bit alignment is tried, since blocks
/// are not byte-aligned.
pub fn find_markers(bytes: &[u8], first_byte: u64, from: usize, out: &mut Vec<Marker>) {
    // A magic ending in byte i begins at least 5 bytes before it.
    for i in from.max(5)..bytes.len() {
        let shifts = BYTE_BEFORE_END[bytes[i - 1] as usize];
        if shifts == 0 {
            continue;
        }
        // The 64 bits ending with byte i, most significant first.
        let window = bytes[i.saturating_sub(7)..=i].iter().fold(0u64, |w, &b| w << 8 | b as u64);
        for shift in (0..8u64).rev().filter(|s| shifts >> s & 1 == 1) {
            let value = (window >> shift) & MAGIC_MASK;
            // The 48 bits ending `shift` bits before the end of byte i begin at bit 8i - 40 - shift.
            if (value == BLOCK_MAGIC || value == END_MAGIC) && 8 * i as u64 >= 40 + shift {
                out.push(Marker { bit: 8 * first_byte + 8 * i as u64 - 40 - shift, end_of_stream: value == END_MAGIC });
            }
        }
    }
}

/// Writes bits to `out`, most significant first.
struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    acc: u64,
    bits: u32,
}

impl BitWriter<'_> {
    fn push(&mut self, value: u64, count: u32) {
        debug_assert!(count <= 32);
        self.acc = self.acc << count | (value & ((1u64 << count) - 1));
        self.bits += count;
        while self.bits >= 8 {
            self.bits -= 8;
            self.out.push((self.acc >> self.bits) as u8);
        }
    }

    /// Pads the last byte with zero bits.
    fn finish(mut self) {
        if self.bits > 0 {
            let pad = 8 - self.bits;
            self.push(0, pad);
        }
    }
}

/// `count` ≤ 32 bits of `bytes` from bit `at`, most significant first.
fn bits_at(bytes: &[u8], at: u64, count: u32) -> u64 {
    let first = (at / 8) as usize;
    let mut value = 0u64;
    for k in 0..5 {
        value = value << 8 | *bytes.get(first + k).unwrap_or(&0) as u64;
    }
    (value >> (40 - (at % 8) as u32 - count)) & ((1u64 << count) - 1)
}

/// A one-block bzip2 stream holding the block at bits `from..to` of `bytes`: "BZh9" (the largest
/// block size, which holds any block), the block, the end-of-stream magic and, as the stream's
/// CRC, the block's (the 32 bits after its magic: a one-block stream's CRC is its block's).
pub fn single_block_stream(bytes: &[u8], from: u64, to: u64, out: &mut Vec<u8>) {
    out.clear();
    out.reserve(((to - from) / 8) as usize + 16);
    out.extend_from_slice(b"BZh9");
    let mut writer = BitWriter { out, acc: 0, bits: 0 };
    let mut at = from;
    while at + 32 <= to {
        writer.push(bits_at(bytes, at, 32), 32);
        at += 32;
    }
    if at < to {
        writer.push(bits_at(bytes, at, (to - at) as u32), (to - at) as u32);
    }
    writer.push(END_MAGIC >> 24, 24);
    writer.push(END_MAGIC & 0xff_ffff, 24);
    writer.push(bits_at(bytes, from + 48, 32), 32);
    writer.finish();
}

/// The text of the one-block stream `stream`, into `text`; an error if the block does not
/// decode whole (a damaged block, or a false magic at either end).
fn decode(stream: &[u8], text: &mut Vec<u8>) -> std::io::Result<()> {
    text.clear();
    bzip2::read::BzDecoder::new(stream).read_to_end(text).map(|_| ())
}

/// The text of one split of a bzip2 file: its first block's, then each next block's, through
/// the end of the file (a split's reader stops once past its records). Tells the reader where
/// the split's records end (`records_end`) once it has decoded the split's last block, and the
/// split's progress in compressed bytes.
pub struct Bzip2Split {
    file: File,
    path: PathBuf,
    file_len: u64,
    /// File bytes from `window_start`, read so far.
    window: Vec<u8>,
    window_start: u64,
    /// Magics found at or after `scanned_from`, in order; bytes are scanned up to `scanned_to`.
    markers: Vec<Marker>,
    scanned_to: u64,
    /// The split's byte range: it owns the blocks whose magic starts in it.
    start: u64,
    end: u64,
    /// The next block to decode, as its magic's bit; `None` at the end of the file.
    next_block: Option<u64>,
    /// The text of the block being read, and how much of it is read.
    text: Vec<u8>,
    taken: usize,
    stream: Vec<u8>,
    /// Text bytes given so far.
    given: u64,
    /// The block whose text `text` holds already (decoded when the split was opened), and the
    /// bit where it ends.
    decoded: Option<(u64, u64)>,
    /// Where the split's records end, shared with its reader: one past the text offset where
    /// its last block's text ends (a record starting right there is still the split's).
    records_end: Arc<AtomicU64>,
    /// Compressed bytes of the split read so far, for progress.
    progress: Arc<AtomicU64>,
    /// Whether text comes before the split's first block (then its first line is the end of an
    /// earlier split's record).
    text_before: bool,
}

impl Bzip2Split {
    /// The text of the split `start..end` of bzip2 file `path`, from its first block on; the
    /// reader must stop at `records_end` once it is set (it starts at `u64::MAX`). Fails if no
    /// block decodes where one begins (a damaged file).
    pub fn open(path: &Path, start: u64, end: u64) -> Result<Self> {
        let file_len = std::fs::metadata(path).map_err(|e| Error::io(path, e))?.len();
        // The splits were planned from the file's size: one past its end now finds no block
        // and would read as a split without records.
        if file_len < end {
            return Err(crate::splits::shrank(path, end));
        }
        // Magics are looked for from a little before the split, so that one straddling its
        // start (which begins before it) is not mistaken for one of its own.
        let mut split = Self::open_window(path, start.saturating_sub(8), file_len)?;
        split.start = start;
        split.end = end;
        split.next_block = split.first_block()?;
        // The first block's text, decoded already, is given from `next_text` on.
        split.taken = split.text.len();
        match split.next_block {
            Some(bit) if bit < 8 * end => split.text_before = split.any_block_before(bit)?,
            // No block starts in the split: it has no records.
            _ => {
                split.records_end.store(0, Ordering::Relaxed);
                split.progress.store(end - start, Ordering::Relaxed);
            }
        }
        Ok(split)
    }

    /// Shared with the reader: where the split's records end, once known.
    pub fn records_end(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.records_end)
    }

    /// The split's compressed bytes read so far.
    pub fn progress(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.progress)
    }

    /// Whether the reader must drop the split's first line.
    pub fn text_before(&self) -> bool {
        self.text_before
    }

    /// A damaged file's error (its reader names the file).
    fn error(&self, what: String) -> std::io::Error {
        decoding_error(Compression::Bzip2, std::io::Error::new(std::io::ErrorKind::InvalidData, what))
    }

    /// Reads more of the file into the window and looks for magics in it. False at its end.
    fn read_more(&mut self) -> Result<bool> {
        let have = self.window.len();
        let chunk = ((self.end - self.start) as usize).clamp(MIN_READ_CHUNK, READ_CHUNK);
        self.window.resize(have + chunk, 0);
        let n = loop {
            match self.file.read(&mut self.window[have..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io(&self.path, e)),
            }
        };
        self.window.truncate(have + n);
        if n == 0 {
            return Ok(false);
        }
        let from = (self.scanned_to - self.window_start) as usize;
        find_markers(&self.window, self.window_start, from, &mut self.markers);
        #[cfg(test)]
        tests::add_false_magics(self.scanned_to, self.window_start + self.window.len() as u64, &mut self.markers);
        self.scanned_to = self.window_start + self.window.len() as u64;
        Ok(true)
    }

    /// The first magic after bit `after` (at or after it with `at_or_after`), reading on as
    /// needed; `None` if the file has no more.
    fn marker_after(&mut self, after: u64, at_or_after: bool) -> Result<Option<Marker>> {
        self.marker_before(after, at_or_after, u64::MAX)
    }

    /// [`marker_after`](Self::marker_after), looking no further than bit `limit`: `None` if no
    /// magic begins before it.
    fn marker_before(&mut self, after: u64, at_or_after: bool, limit: u64) -> Result<Option<Marker>> {
        loop {
            let found = self.markers.iter().find(|m| if at_or_after { m.bit >= after } else { m.bit > after });
            if let Some(&m) = found {
                return Ok(Some(m));
            }
            // Every magic that begins before the limit ends 6 bytes after it at the most.
            if 8 * self.scanned_to >= limit.saturating_add(48) || !self.read_more()? {
                return Ok(None);
            }
        }
    }

    /// Decodes the block whose magic is at bit `from` into `self.text`, cutting it at the next
    /// magic, or a later one while the cut fails (a false magic inside the block): the bit where
    /// it ends. `None` if no cut decodes within a block's longest length.
    fn decode_block(&mut self, from: u64) -> Result<Option<u64>> {
        let mut cut = from;
        loop {
            let Some(next) = self.marker_after(cut, false)? else { return Ok(None) };
            if next.bit - from > MAX_BLOCK_BITS {
                return Ok(None);
            }
            let offset = 8 * self.window_start;
            single_block_stream(&self.window, from - offset, next.bit - offset, &mut self.stream);
            if decode(&self.stream, &mut self.text).is_ok() {
                return Ok(Some(next.bit));
            }
            cut = next.bit;
        }
    }

    /// The split's first block: the first block magic at or after its start whose block
    /// decodes, or whose failure is explained by a real block around it. `None` if the file has
    /// no block from there on.
    fn first_block(&mut self) -> Result<Option<u64>> {
        // A split in which no block starts looks no further than its end.
        let mut at = 8 * self.start;
        let first = loop {
            match self.marker_before(at, true, 8 * self.end)? {
                Some(m) if m.end_of_stream => at = m.bit + 1,
                Some(m) if m.bit < 8 * self.end => break m,
                _ => return Ok(None),
            }
        };
        if let Some(end) = self.decode_block(first.bit)? {
            self.decoded = Some((first.bit, end));
            return Ok(Some(first.bit));
        }
        // A false magic, or a damaged block. Found from the last magic before it, a block that
        // decodes and spans it proves it false; the split's first block is then the next one.
        match self.block_spanning(first.bit)? {
            Some(end) => match self.next_block_magic(end)? {
                Some(next) => Ok(Some(next.bit)),
                None => Ok(None),
            },
            None => Err(Error::io(&self.path, self.error(format!("no block decodes at the block magic at byte {}", first.bit / 8)))),
        }
    }

    /// The next block magic at or after bit `at`, skipping end-of-stream magics.
    fn next_block_magic(&mut self, at: u64) -> Result<Option<Marker>> {
        let mut at = at;
        loop {
            match self.marker_after(at, true)? {
                Some(m) if m.end_of_stream => at = m.bit + 1,
                found => return Ok(found),
            }
        }
    }

    /// The end of a block that begins before bit `bit` and decodes whole past it, if any: read
    /// from the magics up to a block's longest length before it.
    fn block_spanning(&mut self, bit: u64) -> Result<Option<u64>> {
        let from = (bit.saturating_sub(MAX_BLOCK_BITS)) / 8;
        let mut earlier = Bzip2Split::open_window(&self.path, from, self.file_len)?;
        let mut at = 8 * from;
        while let Some(m) = earlier.next_block_magic(at)? {
            if m.bit >= bit {
                break;
            }
            if let Some(end) = earlier.decode_block(m.bit)? {
                if end > bit {
                    return Ok(Some(end));
                }
            }
            at = m.bit + 1;
        }
        Ok(None)
    }

    /// A reader of the file's magics and blocks from byte `from` (a split beginning and ending
    /// there, until [`open`](Self::open) sets its range; for [`block_spanning`](Self::block_spanning) as it is).
    fn open_window(path: &Path, from: u64, file_len: u64) -> Result<Bzip2Split> {
        let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
        file.seek(SeekFrom::Start(from)).map_err(|e| Error::io(path, e))?;
        Ok(Bzip2Split {
            file,
            path: path.to_path_buf(),
            file_len,
            window: Vec::new(),
            window_start: from,
            markers: Vec::new(),
            scanned_to: from,
            start: from,
            end: from,
            next_block: None,
            text: Vec::new(),
            taken: 0,
            stream: Vec::new(),
            given: 0,
            decoded: None,
            records_end: Arc::new(AtomicU64::new(u64::MAX)),
            progress: Arc::new(AtomicU64::new(0)),
            text_before: false,
        })
    }

    /// Whether any block (so any text) comes before the block at bit `bit`: a block magic
    /// before it, looked for backwards a block's longest length at a time. Blocks come every few
    /// hundred kilobytes, so one is found at once; only the file's first block looks back to its
    /// start.
    fn any_block_before(&self, bit: u64) -> Result<bool> {
        let mut file = File::open(&self.path).map_err(|e| Error::io(&self.path, e))?;
        let mut to = bit.div_ceil(8);
        let mut bytes = Vec::new();
        let mut markers = Vec::new();
        while to > 0 {
            let from = to.saturating_sub(MAX_BLOCK_BITS / 8);
            // Overlapping the last window by a magic's length, so none is cut in two.
            let until = (to + 6).min(self.file_len);
            file.seek(SeekFrom::Start(from)).map_err(|e| Error::io(&self.path, e))?;
            bytes.resize((until - from) as usize, 0);
            file.read_exact(&mut bytes).map_err(|e| Error::io(&self.path, e))?;
            markers.clear();
            find_markers(&bytes, from, 0, &mut markers);
            if markers.iter().any(|m| !m.end_of_stream && m.bit < bit) {
                return Ok(true);
            }
            to = from;
        }
        Ok(false)
    }

    /// The split's own blocks are all read: its records end one past the text given so far.
    fn owned_done(&mut self) {
        self.records_end.store(self.given + 1, Ordering::Relaxed);
        self.progress.store(self.end - self.start, Ordering::Relaxed);
    }

    /// Decodes the next block into `self.text`; false at the end of the file.
    fn next_text(&mut self) -> std::io::Result<bool> {
        let Some(bit) = self.next_block else { return Ok(false) };
        if bit >= 8 * self.end && self.records_end.load(Ordering::Relaxed) == u64::MAX {
            self.owned_done();
        }
        let io = |e: Error| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string());
        let end = match self.decoded.take() {
            Some((decoded, end)) if decoded == bit => end,
            _ => match self.decode_block(bit).map_err(io)? {
                Some(end) => end,
                None => return Err(self.error(format!("the block at byte {} does not decode", bit / 8))),
            },
        };
        self.taken = 0;
        self.next_block = self.next_block_magic(end).map_err(io)?.map(|m| m.bit);
        if bit < 8 * self.end {
            self.progress.store((end / 8).clamp(self.start, self.end) - self.start, Ordering::Relaxed);
        }
        // Drop what is behind the block that comes next, keeping the window small.
        let keep_from = self.next_block.map_or(self.scanned_to, |b| b / 8).min(self.scanned_to);
        if keep_from - self.window_start > 2 * READ_CHUNK as u64 {
            let drop = (keep_from - self.window_start) as usize;
            self.window.drain(..drop);
            self.window_start += drop as u64;
            self.markers.retain(|m| m.bit >= 8 * self.window_start);
        }
        Ok(true)
    }
}

impl Read for Bzip2Split {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.taken == self.text.len() {
            if !self.next_text()? {
                if self.records_end.load(Ordering::Relaxed) == u64::MAX {
                    self.owned_done();
                }
                return Ok(0);
            }
        }
        let n = buf.len().min(self.text.len() - self.taken);
        buf[..n].copy_from_slice(&self.text[self.taken..self.taken + n]);
        self.taken += n;
        self.given += n as u64;
        Ok(n)
    }
}

/// The reader of a bzip2 split's records: those starting in its blocks' text or right after it.
pub type Bzip2SplitReader = crate::splits::SplitReader<Bzip2Split>;

impl Bzip2SplitReader {
    /// A reader of the records of `split` of bzip2 file `path`, reading into `buffer`; the
    /// split's compressed bytes read so far; and whether the reader begins at the file's first
    /// line (no text comes before the split's first block). Its lines end in `line_ends`.
    pub fn open_bzip2(path: &Path, split: &crate::splits::Split, max_record: usize, buffer: Vec<u8>, line_ends: crate::splits::LineEnds) -> Result<(Self, Arc<AtomicU64>, bool)> {
        let source = Bzip2Split::open(path, split.start, split.end)?;
        let (records_end, progress, text_before) = (source.records_end(), source.progress(), source.text_before());
        let name = path.display().to_string();
        let mut reader = crate::splits::SplitReader::with_buffer(source, 0, u64::MAX, max_record, name, buffer, crate::splits::READ_SIZE)
            .ending_at(records_end)
            .with_line_ends(line_ends);
        if text_before {
            // The split's first line ends a record of an earlier split.
            reader = reader.uncounted();
            reader.skip_line()?;
        }
        Ok((reader, progress, !text_before))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    thread_local! {
        /// Bit offsets where the readers of this thread see a block magic that is not one.
        static FALSE_MAGICS: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    }

    /// Adds the false magics that end in bytes `from..to` to `markers`, in order.
    pub(super) fn add_false_magics(from: u64, to: u64, markers: &mut Vec<Marker>) {
        FALSE_MAGICS.with(|bits| {
            for &bit in bits.borrow().iter().filter(|&&bit| (bit + 47) / 8 >= from && (bit + 47) / 8 < to) {
                markers.push(Marker { bit, end_of_stream: false });
            }
        });
        markers.sort_by_key(|m| m.bit);
        markers.dedup();
    }

    /// A text of lines with pseudo-random payloads, and the file `bzip2 -1` makes of it (blocks
    /// of 100 kB of text).
    fn blocky_file(dir: &Path, lines: u64) -> (Vec<u8>, PathBuf) {
        let mut rng = crate::xorshift::XorShift::new(0x5EED);
        let mut text = Vec::new();
        for i in 0..lines {
            let len = (rng.next() % 60) as usize;
            let payload: String = (0..len).map(|_| char::from(b'a' + (rng.next() % 26) as u8)).collect();
            text.extend_from_slice(format!("{i},{payload}\n").as_bytes());
        }
        let mut encoder = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        std::io::Write::write_all(&mut encoder, &text).unwrap();
        let path = dir.join("t.csv.bz2");
        std::fs::write(&path, encoder.finish().unwrap()).unwrap();
        (text, path)
    }

    /// The records every split of `path` (cut every `size` bytes) reads, in order.
    fn records_in_splits(path: &Path, size: u64) -> Vec<Vec<u8>> {
        let len = std::fs::metadata(path).unwrap().len();
        let mut records = Vec::new();
        for (index, start) in (0..len).step_by(size as usize).enumerate() {
            let split = crate::splits::Split { index, input: 0, start, end: (start + size).min(len) };
            let (mut reader, _, _) = Bzip2SplitReader::open_bzip2(path, &split, 1 << 20, Vec::new(), crate::splits::LineEnds::Lf).unwrap();
            while let Some((_, record)) = reader.next_record().unwrap() {
                records.push(record.to_vec());
            }
        }
        records
    }

    /// A file of many blocks: its text, path, bytes and every magic in it.
    fn blocky_file_and_markers(dir: &Path) -> (Vec<u8>, PathBuf, Vec<u8>, Vec<Marker>) {
        let (text, path) = blocky_file(dir, 40_000);
        let bytes = std::fs::read(&path).unwrap();
        let mut markers = Vec::new();
        find_markers(&bytes, 0, 0, &mut markers);
        (text, path, bytes, markers)
    }

    fn lines(text: &[u8]) -> Vec<Vec<u8>> {
        text.split_inclusive(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
    }

    /// Every block magic of a file is found, at the bit where its block begins: each block, cut
    /// at the next magic and made a stream of its own, decodes, and their texts make the file's.
    #[test]
    fn every_block_is_found_and_decodes_alone() {
        let dir = tempfile::tempdir().unwrap();
        let (text, _, bytes, markers) = blocky_file_and_markers(dir.path());
        let blocks = markers.iter().filter(|m| !m.end_of_stream).count();
        assert!(blocks >= 10, "{blocks} blocks");
        assert_eq!(markers[0].bit, 32, "the first block follows the 4-byte header");
        assert!(markers.last().unwrap().end_of_stream);
        let (mut stream, mut block_text, mut all) = (Vec::new(), Vec::new(), Vec::new());
        for pair in markers.windows(2) {
            single_block_stream(&bytes, pair[0].bit, pair[1].bit, &mut stream);
            decode(&stream, &mut block_text).unwrap();
            all.extend_from_slice(&block_text);
        }
        assert!(all == text);
    }

    /// Split at any size, a file's records are read once each, in order.
    #[test]
    fn splits_read_every_record_once() {
        let dir = tempfile::tempdir().unwrap();
        let (text, path) = blocky_file(dir.path(), 40_000);
        let len = std::fs::metadata(&path).unwrap().len();
        for size in [len, len / 2 + 1, 40_000, 9_999, 1_000] {
            assert!(records_in_splits(&path, size) == lines(&text), "split size {size}");
        }
    }

    /// A file cut short after its splits were planned fails every split that reaches past the
    /// cut, naming it (such a split found no block and read as one without records); the splits
    /// before the cut open, but for the one whose first block the cut runs through.
    #[test]
    fn a_file_that_shrank_after_planning_fails_the_splits_past_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let (_, path, bytes, markers) = blocky_file_and_markers(dir.path());
        let (len, size) = (bytes.len() as u64, 9_999);
        let cut = markers[markers.len() / 2].bit / 8;
        std::fs::write(&path, &bytes[..cut as usize]).unwrap();
        let mut failed = 0;
        for (index, start) in (0..len).step_by(size as usize).enumerate() {
            let split = crate::splits::Split { index, input: 0, start, end: (start + size).min(len) };
            let opened = Bzip2SplitReader::open_bzip2(&path, &split, 1 << 20, Vec::new(), crate::splits::LineEnds::Lf);
            match opened {
                Err(e) if split.end > cut => {
                    assert!(e.to_string().contains("shrank"), "{split:?}: {e}");
                    failed += 1;
                }
                // Before the cut, only the block the cut runs through fails, as damaged.
                Err(e) => assert!(e.to_string().contains("truncated or corrupt"), "{split:?}: {e}"),
                Ok(_) => assert!(split.end <= cut, "{split:?} opened past the cut at byte {cut}"),
            }
        }
        assert!(failed > 1, "{failed} splits failed");
    }

    /// A false block magic (48 bits of compressed data that read as one, about once per 30 TB)
    /// inside a block, or first in a split, loses and repeats nothing.
    #[test]
    fn a_false_magic_drops_no_block() {
        let dir = tempfile::tempdir().unwrap();
        let (text, path, bytes, markers) = blocky_file_and_markers(dir.path());
        // False magics in the middle of three blocks.
        let false_bits: Vec<u64> = [1, 4, 7].iter().map(|&i| (markers[i].bit + markers[i + 1].bit) / 2 + 3).collect();
        FALSE_MAGICS.with(|bits| *bits.borrow_mut() = false_bits.clone());
        let len = bytes.len() as u64;
        let mut whole = Vec::new();
        Bzip2Split::open(&path, 0, len).unwrap().read_to_end(&mut whole).unwrap();
        assert!(whole == text, "a block was cut at a false magic");
        // Splits that begin just before a false magic, or between one and its block's end.
        for &bit in &false_bits {
            for start in [bit / 8 - 1, bit / 8 + 100] {
                let records: Vec<Vec<u8>> = [0..start, start..len]
                    .iter()
                    .enumerate()
                    .flat_map(|(index, range)| {
                        let split = crate::splits::Split { index, input: 0, start: range.start, end: range.end };
                        let (mut reader, _, _) = Bzip2SplitReader::open_bzip2(&path, &split, 1 << 20, Vec::new(), crate::splits::LineEnds::Lf).unwrap();
                        let mut records = Vec::new();
                        while let Some((_, record)) = reader.next_record().unwrap() {
                            records.push(record.to_vec());
                        }
                        records
                    })
                    .collect();
                assert!(records == lines(&text), "split at byte {start}, false magic at bit {bit}");
            }
        }
        FALSE_MAGICS.with(|bits| bits.borrow_mut().clear());
    }
}
