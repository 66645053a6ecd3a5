//! The build job: splits, records, keys, sizing, worker and process counts.

use crate::util::*;
use bloomflow::records::{Key, KeyField, RecordFormat};
use bloomflow::scan::{ScanOptions, Source};
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;

/// Keys every worker of `peers` reads from `inputs`, gathered across workers, in read order.
fn scanned_keys(inputs: &[std::path::PathBuf], options: ScanOptions, peers: usize) -> Vec<Vec<u8>> {
    let source = Source::plan(inputs, options, peers).unwrap();
    let mut keys = Vec::new();
    for me in 0..peers {
        source
            .scan_worker(me, peers, &AtomicBool::new(false), &AtomicU64::new(0), |batch| {
                keys.extend(batch.keys.iter().map(|k| k.to_vec()));
                Ok(())
            })
            .unwrap();
    }
    keys
}

fn options(split_size: u64, has_header: bool, key: KeyField) -> ScanOptions {
    ScanOptions {
        format: RecordFormat { delimiter: b',', has_header, multiline: false },
        key: Key::single(key),
        split_size,
        max_record: 1 << 20,
        strict: true,
        key_rules: Default::default(),
        stdin_compression: None,
        null_key: None,
        keep_null_records: false,
    }
}

/// A random CSV: a header, quoted and unquoted keys, CRLF and LF, blank lines, maybe no final
/// newline. Returns the text and its keys in order.
fn random_csv(rng: &mut impl Rng) -> (String, Vec<Vec<u8>>) {
    let mut text = String::from("id,key,note\n");
    let mut keys = Vec::new();
    for i in 0..rng.gen_range(0..60) {
        let key: String = (0..rng.gen_range(0..12)).map(|_| rng.gen_range(b'a'..=b'z') as char).collect();
        let (field, value) = match rng.gen_range(0..4) {
            0 => (format!("\"{key}\""), key.clone()),
            1 => (format!("\"{key},x\"\"y\""), format!("{key},x\"y")),
            _ => (key.clone(), key.clone()),
        };
        keys.push(value.into_bytes());
        let end = if rng.gen_bool(0.3) { "\r\n" } else { "\n" };
        let note = "n".repeat(rng.gen_range(0..40));
        text.push_str(&format!("{i},{field},{note}{end}"));
        if rng.gen_bool(0.05) {
            text.push('\n');
        }
    }
    if rng.gen_bool(0.5) && text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    (text, keys)
}

#[test]
fn every_record_is_read_once_whatever_the_split_size_and_worker_count() {
    let dir = tempdir();
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    for case in 0..40 {
        let files: Vec<_> = (0..rng.gen_range(1..4))
            .map(|f| {
                let (text, keys) = random_csv(&mut rng);
                let path = dir.path().join(format!("c{case}-{f}.csv"));
                std::fs::write(&path, text).unwrap();
                (path, keys)
            })
            .collect();
        let paths: Vec<_> = files.iter().map(|(p, _)| p.clone()).collect();
        let mut expected: Vec<Vec<u8>> = files.iter().flat_map(|(_, k)| k.clone()).collect();
        expected.sort();
        for split in [1, 2, 7, 64, 1 << 20] {
            for peers in [1, 2, 3] {
                let mut got = scanned_keys(&paths, options(split, true, KeyField::Name("key".into())), peers);
                got.sort();
                assert_eq!(got, expected, "case {case}, split size {split}, {peers} workers");
            }
        }
    }
}

/// A text's lines ended in CR alone, as classic Mac OS wrote them: its LFs and CRLFs made CRs.
fn with_cr_line_ends(text: &str) -> String {
    text.replace("\r\n", "\r").replace('\n', "\r")
}

/// A file whose lines end in CR alone is read as Hadoop's `LineReader` reads it: the same
/// records as its LF copy, whatever the split size and worker count (splits start after a CR).
#[test]
fn lines_ending_in_cr_alone_are_read_as_their_lf_copy() {
    let dir = tempdir();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for case in 0..30 {
        let (text, mut expected) = random_csv(&mut rng);
        let path = dir.path().join(format!("cr{case}.csv"));
        std::fs::write(&path, with_cr_line_ends(&text)).unwrap();
        expected.sort();
        for split in [1, 2, 7, 64, 1 << 20] {
            for peers in [1, 2, 3] {
                let mut got = scanned_keys(std::slice::from_ref(&path), options(split, true, KeyField::Name("key".into())), peers);
                got.sort();
                assert_eq!(got, expected, "case {case}, split size {split}, {peers} workers");
            }
        }
    }
}

/// The jobs read CR-terminated files, plain or compressed, into the filter of their LF copy:
/// before, a small one gave a filter of no key and no error (its text was one header line).
/// Line numbers in messages count CRs.
#[test]
fn a_build_over_cr_line_ends_is_the_build_over_lf() {
    let dir = tempdir();
    let lf = write_csv(dir.path(), "lf.csv", 3000);
    let text = with_cr_line_ends(&std::fs::read_to_string(&lf).unwrap());
    let cr = path_str(dir.path(), "cr.csv");
    std::fs::write(&cr, &text).unwrap();
    let gz = path_str(dir.path(), "cr.csv.gz");
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut encoder, text.as_bytes()).unwrap();
    std::fs::write(&gz, encoder.finish().unwrap()).unwrap();
    let sizing = ["-k", "key", "--expected-items", "3000"];
    let (reference, o) = build(dir.path(), &lf, &sizing);
    ok(&o);
    for (input, extra) in [(&cr, ["-w", "1", "--split-size", "1000000"]), (&cr, ["-w", "2", "--split-size", "997"]), (&gz, ["-w", "2", "--split-size", "997"])] {
        let out = path_str(dir.path(), "out.bloom");
        let _ = std::fs::remove_file(&out);
        let mut args = vec!["build", input.as_str(), "-o", &out, "--no-progress"];
        args.extend_from_slice(&sizing);
        args.extend_from_slice(&extra);
        let summary = ok(&run(&args));
        assert!(summary.contains("records            3000"), "{input} {extra:?}: {summary}");
        assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&reference).unwrap(), "{input} {extra:?}");
    }
    // Standard input, whose line ends are told from its first bytes as it is read.
    let out = path_str(dir.path(), "stdin.bloom");
    ok(&run_with_stdin(&[&["build", "-", "-o", &out, "--no-progress"][..], &sizing].concat(), text.as_bytes()));
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&reference).unwrap(), "standard input");
    // bzip2, split at its blocks (100 kB of text each at level 1): a split after the first
    // skips the line its first block ends, through a CR.
    let lf = write_csv(dir.path(), "lf-big.csv", 12_000);
    let text_big = with_cr_line_ends(&std::fs::read_to_string(&lf).unwrap());
    let bz2 = path_str(dir.path(), "cr-big.csv.bz2");
    let mut encoder = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    std::io::Write::write_all(&mut encoder, text_big.as_bytes()).unwrap();
    std::fs::write(&bz2, encoder.finish().unwrap()).unwrap();
    let sizing = ["-k", "key", "--expected-items", "12000", "--split-size", "1000"];
    let (reference, o) = build(dir.path(), &lf, &sizing);
    ok(&o);
    let (out, o) = build(dir.path(), &bz2, &[&sizing[..], &["-w", "2"]].concat());
    assert!(ok(&o).contains("records            12000"), "{}", ok(&o));
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&reference).unwrap(), "bzip2");
    // Without --expected-items, the size is estimated from a sample of its records.
    let (_, o) = build(dir.path(), &cr, &["-k", "key"]);
    assert!(ok(&o).contains("estimated at most 3751 keys from 57759 input bytes at a sampled mean of 19.2 bytes per record"), "{}", ok(&o));
    // A broken record in a later split of a CR file is named by its line.
    let broken = format!("{text}broken\r{}", "1,k1,p\r".repeat(200));
    std::fs::write(&cr, broken).unwrap();
    let (_, o) = build(dir.path(), &cr, &["-k", "key", "--expected-items", "10", "--split-size", "1000", "-w", "2", "--strict"]);
    fails_with(&o, &["cr.csv:3002", "the key is field 2"]);
}

/// A header longer than the first bytes read to tell a file's line ends (read again, from the
/// file) names its key as a short one does, for LF and CR line ends.
#[test]
fn a_header_longer_than_the_sample_is_read_whole() {
    let dir = tempdir();
    let columns: String = (0..12_000).map(|i| format!("column{i},")).collect();
    assert!(columns.len() > 2 * bloomflow::splits::LineEnds::SAMPLE);
    let lf_text = format!("{columns}key\n{}", (0..100).map(|i| format!("{}k{i}\n", ",".repeat(12_000))).collect::<String>());
    let lf = path_str(dir.path(), "wide.csv");
    std::fs::write(&lf, &lf_text).unwrap();
    let (reference, o) = build(dir.path(), &lf, &["-k", "key", "--expected-items", "100"]);
    assert!(ok(&o).contains("keys inserted      100"), "{}", ok(&o));
    let cr = path_str(dir.path(), "wide-cr.csv");
    std::fs::write(&cr, lf_text.replace('\n', "\r")).unwrap();
    let (out, o) = build(dir.path(), &cr, &["-k", "key", "--expected-items", "100", "-w", "2"]);
    assert!(ok(&o).contains("keys inserted      100"), "{}", ok(&o));
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&reference).unwrap());
}

