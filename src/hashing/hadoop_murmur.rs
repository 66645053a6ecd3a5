//! Hadoop's `MurmurHash`: MurmurHash2 (32-bit) with Hadoop's two tail quirks: the tail bytes are
//! xored in reverse order compared with the reference, and they are sign-extended Java bytes.

const M: u32 = 0x5bd1_e995;
const R: u32 = 24;

/// Hadoop's `MurmurHash.hash(bytes, len, seed)`.
pub fn hash(key: &[u8], seed: u32) -> u32 {
    let len = key.len();
    let mut h = seed ^ len as u32;
    let mut blocks = key.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes(block.try_into().unwrap());
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    // Java bytes are signed: 0xff is -1, i.e. 0xffffffff once widened.
    let t = |i: usize| blocks.remainder()[i] as i8 as i32 as u32;
    match blocks.remainder().len() {
        3 => {
            h ^= t(0) << 16;
            h ^= t(1) << 8;
            h ^= t(2);
            h = h.wrapping_mul(M);
        }
        2 => {
            h ^= t(0) << 8;
            h ^= t(1);
            h = h.wrapping_mul(M);
        }
        1 => {
            h ^= t(0);
            h = h.wrapping_mul(M);
        }
        _ => {}
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_documented_example() {
        assert_eq!(super::hash(b"abc", 0), 0x69d3_cf87);
    }
}
