//! Hadoop and Spark compatibility, against the reference vectors the real libraries produced
//! (hadoop-common 3.5.0, spark-sketch 4.3.0; copied from ../shared/interop into tests/data/interop).

use crate::util::*;
use bloomflow::format::{self, FileFormat};
use bloomflow::hashing::{lookup3, hadoop_murmur, spark_murmur3, HadoopHash, Scheme};
use bloomflow::{Error, FilterSpec, Layout};
use std::path::{Path, PathBuf};

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/interop")
}

/// The rows of a TSV file (header dropped), split on tabs; empty fields kept.
fn tsv(name: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(vectors().join(name)).unwrap();
    text.lines().skip(1).map(|l| l.split('\t').map(str::to_string).collect()).collect()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn seed(s: &str) -> u32 {
    s.parse::<i32>().unwrap() as u32
}

fn hash_hex(s: &str) -> u32 {
    u32::from_str_radix(s, 16).unwrap()
}

#[test]
fn hash_functions_match_every_vector_row() {
    let mut checked = 0;
    for (file, f) in [
        ("jenkins.tsv", lookup3::hash as fn(&[u8], u32) -> u32),
        ("murmur.tsv", hadoop_murmur::hash),
        ("spark_murmur3.tsv", spark_murmur3::hash_bytes),
    ] {
        for row in tsv(file) {
            assert_eq!(f(row[0].as_bytes(), seed(&row[1])), hash_hex(&row[3]), "{file}: {row:?}");
            assert_eq!(f(row[0].as_bytes(), seed(&row[1])) as i32, row[2].parse::<i32>().unwrap());
            checked += 1;
        }
    }
    for row in tsv("hash_extra.tsv") {
        let f = match row[0].as_str() {
            "hadoop_jenkins" => lookup3::hash as fn(&[u8], u32) -> u32,
            "hadoop_murmur" => hadoop_murmur::hash,
            "spark_murmur3" => spark_murmur3::hash_bytes,
            other => panic!("unknown algo {other}"),
        };
        assert_eq!(f(&hex(&row[1]), seed(&row[2])), hash_hex(&row[4]), "hash_extra: {row:?}");
        checked += 1;
    }
    for row in tsv("spark_murmur3_long.tsv") {
        let v: i64 = row[0].parse().unwrap();
        assert_eq!(spark_murmur3::hash_long(v, seed(&row[1])), hash_hex(&row[3]), "long {row:?}");
        checked += 1;
    }
    assert_eq!(checked, 420 * 3 + 1092 + tsv("spark_murmur3_long.tsv").len());
}

#[test]
fn hadoop_positions_match() {
    let rows = tsv("hadoop_positions.tsv");
    assert_eq!(rows.len(), 200);
    for row in rows {
        let hash = if row[0] == "JENKINS" { HadoopHash::Jenkins } else { HadoopHash::Murmur };
        let spec = FilterSpec::new(Scheme::Hadoop(hash), 0, 1000, 7).unwrap();
        let got: Vec<String> = spec.positions(row[1].as_bytes()).map(|p| p.to_string()).collect();
        assert_eq!(got.join(","), row[2], "{row:?}");
        // The chained raw hashes too.
        let mut h = 0u32;
        let chained: Vec<String> = (0..7).map(|_| { h = hash.hash(row[1].as_bytes(), h); (h as i32).to_string() }).collect();
        assert_eq!(chained.join(","), row[3]);
    }
}

#[test]
fn spark_positions_match() {
    let rows = tsv("spark_positions.tsv");
    for row in &rows {
        let key: Vec<u8> = match row[0].as_str() {
            "string" => row[1].as_bytes().to_vec(),
            "long" => row[1].parse::<i64>().unwrap().to_le_bytes().to_vec(),
            other => panic!("unknown kind {other}"),
        };
        let h1 = spark_murmur3::hash_bytes(&key, 0);
        assert_eq!(h1 as i32, row[2].parse::<i32>().unwrap(), "{row:?}");
        assert_eq!(spark_murmur3::hash_bytes(&key, h1) as i32, row[3].parse::<i32>().unwrap());
        let positions = |scheme, seed| -> String {
            let spec = FilterSpec::new(scheme, seed, 7360, 5).unwrap();
            spec.positions(&key).map(|p| p.to_string()).collect::<Vec<_>>().join(",")
        };
        assert_eq!(positions(Scheme::SparkV1, 0), row[4], "v1 {row:?}");
        assert_eq!(positions(Scheme::SparkV2, 0), row[5], "v2 {row:?}");
        assert_eq!(positions(Scheme::SparkV2, 12345), row[8], "v2 seed 12345 {row:?}");
    }
    assert!(rows.len() > 200);
}

/// Runs `query` on a reference file for every key of a membership table and compares the column.
fn check_membership(file: &str, table: &str, column: usize, extra: &[&str]) {
    let rows = tsv(table);
    let input: String = rows.iter().map(|r| format!("{}\n", r[0])).collect();
    let path = vectors().join(file);
    let mut args = vec!["query", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    // With the portable kernel too, whose batches hash one key at a time.
    for kernel in ["", "portable"] {
        let out = ok(&run_with_stdin_and_env(&args, input.as_bytes(), &[("BLOOMFLOW_KERNEL", kernel)]));
        let answers: Vec<&str> = out.lines().collect();
        assert_eq!(answers.len(), rows.len());
        for (row, answer) in rows.iter().zip(answers) {
            let expected = if row[column] == "1" { "maybe" } else { "no" };
            assert_eq!(answer, format!("{}\t{expected}", row[0]), "{file} {kernel}");
        }
    }
}

#[test]
fn query_reproduces_every_membership_table() {
    check_membership("hadoop_bloom_jenkins.bin", "hadoop_membership.tsv", 2, &[]);
    check_membership("hadoop_bloom_murmur.bin", "hadoop_membership.tsv", 3, &[]);
    check_membership("hadoop_bloom_odd.bin", "hadoop_membership.tsv", 4, &[]);
    check_membership("spark_bloom.bin", "spark_membership.tsv", 2, &[]);
    check_membership("spark_bloom_v1.bin", "spark_membership.tsv", 3, &[]);
    check_membership("spark_bloom_long.bin", "spark_membership_long.tsv", 2, &["--key-type", "long"]);
    check_membership("spark_bloom_long_v1.bin", "spark_membership_long.tsv", 3, &["--key-type", "long"]);
}

#[test]
fn build_writes_the_reference_files_byte_for_byte() {
    let dir = tempdir();
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, (0..100).map(|i| format!("key-{i}\n")).collect::<String>()).unwrap();
    let longs = dir.path().join("longs.txt");
    std::fs::write(&longs, (0..100).map(|i| format!("{i}\n")).collect::<String>()).unwrap();
    let cases: &[(&str, &Path, &[&str])] = &[
        ("hadoop_bloom_jenkins.bin", &keys, &["--format", "hadoop", "--bits", "1000", "--hashes", "7"]),
        ("hadoop_bloom_murmur.bin", &keys, &["--format", "hadoop", "--hash", "murmur", "--bits", "1000", "--hashes", "7"]),
        ("hadoop_bloom_odd.bin", &keys, &["--format", "hadoop", "--bits", "1003", "--hashes", "3"]),
        ("spark_bloom.bin", &keys, &["--format", "spark", "--expected-items", "1000", "--fpp", "0.03"]),
        ("spark_bloom_v1.bin", &keys, &["--format", "spark", "--spark-version", "1", "--expected-items", "1000", "--fpp", "0.03"]),
        ("spark_bloom_long.bin", &longs, &["--format", "spark", "--key-type", "long", "--expected-items", "1000", "--fpp", "0.03"]),
        ("spark_bloom_long_v1.bin", &longs, &["--format", "spark", "--spark-version", "1", "--key-type", "long", "--bits", "7298", "--hashes", "5"]),
    ];
    // spark_params.tsv describes a seed-12345 V2 filter of the same keys with 483 bits set.
    let seeded = path_str(dir.path(), "seeded.bin");
    ok(&run(&["build", keys.to_str().unwrap(), "--no-header", "--key", "1", "--format", "spark", "--seed", "12345", "--expected-items", "1000", "--fpp", "0.03", "-o", &seeded]));
    let info: serde_json::Value = serde_json::from_str(&ok(&run(&["info", &seeded, "--json"]))).unwrap();
    assert_eq!((info["bits_set"].as_u64(), info["seed"].as_u64()), (Some(483), Some(12345)));
    // With the portable kernel too: no vector code, so batches hash one key at a time where the
    // others hash in lanes, and the scan runs its portable compile.
    for (reference, input, flags) in cases {
        for (workers, kernel) in [("1", ""), ("2", ""), ("2", "portable")] {
            let out = path_str(dir.path(), &format!("{reference}.{workers}{kernel}"));
            let mut args = vec!["build", input.to_str().unwrap(), "--no-header", "--key", "1", "-o", &out, "-w", workers, "--no-progress"];
            args.extend_from_slice(flags);
            ok(&run_with_env(&args, &[("BLOOMFLOW_KERNEL", kernel)]));
            assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(vectors().join(reference)).unwrap(), "{reference} -w {workers} {kernel}");
        }
    }
}