#[test]
fn key_by_index_without_header_and_tsv() {
    let dir = tempdir();
    let path = dir.path().join("t.tsv");
    std::fs::write(&path, "a\t1\nb\t2\r\nc\t3").unwrap();
    let mut opts = options(3, false, KeyField::Index(2));
    opts.format.delimiter = b'\t';
    assert_eq!(scanned_keys(&[path], opts, 2).len(), 3);
}

fn build(dir: &Path, input: &str, extra: &[&str]) -> (String, std::process::Output) {
    let out = path_str(dir, &format!("{}.bloom", extra.join("_").replace(['-', '/', ' '], "")));
    let mut args = vec!["build", input, "-o", &out, "--no-progress"];
    args.extend_from_slice(extra);
    let o = run(&args);
    (out, o)
}

/// Records whose quoted fields hold line breaks (CRLFs, escaped quotes and commas too; some
/// keys among them), in three files, the last ending without a newline: `--multiline` builds
/// the filter of exactly their keys, the same at 1 and 3 workers; without it the build fails
/// naming the line whose quote runs on.
#[test]
fn multiline_records_build_the_filter_of_their_keys() {
    let dir = tempdir();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let (mut inputs, mut keys) = (Vec::new(), Vec::new());
    for f in 0..3 {
        let mut text = String::from("id,note,key\r\n");
        // Past the reader's 256 KiB buffer: records run across its refills.
        for i in 0..12_000 {
            let note = ["\"one\ntwo\"", "\"a, \"\"quoted\"\" word\r\nand more\n\n\"", "plain", "with a \"stray quote", "\"\"", "\"\n\""][rng.gen_range(0..6)];
            let (key, written) = match rng.gen_range(0..4) {
                0 => (format!("k{f}-{i}\nsecond line"), format!("\"k{f}-{i}\nsecond line\"")),
                1 => (format!("k{f}-{i}"), format!("\"k{f}-{i}\"")),
                _ => (format!("k{f}-{i}"), format!("k{f}-{i}")),
            };
            text.push_str(&format!("{i},{note},{written}{}", if rng.gen_bool(0.3) { "\r\n" } else { "\n" }));
            keys.push(key);
        }
        if f == 2 {
            text.truncate(text.trim_end().len());
        }
        let path = path_str(dir.path(), &format!("m{f}.csv"));
        std::fs::write(&path, text).unwrap();
        inputs.push(path);
    }
    let sizing = ["-k", "key", "--bits", "1000000", "--hashes", "5", "--multiline"];
    let reference = path_str(dir.path(), "reference.bloom");
    let summary = ok(&run(&[&["build", "-o", &reference, "--no-progress"][..], &inputs.iter().map(String::as_str).collect::<Vec<_>>(), &sizing].concat()));
    assert!(summary.contains("keys inserted      36000"), "{summary}");
    let loaded = bloomflow::format::load(Path::new(&reference)).unwrap().into_plain().unwrap();
    let mut want = bloomflow::filter::BloomFilter::new(*loaded.spec());
    keys.iter().for_each(|k| want.insert(k.as_bytes()));
    assert!(loaded.bits() == want.bits(), "the filter holds other keys than the records'");
    let out = path_str(dir.path(), "w3.bloom");
    ok(&run(&[&["build", "-o", &out, "--no-progress", "-w", "3", "--split-size", "100"][..], &inputs.iter().map(String::as_str).collect::<Vec<_>>(), &sizing].concat()));
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&reference).unwrap());
    let o = run(&["build", &inputs[0], "-o", &path_str(dir.path(), "plain.bloom"), "-k", "key", "--no-progress"]);
    fails_with(&o, &["m0.csv:", "unclosed quote", "--multiline"]);
}

/// With `--multiline` a filter sized from a sample of the input is sized for its records, not
/// its lines: notes of four lines do not make it four times the size, and it is still sized for
/// at least every key.
#[test]
fn multiline_sizing_counts_records_not_lines() {
    let dir = tempdir();
    let input = path_str(dir.path(), "notes.csv");
    let text: String = std::iter::once("id,note,key\n".to_string())
        .chain((0..3000).map(|i| format!("{i},\"first line {i}\nsecond\nthird\nfourth\",k{i}\n")))
        .collect();
    std::fs::write(&input, text).unwrap();
    let (_, o) = build(dir.path(), &input, &["-k", "key", "--multiline"]);
    let summary = ok(&o);
    let estimated = estimated_keys(&summary);
    assert!((3000..=3000 * 5 / 4 + 10).contains(&estimated), "{estimated} keys estimated for 3000 records of 4 lines: {summary}");
}

/// With `--multiline`, a header whose quoted names hold line breaks (a spreadsheet's wrapped
/// titles) names its columns whole: a key named so builds the filter of the key by index.
#[test]
fn multiline_header_names_hold_line_breaks() {
    let dir = tempdir();
    let input = path_str(dir.path(), "wrapped.csv");
    std::fs::write(&input, "\"customer\nid\",note,\"the\r\nkey\"\r\n1,\"a\nb\",k1\n2,x,k2\n3,\"\",\"k\n3\"\n").unwrap();
    let (by_index, o) = build(dir.path(), &input, &["-k", "3", "--multiline", "--bits", "4096", "--hashes", "3"]);
    let summary = ok(&o);
    assert!(summary.contains("records            3") && summary.contains("keys inserted      3"), "{summary}");
    let (by_name, o) = build(dir.path(), &input, &["-k", "the\r\nkey", "--multiline", "--bits", "4096", "--hashes", "3"]);
    ok(&o);
    assert_eq!(std::fs::read(by_name).unwrap(), std::fs::read(by_index).unwrap());
}

/// A file that begins with a byte order mark (as spreadsheets write CSV) and whose first record
/// opens with a quoted field holding a line break, read with `--multiline`: the quote opens a
/// field past the mark, so the break ends no record, with a final newline or without, however
/// the file is split. (Found by the `scan_records` fuzz target: the reader looked for records'
/// ends from the mark, so a file of one such record without a final newline failed as an
/// unclosed quote.)
#[test]
fn multiline_records_after_a_byte_order_mark() {
    let dir = tempdir();
    let input = path_str(dir.path(), "bom.csv");
    for (text, keys) in [("\u{feff}\"a\nb\",k1", 1), ("\u{feff}\"a\nb\",k1\n", 1), ("\u{feff}\"a\nb\",k1\n\"c\n\",k2", 2)] {
        std::fs::write(&input, text).unwrap();
        for split in ["1", "5", "1000"] {
            let (out, o) = build(dir.path(), &input, &["--no-header", "-k", "2", "--multiline", "--bits", "4096", "--hashes", "3", "--split-size", split, "-w", "2"]);
            let summary = ok(&o);
            assert!(summary.contains(&format!("records            {keys}\n")) && summary.contains("malformed records  0"), "{text:?}, splits of {split}: {summary}");
            let filter = bloomflow::format::load(Path::new(&out)).unwrap().into_plain().unwrap();
            assert!((1..=keys).all(|k| filter.contains(format!("k{k}").as_bytes())), "{text:?}, splits of {split}: a key is missing");
        }
    }
}

