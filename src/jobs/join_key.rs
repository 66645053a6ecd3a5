//! The key the exact shuffle join exchanges, sorts and compares.
//!
//! differential-dataflow sorts and merges its updates by key many times over. With the key as a
//! `Vec<u8>`, the shuffle semi-join of the benchmark workload (1.2M Bloom survivors against 1M
//! build keys, 2 workers) spent a quarter of its time in `memcmp` and a fifth in `malloc` and
//! `free` (perf). A short key held inline, as integers, needs neither.

use serde::{Deserialize, Serialize};

/// The longest key held inline.
const INLINE_BYTES: usize = 24;

/// A join key. Two keys are equal exactly when their bytes are; the order is a total order
/// consistent with that, which is all a join needs (it is not the bytes' order).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum JoinKey {
    /// A key of at most 24 bytes: its bytes zero-padded to 24, as three little-endian words,
    /// and its length (which tells "a" from "a\0").
    Inline([u64; 3], u8),
    /// A longer key's bytes.
    Long(Vec<u8>),
}

impl JoinKey {
    /// The join key of `key`'s bytes: inline whenever it fits, so that each key has one form.
    pub fn new(key: &[u8]) -> Self {
        if key.len() > INLINE_BYTES {
            return JoinKey::Long(key.to_vec());
        }
        let mut padded = [0u8; INLINE_BYTES];
        padded[..key.len()].copy_from_slice(key);
        let word = |i: usize| u64::from_le_bytes(padded[8 * i..8 * i + 8].try_into().expect("8 bytes"));
        JoinKey::Inline([word(0), word(1), word(2)], key.len() as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Keys that differ only in trailing zero bytes, or around the inline limit, stay apart.
    #[test]
    fn keys_that_pad_alike_stay_apart() {
        let keys: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            vec![0, 0],
            b"a".to_vec(),
            b"a\0".to_vec(),
            vec![7; 24],
            [vec![7; 24], vec![0]].concat(),
            vec![7; 25],
            [vec![7; 23], vec![0]].concat(),
        ];
        for a in &keys {
            for b in &keys {
                assert_eq!(JoinKey::new(a) == JoinKey::new(b), a == b, "{a:?} vs {b:?}");
            }
        }
        assert!(matches!(JoinKey::new(&[7; 24]), JoinKey::Inline(..)));
        assert!(matches!(JoinKey::new(&[7; 25]), JoinKey::Long(_)));
    }

    proptest! {
        /// Equal join keys are equal bytes, and back: the join matches exactly the keys whose
        /// bytes match. Short alphabets and lengths around 24 make equal and near keys common.
        #[test]
        fn join_keys_are_equal_exactly_when_their_bytes_are(
            a in proptest::collection::vec(0u8..3, 0..30),
            b in proptest::collection::vec(0u8..3, 0..30),
        ) {
            prop_assert_eq!(JoinKey::new(&a) == JoinKey::new(&b), a == b);
            prop_assert_eq!(JoinKey::new(&a).cmp(&JoinKey::new(&b)) == std::cmp::Ordering::Equal, a == b);
        }

        /// A key survives the exchange's serialization unchanged.
        #[test]
        fn join_keys_survive_bincode(a in proptest::collection::vec(any::<u8>(), 0..40)) {
            let key = JoinKey::new(&a);
            let back: JoinKey = bincode::deserialize(&bincode::serialize(&key).unwrap()).unwrap();
            prop_assert_eq!(back, key);
        }
    }
}
