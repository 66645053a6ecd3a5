//! Counting filters: for any keys (cut from the input, repeated so that counters saturate), in
//! either layout and any k, a batched insert counts as inserts one by one do; merging two halves'
//! filters counts as inserting all (the jobs' all-reduce adds partials so); the plain filter of
//! the counters answers as a plain filter of the same keys does; removing keys never makes a key
//! still inserted answer no; and subtracting a counting filter of keys counts as removing them
//! one by one, and fails exactly when that would.
#![no_main]
use bloomflow::hashing::Scheme;
use bloomflow::{BloomFilter, CountingBloomFilter, FilterSpec, Layout};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&header, text)) = data.split_first() else { return };
    let k = 1 + header as u32 % 12;
    let layout = if header & 0x80 == 0 { Layout::Standard } else { Layout::Blocked };
    // Keys: the input cut at every 0xFF byte, each distinct one taken 1 to 20 times (its first
    // byte says).
    let mut seen = std::collections::HashSet::new();
    let distinct: Vec<&[u8]> = text.split(|&b| b == 0xFF).filter(|key| seen.insert(*key)).take(200).collect();
    let keys: Vec<&[u8]> = distinct.iter().flat_map(|&key| std::iter::repeat_n(key, 1 + key.first().map_or(0, |&b| b as usize % 20))).collect();
    let spec = FilterSpec::with_size(Scheme::NativeLookup3, layout, 2048, k, 9).unwrap();

    let mut one_by_one = CountingBloomFilter::new(spec);
    keys.iter().for_each(|key| one_by_one.insert(key));
    let mut batched = CountingBloomFilter::new(spec);
    keys.chunks(37).for_each(|chunk| batched.insert_batch(chunk));
    assert!(batched == one_by_one, "insert_batch counts otherwise");

    let (first, second) = keys.split_at(keys.len() / 2);
    let (mut merged, mut other) = (CountingBloomFilter::new(spec), CountingBloomFilter::new(spec));
    merged.insert_batch(first);
    other.insert_batch(second);
    merged.merge(&other).unwrap();
    assert!(merged == one_by_one, "the merge of two halves counts otherwise");

    let mut plain = BloomFilter::new(spec);
    keys.iter().for_each(|key| plain.insert(key));
    assert!(one_by_one.to_bloom_filter().bits() == plain.bits(), "to_bloom_filter");
    // The statistics counted in place are the plain filter's.
    assert_eq!(one_by_one.counters_set(), plain.bits_set(), "counters_set");
    assert_eq!(one_by_one.estimated_fpp().to_bits(), plain.estimated_fpp().to_bits(), "estimated_fpp");

    // Every other distinct key removed once per insert: the rest still answer maybe. Subtracting
    // a counting filter of those keys (the subtract job's step) leaves the same counters.
    let mut removed = one_by_one.clone();
    let mut removals = CountingBloomFilter::new(spec);
    for (i, &key) in keys.iter().enumerate() {
        if distinct.iter().position(|&d| d == key).is_some_and(|d| d % 2 == 0) {
            removed.remove(key).unwrap_or_else(|e| panic!("removing inserted key {i}: {e}"));
            removals.insert(key);
        }
    }
    for (d, key) in distinct.iter().enumerate() {
        assert!(d % 2 == 0 || removed.contains(key), "a key still inserted answers no");
    }
    let mut subtracted = one_by_one.clone();
    subtracted.subtract(&removals).unwrap_or_else(|e| panic!("subtracting inserted keys: {e}"));
    assert!(subtracted.words() == removed.words(), "subtract counts otherwise than remove");
    // Subtracting the removals once more fails exactly when removing them one by one again
    // would, and a failed subtract changes nothing.
    let again = keys.iter().filter(|&&key| distinct.iter().position(|&d| d == key).is_some_and(|d| d % 2 == 0)).try_fold(removed.clone(), |mut f, key| f.remove(key).map(|()| f));
    let before = subtracted.clone();
    match (subtracted.subtract(&removals), again) {
        (Ok(()), Ok(f)) => assert!(subtracted.words() == f.words(), "a second subtract counts otherwise"),
        (Err(_), Err(_)) => assert!(subtracted == before, "a failed subtract changed the counters"),
        (s, r) => panic!("subtract {:?} but removing one by one {:?}", s.err(), r.err()),
    }
});