/// A CSV of `rows` records with keys `k<i>` in column `key`.
fn write_csv(dir: &Path, name: &str, rows: usize) -> String {
    let mut text = String::from("id,key,payload\n");
    for i in 0..rows {
        text.push_str(&format!("{i},k{i},{}\n", "p".repeat(i % 17)));
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn filters_are_byte_identical_for_1_2_and_3_workers_and_any_split_size() {
    let dir = tempdir();
    let input = write_csv(dir.path(), "in.csv", 5000);
    let reference = build(dir.path(), &input, &["-k", "key", "--expected-items", "5000"]);
    ok(&reference.1);
    let reference_bytes = std::fs::read(&reference.0).unwrap();
    for per in ["worker", "process"] {
        for (w, split) in [("1", "1000"), ("2", "1000"), ("3", "1000"), ("2", "1"), ("3", "77")] {
            let (out, o) = build(dir.path(), &input, &["-k", "key", "--expected-items", "5000", "-w", w, "--split-size", split, "--filter-per", per]);
            let summary = ok(&o);
            assert!(summary.contains("records            5000"), "{summary}");
            assert!(summary.contains(&format!("filter copies      one per {per}")), "{summary}");
            assert_eq!(std::fs::read(&out).unwrap(), reference_bytes, "-w {w} --split-size {split} --filter-per {per}");
        }
    }
    // Every inserted key answers maybe.
    let keys: String = (0..5000).map(|i| format!("k{i}\n")).collect();
    let answers = ok(&run_with_stdin(&["query", &reference.0], keys.as_bytes()));
    assert_eq!(answers.lines().filter(|l| l.ends_with("\tmaybe")).count(), 5000);
}

#[test]
fn filters_are_byte_identical_across_processes_on_loopback() {
    let dir = tempdir();
    let input = write_csv(dir.path(), "in.csv", 20_000);
    let (reference, o) = build(dir.path(), &input, &["-k", "2", "--bits", "300000", "--hashes", "5"]);
    ok(&o);
    for (processes, workers, per) in [(2, 1, "worker"), (2, 2, "worker"), (2, 2, "process")] {
        let out = path_str(dir.path(), &format!("c{processes}x{workers}-{per}.bloom"));
        let args = ["build", &input, "-k", "2", "--bits", "300000", "--hashes", "5", "-o", &out, "--split-size", "5000", "--no-progress", "--filter-per", per];
        cluster_builds_the_reference(dir.path(), (processes, workers), &args, b"", &out, &reference, 20_000);
    }
}

/// A filter that the workers of each process fill together (atomic ORs, `--filter-per
/// process`) has the bytes of one worker's, in every format and layout, counting too.
#[test]
fn a_filter_shared_by_a_process_is_byte_identical_in_every_format() {
    let dir = tempdir();
    let input = write_csv(dir.path(), "in.csv", 20_000);
    let formats: [&[&str]; 7] = [
        &["--format", "native"],
        &["--format", "native", "--counting"],
        &["--format", "hadoop", "--counting"],
        &["--format", "native", "--layout", "standard", "--hash", "lookup2"],
        &["--format", "hadoop"],
        &["--format", "hadoop", "--hash", "murmur"],
        &["--format", "spark"],
    ];
    for format in formats {
        let filter = [&["-k", "key", "--expected-items", "20000", "--split-size", "20000"][..], format].concat();
        let (reference, o) = build(dir.path(), &input, &filter);
        ok(&o);
        let (shared, o) = build(dir.path(), &input, &[&filter[..], &["-w", "3", "--filter-per", "process"]].concat());
        assert!(ok(&o).contains("filter copies      one per process"), "{format:?}");
        assert_eq!(std::fs::read(&shared).unwrap(), std::fs::read(&reference).unwrap(), "{format:?}");
    }
}

/// Runs the build `args`, whose output is `out`, as `processes` × `workers` on loopback with
/// `stdin` piped to process 0, and checks that every process succeeds, that the summary counts
/// `records`, and that the filter's bytes are `reference`'s.
#[track_caller]
fn cluster_builds_the_reference(dir: &Path, (processes, workers): (usize, usize), args: &[&str], stdin: &[u8], out: &str, reference: &str, records: u64) {
    let outs = run_cluster_with_stdin(dir, processes, workers, args, stdin, Duration::from_secs(60));
    let summary = all_ok(&outs);
    assert!(summary.contains(&format!("{processes} process(es) x {workers} worker(s)")), "{args:?}: {summary}");
    assert!(summary.contains(&format!("records            {records}\n")), "{args:?}: {summary}");
    assert_eq!(std::fs::read(out).unwrap(), std::fs::read(reference).unwrap(), "{processes} x {workers}: {args:?}");
}

/// Standard input is the job's on process 0 only, wherever `-` stands among the inputs: listed
/// after a file, its split used to be dealt to a worker of another process, which read its own
/// empty standard input, and the records piped in were lost without a word.
#[test]
fn standard_input_is_read_by_process_0_wherever_it_is_listed() {
    let dir = tempdir();
    let input = write_csv(dir.path(), "in.csv", 5_000);
    let piped: String = std::iter::once("id,key,payload\n".to_string()).chain((0..700).map(|i| format!("{i},s{i},x\n"))).collect();
    // 19 splits of the file: listed first, its splits put standard input's (the 20th) on worker 19 mod peers.
    let filter = ["-k", "key", "--bits", "100000", "--hashes", "4", "--split-size", "5147", "--no-progress"];
    let reference = path_str(dir.path(), "one.bloom");
    ok(&run_with_stdin(&[&["build", &input, "-", "-o", &reference][..], &filter[..]].concat(), piped.as_bytes()));
    assert_eq!(ok(&run(&["query", &reference, "s0", "s699", "k4999"])), "s0\tmaybe\ns699\tmaybe\nk4999\tmaybe\n");
    for (processes, workers, inputs) in [(2, 1, [input.as_str(), "-"]), (2, 2, [input.as_str(), "-"]), (3, 1, ["-", input.as_str()])] {
        let out = path_str(dir.path(), &format!("c{processes}x{workers}-{}.bloom", inputs[0] == "-"));
        let args = [&["build", inputs[0], inputs[1], "-o", &out][..], &filter[..]].concat();
        cluster_builds_the_reference(dir.path(), (processes, workers), &args, piped.as_bytes(), &out, &reference, 5_700);
    }
}

/// `jobs/local-cluster.sh` gives its standard input to process 0 (a background command's would
/// otherwise be /dev/null), so a job's `-` reads what was piped into the launcher.
#[test]
fn local_cluster_pipes_its_standard_input_to_process_0() {
    let dir = tempdir();
    let input = write_csv(dir.path(), "in.csv", 1_000);
    let out = path_str(dir.path(), "c.bloom");
    let mut child = std::process::Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/jobs/local-cluster.sh"))
        .args(["2", "1", "--", "build", &input, "-", "-k", "key", "-o", &out, "--expected-items", "2000", "--split-size", "100000", "--no-progress"])
        .env("BLOOMFLOW", env!("CARGO_BIN_EXE_bloomflow"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"id,key,payload\n1,piped,x\n").unwrap();
    let summary = ok(&child.wait_with_output().unwrap());
    assert!(summary.contains("records            1001"), "{summary}");
    assert_eq!(ok(&run(&["query", &out, "piped"])), "piped\tmaybe\n");
}

/// `jobs/local-cluster.sh` skips a port a server answers on: with bash's random numbers seeded
/// (`RANDOM` set in a `BASH_ENV` file, which bash reads before the script), the port it would
/// try first is the one this test listens on. The job must still run (on the port it took
/// instead), and the listener must have seen the launcher's probe: had the launcher handed that
/// port to a process, its listen would have failed.
#[test]
fn local_cluster_skips_a_port_a_server_answers_on() {
    let dir = tempdir();
    let input = write_csv(dir.path(), "in.csv", 1_000);
    // The launcher's range: random ports from 20000 to the start of the kernel's ephemeral range.
    let low = ephemeral_floor();
    // The first port bash picks with seed `seed`, and a listener on it (another seed if the port
    // is taken).
    let seeded = |seed: u32| {
        let path = dir.path().join(format!("seed-{seed}.sh"));
        std::fs::write(&path, format!("RANDOM={seed}\n")).unwrap();
        path
    };
    let (seed, listener) = (1..100)
        .find_map(|seed: u32| {
            let first = std::process::Command::new("bash")
                .args(["-c", &format!("echo $((20000 + RANDOM % ({low} - 20000)))")])
                .env("BASH_ENV", seeded(seed))
                .output()
                .unwrap();
            let port: u16 = String::from_utf8(first.stdout).unwrap().trim().parse().unwrap();
            Some((seed, std::net::TcpListener::bind(("127.0.0.1", port)).ok()?))
        })
        .expect("a seed whose first port is free");
    let out = path_str(dir.path(), "c.bloom");
    let o = std::process::Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/jobs/local-cluster.sh"))
        .args(["2", "1", "--", "build", &input, "-k", "key", "-o", &out, "--expected-items", "2000", "--split-size", "20000", "--no-progress"])
        .env("BLOOMFLOW", env!("CARGO_BIN_EXE_bloomflow"))
        .env("BASH_ENV", seeded(seed))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let summary = ok(&o);
    assert!(summary.contains("records            1000"), "{summary}");
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_ok(), "the launcher did not try port {} first", listener.local_addr().unwrap());
}

/// A filter of 120M bits (15 MB) gives each owner more words than one merge round carries
/// (2 MiB per owner per round), so the reduce-scatter takes several rounds and each owner sends
/// its merged words on round by round: the bytes must still match one worker's.
#[test]
fn filters_merged_over_several_rounds_are_byte_identical() {
    let dir = tempdir();
    let input = write_csv(dir.path(), "in.csv", 30_000);
    let filter = ["-k", "2", "--bits", "120000000", "--hashes", "5", "--split-size", "20000"];
    let (reference, o) = build(dir.path(), &input, &filter);
    ok(&o);
    let reference = std::fs::read(&reference).unwrap();
    let (three, o) = build(dir.path(), &input, &[&filter[..], &["-w", "3"]].concat());
    ok(&o);
    assert_eq!(std::fs::read(&three).unwrap(), reference, "-w 3");
    for per in ["worker", "process"] {
        let out = path_str(dir.path(), &format!("c2x2-{per}.bloom"));
        let args = [&["build", &input, "-o", &out, "--no-progress", "--filter-per", per][..], &filter[..]].concat();
        let outs = run_cluster(dir.path(), 2, 2, &args, Duration::from_secs(60));
        all_ok(&outs);
        assert_eq!(std::fs::read(&out).unwrap(), reference, "2 processes x 2 workers, a filter per {per}");
    }
}

#[test]
fn a_missing_peer_fails_after_the_connect_timeout() {
    let dir = tempdir();
    let input = write_csv(dir.path(), "in.csv", 10);
    let hosts = hostfile(dir.path(), 2);
    let out = path_str(dir.path(), "never.bloom");
    let started = std::time::Instant::now();
    let o = run(&[
        "build", &input, "-k", "key", "-o", &out, "-n", "2", "-p", "0",
        "--hostfile", &hosts.to_string_lossy(), "--connect-timeout", "2",
    ]);
    fails_with(&o, &["could not connect to all peers", "--connect-timeout"]);
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(!Path::new(&out).exists());
}

#[test]
fn malformed_records_are_counted_or_fail_under_strict() {
    let dir = tempdir();
    let path = dir.path().join("m.csv");
    std::fs::write(&path, "id,key\n1,a\n2\n3,c\n4\n").unwrap();
    let input = path.to_string_lossy().into_owned();
    let (out, o) = build(dir.path(), &input, &["-k", "key", "--expected-items", "10"]);
    let summary = ok(&o);
    assert!(summary.contains("malformed records  2 (skipped)"), "{summary}");
    assert!(summary.contains("m.csv:3: record has 1 field(s), but the key is field 2"), "{summary}");
    assert!(summary.contains("m.csv:5:"), "{summary}");
    assert!(summary.contains("keys inserted      2"), "{summary}");
    assert!(Path::new(&out).exists());
    let (out, o) = build(dir.path(), &input, &["-k", "key", "--expected-items", "10", "--strict"]);
    fails_with(&o, &["m.csv:3", "the key is field 2"]);
    assert!(!Path::new(&out).exists());
    // A worker whose scan fails still meets its siblings at a shared filter's barriers: the job
    // fails, in one process and in two, rather than waiting forever.
    let big = dir.path().join("big.csv");
    let mut text: String = (0..20_000).map(|i| format!("{i},k{i}\n")).collect();
    text.push_str("broken\n");
    std::fs::write(&big, format!("id,key\n{text}")).unwrap();
    let big = big.to_string_lossy().into_owned();
    let shared = ["-k", "key", "--expected-items", "20000", "--strict", "--split-size", "20000", "--filter-per", "process"];
    let (out, o) = build(dir.path(), &big, &[&shared[..], &["-w", "3"]].concat());
    fails_with(&o, &["big.csv:20002", "the key is field 2"]);
    assert!(!Path::new(&out).exists());
    let out = path_str(dir.path(), "c2x2.bloom");
    let outs = run_cluster(dir.path(), 2, 2, &[&["build", &big, "-o", &out, "--no-progress"][..], &shared[..]].concat(), Duration::from_secs(60));
    assert!(outs.iter().all(|o| !o.status.success()), "every process fails");
    assert!(String::from_utf8_lossy(&outs[0].stderr).contains("big.csv:20002"), "{:?}", outs[0]);
    assert!(!Path::new(&out).exists());
}

#[test]
fn line_numbers_are_right_in_later_splits() {
    let dir = tempdir();
    let mut text = String::from("id,key\n");
    for i in 0..1000 {
        text.push_str(&format!("{i},k{i}\n"));
    }
    text.push_str("broken\n");
    let path = dir.path().join("late.csv");
    std::fs::write(&path, text).unwrap();
    let (_, o) = build(dir.path(), &path.to_string_lossy(), &["-k", "key", "--expected-items", "10", "--split-size", "100", "-w", "2", "--strict"]);
    fails_with(&o, &["late.csv:1002"]);
}

#[test]
fn an_unclosed_quote_is_an_error_naming_file_and_line() {
    let dir = tempdir();
    let path = dir.path().join("q.csv");
    std::fs::write(&path, "id,key\n1,\"multi\nline\",x\n").unwrap();
    let (out, o) = build(dir.path(), &path.to_string_lossy(), &["-k", "key", "--expected-items", "10"]);
    fails_with(&o, &["q.csv:2", "unclosed quote"]);
    assert!(!Path::new(&out).exists());
}

#[test]
fn directories_stdin_and_empty_files() {
    let dir = tempdir();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    write_csv(&data, "b.csv", 30);
    write_csv(&data, "a.csv", 20);
    std::fs::write(data.join("empty.csv"), "").unwrap();
    std::fs::write(data.join("_SUCCESS"), "{}").unwrap();
    let (out, o) = build(dir.path(), &data.to_string_lossy(), &["-k", "key", "--expected-items", "100"]);
    assert!(ok(&o).contains("records            50"));
    let answers = ok(&run(&["query", &out, "k0", "k29"]));
    assert_eq!(answers, "k0\tmaybe\nk29\tmaybe\n");

    let stdin_out = path_str(dir.path(), "stdin.bloom");
    let o = run_with_stdin(
        &["build", "-", "-k", "key", "-o", &stdin_out, "--expected-items", "100"],
        b"id,key\n1,x\n2,y\n",
    );
    assert!(ok(&o).contains("records            2"));
    assert_eq!(ok(&run(&["query", &stdin_out, "x", "y"])), "x\tmaybe\ny\tmaybe\n");
    // With several workers, which claim the file's splits, standard input is still read once.
    let file = write_csv(dir.path(), "more.csv", 3000);
    let o = run_with_stdin(
        &["build", "-", &file, "-k", "key", "-o", &stdin_out, "--expected-items", "4000", "-w", "3", "--split-size", "1000"],
        b"id,key\n1,x\n2,y\n",
    );
    assert!(ok(&o).contains("records            3002"));
    assert_eq!(ok(&run(&["query", &stdin_out, "x", "y", "k2999"])), "x\tmaybe\ny\tmaybe\nk2999\tmaybe\n");
    // Standard input cannot be sized by estimate.
    let o = run_with_stdin(&["build", "-", "-k", "key", "-o", &stdin_out], b"id,key\n1,x\n");
    fails_with(&o, &["--expected-items"]);
}

#[test]
fn estimated_sizing_is_an_upper_bound_and_says_so() {
    let dir = tempdir();
    let input = write_csv(dir.path(), "in.csv", 10_000);
    let (out, o) = build(dir.path(), &input, &["-k", "key", "--fpp", "0.01"]);
    let summary = ok(&o);
    assert!(summary.contains("estimated at most"), "{summary}");
    let info: serde_json::Value = serde_json::from_str(&ok(&run(&["info", &out, "--json"]))).unwrap();
    let n = info["expected_items"].as_u64().unwrap();
    assert!((10_000..20_000).contains(&n), "{n}");
    assert!(info["estimated_fpp"].as_f64().unwrap() < 0.01);
}

/// The sample of an estimate is spread over all of a large input, not its first megabytes:
/// a file whose first 2 MB hold records six times the length of the rest's (an older schema,
/// a sorted column) is still sized for every key. Sampled at its start, it was sized for a
/// sixth of them.
///
///
/// So under `--multiline`, its windows moved to records' starts: there the first 2 MB hold
/// quoted notes of two long lines each, and the rest notes of three short ones. Sampled from
/// the file's start, as it was, it was sized for 286,279 of its 773,595 keys. And where the
/// rest's notes end in a line break, so that no record start is certain (read from inside a
/// field, `",k7` opens one), the windows are read both ways: left out, the file was sized for
/// 571,473 of its 951,459 keys (and, folded, is now sized for them). A file of 6 MiB, which the
/// windows would read all of, is read whole, not its first MiB.
#[test]
fn estimated_sizing_samples_all_of_a_large_input() {
    let dir = tempdir();
    let plain = |keys: u64, long: bool| match long {
        true => format!("{keys:0>100},k{keys}\n"),
        false => format!("{keys},k{keys}\n"),
    };
    let notes = |keys: u64, long: bool| match long {
        true => format!("\"{keys:0>50}\n{keys:0>50}\",k{keys}\n"),
        false => format!("\"{keys}\n{keys}\n{keys}\",k{keys}\n"),
    };
    let uncertain = |keys: u64, long: bool| match long {
        true => format!("\"{keys:0>50}\n{keys:0>50}\",k{keys}\n"),
        false => format!("\"{keys}\n{keys}\n\",k{keys}\n"),
    };
    let multiline = &["--multiline"][..];
    // (A file of 6 MiB, less than the windows would read, is read whole.)
    for (name, record, flags, size) in [
        ("skewed.csv", &plain as &dyn Fn(u64, bool) -> String, &[][..], 24 << 20),
        ("notes.csv", &notes, multiline, 24 << 20),
        ("uncertain.csv", &uncertain, multiline, 24 << 20),
        ("small-notes.csv", &notes, multiline, 6 << 20),
    ] {
        let input = path_str(dir.path(), name);
        let mut text = String::from("id,key\n");
        let mut keys = 0u64;
        while text.len() < size {
            text.push_str(&record(keys, text.len() < 2 << 20));
            keys += 1;
        }
        std::fs::write(&input, &text).unwrap();
        let (out, o) = build(dir.path(), &input, &[&["-k", "key", "--fpp", "0.01"][..], flags].concat());
        let summary = ok(&o);
        assert!(summary.contains(&format!("keys inserted      {keys}")), "{summary}");
        let info: serde_json::Value = serde_json::from_str(&ok(&run(&["info", &out, "--json"]))).unwrap();
        let n = info["expected_items"].as_u64().unwrap();
        assert!((keys..keys * 2).contains(&n), "{name}: sized for {n} keys of {keys}: {summary}");
        // Warnings go to standard error.
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!stderr.contains("warning"), "{name}: {stderr}");
    }
}

/// `build --plan` says what the build would make, and builds and writes nothing: its bits and
/// hashes are those the build gives (before any fold), sized by estimate or by
/// `--expected-items`; a plan of a cluster job contacts no peer; a filter that would not fit
/// in memory fails the plan as it would fail the build.
#[test]
fn a_plan_says_what_the_build_would_make_and_writes_nothing() {
    let dir = tempdir();
    let input = write_csv(dir.path(), "in.csv", 20_000);
    let out = path_str(dir.path(), "plan.bloom");
    let plan_json = path_str(dir.path(), "plan.json");
    let stats_json = path_str(dir.path(), "stats.json");
    let read_json = |path: &str| -> serde_json::Value { serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap() };
    for sizing in [&[][..], &["--expected-items", "50000", "--fpp", "0.001"][..]] {
        let args = [&["build", &input, "-k", "key", "-o", &out, "-w", "2", "--split-size", "100000"][..], sizing].concat();
        let summary = ok(&run(&[&args[..], &["--plan", "--stats-json", &plan_json][..]].concat()));
        assert!(summary.contains("plan only (nothing built or written)"), "{summary}");
        assert!(!Path::new(&out).exists(), "a plan writes no filter");
        let plan = read_json(&plan_json);
        ok(&run(&[&args[..], &["--no-progress", "--stats-json", &stats_json][..]].concat()));
        let stats = read_json(&stats_json);
        let built_bits = stats["folded_from_bits"].as_u64().or(stats["bits"].as_u64());
        assert_eq!(plan["bits"].as_u64(), built_bits, "{sizing:?}: {summary}");
        assert_eq!(plan["hashes"], stats["hashes"]);
        assert_eq!(plan["expected_items"], stats["expected_items"]);
        assert_eq!(plan["splits"].as_u64(), Some(std::fs::metadata(&input).unwrap().len().div_ceil(100_000)));
        assert!(summary.contains(&format!("bits (m)           {}", built_bits.unwrap())), "{summary}");
        std::fs::remove_file(&out).unwrap();
    }
    // A cluster's process plans alone, at once.
    let summary = ok(&run(&["build", &input, "-k", "key", "-o", &out, "--plan", "-n", "2", "-p", "1", "-w", "2", "--expected-items", "1000"]));
    assert!(summary.contains("workers            2 process(es) x 2 worker(s)"), "{summary}");
    assert!(summary.contains("filter copies      one per worker, 2 in a process"), "{summary}");
    // Standard input, whose size is unknown, is said to be read, and is not read.
    let o = run_with_stdin(&["build", "-", &input, "-k", "key", "-o", &out, "--plan", "--expected-items", "1000"], b"id,key\n1,x\n");
    let summary = ok(&o);
    assert!(summary.contains("inputs             1 file(s), ") && summary.contains(", and standard input (of unknown size)"), "{summary}");
    assert!(summary.contains(&format!("the largest {} bytes", std::fs::metadata(&input).unwrap().len())), "{summary}");
    // Counters for 10^11 keys need 464 GiB.
    let o = run(&["build", &input, "-k", "key", "-o", &out, "--plan", "--counting", "--expected-items", "100000000000"]);
    fails_with(&o, &["the counting filter", "GiB of memory is available"]);
    assert!(!Path::new(&out).exists());
}

#[test]
fn an_explicit_size_rounded_up_says_so() {
    let dir = tempdir();
    let input = write_csv(dir.path(), "in.csv", 100);
    for (flags, bits, note) in [
        (&["--bits", "1000"][..], 1024, "1000 bits (rounded up to 1024, a whole number of 512-bit blocks), 3 hashes"),
        (&["--bits", "100", "--format", "spark"][..], 128, "100 bits (rounded up to 128, a whole number of 64-bit words), 3 hashes"),
        (&["--bits", "1024"][..], 1024, "explicit size: 1024 bits, 3 hashes"),
    ] {
        let (out, o) = build(dir.path(), &input, &[&["-k", "key", "--hashes", "3"][..], flags].concat());
        let summary = ok(&o);
        assert!(summary.contains(note), "{summary}");
        let info: serde_json::Value = serde_json::from_str(&ok(&run(&["info", &out, "--json"]))).unwrap();
        assert_eq!(info["bits"].as_u64(), Some(bits));
    }
}

#[test]
fn stats_json_holds_the_summary() {
    let dir = tempdir();
    let input = write_csv(dir.path(), "in.csv", 100);
    let stats = path_str(dir.path(), "stats.json");
    let (_, o) = build(dir.path(), &input, &["-k", "key", "--expected-items", "100", "-w", "2", "--stats-json", &stats]);
    ok(&o);
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(json["records"], 100);
    assert_eq!(json["keys_inserted"], 100);
    assert_eq!(json["per_worker"].as_array().unwrap().len(), 2);
    assert_eq!(json["hashes"], 7);
    assert!(json["fill_ratio"].as_f64().unwrap() > 0.0);
    check_timeline(&json, &["workers running", "filter merged", "filter written"]);
    assert!(ok(&o).contains("  timeline           workers running "), "the summary's timeline");
}

#[test]
fn bad_flags_are_refused() {
    let dir = tempdir();
    let input = write_csv(dir.path(), "in.csv", 10);
    let out = path_str(dir.path(), "x.bloom");
    for (flags, needle) in [
        (vec!["--fpp", "0"], "--fpp"),
        (vec!["--fpp", "1"], "--fpp"),
        (vec!["--fpp", "-1"], "--fpp"),
        (vec!["--fpp", "NaN"], "--fpp"),
        (vec!["--expected-items", "0"], "--expected-items"),
        (vec!["--bits", "100", "--hashes", "0"], "hashes"),
        (vec!["--bits", "0", "--hashes", "3"], "bits"),
        (vec!["-d", "ab"], "--delimiter"),
        (vec!["--split-size", "0"], "--split-size"),
        (vec!["-k", "0"], "1-based"),
    ] {
        let mut args = vec!["build", &input, "-o", &out];
        if !flags.contains(&"-k") {
            args.extend(["-k", "key"]);
        }
        args.extend(flags.iter().copied());
        fails_with(&run(&args), &[needle]);
        assert!(!Path::new(&out).exists());
    }
}

#[test]
fn many_small_files_in_a_directory() {
    let dir = tempdir();
    let data = dir.path().join("many");
    std::fs::create_dir(&data).unwrap();
    let mut all = String::new();
    for f in 0..150 {
        let mut text = String::from("id,key\n");
        for i in 0..(f % 7) {
            text.push_str(&format!("{i},f{f}-{i}\n"));
        }
        all.push_str(&text[7..]);
        std::fs::write(data.join(format!("part-{f:05}")), text).unwrap();
    }
    let single = dir.path().join("single.csv");
    std::fs::write(&single, format!("id,key\n{all}")).unwrap();
    let (a, o) = build(dir.path(), &data.to_string_lossy(), &["-k", "key", "--bits", "5000", "--hashes", "4", "-w", "3"]);
    assert!(ok(&o).contains(&format!("records            {}", all.lines().count())));
    let (b, o) = build(dir.path(), &single.to_string_lossy(), &["-k", "key", "--bits", "5000", "--hashes", "4"]);
    ok(&o);
    assert_eq!(std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
}

/// `text` with a UTF-8 byte order mark in front, as Excel and PowerShell write it.
fn with_bom(text: &str) -> Vec<u8> {
    [b"\xEF\xBB\xBF".as_slice(), text.as_bytes()].concat()
}

/// A UTF-8 byte order mark where a file starts is dropped, as Hadoop's LineRecordReader drops
/// it: files that start with one build the filter of the same files without it (a header's
/// first column name resolves; the first record's first field is its text alone), plain or
/// compressed, for any workers and split size. A mark later in a file is data.
#[test]
fn a_byte_order_mark_where_a_file_starts_is_dropped_as_hadoop_drops_it() {
    let dir = tempdir();
    // Builds a filter keyed on the first field into `out`: by name with a header, else by
    // index. Returns its bytes and the summary's record count.
    let build_to = |input: &str, out: &str, args: &[&str]| -> (Vec<u8>, String) {
        let out = path_str(dir.path(), out);
        let key = if args.contains(&"--no-header") { "1" } else { "id" };
        let summary = ok(&run(&[&["build", input, "-o", &out, "--no-progress", "-k", key, "--expected-items", "400"][..], args].concat()));
        let records = summary.lines().find(|l| l.trim_start().starts_with("records ")).unwrap_or_default().trim().to_string();
        (std::fs::read(out).unwrap(), records)
    };
    let rows: String = (0..300).map(|i| format!("{i},k{i},x\n")).collect();
    let with_header = format!("id,key,payload\n{rows}");
    for (name, text, header) in [("header", &with_header, &[][..]), ("noheader", &rows, &["--no-header"][..])] {
        let plain = path_str(dir.path(), &format!("{name}.csv"));
        std::fs::write(&plain, text).unwrap();
        let (reference, _) = build_to(&plain, &format!("{name}.bloom"), header);

        let marked = path_str(dir.path(), &format!("{name}-bom.csv"));
        std::fs::write(&marked, with_bom(text)).unwrap();
        let gz = path_str(dir.path(), &format!("{name}-bom.csv.gz"));
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut encoder, &with_bom(text)).unwrap();
        std::fs::write(&gz, encoder.finish().unwrap()).unwrap();
        for (input, extra) in [(&marked, &[][..]), (&marked, &["-w", "2", "--split-size", "100"][..]), (&gz, &[][..])] {
            let (bytes, records) = build_to(input, "marked.bloom", &[header, extra].concat());
            assert_eq!(records, "records            300", "{input} {extra:?}");
            assert!(bytes == reference, "{input} {extra:?}: not the filter of the text without the mark");
        }
    }

    // Later in a file, the mark is part of the record: key "\u{feff}299" is a key of its own.
    let later = path_str(dir.path(), "later.csv");
    std::fs::write(&later, [rows.as_bytes(), &with_bom("299,k299,x\n")].concat()).unwrap();
    let (bytes, _) = build_to(&later, "later.bloom", &["--no-header"]);
    assert_ne!(bytes, std::fs::read(dir.path().join("noheader.bloom")).unwrap());
    let answers = ok(&run(&["query", &path_str(dir.path(), "later.bloom"), "\u{feff}299"]));
    assert_eq!(answers, "\u{feff}299\tmaybe\n");

    // `query` drops a mark where its standard input starts.
    let answers = ok(&run_with_stdin(&["query", &path_str(dir.path(), "noheader.bloom")], &with_bom("0\n1\n")));
    assert_eq!(answers, "0\tmaybe\n1\tmaybe\n");
}

/// Writes a partitioned table under `table`: for each (partition, rows), the records `i,k<i>` of
/// those rows into `partition/part-00000.csv`, under a header. Returns each partition's records.
fn partitioned_table(table: &Path, parts: &[(&str, std::ops::Range<u32>)]) -> Vec<String> {
    parts
        .iter()
        .map(|(part, rows)| {
            let at = table.join(part);
            std::fs::create_dir_all(&at).unwrap();
            let text: String = rows.clone().map(|i| format!("{i},k{i}\n")).collect();
            std::fs::write(at.join("part-00000.csv"), format!("id,key\n{text}")).unwrap();
            text
        })
        .collect()
}

/// A directory is read with the files beneath it, as Spark reads a partitioned table
/// (`date=…/part-…`): the filter is that of all the files' records, in any worker count.
/// Hidden and `_`-prefixed entries are skipped at every level (a job's `_temporary/`, a
/// `.crc`), and a symbolic link looping back up the tree is refused, naming it.
#[test]
fn a_partitioned_table_is_read_with_its_subdirectories() {
    let dir = tempdir();
    let table = dir.path().join("table");
    let parts = partitioned_table(&table, &[("date=2026-11-29", 0..40), ("date=2026-11-30", 40..90), ("date=2026-11-30/hour=07", 90..100)]);
    let all = format!("id,key\n{}", parts.concat());
    // Skipped: a failed job's leftovers and Hadoop's checksum files.
    std::fs::create_dir_all(table.join("date=2026-11-30/_temporary/0")).unwrap();
    std::fs::write(table.join("date=2026-11-30/_temporary/0/part-00000.csv"), "id,key\n1,stale\n").unwrap();
    std::fs::write(table.join("date=2026-11-29/.part-00000.csv.crc"), "crc").unwrap();
    let single = path_str(dir.path(), "all.csv");
    std::fs::write(&single, &all).unwrap();

    let (reference, o) = build(dir.path(), &single, &["-k", "key", "--bits", "4096", "--hashes", "5"]);
    ok(&o);
    for workers in ["1", "3"] {
        let (out, o) = build(dir.path(), &table.to_string_lossy(), &["-k", "key", "--bits", "4096", "--hashes", "5", "-w", workers]);
        assert!(ok(&o).contains("records            100"), "-w {workers}");
        assert!(std::fs::read(out).unwrap() == std::fs::read(&reference).unwrap(), "-w {workers}: not the filter of every file's records");
    }

    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&table, table.join("date=2026-11-30/back")).unwrap();
        let (out, o) = build(dir.path(), &table.to_string_lossy(), &["-k", "key", "--bits", "4096", "--hashes", "5", "-w", "2"]);
        fails_with(&o, &["date=2026-11-30/back: a symbolic link loops back to"]);
        assert!(!Path::new(&out).exists());
    }
}

