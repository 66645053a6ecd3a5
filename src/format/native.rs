//! The native `.bloom` format, versions 1 and 2. All integers little-endian:
//!
//! | offset    | size | field                                                        |
//! |-----------|------|--------------------------------------------------------------|
//! | 0         | 8    | magic `BLOOMFLW`                                             |
//! | 8         | 4    | u32 format version: 1, or 2 when the key form is recorded    |
//! | 12        | 4    | u32 header length H (at most 4096)                           |
//! | 16        | H    | [`NativeHeader`], bincode 1.3 (fixed-width ints, LE); in     |
//! |           |      | version 2 followed by the [`KeyForm`] (u32 fields, u32 type) |
//! | 16+H      | 8·W  | body: W u64 words, LE (W = ⌈m/64⌉ plain, ⌈m/16⌉ counting)    |
//! | 16+H+8·W  | 4    | CRC-32 (IEEE) of every byte before it                        |
//!
//! The reader checks magic, version, header, that the file's real length is exactly what the
//! header implies, and the checksum, before it trusts anything; it allocates the body only after
//! the length check, so a hostile header cannot make it allocate.

use super::StoredFilter;
use crate::atomic::AtomicFile;
use crate::bits::{words_for_bits, BitArray};
use crate::counting::{words_for_counters, CountingBloomFilter};
use crate::error::{Error, Result};
use crate::filter::BloomFilter;
use crate::records::KeyForm;
use crate::spec::FilterSpec;
use bincode::Options;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

pub const MAGIC: &[u8; 8] = b"BLOOMFLW";
/// The version of a file whose key form is not known (a filter made through the library).
pub const VERSION: u32 = 1;
/// The version of a file that records its key form, as the build job writes it.
pub const VERSION_WITH_KEY: u32 = 2;
pub const MAX_HEADER_LEN: u32 = 4096;
const PREFIX_LEN: u64 = 16;
const CHECKSUM_LEN: u64 = 4;
/// Body bytes moved per read or write: large filters are streamed, not copied whole.
const CHUNK_WORDS: usize = 1 << 17;

/// Whether the body holds bits or 4-bit counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FilterKind {
    Plain,
    Counting,
}

/// The bincode-encoded header: the filter's identity and the figures `info` reports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NativeHeader {
    pub kind: FilterKind,
    pub spec: FilterSpec,
    pub items_inserted: u64,
    /// 0 when the filter was sized by explicit m and k.
    pub expected_items: u64,
    /// 0 when the filter was sized by explicit m and k.
    pub target_fpp: f64,
}

impl NativeHeader {
    fn body_words(&self) -> u64 {
        match self.kind {
            FilterKind::Plain => words_for_bits(self.spec.bits),
            FilterKind::Counting => words_for_counters(self.spec.bits),
        }
    }
}

fn header_codec() -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
        .with_limit(MAX_HEADER_LEN as u64)
}

/// Writes a plain filter atomically.
pub fn write_plain(path: &Path, f: &BloomFilter) -> Result<()> {
    let header = NativeHeader {
        kind: FilterKind::Plain,
        spec: *f.spec(),
        items_inserted: f.items_inserted(),
        expected_items: f.expected_items(),
        target_fpp: f.target_fpp(),
    };
    write(path, &header, f.key_form(), f.bits().words())
}

/// Writes a counting filter atomically.
pub fn write_counting(path: &Path, f: &CountingBloomFilter) -> Result<()> {
    let header = NativeHeader {
        kind: FilterKind::Counting,
        spec: *f.spec(),
        items_inserted: f.items_inserted(),
        expected_items: f.expected_items(),
        target_fpp: f.target_fpp(),
    };
    write(path, &header, f.key_form(), f.words())
}

