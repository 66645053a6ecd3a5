//! Helpers shared by the readers and writers of Hadoop's and Spark's big-endian layouts.

use crate::error::{Error, Result};
use std::io::Read;
use std::path::Path;

/// Body bytes moved per read: large filters are streamed, not read whole.
pub const CHUNK_BYTES: usize = 1 << 20;

/// A big-endian Java int at `at`.
pub fn be_i32(bytes: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(bytes[at..at + 4].try_into().unwrap())
}

/// Checks that the file's length is exactly what its header implies and that the body fits in
/// memory, before anything is allocated.
pub fn check_length(path: &Path, len: u64, expected: u64, what: &str) -> Result<()> {
    if len != expected {
        return Err(Error::bad_file(
            path,
            format!("file is {len} bytes but its {what} header implies {expected}: truncated or corrupt"),
        ));
    }
    crate::limits::check_allocation(expected, "filter body").map_err(|e| Error::bad_file(path, e.to_string()))
}

/// Reads `n` bytes in chunks, handing each to `sink`.
pub fn stream_body(path: &Path, input: &mut impl Read, mut n: u64, mut sink: impl FnMut(&[u8])) -> Result<()> {
    let mut buf = vec![0u8; CHUNK_BYTES.min(n as usize).max(8)];
    while n > 0 {
        // Whole multiples of 8 bytes per chunk, so that word boundaries never straddle chunks.
        let take = (n as usize).min(buf.len());
        input.read_exact(&mut buf[..take]).map_err(|e| Error::io(path, e))?;
        sink(&buf[..take]);
        n -= take as u64;
    }
    Ok(())
}