/// A quoted glob is expanded by the job, as Hadoop's `FileInputFormat` expands one: over a
/// partitioned table, `table/date=*/part-*` and `table/date=2026-11-{29,30}` build the filter of
/// the files they match (at any worker count, and in 2 processes, each expanding it), a match
/// named `_temporary` is left out (but a wildcard on the way reaches into it, as in Hadoop), a
/// glob that matches nothing is refused naming it, and a file whose name holds a wildcard is
/// read as itself.
#[test]
fn globs_are_expanded_as_hadoop_expands_them() {
    let dir = tempdir();
    let table = dir.path().join("table");
    let parts = partitioned_table(&table, &[("date=2026-11-29", 0..40), ("date=2026-11-30", 40..90), ("date=2026-12-01", 90..100)]);
    // November's records: the first two partitions'.
    let direct = format!("id,key\n{}", parts[..2].concat());
    // A failed job's leftovers, which `table/*` leaves out.
    std::fs::create_dir_all(table.join("_temporary")).unwrap();
    std::fs::write(table.join("_temporary/part-00000.csv"), "id,key\n1,stale\n").unwrap();
    let single = path_str(dir.path(), "november.csv");
    std::fs::write(&single, &direct).unwrap();
    let args = ["-k", "key", "--bits", "4096", "--hashes", "5"];
    let (reference, o) = build(dir.path(), &single, &args);
    ok(&o);

    let every_date = table.join("*").to_string_lossy().into_owned();
    let (all, o) = build(dir.path(), &every_date, &[&args[..], &["-w", "2"]].concat());
    assert!(ok(&o).contains("records            100"), "the three dates, not _temporary/");
    assert_ne!(std::fs::read(&all).unwrap(), std::fs::read(&reference).unwrap());
    let every_part = table.join("*/part-*").to_string_lossy().into_owned();
    let (_, o) = build(dir.path(), &every_part, &[&args[..], &["-w", "2"]].concat());
    assert!(ok(&o).contains("records            101"), "the three dates and _temporary/'s part, as Hadoop's globStatus takes them");
    for pattern in ["date=2026-11-*/part-*", "date=2026-11-{29,30}", "date=2026-11-[23]?"] {
        let glob = table.join(pattern).to_string_lossy().into_owned();
        for workers in ["1", "3"] {
            let (out, o) = build(dir.path(), &glob, &[&args[..], &["-w", workers]].concat());
            assert!(ok(&o).contains("records            90"), "{pattern} -w {workers}");
            assert!(std::fs::read(out).unwrap() == std::fs::read(&reference).unwrap(), "{pattern} -w {workers}");
        }
    }
    let out = path_str(dir.path(), "p2.bloom");
    let glob = table.join("date=2026-11-*").to_string_lossy().into_owned();
    all_ok(&run_cluster(dir.path(), 2, 1, &["build", &glob, "-o", &out, "--no-progress", "-k", "key", "--bits", "4096", "--hashes", "5"], std::time::Duration::from_secs(60)));
    assert!(std::fs::read(&out).unwrap() == std::fs::read(&reference).unwrap(), "2 processes");

    let none = table.join("date=2025-*").to_string_lossy().into_owned();
    let out = path_str(dir.path(), "none.bloom");
    fails_with(&run(&[&["build", &none, "-o", &out][..], &args[..]].concat()), &["date=2025-*: the glob matches no file or directory"]);
    assert!(!Path::new(&out).exists());
    // A name with a wildcard in it, which exists, is the file itself.
    let odd = path_str(dir.path(), "odd[1].csv");
    std::fs::write(&odd, &direct).unwrap();
    let (out, o) = build(dir.path(), &odd, &args);
    ok(&o);
    assert!(std::fs::read(out).unwrap() == std::fs::read(&reference).unwrap());
}

