//! Properties of the filter itself: no false negatives, false-positive rates that match theory,
//! union and intersection semantics.

use crate::util::key;
use bloomflow::{BloomFilter, FilterSpec};
use proptest::prelude::*;

#[test]
fn no_false_negatives_for_a_million_keys() {
    let mut f = BloomFilter::with_rate(1_000_000, 0.01).unwrap();
    for i in 0..1_000_000 {
        f.insert(&key(1, i));
    }
    let missing = (0..1_000_000).filter(|&i| !f.contains(&key(1, i))).count();
    assert_eq!(missing, 0);
}

/// The measured false-positive rate over a million absent keys, for n = 10^6 inserted at rate p,
/// lies within [0.8·p, 1.2·p].
#[test]
fn measured_false_positive_rate_matches_the_target() {
    for (ns, p) in [(10, 0.1), (11, 0.01), (12, 0.001)] {
        let mut f = BloomFilter::with_rate(1_000_000, p).unwrap();
        for i in 0..1_000_000 {
            f.insert(&key(ns, i));
        }
        let absent = 1_000_000u64;
        let hits = (0..absent).filter(|&i| f.contains(&key(ns + 100, i))).count();
        let measured = hits as f64 / absent as f64;
        assert!(
            (0.8 * p..=1.2 * p).contains(&measured),
            "p = {p}: measured {measured} ({hits} of {absent})"
        );
        // The estimate from the fill ratio should agree with the measurement too.
        let est = f.estimated_fpp();
        assert!((0.8 * p..=1.2 * p).contains(&est), "p = {p}: estimated {est}");
        let n_est = f.estimated_items();
        assert!((n_est - 1e6).abs() < 2e4, "p = {p}: estimated items {n_est}");
    }
}

fn keys() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..400)
}

fn spec() -> impl Strategy<Value = FilterSpec> {
    (1u64..5000, 1u32..=32, any::<u32>()).prop_map(|(m, k, seed)| FilterSpec::native(m, k, seed).unwrap())
}

proptest! {
    #[test]
    fn every_inserted_key_is_found(spec in spec(), keys in keys()) {
        let mut f = BloomFilter::new(spec);
        for k in &keys { f.insert(k); }
        for k in &keys { prop_assert!(f.contains(k)); }
    }

    #[test]
    fn union_equals_inserting_both_sets(spec in spec(), a in keys(), b in keys()) {
        let (mut fa, mut fb, mut both) = (BloomFilter::new(spec), BloomFilter::new(spec), BloomFilter::new(spec));
        for k in &a { fa.insert(k); both.insert(k); }
        for k in &b { fb.insert(k); both.insert(k); }
        fa.union(&fb).unwrap();
        prop_assert_eq!(fa.bits(), both.bits());
        prop_assert_eq!(fa.items_inserted(), both.items_inserted());
    }

    #[test]
    fn intersection_keeps_the_common_keys(spec in spec(), a in keys(), b in keys(), common in keys()) {
        let (mut fa, mut fb) = (BloomFilter::new(spec), BloomFilter::new(spec));
        for k in a.iter().chain(&common) { fa.insert(k); }
        for k in b.iter().chain(&common) { fb.insert(k); }
        let (ua, ub) = (fa.clone(), fb.clone());
        fa.intersect(&fb).unwrap();
        for k in &common { prop_assert!(fa.contains(k)); }
        // The AND answers maybe only where both did.
        for k in a.iter().chain(&b) {
            prop_assert_eq!(fa.contains(k), fa.contains(k) && ua.contains(k) && ub.contains(k));
        }
    }
}

/// The blocked layout is sized for its blocking penalty: the measured false-positive rate over
/// a million absent keys meets the target (and is not far below it, or the sizing wastes bits).
#[test]
fn blocked_layout_meets_the_target_rate() {
    use bloomflow::hashing::Scheme;
    use bloomflow::Layout;
    for (ns, p) in [(20, 0.1), (21, 0.01), (22, 0.001)] {
        let spec = FilterSpec::sized_for(Scheme::NativeLookup3, Layout::Blocked, 1_000_000, p, 0).unwrap();
        let mut f = BloomFilter::new(spec);
        let keys: Vec<Vec<u8>> = (0..1_000_000).map(|i| key(ns, i)).collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        f.insert_batch(&refs);
        let mut answers = Vec::new();
        f.contains_batch(&refs, &mut answers);
        assert!(answers.iter().all(|&a| a), "p = {p}: a false negative");
        let absent = 1_000_000u64;
        let hits = (0..absent).filter(|&i| f.contains(&key(ns + 100, i))).count();
        let measured = hits as f64 / absent as f64;
        assert!((0.6 * p..=1.1 * p).contains(&measured), "p = {p}: measured {measured} with {} bits/key, k = {}", spec.bits as f64 / 1e6, spec.hashes);
        let est = f.estimated_fpp();
        assert!((0.8 * measured..=1.2 * measured).contains(&est), "p = {p}: estimated {est}, measured {measured}");
    }
}

