use super::*;

#[test]
fn inline_words_are_the_zero_padded_key_for_every_length() {
    let bytes: Vec<u8> = (0..8u8).map(|i| i.wrapping_mul(37).wrapping_add(0x81)).collect();
    for n in 0..=8 {
        let mut padded = [0u8; 8];
        padded[..n].copy_from_slice(&bytes[..n]);
        assert_eq!(inline_word(&bytes[..n]), u64::from_le_bytes(padded), "length {n}");
    }
}


/// The arena's pieces, as a receiver holds them.
fn pieces_of(arena: &KeyArena) -> Vec<Vec<u8>> {
    arena.pieces().into_iter().map(|r| arena.as_bytes()[r].to_vec()).collect()
}

#[test]
fn holds_exactly_the_keys_put_in() {
    let mut arena = KeyArena::with_piece(1000);
    for i in 0..10_000u32 {
        arena.push(format!("k{}", i % 7000).as_bytes());
    }
    arena.push(b"");
    arena.push(b"a key longer than eight bytes");
    let pieces = pieces_of(&arena);
    // Sized for the keys, and for far fewer (the tables must grow).
    for counts in [arena.counts(), KeyCounts { keys: 100, numbers: 10, short: 50, ..KeyCounts::default() }] {
        let set = KeySet::build(&pieces, counts);
        assert_eq!(set.len(), 7_002, "each key held once");
        assert!((0..7000).all(|i| set.contains(format!("k{i}").as_bytes())));
        assert!(set.contains(b"") && set.contains(b"a key longer than eight bytes"));
        assert!(!set.contains(b"k7000") && !set.contains(b"k") && !set.contains(b"a key longer than eight byteS"));
        let keys: Vec<&[u8]> = vec![b"k5", b"nope", b"a key longer than eight bytes", b"12345678"];
        let mut answers = Vec::new();
        set.contains_batch(&keys, &mut answers);
        assert_eq!(answers, [true, false, true, false]);
    }
}

/// A set of long keys built with sketches rules out about 99% of the long keys it does not
/// hold before their lookup (the sketch's 16 bits a key, 4 in one word: about 0.5% pass), and
/// none it holds; numbers and short keys are not sketched.
#[test]
fn sketches_rule_out_most_absent_long_keys_and_no_held_one() {
    let mut arena = KeyArena::default();
    (0..20_000u32).for_each(|i| arena.push(format!("held key number {i}").as_bytes()));
    (0..1_000u32).for_each(|i| arena.push(format!("{i}").as_bytes()));
    let pieces = pieces_of(&arena);
    for parts in [1, 3] {
        let set = KeySet::from_partitions((0..parts).map(|i| PartitionBuilder::new(arena.counts(), i, parts).sketching().build(&pieces)).collect());
        assert!(set.parts.iter().all(Part::sketched));
        let h = hasher();
        let may_hold = |key: &[u8]| {
            let k = Hashed::new(&h, key, set.dense);
            set.part(&k).may_hold(&k)
        };
        assert!((0..20_000).all(|i| may_hold(format!("held key number {i}").as_bytes())));
        let passed = (0..100_000).filter(|i| may_hold(format!("absent key number {i}").as_bytes())).count();
        assert!(passed < 1_500, "{passed} of 100000 absent keys passed the sketch ({parts} partitions)");
        assert!((1_000..100_000).all(|i| may_hold(format!("{i}").as_bytes())), "numbers are not sketched");
    }
    let plain = KeySet::build(&pieces, arena.counts());
    assert!(!plain.parts.iter().any(Part::sketched), "only a set asked for them keeps sketches");
}

/// The arena counts short keys by length and last byte alone; the tables decide by the
/// word. They must agree, or a table would be sized for the wrong keys.
#[test]
fn is_short_agrees_with_short_word() {
    for len in 0..=10 {
        for last in [0u8, 1, 7, 8, 9, b'0', 0x7f, 0xff] {
            let mut key = vec![b'k'; len];
            if let Some(l) = key.last_mut() {
                *l = last;
            }
            assert_eq!(is_short(&key), short_word(&key).is_some(), "{key:?}");
        }
    }
}

/// A short key's word holds its length: keys that differ only by trailing zero bytes, and
/// an 8-byte key whose last byte is a shorter key's length, never share a word.
#[test]
fn short_words_tell_keys_apart() {
    let shorter = b"abcdefg";
    let mut eight = shorter.to_vec();
    for last in 0..=8u8 {
        eight.truncate(7);
        eight.push(last);
        // 8 bytes ending below 8 would read as the 7-byte key's word: they are not short.
        assert_eq!(short_word(&eight).is_some(), last == 8, "last byte {last}");
    }
    let padded: Vec<Vec<u8>> = (1..=8).map(|n| [&b"a"[..], &vec![0u8; n - 1]].concat()).collect();
    let words: std::collections::HashSet<Option<u64>> = padded.iter().map(|k| short_word(k)).collect();
    // Seven distinct words; the 8-byte key, ending in 0, is not short.
    assert_eq!(words.len(), 8);
    assert!(words.contains(&None));
    assert_eq!(short_word(b""), None);
    assert_eq!(short_word(b"123456789"), None);

    let mut arena = KeyArena::with_piece(100);
    for key in [&shorter[..], b"a", b"a\0", b"", b"12345678"] {
        arena.push(key);
    }
    let mut seven_then_seven = shorter.to_vec();
    seven_then_seven.push(7);
    arena.push(&seven_then_seven);
    let set = KeySet::build(&pieces_of(&arena), arena.counts());
    assert!(set.contains(shorter) && set.contains(&seven_then_seven));
    assert!(set.contains(b"a") && set.contains(b"a\0") && set.contains(b"") && set.contains(b"12345678"));
    assert!(!set.contains(b"a\0\0") && !set.contains(b"abcdefg\0") && !set.contains(b"abcdefg\x08"));
    let only_seven = KeySet::build(&pieces_of(&{ let mut a = KeyArena::default(); a.push(shorter); a }), KeyCounts { keys: 1, short: 1, ..KeyCounts::default() });
    assert!(!only_seven.contains(&seven_then_seven));
    let only_eight = KeySet::build(&pieces_of(&{ let mut a = KeyArena::default(); a.push(&seven_then_seven); a }), KeyCounts { keys: 1, ..KeyCounts::default() });
    assert!(!only_eight.contains(shorter));
}

