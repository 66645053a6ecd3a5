//! Filter files: bloomflow's native `.bloom`, Hadoop's `BloomFilter`, `CountingBloomFilter` and
//! `DynamicBloomFilter` Writables and Spark's `BloomFilter.writeTo` layouts. Reading detects the
//! format; writing picks it from the filter's scheme, so a filter always goes back to the system
//! whose hashing it uses.

mod foreign;
pub mod hadoop;
pub mod native;
pub mod spark;

use crate::counting::CountingBloomFilter;
use crate::dynamic::DynamicBloomFilter;
use crate::error::{Error, Result};
use crate::filter::BloomFilter;
use crate::hashing::Scheme;
use crate::query_filter::QueryFilter;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// A filter as stored in a file: plain, counting, or the rows of a Hadoop `DynamicBloomFilter`.
#[derive(Clone, Debug, PartialEq)]
pub enum StoredFilter {
    Plain(BloomFilter),
    Counting(CountingBloomFilter),
    Dynamic(DynamicBloomFilter),
}

impl StoredFilter {
    /// The kind, as `info` names it.
    pub fn kind(&self) -> &'static str {
        match self {
            StoredFilter::Plain(_) => "bloom",
            StoredFilter::Counting(_) => "counting-bloom",
            StoredFilter::Dynamic(_) => "dynamic-bloom",
        }
    }

    /// Its identity (a dynamic filter's rows share one).
    pub fn spec(&self) -> &crate::FilterSpec {
        match self {
            StoredFilter::Plain(f) => f.spec(),
            StoredFilter::Counting(c) => c.spec(),
            StoredFilter::Dynamic(d) => d.spec(),
        }
    }

    /// The false-positive rate its fill gives (see [`BloomFilter::estimated_fpp`]).
    pub fn estimated_fpp(&self) -> f64 {
        match self {
            StoredFilter::Plain(f) => f.estimated_fpp(),
            StoredFilter::Counting(c) => c.estimated_fpp(),
            StoredFilter::Dynamic(d) => d.estimated_fpp(),
        }
    }

    /// How the filter's keys were encoded, where known.
    pub fn key_form(&self) -> Option<crate::records::KeyForm> {
        match self {
            StoredFilter::Plain(f) => f.key_form(),
            StoredFilter::Counting(c) => c.key_form(),
            StoredFilter::Dynamic(_) => None,
        }
    }

    /// Records how the filter's keys were encoded (written to native files). A dynamic
    /// filter, which only Hadoop's format holds, has nowhere to keep it.
    pub fn set_key_form(&mut self, form: Option<crate::records::KeyForm>) {
        match self {
            StoredFilter::Plain(f) => f.set_key_form(form),
            StoredFilter::Counting(c) => c.set_key_form(form),
            StoredFilter::Dynamic(_) => {}
        }
    }

    /// Sets the count of keys inserted (the jobs sum their workers' counts). A dynamic filter
    /// counts its own ([`DynamicBloomFilter::items_inserted`]).
    pub fn set_items_inserted(&mut self, n: u64) {
        match self {
            StoredFilter::Plain(f) => f.set_items_inserted(n),
            StoredFilter::Counting(c) => c.set_items_inserted(n),
            StoredFilter::Dynamic(_) => {}
        }
    }

    /// The plain filter: a counting filter's counters above zero as bits, a dynamic filter's
    /// one row. A dynamic filter of several rows is refused: ORed into one filter, its rows
    /// would answer "maybe" far more often than Hadoop's (see [`crate::dynamic`]).
    pub fn into_plain(self) -> Result<BloomFilter> {
        match self {
            StoredFilter::Plain(f) => Ok(f),
            StoredFilter::Counting(c) => Ok(c.to_bloom_filter()),
            StoredFilter::Dynamic(d) if d.rows().len() == 1 => Ok(d.into_rows().remove(0)),
            StoredFilter::Dynamic(d) => Err(Error::invalid(
                "filter",
                format!("a Hadoop DynamicBloomFilter of {} rows is not one plain filter: its rows answer together", d.rows().len()),
            )),
        }
    }

    /// The counting filter, or why this one cannot have keys removed (for `remove` and
    /// `subtract` to name with the file).
    pub fn into_counting(self) -> std::result::Result<CountingBloomFilter, String> {
        let what = match self {
            StoredFilter::Counting(c) => return Ok(c),
            StoredFilter::Plain(_) => "a plain Bloom filter",
            StoredFilter::Dynamic(_) => "a Hadoop DynamicBloomFilter",
        };
        Err(format!(
            "{what}, whose bits do not count the keys that set them: only a counting filter (built with `build --counting`) can have keys removed"
        ))
    }

    /// The filter as queries and joins ask it: a counting filter's counters above zero as
    /// bits, a dynamic filter's rows as they are.
    pub fn into_query_filter(self) -> QueryFilter {
        match self {
            StoredFilter::Dynamic(d) => QueryFilter::Rows(d),
            StoredFilter::Plain(f) => QueryFilter::One(f),
            StoredFilter::Counting(c) => QueryFilter::One(c.to_bloom_filter()),
        }
    }
}

