//! Hadoop's `org.apache.hadoop.util.bloom.BloomFilter` Writable (all ints big-endian), and its
//! `CountingBloomFilter` (below the table):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | VERSION = −1 |
//! | 4 | 4 | nbHash (k) |
//! | 8 | 1 | hashType: 0 Jenkins, 1 Murmur |
//! | 9 | 4 | vectorSize (m) |
//! | 13 | ⌈m/8⌉ | bit i in byte 13 + i/8 under mask 1 << (i % 8) |
//!
//! The legacy layout starts with a positive int (nbHash), has no type byte (Jenkins), then
//! vectorSize and the bits. Bits are LSB-first within bytes, so the body is our u64 words as
//! little-endian bytes, cut to ⌈m/8⌉.
//!
//! Hadoop's `CountingBloomFilter` writes the same header, then its `long[] buckets`
//! (`writeLong`, big-endian), ⌊(m − 1)/16⌋ + 1 of them: counter i is the 4 bits of bucket i / 16
//! under `15L << ((i % 16) * 4)`, the layout of [`CountingBloomFilter`]'s words. The two kinds
//! share the header, and the body's length tells them apart (⌈m/8⌉ bytes against 8·⌈m/16⌉,
//! equal for no m > 0).
//!
//! Hadoop's `DynamicBloomFilter` ([`DynamicBloomFilter`]) writes the same header, then three
//! ints, `nr` (keys a row takes), `currentNbRecord` (keys in the last row) and the number of
//! rows, then each row as a `BloomFilter` writes itself, header included: 12 + rows · (13 +
//! ⌈m/8⌉) bytes after the header. Its rows' headers are the filter's own; a file whose length
//! is a dynamic filter's and whose first row starts with the filter's header is read as one.
//!
//! A `BloomMapFile` is a directory of a `MapFile` (`data`, `index`) and a `bloom` file, a
//! `DynamicBloomFilter` over each key as its `Writable` serializes it (`--key-type text` for
//! `Text` keys). Hadoop's reader is given the directory; so is ours.

use super::foreign::{be_i32, check_length, stream_body};
use crate::atomic::AtomicFile;
use super::StoredFilter;
use crate::bits::{words_for_bits, BitArray};
use crate::counting::{words_for_counters, CountingBloomFilter};
use crate::dynamic::DynamicBloomFilter;
use crate::error::{Error, Result};
use crate::filter::BloomFilter;
use crate::hashing::{HadoopHash, Scheme};
use crate::spec::FilterSpec;
use std::io::{Read, Write};
use std::path::Path;

/// The `bloom` file of a `BloomMapFile` directory (one that holds `bloom` and a `MapFile`'s
/// `index`), where `path` is such a directory.
pub fn bloom_map_file_filter(path: &Path) -> Option<std::path::PathBuf> {
    let bloom = path.join("bloom");
    (path.is_dir() && bloom.is_file() && path.join("index").is_file()).then_some(bloom)
}

pub const VERSION: i32 = -1;
pub const HEADER_LEN: u64 = 13;
pub const LEGACY_HEADER_LEN: u64 = 8;

/// Writes a Hadoop-scheme filter in the current (VERSION −1) layout.
pub fn write(path: &Path, f: &BloomFilter) -> Result<()> {
    let mut out = create_with_header(path, f.spec())?;
    write_bits(path, &mut out, f)?;
    out.commit()
}

/// Writes a filter's bits as Hadoop's `BloomFilter` body: ⌈m/8⌉ bytes.
fn write_bits(path: &Path, out: &mut impl Write, f: &BloomFilter) -> Result<()> {
    let mut left = f.spec().bits.div_ceil(8) as usize;
    for chunk in f.bits().words().chunks(1 << 17) {
        let bytes: Vec<u8> = chunk.iter().flat_map(|w| w.to_le_bytes()).take(left).collect();
        left -= bytes.len();
        out.write_all(&bytes).map_err(|e| Error::io(path, e))?;
    }
    Ok(())
}

