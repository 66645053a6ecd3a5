//! `bloomflow info FILE [--json]`.

use bloomflow::format::{self, StoredFilter};
use bloomflow::hashing::{BlockKernel, Scheme};
use bloomflow::records::KeyForm;
use bloomflow::{FilterSpec, Layout};
use bloomflow::params;
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The filter file: native .bloom, Hadoop or Spark (detected), or a BloomMapFile directory.
    file: PathBuf,
    /// Print one JSON object instead of aligned text.
    #[arg(long)]
    json: bool,
}

/// What `info` reports, in text or JSON.
#[derive(Serialize)]
struct Info {
    file: String,
    kind: &'static str,
    format: String,
    scheme: String,
    layout: String,
    /// The blocked layout's query code on this CPU (none for the standard layout).
    query_kernel: Option<&'static str>,
    seed: u32,
    bits: u64,
    hashes: u32,
    bytes: u64,
    bits_set: u64,
    fill_ratio: f64,
    /// None for Hadoop and Spark files, which do not record it (but a Hadoop
    /// `DynamicBloomFilter`'s, which its counts of keys a row imply).
    items_inserted: Option<u64>,
    estimated_items: f64,
    estimated_fpp: f64,
    expected_items: Option<u64>,
    target_fpp: Option<f64>,
    /// How the keys were encoded (native version 2 files record it).
    key: Option<String>,
    /// A counting filter's counters at 15, which `remove` never decrements.
    #[serde(skip_serializing_if = "Option::is_none")]
    saturated_counters: Option<u64>,
    /// A Hadoop `DynamicBloomFilter`'s rows, each of `bits` bits.
    #[serde(skip_serializing_if = "Option::is_none", flatten)]
    rows: Option<Rows>,
}

/// A Hadoop `DynamicBloomFilter`'s rows and its counts.
#[derive(Serialize, Clone, Copy)]
struct Rows {
    rows: u64,
    /// Hadoop's `nr`: the keys a row takes before the next is added.
    records_per_row: u32,
    /// Hadoop's `currentNbRecord`.
    last_row_records: u32,
}

/// The fields of `info` that each kind of filter gives in its own way.
struct KindFields {
    spec: FilterSpec,
    /// Bits set; a counting filter's counters above zero (the statistics of the plain filter
    /// it implies, counted in place); a dynamic filter's in all its rows.
    bits_set: u64,
    /// Of all the bits (all rows' for a dynamic filter).
    fill_ratio: f64,
    estimated_items: f64,
    estimated_fpp: f64,
    items_inserted: Option<u64>,
    expected_items: u64,
    target_fpp: f64,
    key_form: Option<KeyForm>,
    saturated_counters: Option<u64>,
    rows: Option<Rows>,
}

