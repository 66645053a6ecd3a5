//! Which keys are numbers or short, and the words they are stored as: the key set keeps each
//! kind in the table that holds it most compactly.

use super::*;

/// Whether a key is a number (see `number`).
#[inline(always)]
pub fn is_number(key: &[u8]) -> bool {
    number(key).is_some()
}

/// A key that is a decimal number of 1–9 digits written without a leading zero (or the single
/// digit 0), as its value plus one: a nonzero 32-bit word, and no two such keys share one. Ids
/// are most often numbers, and a table of 4-byte slots holds them in half the memory of 8-byte
/// words: for the benchmark's 1M ids, 6 MB where 12 MB took 10–16 ms just to touch on this
/// virtual machine, in each process of a 2-process job.
///
/// Read eight digits at a time, as one word (see `eight_digits`), not digit by digit: a set of
/// 1M dense ids built in 4.55 ms a partition against 4.9, and a whole exact join took 7.5% fewer
/// instructions.
#[inline(always)]
pub(super) fn number(key: &[u8]) -> Option<u32> {
    let len = key.len();
    if !(1..=9).contains(&len) || key[0] == b'0' && len > 1 {
        return None;
    }
    let head = &key[..len.min(8)];
    // The first digits as eight, with '0's before them: the word's low bytes come first.
    let fill = 0x3030_3030_3030_3030u64.checked_shr(8 * head.len() as u32).unwrap_or(0);
    let value = eight_digits(inline_word(head) << (8 * (8 - head.len())) | fill)?;
    let value = match key.get(8) {
        Some(&last) => value * 10 + digit(last)?,
        None => value,
    };
    Some(value + 1)
}

/// The value of eight decimal digits, the first in the word's low byte (little-endian text), or
/// None if a byte is not a digit: the digits paired, then the pairs, then the fours, by
/// multiplies (as simdjson parses eight digits).
#[inline(always)]
fn eight_digits(text: u64) -> Option<u32> {
    const HIGH: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    const ZEROS: u64 = 0x3030_3030_3030_3030;
    // Every byte 0x30–0x39: its high half 3, and still 3 once 6 is added.
    if text & HIGH != ZEROS || text.wrapping_add(0x0606_0606_0606_0606) & HIGH != ZEROS {
        return None;
    }
    let digits = text - ZEROS;
    let pairs = digits.wrapping_mul(10).wrapping_add(digits >> 8);
    const MASK: u64 = 0x0000_00FF_0000_00FF;
    let fours = (pairs & MASK).wrapping_mul(100 + (1_000_000 << 32)).wrapping_add(((pairs >> 16) & MASK).wrapping_mul(1 + (10_000 << 32)));
    Some((fours >> 32) as u32)
}

/// The value of one decimal digit.
#[inline(always)]
pub(super) fn digit(byte: u8) -> Option<u32> {
    let d = byte.wrapping_sub(b'0');
    (d <= 9).then_some(d as u32)
}

/// Whether a key is short (see `short_word`): from its length and last byte alone, but for
/// the keys of 10–16 bytes, which may be numbers.
#[inline(always)]
pub fn is_short(key: &[u8]) -> bool {
    matches!(key.len(), 1..INLINE) || key.len() == INLINE && key[INLINE - 1] >= 8 || long_number(key).is_some()
}

/// A key as one nonzero word, if it fits with its length: keys of 1–7 bytes, zero-padded, with
/// the length in the top byte (1–7); keys of 8 bytes whose last byte, the top byte, is 8 or more
/// (so that no 8-byte key's word equals a shorter key's); and numbers of 10–16 digits (see
/// [`long_number`]), whose top byte is 0. Identifiers (numbers, codes) nearly all are short; the
/// rest (the empty key, other longer keys, and 8-byte keys ending in a control byte below 8) go
/// to the table of others.
#[inline(always)]
pub(super) fn short_word(key: &[u8]) -> Option<u64> {
    let len = key.len();
    if len > INLINE {
        return long_number(key);
    }
    if len == 0 {
        return None;
    }
    let word = inline_word(key);
    if len < INLINE {
        Some(word | (len as u64) << 56)
    } else {
        (word >> 56 >= 8).then_some(word)
    }
}

/// A key that is a decimal number of 10–16 digits without a leading zero, as its value: below
/// 10^16 < 2^56, so its word's top byte is 0, which no other short key's word has (there it is
/// the key's length, 1–7, or its last byte, 8 or more). Ids of that many digits (milliseconds
/// since 1970, long account or phone numbers) then take an 8-byte word, not a 16-byte slot and
/// their bytes in the arena.
#[inline(always)]
pub(super) fn long_number(key: &[u8]) -> Option<u64> {
    decimal(key, 10..=16)
}

/// The value of `key` as a decimal number of `digits` digits without a leading zero (but for
/// the number 0 itself): None for a key of another length, with a leading zero or a byte that
/// is not a digit, or past `u64::MAX` (only 20 digits can be).
#[inline(always)]
pub(super) fn decimal(key: &[u8], digits: std::ops::RangeInclusive<usize>) -> Option<u64> {
    debug_assert!(*digits.start() >= 1, "an empty key has no first digit");
    if !digits.contains(&key.len()) || key[0] == b'0' && key.len() > 1 {
        return None;
    }
    // Up to 19 digits cannot overflow: the checks, which cost the 1–9-digit numbers of the
    // benchmark 11% more instructions in a whole exact join, are made only where 20 may come.
    let may_overflow = *digits.end() >= 20;
    let mut value = 0u64;
    for &b in key {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = match may_overflow {
            true => value.checked_mul(10)?.checked_add(digit as u64)?,
            false => value * 10 + digit as u64,
        };
    }
    Some(value)
}

/// Whether a key is a big number (see `big_number`).
#[inline(always)]
pub fn is_big_number(key: &[u8]) -> bool {
    big_number(key).is_some()
}

/// A key that is a decimal number of 17–20 digits without a leading zero and below 2^64, as its
/// value: nonzero, and no two such keys share one. Ids of 18–19 digits (64-bit "snowflake" ids,
/// which most large systems hand out) then take an 8-byte word of a table of their own (their
/// values use all 64 bits, so they cannot share the short keys' table) instead of a 16-byte slot
/// and their bytes in the arena.
#[inline(always)]
pub(super) fn big_number(key: &[u8]) -> Option<u64> {
    decimal(key, 17..=20)
}

/// A key of at most 8 bytes as a slot holds it: its bytes zero-padded to 8, little-endian. Built
/// from whole-word loads by lookup3's tail reader rather than a copy of variable length, which is
/// a call to memcpy.
#[inline(always)]
pub(super) fn inline_word(key: &[u8]) -> u64 {
    debug_assert!(key.len() <= INLINE);
    if key.is_empty() {
        return 0;
    }
    let (low, high, _) = crate::hashing::lookup3::tail_words(key);
    low as u64 | (high as u64) << 32
}

