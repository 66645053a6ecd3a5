//! Bob Jenkins' lookup3, byte at a time, little-endian: `hashlittle` (Hadoop's `JenkinsHash`,
//! checked against every row of the interop vectors in tests/suite/interop.rs) and `hashlittle2`
//! (64 bits in one pass, for bloomflow's faster native scheme).

#[inline(always)]
fn rot(x: u32, k: u32) -> u32 {
    x.rotate_left(k)
}

#[inline(always)]
fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c); *a ^= rot(*c, 4); *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a); *b ^= rot(*a, 6); *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b); *c ^= rot(*b, 8); *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c); *a ^= rot(*c, 16); *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a); *b ^= rot(*a, 19); *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b); *c ^= rot(*b, 4); *b = b.wrapping_add(*a);
}

#[inline(always)]
fn finish(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c ^= *b; *c = c.wrapping_sub(rot(*b, 14));
    *a ^= *c; *a = a.wrapping_sub(rot(*c, 11));
    *b ^= *a; *b = b.wrapping_sub(rot(*a, 25));
    *c ^= *b; *c = c.wrapping_sub(rot(*b, 16));
    *a ^= *c; *a = a.wrapping_sub(rot(*c, 4));
    *b ^= *a; *b = b.wrapping_sub(rot(*a, 14));
    *c ^= *b; *c = c.wrapping_sub(rot(*b, 24));
}

