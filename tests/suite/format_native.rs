//! The native `.bloom` format: round trips and hostile files.

use crate::util::{key, tempdir};
use bloomflow::format::{self, native, StoredFilter};
use bloomflow::records::{KeyForm, KeyType};
use bloomflow::{BloomFilter, CountingBloomFilter, Error, FilterSpec};
use std::path::Path;

fn sample_plain() -> BloomFilter {
    let mut f = BloomFilter::with_rate(5000, 0.01).unwrap();
    for i in 0..5000 {
        f.insert(&key(3, i));
    }
    f
}

fn write_sample(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("f.bloom");
    native::write_plain(&path, &sample_plain()).unwrap();
    path
}

fn bad_file_reason(path: &Path) -> String {
    match format::load(path) {
        Err(Error::BadFilterFile { reason, .. }) => reason,
        other => panic!("expected a bad-file error, got {other:?}"),
    }
}

#[test]
fn plain_round_trip_is_bit_exact() {
    let dir = tempdir();
    let original = sample_plain();
    let path = write_sample(dir.path());
    let loaded = format::load(&path).unwrap();
    assert_eq!(loaded, StoredFilter::Plain(original.clone()));
    // Writing the loaded filter again gives the same bytes.
    let again = dir.path().join("g.bloom");
    native::write_stored(&again, &loaded).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), std::fs::read(&again).unwrap());
    // No temporary files are left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

/// A filter whose key form is known is written as version 2 and read back with it; one whose
/// form is not (made through the library) stays version 1, byte for byte as before.
#[test]
fn a_recorded_key_form_round_trips_as_version_2() {
    let dir = tempdir();
    let plain = write_sample(dir.path());
    assert_eq!(std::fs::read(&plain).unwrap()[8..12], 1u32.to_le_bytes());
    assert_eq!(format::load(&plain).unwrap().into_plain().unwrap().key_form(), None);

    let mut f = sample_plain();
    let form = KeyForm { fields: 3, key_type: KeyType::Bytes };
    f.set_key_form(Some(form));
    let path = dir.path().join("k.bloom");
    native::write_plain(&path, &f).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes[8..12], 2u32.to_le_bytes());
    assert_eq!(format::load(&path).unwrap(), StoredFilter::Plain(f.clone()));
    assert_eq!(format::load_any(&path).unwrap().1.to_string(), "native v2");

    // A version 2 header without its key form, and a key of no fields, are corrupt.
    let mut b = std::fs::read(&plain).unwrap();
    b[8..12].copy_from_slice(&2u32.to_le_bytes());
    std::fs::write(&path, &b).unwrap();
    assert!(bad_file_reason(&path).contains("corrupt header"));
    let mut b = bytes.clone();
    let header_end = 16 + u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
    b[header_end - 8..header_end - 4].copy_from_slice(&0u32.to_le_bytes());
    std::fs::write(&path, &b).unwrap();
    assert!(bad_file_reason(&path).contains("a key of 0 fields"));

    // Filters of different key forms do not combine; a known form survives a union with an
    // unknown one.
    let mut other = sample_plain();
    other.set_key_form(Some(KeyForm { fields: 1, key_type: KeyType::Bytes }));
    assert!(matches!(other.clone().union(&f), Err(Error::Incompatible { what: "key", .. })));
    let mut unknown = sample_plain();
    unknown.union(&f).unwrap();
    assert_eq!(unknown.key_form(), Some(form));
}

#[test]
fn counting_round_trip_is_exact() {
    let dir = tempdir();
    let mut c = CountingBloomFilter::with_rate(1000, 0.01).unwrap();
    for i in 0..1000 {
        c.insert(&key(4, i % 300));
    }
    let path = dir.path().join("c.bloom");
    native::write_counting(&path, &c).unwrap();
    assert_eq!(format::load(&path).unwrap(), StoredFilter::Counting(c));
}