/// Writes a dynamic filter as Hadoop's `DynamicBloomFilter.write` does: the header, `nr`,
/// `currentNbRecord` and the number of rows, then each row with its own header.
pub fn write_dynamic(path: &Path, f: &DynamicBloomFilter) -> Result<()> {
    let header = header_bytes(f.spec())?;
    let rows = i32::try_from(f.rows().len()).map_err(|_| Error::invalid("rows", format!("{} rows: Hadoop counts them in an int", f.rows().len())))?;
    let io = |e| Error::io(path, e);
    let mut out = AtomicFile::create(path)?;
    out.write_all(&header).map_err(io)?;
    for n in [f.records_per_row() as i32, f.last_row_records() as i32, rows] {
        out.write_all(&n.to_be_bytes()).map_err(io)?;
    }
    for row in f.rows() {
        out.write_all(&header).map_err(io)?;
        write_bits(path, &mut out, row)?;
    }
    out.commit()
}

/// Writes a Hadoop-scheme counting filter as Hadoop's `CountingBloomFilter.write` does: the
/// header, then the counters' words as big-endian longs.
pub fn write_counting(path: &Path, f: &CountingBloomFilter) -> Result<()> {
    let mut out = create_with_header(path, f.spec())?;
    for chunk in f.words().chunks(1 << 17) {
        let bytes: Vec<u8> = chunk.iter().flat_map(|w| w.to_be_bytes()).collect();
        out.write_all(&bytes).map_err(|e| Error::io(path, e))?;
    }
    out.commit()
}

/// Creates `path` (atomically) and writes the VERSION −1 header of a filter of identity `spec`.
fn create_with_header(path: &Path, spec: &FilterSpec) -> Result<AtomicFile> {
    let header = header_bytes(spec)?;
    let mut out = AtomicFile::create(path)?;
    out.write_all(&header).map_err(|e| Error::io(path, e))?;
    Ok(out)
}

/// The VERSION −1 header of a filter of identity `spec`: version, nbHash, hashType, vectorSize.
fn header_bytes(spec: &FilterSpec) -> Result<[u8; HEADER_LEN as usize]> {
    let Scheme::Hadoop(hash) = spec.scheme else {
        return Err(Error::invalid("format", format!("a {} filter cannot be written as a Hadoop file", spec.scheme)));
    };
    let mut header = [0u8; HEADER_LEN as usize];
    header[..4].copy_from_slice(&VERSION.to_be_bytes());
    header[4..8].copy_from_slice(&(spec.hashes as i32).to_be_bytes());
    header[8] = hash.type_code();
    header[9..].copy_from_slice(&(spec.bits as i32).to_be_bytes());
    Ok(header)
}

/// The body lengths a Hadoop header of `m` bits (or counters) implies: a `BloomFilter`'s, then a
/// `CountingBloomFilter`'s.
pub fn body_lengths(m: u64) -> (u64, u64) {
    (m.div_ceil(8), 8 * words_for_counters(m))
}

/// The bytes of a Hadoop file [`kind`] reads to tell a `DynamicBloomFilter` (its header, three
/// ints and its first row's header): the reader's prefix holds at least this many.
pub const DETECTION_PREFIX: u64 = 2 * HEADER_LEN + 12;

/// Which of Hadoop's filters a file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HadoopKind {
    Plain,
    Counting,
    Dynamic { rows: u64 },
}

/// The rows a `DynamicBloomFilter` names, where `prefix` (of a header `header_len` bytes long)
/// looks like one: a positive number of rows, and a first row that starts with the filter's
/// header.
fn named_rows(prefix: &[u8], header_len: usize) -> Option<u64> {
    let first_row = 2 * header_len + 12;
    if prefix.len() < first_row || prefix[header_len + 12..first_row] != prefix[..header_len] {
        return None;
    }
    let rows = be_i32(prefix, header_len + 8);
    (rows > 0).then_some(rows as u64)
}

/// The length of a `DynamicBloomFilter` file of `rows` rows of `m` bits, its header
/// `header_len` bytes. (Both counts are Java ints: the length is below 2^60.)
fn dynamic_len(header_len: u64, m: u64, rows: u64) -> u64 {
    header_len + 12 + rows * (header_len + m.div_ceil(8))
}

/// The kind of a Hadoop file of `len` bytes whose first bytes are `prefix` ([`DETECTION_PREFIX`]
/// of them, or the whole file), in the current layout or the `legacy` one: told by its length,
/// and for a dynamic filter by its first row's header too, which must be the file's own. None
/// where the length fits no kind.
pub fn kind(prefix: &[u8], len: u64, legacy: bool) -> Option<HadoopKind> {
    let header_len = if legacy { LEGACY_HEADER_LEN } else { HEADER_LEN } as usize;
    if prefix.len() < header_len || be_i32(prefix, header_len - 4) <= 0 {
        return None;
    }
    let m = be_i32(prefix, header_len - 4) as u64;
    if let Some(rows) = named_rows(prefix, header_len).filter(|&rows| dynamic_len(header_len as u64, m, rows) == len) {
        return Some(HadoopKind::Dynamic { rows });
    }
    let (plain, counting) = body_lengths(m);
    match len.checked_sub(header_len as u64)? {
        body if body == plain => Some(HadoopKind::Plain),
        body if body == counting => Some(HadoopKind::Counting),
        _ => None,
    }
}

