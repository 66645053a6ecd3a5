//! Spark's `Murmur3_x86_32`: standard for whole 4-byte words, but `hashUnsafeBytes` runs each
//! trailing byte (sign-extended) through a full mixK1 + mixH1 round of its own.

const C1: u32 = 0xcc9e_2d51;
const C2: u32 = 0x1b87_3593;

#[inline(always)]
fn mix_k1(mut k1: u32) -> u32 {
    k1 = k1.wrapping_mul(C1);
    k1 = k1.rotate_left(15);
    k1.wrapping_mul(C2)
}

#[inline(always)]
fn mix_h1(mut h1: u32, k1: u32) -> u32 {
    h1 ^= k1;
    h1 = h1.rotate_left(13);
    h1.wrapping_mul(5).wrapping_add(0xe654_6b64)
}

#[inline(always)]
fn fmix(mut h1: u32, len: u32) -> u32 {
    h1 ^= len;
    h1 ^= h1 >> 16;
    h1 = h1.wrapping_mul(0x85eb_ca6b);
    h1 ^= h1 >> 13;
    h1 = h1.wrapping_mul(0xc2b2_ae35);
    h1 ^ (h1 >> 16)
}

/// `Murmur3_x86_32.hashUnsafeBytes(bytes, seed)`, as `putBinary`/`putString` use it.
pub fn hash_bytes(key: &[u8], seed: u32) -> u32 {
    let mut h1 = seed;
    let mut words = key.chunks_exact(4);
    for w in &mut words {
        h1 = mix_h1(h1, mix_k1(u32::from_le_bytes(w.try_into().unwrap())));
    }
    for &b in words.remainder() {
        h1 = mix_h1(h1, mix_k1(b as i8 as i32 as u32));
    }
    fmix(h1, key.len() as u32)
}

/// `Murmur3_x86_32.hashLong(value, seed)`, as `putLong` uses it. The same as `hash_bytes` of
/// the value's 8 little-endian bytes.
pub fn hash_long(value: i64, seed: u32) -> u32 {
    let v = value as u64;
    let h1 = mix_h1(seed, mix_k1(v as u32));
    let h1 = mix_h1(h1, mix_k1((v >> 32) as u32));
    fmix(h1, 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_hash_equals_the_bytes_hash_of_its_little_endian_bytes() {
        for v in [0i64, 1, -1, i64::MIN, i64::MAX, 0x0123_4567_89ab_cdef] {
            for seed in [0u32, 1, 0xdead_beef] {
                assert_eq!(hash_long(v, seed), hash_bytes(&v.to_le_bytes(), seed));
            }
        }
    }
}