/// The eight-at-a-time reading of numbers agrees with a digit loop: on every number below
/// 200,000 and near each power of ten, on random keys of 0–11 bytes mostly of digits (with
/// the bytes either side of '0' and '9', a high bit, a NUL), and on every 9-digit key with one
/// byte that is not a digit.
#[test]
fn numbers_read_eight_digits_at_a_time_as_a_digit_loop_reads_them() {
    use rand::{Rng, SeedableRng};
    let slow = |key: &[u8]| decimal(key, 1..=9).map(|value| value as u32 + 1);
    let powers = (0..=9).map(|e| 10u64.pow(e)).flat_map(|p| p.saturating_sub(3)..p + 3);
    for n in (0..200_000u64).chain(powers).chain(999_999_990..1_000_000_003) {
        let key = n.to_string();
        assert_eq!(number(key.as_bytes()), slow(key.as_bytes()), "{key}");
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    const ODD: [u8; 8] = [b'/', b':', b'a', b' ', 0, 0xff, 0xb0, b'0' + 0x80];
    for _ in 0..300_000 {
        let len = rng.gen_range(0..=11);
        let key: Vec<u8> = (0..len).map(|_| if rng.gen_bool(0.9) { rng.gen_range(b'0'..=b'9') } else { ODD[rng.gen_range(0..ODD.len())] }).collect();
        assert_eq!(number(&key), slow(&key), "{key:?}");
    }
    for at in 0..9 {
        for odd in ODD {
            let mut key = *b"123456789";
            key[at] = odd;
            assert_eq!(number(&key), None, "{key:?}");
        }
    }
}

/// A number is a decimal of 1–9 digits with no leading zero (or the digit 0 alone): no other
/// key reads as one, and keys that differ only by leading zeros stay apart, in their tables.
#[test]
fn numbers_are_canonical_decimals() {
    assert_eq!(number(b"0"), Some(1));
    assert_eq!(number(b"7"), Some(8));
    assert_eq!(number(b"123456789"), Some(123_456_790));
    assert_eq!(number(b"999999999"), Some(1_000_000_000));
    for not in [&b""[..], b"00", b"07", b"007", b"1234567890", b"12a", b"-1", b"+1", b" 1", b"1.0", b"1/", b"1:"] {
        assert_eq!(number(not), None, "{:?}", String::from_utf8_lossy(not));
    }
    let keys: [&[u8]; 8] = [b"0", b"7", b"07", b"007", b"123456789", b"1234567890", b"999999999", b"x7"];
    let mut arena = KeyArena::with_piece(16);
    keys.iter().for_each(|k| arena.push(k));
    assert_eq!(arena.counts(), KeyCounts { keys: 8, numbers: 4, short: 4, big: 0, numbers_range: Some((0, 999_999_999)) });
    for counts in [arena.counts(), KeyCounts { keys: 1, ..KeyCounts::default() }] {
        let set = KeySet::build(&pieces_of(&arena), counts);
        assert!(keys.iter().all(|k| set.contains(k)));
        assert_eq!(set.parts[0].numbers.keys, 4);
        for absent in [&b"00"[..], b"0007", b"8", b"70", b"12345678", b"23456789", b"1000000000", b"x07"] {
            assert!(!set.contains(absent), "{:?}", String::from_utf8_lossy(absent));
        }
    }
}

/// Numbers of 10–16 digits without a leading zero are words of their own (top byte 0): no
/// short key's word and no other number's. In a set with 8-byte keys, shorter keys and other
/// numbers, each is found and nothing else is.
#[test]
fn long_numbers_are_words_apart_from_other_keys() {
    assert_eq!(long_number(b"1000000000"), Some(1_000_000_000));
    assert_eq!(long_number(b"9999999999999999"), Some(9_999_999_999_999_999));
    for not in [&b"999999999"[..], b"10000000000000000", b"0123456789", b"123456789a", b"12345 67890", b"-123456789"] {
        assert_eq!(long_number(not), None, "{:?}", String::from_utf8_lossy(not));
    }
    let keys: Vec<Vec<u8>> = ["1000000000", "1700000000123", "9999999999999999", "12345678", "1234567", "abcdefgh", "10000000000000000", "0123456789", "123456789"]
        .iter()
        .map(|k| k.as_bytes().to_vec())
        .collect();
    // An 8-byte key whose little-endian word is a long number's value (its top byte 0) is
    // not short, and must not be taken for the number.
    let as_bytes = 1_000_000_000u64.to_le_bytes();
    let mut arena = KeyArena::with_piece(16);
    keys.iter().for_each(|k| arena.push(k));
    assert_eq!(arena.counts(), KeyCounts { keys: 9, numbers: 3, short: 4, big: 1, numbers_range: Some((1_234_567, 123_456_789)) });
    for counts in [arena.counts(), KeyCounts { keys: 1, ..KeyCounts::default() }] {
        let set = KeySet::build(&pieces_of(&arena), counts);
        assert!(keys.iter().all(|k| set.contains(k)));
        assert_eq!(set.parts[0].words.keys, 4, "three long numbers and abcdefgh");
        assert_eq!(set.parts[0].big.keys, 1, "the 17-digit number");
        for absent in [&as_bytes[..], b"1000000001", b"01000000000", b"100000000", b"99999999999999999", b"170000000012"] {
            assert!(!set.contains(absent), "{:?}", String::from_utf8_lossy(absent));
        }
    }
}

/// Numbers of 17–20 digits without a leading zero and below 2^64 are words of a table of
/// their own; one past 2^64, or with a leading zero, is another key. In a set of snowflake
/// ids beside other keys, each is found and its near misses are not.
#[test]
fn big_numbers_are_words_of_their_own() {
    assert_eq!(big_number(b"18446744073709551615"), Some(u64::MAX));
    assert_eq!(big_number(b"10000000000000000"), Some(10_000_000_000_000_000));
    for not in [&b"18446744073709551616"[..], b"99999999999999999999", b"01234567890123456", b"1234567890123456", b"123456789012345678a", b"123456789012345678901"] {
        assert_eq!(big_number(not), None, "{:?}", String::from_utf8_lossy(not));
    }
    let keys: Vec<Vec<u8>> = ["1789012345678901234", "1789012345678901235", "18446744073709551615", "18446744073709551616", "7", "k1789012345678901234"]
        .iter()
        .map(|k| k.as_bytes().to_vec())
        .collect();
    let mut arena = KeyArena::default();
    keys.iter().for_each(|k| arena.push(k));
    assert_eq!(arena.counts(), KeyCounts { keys: 6, numbers: 1, short: 0, big: 3, numbers_range: Some((7, 7)) });
    for counts in [arena.counts(), KeyCounts { keys: 1, ..KeyCounts::default() }] {
        let set = KeySet::build(&pieces_of(&arena), counts);
        assert!(keys.iter().all(|k| set.contains(k)));
        assert_eq!(set.parts[0].big.keys, 3);
        for absent in [&b"1789012345678901236"[..], b"01789012345678901234", b"178901234567890123", b"17890123456789012340", b"18446744073709551614"] {
            assert!(!set.contains(absent), "{:?}", String::from_utf8_lossy(absent));
        }
    }
}

/// Every key count around the insert groups' boundaries (the last group partial, full, or
/// alone), in one partition and in two.
#[test]
fn every_key_is_inserted_whatever_the_count() {
    for n in [0u32, 1, 63, 64, 65, 127, 128, 129, 200] {
        let mut arena = KeyArena::with_piece(100);
        (0..n).for_each(|i| arena.push(format!("k{i}").as_bytes()));
        let pieces = pieces_of(&arena);
        for count in [1, 2] {
            let set = KeySet::from_partitions((0..count).map(|i| PartitionBuilder::new(arena.counts(), i, count).build(&pieces)).collect());
            assert_eq!(set.len(), n as usize, "{n} keys, {count} partition(s)");
            assert!((0..n).all(|i| set.contains(format!("k{i}").as_bytes())), "{n} keys, {count} partition(s)");
            assert!(!set.contains(format!("k{n}").as_bytes()));
        }
    }
}

#[test]
fn partitions_built_apart_make_the_same_set() {
    let mut arena = KeyArena::with_piece(4096);
    for i in 0..20_000u32 {
        arena.push(format!("key-{i}").as_bytes());
    }
    arena.push(b"a key longer than eight bytes");
    let pieces = pieces_of(&arena);
    for count in [2, 3, 5] {
        let parts = (0..count).map(|i| PartitionBuilder::new(arena.counts(), i, count).build(&pieces)).collect();
        let set = KeySet::from_partitions(parts);
        assert_eq!(set.len(), 20_001, "{count} partitions");
        // Each partition holds a fair share (the split is by hash).
        assert!(set.parts.iter().all(|p| p.keys() > 20_001 / count / 2), "{count} partitions");
        assert!((0..20_000).all(|i| set.contains(format!("key-{i}").as_bytes())));
        assert!(set.contains(b"a key longer than eight bytes"));
        let probes: Vec<Vec<u8>> = (15_000..25_000u32).map(|i| format!("key-{i}").into_bytes()).collect();
        let refs: Vec<&[u8]> = probes.iter().map(|k| k.as_slice()).collect();
        let mut answers = Vec::new();
        set.contains_batch(&refs, &mut answers);
        assert!(answers.iter().enumerate().all(|(i, &a)| a == (i < 5_000)), "{count} partitions");
    }
}

/// Numbers from a range not much wider than their count are held as bits, cut by value
/// among the partitions; the set answers exactly as the table does (the same keys with
/// counts that carry no range), for every number around the span and for the other keys,
/// one at a time and batched. Numbers 0 and 999999999 (the ends of what a number word
/// holds) and repeats are among them.
#[test]
fn dense_numbers_are_held_as_bits_and_answer_as_the_table() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for (low, high) in [(1_000u32, 9_000u32), (0, 500), (999_990_000, 999_999_999)] {
        let mut arena = KeyArena::with_piece(512);
        let mut numbers = std::collections::HashSet::new();
        for _ in 0..2_000 {
            let n = rng.gen_range(low..=high);
            numbers.insert(n);
            arena.push(n.to_string().as_bytes());
        }
        for key in [&b"k1"[..], b"0123", b"a key longer than eight bytes", b"12345678901", b"12345678901234567890"] {
            arena.push(key);
        }
        let pieces = pieces_of(&arena);
        let probes: Vec<Vec<u8>> = (low.saturating_sub(100)..=high.saturating_add(100).min(999_999_999))
            .map(|n| n.to_string().into_bytes())
            .chain([&b"k1"[..], b"k2", b"0123", b"123", b"a key longer than eight bytes", b"12345678901", b"12345678901234567890"].map(|k| k.to_vec()))
            .collect();
        let refs: Vec<&[u8]> = probes.iter().map(|k| k.as_slice()).collect();
        let table = KeySet::build(&pieces, KeyCounts { numbers_range: None, ..arena.counts() });
        assert!(!table.numbers_as_bits());
        let (mut want, mut got) = (Vec::new(), Vec::new());
        table.contains_batch(&refs, &mut want);
        let others: [&[u8]; 5] = [b"k1", b"0123", b"a key longer than eight bytes", b"12345678901", b"12345678901234567890"];
        let held = |k: &[u8]| others.contains(&k) || std::str::from_utf8(k).ok().and_then(|t| t.parse().ok()).is_some_and(|n: u32| numbers.contains(&n) && n.to_string().as_bytes() == k);
        assert!(refs.iter().zip(&want).all(|(k, &yes)| yes == held(k)), "the table holds exactly the keys");
        for count in [1, 2, 3, 5] {
            let set = KeySet::from_partitions((0..count).map(|i| PartitionBuilder::new(arena.counts(), i, count).build(&pieces)).collect());
            assert!(set.numbers_as_bits(), "{low}..={high}");
            // Numbers held as bits count once.
            assert_eq!(set.len(), numbers.len() + 5);
            set.contains_batch(&refs, &mut got);
            assert!(got == want, "{low}..={high}, {count} partition(s): batched");
            assert!(refs.iter().zip(&want).all(|(k, &yes)| set.contains(k) == yes), "{low}..={high}, {count} partition(s)");
            if count > 1 {
                // Cut by value, each partition holds its share of the numbers.
                assert!(set.parts.iter().all(|p| p.bits.keys > numbers.len() / count / 2), "{count} partitions");
            }
        }
    }
}

