//! Benchmark data: `build.csv` and `probe.csv` of the semi-join workload in ../shared/PEERS.md,
//! byte for byte, generated in parallel. Every row is a pure function of its index (splitmix64 of
//! the row number), so any worker can produce any range and the files are the same at any scale
//! and thread count.

use crate::atomic::AtomicFile;
use crate::error::{Error, Result};
use std::io::Write;
use std::path::Path;

/// The customer-id range of the probe side: 20M, whatever the row counts.
pub const CUSTOMER_ID_SPACE: u64 = 20_000_000;
const SEGMENTS: [&str; 4] = ["retail", "smb", "enterprise", "public"];
/// Seconds in the year of timestamps (365 days).
const TS_SPAN: u64 = 31_536_000;
/// 2024-01-01T00:00:00 as days since 1970-01-01.
const EPOCH_2024_DAYS: i64 = 19_723;

/// The splitmix64 output for state `(x+1)·0x9E3779B97F4A7C15`.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

pub const BUILD_HEADER: &[u8] = b"customer_id,name,segment\n";
pub const PROBE_HEADER: &[u8] = b"event_id,customer_id,ts,amount,payload\n";

/// Appends build row `i`: `i*20+7,cust_i,segment`.
pub fn build_row(i: u64, out: &mut Vec<u8>) {
    let _ = writeln!(out, "{},cust_{},{}", i * 20 + 7, i, SEGMENTS[(i % 4) as usize]);
}

/// Appends probe row `i`.
pub fn probe_row(i: u64, out: &mut Vec<u8>) {
    let h1 = splitmix64(i);
    let h2 = splitmix64(i + (1 << 40));
    let (y, mo, d, hh, mi, ss) = timestamp((h1 >> 32) % TS_SPAN);
    let a = (h2 >> 40) % 1_000_000;
    let h1_hex = format!("{h1:016x}");
    let _ = writeln!(
        out,
        "{i},{},{y:04}-{mo:02}-{d:02}T{hh:02}:{mi:02}:{ss:02},{}.{:02},pl-{h2:016x}-{}",
        h1 % CUSTOMER_ID_SPACE,
        a / 100,
        a % 100,
        &h1_hex[..10]
    );
}

/// 2024-01-01T00:00:00 plus `secs`, as (year, month, day, hour, minute, second).
fn timestamp(secs: u64) -> (i64, u32, u32, u64, u64, u64) {
    let days = EPOCH_2024_DAYS + (secs / 86_400) as i64;
    let (y, m, d) = civil_from_days(days);
    let rem = secs % 86_400;
    (y, m, d, rem / 3600, rem / 60 % 60, rem % 60)
}

/// Howard Hinnant's days-to-civil conversion (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Writes `header` then rows `0..rows` made by `row` to `path`, the rows cut into one contiguous
/// range per thread, each formatted in parallel into a part file, then concatenated in order.
pub fn write_table(path: &Path, header: &[u8], rows: u64, threads: usize, row: fn(u64, &mut Vec<u8>)) -> Result<()> {
    let threads = threads.max(1) as u64;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let part = |t: u64| dir.join(format!(".{name}.gen-{t}-{}", std::process::id()));
    let results: Vec<Result<()>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let part_path = part(t);
                std::thread::Builder::new().spawn_scoped(scope, move || -> Result<()> {
                    let (from, to) = (rows * t / threads, rows * (t + 1) / threads);
                    let mut file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&part_path).map_err(|e| Error::io(&part_path, e))?);
                    let mut buf = Vec::with_capacity(1 << 20);
                    for i in from..to {
                        row(i, &mut buf);
                        if buf.len() >= 1 << 20 {
                            file.write_all(&buf).map_err(|e| Error::io(&part_path, e))?;
                            buf.clear();
                        }
                    }
                    file.write_all(&buf).map_err(|e| Error::io(&part_path, e))?;
                    file.flush().map_err(|e| Error::io(&part_path, e))
                })
            })
            .collect();
        // A thread the system would not start is an error, as a failed one is.
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h.join().unwrap_or_else(|_| Err(Error::Job("a generator thread failed".into()))),
                Err(e) => Err(Error::Job(format!("cannot start a generator thread: {e}"))),
            })
            .collect()
    });
    let outcome = (|| {
        for r in results {
            r?;
        }
        let mut out = AtomicFile::create(path)?;
        out.write_all(header).map_err(|e| Error::io(path, e))?;
        for t in 0..threads {
            let mut input = std::fs::File::open(part(t)).map_err(|e| Error::io(part(t), e))?;
            std::io::copy(&mut input, &mut out).map_err(|e| Error::io(path, e))?;
        }
        out.commit()
    })();
    for t in 0..threads {
        let _ = std::fs::remove_file(part(t));
    }
    outcome
}

