//! Hadoop's `JenkinsHash`: Bob Jenkins' lookup3 `hashlittle()`, byte at a time, little-endian.
//! Checked against every row of ../shared/interop's vectors (tests/suite/interop.rs).

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

fn word(bytes: &[u8]) -> u32 {
    let mut w = [0u8; 4];
    w[..bytes.len()].copy_from_slice(bytes);
    u32::from_le_bytes(w)
}

/// lookup3 `hashlittle(key, len, initval)` as Hadoop's `JenkinsHash.hash(bytes, len, seed)`.
pub fn hash(key: &[u8], seed: u32) -> u32 {
    let init = 0xdead_beef_u32.wrapping_add(key.len() as u32).wrapping_add(seed);
    let (mut a, mut b, mut c) = (init, init, init);
    let mut rest = key;
    while rest.len() > 12 {
        a = a.wrapping_add(word(&rest[0..4]));
        b = b.wrapping_add(word(&rest[4..8]));
        c = c.wrapping_add(word(&rest[8..12]));
        mix(&mut a, &mut b, &mut c);
        rest = &rest[12..];
    }
    if rest.is_empty() {
        return c;
    }
    // The last 1..=12 bytes, zero-padded: a block of exactly 12 goes here, not through mix.
    let mut tail = [0u8; 12];
    tail[..rest.len()].copy_from_slice(rest);
    a = a.wrapping_add(word(&tail[0..4]));
    b = b.wrapping_add(word(&tail[4..8]));
    c = c.wrapping_add(word(&tail[8..12]));
    finish(&mut a, &mut b, &mut c);
    c
}

#[cfg(test)]
mod tests {
    #[test]
    fn published_lookup3_vectors() {
        let s = b"Four score and seven years ago";
        assert_eq!(super::hash(s, 0), 0x1777_0551);
        assert_eq!(super::hash(s, 1), 0xcd62_8161);
        assert_eq!(super::hash(b"", 0), 0xdead_beef);
    }
}