/// The little-endian word at `bytes[at..at + 4]`.
#[inline(always)]
fn word(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// The last 1..=12 bytes of a key as lookup3 reads them: three little-endian words of the bytes
/// zero-padded to 12. Built from overlapping whole-word loads shifted into place, because a
/// byte copy into a padded buffer (a `memcpy` call of variable length) cost more than the
/// mixing itself on short keys. (The exact key set stores keys of up to 8 bytes the same way.)
#[inline(always)]
pub(crate) fn tail_words(rest: &[u8]) -> (u32, u32, u32) {
    let r = rest.len();
    debug_assert!((1..=12).contains(&r));
    if r >= 8 {
        // Bytes 8..r, taken from the word ending at r and shifted down past the bytes before 8.
        let high = (word(rest, r - 4) as u64 >> (8 * (12 - r))) as u32;
        (word(rest, 0), word(rest, 4), high)
    } else if r >= 4 {
        let high = (word(rest, r - 4) as u64 >> (8 * (8 - r))) as u32;
        (word(rest, 0), high, 0)
    } else {
        // 1..=3 bytes: first, middle and last byte (which coincide when r < 3).
        let (mid, last) = (r / 2, r - 1);
        let low = rest[0] as u32 | (rest[mid] as u32) << (8 * mid) | (rest[last] as u32) << (8 * last);
        (low, 0, 0)
    }
}

/// Word `i` (bytes 4i..4i + 4) of a key of at least 4 bytes, zero-padded past its end, without
/// a branch: the word at 4i if the key has it all, else the word ending at the key's end
/// shifted down past the bytes before 4i (the bytes past the end then read as zero; a word
/// wholly past the end is a shift of 32 or more, which reads as zero too).
#[inline(always)]
fn padded_word(key: &[u8], i: usize) -> u32 {
    let at = (4 * i).min(key.len() - 4);
    word(key, at).checked_shr(8 * (4 * i - at) as u32).unwrap_or(0)
}

/// `hashlittle2` of a key of 4..=24 bytes, with one branch on its length (at most 12 bytes:
/// add, finish; else add, mix, add, finish) instead of the general loop's three (a block to
/// mix or not, then the tail's size, twice). Keys whose lengths vary mispredict those: on
/// keys of 8–20 bytes they cost 3.3 of the 7.9 ns a hash took, and on ids of 7 or 8 digits
/// the tail's size alone mispredicts half the time. The words come from [`padded_word`].
#[inline(always)]
fn hashlittle2_short(key: &[u8], init: u32, pb: u32) -> (u32, u32) {
    debug_assert!((4..=24).contains(&key.len()));
    let (mut a, mut b, mut c) = (init, init, init.wrapping_add(pb));
    if key.len() <= 12 {
        a = a.wrapping_add(padded_word(key, 0));
        b = b.wrapping_add(padded_word(key, 1));
        c = c.wrapping_add(padded_word(key, 2));
    } else {
        a = a.wrapping_add(word(key, 0));
        b = b.wrapping_add(word(key, 4));
        c = c.wrapping_add(word(key, 8));
        mix(&mut a, &mut b, &mut c);
        a = a.wrapping_add(padded_word(key, 3));
        b = b.wrapping_add(padded_word(key, 4));
        c = c.wrapping_add(padded_word(key, 5));
    }
    finish(&mut a, &mut b, &mut c);
    (c, b)
}

/// lookup3 `hashlittle(key, len, initval)` as Hadoop's `JenkinsHash.hash(bytes, len, seed)`.
pub fn hash(key: &[u8], seed: u32) -> u32 {
    hashlittle2(key, seed, 0).0
}

/// lookup3 `hashlittle2(key, len, &pc, &pb)`: two 32-bit hashes (c, b) from one pass, with `pc`
/// and `pb` as the two seeds. `hashlittle2(k, s, 0).0 == hashlittle(k, s)`.
#[inline(always)]
pub fn hashlittle2(key: &[u8], pc: u32, pb: u32) -> (u32, u32) {
    let init = 0xdead_beef_u32.wrapping_add(key.len() as u32).wrapping_add(pc);
    if (4..=24).contains(&key.len()) {
        return hashlittle2_short(key, init, pb);
    }
    let (mut a, mut b, mut c) = (init, init, init.wrapping_add(pb));
    let mut rest = key;
    while rest.len() > 12 {
        a = a.wrapping_add(word(rest, 0));
        b = b.wrapping_add(word(rest, 4));
        c = c.wrapping_add(word(rest, 8));
        mix(&mut a, &mut b, &mut c);
        rest = &rest[12..];
    }
    if rest.is_empty() {
        return (c, b);
    }
    // The last 1..=12 bytes, zero-padded: a block of exactly 12 goes here, not through mix.
    let (x, y, z) = tail_words(rest);
    a = a.wrapping_add(x);
    b = b.wrapping_add(y);
    c = c.wrapping_add(z);
    finish(&mut a, &mut b, &mut c);
    (c, b)
}

#[cfg(test)]
mod tests {
    /// The padded-buffer reading of the tail, as lookup3.c's byte-wise switch does it.
    fn tail_by_copy(rest: &[u8]) -> (u32, u32, u32) {
        let mut t = [0u8; 12];
        t[..rest.len()].copy_from_slice(rest);
        let w = |i: usize| u32::from_le_bytes(t[i..i + 4].try_into().unwrap());
        (w(0), w(4), w(8))
    }

    #[test]
    fn tail_words_equal_the_zero_padded_copy_for_every_length() {
        let bytes: Vec<u8> = (0..12u8).map(|i| i.wrapping_mul(37).wrapping_add(0x81)).collect();
        for r in 1..=12 {
            assert_eq!(super::tail_words(&bytes[..r]), tail_by_copy(&bytes[..r]), "length {r}");
        }
    }

    /// lookup3 as lookup3.c has it: blocks of 12 mixed while more than 12 bytes remain, the
    /// last 1..=12 zero-padded and finished (none: no finish).
    fn reference(key: &[u8], pc: u32, pb: u32) -> (u32, u32) {
        let init = 0xdead_beef_u32.wrapping_add(key.len() as u32).wrapping_add(pc);
        let (mut a, mut b, mut c) = (init, init, init.wrapping_add(pb));
        let mut rest = key;
        while rest.len() > 12 {
            let (x, y, z) = tail_by_copy(&rest[..12]);
            a = a.wrapping_add(x);
            b = b.wrapping_add(y);
            c = c.wrapping_add(z);
            super::mix(&mut a, &mut b, &mut c);
            rest = &rest[12..];
        }
        if rest.is_empty() {
            return (c, b);
        }
        let (x, y, z) = tail_by_copy(rest);
        a = a.wrapping_add(x);
        b = b.wrapping_add(y);
        c = c.wrapping_add(z);
        super::finish(&mut a, &mut b, &mut c);
        (c, b)
    }

    /// Every length 0..=40 (the short path's 4..=24 and both sides of it), at every offset in
    /// a larger buffer (the short path's loads must stay inside the key), with four pairs of seeds.
    #[test]
    fn hashlittle2_equals_the_reference_for_every_length_and_offset() {
        let bytes = crate::xorshift::XorShift::new(0x2545_F491_4F6C_DD1D).bytes(200);
        for len in 0..=40 {
            for offset in 0..16 {
                let key = &bytes[offset..offset + len];
                for (pc, pb) in [(0, 0), (7, 0), (0, 0xdeadbeef), (0x9e3779b9, 3)] {
                    assert_eq!(super::hashlittle2(key, pc, pb), reference(key, pc, pb), "length {len} offset {offset} seeds {pc} {pb}");
                }
            }
        }
    }

    #[test]
    fn published_lookup3_vectors() {
        let s = b"Four score and seven years ago";
        assert_eq!(super::hash(s, 0), 0x1777_0551);
        assert_eq!(super::hash(s, 1), 0xcd62_8161);
        assert_eq!(super::hash(b"", 0), 0xdead_beef);
    }

    /// lookup3.c's driver5 prints these for hashlittle2.
    #[test]
    fn published_hashlittle2_vectors() {
        use super::hashlittle2;
        assert_eq!(hashlittle2(b"", 0, 0), (0xdeadbeef, 0xdeadbeef));
        assert_eq!(hashlittle2(b"", 0, 0xdeadbeef), (0xbd5b7dde, 0xdeadbeef));
        assert_eq!(hashlittle2(b"", 0xdeadbeef, 0xdeadbeef), (0x9c093ccd, 0xbd5b7dde));
        let s = b"Four score and seven years ago";
        assert_eq!(hashlittle2(s, 0, 0), (0x17770551, 0xce7226e6));
        assert_eq!(hashlittle2(s, 0, 1), (0xe3607cae, 0xbd371de4));
        assert_eq!(hashlittle2(s, 1, 0), (0xcd628161, 0x6cbea4b3));
    }
}
