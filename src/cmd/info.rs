//! `bloomflow info FILE [--json]`.

use bloomflow::format::{self, StoredFilter};
use bloomflow::hashing::{BlockKernel, Scheme};
use bloomflow::Layout;
use bloomflow::params;
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The filter file: native .bloom, Hadoop or Spark (detected).
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
    /// None for Hadoop and Spark files, which do not record it.
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
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let (stored, file_format) = format::load_any(&args.file)?;
    let bytes = std::fs::metadata(&args.file)?.len();
    let kind = stored.kind();
    // A counter is "set" when non-zero: the same statistics as the plain filter it implies,
    // counted in place.
    let (bits_set, estimated_fpp, saturated_counters) = match &stored {
        StoredFilter::Plain(f) => (f.bits_set(), f.estimated_fpp(), None),
        StoredFilter::Counting(c) => (c.counters_set(), c.estimated_fpp(), Some(c.saturated_counters())),
    };
    let (spec, items_inserted, expected_items, target_fpp, key_form) = match &stored {
        StoredFilter::Plain(f) => (*f.spec(), f.items_inserted(), f.expected_items(), f.target_fpp(), f.key_form()),
        StoredFilter::Counting(c) => (*c.spec(), c.items_inserted(), c.expected_items(), c.target_fpp(), c.key_form()),
    };
    let info = Info {
        file: args.file.display().to_string(),
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
        bits_set,
        fill_ratio: bits_set as f64 / spec.bits as f64,
        items_inserted: matches!(file_format, format::FileFormat::Native(_)).then_some(items_inserted),
        estimated_items: params::estimated_items(spec.bits, spec.hashes, bits_set),
        estimated_fpp,
        expected_items: (expected_items > 0).then_some(expected_items),
        target_fpp: (target_fpp > 0.0).then_some(target_fpp),
        key: key_form.map(|k| k.to_string()),
        saturated_counters,
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
    for (name, value) in rows.into_iter().chain(saturated) {
        writeln!(out, "{name:<22}{value}")?;
    }
    Ok(())
}