proptest! {
    #[test]
    fn blocked_filters_have_no_false_negatives(blocks in 1u64..20, k in 1u32..=32, seed in any::<u32>(), keys in keys()) {
        use bloomflow::hashing::Scheme;
        let spec = FilterSpec::with_layout(Scheme::NativeLookup3, bloomflow::Layout::Blocked, seed, blocks * 512, k).unwrap();
        let mut one_by_one = BloomFilter::new(spec);
        for k in &keys { one_by_one.insert(k); }
        let mut batched = BloomFilter::new(spec);
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        batched.insert_batch(&refs);
        prop_assert_eq!(one_by_one.bits(), batched.bits());
        let mut answers = Vec::new();
        batched.contains_batch(&refs, &mut answers);
        prop_assert!(answers.iter().all(|&a| a));
        for k in &keys { prop_assert!(one_by_one.contains(k)); }
    }
}

proptest! {
    /// The standard layout's batched insert and query (a group of keys' positions computed and
    /// their words prefetched first) agree with one key at a time, for every scheme and every
    /// kernel this CPU runs (Hadoop's and Spark's batches hash in lanes with a vector kernel, one
    /// key at a time with the portable one): the same bits set, the same insert count, the same
    /// answer for members and non-members alike, whatever the number of keys against the group's
    /// size.
    #[test]
    fn standard_batches_agree_with_one_key_at_a_time(
        scheme in 0usize..6, words in 1u64..80, extra_bits in 0u64..64, k in 1u32..=40, seed in any::<u32>(),
        keys in keys(), queries in keys(),
    ) {
        use bloomflow::hashing::{BlockKernel, HadoopHash, Scheme};
        let scheme = [Scheme::Native, Scheme::NativeLookup3, Scheme::Hadoop(HadoopHash::Jenkins), Scheme::Hadoop(HadoopHash::Murmur), Scheme::SparkV1, Scheme::SparkV2][scheme];
        // Spark's bits are whole words; the native schemes take at most 32 hashes.
        let bits = if matches!(scheme, Scheme::SparkV1 | Scheme::SparkV2) { 64 * words } else { 64 * words + extra_bits };
        let k = if matches!(scheme, Scheme::Native | Scheme::NativeLookup3) { k.min(32) } else { k };
        // Spark V1's and Hadoop's filters have no seed.
        let seed = if matches!(scheme, Scheme::SparkV1 | Scheme::Hadoop(_)) { 0 } else { seed };
        let spec = FilterSpec::new(scheme, seed, bits, k).unwrap();
        // Hadoop refuses empty keys before they reach a filter.
        let usable = |ks: &[Vec<u8>]| -> Vec<Vec<u8>> { ks.iter().filter(|k| !(k.is_empty() && scheme.refuses_empty_keys())).cloned().collect() };
        let (keys, queries) = (usable(&keys), usable(&queries));
        let mut one_by_one = BloomFilter::new(spec);
        keys.iter().for_each(|key| one_by_one.insert(key));
        let asked: Vec<&[u8]> = queries.iter().chain(&keys).map(Vec::as_slice).collect();
        let want: Vec<bool> = asked.iter().map(|key| one_by_one.contains(key)).collect();
        for kernel in BlockKernel::ALL.into_iter().filter(|kernel| kernel.runs()) {
            let mut batched = BloomFilter::new(spec).with_kernel(kernel);
            prop_assert_eq!(batched.kernel(), kernel);
            batched.insert_batch(&keys.iter().map(Vec::as_slice).collect::<Vec<_>>());
            prop_assert_eq!(batched.bits(), one_by_one.bits(), "{:?}", kernel);
            prop_assert_eq!(batched.items_inserted(), keys.len() as u64);
            let mut answers = vec![true; 3];
            batched.contains_batch(&asked, &mut answers);
            prop_assert_eq!(&answers, &want, "{:?}", kernel);
        }
    }
}

