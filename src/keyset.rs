//! An exact set of byte-string keys, compact enough to hold a whole build side in every process,
//! and the encoding in which build keys are collected and broadcast.

use std::hash::BuildHasher;

/// Keys appended to one buffer as (u32 length, bytes), the form in which they are collected
/// during a scan and broadcast between workers.
#[derive(Clone, Debug, Default)]
pub struct KeyArena {
    bytes: Vec<u8>,
    keys: u64,
}

impl KeyArena {
    /// Appends a key.
    #[inline]
    pub fn push(&mut self, key: &[u8]) {
        self.bytes.extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(key);
        self.keys += 1;
    }

    /// Bytes held.
    pub fn len_bytes(&self) -> usize {
        self.bytes.len()
    }

    pub fn keys(&self) -> u64 {
        self.keys
    }

    /// The encoded keys, for sending.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Releases the memory.
    pub fn clear(&mut self) {
        self.bytes = Vec::new();
        self.keys = 0;
    }
}

/// Cuts encoded keys into pieces of about `size` bytes that end on key boundaries.
pub fn chunks(encoded: &[u8], size: usize) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let (mut start, mut at) = (0, 0);
    while at < encoded.len() {
        let len = u32::from_le_bytes(encoded[at..at + 4].try_into().unwrap()) as usize;
        at += 4 + len;
        if at - start >= size {
            out.push(&encoded[start..at]);
            start = at;
        }
    }
    if start < encoded.len() {
        out.push(&encoded[start..]);
    }
    out
}

/// Keys whose slots are prefetched together by [`KeySet::contains_batch`].
const BATCH: usize = 64;
/// Keys up to this long are stored in their slot; longer ones in the arena.
const INLINE: usize = 8;

/// One slot of the open-addressing table: 16 bytes, four to a cache line.
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Slot {
    /// The hash's high 32 bits with the lowest bit set; 0 marks an empty slot.
    tag: u32,
    len: u32,
    /// The key itself (up to 8 bytes), or its offset in the arena.
    data: [u8; 8],
}

/// An exact set of keys, built once and then only queried. Keys of up to 8 bytes live in the
/// table itself, so a lookup touches one cache line, and batched lookups prefetch those lines
/// so that the misses overlap; longer keys live in an arena. With the table at most 2/3 full,
/// that is about 24 bytes per key.
pub struct KeySet {
    slots: Vec<Slot>,
    mask: usize,
    arena: Vec<u8>,
    keys: usize,
    hasher: foldhash::fast::FixedState,
}

impl KeySet {
    /// An empty set for up to `keys` keys (more are refused), with `bytes` of arena reserved.
    pub fn with_capacity(keys: usize, bytes: usize) -> Self {
        let slots = (keys * 3 / 2 + 1).next_power_of_two().max(16);
        KeySet {
            slots: bytemuck::zeroed_vec(slots),
            mask: slots - 1,
            arena: Vec::with_capacity(bytes),
            keys: 0,
            hasher: foldhash::fast::FixedState::with_seed(0x626c_6f6f_6d66_6c77),
        }
    }

    #[inline(always)]
    fn hash(&self, key: &[u8]) -> (usize, u32) {
        let h = self.hasher.hash_one(key);
        ((h as usize) & self.mask, ((h >> 32) as u32) | 1)
    }

    #[inline(always)]
    fn matches(&self, slot: &Slot, tag: u32, key: &[u8]) -> bool {
        if slot.tag != tag || slot.len as usize != key.len() {
            return false;
        }
        if key.len() <= INLINE {
            slot.data[..key.len()] == *key
        } else {
            let at = u64::from_le_bytes(slot.data) as usize;
            self.arena[at..at + key.len()] == *key
        }
    }