#[test]
fn spark_sizing_matches_the_params_table() {
    for row in tsv("spark_params.tsv") {
        let (n, p): (u64, f64) = (row[8].parse().unwrap(), row[9].parse().unwrap());
        let scheme = if row[1] == "1" { Scheme::SparkV1 } else { Scheme::SparkV2 };
        let spec = FilterSpec::sized_for(scheme, Layout::Standard, n, p, 0).unwrap();
        assert_eq!(spec.bits.to_string(), row[5], "{row:?}");
        assert_eq!(spec.hashes.to_string(), row[2], "{row:?}");
        // The table also describes a seeded file that is not among the vectors.
        let file = vectors().join(&row[0]);
        if file.exists() {
            let (stored, _) = format::load_any(&file).unwrap();
            let f = stored.into_plain().unwrap();
            assert_eq!(f.bits_set().to_string(), row[6], "cardinality is the bits set: {row:?}");
            assert_eq!((f.spec().seed as i32).to_string(), row[3]);
            assert_eq!(std::fs::metadata(&file).unwrap().len().to_string(), row[10]);
        }
    }
}

#[test]
fn every_format_round_trips_and_is_detected() {
    let dir = tempdir();
    for (name, format) in [
        ("hadoop_bloom_jenkins.bin", FileFormat::Hadoop),
        ("hadoop_bloom_odd.bin", FileFormat::Hadoop),
        ("spark_bloom.bin", FileFormat::Spark),
        ("spark_bloom_long_v1.bin", FileFormat::Spark),
    ] {
        let (stored, detected) = format::load_any(&vectors().join(name)).unwrap();
        assert_eq!(detected, format, "{name}");
        let out = dir.path().join(name);
        format::write(&out, &stored).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(vectors().join(name)).unwrap(), "{name}");
    }
}

#[test]
fn the_legacy_hadoop_layout_is_read() {
    // Legacy: int nbHash (> 0), int vectorSize, bits; Jenkins implied.
    let current = std::fs::read(vectors().join("hadoop_bloom_jenkins.bin")).unwrap();
    let mut legacy = current[4..8].to_vec();
    legacy.extend(&current[9..]);
    let dir = tempdir();
    let path = dir.path().join("legacy.bin");
    std::fs::write(&path, &legacy).unwrap();
    let (stored, detected) = format::load_any(&path).unwrap();
    assert_eq!(detected, FileFormat::HadoopLegacy);
    let (reference, _) = format::load_any(&vectors().join("hadoop_bloom_jenkins.bin")).unwrap();
    assert_eq!(stored, reference);
}

/// Hadoop's `CountingBloomFilter` of `key-0`..`key-99` (m = 1000, k = 7) as its `add` and
/// `write` make it, from the positions Hadoop computed (hadoop_positions.tsv): each position's
/// 4-bit bucket incremented once per occurrence (saturating at 15), bucket i in long i / 16 under
/// `15L << ((i % 16) * 4)`, the longs big-endian after the header.
fn hadoop_counting_reference(hash: &str) -> Vec<u8> {
    let mut buckets = vec![0u8; 1000];
    for row in tsv("hadoop_positions.tsv").iter().filter(|row| row[0] == hash) {
        for p in row[2].split(',') {
            let b = &mut buckets[p.parse::<usize>().unwrap()];
            *b = (*b + 1).min(15);
        }
    }
    let mut longs = vec![0u64; (1000 - 1) / 16 + 1];
    for (i, &b) in buckets.iter().enumerate() {
        longs[i >> 4] |= (b as u64) << ((i & 15) << 2);
    }
    let hash_type = if hash == "JENKINS" { 0 } else { 1 };
    let mut bytes = [&(-1i32).to_be_bytes()[..], &7i32.to_be_bytes(), &[hash_type], &1000i32.to_be_bytes()].concat();
    bytes.extend(longs.iter().flat_map(|l| l.to_be_bytes()));
    bytes
}