/// `--null-key`: records whose key is written as the NULL text are skipped, not inserted and
/// not malformed: the filter is byte for byte the one built without them, at any worker count.
/// A quoted `""` is the empty key. Hadoop's filters, which refuse the empty key, take empty
/// fields as NULL without a complaint; an input of NULLs only builds an empty filter.
#[test]
fn null_keys_are_skipped() {
    let dir = tempdir();
    let (mut with, mut without) = (String::from("id,key\n"), String::from("id,key\n"));
    for i in 0..1000 {
        let key = match i % 5 {
            0 => String::new(),
            1 if i % 7 == 0 => "\"\"".into(),
            _ => format!("k{i}"),
        };
        with.push_str(&format!("{i},{key}\n"));
        if !key.is_empty() {
            without.push_str(&format!("{i},{key}\n"));
        }
    }
    let (with_path, without_path) = (path_str(dir.path(), "with.csv"), path_str(dir.path(), "without.csv"));
    std::fs::write(&with_path, &with).unwrap();
    std::fs::write(&without_path, &without).unwrap();
    let sizing = ["-k", "key", "--bits", "65536", "--hashes", "5"];
    let (reference, o) = build(dir.path(), &without_path, &sizing);
    ok(&o);
    for workers in ["1", "2"] {
        let stats = path_str(dir.path(), &format!("stats-{workers}.json"));
        let (out, o) = build(dir.path(), &with_path, &[&sizing[..], &["--null-key", "", "-w", workers, "--split-size", "2048", "--stats-json", &stats]].concat());
        let summary = ok(&o);
        assert!(summary.contains("NULL keys          200 (skipped)"), "{summary}");
        let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        assert_eq!((json["records"].as_u64(), json["null_keys"].as_u64(), json["keys_inserted"].as_u64(), json["malformed"].as_u64()), (Some(1000), Some(200), Some(800), Some(0)));
        assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&reference).unwrap(), "-w {workers}");
    }
    // Hadoop's filters refuse the empty key: an empty field is NULL with --null-key '', but
    // the quoted `""` (28 of them) is the empty key, and malformed; without, both are.
    let (_, o) = build(dir.path(), &with_path, &["-k", "key", "--format", "hadoop", "--expected-items", "1000", "--null-key", ""]);
    let summary = ok(&o);
    assert!(summary.contains("malformed records  28 (skipped)") && summary.contains("NULL keys          200 (skipped)"), "{summary}");
    let (_, o) = build(dir.path(), &with_path, &["-k", "key", "--format", "hadoop", "--expected-items", "1000"]);
    let summary = ok(&o);
    assert!(summary.contains("malformed records  228 (skipped)") && !summary.contains("NULL"), "{summary}");
    let nulls = path_str(dir.path(), "nulls.csv");
    std::fs::write(&nulls, "id,key\n1,\\N\n2,\\N\n").unwrap();
    let (_, o) = build(dir.path(), &nulls, &["-k", "key", "--expected-items", "10", "--null-key", "\\N"]);
    let summary = ok(&o);
    assert!(summary.contains("keys inserted      0\n") && summary.contains("NULL keys          2 (skipped)"), "{summary}");
}