/// Numbers outside the range the counts give (counts that are wrong) go to the table, and
/// the set still holds every key; numbers spread too widely stay in the table.
#[test]
fn numbers_outside_the_counted_range_or_too_sparse_go_to_the_table() {
    let mut arena = KeyArena::with_piece(64);
    let numbers: Vec<u32> = (0..300).map(|i| i * 7 + 100).collect();
    numbers.iter().for_each(|n| arena.push(n.to_string().as_bytes()));
    let pieces = pieces_of(&arena);
    let narrow = KeyCounts { numbers_range: Some((500, 1_000)), ..arena.counts() };
    for count in [1, 2, 3] {
        let set = KeySet::from_partitions((0..count).map(|i| PartitionBuilder::new(narrow, i, count).build(&pieces)).collect());
        assert!(set.numbers_as_bits());
        assert!((0..2_400).all(|n| set.contains(n.to_string().as_bytes()) == numbers.contains(&n)), "{count} partition(s)");
        assert_eq!(set.len(), 300);
    }
    let mut sparse = KeyArena::default();
    (0..10u32).for_each(|i| sparse.push((i * 1_000).to_string().as_bytes()));
    let set = KeySet::build(&pieces_of(&sparse), sparse.counts());
    assert!(!set.numbers_as_bits(), "10 numbers over a span of 9001: more than 48 bits a key");
    assert!((0..10u32).all(|i| set.contains((i * 1_000).to_string().as_bytes())) && !set.contains(b"500"));
}

