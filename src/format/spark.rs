//! Spark's `org.apache.spark.util.sketch.BloomFilter.writeTo` (big-endian `DataOutputStream`):
//! V1 is `int 1, int k, int numWords, long[numWords]`; V2 is `int 2, int k, int seed,
//! int numWords, long[numWords]`. Bit i is bit i % 64 of word i / 64, as ours.

use super::foreign::{be_i32, check_length, stream_body};
use crate::atomic::AtomicFile;
use crate::bits::BitArray;
use crate::error::{Error, Result};
use crate::filter::BloomFilter;
use crate::hashing::Scheme;
use crate::spec::FilterSpec;
use std::io::{Read, Write};
use std::path::Path;

/// Header length of a version: 12 bytes for V1, 16 for V2.
pub fn header_len(version: i32) -> u64 {
    if version == 1 { 12 } else { 16 }
}

/// Writes a Spark-scheme filter in its version's layout.
pub fn write(path: &Path, f: &BloomFilter) -> Result<()> {
    let spec = f.spec();
    let version: i32 = match spec.scheme {
        Scheme::SparkV1 => 1,
        Scheme::SparkV2 => 2,
        other => return Err(Error::invalid("format", format!("a {other} filter cannot be written as a Spark file"))),
    };
    let io = |e| Error::io(path, e);
    let mut out = AtomicFile::create(path)?;
    out.write_all(&version.to_be_bytes()).map_err(io)?;
    out.write_all(&(spec.hashes as i32).to_be_bytes()).map_err(io)?;
    if version == 2 {
        out.write_all(&(spec.seed as i32).to_be_bytes()).map_err(io)?;
    }
    let words = f.bits().words();
    out.write_all(&(words.len() as i32).to_be_bytes()).map_err(io)?;
    for chunk in words.chunks(1 << 17) {
        let bytes: Vec<u8> = chunk.iter().flat_map(|w| w.to_be_bytes()).collect();
        out.write_all(&bytes).map_err(io)?;
    }
    out.commit()
}

/// The length a Spark file of this header would have, if `prefix` is one.
pub fn implied_len(prefix: &[u8]) -> Option<u64> {
    let version = be_i32(prefix, 0);
    let hl = header_len(version) as usize;
    if !(version == 1 || version == 2) || prefix.len() < hl {
        return None;
    }
    let words = be_i32(prefix, hl - 4);
    (words > 0).then(|| hl as u64 + 8 * words as u64)
}

/// Reads a Spark file whose first 16 (or fewer) bytes are `prefix`.
pub fn read(path: &Path, input: &mut impl Read, prefix: &[u8], len: u64) -> Result<BloomFilter> {
    let bad = |reason: String| Error::bad_file(path, reason);
    let version = be_i32(prefix, 0);
    let hl = header_len(version);
    if len < hl {
        return Err(bad(format!("file is {len} bytes, too short for a Spark V{version} header")));
    }
    let hashes = be_i32(prefix, 4);
    let (seed, words) = if version == 1 { (0, be_i32(prefix, 8)) } else { (be_i32(prefix, 8), be_i32(prefix, 12)) };
    if hashes <= 0 || words <= 0 {
        return Err(bad(format!("corrupt Spark header: numHashFunctions = {hashes} and numWords = {words} must be positive")));
    }
    let scheme = if version == 1 { Scheme::SparkV1 } else { Scheme::SparkV2 };
    let spec = FilterSpec::new(scheme, seed as u32, words as u64 * 64, hashes as u32).map_err(|e| bad(format!("corrupt Spark header: {e}")))?;
    check_length(path, len, hl + 8 * words as u64, "Spark")?;
    let mut body = Vec::with_capacity(words as usize);
    stream_body(path, input, 8 * words as u64, |chunk| {
        body.extend(chunk.chunks_exact(8).map(|b| u64::from_be_bytes(b.try_into().unwrap())));
    })?;
    Ok(BloomFilter::from_parts(spec, BitArray::from_words(body, spec.bits), 0, 0, 0.0))
}