/// A file and a hard link to it are one input given twice: the build reads it twice (its filter
/// is the same; a counting filter's counts double) and warns, naming both paths, whose device
/// and inode are the same.
#[cfg(unix)]
#[test]
fn a_file_and_its_hard_link_are_one_input_read_twice_with_a_warning() {
    let dir = tempdir();
    let input = path_str(dir.path(), "in.csv");
    std::fs::write(&input, "id,key\n1,a\n2,b\n").unwrap();
    let link = path_str(dir.path(), "link.csv");
    std::fs::hard_link(&input, &link).unwrap();
    let out = path_str(dir.path(), "f.bloom");
    let stats = path_str(dir.path(), "stats.json");
    let o = run(&["build", &input, &link, "-k", "key", "-o", &out, "--no-progress", "--counting", "--stats-json", &stats]);
    let summary = ok(&o);
    assert!(summary.contains("records            4"), "{summary}");
    let warning = format!("{input} and {link} are one file: its records are read twice");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains(&format!("warning: {warning}")), "{stderr}");
    let stats: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
    assert!(stats["warnings"][0].as_str().unwrap().starts_with(&warning), "{}", stats["warnings"]);
}

/// A filter sized for too few keys says so, in the summary and the statistics: 5,000 distinct
/// keys in a filter sized for 1,000 (or 4,000) at 1%, whose rate is then far (or 2.5 times)
/// over the target, are warned of with the rate and an `--expected-items` that would meet it;
/// sized for 5,000, or with `--bits`, nothing is said. A semi-join's build side says so too.
#[test]
fn a_filter_sized_for_too_few_keys_says_so() {
    use crate::util::{ok, path_str, run, tempdir};
    let dir = tempdir();
    let rows: String = std::iter::once("id,key\n".to_string()).chain((0..5_000).map(|i| format!("{i},key-{i}\n"))).collect();
    let input = path_str(dir.path(), "keys.csv");
    std::fs::write(&input, rows).unwrap();
    let build = |extra: &[&str]| {
        let (filter, stats) = (path_str(dir.path(), "f.bloom"), path_str(dir.path(), "f.json"));
        let o = run(&[&["build", &input, "-k", "key", "-o", &filter, "--no-progress", "--stats-json", &stats][..], extra].concat());
        ok(&o);
        let stats: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
        (String::from_utf8_lossy(&o.stderr).into_owned(), stats)
    };
    for (expected, rate) in [("1000", 0.3), ("4000", 0.02)] {
        let (stderr, stats) = build(&["--expected-items", expected]);
        let fpp = stats["estimated_fpp"].as_f64().unwrap();
        assert!(fpp > rate, "{expected}: {fpp}");
        let warning = stats["warnings"][0].as_str().unwrap_or_else(|| panic!("{expected}: no warning in {stats}"));
        assert!(warning.starts_with(&format!("the filter was sized for {expected} keys, but its fill shows about ")), "{warning}");
        assert!(warning.contains("above the target 0.01: --expected-items 5"), "{warning}");
        assert!(stderr.contains(&format!("warning: {warning}")), "{stderr}");
        // The suggested size meets the target.
        let suggested = warning.rsplit("--expected-items ").next().unwrap().split(' ').next().unwrap().to_string();
        let (stderr, stats) = build(&["--expected-items", &suggested]);
        assert!(stats["estimated_fpp"].as_f64().unwrap() <= 0.01 && !stderr.contains("warning"), "{suggested}: {stats} {stderr}");
    }
    for extra in [&["--expected-items", "5000"][..], &["--bits", "20000", "--hashes", "3"]] {
        let (stderr, stats) = build(extra);
        assert!(!stderr.contains("warning") && stats["warnings"].as_array().unwrap().is_empty(), "{extra:?}: {stderr}");
    }
    let out = path_str(dir.path(), "joined");
    let o = run(&["semijoin", "--build", &input, "--build-key", "key", "--probe", &input, "--probe-key", "key", "-o", &out, "--expected-items", "1000", "--no-progress"]);
    ok(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("warning: build side: the filter was sized for 1000 keys, but its fill shows about "), "{stderr}");
}

