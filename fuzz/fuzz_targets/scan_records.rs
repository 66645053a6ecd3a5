//! The scan, the jobs' per-record hot path: for any file, delimiter, key field, key rules,
//! header or none, and split size, a worker's scan of every split must hand over exactly the records and keys that
//! reading the file line by line with the record parser gives, count the same records and
//! malformed ones, and describe the first malformed ones at the same line numbers. This holds
//! the scan's fast path for the usual batch (no quotes, a one-field byte key) and its hand-over
//! to the general path, at a blank or malformed line, to the plainest reading of the file; and
//! with a NULL text, its records with a NULL key, dropped or kept in place, marked.
#![no_main]
use bloomflow::records::{bom_len, key_or_null, trim_line_end, Key, KeyField, KeyRules, KeyType, RecordFormat};
use bloomflow::scan::{ScanOptions, Source, MALFORMED_EXAMPLES};
use bloomflow::splits::{LineEnds, TextStart};
use libfuzzer_sys::fuzz_target;
use std::sync::atomic::{AtomicBool, AtomicU64};

/// What a scan gives: its (key, record) pairs (the key `None` for a NULL key kept), the records,
/// malformed records and NULL keys it counted, and the line numbers of the malformed records it
/// described; `None` if it failed (an unclosed quote fails the scan).
#[derive(Debug, PartialEq)]
struct Scanned {
    pairs: Vec<(Option<Vec<u8>>, Vec<u8>)>,
    records: u64,
    malformed: u64,
    null_keys: u64,
    described_lines: Vec<u64>,
}