/// Workers' keys collected with numbers as bits (see `KeyArena::holding_numbers_as_bits`)
/// make the set that their text makes, in 1, 2, 3 and 5 partitions, with the bits in
/// pieces of every size (one word, three, whole): numbers, their neighbours, 0, repeats,
/// and keys of every other kind. One worker's numbers are too sparse for bits and stay text;
/// with counts that carry no range, or too narrow a one, the bits' numbers go to the table.
/// Pieces of bits come as words or as gaps (as another process receives them), or both.
#[test]
fn numbers_collected_as_bits_make_the_set_their_text_makes() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut workers: Vec<KeyArena> = (0..3).map(|w| KeyArena::with_piece(256).holding_numbers_as_bits(w == 1)).collect();
    let mut text = KeyArena::with_piece(256);
    let mut numbers = Vec::new();
    let mut push = |w: usize, key: &[u8], workers: &mut Vec<KeyArena>| {
        workers[w].push(key);
        text.push(key);
    };
    for i in 0..6_000u32 {
        let n = if i < 3 { [0, 4_000, 1_000][i as usize] } else { rng.gen_range(1_000..=4_000u32) };
        numbers.push(n);
        push((i % 2) as usize, n.to_string().as_bytes(), &mut workers);
    }
    // The third worker: two numbers 198,999 apart (25 KB of bits for 14 bytes of text: within
    // the slack), and keys of every other kind.
    let others: [&[u8]; 6] = [b"k1", b"0123", b"a key longer than eight bytes", b"12345678901", b"12345678901234567890", b"-5"];
    for key in [&b"1001"[..], b"200000"].into_iter().chain(others) {
        push(2, key, &mut workers);
    }
    push(0, b"k1", &mut workers);
    let counts = workers.iter().map(KeyArena::counts).fold(KeyCounts::default(), KeyCounts::merge);
    assert_eq!(counts, text.counts());
    let bits: Vec<Option<DenseWords>> = workers.iter_mut().map(KeyArena::take_bits).collect();
    assert!(bits[0].is_some() && bits[1].is_some(), "the first two hold their numbers as bits");
    assert_eq!(workers[0].keys(), 3_001, "counted, all of them");
    assert_eq!(pieces_of(&workers[0]).concat(), [&b"\x02k1"[..]].concat(), "the first worker's text: k1 alone");
    assert!(pieces_of(&workers[1]).concat().is_empty());
    assert_eq!(bits[2].as_ref().map(|b| (b.at, b.bytes.len())), Some((1001 / 64, 8 * (200_000 / 64 - 1001 / 64 + 1))), "the third's bits");
    assert_eq!(pieces_of(&workers[2]).iter().map(|p| p.len()).sum::<usize>(), 74, "the third's text: the others");
    let rest: Vec<Vec<u8>> = workers.iter().flat_map(pieces_of).collect();
    let probes: Vec<Vec<u8>> = (0..=5_100u32).chain([199_999, 200_000, 200_001]).map(|n| n.to_string().into_bytes()).chain(others.iter().chain(&[&b"k2"[..], b"01"]).map(|k| k.to_vec())).collect();
    let refs: Vec<&[u8]> = probes.iter().map(|k| k.as_slice()).collect();
    let table = KeySet::build(&pieces_of(&text), KeyCounts { numbers_range: None, ..counts });
    let (mut want, mut got) = (Vec::new(), Vec::new());
    table.contains_batch(&refs, &mut want);
    let distinct: std::collections::HashSet<u32> = numbers.iter().copied().chain([1001, 200_000]).collect();
    assert_eq!(want.iter().filter(|&&yes| yes).count(), distinct.len() + others.len());
    let narrow = KeyCounts { numbers_range: Some((1_500, 3_000)), ..counts };
    let no_range = KeyCounts { numbers_range: None, ..counts };
    // Each key is held once: a number two workers hold, as bits or in the table, and "k1",
    // pushed twice as text.
    let len = distinct.len() + others.len();
    for (counts, as_bits) in [(counts, true), (narrow, true), (no_range, false)] {
        for piece_words in [1, 3, usize::MAX] {
            let bits: Vec<BitsPiece> = bits
                .iter()
                .flatten()
                .flat_map(|bits| {
                    let step = piece_words.saturating_mul(8).min(bits.bytes.len());
                    bits.bytes.chunks(step).enumerate().map(move |(i, bytes)| BitsPiece { at: bits.at + (i * step / 8) as u32, bytes })
                })
                .collect();
            // As other processes receive them, pieces come as gaps: none, every other one, all.
            let encoded: Vec<Vec<u8>> = bits.iter().map(|piece| encode_gaps(piece.bytes)).collect();
            for gaps_one_in in [0, 2, 1] {
                let as_gaps = |i: usize| gaps_one_in > 0 && i.is_multiple_of(gaps_one_in);
                let words: Vec<BitsPiece> = bits.iter().enumerate().filter(|&(i, _)| !as_gaps(i)).map(|(_, &piece)| piece).collect();
                let gaps: Vec<GapsPiece> = (0..bits.len())
                    .filter(|&i| as_gaps(i))
                    .map(|i| GapsPiece::checked(bits[i].at, &encoded[i], bits[i].bytes.len()).expect("gaps of these bits fit them"))
                    .collect();
                for count in [1, 2, 3, 5] {
                    let set = KeySet::from_partitions((0..count).map(|i| PartitionBuilder::new(counts, i, count).build_with_bits(&rest, &words, &gaps)).collect());
                    let case = format!("{:?}, pieces of {piece_words} words, one in {gaps_one_in} as gaps, {count} partition(s)", counts.numbers_range);
                    assert_eq!(set.numbers_as_bits(), as_bits, "{case}");
                    set.contains_batch(&refs, &mut got);
                    assert!(got == want, "{case}");
                    assert!(refs.iter().zip(&want).all(|(k, &yes)| set.contains(k) == yes), "{case}");
                    assert_eq!(set.len(), len, "{case}");
                }
            }
        }
    }
}

/// Keys of every kind (numbers, long keys, short ones, big numbers), a long key given twice,
/// long keys of 128 bytes and more (whose length takes two bytes), the empty key, and then
/// `long` more long keys.
fn keys_of_every_kind(long: u64) -> Vec<Vec<u8>> {
    (0..5_000u64)
        .map(|i| match i % 4 {
            0 => i.to_string(),
            1 => format!("a long key, number {i}"),
            2 => format!("c{i}"),
            _ => (10_000_000_000 + i).to_string(),
        })
        .chain(["a long key, number 1".to_string(), "x".repeat(127), "y".repeat(128), "z".repeat(300), String::new()])
        .chain((0..long).map(|i| format!("another long key {i}")))
        .map(String::into_bytes)
        .collect()
}

/// What a set of `keys` must answer to `probes` (each key among them once, and keys that are not
/// in the set): the answers of a set built from `pieces` of them, in one partition, which copies
/// its long keys.
fn answers_of_copies(pieces: &[impl AsRef<[u8]>], counts: KeyCounts, keys: &[Vec<u8>], probes: &[&[u8]]) -> Vec<bool> {
    let mut want = Vec::new();
    KeySet::build(pieces, counts).contains_batch(probes, &mut want);
    assert_eq!(want.iter().filter(|&&yes| yes).count(), keys.len(), "every key, none of the others");
    want
}

