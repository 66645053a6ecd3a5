//! The Hadoop Writable reader: inputs start with VERSION = -1 (the legacy layout is reached
//! through `read_spark`'s small positive ints and the detection between the two).
#![no_main]
#[path = "common.rs"]
mod common;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut bytes = vec![0xff; 4];
    bytes.extend_from_slice(data);
    common::read(&bytes);
});
