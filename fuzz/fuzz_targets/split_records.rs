//! The splitter: for any file and split size, reading every split must give exactly the records
//! of reading the file whole, each once and in order, and key extraction must not panic.
#![no_main]
use bloomflow::records::extract_key;
use bloomflow::splits::{plan_splits, resolve_inputs, SplitReader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&size, text)) = data.split_first() else { return };
    let split_size = 1 + size as u64 % 64;
    let path = std::path::PathBuf::from(format!("/dev/shm/bloomflow-fuzz-split-{}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let inputs = resolve_inputs(std::slice::from_ref(&path)).unwrap();
    let records = |split_size: u64| -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        for split in plan_splits(&inputs, split_size, split_size).unwrap() {
            let mut reader = SplitReader::open(&path, &split, 1 << 20).unwrap();
            while let Some((offset, record)) = reader.next_record().unwrap() {
                assert!(offset >= split.start && offset < split.end, "record outside its split");
                out.push((offset, record.to_vec()));
            }
        }
        out
    };
    let whole = records(u64::MAX);
    assert_eq!(records(split_size), whole, "split size {split_size}");
    assert_eq!(whole.iter().map(|(_, r)| r.len()).sum::<usize>(), text.len(), "bytes lost or repeated");
    let mut scratch = Vec::new();
    for (_, record) in &whole {
        for index in 0..3 {
            let _ = extract_key(bloomflow::records::trim_line_end(record), b',', index, &mut scratch);
        }
    }
});
