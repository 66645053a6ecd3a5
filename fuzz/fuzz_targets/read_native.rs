//! The native `.bloom` reader: inputs start with the magic and version so that the fuzzer spends
//! its time in the header and body checks.
#![no_main]
#[path = "common.rs"]
mod common;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut bytes = b"BLOOMFLW\x01\x00\x00\x00".to_vec();
    bytes.extend_from_slice(data);
    common::read(&bytes);
});