/// Writes `dir/build.csv` and `dir/probe.csv` of the semi-join benchmark.
pub fn semijoin_bench(dir: &Path, build_rows: u64, probe_rows: u64, threads: usize) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    write_table(&dir.join("build.csv"), BUILD_HEADER, build_rows, threads, build_row)?;
    write_table(&dir.join("probe.csv"), PROBE_HEADER, probe_rows, threads, probe_row)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(f: fn(u64, &mut Vec<u8>), i: u64) -> String {
        let mut b = Vec::new();
        f(i, &mut b);
        String::from_utf8(b).unwrap()
    }

    /// Rows computed by an independent Python transcription of PEERS.md (tests/data/peers_rows.py).
    #[test]
    fn rows_match_the_reference() {
        assert_eq!(row(build_row, 0), "7,cust_0,retail\n");
        assert_eq!(row(build_row, 5), "107,cust_5,smb\n");
        for (i, expected) in PROBE_REFERENCE {
            assert_eq!(row(probe_row, *i), *expected, "row {i}");
        }
    }

    /// PEERS.md: the first 2M probe rows have 99,078 matches among the first 1M build ids.
    #[test]
    fn the_small_variant_has_the_published_match_count() {
        let matches = (0..2_000_000u64)
            .filter(|&i| {
                let c = splitmix64(i) % CUSTOMER_ID_SPACE;
                c % 20 == 7 && (c - 7) / 20 < 1_000_000
            })
            .count();
        assert_eq!(matches, 99_078);
    }

    #[test]
    fn calendar_conversion() {
        assert_eq!(civil_from_days(EPOCH_2024_DAYS), (2024, 1, 1));
        assert_eq!(civil_from_days(EPOCH_2024_DAYS + 59), (2024, 2, 29));
        assert_eq!(civil_from_days(EPOCH_2024_DAYS + 364), (2024, 12, 30));
    }

    const PROBE_REFERENCE: &[(u64, &str)] = &[
        (0, "0,18607535,2024-04-19T14:50:33,6525.02,pl-1937167e168d9372-e220a8397b\n"),
        (1, "1,14355700,2024-10-08T08:57:14,7616.28,pl-0b9f1c6e4cad87c8-6e789e6aa1\n"),
        (2, "2,11545679,2024-08-07T00:43:04,1659.76,pl-3f91586bef96e352-06c45d1880\n"),
        (3, "3,542444,2024-03-23T19:19:04,9747.75,pl-b6b87796a27be215-f88bb8a872\n"),
        (999, "999,12320062,2024-02-09T00:45:38,7566.77,pl-859dc5491604e97f-14e0abb2bf\n"),
        (123456, "123456,17450913,2024-01-03T04:21:44,7873.48,pl-e1a314d94b6ad73f-ffa63c5886\n"),
        (1999999, "1999999,19692644,2024-01-22T00:55:13,9161.47,pl-4b03b3c5f14decd0-7e0c36f1c2\n"),
        (19999999, "19999999,9441083,2024-06-23T17:36:58,8759.61,pl-876fb9935142eeec-3769323a6e\n"),
    ];
}
