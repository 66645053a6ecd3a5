//! The Spark reader (and its detection against legacy Hadoop files): inputs start with version
//! 1 or 2, chosen by the first byte.
#![no_main]
#[path = "common.rs"]
mod common;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&choice, rest)) = data.split_first() else { return };
    let mut bytes = vec![0, 0, 0, 1 + (choice & 1)];
    bytes.extend_from_slice(rest);
    common::read(&bytes);
});