/// A set made from an arena whose keys are mostly long holds the long keys of its text where
/// they lie, copying none, and answers as a set built from the same keys as text does: keys of
/// every kind, numbers as bits, a long key given twice. So does a partition that adopts the
/// text but was sized for far fewer keys, whose table of long keys grows many times over,
/// rehashing keys held in place; and keys that are not in the adopted text are copied.
#[test]
fn a_set_from_an_arena_holds_its_long_keys_in_place() {
    let keys = keys_of_every_kind(5_000);
    let mut arena = KeyArena::default().holding_numbers_as_bits(false);
    let mut text = KeyArena::default();
    for key in &keys {
        arena.push(key);
        text.push(key);
    }
    let probes: Vec<Vec<u8>> = keys.iter().cloned().chain((5_000..5_100u64).map(|i| format!("a long key, number {i}").into_bytes())).chain([b"a long key".to_vec()]).collect();
    let refs: Vec<&[u8]> = probes.iter().map(|k| k.as_slice()).collect();
    let (want, mut got) = (answers_of_copies(&pieces_of(&text), text.counts(), &keys, &refs), Vec::new());

    let set = KeySet::from_arena(arena);
    assert_eq!(set.parts[0].copied_bytes(), 0, "no long key copied");
    set.contains_batch(&refs, &mut got);
    assert!(got == want);

    let bytes = std::sync::Arc::new(text.as_bytes().to_vec());
    let pieces: Vec<&[u8]> = text.pieces().into_iter().map(|range| &bytes[range]).collect();
    let mut builder = PartitionBuilder::new(KeyCounts { keys: 10, ..KeyCounts::default() }, 0, 1);
    builder.hold_in_place(vec![std::sync::Arc::clone(&bytes)]);
    let set = KeySet::from_partitions(vec![builder.build(&pieces)]);
    assert_eq!(set.parts[0].copied_bytes(), 0, "no long key copied, the table grown");
    set.contains_batch(&refs, &mut got);
    assert!(got == want, "grown");

    let mut builder = PartitionBuilder::new(text.counts(), 0, 1);
    builder.hold_in_place(vec![std::sync::Arc::new(vec![0; 64])]);
    let set = KeySet::from_partitions(vec![builder.build(&pieces_of(&text))]);
    assert!(set.parts[0].copied_bytes() > 0, "keys from elsewhere are copied");
    set.contains_batch(&refs, &mut got);
    assert!(got == want, "copied past 64 adopted bytes");
}

/// Partitions built from keys in many buffers (as a broadcast's pieces are received, each in
/// its own) hold the long keys of every buffer where they lie, whatever the order the buffers
/// are given in, and answer as a set built from copies does, one key at a time and in batches.
#[test]
fn partitions_hold_long_keys_in_place_across_buffers() {
    use std::sync::Arc;
    let keys = keys_of_every_kind(5_000);
    let mut text = KeyArena::with_piece(1000);
    keys.iter().for_each(|key| text.push(key));
    let buffers: Vec<Arc<Vec<u8>>> = pieces_of(&text).into_iter().map(Arc::new).collect();
    assert!(buffers.len() > 50);
    let pieces: Vec<&[u8]> = buffers.iter().map(|b| b.as_slice()).collect();
    let probes: Vec<Vec<u8>> = keys.iter().cloned().chain((5_000..5_100u64).map(|i| format!("another long key {i}").into_bytes())).collect();
    let refs: Vec<&[u8]> = probes.iter().map(|k| k.as_slice()).collect();
    let (want, mut got) = (answers_of_copies(&pieces, text.counts(), &keys, &refs), Vec::new());
    for count in [1, 2, 3] {
        let parts = (0..count).map(|i| {
            let mut builder = PartitionBuilder::new(text.counts(), i, count);
            builder.hold_in_place(buffers.iter().rev().cloned().collect());
            builder.build(&pieces)
        });
        let set = KeySet::from_partitions(parts.collect());
        assert!(set.parts.iter().all(|part| part.copied_bytes() == 0), "{count} partitions: no long key copied");
        assert!(set.parts.iter().all(|part| part.adopted_bytes() == text.as_bytes().len()));
        set.contains_batch(&refs, &mut got);
        assert!(got == want, "{count} partitions");
        assert!(refs.iter().zip(&want).all(|(key, &yes)| set.contains(key) == yes), "{count} partitions, one key at a time");
    }
}

/// A set made from an arena that estimates its distinct keys is sized for them, not for every
/// copy: 2,000 long keys and 2,000 short ones, each given 50 times. It holds every key, as the
/// set sized for every copy does.
#[test]
fn a_set_from_an_arena_of_repeated_keys_is_sized_for_the_distinct_ones() {
    let keys: Vec<Vec<u8>> = (0..2_000).flat_map(|i| [format!("a long key, number {i}"), format!("s{i}")]).map(String::into_bytes).collect();
    let arena_of = |arena: KeyArena| (0..50).fold(arena, |mut arena, _| {
        keys.iter().for_each(|key| arena.push(key));
        arena
    });
    let sized = KeySet::from_arena(arena_of(KeyArena::default().estimating_distinct()));
    let every_copy = KeySet::from_arena(arena_of(KeyArena::default()));
    assert!(sized.parts[0].long_slots() < 2_000 * 3, "{} slots for 2,000 long keys", sized.parts[0].long_slots());
    assert!(every_copy.parts[0].long_slots() > 2_000 * 50);
    let absent = [&b"a long key, number 2000"[..], b"s2000", b"s"];
    for set in [&sized, &every_copy] {
        assert_eq!(set.len(), keys.len());
        assert!(keys.iter().all(|key| set.contains(key)) && !absent.iter().any(|key| set.contains(key)));
    }
}

/// Counts scaled to a distinct count keep the kinds' proportions with a tenth more room, and
/// the numbers as they are; a distinct count past the keys leaves them as they are.
#[test]
fn counts_scale_to_the_distinct_keys() {
    let counts = KeyCounts { keys: 1_000, numbers: 100, short: 300, big: 100, numbers_range: Some((1, 100)) };
    let scaled = counts.for_distinct(180);
    assert_eq!(scaled, KeyCounts { keys: 100 + 198, numbers: 100, short: 66, big: 22, numbers_range: Some((1, 100)) });
    assert_eq!(scaled.long(), 110);
    assert_eq!(counts.for_distinct(900), counts);
}

/// A long key in the adopted text whose length is not written before it as a set writes lengths
/// (here in two bytes, where one would do) is copied, not held where it lies: held there, its
/// length would be read from the byte before it.
#[test]
fn a_key_whose_length_is_written_otherwise_is_copied() {
    let key = b"a long key of 23 bytes.";
    let text = std::sync::Arc::new([&[0x80 | key.len() as u8, 0][..], key].concat());
    let mut builder = PartitionBuilder::new(KeyCounts { keys: 1, ..KeyCounts::default() }, 0, 1);
    builder.table.adopt(vec![std::sync::Arc::clone(&text)]);
    let set = KeySet::from_partitions(vec![builder.build(&[text.as_slice()])]);
    assert_eq!(set.parts[0].copied_bytes(), 1 + key.len());
    assert!(set.contains(key) && !set.contains(b""));
}

/// Two long keys whose hashes give the same first slot and the same tag are told apart by
/// their bytes: in a set of one of them, and in a set of both (neither taken for the other
/// given twice). The pair is searched for among keys of a table sized for one key.
#[test]
fn long_keys_of_one_slot_and_tag_are_told_apart() {
    let counts = KeyCounts { keys: 1, ..KeyCounts::default() };
    let set_of = |keys: &[&[u8]]| {
        let mut arena = KeyArena::default();
        keys.iter().for_each(|key| arena.push(key));
        KeySet::build(&pieces_of(&arena), counts)
    };
    let slots = set_of(&[b"a long key"]).parts[0].long_slots();
    let h = hasher();
    let mut seen = std::collections::HashMap::new();
    let (a, b) = (0u64..)
        .find_map(|i| {
            let key = format!("a long key, number {i}").into_bytes();
            let hash = Hashed::new(&h, &key, Dense::default()).hash;
            seen.insert(slot_and_tag(hash, slots), key.clone()).map(|other| (other, key))
        })
        .expect("a pair with a slot and a tag in common");
    let set = set_of(&[&a]);
    assert_eq!(set.parts[0].long_slots(), slots);
    assert!(set.contains(&a) && !set.contains(&b));
    let set = set_of(&[&a, &b]);
    assert!(set.contains(&a) && set.contains(&b) && set.len() == 2);
}