/// `build --counting --format hadoop` writes Hadoop's `CountingBloomFilter`, the same bytes for
/// any number of workers and processes, whose counters above zero are the bits of the
/// reference `BloomFilter` Hadoop wrote for the same keys.
#[test]
fn counting_builds_write_hadoops_counting_filter() {
    let dir = tempdir();
    let keys = dir.path().join("keys.txt");
    // Every key twice, and a third time for a tenth of them: counts of 2 and 3, not just 1.
    let lines: String = (0..3).flat_map(|round| (0..100).filter(move |i| round < 2 || i % 10 == 0)).map(|i| format!("key-{i}\n")).collect();
    std::fs::write(&keys, lines).unwrap();
    for (hash, flag, plain_reference) in [("JENKINS", "jenkins", "hadoop_bloom_jenkins.bin"), ("MURMUR", "murmur", "hadoop_bloom_murmur.bin")] {
        let args = ["build", keys.to_str().unwrap(), "--no-header", "--key", "1", "--counting", "--format", "hadoop", "--hash", flag, "--bits", "1000", "--hashes", "7", "--no-progress"];
        let once = path_str(dir.path(), &format!("{flag}.once.bin"));
        let once_keys = dir.path().join("once.txt");
        std::fs::write(&once_keys, (0..100).map(|i| format!("key-{i}\n")).collect::<String>()).unwrap();
        let mut once_args = args.to_vec();
        once_args[1] = once_keys.to_str().unwrap();
        ok(&run(&[&once_args[..], &["-o", &once]].concat()));
        assert_eq!(std::fs::read(&once).unwrap(), hadoop_counting_reference(hash), "{hash}: once each");

        let (stored, detected) = format::load_any(Path::new(&once)).unwrap();
        assert_eq!((detected, stored.kind()), (FileFormat::Hadoop, "counting-bloom"));
        let plain = path_str(dir.path(), &format!("{flag}.plain.bin"));
        format::write(Path::new(&plain), &format::StoredFilter::Plain(stored.into_plain().unwrap())).unwrap();
        assert_eq!(std::fs::read(&plain).unwrap(), std::fs::read(vectors().join(plain_reference)).unwrap(), "{hash}: the counters above zero");

        let reference = path_str(dir.path(), &format!("{flag}.w1.bin"));
        ok(&run(&[&args[..], &["-o", &reference, "-w", "1"]].concat()));
        let counted = match format::load(Path::new(&reference)).unwrap() {
            format::StoredFilter::Counting(c) => c,
            other => panic!("{hash}: read back as {}", other.kind()),
        };
        let spec = FilterSpec::new(Scheme::Hadoop(if hash == "JENKINS" { HadoopHash::Jenkins } else { HadoopHash::Murmur }), 0, 1000, 7).unwrap();
        let mut expected = bloomflow::CountingBloomFilter::new(spec);
        (0..3).flat_map(|round| (0..100).filter(move |i| round < 2 || i % 10 == 0)).for_each(|i| expected.insert(format!("key-{i}").as_bytes()));
        assert!(counted.words() == expected.words(), "{hash}: other counters than the keys inserted one by one");
        let out = path_str(dir.path(), &format!("{flag}.w3.bin"));
        ok(&run(&[&args[..], &["-o", &out, "-w", "3", "--split-size", "256"]].concat()));
        assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&reference).unwrap(), "{hash} -w 3");
        let out = path_str(dir.path(), &format!("{flag}.p2.bin"));
        all_ok(&run_cluster(dir.path(), 2, 1, &[&args[..], &["-o", &out, "--split-size", "256"]].concat(), std::time::Duration::from_secs(60)));
        assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&reference).unwrap(), "{hash}: 2 processes");
    }
}

/// Hadoop's own `CountingBloomFilter`s (tests/data/interop/counting/): `build --counting` of
/// the same keys, then `remove` of the keys Hadoop deleted, writes Hadoop's bytes (counters
/// saturated at 15 included); `query` answers as its `membershipTest`, and the library's
/// `approximate_count` and `query --count` as its `approximateCount`.
#[test]
fn hadoops_counting_filters_are_built_removed_and_counted_as_hadoop_does() {
    let dir = tempdir();
    let keys = dir.path().join("keys.txt");
    let inserted: Vec<String> = (0..100).map(|i| format!("key-{i}")).chain(std::iter::repeat_n("key-0".to_string(), 19)).chain(std::iter::repeat_n("key-1".to_string(), 2)).collect();
    std::fs::write(&keys, inserted.iter().map(|k| format!("{k}\n")).collect::<String>()).unwrap();
    let deleted: Vec<String> = (50..60).map(|i| format!("key-{i}")).collect();
    for hash in ["jenkins", "murmur"] {
        let reference = vectors().join(format!("counting/hadoop_counting_{hash}.bin"));
        let built = path_str(dir.path(), &format!("{hash}.bin"));
        ok(&run(&["build", keys.to_str().unwrap(), "--no-header", "--key", "1", "--counting", "--format", "hadoop", "--hash", hash, "--bits", "1000", "--hashes", "7", "-o", &built, "--no-progress"]));
        let removed = path_str(dir.path(), &format!("{hash}-removed.bin"));
        let args: Vec<&str> = ["remove", &built, "-o", &removed].into_iter().chain(deleted.iter().map(String::as_str)).collect();
        ok(&run(&args));
        assert!(std::fs::read(&removed).unwrap() == std::fs::read(&reference).unwrap(), "{hash}: Hadoop's bytes");

        let rows = tsv(&format!("counting/hadoop_counting_{hash}.tsv"));
        let asked: Vec<String> = rows.iter().map(|row| row[0].clone()).collect();
        let hadoop: Vec<bool> = rows.iter().map(|row| row[1] == "true").collect();
        assert_eq!(query_answers(reference.to_str().unwrap(), &asked), hadoop, "{hash}");
        let filter = match format::load(&reference).unwrap() {
            format::StoredFilter::Counting(c) => c,
            other => panic!("{hash}: read as {}", other.kind()),
        };
        for row in &rows {
            assert_eq!(filter.approximate_count(row[0].as_bytes()).to_string(), row[2], "{hash}: {}", row[0]);
        }
        assert_eq!(filter.approximate_count(b"key-0"), 15);
        // `query --count` prints the same counts.
        let input: String = asked.iter().map(|k| format!("{k}\n")).collect();
        let counted = ok(&run_with_stdin(&["query", reference.to_str().unwrap(), "--count"], input.as_bytes()));
        let want: String = rows.iter().map(|row| format!("{}\t{}\n", row[0], row[2])).collect();
        assert_eq!(counted, want, "{hash}");
    }
    let plain = vectors().join("hadoop_bloom_jenkins.bin");
    fails_with(&run(&["query", plain.to_str().unwrap(), "--count", "key-1"]), &["--count needs a counting filter (build --counting), and this is a bloom filter"]);
}