/// Reads a Hadoop file whose first bytes are `prefix` ([`DETECTION_PREFIX`] of them, or the
/// whole file), from `input` just past its header; `legacy` for the layout without a version.
/// A `BloomFilter`, a `CountingBloomFilter` or a `DynamicBloomFilter`, as [`kind`] tells.
pub fn read(path: &Path, input: &mut impl Read, prefix: &[u8], len: u64, legacy: bool) -> Result<StoredFilter> {
    let bad = |reason: String| Error::bad_file(path, reason);
    let header_len = if legacy { LEGACY_HEADER_LEN } else { HEADER_LEN };
    if len < header_len {
        return Err(bad(format!("file is {len} bytes, too short for a Hadoop filter header")));
    }
    let (hashes, hash, bits) = if legacy {
        (be_i32(prefix, 0), HadoopHash::Jenkins, be_i32(prefix, 4))
    } else {
        let hash = match prefix[8] as i8 {
            0 => HadoopHash::Jenkins,
            1 => HadoopHash::Murmur,
            t => return Err(bad(format!("corrupt Hadoop header: hash type {t} is neither 0 (Jenkins) nor 1 (Murmur)"))),
        };
        (be_i32(prefix, 4), hash, be_i32(prefix, 9))
    };
    if hashes <= 0 || bits <= 0 {
        return Err(bad(format!("corrupt Hadoop header: nbHash = {hashes} and vectorSize = {bits} must be positive")));
    }
    let spec = FilterSpec::new(Scheme::Hadoop(hash), 0, bits as u64, hashes as u32).map_err(|e| bad(format!("corrupt Hadoop header: {e}")))?;
    let (plain, counting) = body_lengths(spec.bits);
    let Some(kind) = kind(prefix, len, legacy) else {
        if let Some(rows) = named_rows(prefix, header_len as usize) {
            return Err(bad(format!(
                "file is {len} bytes but its Hadoop header and its first row's imply {} (a DynamicBloomFilter of the {rows} rows it names): truncated or corrupt",
                dynamic_len(header_len, spec.bits, rows)
            )));
        }
        return Err(bad(format!(
            "file is {len} bytes but its Hadoop header implies {} (a BloomFilter) or {} (a CountingBloomFilter): truncated or corrupt",
            header_len + plain,
            header_len + counting
        )));
    };
    // The length is the kind's: this checks that the body fits in memory.
    check_length(path, len, len, "Hadoop")?;
    match kind {
        HadoopKind::Plain => read_bits(path, input, spec).map(StoredFilter::Plain),
        HadoopKind::Counting => read_counting(path, input, spec, counting).map(StoredFilter::Counting),
        HadoopKind::Dynamic { rows } => read_dynamic(path, input, &prefix[..header_len as usize], spec, rows).map(StoredFilter::Dynamic),
    }
}

/// The ⌈m/8⌉ bytes of a `BloomFilter` body of identity `spec`.
fn read_bits(path: &Path, input: &mut impl Read, spec: FilterSpec) -> Result<BloomFilter> {
    let mut words = Vec::with_capacity(words_for_bits(spec.bits) as usize);
    let mut pending = Vec::with_capacity(8);
    stream_body(path, input, spec.bits.div_ceil(8), |chunk| {
        for &b in chunk {
            pending.push(b);
            if pending.len() == 8 {
                words.push(u64::from_le_bytes(pending[..].try_into().unwrap()));
                pending.clear();
            }
        }
    })?;
    if !pending.is_empty() {
        pending.resize(8, 0);
        words.push(u64::from_le_bytes(pending[..].try_into().unwrap()));
    }
    Ok(BloomFilter::from_parts(spec, BitArray::from_words(words, spec.bits), 0, 0, 0.0))
}