/// A build sized from the input's size over keys that repeat (40,000 rows of 1,000 distinct
/// keys, sized for the 62,500 estimated) folds its filter to the size its distinct keys need,
/// by a power of two: byte for byte the same file from 1 worker, 2 and 2 processes, and, but
/// for the sizes recorded, the filter that `--bits` of that size would have built; every key is
/// in it, and it meets its rate. Sized by `--expected-items`, it is left as it is. Hadoop's and
/// Spark's filters fold too, and a counting filter's counters (by saturating sums). A
/// semi-join's build side folds alike (with the broadcast join: `auto` would hold this small
/// probe side's keys instead, and build no filter).
#[test]
fn a_build_over_repeated_keys_folds_its_filter_to_their_size() {
    use crate::util::{ok, path_str, run, tempdir};
    let dir = tempdir();
    let rows: String = std::iter::once("id,key\n".to_string()).chain((0..40_000).map(|i| format!("{i},key-{}\n", i % 1_000))).collect();
    let input = path_str(dir.path(), "repeats.csv");
    std::fs::write(&input, rows).unwrap();
    let stats_of = |path: &str| -> serde_json::Value { serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap() };
    let mut files = Vec::new();
    for (name, workers) in [("w1", "1"), ("w2", "2")] {
        let (filter, stats) = (path_str(dir.path(), &format!("{name}.bloom")), path_str(dir.path(), &format!("{name}.json")));
        let o = run(&["build", &input, "-k", "key", "-o", &filter, "-w", workers, "--no-progress", "--stats-json", &stats]);
        let summary = ok(&o);
        assert!(summary.contains("folded from"), "{summary}");
        assert!(!String::from_utf8_lossy(&o.stderr).contains("warning"), "{}", String::from_utf8_lossy(&o.stderr));
        files.push(std::fs::read(&filter).unwrap());
        let stats = stats_of(&stats);
        let (from, bits) = (stats["folded_from_bits"].as_u64().unwrap(), stats["bits"].as_u64().unwrap());
        assert!(from >= 16 * bits && from.is_multiple_of(bits), "{stats}");
        assert!(stats["estimated_fpp"].as_f64().unwrap() <= 0.01, "{stats}");
        assert_eq!(stats["expected_items"], 1_100, "the distinct keys, a tenth more, sized for");
    }
    let cluster = path_str(dir.path(), "p2.bloom");
    crate::util::all_ok(&crate::util::run_cluster(dir.path(), 2, 1, &["build", &input, "-k", "key", "-o", &cluster, "--no-progress"], std::time::Duration::from_secs(60)));
    files.push(std::fs::read(&cluster).unwrap());
    assert!(files.windows(2).all(|pair| pair[0] == pair[1]), "the folded filter is the same file whatever the workers");
    let files_bits = stats_of(&path_str(dir.path(), "w2.json"))["bits"].clone();
    // The filter `--bits` of the folded size builds: the same bits and hashes, the same bits set.
    let info = |path: &str| -> serde_json::Value { serde_json::from_str(&ok(&run(&["info", path, "--json"]))).unwrap() };
    let folded = info(&path_str(dir.path(), "w2.bloom"));
    let direct_path = path_str(dir.path(), "direct.bloom");
    let (bits, hashes) = (folded["bits"].to_string(), folded["hashes"].to_string());
    ok(&run(&["build", &input, "-k", "key", "-o", &direct_path, "-w", "2", "--no-progress", "--bits", &bits, "--hashes", &hashes]));
    let direct = info(&direct_path);
    for field in ["bits", "hashes", "bits_set", "scheme", "layout"] {
        assert_eq!(folded[field], direct[field], "{field}");
    }
    let keys: String = (0..1_000).map(|i| format!("key-{i}\n")).collect();
    let answers = ok(&crate::util::run_with_stdin(&["query", &path_str(dir.path(), "w2.bloom")], keys.as_bytes()));
    assert_eq!(answers.lines().filter(|line| line.ends_with("\tmaybe")).count(), 1_000, "every key is in the folded filter");
    // Sized as asked, it is not folded.
    let sized = path_str(dir.path(), "sized.json");
    ok(&run(&["build", &input, "-k", "key", "-o", &path_str(dir.path(), "sized.bloom"), "--no-progress", "--expected-items", "1100", "--stats-json", &sized]));
    assert!(stats_of(&sized)["folded_from_bits"].is_null());
    // Folded by a factor of its size, not only a power of two, the filter is within a quarter
    // of the size that filter has (12,288 bits against 11,264; folded by powers of two, 31,232).
    let (folded_bits, sized_bits) = (files_bits.as_u64().unwrap(), stats_of(&sized)["bits"].as_u64().unwrap());
    assert!(folded_bits >= sized_bits && folded_bits * 4 <= sized_bits * 5, "{folded_bits} folded, {sized_bits} sized");
    // Hadoop's and Spark's filters fold too, and every key is in them.
    for format in ["hadoop", "spark"] {
        let path = path_str(dir.path(), &format!("{format}.bloom"));
        let summary = ok(&run(&["build", &input, "-k", "key", "-o", &path, "--format", format, "-w", "2", "--no-progress"]));
        assert!(summary.contains("folded from"), "{format}: {summary}");
        let answers = ok(&crate::util::run_with_stdin(&["query", &path], keys.as_bytes()));
        assert_eq!(answers.lines().filter(|line| line.ends_with("\tmaybe")).count(), 1_000, "{format}");
    }
    // A counting filter folds its counters: the same file whatever the workers, the counting
    // filter of that size, and every key is in it, counted 40 times (saturated at 15).
    let mut counting = Vec::new();
    for workers in ["1", "2"] {
        let path = path_str(dir.path(), &format!("counting-w{workers}.bloom"));
        let o = run(&["build", &input, "-k", "key", "-o", &path, "--counting", "-w", workers, "--no-progress"]);
        let summary = ok(&o);
        assert!(summary.contains("folded from"), "{summary}");
        assert!(!String::from_utf8_lossy(&o.stderr).contains("warning"), "{}", String::from_utf8_lossy(&o.stderr));
        counting.push(std::fs::read(&path).unwrap());
    }
    assert!(counting[0] == counting[1], "the folded counting filter is the same file whatever the workers");
    let folded = info(&path_str(dir.path(), "counting-w2.bloom"));
    let direct_path = path_str(dir.path(), "counting-direct.bloom");
    let (bits, hashes) = (folded["bits"].to_string(), folded["hashes"].to_string());
    ok(&run(&["build", &input, "-k", "key", "-o", &direct_path, "--counting", "-w", "2", "--no-progress", "--bits", &bits, "--hashes", &hashes]));
    assert!(std::fs::read(&direct_path).unwrap() != counting[1], "the direct build was sized, not estimated");
    let direct = info(&direct_path);
    for field in ["bits", "hashes", "bits_set", "saturated_counters"] {
        assert_eq!(folded[field], direct[field], "{field}");
    }
    let answers = ok(&crate::util::run_with_stdin(&["query", &path_str(dir.path(), "counting-w2.bloom"), "--count"], keys.as_bytes()));
    assert_eq!(answers.lines().filter(|line| line.ends_with("\t15")).count(), 1_000, "every key counted, saturated: {answers}");
    let probe = path_str(dir.path(), "probe.csv");
    std::fs::write(&probe, "event,key\n1,key-7\n2,key-1000\n").unwrap();
    for (format, folds) in [("native", true), ("hadoop", true)] {
        let out = path_str(dir.path(), &format!("out-{format}"));
        let o = run(&["semijoin", "--build", &input, "--build-key", "key", "--probe", &probe, "--probe-key", "key", "-o", &out, "--no-progress", "--exact", "--exact-strategy", "broadcast", "--format", format]);
        let summary = ok(&o);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(summary.contains("folded from"), folds, "{format}: {summary}");
        assert_eq!(stderr.contains("build side: the filter was sized for"), !folds, "{format}: {stderr}");
        let stats: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(Path::new(&out).join("_SUCCESS")).unwrap()).unwrap();
        assert_eq!(stats["records_out"], 1, "{format}");
        if format == "native" {
            assert_eq!(stats["bits"], files_bits, "the semi-join's filter folds as the build's");
        }
    }
    // The folded filter prunes without losing a match: the Bloom step alone keeps key-7's row.
    let bloom = path_str(dir.path(), "bloom-only");
    let summary = ok(&run(&["semijoin", "--build", &input, "--build-key", "key", "--probe", &probe, "--probe-key", "key", "-o", &bloom, "--no-progress", "-w", "2"]));
    assert!(summary.contains("folded from"), "{summary}");
    let kept: String = crate::util::names_in(&bloom).iter().filter(|n| n.starts_with("part-")).map(|n| std::fs::read_to_string(Path::new(&bloom).join(n)).unwrap()).collect();
    assert!(kept.contains("1,key-7\n"), "{kept}");
}