/// A Hadoop counting file reads back to the same bytes, in its legacy layout too, keeps its
/// format through `remove`, `subtract` and `merge`, and a body of neither kind's length is
/// refused naming both.
#[test]
fn hadoop_counting_files_round_trip_and_keep_their_format() {
    let dir = tempdir();
    let current = path_str(dir.path(), "c.bin");
    std::fs::write(&current, hadoop_counting_reference("JENKINS")).unwrap();
    let (stored, _) = format::load_any(Path::new(&current)).unwrap();
    let again = dir.path().join("again.bin");
    format::write(&again, &stored).unwrap();
    assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&current).unwrap());

    let bytes = std::fs::read(&current).unwrap();
    let legacy = dir.path().join("legacy.bin");
    std::fs::write(&legacy, [&bytes[4..8], &bytes[9..]].concat()).unwrap();
    let (read, detected) = format::load_any(&legacy).unwrap();
    assert_eq!((detected, &read), (FileFormat::HadoopLegacy, &stored));

    let reason = bad_reason(&bytes[..bytes.len() - 8]);
    assert!(reason.contains("138 (a BloomFilter) or 517 (a CountingBloomFilter)"), "{reason}");

    // remove, subtract and merge write Hadoop's layout back.
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, (0..50).map(|i| format!("key-{i}\n")).collect::<String>()).unwrap();
    let rest = dir.path().join("rest.txt");
    std::fs::write(&rest, (50..100).map(|i| format!("key-{i}\n")).collect::<String>()).unwrap();
    let (subtracted, built) = (path_str(dir.path(), "sub.bin"), path_str(dir.path(), "rest.bin"));
    // Hadoop's files do not record how many keys went in: said so, not shown as 0.
    let summary = ok(&run(&["subtract", &current, keys.to_str().unwrap(), "--no-header", "--key", "1", "-o", &subtracted]));
    assert!(summary.contains("keys in filter     (not recorded"), "{summary}");
    let info = ok(&run(&["info", &current]));
    assert!(info.lines().any(|l| l.starts_with("items inserted") && l.ends_with("(not recorded)")), "{info}");
    let json: serde_json::Value = serde_json::from_str(&ok(&run(&["info", &current, "--json"]))).unwrap();
    assert!(json["items_inserted"].is_null() && json["kind"] == "counting-bloom", "{json}");
    ok(&run(&["build", rest.to_str().unwrap(), "--no-header", "--key", "1", "--counting", "--format", "hadoop", "--bits", "1000", "--hashes", "7", "-o", &built, "--no-progress"]));
    assert_eq!(std::fs::read(&subtracted).unwrap(), std::fs::read(&built).unwrap(), "subtract");
    let removed = path_str(dir.path(), "removed.bin");
    let listed: Vec<String> = (0..50).map(|i| format!("key-{i}")).collect();
    ok(&run_with_stdin(&["remove", &current, "-o", &removed], listed.join("\n").as_bytes()));
    assert_eq!(std::fs::read(&removed).unwrap(), std::fs::read(&built).unwrap(), "remove");
    let merged = path_str(dir.path(), "merged.bin");
    let half = path_str(dir.path(), "half.bin");
    ok(&run(&["build", keys.to_str().unwrap(), "--no-header", "--key", "1", "--counting", "--format", "hadoop", "--bits", "1000", "--hashes", "7", "-o", &half, "--no-progress"]));
    ok(&run(&["merge", &half, &built, "-o", &merged]));
    assert_eq!(std::fs::read(&merged).unwrap(), bytes, "merge");

    // Spark's long keys, which no Hadoop filter holds, are refused before anything is written.
    let refused = path_str(dir.path(), "refused.bin");
    fails_with(&run(&["remove", &current, "--key-type", "long", "-o", &refused, "--", "7"]), &["c.bin", "which no Hadoop filter holds"]);
    fails_with(&run(&["subtract", &current, keys.to_str().unwrap(), "--no-header", "--key", "1", "--key-type", "long", "-o", &refused]), &["c.bin", "which no Hadoop filter holds"]);
    assert!(!Path::new(&refused).exists());
}

/// A Hadoop `DynamicBloomFilter` file of the `BloomFilter` files `rows` (of one identity), in
/// Hadoop's layout (`DynamicBloomFilter.write`): the first row's header, `nr`,
/// `currentNbRecord` and the number of rows, then each row's file whole.
fn dynamic_file(rows: &[Vec<u8>], nr: i32, last: i32) -> Vec<u8> {
    let mut bytes = rows[0][..13].to_vec();
    for n in [nr, last, rows.len() as i32] {
        bytes.extend(n.to_be_bytes());
    }
    rows.iter().for_each(|row| bytes.extend(row));
    bytes
}

/// The answers of `query FILE` for `keys`, "maybe" as true.
fn query_answers(file: &str, keys: &[String]) -> Vec<bool> {
    query_answers_with(file, &[], keys)
}

/// The answers of `query FILE FLAGS...` for `keys`, "maybe" as true.
fn query_answers_with(file: &str, flags: &[&str], keys: &[String]) -> Vec<bool> {
    let input: String = keys.iter().map(|k| format!("{k}\n")).collect();
    let out = ok(&run_with_stdin(&[&["query", file][..], flags].concat(), input.as_bytes()));
    assert_eq!(out.lines().count(), keys.len(), "{out}");
    out.lines().zip(keys).map(|(line, key)| line == format!("{key}\tmaybe")).collect()
}