/// The rest of a `DynamicBloomFilter` of `rows` rows (which [`kind`] found the file's length to
/// fit), from just past its header `header`: its counts, then each row, whose header must be
/// the filter's own (as Hadoop writes them: every row of one vectorSize, nbHash and hashType).
fn read_dynamic(path: &Path, input: &mut impl Read, header: &[u8], spec: FilterSpec, rows: u64) -> Result<DynamicBloomFilter> {
    let bad = |reason: String| Error::bad_file(path, reason);
    // Each row is a filter of its own: its bits and the filter's fixed size.
    let row_bytes = 8 * words_for_bits(spec.bits) + std::mem::size_of::<BloomFilter>() as u64;
    crate::limits::check_allocation(rows.saturating_mul(row_bytes), "the DynamicBloomFilter's rows").map_err(|e| bad(e.to_string()))?;
    let mut ints = [0u8; 12];
    input.read_exact(&mut ints).map_err(|e| Error::io(path, e))?;
    let (records_per_row, last_row_records) = (be_i32(&ints, 0), be_i32(&ints, 4));
    if records_per_row < 0 || last_row_records < 0 {
        return Err(bad(format!("corrupt DynamicBloomFilter: nr = {records_per_row} and currentNbRecord = {last_row_records} must not be negative")));
    }
    let mut filters = Vec::with_capacity(rows as usize);
    let mut row_header = vec![0u8; header.len()];
    for row in 0..rows {
        input.read_exact(&mut row_header).map_err(|e| Error::io(path, e))?;
        if row_header != header {
            return Err(bad(format!(
                "corrupt DynamicBloomFilter: row {row}'s header {row_header:02x?} is not the filter's {header:02x?} (Hadoop writes every row with the filter's vectorSize, nbHash and hashType)"
            )));
        }
        filters.push(read_bits(path, input, spec)?);
    }
    DynamicBloomFilter::from_rows(filters, records_per_row as u32, last_row_records as u32)
}

/// The `body` bytes of big-endian counter words of a `CountingBloomFilter` of identity `spec`.
/// Hadoop never sets the counters past m; any set there are cleared, as the native reader does.
fn read_counting(path: &Path, input: &mut impl Read, spec: FilterSpec, body: u64) -> Result<CountingBloomFilter> {
    let mut words = Vec::with_capacity(words_for_counters(spec.bits) as usize);
    stream_body(path, input, body, |chunk| {
        words.extend(chunk.chunks_exact(8).map(|w| u64::from_be_bytes(w.try_into().unwrap())));
    })?;
    Ok(CountingBloomFilter::from_parts(spec, words, 0, 0, 0.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{load_any, FileFormat};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Each kind of Hadoop file, of any m and k (and rows, and counts a row), reads back as
        /// its own kind, to the bytes it was read from: the lengths and a dynamic filter's first
        /// row's header tell the kinds apart.
        #[test]
        fn every_kind_reads_back_as_itself(
            m in 1u64..5000,
            k in 1u32..12,
            murmur in any::<bool>(),
            rows in 1usize..4,
            keys in proptest::collection::vec(any::<u64>(), 0..60),
            counts in (0u32..1000, 0u32..1000),
        ) {
            let hash = if murmur { HadoopHash::Murmur } else { HadoopHash::Jenkins };
            let spec = FilterSpec::new(Scheme::Hadoop(hash), 0, m, k).unwrap();
            let filter_of = |row: usize| {
                let mut filter = BloomFilter::new(spec);
                keys.iter().skip(row).step_by(rows).for_each(|key| filter.insert(&key.to_le_bytes()));
                filter
            };
            let mut counting = CountingBloomFilter::new(spec);
            keys.iter().for_each(|key| counting.insert(&key.to_le_bytes()));
            let dynamic = DynamicBloomFilter::from_rows((0..rows).map(filter_of).collect(), counts.0, counts.1).unwrap();
            let dir = tempfile::tempdir().unwrap();
            for stored in [StoredFilter::Plain(filter_of(0)), StoredFilter::Counting(counting), StoredFilter::Dynamic(dynamic)] {
                let path = dir.path().join(stored.kind());
                crate::format::write(&path, &stored).unwrap();
                let (back, format) = load_any(&path).unwrap();
                prop_assert_eq!((format, back.kind()), (FileFormat::Hadoop, stored.kind()));
                let again = dir.path().join("again");
                crate::format::write(&again, &back).unwrap();
                prop_assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&path).unwrap(), "{}", stored.kind());
            }
        }
    }
}
