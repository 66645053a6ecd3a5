//! Filter sizing and the statistics derived from it: the formulas of Bloom's article and its
//! standard analysis, in one place so that every command sizes and reports the same way.

use crate::error::{Error, Result};
use std::f64::consts::LN_2;
use std::fmt;

/// The smallest and largest number of hash functions a filter may use.
pub const MIN_HASHES: u32 = 1;
pub const MAX_HASHES: u32 = 32;

/// The largest bit count a filter may have: positions are u64 and the word count must fit a usize.
pub const MAX_BITS: u64 = 1 << 60;

/// A false-positive rate as people write it: `0.01` as it is, but `1e-300` in exponent form,
/// where the decimal would be three hundred digits.
#[derive(Clone, Copy, Debug)]
pub struct Rate(pub f64);

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.0.abs();
        if p != 0.0 && !(1e-4..1e6).contains(&p) {
            write!(f, "{:e}", self.0)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// Bits m and hash count k for `n` expected items at false-positive rate `p`:
/// m = ⌈−n·ln p / (ln 2)²⌉ and k = round((m/n)·ln 2), clamped to [1, 32].
pub fn optimal_params(n: u64, p: f64) -> Result<(u64, u32)> {
    validate_items(n)?;
    validate_fpp(p)?;
    let m = (-(n as f64) * p.ln() / (LN_2 * LN_2)).ceil();
    if !(m.is_finite() && m <= MAX_BITS as f64) {
        return Err(Error::invalid(
            "expected items",
            format!("{n} items at rate {} need {m} bits, more than the maximum {MAX_BITS}", Rate(p)),
        ));
    }
    let m = (m as u64).max(1);
    Ok((m, optimal_hashes(m, n)))
}

/// Spark's `BloomFilter.create(n, p)` sizing: requested bits `(long)(−n·ln p/(ln 2)²)` (truncated,
/// not rounded up) and k = max(1, Math.round(requested/n · ln 2)). The filter then has
/// ⌈requested/64⌉ words, and positions are taken modulo that many bits.
pub fn spark_params(n: u64, p: f64) -> Result<(u64, u32)> {
    validate_items(n)?;
    validate_fpp(p)?;
    let requested = (-(n as f64) * p.ln() / (LN_2 * LN_2)) as i64;
    if requested <= 0 {
        return Err(Error::invalid("expected items", format!("{n} items at rate {} give Spark no bits", Rate(p))));
    }
    // Java's Math.round(x) is floor(x + 0.5).
    let k = (requested as f64 / n as f64 * LN_2 + 0.5).floor().max(1.0);
    Ok((requested as u64, k.min(u32::MAX as f64) as u32))
}

/// The false-positive rate of a blocked filter of `m` bits (512-bit blocks), k hashes and n keys:
/// the keys per block are Poisson with mean n/(m/512), and a block holding j keys answers an absent
/// key falsely with probability (1 − (1 − 1/512)^(kj))^k (Putze, Sanders & Singler 2007).
pub fn blocked_fpp(m: u64, k: u32, n: u64) -> f64 {
    let blocks = (m / 512).max(1) as f64;
    let lambda = n as f64 / blocks;
    let miss: f64 = 1.0 - 1.0 / 512.0;
    let last = (lambda + 12.0 * lambda.sqrt() + 30.0) as u64;
    let mut log_poisson = -lambda; // ln P(j = 0)
    let mut total = 0.0;
    for j in 0..=last {
        if j > 0 {
            log_poisson += lambda.ln() - (j as f64).ln();
        }
        let inner = (1.0 - miss.powf((k as u64 * j) as f64)).powi(k as i32);
        total += log_poisson.exp() * inner;
    }
    total
}

/// Bits (a whole number of 512-bit blocks) and k for a blocked filter of `n` keys at rate `p`:
/// the smallest size, growing from Bloom's m by 1% steps, at which some k in [1, 32] meets p
/// despite the blocking penalty.
pub fn blocked_params(n: u64, p: f64) -> Result<(u64, u32)> {
    let (standard, _) = optimal_params(n, p)?;
    let mut bits_per_key = standard as f64 / n as f64;
    for _ in 0..400 {
        let m = ((n as f64 * bits_per_key / 512.0).ceil() as u64).max(1) * 512;
        if m > MAX_BITS {
            break;
        }
        let best = (MIN_HASHES..=MAX_HASHES)
            .map(|k| (k, blocked_fpp(m, k, n)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("a range of k");
        if best.1 <= p {
            return Ok((m, best.0));
        }
        bits_per_key *= 1.01;
    }
    Err(Error::invalid("false-positive rate", format!("a blocked filter cannot reach {} for {n} items; use --layout standard", Rate(p))))
}

/// k = round((m/n)·ln 2), clamped to [1, 32].
pub fn optimal_hashes(m: u64, n: u64) -> u32 {
    let k = (m as f64 / n.max(1) as f64 * LN_2).round();
    (k as u32).clamp(MIN_HASHES, MAX_HASHES)
}

/// Refuses an expected item count of zero.
pub fn validate_items(n: u64) -> Result<()> {
    if n == 0 {
        return Err(Error::invalid("expected items", "must be at least 1"));
    }
    Ok(())
}

/// Refuses a false-positive rate outside the open interval (0, 1), NaN included.
pub fn validate_fpp(p: f64) -> Result<()> {
    if !(p > 0.0 && p < 1.0) {
        return Err(Error::invalid(
            "false-positive rate",
            format!("{} is not strictly between 0 and 1", Rate(p)),
        ));
    }
    Ok(())
}

/// Refuses an explicit (m, k) outside the supported ranges.
pub fn validate_bits_hashes(m: u64, k: u32) -> Result<()> {
    if m == 0 || m > MAX_BITS {
        return Err(Error::invalid(
            "bits",
            format!("{m} is not between 1 and {MAX_BITS}"),
        ));
    }
    if !(MIN_HASHES..=MAX_HASHES).contains(&k) {
        return Err(Error::invalid(
            "hashes",
            format!("{k} is not between {MIN_HASHES} and {MAX_HASHES}"),
        ));
    }
    Ok(())
}

/// The expected false-positive rate after inserting `n` distinct items: (1 − e^(−kn/m))^k.
pub fn expected_fpp(m: u64, k: u32, n: u64) -> f64 {
    (1.0 - (-(k as f64) * n as f64 / m as f64).exp()).powi(k as i32)
}

/// The false-positive rate implied by the bits actually set: a query of an absent key hits k
/// random positions, each set with probability X/m.
pub fn fpp_from_fill(fill_ratio: f64, k: u32) -> f64 {
    fill_ratio.powi(k as i32)
}

/// Estimated distinct items from X set bits (Swamidass & Baldi): n* = −(m/k)·ln(1 − X/m).
/// Infinite when every bit is set.
pub fn estimated_items(m: u64, k: u32, set_bits: u64) -> f64 {
    let x = set_bits as f64 / m as f64;
    // -ln(1 - x) as -ln_1p(-x): +0 for an empty filter, which `info` printed as "-0".
    (m as f64 / k as f64) * -(-x).ln_1p()
}

/// A count of bytes as Hadoop's and Spark's settings take one (`dfs.blocksize=128m`,
/// `spark.sql.files.maxPartitionBytes=64MB`): a whole number, bare or with the suffix k, m, g
/// or t, in any case and optionally followed by `b` or `ib`, each 1024 times the one before
/// (`128m`, `64MiB` and `64MB` are all 2^20 times the number, as in those settings). The error
/// says what was expected.
pub fn parse_bytes(text: &str) -> std::result::Result<u64, String> {
    let expected = || format!("expected a number of bytes, bare or with a suffix k, m, g or t (1024-based: 67108864, 64m, 64MiB); got {text:?}");
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    let number: u64 = number.parse().map_err(|_| expected())?;
    let power = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 1,
        "m" | "mb" | "mib" => 2,
        "g" | "gb" | "gib" => 3,
        "t" | "tb" | "tib" => 4,
        _ => return Err(expected()),
    };
    number.checked_mul(1u64 << (10 * power)).ok_or_else(|| format!("{text:?} is more bytes than this machine counts (2^64)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Byte counts read as Hadoop and Spark read them, binary suffixes in any case; anything
    /// else is refused with what was expected, and a count past 2^64 as too large.
    #[test]
    fn byte_counts_take_binary_suffixes() {
        for (text, bytes) in [("0", 0), ("67108864", 1 << 26), ("64m", 1 << 26), ("64M", 1 << 26), ("64MB", 1 << 26), ("64MiB", 1 << 26), ("1k", 1024), ("3KiB", 3072), ("1g", 1 << 30), ("2T", 2 << 40), ("5b", 5), ("16777215t", 16_777_215 << 40)] {
            assert_eq!(parse_bytes(text), Ok(bytes), "{text}");
        }
        for text in ["", "m", "-1", "1.5g", "64 m", " 64", "64x", "64mm", "64mi", "0x40"] {
            let e = parse_bytes(text).unwrap_err();
            assert!(e.contains("expected a number of bytes") && e.contains(&format!("{text:?}")), "{text}: {e}");
        }
        for text in ["16777216t", "18446744073709551616"] {
            assert!(parse_bytes(text).is_err(), "{text}");
        }
        assert!(parse_bytes("16777216t").unwrap_err().contains("more bytes than"));
    }

    /// An empty filter holds no items, not -0 of them; a full one "infinitely many".
    #[test]
    fn estimated_items_of_an_empty_and_a_full_filter() {
        assert!(estimated_items(1000, 3, 0).is_sign_positive() && estimated_items(1000, 3, 0) == 0.0);
        assert_eq!(format!("{:.0}", estimated_items(1000, 3, 0)), "0");
        assert_eq!(estimated_items(1000, 3, 1000), f64::INFINITY);
    }

    #[test]
    fn optimal_params_match_the_textbook_figures() {
        // 1M items at 1%: 9,585,059 bits and 7 hashes (9.59 bits per key).
        assert_eq!(optimal_params(1_000_000, 0.01).unwrap(), (9_585_059, 7));
        assert_eq!(optimal_params(1000, 0.03).unwrap(), (7_299, 5));
        // Spark truncates: BloomFilter.create(1000, 0.03) asks for 7298 bits (spark_params.tsv).
        assert_eq!(spark_params(1000, 0.03).unwrap(), (7_298, 5));
    }

    #[test]
    fn rejects_bad_rates_and_counts() {
        for p in [0.0, 1.0, -1.0, f64::NAN, 2.0] {
            assert!(optimal_params(10, p).is_err(), "{p}");
        }
        assert!(optimal_params(0, 0.01).is_err());
        assert!(validate_bits_hashes(0, 3).is_err());
        assert!(validate_bits_hashes(64, 0).is_err());
        assert!(validate_bits_hashes(64, 33).is_err());
        assert!(validate_bits_hashes(64, 32).is_ok());
    }

    #[test]
    fn blocked_sizing_pays_a_penalty_and_meets_the_target() {
        let (m, k) = blocked_params(1_000_000, 0.01).unwrap();
        assert_eq!(m % 512, 0);
        assert!(blocked_fpp(m, k, 1_000_000) <= 0.01);
        // More bits per key than the standard layout's 9.59, but not many more.
        let per_key = m as f64 / 1e6;
        assert!((9.6..12.5).contains(&per_key), "{per_key} bits per key, k = {k}");
        // With huge blocks the model tends to the standard formula.
        let standard = expected_fpp(9_585_059, 7, 1_000_000);
        assert!(blocked_fpp(9_585_152, 7, 1_000_000) > standard);
    }

    #[test]
    fn item_estimate_inverts_the_fill_model() {
        let (m, k, n) = (1_000_000u64, 7u32, 50_000u64);
        let expected_set = m as f64 * (1.0 - (-(k as f64) * n as f64 / m as f64).exp());
        let est = estimated_items(m, k, expected_set.round() as u64);
        assert!((est - n as f64).abs() / (n as f64) < 0.001, "{est}");
    }
}