/// Hadoop's own `BloomMapFile`s (tests/data/interop/bloommapfile/): given the directory and its
/// keys' type, `query` answers every key as Hadoop's `probablyHasKey` does, and `semijoin
/// --filter` keeps exactly the records whose key it answers "maybe" for. As bytes, the keys of
/// the Text map file are not found.
#[test]
fn hadoop_bloom_map_files_answer_as_hadoop_does() {
    let dir = tempdir();
    for (name, key_type, rows) in [("text", "text", 3), ("long", "long-writable", 2), ("int", "int-writable", 2), ("bytes", "bytes-writable", 3)] {
        let map = path_str(&vectors().join("bloommapfile"), &format!("{name}.map"));
        let vectors = tsv(&format!("bloommapfile/{name}_membership.tsv"));
        let keys: Vec<String> = vectors.iter().map(|row| row[0].clone()).collect();
        let hadoop: Vec<bool> = vectors.iter().map(|row| row[2] == "true").collect();
        assert!(vectors.iter().all(|row| row[1] == "false" || row[2] == "true"), "{name}: the vectors' inserted keys");
        let ours = query_answers_with(&map, &["--key-type", key_type], &keys);
        let differ: Vec<&String> = keys.iter().zip(ours.iter().zip(&hadoop)).filter(|(_, (a, b))| a != b).map(|(key, _)| key).collect();
        assert!(differ.is_empty(), "{name}: {} keys answered otherwise than Hadoop's reader, the first {:?}", differ.len(), differ[0]);

        let info: serde_json::Value = serde_json::from_str(&ok(&run(&["info", &map, "--json"]))).unwrap();
        assert_eq!((info["kind"].as_str(), info["rows"].as_u64()), (Some("dynamic-bloom"), Some(rows)), "{name}");

        let probe = dir.path().join(format!("{name}.csv"));
        std::fs::write(&probe, std::iter::once("n,key\n".to_string()).chain(keys.iter().enumerate().map(|(i, k)| format!("{i},{k}\n"))).collect::<String>()).unwrap();
        let out = path_str(dir.path(), &format!("{name}-pruned"));
        ok(&run(&["semijoin", "--filter", &map, "--key-type", key_type, "--probe", probe.to_str().unwrap(), "--probe-key", "key", "-o", &out, "-w", "2", "--no-progress"]));
        let mut kept: Vec<usize> = names_in(&out).iter().filter(|n| n.starts_with("part-")).flat_map(|part| {
            std::fs::read_to_string(Path::new(&out).join(part)).unwrap().lines().skip(1).map(|l| l.split(',').next().unwrap().parse().unwrap()).collect::<Vec<usize>>()
        }).collect();
        kept.sort();
        assert_eq!(kept, (0..keys.len()).filter(|&i| hadoop[i]).collect::<Vec<usize>>(), "{name}");
    }
    let text = path_str(&vectors().join("bloommapfile"), "text.map");
    let inserted: Vec<String> = tsv("bloommapfile/text_membership.tsv").into_iter().filter(|row| row[1] == "true").map(|row| row[0].clone()).collect();
    let as_bytes = query_answers(&text, &inserted).iter().filter(|&&maybe| maybe).count();
    assert!(as_bytes < 20, "{as_bytes} of {} keys answered maybe as bytes", inserted.len());
}

/// Input globs expand as Hadoop's `FileInputFormat` expands them: for every pattern of
/// tests/data/interop/globs/, the paths Hadoop 3.4.1's `globStatus` with its hidden-file filter
/// matched in the same tree, or an error where it refused the pattern.
#[test]
fn globs_match_what_hadoops_glob_status_matches() {
    let dir = tempdir();
    let root = dir.path().canonicalize().unwrap();
    let reference = vectors().join("globs");
    for file in std::fs::read_to_string(reference.join("tree.txt")).unwrap().lines() {
        let path = root.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "x\n").unwrap();
    }
    let rows = tsv("globs/hadoop_globs.tsv");
    assert!(rows.len() >= 50, "{} patterns", rows.len());
    for row in rows {
        let (pattern, hadoop) = (&row[0], &row[1]);
        let ours = match bloomflow::globs::expand(&root.join(pattern)) {
            Ok(paths) => paths.iter().map(|p| p.strip_prefix(&root).unwrap().to_str().unwrap().to_string()).collect::<Vec<String>>().join(" "),
            Err(_) => "ERROR".to_string(),
        };
        assert_eq!(&ours, hadoop, "pattern {pattern}");
    }
}

/// Files written by Hadoop's own codecs (tests/data/interop/codecs/: gzip, deflate, bzip2, and
/// Snappy and LZ4 in many blocks of Hadoop's framing) are read as the text they hold: each
/// builds the filter of the uncompressed file, every record once, in one worker or in three
/// with small splits.
#[test]
fn files_compressed_by_hadoops_codecs_are_read_as_their_text() {
    let dir = tempdir();
    let codecs = vectors().join("codecs");
    let args = ["-k", "key", "--bits", "65536", "--hashes", "5", "--split-size", "4096", "--no-progress"];
    let filter = |input: &Path, workers: &str| {
        let out = dir.path().join("f.bloom");
        let _ = std::fs::remove_file(&out);
        let summary = ok(&run(&[&["build", input.to_str().unwrap(), "-o", out.to_str().unwrap(), "-w", workers][..], &args[..]].concat()));
        assert!(summary.contains("records            1500\n"), "{}: {summary}", input.display());
        std::fs::read(&out).unwrap()
    };
    let plain = filter(&codecs.join("keys.csv"), "1");
    for suffix in ["gz", "deflate", "bz2", "snappy", "lz4"] {
        for workers in ["1", "3"] {
            assert!(filter(&codecs.join(format!("keys.csv.{suffix}")), workers) == plain, "{suffix} -w {workers}");
        }
    }
}

/// `--key-type text` and the other Writables: the build job hashes keys as the Writable
/// serializes them (into a Hadoop filter only: a native or Spark one refuses them), a key that
/// is not a number of the type is an error, a Spark filter refuses a Writable key, and a
/// directory that is no map file is no filter.
#[test]
fn writable_keys_are_built_as_hadoop_serializes_them_and_misuses_refused() {
    let dir = tempdir();
    // Text writes a vint length: one byte below 128, else 0x8f and one byte up to 255.
    let text = |key: &str| {
        let len = key.len();
        let prefix = if len < 128 { vec![len as u8] } else { vec![0x8f, len as u8] };
        [prefix, key.as_bytes().to_vec()].concat()
    };
    let mut keys: Vec<String> = (0..150).map(|i| format!("id-{i}")).collect();
    keys.push("k".repeat(130));
    let keys_file = dir.path().join("keys.txt");
    std::fs::write(&keys_file, keys.iter().map(|k| format!("{k}\n")).collect::<String>()).unwrap();
    let built = path_str(dir.path(), "texts.bin");
    let build = |format: &str| run(&["build", keys_file.to_str().unwrap(), "--no-header", "--key", "1", "--format", format, "--key-type", "text", "--bits", "3000", "--hashes", "5", "-o", &built, "-w", "2", "--no-progress"]);
    ok(&build("hadoop"));
    let spec = FilterSpec::new(Scheme::Hadoop(HadoopHash::Jenkins), 0, 3000, 5).unwrap();
    let mut library = bloomflow::BloomFilter::new(spec);
    keys.iter().for_each(|key| library.insert(&text(key)));
    let written = dir.path().join("library.bin");
    format::write(&written, &format::StoredFilter::Plain(library)).unwrap();
    assert_eq!(std::fs::read(&built).unwrap(), std::fs::read(&written).unwrap(), "the build's filter of Text keys");
    fails_with(&build("native"), &["--key-type text is for --format hadoop"]);
    fails_with(&build("spark"), &["--key-type text is for --format hadoop"]);

    let ints = path_str(&vectors().join("bloommapfile"), "int.map");
    fails_with(&run_with_stdin(&["query", &ints, "--key-type", "int-writable"], b"12\n3000000000\n"), &["line 2", "\"3000000000\" is not a signed 32-bit decimal integer (--key-type int-writable)"]);
    let spark = vectors().join("spark_bloom.bin");
    fails_with(&run(&["query", spark.to_str().unwrap(), "--key-type", "text", "x"]), &["no Spark filter holds"]);
    // A directory with a `bloom` file but no MapFile `index` is no map file.
    let not_a_map = dir.path().join("not.map");
    std::fs::create_dir(&not_a_map).unwrap();
    std::fs::copy(Path::new(&ints).join("bloom"), not_a_map.join("bloom")).unwrap();
    fails_with(&run(&["query", not_a_map.to_str().unwrap(), "--key-type", "int-writable", "12"]), &["is a directory"]);
}