    /// Adds a key (a key added twice takes two slots; membership is unaffected).
    ///
    /// # Panics
    /// When more keys are added than the set was sized for: the table must keep empty slots.
    pub fn insert(&mut self, key: &[u8]) {
        assert!(self.keys * 3 < self.slots.len() * 2, "key set sized for fewer keys");
        let (mut i, tag) = self.hash(key);
        while self.slots[i].tag != 0 {
            i = (i + 1) & self.mask;
        }
        let mut data = [0u8; 8];
        if key.len() <= INLINE {
            data[..key.len()].copy_from_slice(key);
        } else {
            data = (self.arena.len() as u64).to_le_bytes();
            self.arena.extend_from_slice(key);
        }
        self.slots[i] = Slot { tag, len: key.len() as u32, data };
        self.keys += 1;
    }

    /// Adds every key of an encoded piece (see [`KeyArena`]).
    pub fn extend_encoded(&mut self, encoded: &[u8]) {
        let mut at = 0;
        while at < encoded.len() {
            let len = u32::from_le_bytes(encoded[at..at + 4].try_into().unwrap()) as usize;
            self.insert(&encoded[at + 4..at + 4 + len]);
            at += 4 + len;
        }
    }

    /// Whether `key` is in the set.
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        let (i, tag) = self.hash(key);
        self.probe(i, tag, key)
    }

    #[inline(always)]
    fn probe(&self, mut i: usize, tag: u32, key: &[u8]) -> bool {
        loop {
            let slot = &self.slots[i];
            if slot.tag == 0 {
                return false;
            }
            if self.matches(slot, tag, key) {
                return true;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Answers many keys: every key's slot is prefetched before any is probed.
    pub fn contains_batch(&self, keys: &[&[u8]], answers: &mut Vec<bool>) {
        answers.clear();
        for group in keys.chunks(BATCH) {
            let mut hashes = [(0usize, 0u32); BATCH];
            for (h, key) in hashes.iter_mut().zip(group) {
                *h = self.hash(key);
                prefetch(&self.slots[h.0]);
            }
            answers.extend(group.iter().zip(&hashes).map(|(key, &(i, tag))| self.probe(i, tag, key)));
        }
    }

    /// Keys held, duplicates included.
    pub fn len(&self) -> usize {
        self.keys
    }

    pub fn is_empty(&self) -> bool {
        self.keys == 0
    }
}

#[inline(always)]
fn prefetch(slot: &Slot) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint with no effect on memory; the reference is valid.
    unsafe {
        std::arch::x86_64::_mm_prefetch(slot as *const Slot as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = slot;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_exactly_the_keys_put_in() {
        let mut arena = KeyArena::default();
        for i in 0..10_000u32 {
            arena.push(format!("k{}", i % 7000).as_bytes());
        }
        arena.push(b"");
        let mut set = KeySet::with_capacity(10_001, arena.len_bytes());
        for piece in chunks(arena.as_bytes(), 1000) {
            set.extend_encoded(piece);
        }
        assert_eq!(set.len(), 10_001);
        assert!((0..7000).all(|i| set.contains(format!("k{i}").as_bytes())));
        assert!(set.contains(b""));
        assert!(!set.contains(b"k7000") && !set.contains(b"k"));
        let long: Vec<u8> = b"a key longer than eight bytes".to_vec();
        let mut set = KeySet::with_capacity(3, 64);
        set.insert(&long);
        set.insert(b"12345678");
        set.insert(b"123456789");
        assert!(set.contains(&long) && set.contains(b"12345678") && set.contains(b"123456789"));
        assert!(!set.contains(b"1234567") && !set.contains(b"a key longer than eight byteS"));
        let keys: Vec<&[u8]> = vec![&long, b"nope", b"12345678", b""];
        let mut answers = Vec::new();
        set.contains_batch(&keys, &mut answers);
        assert_eq!(answers, [true, false, true, false]);
    }

    #[test]
    fn chunks_end_on_key_boundaries() {
        let mut arena = KeyArena::default();
        for i in 0..100 {
            arena.push(&vec![b'x'; i]);
        }
        let pieces = chunks(arena.as_bytes(), 64);
        assert_eq!(pieces.concat(), arena.as_bytes());
        let mut set = KeySet::with_capacity(100, arena.len_bytes());
        pieces.iter().for_each(|p| set.extend_encoded(p));
        assert_eq!(set.len(), 100);
    }
}