/// Writes a plain or a counting filter. A Hadoop `DynamicBloomFilter`'s rows have no native
/// layout: they are refused.
pub fn write_stored(path: &Path, f: &StoredFilter) -> Result<()> {
    match f {
        StoredFilter::Plain(p) => write_plain(path, p),
        StoredFilter::Counting(c) => write_counting(path, c),
        StoredFilter::Dynamic(_) => Err(Error::invalid("format", "the native format holds one filter: a Hadoop DynamicBloomFilter is written in Hadoop's")),
    }
}

/// A writer that checksums what passes through it.
struct Checksummed<W> {
    inner: W,
    crc: crc32fast::Hasher,
}

impl<W: Write> Checksummed<W> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.crc.update(bytes);
        self.inner.write_all(bytes)
    }
}

/// The version a filter is written in: 2 when its key form is known, else 1 (which the reader
/// gives back as it found it, so the version read is this of the filter read).
pub fn version_for(key: Option<KeyForm>) -> u32 {
    if key.is_some() { VERSION_WITH_KEY } else { VERSION }
}

fn write(path: &Path, header: &NativeHeader, key: Option<KeyForm>, words: &[u64]) -> Result<()> {
    debug_assert_eq!(words.len() as u64, header.body_words());
    let version = version_for(key);
    let encoded = match key {
        None => header_codec().serialize(header),
        Some(key) => header_codec().serialize(&(header, key)),
    };
    let encoded = encoded.expect("a header always fits the codec's limit");
    let io = |e| Error::io(path, e);
    let mut out = Checksummed {
        inner: AtomicFile::create(path)?,
        crc: crc32fast::Hasher::new(),
    };
    out.put(MAGIC).map_err(io)?;
    out.put(&version.to_le_bytes()).map_err(io)?;
    out.put(&(encoded.len() as u32).to_le_bytes()).map_err(io)?;
    out.put(&encoded).map_err(io)?;
    put_words_le(&mut out, words).map_err(io)?;
    let crc = out.crc.finalize();
    out.inner.write_all(&crc.to_le_bytes()).map_err(io)?;
    out.inner.commit()
}

/// The words as little-endian bytes: their memory as it is on a little-endian CPU (no copy: a
/// 24 MB filter's byte conversion took 1.5 ms of the build's serial end), converted a chunk at
/// a time elsewhere.
fn put_words_le<W: Write>(out: &mut Checksummed<W>, words: &[u64]) -> std::io::Result<()> {
    if cfg!(target_endian = "little") {
        // A chunk at a time, so that the file's writeback starts while the rest is written.
        return words.chunks(CHUNK_WORDS).try_for_each(|chunk| out.put(bytemuck::cast_slice(chunk)));
    }
    let mut buf = Vec::with_capacity(CHUNK_WORDS * 8);
    for chunk in words.chunks(CHUNK_WORDS) {
        buf.clear();
        buf.extend(chunk.iter().flat_map(|w| w.to_le_bytes()));
        out.put(&buf)?;
    }
    Ok(())
}

/// True when `prefix` starts with the native magic.
pub fn is_native(prefix: &[u8]) -> bool {
    prefix.starts_with(MAGIC)
}

/// Opens `path` as a regular file and returns it with its length, or a clear error.
pub(crate) fn open_regular(path: &Path) -> Result<(File, u64)> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.is_dir() {
        return Err(Error::bad_file(path, "is a directory, expected a filter file"));
    }
    if !meta.is_file() {
        // (Not opened: opening a FIFO waits for its writer.)
        return Err(Error::bad_file(path, "is not a regular file (a pipe, socket or device): a filter file is read by its length, so save it to a file first"));
    }
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    Ok((file, meta.len()))
}