/// The two rows of a dynamic filter of keys `key-0`..`key-179`, 100 a row, as Hadoop's `add`
/// fills them: its own `BloomFilter` file of `key-0`..`key-99` (Jenkins, m = 1000, k = 7), and
/// bloomflow's of the 80 keys after them.
fn hadoop_dynamic_rows(dir: &Path) -> Vec<Vec<u8>> {
    let later = dir.join("later.txt");
    std::fs::write(&later, (100..180).map(|i| format!("key-{i}\n")).collect::<String>()).unwrap();
    let row = path_str(dir, "row1.bin");
    ok(&run(&["build", later.to_str().unwrap(), "--no-header", "--key", "1", "--format", "hadoop", "--hash", "jenkins", "--bits", "1000", "--hashes", "7", "-o", &row, "--no-progress"]));
    vec![std::fs::read(vectors().join("hadoop_bloom_jenkins.bin")).unwrap(), std::fs::read(&row).unwrap()]
}

/// A Hadoop `DynamicBloomFilter` is read with all its rows, which answer together: `query`
/// and `semijoin --filter` keep a key if any row may hold it, `info` tells its rows. The
/// library's dynamic filter of the same keys writes the same bytes, and the file reads the
/// same in the legacy layout.
#[test]
fn hadoop_dynamic_filters_answer_with_every_row() {
    let dir = tempdir();
    let rows = hadoop_dynamic_rows(dir.path());
    let file = path_str(dir.path(), "dynamic.bin");
    std::fs::write(&file, dynamic_file(&rows, 100, 80)).unwrap();

    let spec = FilterSpec::new(Scheme::Hadoop(HadoopHash::Jenkins), 0, 1000, 7).unwrap();
    let mut library = bloomflow::DynamicBloomFilter::new(spec, 100);
    (0..180).for_each(|i| library.insert(format!("key-{i}").as_bytes()));
    let written = dir.path().join("library.bin");
    format::write(&written, &format::StoredFilter::Dynamic(library)).unwrap();
    assert_eq!(std::fs::read(&written).unwrap(), std::fs::read(&file).unwrap(), "the library's rows and layout");

    let info: serde_json::Value = serde_json::from_str(&ok(&run(&["info", &file, "--json"]))).unwrap();
    assert_eq!((info["kind"].as_str(), info["format"].as_str()), (Some("dynamic-bloom"), Some("hadoop writable")));
    assert_eq!((info["rows"].as_u64(), info["records_per_row"].as_u64(), info["last_row_records"].as_u64()), (Some(2), Some(100), Some(80)));
    assert_eq!((info["items_inserted"].as_u64(), info["bits"].as_u64()), (Some(180), Some(1000)));
    let row_bits: Vec<u64> = rows.iter().map(|row| row[13..].iter().map(|b| b.count_ones() as u64).sum()).collect();
    assert_eq!(info["bits_set"].as_u64(), Some(row_bits.iter().sum()));
    assert!(ok(&run(&["info", &file])).contains("rows                  2 (of 1000 bits each; keys a row takes: 100, in the last: 80)"));

    // Every key inserted is "maybe"; every other key's answer is the OR of the rows' own.
    let keys: Vec<String> = (0..2000).map(|i| format!("key-{i}")).collect();
    let row_files: Vec<String> = rows.iter().enumerate().map(|(i, row)| {
        let path = path_str(dir.path(), &format!("row{i}.alone.bin"));
        std::fs::write(&path, row).unwrap();
        path
    }).collect();
    let (first, second) = (query_answers(&row_files[0], &keys), query_answers(&row_files[1], &keys));
    let answers = query_answers(&file, &keys);
    assert!(answers[..180].iter().all(|&maybe| maybe), "a key of the filter answered no");
    for (i, &maybe) in answers.iter().enumerate() {
        assert_eq!(maybe, first[i] || second[i], "{}", keys[i]);
    }
    assert!((100..180).any(|i| !first[i]), "the second row's keys are not all in the first row");

    let probe = dir.path().join("probe.csv");
    std::fs::write(&probe, std::iter::once("id,k\n".to_string()).chain(keys.iter().enumerate().map(|(i, k)| format!("{i},{k}\n"))).collect::<String>()).unwrap();
    let out = path_str(dir.path(), "pruned");
    let args = ["semijoin", "--filter", &file, "--probe", probe.to_str().unwrap(), "--probe-key", "k", "-o", &out, "-w", "2", "--no-progress"];
    // Its plan counts both rows' 1000 bits, one copy a process.
    let plan_json = path_str(dir.path(), "plan.json");
    let plan = ok(&run(&[&args[..], &["--plan", "--stats-json", &plan_json]].concat()));
    assert!(plan.contains("(a Hadoop DynamicBloomFilter: 2 rows of the size below, asked in turn)"), "{plan}");
    assert!(plan.contains("m = 1000 bits (125 B), k = "), "{plan}");
    let plan: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&plan_json).unwrap()).unwrap();
    assert_eq!((plan["filter_per"].as_str(), plan["process_filter_bytes"].as_u64()), (Some("process"), Some(250)), "{plan}");
    let summary = ok(&run(&args));
    assert!(summary.contains("(a Hadoop DynamicBloomFilter: 2 rows of the size below, asked in turn)"), "{summary}");
    let mut kept: Vec<usize> = names_in(&out).iter().filter(|n| n.starts_with("part-")).flat_map(|part| {
        std::fs::read_to_string(Path::new(&out).join(part)).unwrap().lines().skip(1).map(|l| l.split(',').next().unwrap().parse().unwrap()).collect::<Vec<usize>>()
    }).collect();
    kept.sort();
    let want: Vec<usize> = (0..keys.len()).filter(|&i| answers[i]).collect();
    assert_eq!(kept, want);

    // The legacy layout: every header without its version and hash type.
    let legacy_header = |header: &[u8]| [&header[4..8], &header[9..13]].concat();
    let mut legacy = legacy_header(&rows[0]);
    legacy.extend(&std::fs::read(&file).unwrap()[13..25]);
    rows.iter().for_each(|row| legacy.extend([legacy_header(row), row[13..].to_vec()].concat()));
    let legacy_path = dir.path().join("legacy.bin");
    std::fs::write(&legacy_path, legacy).unwrap();
    let (read, detected) = format::load_any(&legacy_path).unwrap();
    assert_eq!((detected, read), (FileFormat::HadoopLegacy, format::load(Path::new(&file)).unwrap()));
}