fuzz_target!(|data: &[u8]| {
    let [control, size, kind, text @ ..] = data else { return };
    let delimiter = b",|"[(control & 1) as usize];
    let rules = KeyRules {
        // The third byte picks the type other than bytes.
        key_type: match control & 2 {
            0 => KeyType::Bytes,
            _ => [KeyType::Long, KeyType::Text, KeyType::LongWritable, KeyType::IntWritable, KeyType::BytesWritable][(kind & 0x3f) as usize % 5],
        },
        reject_empty: control & 4 != 0,
    };
    let has_header = control & 8 != 0;
    // The third byte's top bit: quoted fields may hold line breaks (`--multiline`).
    let multiline = kind & 0x80 != 0;
    // Its next bit: records of at most 24 bytes, a limit under which, with `--multiline`, a
    // split may start in a stretch without quotes (longer than the limit: no field is open).
    let max_record = if kind & 0x40 != 0 { 24 } else { 1 << 20 };
    let field = 1 + (control >> 4) as usize % 4;
    // No NULL text; the empty field as NULL, its records dropped or kept; `N` as NULL, kept.
    let (null_key, keep_null_records) = match control >> 6 {
        0 => (None, false),
        1 => (Some(b"".to_vec()), false),
        2 => (Some(b"".to_vec()), true),
        _ => (Some(b"N".to_vec()), true),
    };
    // Splits of 1-255 bytes, or one split for the whole file.
    let split_size = if *size == 0 { 1 << 30 } else { *size as u64 };
    if text.is_empty() {
        return; // refused when the job is planned
    }
    let path = std::path::PathBuf::from(format!("/dev/shm/bloomflow-fuzz-scan-{}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let options = ScanOptions {
        format: RecordFormat { delimiter, has_header, multiline },
        key: Key::single(KeyField::Index(field)),
        split_size,
        max_record,
        strict: false,
        key_rules: rules,
        stdin_compression: None,
        null_key: null_key.clone(),
        keep_null_records,
    };
    // A header without the key's field is refused when the job is planned.
    let Ok(source) = Source::plan(std::slice::from_ref(&path), options, 1) else { return };
    let mut pairs = Vec::new();
    let scanned = source.scan_worker(0, 1, &AtomicBool::new(false), &AtomicU64::new(0), |batch| {
        let from = pairs.len();
        pairs.extend(batch.keys.iter().zip(batch.records).map(|(k, r)| (Some(k.to_vec()), r.to_vec())));
        for &i in batch.nulls {
            assert_eq!(batch.keys[i], b"", "a NULL's place holds the empty key");
            pairs[from + i].0 = None;
        }
        Ok(())
    });
    let got = scanned.ok().map(|stats| Scanned {
        pairs,
        records: stats.records,
        malformed: stats.malformed,
        null_keys: stats.null_keys,
        described_lines: stats.malformed_examples.iter().map(|e| e.split(':').nth(1).unwrap().parse().unwrap()).collect(),
    });
    let want = line_by_line(text, has_header, delimiter, field - 1, &rules, null_key.as_deref(), keep_null_records, multiline, max_record);
    assert_eq!(got, want, "delimiter {:?}, field {field}, header {has_header}, {rules:?}, null {null_key:?} kept {keep_null_records}, multiline {multiline}, split size {split_size}, max record {max_record}", delimiter as char);
});

/// The file read as the scan must read it: lines ending at each newline (the last may lack
/// one), or at each CR in a file whose lines end in CR alone (each read as an LF), a byte order
/// mark dropped at the start, the first line skipped as the header (even blank) where there is
/// one, blank lines skipped, and each key taken by the record parser and encoded by the key
/// rules, unless the parser finds it NULL: then counted, and kept with no key where
/// `keep_nulls`. With `multiline`, records instead of lines ([`records_of`]), each numbered by
/// the line it starts on. A record longer than `max_record` bytes (a byte order mark counted
/// in the first) fails the scan.
#[allow(clippy::too_many_arguments)]
fn line_by_line(text: &[u8], has_header: bool, delimiter: u8, index: usize, rules: &KeyRules, null: Option<&[u8]>, keep_nulls: bool, multiline: bool, max_record: usize) -> Option<Scanned> {
    let mut want = Scanned { pairs: Vec::new(), records: 0, malformed: 0, null_keys: 0, described_lines: Vec::new() };
    // Its line ends told from its first bytes, as every reader tells them.
    let ends = LineEnds::of(&TextStart::read(text, 1 << 20).unwrap());
    let bom = bom_len(text);
    let text = &text[bom..];
    let as_lf: Vec<u8>;
    let text = if ends == LineEnds::Cr {
        as_lf = text.iter().map(|&b| if b == b'\r' { b'\n' } else { b }).collect();
        &as_lf[..]
    } else {
        text
    };
    let (mut scratch, mut encoded) = (Vec::new(), Vec::new());
    let records: Vec<(usize, &[u8])> = match multiline {
        true => records_of(text, delimiter),
        false => text.split_inclusive(|&b| b == b'\n').enumerate().map(|(i, line)| (i + 1, line)).collect(),
    };
    if records.iter().enumerate().any(|(i, (_, r))| r.len() + if i == 0 { bom } else { 0 } > max_record) {
        return None;
    }
    for (number, record) in records.into_iter().skip(has_header as usize) {
        let line = trim_line_end(record);
        if line.is_empty() {
            continue;
        }
        want.records += 1;
        let key = match key_or_null(line, delimiter, index, true, null, &mut scratch) {
            Ok(None) => {
                want.null_keys += 1;
                if keep_nulls {
                    want.pairs.push((None, record.to_vec()));
                }
                continue;
            }
            Ok(Some(key)) => Ok(key),
            Err(e) => Err(e),
        };
        match key.and_then(|key| rules.encode(key, &mut encoded)) {
            Ok(key) => want.pairs.push((Some(key.to_vec()), record.to_vec())),
            Err(e) if e.is_fatal() => return None,
            Err(_) => {
                want.malformed += 1;
                if want.described_lines.len() < MALFORMED_EXAMPLES {
                    want.described_lines.push(number as u64);
                }
            }
        }
    }
    Some(want)
}

/// The records of `text` as `--multiline` reads them, byte by byte, each with the number of the
/// line it starts on: a newline ends a record unless it is inside a field that opens with a
/// quote, up to that field's closing quote (`""` inside it is an escaped quote); a quote inside
/// an unquoted field is a plain byte.
fn records_of(text: &[u8], delimiter: u8) -> Vec<(usize, &[u8])> {
    let (mut records, mut start, mut line, mut start_line) = (Vec::new(), 0, 1, 1);
    let (mut in_quotes, mut field_start, mut escaped) = (false, true, false);
    for (i, &b) in text.iter().enumerate() {
        if std::mem::take(&mut escaped) {
            continue;
        }
        if in_quotes {
            match b {
                b'"' if text.get(i + 1) == Some(&b'"') => escaped = true,
                b'"' => in_quotes = false,
                b'\n' => line += 1,
                _ => {}
            }
            continue;
        }
        match b {
            b'\n' => {
                line += 1;
                records.push((start_line, &text[start..=i]));
                (start, start_line, field_start) = (i + 1, line, true);
            }
            b'"' if field_start => (in_quotes, field_start) = (true, false),
            _ => field_start = b == delimiter,
        }
    }
    if start < text.len() {
        records.push((start_line, &text[start..]));
    }
    records
}
