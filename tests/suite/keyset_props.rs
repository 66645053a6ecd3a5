//! Property tests of the exact join's key set against a `HashSet`: whatever the keys (numbers of
//! every length with and without leading zeros, short keys ending in any byte, long keys, the
//! empty key), the partition count, and the counts the tables are sized for, the set holds
//! exactly the keys put in, each once however often given, one by one and in batches (asking
//! sketches of its long keys first, or not).

use bloomflow::keyset::{GrowingSet, KeyArena, KeyCounts, KeySet, PartitionBuilder};
use proptest::prelude::*;
use std::collections::HashSet;

/// Keys of the kinds the set keeps apart: decimal digits (1–20 of them, so numbers of every
/// table, and leading zeros one time in ten), bytes of any value (0–24 of them, or 120–140,
/// whose length takes one byte or two where it is held), and 8-byte keys whose last byte is at
/// most 8 (the edge of the short keys).
fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(b'0'..=b'9', 1..=20),
        prop::collection::vec(any::<u8>(), 0..=24),
        prop::collection::vec(any::<u8>(), 120..=140),
        (prop::collection::vec(any::<u8>(), 7), 0u8..=8).prop_map(|(mut key, last)| {
            key.push(last);
            key
        }),
    ]
}

/// Checks that `set` answers every query as `want` does, one key at a time and in a batch, and
/// places each key it holds, and no other, at a place of its own among its places.
fn answers_as(set: &KeySet, want: &HashSet<&[u8]>, queries: &[&[u8]]) -> Result<(), TestCaseError> {
    let mut answers = Vec::new();
    set.contains_batch(queries, &mut answers);
    let mut places = Vec::new();
    set.positions_batch(queries, &mut places);
    // Asking the sketches first (where the set keeps them) places every key alike, and no
    // key the set holds is ruled out: every batch length, those of fewer keys than the
    // lookup looks ahead too.
    for len in [0, 1, 5, 17, 40, queries.len()] {
        let batch = &queries[..len.min(queries.len())];
        let (mut plain, mut sketched) = (Vec::new(), Vec::new());
        set.positions_batch(batch, &mut plain);
        set.positions_batch_sketched(batch, &mut sketched);
        prop_assert_eq!(plain, sketched, "{} keys", batch.len());
    }
    let mut taken = std::collections::HashMap::new();
    for ((query, batched), place) in queries.iter().zip(answers).zip(places) {
        prop_assert_eq!(set.contains(query), want.contains(query), "{:?}", query);
        prop_assert_eq!(batched, want.contains(query), "{:?}", query);
        prop_assert_eq!(place.is_some(), want.contains(query), "{:?}", query);
        if let Some(place) = place {
            prop_assert!(place < set.places(), "{:?} at {} of {}", query, place, set.places());
            let first = *taken.entry(place).or_insert(*query);
            prop_assert_eq!(first, *query, "two keys at {}", place);
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn a_key_set_holds_exactly_its_keys(members in prop::collection::vec(key(), 0..200), others in prop::collection::vec(key(), 0..200), parts in 1usize..4, sized in any::<bool>(), sketched in any::<bool>()) {
        let mut arena = KeyArena::default();
        // Half the members given twice.
        members.iter().chain(&members[..members.len() / 2]).for_each(|k| arena.push(k));
        let bytes = arena.as_bytes();
        let pieces: Vec<&[u8]> = arena.pieces().into_iter().map(|piece| &bytes[piece]).collect();
        // Sized for the keys, or for one (the tables must grow).
        let counts = if sized { arena.counts() } else { KeyCounts { keys: 1, ..KeyCounts::default() } };
        // With sketches of its long keys, or without.
        let builder = |i| if sketched { PartitionBuilder::new(counts, i, parts).sketching() } else { PartitionBuilder::new(counts, i, parts) };
        let build = || KeySet::from_partitions((0..parts).map(|i| builder(i).build(&pieces)).collect());
        let set = build();
        let want: HashSet<&[u8]> = members.iter().map(Vec::as_slice).collect();
        // Built again from the same pieces (as another process builds it), the set places
        // every key alike, and its layout's digest says so.
        let again = build();
        prop_assert_eq!(set.layout_digest(), again.layout_digest());
        let members_once: Vec<&[u8]> = want.iter().copied().collect();
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        set.positions_batch(&members_once, &mut ours);
        again.positions_batch(&members_once, &mut theirs);
        prop_assert_eq!(ours, theirs);
        // Each key is held once, however often it was given.
        prop_assert_eq!(set.len(), want.len());
        // Near misses too: each member with a leading zero, without its first byte, and with a
        // zero byte after it (a number with leading zeros must not read as the number).
        let near: Vec<Vec<u8>> = members.iter().flat_map(|m| [[b"0", &m[..]].concat(), m.get(1..).unwrap_or_default().to_vec(), [&m[..], b"\0"].concat()]).collect();
        let queries: Vec<&[u8]> = members.iter().chain(&others).chain(&near).map(Vec::as_slice).collect();
        answers_as(&set, &want, &queries)?;
    }
}

proptest! {
    /// A set made from an arena (as a shuffle join's shard makes it: numbers as bits where the
    /// arena holds them so, long keys held in the arena's text) holds exactly the arena's keys;
    /// so does one from an arena that let its copies go (as a worker's keys for the broadcast),
    /// which holds each key once.
    #[test]
    fn a_key_set_from_an_arena_holds_exactly_its_keys(members in prop::collection::vec(key(), 0..300), others in prop::collection::vec(key(), 0..100), as_bits in any::<bool>(), once in any::<bool>()) {
        let mut arena = KeyArena::default();
        if as_bits {
            arena = arena.holding_numbers_as_bits(false);
        }
        let want: HashSet<&[u8]> = members.iter().map(Vec::as_slice).collect();
        if once {
            // Each key three times: the arena lets the copies go, then takes each key again (in
            // groups, as a scan gives them), and holds it once.
            arena = arena.holding_each_key_once();
            (0..3).for_each(|_| members.iter().for_each(|k| arena.push(k)));
            arena.let_copies_go();
            arena.push_all(&members.iter().map(Vec::as_slice).collect::<Vec<_>>());
            // Each key once; but a number may be held both as text (given before the bits could
            // cover it) and as a bit.
            let mut held = Vec::new();
            arena.for_each_key(|key| held.push(key.to_vec()));
            let texts = held.iter().filter(|key| !key.iter().all(u8::is_ascii_digit) || key.is_empty()).count();
            prop_assert_eq!(texts, want.iter().filter(|key| !key.iter().all(u8::is_ascii_digit) || key.is_empty()).count());
            prop_assert!(held.iter().all(|key| want.contains(key.as_slice())));
        } else {
            members.iter().chain(&members[..members.len() / 2]).for_each(|k| arena.push(k));
        }
        let set = KeySet::from_arena(arena);
        prop_assert_eq!(set.len(), want.len());
        let queries: Vec<&[u8]> = members.iter().chain(&others).map(Vec::as_slice).collect();
        answers_as(&set, &want, &queries)?;
    }
}

proptest! {
    /// A set grown as its keys arrive (as a shuffle join's shard grows it once its keys repeat:
    /// made from an arena, then given pieces of keys) holds exactly every key, each once: the
    /// later keys include numbers outside the span the arena's bits had, keys given again, and
    /// more keys than the set was sized for.
    #[test]
    fn a_growing_set_holds_exactly_its_keys(first in prop::collection::vec(key(), 0..150), later in prop::collection::vec(key(), 0..300), others in prop::collection::vec(key(), 0..100), as_bits in any::<bool>(), piece in 1usize..8) {
        let mut arena = KeyArena::default().estimating_distinct();
        if as_bits {
            arena = arena.holding_numbers_as_bits(false);
        }
        first.iter().chain(&first[..first.len() / 2]).for_each(|k| arena.push(k));
        let mut growing = GrowingSet::from_arena(arena);
        let arriving: Vec<&Vec<u8>> = later.iter().chain(&first).collect();
        for keys in arriving.chunks(piece) {
            let mut encoded = KeyArena::default();
            keys.iter().for_each(|k| encoded.push(k));
            growing.insert_encoded(encoded.as_bytes());
        }
        let set = growing.into_set();
        let want: HashSet<&[u8]> = first.iter().chain(&later).map(Vec::as_slice).collect();
        prop_assert_eq!(set.len(), want.len());
        let queries: Vec<&[u8]> = first.iter().chain(&later).chain(&others).map(Vec::as_slice).collect();
        answers_as(&set, &want, &queries)?;
    }
}
