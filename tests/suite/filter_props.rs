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