impl KindFields {
    /// The fields of `stored`; `native` when it was read from a native file, the only format
    /// that records the keys inserted into a plain or counting filter.
    fn of(stored: &StoredFilter, native: bool) -> KindFields {
        match stored {
            StoredFilter::Plain(f) => KindFields {
                spec: *f.spec(),
                bits_set: f.bits_set(),
                fill_ratio: f.fill_ratio(),
                estimated_items: f.estimated_items(),
                estimated_fpp: f.estimated_fpp(),
                items_inserted: native.then_some(f.items_inserted()),
                expected_items: f.expected_items(),
                target_fpp: f.target_fpp(),
                key_form: f.key_form(),
                saturated_counters: None,
                rows: None,
            },
            StoredFilter::Counting(c) => KindFields {
                spec: *c.spec(),
                bits_set: c.counters_set(),
                fill_ratio: c.counters_set() as f64 / c.spec().bits as f64,
                estimated_items: params::estimated_items(c.spec().bits, c.spec().hashes, c.counters_set()),
                estimated_fpp: c.estimated_fpp(),
                items_inserted: native.then_some(c.items_inserted()),
                expected_items: c.expected_items(),
                target_fpp: c.target_fpp(),
                key_form: c.key_form(),
                saturated_counters: Some(c.saturated_counters()),
                rows: None,
            },
            StoredFilter::Dynamic(d) => KindFields {
                spec: *d.spec(),
                bits_set: d.bits_set(),
                fill_ratio: d.fill_ratio(),
                estimated_items: d.estimated_items(),
                estimated_fpp: d.estimated_fpp(),
                items_inserted: d.items_inserted(),
                expected_items: 0,
                target_fpp: 0.0,
                key_form: None,
                saturated_counters: None,
                rows: Some(Rows { rows: d.rows().len() as u64, records_per_row: d.records_per_row(), last_row_records: d.last_row_records() }),
            },
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let file = format::filter_file(&args.file);
    let (stored, file_format) = format::load_any(&file)?;
    let bytes = std::fs::metadata(&file)?.len();
    let kind = stored.kind();
    let native = matches!(file_format, format::FileFormat::Native(_));
    let fields = KindFields::of(&stored, native);
    let spec = fields.spec;
    let info = Info {
        file: file.display().to_string(),
        kind,
        format: match (file_format, spec.scheme) {
            (format::FileFormat::Spark, Scheme::SparkV1) => "spark v1".into(),
            (format::FileFormat::Spark, _) => "spark v2".into(),
            (other, _) => other.to_string(),
        },
        scheme: spec.scheme.to_string(),
        layout: spec.layout.to_string(),
        query_kernel: (spec.layout == Layout::Blocked).then(|| BlockKernel::detect().name()),
        seed: spec.seed,
        bits: spec.bits,
        hashes: spec.hashes,
        bytes,
        bits_set: fields.bits_set,
        fill_ratio: fields.fill_ratio,
        items_inserted: fields.items_inserted,
        estimated_items: fields.estimated_items,
        estimated_fpp: fields.estimated_fpp,
        expected_items: (fields.expected_items > 0).then_some(fields.expected_items),
        target_fpp: (fields.target_fpp > 0.0).then_some(fields.target_fpp),
        key: fields.key_form.map(|k| k.to_string()),
        saturated_counters: fields.saturated_counters,
        rows: fields.rows,
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &info)?;
        writeln!(out)?;
        return Ok(());
    }
    let none = || "(not recorded)".to_string();
    let rows = [
        ("file", info.file.clone()),
        ("kind", info.kind.to_string()),
        ("format", info.format.clone()),
        ("scheme", info.scheme.clone()),
        ("layout", info.layout.clone()),
        ("query kernel", info.query_kernel.map_or_else(|| "(standard layout)".to_string(), |k| format!("{k} (this CPU)"))),
        ("seed", info.seed.to_string()),
        ("bits (m)", info.bits.to_string()),
        ("hashes (k)", info.hashes.to_string()),
        ("bytes", format!("{} ({})", info.bytes, bloomflow::limits::human_bytes(info.bytes))),
        ("bits set", info.bits_set.to_string()),
        ("fill ratio", format!("{:.6}", info.fill_ratio)),
        ("items inserted", info.items_inserted.map_or_else(none, |n| n.to_string())),
        ("estimated items", format!("{:.0}", info.estimated_items)),
        ("estimated fpp", format!("{:.6}", info.estimated_fpp)),
        ("expected items", info.expected_items.map_or_else(none, |n| n.to_string())),
        ("target fpp", info.target_fpp.map_or_else(none, |p| p.to_string())),
        ("key", info.key.clone().unwrap_or_else(none)),
        (
            "fpp at expected items",
            info.expected_items
                .map_or_else(none, |n| format!("{:.6}", params::expected_fpp(info.bits, info.hashes, n))),
        ),
    ];
    let saturated = info.saturated_counters.map(|n| ("saturated counters", format!("{n} (at 15: never decremented by remove)")));
    let dynamic = info.rows.map(|r| {
        let full = format!("{} (of {} bits each; keys a row takes: {}, in the last: {})", r.rows, info.bits, r.records_per_row, r.last_row_records);
        ("rows", full)
    });
    for (name, value) in rows.into_iter().chain(saturated).chain(dynamic).chain(fold_hint(&info)) {
        writeln!(out, "{name:<22}{value}")?;
    }
    Ok(())
}

/// Where a plain or counting filter holds under an eighth of the keys it was sized for (by its
/// fill), a row saying that `bloomflow fold` can shrink it.
fn fold_hint(info: &Info) -> Option<(&'static str, String)> {
    let expected = info.expected_items.filter(|_| info.rows.is_none())?;
    (info.estimated_items * 8.0 < expected as f64).then(|| {
        let held = info.estimated_items;
        ("note", format!("it holds about {held:.0} distinct keys of the {expected} it was sized for: `bloomflow fold` can shrink it"))
    })
}
