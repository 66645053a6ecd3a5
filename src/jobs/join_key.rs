//! The key the exact shuffle join exchanges and hashes to its shard.
//!
//! Every build key and every Bloom survivor travels as one. With the key as a `Vec<u8>`, each
//! took an allocation and a free; when the join was differential-dataflow's `semijoin`, which
//! sorts and merges its updates by key many times over, the benchmark's shuffle semi-join spent
//! a quarter of its time in `memcmp` and a fifth in `malloc` and `free` (perf). A short key held
//! inline, as integers, needs neither.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest key held inline.
const INLINE_BYTES: usize = 24;

/// A join key. Two keys are equal exactly when their bytes are; the order is a total order
/// consistent with that, which is all a join needs (it is not the bytes' order).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
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

    /// Passes the key's bytes to `f`.
    pub(crate) fn with_bytes<T>(&self, f: impl FnOnce(&[u8]) -> T) -> T {
        match self {
            JoinKey::Inline(words, len) => {
                let mut bytes = [0u8; INLINE_BYTES];
                for (chunk, word) in bytes.chunks_exact_mut(8).zip(words) {
                    chunk.copy_from_slice(&word.to_le_bytes());
                }
                f(&bytes[..*len as usize])
            }
            JoinKey::Long(bytes) => f(bytes),
        }
    }
}

/// Between processes a key travels as its bytes (bincode: an 8-byte length, then the bytes),
/// as a `Vec<u8>` did, not as its inline form: the benchmark's 7-digit ids take 15 bytes
/// instead of 29.
impl Serialize for JoinKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.with_bytes(|bytes| serializer.serialize_bytes(bytes))
    }
}

impl<'de> Deserialize<'de> for JoinKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyBytes;
        impl serde::de::Visitor<'_> for KeyBytes {
            type Value = JoinKey;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a join key's bytes")
            }
            fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<JoinKey, E> {
                Ok(JoinKey::new(bytes))
            }
        }
        deserializer.deserialize_bytes(KeyBytes)
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

        /// A key survives the exchange's serialization unchanged, and travels as a `Vec<u8>`
        /// of its bytes would.
        #[test]
        fn join_keys_survive_bincode(a in proptest::collection::vec(any::<u8>(), 0..40)) {
            let key = JoinKey::new(&a);
            let wire = bincode::serialize(&key).unwrap();
            prop_assert_eq!(&wire, &bincode::serialize(&a).unwrap());
            let back: JoinKey = bincode::deserialize(&wire).unwrap();
            prop_assert_eq!(back, key);
        }
    }
}