/// The layout a filter file was found in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileFormat {
    /// bloomflow's own format, of this version (2 records the key form).
    Native(u32),
    Hadoop,
    HadoopLegacy,
    Spark,
}

impl std::fmt::Display for FileFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FileFormat::Native(version) => return write!(f, "native v{version}"),
            FileFormat::Hadoop => "hadoop writable",
            FileFormat::HadoopLegacy => "hadoop writable (legacy, unversioned)",
            FileFormat::Spark => "spark",
        })
    }
}

/// The file a filter path names: itself, or the `bloom` file of a `BloomMapFile` directory.
pub fn filter_file(path: &Path) -> std::path::PathBuf {
    hadoop::bloom_map_file_filter(path).unwrap_or_else(|| path.to_path_buf())
}

/// Reads a filter file of any supported format.
pub fn load(path: &Path) -> Result<StoredFilter> {
    load_any(path).map(|(f, _)| f)
}

/// Reads a filter file and says which format it was in.
pub fn load_any(path: &Path) -> Result<(StoredFilter, FileFormat)> {
    let path = &filter_file(path);
    let (mut file, len) = native::open_regular(path)?;
    // Enough for every format's header, and for a Hadoop dynamic filter's first row's.
    let mut prefix = vec![0u8; len.min(hadoop::DETECTION_PREFIX) as usize];
    file.read_exact(&mut prefix).map_err(|e| Error::io(path, e))?;
    if native::is_native(&prefix) {
        return native::read(path).map(|f| {
            let version = native::version_for(f.key_form());
            (f, FileFormat::Native(version))
        });
    }
    if prefix.len() < 4 {
        return Err(Error::bad_file(path, format!("file is {len} bytes, too short to be a filter file")));
    }
    let first = foreign::be_i32(&prefix, 0);
    // Spark files start with 1 or 2, as a legacy Hadoop file with k = 1 or 2 does: the lengths
    // the two headers imply tell them apart.
    let (format, header_len) = match first {
        -1 => (FileFormat::Hadoop, hadoop::HEADER_LEN),
        1 | 2 if spark::implied_len(&prefix) == Some(len) => (FileFormat::Spark, spark::header_len(first)),
        n if n > 0 && hadoop::kind(&prefix, len, true).is_some() => (FileFormat::HadoopLegacy, hadoop::LEGACY_HEADER_LEN),
        // A Spark version whose length is off: report it as a damaged Spark file.
        1 | 2 => (FileFormat::Spark, spark::header_len(first)),
        _ => {
            return Err(Error::bad_file(
                path,
                "not a filter file (bad magic): no bloomflow magic, no Hadoop version -1, and its length \
                 matches no Spark or legacy Hadoop header",
            ))
        }
    };
    file.seek(SeekFrom::Start(header_len.min(len))).map_err(|e| Error::io(path, e))?;
    let mut input = std::io::BufReader::with_capacity(1 << 20, file);
    let filter = match format {
        FileFormat::Spark => StoredFilter::Plain(spark::read(path, &mut input, &prefix, len)?),
        _ => hadoop::read(path, &mut input, &prefix, len, format == FileFormat::HadoopLegacy)?,
    };
    Ok((filter, format))
}

/// Writes a filter in the format its scheme belongs to (atomically: temporary name, rename).
pub fn write(path: &Path, filter: &StoredFilter) -> Result<()> {
    match filter {
        StoredFilter::Plain(f) => write_plain(path, f),
        StoredFilter::Counting(c) => write_counting(path, c),
        StoredFilter::Dynamic(d) => hadoop::write_dynamic(path, d),
    }
}

/// Writes a counting filter in the format its scheme belongs to: bloomflow's, or Hadoop's
/// `CountingBloomFilter`. Spark has no counting filter.
pub fn write_counting(path: &Path, c: &CountingBloomFilter) -> Result<()> {
    match c.spec().scheme {
        Scheme::Native | Scheme::NativeLookup3 => native::write_counting(path, c),
        Scheme::Hadoop(_) => hadoop::write_counting(path, c),
        Scheme::SparkV1 | Scheme::SparkV2 => counting_supported(c.spec().scheme),
    }
}

/// Whether a counting filter of `scheme` can be written: Spark's format holds bits only.
pub fn counting_supported(scheme: Scheme) -> Result<()> {
    match scheme {
        Scheme::SparkV1 | Scheme::SparkV2 => Err(counting_refused(scheme)),
        _ => Ok(()),
    }
}

fn counting_refused(scheme: Scheme) -> Error {
    Error::invalid(
        "--counting",
        format!("Spark has no counting filter (its files hold bits), so a {scheme} filter cannot count: use the native or the Hadoop format"),
    )
}

/// Writes a plain filter in the format its scheme belongs to.
pub fn write_plain(path: &Path, f: &BloomFilter) -> Result<()> {
    match f.spec().scheme {
        Scheme::Native | Scheme::NativeLookup3 => native::write_plain(path, f),
        Scheme::Hadoop(_) => hadoop::write(path, f),
        Scheme::SparkV1 | Scheme::SparkV2 => spark::write(path, f),
    }
}