/// A damaged dynamic filter is refused, saying what its header implies; the commands that
/// cannot take one (merge, remove, subtract) say why; a one-row dynamic filter is its row.
#[test]
fn damaged_or_misused_hadoop_dynamic_filters_are_refused() {
    let dir = tempdir();
    let rows = hadoop_dynamic_rows(dir.path());
    let bytes = dynamic_file(&rows, 100, 80);
    let reason = bad_reason(&bytes[..bytes.len() - 1]);
    assert!(reason.contains(&format!("{} (a DynamicBloomFilter of the 2 rows it names", bytes.len())), "{reason}");
    // The second row's nbHash changed: the length still fits, the row's header does not.
    let mut other_k = bytes.clone();
    other_k[25 + rows[0].len() + 7] = 6;
    let reason = bad_reason(&other_k);
    assert!(reason.contains("row 1's header"), "{reason}");
    let mut negative = bytes.clone();
    negative[13..17].copy_from_slice(&(-5i32).to_be_bytes());
    assert!(bad_reason(&negative).contains("nr = -5"));

    let file = path_str(dir.path(), "dynamic.bin");
    std::fs::write(&file, &bytes).unwrap();
    assert!(format::load(Path::new(&file)).unwrap().into_plain().is_err());
    let out = path_str(dir.path(), "out.bin");
    fails_with(&run(&["merge", &file, &file, "-o", &out]), &["DynamicBloomFilter", "merge does not take it"]);
    fails_with(&run(&["intersect", &file, &file, "-o", &out]), &["DynamicBloomFilter", "intersect does not take it"]);
    fails_with(&run(&["remove", &file, "key-1", "-o", &out]), &["a Hadoop DynamicBloomFilter, whose bits do not count"]);
    let keys = dir.path().join("later.txt");
    fails_with(&run(&["subtract", &file, keys.to_str().unwrap(), "--no-header", "-k", "1", "-o", &out]), &["a Hadoop DynamicBloomFilter, whose bits do not count"]);
    assert!(!Path::new(&out).exists());

    let one_row = path_str(dir.path(), "one.bin");
    std::fs::write(&one_row, dynamic_file(&rows[..1], 100, 100)).unwrap();
    let plain = format::load(Path::new(&one_row)).unwrap().into_plain().unwrap();
    assert_eq!(format::StoredFilter::Plain(plain), format::load(&vectors().join("hadoop_bloom_jenkins.bin")).unwrap());
}

#[test]
fn filters_of_different_schemes_do_not_merge() {
    let dir = tempdir();
    let a = vectors().join("hadoop_bloom_jenkins.bin");
    let b = vectors().join("hadoop_bloom_murmur.bin");
    let out = path_str(dir.path(), "m.bin");
    fails_with(&run(&["merge", a.to_str().unwrap(), b.to_str().unwrap(), "-o", &out]), &["hashing scheme differs (hadoop-jenkins vs hadoop-murmur)"]);
    assert!(!Path::new(&out).exists());
    let v1 = vectors().join("spark_bloom_v1.bin");
    let v2 = vectors().join("spark_bloom.bin");
    fails_with(&run(&["merge", v1.to_str().unwrap(), v2.to_str().unwrap(), "-o", &out]), &["hashing scheme differs"]);
    // Same scheme: the merge is the OR, written back in the same format.
    ok(&run(&["merge", v2.to_str().unwrap(), vectors().join("spark_bloom_long.bin").to_str().unwrap(), "-o", &out]));
    let merged = format::load(Path::new(&out)).unwrap().into_plain().unwrap();
    assert_eq!(merged.spec().scheme, Scheme::SparkV2);
    assert!(merged.contains(b"key-7") && merged.contains(&7i64.to_le_bytes()));
}

fn bad_reason(bytes: &[u8]) -> String {
    let dir = tempdir();
    let path = dir.path().join("hostile.bin");
    std::fs::write(&path, bytes).unwrap();
    match format::load(&path) {
        Err(Error::BadFilterFile { reason, .. }) => reason,
        other => panic!("expected a bad-file error, got {other:?}"),
    }
}

#[test]
fn hostile_hadoop_and_spark_headers_are_rejected() {
    let hadoop = std::fs::read(vectors().join("hadoop_bloom_jenkins.bin")).unwrap();
    let spark = std::fs::read(vectors().join("spark_bloom.bin")).unwrap();
    let with = |base: &[u8], at: usize, bytes: &[u8]| {
        let mut b = base.to_vec();
        b[at..at + bytes.len()].copy_from_slice(bytes);
        b
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("hadoop k = 0", with(&hadoop, 4, &0i32.to_be_bytes()), "must be positive"),
        ("hadoop k = 2^31-1", with(&hadoop, 4, &i32::MAX.to_be_bytes()), "hashes"),
        ("hadoop hash type 7", with(&hadoop, 8, &[7]), "hash type 7"),
        ("hadoop m = 2^31-1", with(&hadoop, 9, &i32::MAX.to_be_bytes()), "truncated"),
        ("hadoop m < 0", with(&hadoop, 9, &(-5i32).to_be_bytes()), "must be positive"),
        ("hadoop truncated", hadoop[..100].to_vec(), "truncated"),
        ("hadoop header only", hadoop[..10].to_vec(), "too short"),
        ("spark numWords = 2^31-1", with(&spark, 12, &i32::MAX.to_be_bytes()), ""),
        ("spark numWords = 0", with(&spark, 12, &0i32.to_be_bytes()), ""),
        ("spark k = -3", with(&spark, 4, &(-3i32).to_be_bytes()), "must be positive"),
        ("spark truncated", spark[..900].to_vec(), ""),
        ("version 7", with(&spark, 0, &7i32.to_be_bytes()), ""),
        ("negative version", with(&spark, 0, &(-9i32).to_be_bytes()), "not a filter file"),
        ("three bytes", vec![0, 0, 0], "too short"),
    ];
    for (what, bytes, needle) in cases {
        let reason = bad_reason(&bytes);
        assert!(reason.contains(needle), "{what}: {reason}");
    }
}