/// A set made from an arena whose keys are mostly short lets the arena's text go: it copies its
/// few long keys, and answers as a set built from the same keys as text does.
#[test]
fn a_set_from_an_arena_of_short_keys_keeps_none_of_its_text() {
    let keys = keys_of_every_kind(0);
    let mut text = KeyArena::default();
    keys.iter().for_each(|key| text.push(key));
    assert!(text.counts().long() * 2 < text.counts().keys);
    let mut probes = keys.clone();
    probes.extend([b"a long key".to_vec(), "y".repeat(129).into_bytes()]);
    let refs: Vec<&[u8]> = probes.iter().map(|k| k.as_slice()).collect();
    let (want, mut got) = (answers_of_copies(&pieces_of(&text), text.counts(), &keys, &refs), Vec::new());

    let set = KeySet::from_arena(text);
    assert_eq!(set.parts[0].adopted_bytes(), 0, "the text let go");
    assert!(set.parts[0].copied_bytes() > 5_000 / 4 * 20, "the long keys copied");
    set.contains_batch(&refs, &mut got);
    assert!(got == want);
}

/// Keys pushed a batch at a time (with the bits of a group's numbers prefetched) make the
/// arena that keys pushed one by one make: the same text, bits and counts, for numbers dense
/// and sparse (whose bits grow, and refuse some), among other keys, in batches of every size.
#[test]
fn keys_pushed_in_batches_make_the_arena_pushed_one_by_one() {
    let mut rng = crate::xorshift::XorShift::new(0xba7c);
    let keys: Vec<Vec<u8>> = (0..20_000)
        .map(|i| match rng.next() % 4 {
            0 => (rng.next() % 100_000).to_string(),
            1 if i % 500 == 0 => (rng.next() % 1_000_000_000).to_string(),
            1 => (50_000 + rng.next() % 1_000).to_string(),
            2 => format!("k{}", rng.next() % 3_000),
            _ => (rng.next() % 100).to_string() + "x",
        })
        .map(String::into_bytes)
        .collect();
    for batch in [1, 7, 16, 1024] {
        let (mut one, mut batched) = (KeyArena::default().holding_numbers_as_bits(false), KeyArena::default().holding_numbers_as_bits(false));
        keys.iter().for_each(|key| one.push(key));
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        refs.chunks(batch).for_each(|keys| batched.push_all(keys));
        assert_eq!(batched.counts(), one.counts(), "batches of {batch}");
        assert_eq!(batched.as_bytes(), one.as_bytes(), "batches of {batch}");
        assert_eq!(batched.take_bits(), one.take_bits(), "batches of {batch}");
    }
}

/// Bits that ask for huge pages hold what bits in 4 KiB pages hold, and their mapping (of
/// 5 MB of bits, room for two huge pages) is advised for huge pages where the kernel has them;
/// the others' is not.
#[test]
fn bits_in_huge_pages_hold_the_same_numbers() {
    let mut rng = crate::xorshift::XorShift::new(0xb175);
    let mut arenas = [KeyArena::default().holding_numbers_as_bits(true), KeyArena::default().holding_numbers_as_bits(false)];
    for _ in 0..600_000 {
        let key = (rng.next() % 40_000_000).to_string();
        arenas.iter_mut().for_each(|arena| arena.push(key.as_bytes()));
    }
    let [huge, small] = arenas.map(|mut arena| arena.take_bits().expect("held as bits"));
    assert!(huge.bytes.len() > 4 << 20, "{} bytes of bits", huge.bytes.len());
    assert_eq!(huge, small);
    #[cfg(target_os = "linux")]
    {
        let flags = |bits: &DenseWords| crate::limits::tests::mapping_flags(bits.bytes.as_ptr() as usize + 4096);
        let (Some(huge_flags), Some(small_flags)) = (flags(&huge), flags(&small)) else {
            eprintln!("skipped: no /proc/self/smaps");
            return;
        };
        if std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            assert!(huge_flags.split_whitespace().any(|f| f == "hg"), "{huge_flags}");
        }
        assert!(!small_flags.split_whitespace().any(|f| f == "hg"), "{small_flags}");
    }
}

/// Bits go to gaps and back unchanged, from empty to full, and sparse ones take fewer
/// bytes so; gaps that run past their bytes, or a varint cut short or past 64 bits, are none.
#[test]
fn bits_go_to_gaps_and_back() {
    let mut rng = crate::xorshift::XorShift::new(0x5eed);
    for (len, one_in) in [(0usize, 1u64), (8, 1), (64, 2), (4096, 40), (4096, 1_000), (800, 0)] {
        let bits: Vec<u8> = (0..len).map(|_| (0..8).fold(0u8, |b, i| b | (((one_in > 0 && rng.next().is_multiple_of(one_in)) as u8) << i))).collect();
        let gaps = encode_gaps(&bits);
        assert_eq!(decode_gaps(&gaps, len), Some(bits.clone()), "{len} bytes, one bit in {one_in}");
        if one_in >= 40 {
            assert!(gaps.len() < len / 4, "{len} bytes, one bit in {one_in}: {} bytes of gaps", gaps.len());
        }
    }
    let last = {
        let mut bits = vec![0u8; 16];
        bits[15] = 0x80;
        bits
    };
    let gaps = encode_gaps(&last);
    assert_eq!(gaps, [127]);
    assert_eq!(decode_gaps(&gaps, 16), Some(last));
    assert_eq!(decode_gaps(&gaps, 15), None, "bit 127 is past 15 bytes");
    assert_eq!(decode_gaps(&[0x80], 16), None, "a varint cut short");
    assert_eq!(decode_gaps(&[0xff; 10], 1 << 20), None, "a varint past 64 bits");
    assert_eq!(decode_gaps(&[0, 0], 1), Some(vec![0b11]));
}

