//! The record parser: any line, delimiter and field index; the key must be a part of the line
//! (or its unescaped content), and lines without quotes must split exactly as a plain split.
#![no_main]
use bloomflow::records::{extract_key, KeyError};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&control, line)) = data.split_first() else { return };
    let delimiter = b",\t;|"[(control & 3) as usize];
    let index = (control >> 2) as usize % 8;
    if line.contains(&b'\n') {
        return; // lines never contain their terminator
    }
    let mut scratch = Vec::new();
    let got = extract_key(line, delimiter, index, &mut scratch).map(|k| k.to_vec());
    if !line.contains(&b'"') {
        let fields: Vec<&[u8]> = line.split(|&b| b == delimiter).collect();
        match fields.get(index) {
            Some(f) => assert_eq!(got, Ok(f.to_vec())),
            None => assert_eq!(got, Err(KeyError::MissingField { fields: fields.len() })),
        }
    } else if let Ok(key) = got {
        assert!(key.len() <= line.len());
    }
});
