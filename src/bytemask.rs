//! Where a byte occurs in a block of text, as a bitmask: bit i is set where `block[i]` is the
//! byte. Lines and fields of delimited text are short, so the scan finds newlines and delimiters
//! a block at a time with these (SSE2, part of every x86_64) and walks the set bits, instead of
//! calling a search function per line or testing byte by byte.

/// The mask of 16 bytes.
#[inline(always)]
pub fn mask16(block: &[u8; 16], byte: u8) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of x86_64; the unaligned load reads exactly the 16 bytes of `block`.
        unsafe {
            let found = _mm_cmpeq_epi8(_mm_loadu_si128(block.as_ptr() as *const __m128i), _mm_set1_epi8(byte as i8));
            _mm_movemask_epi8(found) as u16 as u64
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        block.iter().enumerate().fold(0u64, |m, (i, &b)| m | (((b == byte) as u64) << i))
    }
}

/// The mask of 32 bytes.
#[inline(always)]
pub fn mask32(block: &[u8; 32], byte: u8) -> u32 {
    let (lo, hi) = block.split_at(16);
    let half = |h: &[u8]| mask16(h.try_into().expect("16 bytes"), byte);
    (half(lo) | half(hi) << 16) as u32
}

/// The mask of 64 bytes.
#[inline(always)]
pub fn mask64(block: &[u8; 64], byte: u8) -> u64 {
    let (lo, hi) = block.split_at(32);
    let half = |h: &[u8]| mask32(h.try_into().expect("32 bytes"), byte) as u64;
    half(lo) | half(hi) << 32
}

/// The positions of one byte in a slice, in order, found 64 bytes at a time as a bitmask.
/// Delimited lines are short (tens of bytes): `memchr_iter` paid its setup once per line, more
/// than the search itself; a mask costs four compares per 64 bytes and one `tzcnt` per match.
pub struct ByteIter<'a> {
    bytes: &'a [u8],
    needle: u8,
    /// Start of the block `mask` describes.
    block: usize,
    /// The needle's unvisited positions in the block, as bits.
    mask: u64,
}

impl<'a> ByteIter<'a> {
    pub fn new(bytes: &'a [u8], needle: u8) -> Self {
        ByteIter { bytes, needle, block: 0, mask: byte_mask64(bytes, needle) }
    }
}

impl Iterator for ByteIter<'_> {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        while self.mask == 0 {
            self.block += 64;
            if self.block >= self.bytes.len() {
                return None;
            }
            self.mask = byte_mask64(&self.bytes[self.block..], self.needle);
        }
        let at = self.block + self.mask.trailing_zeros() as usize;
        self.mask &= self.mask - 1;
        Some(at)
    }
}

/// Bit i set where `bytes[i] == needle`, for i < min(64, bytes.len()).
#[inline(always)]
fn byte_mask64(bytes: &[u8], needle: u8) -> u64 {
    match bytes.first_chunk::<64>() {
        Some(block) => mask64(block, needle),
        None => short_mask(bytes, needle),
    }
}

/// [`byte_mask64`] of a slice shorter than 64 bytes (the end of a buffer): padded, then masked.
#[cold]
fn short_mask(bytes: &[u8], needle: u8) -> u64 {
    let mut padded = [0u8; 64];
    padded[..bytes.len()].copy_from_slice(bytes);
    mask64(&padded, needle) & ((1u64 << bytes.len()) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_mark_exactly_the_byte() {
        let block: [u8; 64] = std::array::from_fn(|i| if i % 7 == 3 || i == 63 { b',' } else { b'a' + (i % 26) as u8 });
        let want = (0..64).filter(|&i| block[i] == b',').fold(0u64, |m, i| m | 1 << i);
        assert_eq!(mask64(&block, b','), want);
        assert_eq!(mask32(block[..32].try_into().unwrap(), b',') as u64, want & 0xFFFF_FFFF);
        assert_eq!(mask16(block[16..32].try_into().unwrap(), b','), (want >> 16) & 0xFFFF);
        assert_eq!(mask64(&block, b'"'), 0);
    }

    #[test]
    fn byte_iter_finds_every_needle_in_order_at_any_length_and_offset() {
        let mut rng = crate::xorshift::XorShift::new(0x2545_f491_4f6c_dd1d);
        for len in 0..300 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    let r = rng.next();
                    if r.is_multiple_of(5) { b'\n' } else { b'a' + (r % 7) as u8 }
                })
                .collect();
            for start in 0..len.min(70) {
                let slice = &bytes[start..];
                let want: Vec<usize> = slice.iter().enumerate().filter(|(_, &b)| b == b'\n').map(|(i, _)| i).collect();
                assert_eq!(ByteIter::new(slice, b'\n').collect::<Vec<_>>(), want, "len {len} start {start}");
            }
        }
    }
}