/// Numbers held as bits grow their bits up and down, by doubling, within the bound of their
/// text's bytes plus the slack; past it the bits stop growing and the rest is text. Every
/// key comes back from `for_each_key` (numbers held as bits in order, once), and the bytes
/// held count the bits.
#[test]
fn numbers_are_held_as_bits_within_their_bound() {
    let mut arena = KeyArena::default().holding_numbers_as_bits(false);
    for n in (64_000..65_000u32).chain((10_000..11_000).rev()).chain([64_000, 10_500]) {
        arena.push(n.to_string().as_bytes());
    }
    arena.push(b"k");
    let bits = arena.bits.as_ref().expect("held as bits");
    assert!(bits.at <= 10_000 / 64 && bits.at + (bits.bytes.len() / 8) as u32 > 65_000 / 64);
    // Doubling: 1 word, then 2, 4, ... up to the span of about 860 words.
    assert!(bits.bytes.len() <= 2 * 8 * (65_000 / 64 - 10_000 / 64 + 1), "{} bytes", bits.bytes.len());
    assert_eq!(arena.len_bytes(), 2 + bits.bytes.len());
    let mut keys = Vec::new();
    arena.for_each_key(|k| keys.push(String::from_utf8(k.to_vec()).unwrap()));
    let want: Vec<String> = std::iter::once("k".to_string()).chain((10_000..11_000).chain(64_000..65_000).map(|n| n.to_string())).collect();
    assert_eq!(keys, want);
    assert_eq!(arena.keys(), 2_003);

    // Sparse numbers: the second passes the bound (a word for the first, then 2^24 words),
    // and stays text; the bits still grow to the next ones, which are near.
    let mut sparse = KeyArena::default().holding_numbers_as_bits(false);
    for key in ["5", "999999999", "6", "70", "64"] {
        sparse.push(key.as_bytes());
    }
    let bits = sparse.take_bits().expect("the near numbers' words");
    assert_eq!((bits.at, bits.bytes.len()), (0, 16));
    let words: Vec<u64> = bits.bytes.chunks(8).map(|w| u64::from_le_bytes(w.try_into().unwrap())).collect();
    assert_eq!(words, [1 << 5 | 1 << 6, 1 << 0 | 1 << 6], "5, 6, 64 and 70");
    assert_eq!(pieces_of(&sparse).concat(), b"\x09999999999", "the far one as text");
    assert!(sparse.take_bits().is_none(), "taken");

    // A jump the bound refuses (numbers 0..64K, then 4M on) goes to text only until the
    // text has caught up with the span: then the bits grow to it, and take the rest.
    let mut jump = KeyArena::default().holding_numbers_as_bits(false);
    let (near, far) = (0..64_000u32, 4_000_000..4_040_000u32);
    near.clone().chain(far.clone()).for_each(|n| jump.push(n.to_string().as_bytes()));
    let mut keys = Vec::new();
    jump.for_each_key(|k| keys.push(String::from_utf8(k.to_vec()).unwrap()));
    keys.sort_by_key(|k| k.parse::<u32>().unwrap());
    assert_eq!(keys, near.chain(far).map(|n| n.to_string()).collect::<Vec<_>>(), "every number, once");
    let text = pieces_of(&jump).concat().len();
    let bits = jump.take_bits().expect("held as bits");
    assert!(bits.at == 0 && bits.bytes.len() >= 4_040_000 / 8, "the bits grew to the far numbers: {} bytes", bits.bytes.len());
    // The span's bits (505 KB) pass the bound (the numbers' text, 378 KB for the near ones
    // and 8 bytes each far one, and 64 KB of slack) until some 7,900 far numbers are in:
    // those are text, the other 32,000 bits.
    assert!((8 * 7_500..8 * 8_500).contains(&text), "{text} bytes of text");

    // An arena not made to hold bits keeps every key as text.
    let mut plain = KeyArena::default();
    plain.push(b"7");
    assert!(plain.take_bits().is_none() && plain.as_bytes() == b"\x017");
}

/// Numbers in random order from a range grow their bits by an eighth at least each time, once
/// the bound lets them grow at all: grown by what the bound allowed (it grows by each number's
/// text), 2M ids from a range of 20M took a copy of the bits (up to 2.5 MB) for most numbers
/// past the first 270,000, and the probe-side join keyed on them 0.80 s where it takes 0.49.
#[test]
fn random_numbers_grow_their_bits_by_an_eighth_at_least() {
    let mut arena = KeyArena::default().holding_numbers_as_bits(false);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let (mut grows, mut len) = (0, 0usize);
    for _ in 0..100_000 {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        arena.push(((x >> 33) % 1_000_000).to_string().as_bytes());
        let now = arena.bits.as_ref().map_or(0, |bits| bits.bytes.len());
        if now != len {
            let (was, words) = (len / 8, now / 8);
            assert!(was == 0 || words >= was + was / 8, "grew from {was} to {words} words");
            (grows, len) = (grows + 1, now);
        }
    }
    assert!(len * 8 >= 1_000_000 - 64, "the bits came to cover the range: {len} bytes");
    assert!(grows < 60, "{grows} grows");
}

/// Bits grown to a span far wider than their numbers have in memory only the pages their
/// numbers are on: the room past them (where a doubling leaves it, or between two numbers far
/// apart) is never written, so it takes no memory (`mincore` tells which pages are in memory).
///
/// Checked in a process of its own, whose allocator has no freed memory to serve the bits from:
/// beside the other tests it may hand out a block they wrote and freed, all of it in memory
/// already (as in a CI run).
#[cfg(target_os = "linux")]
/// Runs the test `name` (this module's) again in a process of its own, whose allocator no
/// other test has used, and asserts that it passed there; true in that process, where the test
/// goes on.
fn in_a_fresh_process(name: &str) -> bool {
    const FRESH: &str = "BLOOMFLOW_TEST_FRESH_PROCESS";
    if std::env::var_os(FRESH).is_some() {
        return true;
    }
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &format!("keyset::tests::{name}"), "--test-threads", "1"])
        .env(FRESH, "1")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&child.stdout);
    assert!(child.status.success() && out.contains("test result: ok. 1 passed"), "{out}{}", String::from_utf8_lossy(&child.stderr));
    false
}

#[test]
fn bits_take_memory_only_where_their_numbers_are() {
    if !in_a_fresh_process("bits_take_memory_only_where_their_numbers_are") {
        return;
    }
    // Numbers 0 and 2^28: a span of 2^22 words, 32 MiB.
    three_numbers_take_two_pages(28);
}

/// Numbers 0, 3 and 2^`high`: bits over 2^(`high` − 6) words, of which at most two pages are
/// in memory.
fn three_numbers_take_two_pages(high: u32) {
    let mut bits = NumberBits::default();
    for v in [0, 1 << high, 3] {
        assert!(bits.insert(v, u64::MAX));
    }
    assert_eq!((bits.at, bits.bytes.len()), (0, (1 << (high - 3)) + 8));
    let (in_memory, pages) = crate::limits::pages_in_memory(&bits.bytes);
    assert!(pages >= (1 << (high - 15)) - 1 && in_memory <= 2, "{in_memory} of {pages} pages in memory for 3 numbers");
    assert_eq!(bits.bytes[0], 0b1001);
}

/// The same where glibc has a freed block to reuse, as a worker's allocator has after a job's
/// first blocks: a freed mapped block raises glibc's mmap threshold to its size, and a block
/// below it then comes from the arena, where it stays when freed, its pages in memory. Bits
/// allocated at their size (2 MiB here) reused that block, and all of their pages were in
/// memory.
#[test]
fn bits_stay_out_of_memory_where_the_allocator_has_freed_blocks() {
    if !in_a_fresh_process("bits_stay_out_of_memory_where_the_allocator_has_freed_blocks") {
        return;
    }
    drop(std::hint::black_box(vec![1u8; 16 << 20]));
    drop(std::hint::black_box(vec![1u8; 8 << 20]));
    // Numbers 0 and 2^24: a span of 2^18 words, 2 MiB.
    three_numbers_take_two_pages(24);
}

