//! The scan, the jobs' per-record hot path: for any file, delimiter, key field, key rules,
//! header or none, and split size, a worker's scan of every split must hand over exactly the records and keys that
//! reading the file line by line with the record parser gives, count the same records and
//! malformed ones, and describe the first malformed ones at the same line numbers. This holds
//! the scan's fast path for the usual batch (no quotes, a one-field byte key) and its hand-over
//! to the general path, at a blank or malformed line, to the plainest reading of the file.
#![no_main]
use bloomflow::records::{bom_len, extract_key, trim_line_end, Key, KeyField, KeyRules, KeyType, RecordFormat};
use bloomflow::scan::{ScanOptions, Source, MALFORMED_EXAMPLES};
use libfuzzer_sys::fuzz_target;
use std::sync::atomic::{AtomicBool, AtomicU64};

/// What a scan gives: its (key, record) pairs, the records and malformed records it counted,
/// and the line numbers of the malformed records it described; `None` if it failed (an
/// unclosed quote fails the scan).
#[derive(Debug, PartialEq)]
struct Scanned {
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
    records: u64,
    malformed: u64,
    described_lines: Vec<u64>,
}

fuzz_target!(|data: &[u8]| {
    let [control, size, text @ ..] = data else { return };
    let delimiter = b",|"[(control & 1) as usize];
    let rules = KeyRules {
        key_type: if control & 2 != 0 { KeyType::Long } else { KeyType::Bytes },
        reject_empty: control & 4 != 0,
    };
    let has_header = control & 8 != 0;
    let field = 1 + (control >> 4) as usize % 4;
    // Splits of 1-255 bytes, or one split for the whole file.
    let split_size = if *size == 0 { 1 << 30 } else { *size as u64 };
    if text.is_empty() {
        return; // refused when the job is planned
    }
    let path = std::path::PathBuf::from(format!("/dev/shm/bloomflow-fuzz-scan-{}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let options = ScanOptions {
        format: RecordFormat { delimiter, has_header },
        key: Key::single(KeyField::Index(field)),
        split_size,
        max_record: 1 << 20,
        strict: false,
        key_rules: rules,
        stdin_compression: None,
        null_key: None,
        keep_null_records: false,
    };
    // A header without the key's field is refused when the job is planned.
    let Ok(source) = Source::plan(std::slice::from_ref(&path), options, 1) else { return };
    let mut pairs = Vec::new();
    let scanned = source.scan_worker(0, 1, &AtomicBool::new(false), &AtomicU64::new(0), |batch| {
        pairs.extend(batch.keys.iter().zip(batch.records).map(|(k, r)| (k.to_vec(), r.to_vec())));
        Ok(())
    });
    let got = scanned.ok().map(|stats| Scanned {
        pairs,
        records: stats.records,
        malformed: stats.malformed,
        described_lines: stats.malformed_examples.iter().map(|e| e.split(':').nth(1).unwrap().parse().unwrap()).collect(),
    });
    assert_eq!(got, line_by_line(text, has_header, delimiter, field - 1, &rules), "delimiter {:?}, field {field}, header {has_header}, {rules:?}, split size {split_size}", delimiter as char);
});

/// The file read as the scan must read it: lines ending at each newline (the last may lack
/// one), a byte order mark dropped at the start, the first line skipped as the header (even
/// blank) where there is one, blank lines skipped, and each key taken by the record parser and
/// encoded by the key rules.
fn line_by_line(text: &[u8], has_header: bool, delimiter: u8, index: usize, rules: &KeyRules) -> Option<Scanned> {
    let mut want = Scanned { pairs: Vec::new(), records: 0, malformed: 0, described_lines: Vec::new() };
    let text = &text[bom_len(text)..];
    let (mut scratch, mut long_buf) = (Vec::new(), [0u8; 8]);
    for (number, record) in text.split_inclusive(|&b| b == b'\n').enumerate().skip(has_header as usize) {
        let line = trim_line_end(record);
        if line.is_empty() {
            continue;
        }
        want.records += 1;
        match extract_key(line, delimiter, index, &mut scratch).and_then(|key| rules.encode(key, &mut long_buf)) {
            Ok(key) => want.pairs.push((key.to_vec(), record.to_vec())),
            Err(e) if e.is_fatal() => return None,
            Err(_) => {
                want.malformed += 1;
                if want.described_lines.len() < MALFORMED_EXAMPLES {
                    want.described_lines.push(number as u64 + 1);
                }
            }
        }
    }
    Some(want)
}
