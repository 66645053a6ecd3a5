//! Large messages between workers: the filter slices of the all-reduce and the build keys of a
//! broadcast join, 256 KiB and 1 MiB. Timely's defaults suit many small records, not these:
//! its builder for `Vec<T>` packs 8 KiB worth of `T` structs per message (hundreds of 1 MiB
//! payloads, so a worker's whole share left as one message, and serializing, sending, receiving
//! and merging ran one after another between processes), and bincode encodes a `Vec<u64>` or a
//! `Vec<u8>` element by element. Here every payload is a message of its own, and crosses as one
//! byte string.

use std::collections::VecDeque;
use timely::container::{ContainerBuilder, LengthPreservingContainerBuilder, PushInto};

/// A container builder that ships every item as a message of its own.
pub struct OneAtATime<T> {
    pending: VecDeque<Vec<T>>,
    current: Vec<T>,
}

impl<T> Default for OneAtATime<T> {
    fn default() -> Self {
        OneAtATime { pending: VecDeque::new(), current: Vec::new() }
    }
}

impl<T> PushInto<T> for OneAtATime<T> {
    fn push_into(&mut self, item: T) {
        self.pending.push_back(vec![item]);
    }
}

impl<T: 'static> ContainerBuilder for OneAtATime<T> {
    type Container = Vec<T>;

    fn extract(&mut self) -> Option<&mut Vec<T>> {
        self.current = self.pending.pop_front()?;
        Some(&mut self.current)
    }

    fn finish(&mut self) -> Option<&mut Vec<T>> {
        self.extract()
    }
}

impl<T: 'static> LengthPreservingContainerBuilder for OneAtATime<T> {}

/// `#[serde(with = "bytes")]` for a `Vec<u8>`: one byte string.
pub mod bytes {
    use serde::de::{Error, Visitor};
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(bytes)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_byte_buf(BytesVisitor)
    }

    struct BytesVisitor;

    impl<'de> Visitor<'de> for BytesVisitor {
        type Value = Vec<u8>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a byte string")
        }

        fn visit_bytes<E: Error>(self, bytes: &[u8]) -> Result<Vec<u8>, E> {
            Ok(bytes.to_vec())
        }

        fn visit_byte_buf<E: Error>(self, bytes: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(bytes)
        }
    }
}

/// `#[serde(with = "words_as_bytes")]` for filter words: one little-endian byte string.
pub mod words_as_bytes {
    use serde::de::{Error, Visitor};
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(words: &[u64], s: S) -> Result<S::Ok, S::Error> {
        if cfg!(target_endian = "little") {
            s.serialize_bytes(bytemuck::cast_slice(words))
        } else {
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            s.serialize_bytes(&bytes)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
        d.deserialize_bytes(WordsVisitor)
    }

    struct WordsVisitor;

    impl<'de> Visitor<'de> for WordsVisitor {
        type Value = Vec<u64>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("filter words as a byte string of a multiple of 8 bytes")
        }

        fn visit_bytes<E: Error>(self, bytes: &[u8]) -> Result<Vec<u64>, E> {
            if !bytes.len().is_multiple_of(8) {
                return Err(E::invalid_length(bytes.len(), &self));
            }
            Ok(bytes.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))).collect())
        }

        fn visit_byte_buf<E: Error>(self, bytes: Vec<u8>) -> Result<Vec<u64>, E> {
            self.visit_bytes(&bytes)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Payload {
        to: u32,
        #[serde(with = "super::words_as_bytes")]
        words: Vec<u64>,
        #[serde(with = "super::bytes")]
        bytes: Vec<u8>,
    }

    #[test]
    fn payloads_round_trip_through_bincode_as_byte_strings() {
        let p = Payload { to: 3, words: vec![0, 1, u64::MAX, 0x0123_4567_89ab_cdef], bytes: b"abc\0\xff".to_vec() };
        let encoded = bincode::serialize(&p).unwrap();
        // to, then each payload as a length prefix and its bytes.
        assert_eq!(encoded.len(), 4 + (8 + 32) + (8 + 5));
        assert_eq!(bincode::deserialize::<Payload>(&encoded).unwrap(), p);
    }

    #[test]
    fn words_of_a_partial_length_are_refused() {
        let mut encoded = bincode::serialize(&Payload { to: 0, words: vec![], bytes: vec![] }).unwrap();
        encoded[4] = 3; // the words' byte string claims 3 bytes: not whole words
        encoded.splice(12..12, [1, 2, 3]);
        assert!(bincode::deserialize::<Payload>(&encoded).is_err());
    }

    #[test]
    fn one_at_a_time_ships_each_item_alone() {
        use timely::container::{ContainerBuilder, PushInto};
        let mut b = super::OneAtATime::default();
        b.push_into(1);
        b.push_into(2);
        assert_eq!(b.extract().cloned(), Some(vec![1]));
        assert_eq!(b.finish().cloned(), Some(vec![2]));
        assert_eq!(b.finish(), None);
    }
}
