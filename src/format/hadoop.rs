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

use super::foreign::{be_i32, check_length, stream_body};
use crate::atomic::AtomicFile;
use super::StoredFilter;
use crate::bits::{words_for_bits, BitArray};
use crate::counting::{words_for_counters, CountingBloomFilter};
use crate::error::{Error, Result};
use crate::filter::BloomFilter;
use crate::hashing::{HadoopHash, Scheme};
use crate::spec::FilterSpec;
use std::io::{Read, Write};
use std::path::Path;

pub const VERSION: i32 = -1;
pub const HEADER_LEN: u64 = 13;
pub const LEGACY_HEADER_LEN: u64 = 8;

/// Writes a Hadoop-scheme filter in the current (VERSION −1) layout.
pub fn write(path: &Path, f: &BloomFilter) -> Result<()> {
    let mut out = create_with_header(path, f.spec())?;
    let io = |e| Error::io(path, e);
    let mut left = f.spec().bits.div_ceil(8) as usize;
    for chunk in f.bits().words().chunks(1 << 17) {
        let bytes: Vec<u8> = chunk.iter().flat_map(|w| w.to_le_bytes()).take(left).collect();
        left -= bytes.len();
        out.write_all(&bytes).map_err(io)?;
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
    let Scheme::Hadoop(hash) = spec.scheme else {
        return Err(Error::invalid("format", format!("a {} filter cannot be written as a Hadoop file", spec.scheme)));
    };
    let io = |e| Error::io(path, e);
    let mut out = AtomicFile::create(path)?;
    out.write_all(&VERSION.to_be_bytes()).map_err(io)?;
    out.write_all(&(spec.hashes as i32).to_be_bytes()).map_err(io)?;
    out.write_all(&[hash.type_code()]).map_err(io)?;
    out.write_all(&(spec.bits as i32).to_be_bytes()).map_err(io)?;
    Ok(out)
}

/// The body lengths a Hadoop header of `m` bits (or counters) implies: a `BloomFilter`'s, then a
/// `CountingBloomFilter`'s.
pub fn body_lengths(m: u64) -> (u64, u64) {
    (m.div_ceil(8), 8 * words_for_counters(m))
}

/// Reads a Hadoop file whose first 13 (or fewer) bytes are `prefix`; `legacy` for the layout
/// without a version. A `BloomFilter` or a `CountingBloomFilter`, as the file's length says.
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
    if len != header_len + plain && len != header_len + counting {
        return Err(bad(format!(
            "file is {len} bytes but its Hadoop header implies {} (a BloomFilter) or {} (a CountingBloomFilter): truncated or corrupt",
            header_len + plain,
            header_len + counting
        )));
    }
    // The length is one of the two: this checks that the body fits in memory.
    check_length(path, len, len, "Hadoop")?;
    if len == header_len + counting {
        return read_counting(path, input, spec, counting).map(StoredFilter::Counting);
    }
    let mut words = Vec::with_capacity(words_for_bits(spec.bits) as usize);
    let mut pending = Vec::with_capacity(8);
    stream_body(path, input, plain, |chunk| {
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
    Ok(StoredFilter::Plain(BloomFilter::from_parts(spec, BitArray::from_words(words, spec.bits), 0, 0, 0.0)))
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