proptest! {
    /// `Positions::fill`, which the batches use, writes the positions the iterator gives, for
    /// every scheme and layout: after any number taken one by one, as many as the slots hold
    /// or as are left, leaving any further slots as they were.
    #[test]
    fn filled_positions_are_the_iterators(
        scheme in 0usize..7, words in 1u64..80, k in 1u32..=40, seed in any::<u32>(),
        key in prop::collection::vec(any::<u8>(), 1..40), taken in 0usize..45, slots in 0usize..45,
    ) {
        use bloomflow::hashing::{HadoopHash, Scheme};
        use bloomflow::Layout;
        let (scheme, layout) = match scheme {
            6 => (Scheme::NativeLookup3, Layout::Blocked),
            s => ([Scheme::Native, Scheme::NativeLookup3, Scheme::Hadoop(HadoopHash::Jenkins), Scheme::Hadoop(HadoopHash::Murmur), Scheme::SparkV1, Scheme::SparkV2][s], Layout::Standard),
        };
        let k = if matches!(scheme, Scheme::Native | Scheme::NativeLookup3) { k.min(32) } else { k };
        let seed = if matches!(scheme, Scheme::SparkV1 | Scheme::Hadoop(_)) { 0 } else { seed };
        let spec = FilterSpec::with_layout(scheme, layout, seed, 512 * words, k).unwrap();
        let all: Vec<u64> = spec.positions(&key).collect();
        prop_assert_eq!(all.len(), k as usize);
        let mut positions = spec.positions(&key);
        positions.by_ref().take(taken).for_each(drop);
        let mut out = vec![u64::MAX; slots];
        positions.fill(&mut out);
        let want: Vec<u64> = all.iter().copied().skip(taken).chain(std::iter::repeat(u64::MAX)).take(slots).collect();
        prop_assert_eq!(out, want);
    }
}

proptest! {
    /// A filter folded by any factor of its size (bits, or blocks in the blocked layout) is the
    /// filter of that size built from the same keys, bit for bit, and a counting filter's
    /// counters are those of the counting filter of that size (keys inserted up to 20 times
    /// each, so that counters saturate): every scheme and layout, any seed, any k.
    #[test]
    fn a_filter_folded_by_any_factor_of_its_size_is_the_smaller_filter(
        scheme in 0usize..8, units in 1u64..60, factor in 2u64..13, k in 1u32..=16, seed in any::<u32>(),
        keys in prop::collection::vec((prop::collection::vec(any::<u8>(), 0..24), 1usize..20), 0..300),
    ) {
        use bloomflow::hashing::{HadoopHash, Scheme};
        use bloomflow::{CountingBloomFilter, Layout};
        let (scheme, layout) = match scheme {
            6 => (Scheme::NativeLookup3, Layout::Blocked),
            7 => (Scheme::Native, Layout::Blocked),
            s => ([Scheme::Native, Scheme::NativeLookup3, Scheme::Hadoop(HadoopHash::Jenkins), Scheme::Hadoop(HadoopHash::Murmur), Scheme::SparkV1, Scheme::SparkV2][s], Layout::Standard),
        };
        let seed = if matches!(scheme, Scheme::Native | Scheme::NativeLookup3 | Scheme::SparkV2) { seed } else { 0 };
        // A size of `units` times the factor: of blocks, of words (Spark's whole words), or of bits.
        let unit = match (layout, scheme) {
            (Layout::Blocked, _) => 512,
            (_, Scheme::SparkV1 | Scheme::SparkV2) => 64,
            _ => 1,
        };
        let bits = unit * units * factor * if unit == 1 { 7 } else { 1 };
        let spec = |bits: u64| FilterSpec::with_size(scheme, layout, bits, k, seed).unwrap();
        let inserted: Vec<&[u8]> = keys.iter().flat_map(|(key, times)| std::iter::repeat_n(&key[..], *times)).collect();
        let mut big = BloomFilter::new(spec(bits));
        big.insert_batch(&inserted);
        let mut direct = BloomFilter::new(spec(bits / factor));
        direct.insert_batch(&inserted);
        let folded = big.folded(factor).expect("a factor of the size");
        prop_assert_eq!(folded.spec(), direct.spec());
        prop_assert!(folded.bits().words() == direct.bits().words());
        if !matches!(scheme, Scheme::SparkV1 | Scheme::SparkV2) {
            let mut big = CountingBloomFilter::new(spec(bits));
            big.insert_batch(&inserted);
            let mut direct = CountingBloomFilter::new(spec(bits / factor));
            direct.insert_batch(&inserted);
            prop_assert!(big.folded(factor).expect("a factor of the size").words() == direct.words());
        }
    }
}