#[test]
fn hadoop_and_spark_size_limits_are_enforced() {
    let err = FilterSpec::with_size(Scheme::Hadoop(HadoopHash::Jenkins), Layout::Standard, 1 << 31, 3, 0).unwrap_err().to_string();
    assert!(err.contains("2147483647"), "{err}");
    assert!(FilterSpec::with_size(Scheme::Hadoop(HadoopHash::Jenkins), Layout::Standard, (1 << 31) - 1, 3, 0).is_ok());
    let err = FilterSpec::with_size(Scheme::SparkV2, Layout::Standard, (1u64 << 31) * 64, 3, 0).unwrap_err().to_string();
    assert!(err.contains("bits"), "{err}");
    assert!(FilterSpec::new(Scheme::SparkV1, 5, 64, 3).is_err(), "Spark V1 has no seed");
}

#[test]
fn hadoop_builds_refuse_empty_keys_and_spark_longs_must_parse() {
    let dir = tempdir();
    let input = dir.path().join("k.csv");
    std::fs::write(&input, "id,key\n1,a\n2,\n3,c\n").unwrap();
    let out = path_str(dir.path(), "h.bin");
    let summary = ok(&run(&["build", input.to_str().unwrap(), "-k", "key", "--format", "hadoop", "--bits", "1000", "--hashes", "3", "-o", &out]));
    assert!(summary.contains("k.csv:3: empty key"), "{summary}");
    fails_with(&run(&["build", input.to_str().unwrap(), "-k", "key", "--format", "hadoop", "--bits", "1000", "--hashes", "3", "-o", &out, "--strict"]), &["k.csv:3", "empty key"]);
    let summary = ok(&run(&["build", input.to_str().unwrap(), "-k", "id", "--format", "spark", "--key-type", "long", "--expected-items", "10", "-o", &out]));
    assert!(summary.contains("keys inserted      3"), "{summary}");
    // No key parses: a misconfigured job, refused rather than writing an empty filter.
    fails_with(
        &run(&["build", input.to_str().unwrap(), "-k", "key", "--format", "spark", "--key-type", "long", "--expected-items", "10", "-o", &out]),
        &["none of the 3 input records has a usable key", "k.csv:2: key \"a\" is not a signed 64-bit decimal integer"],
    );
    fails_with(&run(&["build", input.to_str().unwrap(), "-k", "key", "--key-type", "long", "-o", &out]), &["--key-type long is for --format spark"]);
}

#[test]
fn semijoin_prunes_with_a_spark_filter() {
    let dir = tempdir();
    let probe = dir.path().join("p.csv");
    std::fs::write(&probe, "id,k\n1,key-5\n2,nope-1\n3,key-99\n4,probe-3\n").unwrap();
    let out = path_str(dir.path(), "out");
    let filter = vectors().join("spark_bloom.bin");
    ok(&run(&["semijoin", "--filter", filter.to_str().unwrap(), "--probe", probe.to_str().unwrap(), "--probe-key", "k", "-o", &out]));
    let part = std::fs::read_to_string(Path::new(&out).join("part-00000")).unwrap();
    assert_eq!(part, "id,k\n1,key-5\n3,key-99\n");
}

/// A Spark filter of a long column prunes a probe whose keys are hashed as longs
/// (`--key-type long`, which the filter file's scheme allows without `--format spark`): it keeps
/// the rows of the keys Spark's `mightContainLong` answers true for. Hashed as bytes, it answers
/// "no" for every key, and the job says so; a Hadoop filter refuses `--key-type long`, in the
/// semi-join and in `query`.
#[test]
fn semijoin_prunes_with_a_spark_filter_of_longs() {
    let dir = tempdir();
    let rows = tsv("spark_membership_long.tsv");
    let probe = dir.path().join("p.csv");
    std::fs::write(&probe, std::iter::once("id,k\n".to_string()).chain(rows.iter().enumerate().map(|(i, r)| format!("{i},{}\n", r[0]))).collect::<String>()).unwrap();
    let filter = vectors().join("spark_bloom_long.bin");
    let out = path_str(dir.path(), "out");
    let args = ["semijoin", "--filter", filter.to_str().unwrap(), "--probe", probe.to_str().unwrap(), "--probe-key", "k", "-o", &out, "--overwrite", "--no-progress"];
    ok(&run(&[&args[..], &["--key-type", "long", "-w", "2"]].concat()));
    let mut kept: Vec<String> = names_in(&out).iter().filter(|n| n.starts_with("part-")).flat_map(|part| {
        std::fs::read_to_string(Path::new(&out).join(part)).unwrap().lines().skip(1).map(|l| l.split(',').nth(1).unwrap().to_string()).collect::<Vec<_>>()
    }).collect();
    kept.sort();
    let mut want: Vec<String> = rows.iter().filter(|r| r[2] == "1").map(|r| r[0].clone()).collect();
    want.sort();
    assert!(!want.is_empty() && want.len() < rows.len());
    assert_eq!(kept, want);

    let as_bytes = run(&args);
    ok(&as_bytes);
    let stderr = String::from_utf8_lossy(&as_bytes.stderr);
    assert!(stderr.contains(&format!("the filter answered \"no\" for every one of the {} probe keys", rows.len())) && stderr.contains("--key-type long"), "{stderr}");
    let hadoop = vectors().join("hadoop_bloom_jenkins.bin");
    let mut on_hadoop = args.to_vec();
    on_hadoop[2] = hadoop.to_str().unwrap();
    fails_with(&run(&[&on_hadoop[..], &["--key-type", "long"]].concat()), &["hadoop_bloom_jenkins.bin: invalid --key-type", "which no Hadoop filter holds, and this is a hadoop-jenkins filter"]);
    fails_with(&run(&["query", hadoop.to_str().unwrap(), "--key-type", "long", "42"]), &["hadoop_bloom_jenkins.bin: invalid --key-type", "hadoop-jenkins filter"]);
}