/// The partitions' ranges of a dense span cover it once, each starts on a word of its
/// bitmap, and a word's partition is the one whose range holds it.
#[test]
fn dense_ranges_cut_the_span_without_gap_or_overlap() {
    for (first, span) in [(1u32, 1u32), (1, 7), (100, 1_000), (5, 64), (999_000_001, 999_999)] {
        for count in 1..=7 {
            let dense = Dense { first, span };
            let mut next = first;
            for part in 0..count {
                let (start, len) = dense.range(part, count);
                assert_eq!(start, next, "{first}+{span}, {count} parts");
                assert!((start - first) % 64 == 0 || len == 0, "{first}+{span}, {count} parts: part {part} starts on a word");
                next = start + len;
                for word in [start, start + len.saturating_sub(1)].into_iter().filter(|_| len > 0) {
                    assert_eq!(dense.part_of(word, count), Some(part), "{word} in {first}+{span}, {count} parts");
                }
            }
            assert_eq!(next, first + span);
            assert_eq!(dense.part_of(first - 1, count), None);
            assert_eq!(dense.part_of(first + span, count), None);
            assert_eq!(dense.part_of(0, count), None, "0 is no number word");
        }
    }
}

#[test]
fn counts_merge_their_sums_and_ranges() {
    let a = KeyCounts { keys: 3, numbers: 2, short: 1, big: 0, numbers_range: Some((5, 9)) };
    let b = KeyCounts { keys: 4, numbers: 1, short: 0, big: 2, numbers_range: Some((2, 6)) };
    let none = KeyCounts { keys: 1, short: 1, ..KeyCounts::default() };
    assert_eq!(a.merge(b), KeyCounts { keys: 7, numbers: 3, short: 1, big: 2, numbers_range: Some((2, 9)) });
    assert_eq!(a.merge(none).numbers_range, Some((5, 9)));
    assert_eq!(none.merge(b).numbers_range, Some((2, 6)));
    assert_eq!(none.merge(none).numbers_range, None);
}

/// Lengths of one, two and three varint bytes, on both sides of each boundary.
#[test]
fn pieces_end_on_key_boundaries() {
    let lengths: Vec<usize> = (0..100).chain([127, 128, 129, 300, 16_383, 16_384, 70_000]).collect();
    let mut arena = KeyArena::with_piece(64);
    for &n in &lengths {
        arena.push(&vec![b'x'; n]);
    }
    let pieces = pieces_of(&arena);
    assert_eq!(pieces.concat(), arena.as_bytes());
    assert!(pieces.len() > 50, "the keys of 0–99 bytes alone (5,050 bytes with lengths) fill more than 50 pieces of 64");
    // Every piece but the last holds at least 64 bytes, and would hold fewer without its
    // last key: each ends where the key that reached 64 bytes ends.
    for piece in &pieces[..pieces.len() - 1] {
        let mut ends = Vec::new();
        let mut at = 0;
        while at < piece.len() {
            at = key_at(piece, at).1;
            ends.push(at);
        }
        assert!(piece.len() >= 64 && ends.iter().rev().nth(1).is_none_or(|&before| before < 64));
    }
    let mut seen = Vec::new();
    for_each_key(&pieces, |key| seen.push(key.len()));
    assert_eq!(seen, lengths);
    let set = KeySet::build(&pieces, arena.counts());
    assert_eq!(set.len(), lengths.len());
    assert!(lengths.iter().all(|&n| set.contains(&vec![b'x'; n])));
    assert!(!set.contains(&[b'x'; 131]));
    // A key shorter than 128 bytes takes one length byte.
    let mut one = KeyArena::default();
    one.push(b"12345678");
    assert_eq!(one.len_bytes(), 9);
}

/// A set grown from an arena of dense numbers holds them as bits over the span they had, and
/// the numbers that arrive later, inside the span or outside it (to the numbers' table), and
/// other keys, each once.
#[test]
fn a_growing_set_holds_later_numbers_inside_and_outside_its_span() {
    let mut arena = KeyArena::default().holding_numbers_as_bits(false).estimating_distinct();
    // The even numbers of 1,000..3,000, some twice; then the odd ones, within their span.
    (1_000..3_000u32).step_by(2).chain((1_000..2_000).step_by(2)).for_each(|n| arena.push(n.to_string().as_bytes()));
    let mut growing = GrowingSet::from_arena(arena);
    let later: Vec<Vec<u8>> = (1_001..3_000u32).step_by(2).chain(2_500..4_000).chain([7, 900_000]).map(|n| n.to_string().into_bytes()).chain([b"s1".to_vec(), b"a long key, number 1".to_vec()]).collect();
    for keys in later.chunks(100) {
        let mut encoded = KeyArena::default();
        keys.iter().for_each(|key| encoded.push(key));
        growing.insert_encoded(encoded.as_bytes());
    }
    let set = growing.into_set();
    assert!(set.numbers_as_bits());
    assert_eq!(set.len(), 3_000 + 2 + 2);
    let held = |n: u32| (1_000..4_000).contains(&n) || n == 7 || n == 900_000;
    for n in (0..5_000).chain([900_000, 900_001]) {
        assert_eq!(set.contains(n.to_string().as_bytes()), held(n), "{n}");
    }
    assert!(set.contains(b"s1") && set.contains(b"a long key, number 1") && !set.contains(b"s2"));
}

/// An arena that holds each key once asks, as its text passes 1 MiB, whether its keys repeat:
/// keys given 40 times are then held once, counted as an arena given each once counts them, and
/// keys given after are held once too; distinct keys past 1 MiB are all kept.
#[test]
fn an_arena_lets_copies_go_once_its_keys_repeat() {
    let key = |i: u64| match i % 4 {
        0 => format!("a key long enough to be held as text, {i}").into_bytes(),
        1 => format!("s{i}").into_bytes(),
        2 => (i * 1_000_003).to_string().into_bytes(),
        _ => (i * 10_000_000_019).to_string().into_bytes(),
    };
    let keys: Vec<Vec<u8>> = (0..4_000).map(key).collect();
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let mut once = KeyArena::default();
    refs.iter().for_each(|k| once.push(k));
    let mut arena = KeyArena::default().holding_each_key_once();
    (0..40).for_each(|_| arena.push_all(&refs));
    assert_eq!(arena.counts(), once.counts());
    assert_eq!(arena.as_bytes(), once.as_bytes(), "each key once, in the order first given");
    let later: Vec<Vec<u8>> = (4_000..4_100).map(key).collect();
    later.iter().chain(&keys).for_each(|k| arena.push(k));
    later.iter().for_each(|k| once.push(k));
    assert_eq!(arena.counts(), once.counts());
    let distinct: Vec<Vec<u8>> = (0..60_000).map(key).collect();
    let mut all = KeyArena::default().holding_each_key_once();
    distinct.iter().for_each(|k| all.push(k));
    assert!(all.len_bytes() > FIRST_CHECK);
    assert_eq!(all.keys(), 60_000);
}