#[test]
fn a_filter_above_2_pow_32_bits_round_trips() {
    let dir = tempdir();
    let mut f = BloomFilter::new(FilterSpec::native((1 << 32) + 77, 2, 5).unwrap());
    f.insert(b"alpha");
    f.insert(b"omega");
    let path = dir.path().join("big.bloom");
    native::write_plain(&path, &f).unwrap();
    let back = format::load(&path).unwrap().into_plain().unwrap();
    assert!(back.contains(b"alpha") && back.contains(b"omega"));
    assert_eq!(back.bits_set(), f.bits_set());
    assert_eq!(back.spec(), f.spec());
}

#[test]
fn empty_file_is_rejected() {
    let dir = tempdir();
    let path = dir.path().join("empty.bloom");
    std::fs::write(&path, b"").unwrap();
    assert!(bad_file_reason(&path).contains("too short"));
}

#[test]
fn directory_is_rejected() {
    let dir = tempdir();
    assert!(bad_file_reason(dir.path()).contains("is a directory"));
}

#[test]
fn garbage_is_rejected_for_its_magic() {
    let dir = tempdir();
    let path = dir.path().join("garbage.bloom");
    std::fs::write(&path, vec![0x5a; 1000]).unwrap();
    assert!(bad_file_reason(&path).contains("bad magic"));
}

#[test]
fn truncated_body_is_rejected() {
    let dir = tempdir();
    let path = write_sample(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    for cut in [bytes.len() - 1, bytes.len() - 9, 100, 17] {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let reason = bad_file_reason(&path);
        assert!(reason.contains("truncated") || reason.contains("too short") || reason.contains("does not fit") || reason.contains("corrupt"), "{cut}: {reason}");
    }
}

#[test]
fn every_flipped_bit_is_caught() {
    let dir = tempdir();
    let path = write_sample(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    // Flip one bit in the prefix, the header, the body and the checksum.
    for at in [3, 9, 20, 40, 200, bytes.len() / 2, bytes.len() - 2] {
        let mut b = bytes.clone();
        b[at] ^= 0x10;
        std::fs::write(&path, &b).unwrap();
        assert!(format::load(&path).is_err(), "flip at byte {at} went unnoticed");
    }
}

/// Rewrites the header of a valid file with `edit` applied, keeping everything else.
fn with_header(bytes: &[u8], edit: impl Fn(&mut native::NativeHeader)) -> Vec<u8> {
    use bincode::Options;
    let codec = bincode::DefaultOptions::new().with_fixint_encoding().with_little_endian();
    let len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let mut header: native::NativeHeader = codec.deserialize(&bytes[16..16 + len]).unwrap();
    edit(&mut header);
    let encoded = codec.serialize(&header).unwrap();
    let mut out = bytes[..12].to_vec();
    out.extend((encoded.len() as u32).to_le_bytes());
    out.extend(encoded);
    out.extend(&bytes[16 + len..]);
    out
}

#[test]
fn hostile_headers_are_rejected_without_allocating() {
    let dir = tempdir();
    let path = write_sample(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("2^63 bits", with_header(&bytes, |h| h.spec.bits = 1 << 63)),
        ("2^59 bits", with_header(&bytes, |h| h.spec.bits = 1 << 59)),
        ("k = 0", with_header(&bytes, |h| h.spec.hashes = 0)),
        ("k = 1000", with_header(&bytes, |h| h.spec.hashes = 1000)),
        ("m = 0", with_header(&bytes, |h| h.spec.bits = 0)),
    ];
    for (what, b) in cases {
        std::fs::write(&path, &b).unwrap();
        let reason = bad_file_reason(&path);
        assert!(reason.contains("corrupt") || reason.contains("truncated"), "{what}: {reason}");
    }
    // A header length field that claims 4 GiB.
    let mut b = bytes.clone();
    b[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    std::fs::write(&path, &b).unwrap();
    assert!(bad_file_reason(&path).contains("header length"));
    // A future version.
    let mut b = bytes.clone();
    b[8..12].copy_from_slice(&9u32.to_le_bytes());
    std::fs::write(&path, &b).unwrap();
    assert!(bad_file_reason(&path).contains("version 9"));
}