/// Reads and validates a native filter file.
pub fn read(path: &Path) -> Result<StoredFilter> {
    let (file, len) = open_regular(path)?;
    let mut input = std::io::BufReader::with_capacity(1 << 20, file);
    let bad = |reason: String| Error::bad_file(path, reason);
    if len < PREFIX_LEN + CHECKSUM_LEN {
        return Err(bad(format!(
            "file is {len} bytes, too short to be a filter file"
        )));
    }
    let mut crc = crc32fast::Hasher::new();
    let mut prefix = [0u8; PREFIX_LEN as usize];
    input.read_exact(&mut prefix).map_err(|e| Error::io(path, e))?;
    crc.update(&prefix);
    if !is_native(&prefix) {
        return Err(bad("not a bloomflow filter file (bad magic)".into()));
    }
    let version = u32::from_le_bytes(prefix[8..12].try_into().unwrap());
    if version != VERSION && version != VERSION_WITH_KEY {
        return Err(bad(format!(
            "unsupported format version {version} (this build reads versions {VERSION} and {VERSION_WITH_KEY})"
        )));
    }
    let header_len = u32::from_le_bytes(prefix[12..16].try_into().unwrap());
    if header_len > MAX_HEADER_LEN || PREFIX_LEN + header_len as u64 + CHECKSUM_LEN > len {
        return Err(bad(format!(
            "header length {header_len} does not fit a {len}-byte file"
        )));
    }
    let mut header_bytes = vec![0u8; header_len as usize];
    input.read_exact(&mut header_bytes).map_err(|e| Error::io(path, e))?;
    crc.update(&header_bytes);
    let decoded = match version {
        VERSION => header_codec().deserialize::<NativeHeader>(&header_bytes).map(|h| (h, None)),
        _ => header_codec().deserialize::<(NativeHeader, KeyForm)>(&header_bytes).map(|(h, k)| (h, Some(k))),
    };
    let (header, key_form) = decoded.map_err(|e| bad(format!("corrupt header: {e}")))?;
    if let Some(key) = key_form.filter(|k| k.fields == 0) {
        return Err(bad(format!("corrupt header: a key of {} fields", key.fields)));
    }
    let spec = header.spec;
    FilterSpec::new(spec.scheme, spec.seed, spec.bits, spec.hashes).map_err(|e| bad(format!("corrupt header: {e}")))?;
    let words = header.body_words();
    let expected_len = PREFIX_LEN + header_len as u64 + words * 8 + CHECKSUM_LEN;
    if expected_len != len {
        return Err(bad(format!(
            "file is {len} bytes but its header (m = {}, k = {}) implies {expected_len}: truncated or corrupt",
            header.spec.bits, header.spec.hashes
        )));
    }
    crate::limits::check_allocation(words * 8, "filter body").map_err(|e| bad(e.to_string()))?;
    let body = read_words(&mut input, words as usize, &mut crc).map_err(|e| Error::io(path, e))?;
    let mut stored = [0u8; 4];
    input.read_exact(&mut stored).map_err(|e| Error::io(path, e))?;
    if u32::from_le_bytes(stored) != crc.finalize() {
        return Err(bad("checksum mismatch: the file is corrupt".into()));
    }
    let NativeHeader { kind, spec, items_inserted, expected_items, target_fpp } = header;
    Ok(match kind {
        FilterKind::Plain => {
            let mut filter = BloomFilter::from_parts(spec, BitArray::from_words(body, spec.bits), items_inserted, expected_items, target_fpp);
            filter.set_key_form(key_form);
            StoredFilter::Plain(filter)
        }
        FilterKind::Counting => {
            let mut filter = CountingBloomFilter::from_parts(spec, body, items_inserted, expected_items, target_fpp);
            filter.set_key_form(key_form);
            StoredFilter::Counting(filter)
        }
    })
}

/// Reads `n` little-endian words in bounded chunks, checksumming the bytes.
fn read_words(input: &mut impl Read, n: usize, crc: &mut crc32fast::Hasher) -> std::io::Result<Vec<u64>> {
    let mut words = Vec::with_capacity(n);
    let mut buf = vec![0u8; CHUNK_WORDS.min(n.max(1)) * 8];
    while words.len() < n {
        let take = (n - words.len()).min(CHUNK_WORDS);
        let bytes = &mut buf[..take * 8];
        input.read_exact(bytes)?;
        crc.update(bytes);
        words.extend(bytes.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().unwrap())));
    }
    Ok(words)
}
