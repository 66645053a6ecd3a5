//! The bad-input matrix: every case exits non-zero with an error on stderr that names the file,
//! line or flag and what was expected, prints no panic, and leaves no filter file or `_SUCCESS`.

use crate::util::*;
use std::path::Path;
use std::process::Output;

/// A small valid build side and probe side in `dir`.
fn inputs(dir: &Path) -> (String, String) {
    let build = path_str(dir, "build.csv");
    std::fs::write(&build, "id,name\n1,a\n2,b\n").unwrap();
    let probe = path_str(dir, "probe.csv");
    std::fs::write(&probe, "event,id\n10,1\n11,3\n").unwrap();
    (build, probe)
}

/// Runs `build INPUT -k KEY -o OUT EXTRA...` and checks the failure and that OUT was not written.
fn build_fails(dir: &Path, input: &str, key: &str, extra: &[&str], needles: &[&str]) -> Output {
    let out = path_str(dir, "out.bloom");
    let mut args = vec!["build", input, "-k", key, "-o", &out, "--no-progress"];
    args.extend_from_slice(extra);
    let o = run(&args);
    fails_with_any_code(&o, needles);
    assert!(!Path::new(&out).exists(), "a filter file was left behind");
    assert_no_temporaries(dir);
    o
}

/// Runs a semijoin into DIR/joined and checks the failure and that no `_SUCCESS` or part is left.
fn semijoin_fails(dir: &Path, args: &[&str], needles: &[&str]) {
    semijoin_fails_reading(dir, args, b"", needles)
}

/// [`semijoin_fails`] with `stdin` piped to the job.
fn semijoin_fails_reading(dir: &Path, args: &[&str], stdin: &[u8], needles: &[&str]) {
    let out = path_str(dir, "joined");
    let mut all = vec!["semijoin", "-o", &out, "--no-progress"];
    all.extend_from_slice(args);
    let existed = Path::new(&out).exists();
    let o = run_with_stdin(&all, stdin);
    fails_with_any_code(&o, needles);
    // Nothing is left: no part, no _SUCCESS, and no directory that a rerun would refuse; a
    // directory that was there (and refused) is left as it was.
    let left = names_in(&out);
    assert!(left.is_empty() && Path::new(&out).exists() == existed, "left behind: {out} {left:?}");
}

/// Like `fails_with`, but clap's usage errors exit 2.
fn fails_with_any_code(o: &Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "expected failure");
    assert!(matches!(o.status.code(), Some(1) | Some(2)), "{:?}: {stderr}", o.status);
    assert!(!stderr.contains("panicked"), "panic: {stderr}");
    for n in needles {
        assert!(stderr.contains(n), "stderr lacks {n:?}:\n{stderr}");
    }
}

fn assert_no_temporaries(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn missing_input() {
    let dir = tempdir();
    build_fails(dir.path(), &path_str(dir.path(), "nope.csv"), "id", &[], &["nope.csv", "No such file"]);
    let (build, _) = inputs(dir.path());
    semijoin_fails(dir.path(), &["--build", &build, "--build-key", "id", "--probe", "missing.csv", "--probe-key", "id"], &["missing.csv", "No such file"]);
}

#[test]
fn a_directory_where_a_file_is_expected() {
    let dir = tempdir();
    let (_, probe) = inputs(dir.path());
    let d = dir.path().to_string_lossy().into_owned();
    semijoin_fails(dir.path(), &["--filter", &d, "--probe", &probe, "--probe-key", "id"], &["is a directory, expected a filter file"]);
    let (build, _) = inputs(dir.path());
    let o = run(&["build", &build, "-k", "id", "-o", &d]);
    fails_with_any_code(&o, &["is a directory"]);
}

#[test]
fn unreadable_input() {
    let dir = tempdir();
    let (build, _) = inputs(dir.path());
    std::fs::set_permissions(&build, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    // Root reads anything: run the binary as nobody (setpriv) when the tests run as root.
    let is_root = std::process::Command::new("id").arg("-u").output().map(|o| o.stdout == b"0\n").unwrap_or(false);
    let mut cmd = if is_root {
        if std::process::Command::new("setpriv").arg("--version").output().is_err() {
            eprintln!("skipped: running as root and setpriv is not available to drop privileges");
            return;
        }
        std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", env!("CARGO_BIN_EXE_bloomflow")]);
        c
    } else {
        bin()
    };
    let out = path_str(dir.path(), "out.bloom");
    let o = cmd.args(["build", &build, "-k", "id", "-o", &out]).output().unwrap();
    fails_with_any_code(&o, &["build.csv", "Permission denied"]);
    assert!(!Path::new(&out).exists());
}

/// A pipe given by its path (a FIFO, `<(zcat …)`) or a device is refused, naming it and what to
/// do instead: it has no length, and read as an empty file, its data was lost without a word
/// (beside another input, the job succeeded). The FIFO has no writer: the job must not wait for one.
#[test]
fn a_pipe_or_device_given_by_its_path_is_refused() {
    let dir = tempdir();
    let fifo = path_str(dir.path(), "pipe");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let (build, probe) = inputs(dir.path());
    let needles = ["not a regular file (a pipe, socket or device)", "give its data as standard input, `-`"];
    for input in [&fifo, "/dev/null"] {
        build_fails(dir.path(), input, "id", &[], &[&[input][..], &needles].concat());
        let out = path_str(dir.path(), "both.bloom");
        fails_with(&run(&["build", &build, input, "-k", "id", "-o", &out, "--expected-items", "10"]), &needles);
        assert!(!Path::new(&out).exists());
        semijoin_fails(dir.path(), &["--build", &build, "--build-key", "id", "--probe", &probe, input, "--probe-key", "id"], &needles);
        // A filter read from one, whose length is not its size.
        let filter = ["not a regular file (a pipe, socket or device)", "save it to a file first"];
        semijoin_fails(dir.path(), &["--filter", input, "--probe", &probe, "--probe-key", "id"], &filter);
        fails_with_any_code(&run(&["query", input, "1"]), &[&[input][..], &filter].concat());
    }
    // Found inside an input directory, beside a part file, it was skipped: the job succeeded
    // on the part's keys alone.
    let table = dir.path().join("table");
    std::fs::create_dir(&table).unwrap();
    std::fs::copy(&build, table.join("part-00000")).unwrap();
    std::fs::rename(&fifo, table.join("part-00001")).unwrap();
    let found = path_str(&table, "part-00001");
    build_fails(dir.path(), &table.to_string_lossy(), "id", &[], &[&[&found[..]][..], &needles].concat());
    semijoin_fails(dir.path(), &["--build", &build, "--build-key", "id", "--probe", &table.to_string_lossy(), "--probe-key", "id"], &needles);
}

#[test]
fn empty_input() {
    let dir = tempdir();
    let empty = path_str(dir.path(), "empty.csv");
    std::fs::write(&empty, "").unwrap();
    build_fails(dir.path(), &empty, "id", &[], &["the input is empty", "empty.csv"]);
    let empty_dir = dir.path().join("nothing");
    std::fs::create_dir(&empty_dir).unwrap();
    build_fails(dir.path(), &empty_dir.to_string_lossy(), "id", &[], &["nothing", "holds no input files"]);
    let (build, _) = inputs(dir.path());
    semijoin_fails(dir.path(), &["--build", &build, "--build-key", "id", "--probe", &empty, "--probe-key", "id"], &["the input is empty"]);
}

#[test]
fn key_column_not_in_the_header_and_index_past_the_last_field() {
    let dir = tempdir();
    let (build, probe) = inputs(dir.path());
    build_fails(dir.path(), &build, "customer", &[], &["build.csv", "no column named \"customer\"", "columns: id, name"]);
    build_fails(dir.path(), &build, "3", &[], &["build.csv", "field 3 is past the last field of the header, which has 2"]);
    // Without a header the index cannot be checked in advance: no record has the field.
    build_fails(dir.path(), &build, "3", &["--no-header"], &["none of the 3 input records has a usable key", "build.csv:1", "the key is field 3"]);
    semijoin_fails(dir.path(), &["--build", &build, "--build-key", "id", "--probe", &probe, "--probe-key", "nope"], &["probe.csv", "no column named \"nope\""]);
}

#[test]
fn unclosed_quotes_and_embedded_newlines() {
    let dir = tempdir();
    let q = path_str(dir.path(), "q.csv");
    std::fs::write(&q, "id,name\n1,\"never closed\n2,b\n").unwrap();
    build_fails(dir.path(), &q, "name", &[], &["q.csv:2", "unclosed quote"]);
    let nl = path_str(dir.path(), "nl.csv");
    std::fs::write(&nl, "id,name\n1,\"two\nlines\"\n2,b\n").unwrap();
    build_fails(dir.path(), &nl, "id", &["--split-size", "8", "-w", "2"], &["nl.csv:2", "unclosed quote", "with --multiline, which reads quoted fields that hold line breaks"]);
    ok(&run(&["build", &nl, "-k", "id", "-o", &path_str(dir.path(), "nl.bloom"), "--multiline", "--split-size", "8", "-w", "2", "--no-progress"]));
    // A record is named by the line it starts on, the lines of the records before it counted.
    let mm = path_str(dir.path(), "mm.csv");
    std::fs::write(&mm, "id,note,key\n1,\"a\nb\n\",k1\n2,x\n3,\"c\",k3\n").unwrap();
    build_fails(dir.path(), &mm, "key", &["--multiline", "--strict"], &["mm.csv:5", "record has 2 field(s), but the key is field 3"]);
    // A header whose quote is never closed runs past the bytes the header is read from.
    let open_header = path_str(dir.path(), "open_header.csv");
    std::fs::write(&open_header, format!("\"id,key\n{}", "1,k\n".repeat(30_000))).unwrap();
    build_fails(dir.path(), &open_header, "key", &["--multiline"], &["open_header.csv:1", "the header record runs past the first"]);
    // With --multiline, a quote never closed runs to the input's end: the record of line 2.
    build_fails(dir.path(), &q, "name", &["--multiline"], &["q.csv:2", "unclosed quote"]);
    build_fails(dir.path(), &q, "name", &["--multiline", "--max-record-bytes", "18"], &["q.csv:2", "longer than the limit of 18 bytes", "a quote left open makes the rest of the input one record"]);
    // Read in splits, too: the quote left open in the first split runs through the others.
    build_fails(dir.path(), &q, "name", &["--multiline", "--split-size", "4", "-w", "2"], &["q.csv:2", "unclosed quote"]);
    let long_note = path_str(dir.path(), "long_note.csv");
    let note: String = (0..500).map(|i| format!("line {i} of a note\n")).collect();
    let plain = |from: usize| (from..from + 500).map(|i| format!("{i},k{i}\n")).collect::<String>();
    std::fs::write(&long_note, format!("id,key\n{}\"{note}\",k-note\n{}", plain(0), plain(500))).unwrap();
    // A split planned inside the note, which holds no quote for more than the limit, starts
    // past its line as if no field were open: the split that holds the note's start fails.
    // (One worker reads the splits in turn; with more, the split read from inside the note may
    // fail first, at the quote that closes the note, which it reads as opening a field.)
    build_fails(dir.path(), &long_note, "key", &["--multiline", "--max-record-bytes", "4096", "--split-size", "1000"], &["long_note.csv:502", "longer than the limit of 4096 bytes"]);
    build_fails(dir.path(), &long_note, "key", &["--multiline", "--max-record-bytes", "4096", "--split-size", "1000", "-w", "2"], &["longer than the limit of 4096 bytes"]);
    let summary = ok(&run(&["build", &long_note, "-k", "key", "-o", &path_str(dir.path(), "long_note.bloom"), "--multiline", "--split-size", "1000", "-w", "2", "--no-progress"]));
    assert!(summary.contains("keys inserted      1001"), "{summary}");
}

#[test]
fn invalid_sizes_and_rates() {
    let dir = tempdir();
    let (build, _) = inputs(dir.path());
    for (flags, needles) in [
        (vec!["--fpp", "0"], vec!["--fpp", "strictly between 0 and 1"]),
        (vec!["--fpp", "1"], vec!["--fpp", "strictly between 0 and 1"]),
        (vec!["--fpp", "-1"], vec!["--fpp", "strictly between 0 and 1"]),
        (vec!["--fpp", "NaN"], vec!["--fpp", "strictly between 0 and 1"]),
        (vec!["--fpp", "lots"], vec!["--fpp", "invalid float"]),
        (vec!["--expected-items", "0"], vec!["--expected-items", "at least 1"]),
        (vec!["--expected-items", "-5"], vec!["--expected-items"]),
        (vec!["--bits", "0", "--hashes", "3"], vec!["bits", "not between 1 and"]),
        (vec!["--bits", "100", "--hashes", "0"], vec!["hashes", "not between 1 and 32"]),
        (vec!["--bits", "100", "--hashes", "33"], vec!["hashes", "not between 1 and 32"]),
        (vec!["--bits", "100"], vec!["--hashes"]),
        (vec!["--format", "hadoop", "--bits", "4294967296", "--hashes", "3"], vec!["bits", "2147483647"]),
        (vec!["--split-size", "0"], vec!["--split-size"]),
        (vec!["--max-record-bytes", "0"], vec!["--max-record-bytes"]),
        (vec!["--split-size", "64q"], vec!["--split-size", "expected a number of bytes, bare or with a suffix k, m, g or t", "\"64q\""]),
        (vec!["--max-record-bytes", "1.5m"], vec!["--max-record-bytes", "expected a number of bytes", "\"1.5m\""]),
        (vec!["--split-size", "99999999t"], vec!["--split-size", "more bytes than"]),
        (vec!["-w", "0"], vec!["-w", "at least 1"]),
        (vec!["-w", "100000"], vec!["-w", "100000 is more than the 1024 a process runs"]),
        // Rounded up to whole blocks, this size would wrap round to 0.
        (vec!["--bits", "18446744073709551615", "--hashes", "3"], vec!["bits", "18446744073709551615 is not between 1 and"]),
        (vec!["--format", "spark", "--bits", "18446744073709551610", "--hashes", "3"], vec!["bits", "18446744073709551610 is not between 1 and"]),
        (vec!["--fpp", "1e-300"], vec!["cannot reach 1e-300 for"]),
        (vec!["-n", "2", "-p", "2"], vec!["-p", "not below the number of processes"]),
        (vec!["--format", "spark", "--hash", "murmur"], vec!["--hash murmur is not a hash of --format spark"]),
        (vec!["--hash", "jenkins"], vec!["--hash jenkins is not a hash of --format native"]),
        (vec!["--format", "hadoop", "--layout", "blocked"], vec!["--layout blocked is for native filters"]),
        (vec!["--spark-version", "1"], vec!["--spark-version is for --format spark"]),
    ] {
        build_fails(dir.path(), &build, "id", &flags, &needles);
    }
}

#[test]
fn a_filter_larger_than_memory_is_refused_before_allocating() {
    let dir = tempdir();
    let (build, _) = inputs(dir.path());
    build_fails(dir.path(), &build, "id", &["--bits", "1152921504606846976", "--hashes", "3"], &["1152921504606846976 bits", "needs 128.0 PiB", "of memory is available"]);
    // With two workers `auto` shares one filter a process, which does not fit either.
    let two = ["--bits", "1152921504606846976", "--hashes", "3", "-w", "2"];
    build_fails(dir.path(), &build, "id", &two, &["one per process, shared by its 2 worker(s)", "needs 128.0 PiB", "of memory is available"]);
}

#[test]
fn a_record_longer_than_the_limit() {
    let dir = tempdir();
    let long = path_str(dir.path(), "long.csv");
    std::fs::write(&long, format!("id,name\n1,a\n2,{}\n3,c\n", "x".repeat(5000))).unwrap();
    build_fails(dir.path(), &long, "id", &["--max-record-bytes", "1000"], &["long.csv:3", "longer than the limit of 1000 bytes", "--max-record-bytes"]);
    // A limit with a suffix, 1024-based: 4k is 4096 bytes, 5000 is over it, 5k is not.
    build_fails(dir.path(), &long, "id", &["--max-record-bytes", "4k"], &["long.csv:3", "longer than the limit of 4096 bytes"]);
    ok(&run(&["build", &long, "-k", "id", "-o", &path_str(dir.path(), "long.bloom"), "--max-record-bytes", "5KiB", "--no-progress"]));
}

/// A valid native filter written by the build job, and the bytes of each reference format.
fn filter_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let (build, _) = inputs(dir);
    let native = path_str(dir, "good.bloom");
    ok(&run(&["build", &build, "-k", "id", "-o", &native, "--expected-items", "10"]));
    let interop = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/interop");
    vec![
        ("native".into(), std::fs::read(&native).unwrap()),
        ("hadoop".into(), std::fs::read(interop.join("hadoop_bloom_jenkins.bin")).unwrap()),
        ("spark".into(), std::fs::read(interop.join("spark_bloom.bin")).unwrap()),
        ("spark v1".into(), std::fs::read(interop.join("spark_bloom_v1.bin")).unwrap()),
    ]
}

#[test]
fn damaged_filter_files_of_every_format() {
    let dir = tempdir();
    let (_, probe) = inputs(dir.path());
    let bad = path_str(dir.path(), "bad.bin");
    let mut cases: Vec<(String, Vec<u8>)> = vec![
        ("garbage".into(), b"definitely not a bloom filter, just some text".to_vec()),
        ("empty".into(), Vec::new()),
    ];
    for (format, bytes) in filter_files(dir.path()) {
        cases.push((format!("{format} truncated"), bytes[..bytes.len() - 3].to_vec()));
        cases.push((format!("{format} header only"), bytes[..12].to_vec()));
        let mut huge = bytes.clone();
        if format == "native" {
            huge[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        } else if format == "hadoop" {
            huge[9..13].copy_from_slice(&i32::MAX.to_be_bytes());
        } else {
            let at = if format == "spark" { 12 } else { 8 };
            huge[at..at + 4].copy_from_slice(&i32::MAX.to_be_bytes());
        }
        cases.push((format!("{format} hostile size"), huge));
        let mut zero_k = bytes.clone();
        if format == "native" {
            let flipped = zero_k.len() / 2;
            zero_k[flipped] ^= 1; // a flipped bit: only the native format carries a checksum
        } else {
            zero_k[4..8].copy_from_slice(&0i32.to_be_bytes());
        }
        cases.push((format!("{format} k = 0 or flipped bit"), zero_k));
    }
    for (what, bytes) in cases {
        std::fs::write(&bad, &bytes).unwrap();
        for args in [vec!["info", &bad], vec!["query", &bad, "x"], vec!["merge", &bad, &bad, "-o", "/dev/null/x"]] {
            let o = run(&args);
            fails_with_any_code(&o, &["bad.bin"]);
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert!(!stderr.contains("panicked"), "{what}: {stderr}");
        }
        semijoin_fails(dir.path(), &["--filter", &bad, "--probe", &probe, "--probe-key", "id"], &["bad.bin"]);
    }
}

#[test]
fn merging_incompatible_filters() {
    let dir = tempdir();
    let (build, _) = inputs(dir.path());
    let a = path_str(dir.path(), "a.bloom");
    let b = path_str(dir.path(), "b.bloom");
    ok(&run(&["build", &build, "-k", "id", "-o", &a, "--expected-items", "10"]));
    ok(&run(&["build", &build, "-k", "id", "-o", &b, "--expected-items", "11"]));
    let out = path_str(dir.path(), "m.bloom");
    fails_with_any_code(&run(&["merge", &a, &b, "-o", &out]), &["b.bloom", "filters are incompatible", "differs"]);
    assert!(!Path::new(&out).exists());
}

#[test]
fn output_directory_exists_and_output_not_writable() {
    let dir = tempdir();
    let (build, probe) = inputs(dir.path());
    let existing = path_str(dir.path(), "joined");
    std::fs::create_dir(&existing).unwrap();
    semijoin_fails(dir.path(), &["--build", &build, "--build-key", "id", "--probe", &probe, "--probe-key", "id"], &["joined", "already exists", "--overwrite"]);
    // What a job killed by SIGKILL leaves is told apart, since its parts may look complete.
    let unfinished = ["joined", "already exists, the output of a job that did not finish (_temporary/, no _SUCCESS)", "--overwrite"];
    std::fs::create_dir(Path::new(&existing).join("_temporary")).unwrap();
    let rerun = ["semijoin", "--build", &build, "--build-key", "id", "--probe", &probe, "--probe-key", "id", "-o", &existing];
    fails_with_any_code(&run(&rerun), &unfinished);
    std::fs::write(Path::new(&existing).join("_SUCCESS"), "").unwrap();
    fails_with_any_code(&run(&rerun), &["joined already exists (use --overwrite"]);
    assert_eq!(names_in(&existing), ["_SUCCESS", "_temporary"]);
    // /proc refuses new files even to root.
    let o = run(&["build", &build, "-k", "id", "-o", "/proc/bloomflow-test.bloom"]);
    fails_with_any_code(&o, &["/proc/bloomflow-test.bloom"]);
    let o = run(&["semijoin", "--build", &build, "--build-key", "id", "--probe", &probe, "--probe-key", "id", "-o", "/proc/bloomflow-test-out"]);
    fails_with_any_code(&o, &["/proc"]);
}

/// An output that is, or holds, one of the job's inputs is refused before anything is written:
/// a directory of inputs is read with everything beneath it, so a rerun would read the last
/// run's parts (or filter) as records. The old output is left as it was.
#[test]
fn an_output_that_is_or_holds_an_input_is_refused() {
    let dir = tempdir();
    let table = dir.path().join("table");
    std::fs::create_dir_all(table.join("date=1")).unwrap();
    std::fs::write(table.join("date=1/part-00000.csv"), "event,id\n10,1\n11,3\n").unwrap();
    let (build, _) = inputs(dir.path());
    let table = table.to_string_lossy().into_owned();
    let joined = format!("{table}/joined");
    let args = ["semijoin", "--build", &build, "--build-key", "id", "--probe", &table, "--probe-key", "id", "-o", &joined, "--no-progress"];
    ok(&run(&args));
    let first = std::fs::read(format!("{joined}/part-00000")).unwrap();
    let o = run(&[&args[..], &["--overwrite"]].concat());
    fails_with_any_code(&o, &[&format!("{joined} holds {joined}/part-00000, which is an input of the job: write the output elsewhere")]);
    assert_eq!(std::fs::read(format!("{joined}/part-00000")).unwrap(), first, "the old output was touched");
    assert!(Path::new(&joined).join("_SUCCESS").exists());

    // A filter written into the directory it is built from.
    let filter = format!("{table}/date=1/ids.bloom");
    ok(&run(&["build", &table, "-k", "id", "-o", &filter, "--no-progress"]));
    let o = run(&["build", &table, "-k", "id", "-o", &filter, "--no-progress"]);
    fails_with_any_code(&o, &[&format!("{filter} is an input of the job")]);
}

/// Standard input can be read only once: given to both sides of a semi-join, the build side
/// would take it all and the probe side find nothing (the job used to succeed with no records).
#[test]
fn standard_input_given_to_both_sides() {
    let dir = tempdir();
    let args = ["--build", "-", "--build-key", "id", "--probe", "-", "--probe-key", "id", "--expected-items", "10"];
    semijoin_fails(dir.path(), &args, &["invalid input: standard input (-) is given as both --build and --probe, and it can be read only once"]);
    assert!(!dir.path().join("joined").exists());
}

/// A semi-join's part files carry one header, so probe files whose headers differ are refused,
/// naming both (the records of the second used to be written under the first's header, their
/// columns misnamed). Line ends aside, equal headers are fine, and so are different headers on
/// the build side, whose records are not written.
#[test]
fn probe_files_with_different_headers() {
    let dir = tempdir();
    let (build, probe) = inputs(dir.path());
    let reordered = path_str(dir.path(), "reordered.csv");
    std::fs::write(&reordered, "id,event\n4,12\n").unwrap();
    let args = ["--build", &build, "--build-key", "id", "--probe", &probe, &reordered, "--probe-key", "id"];
    semijoin_fails(dir.path(), &args, &[&format!("invalid probe input: {reordered} has the header \"id,event\", {probe} has \"event,id\": the part files carry one header")]);
    let crlf = path_str(dir.path(), "crlf.csv");
    std::fs::write(&crlf, "event,id\r\n12,2\r\n").unwrap();
    let other_build = path_str(dir.path(), "build2.csv");
    std::fs::write(&other_build, "name,id\nc,4\n").unwrap();
    let out = path_str(dir.path(), "fine");
    ok(&run(&["semijoin", "--build", &build, &other_build, "--build-key", "id", "--probe", &probe, &crlf, "--probe-key", "id", "-o", &out, "--exact", "--no-progress"]));
    assert_eq!(std::fs::read_to_string(format!("{out}/part-00000")).unwrap(), "event,id\n10,1\n12,2\r\n");
}

/// Standard input's header, read at run time, must name the probe files' columns too: its
/// records go into a part under the files' header (they were written there with their columns
/// misnamed). Both joins refuse it; an equal header (line ends aside) passes and is not repeated.
#[test]
fn a_probe_header_on_standard_input_that_differs_from_the_files() {
    let dir = tempdir();
    let (build, probe) = inputs(dir.path());
    for exact in [&[][..], &["--exact", "--exact-strategy", "shuffle"][..]] {
        let args = [&["--build", &build, "--build-key", "id", "--probe", "-", &probe, "--probe-key", "id"][..], exact].concat();
        semijoin_fails_reading(dir.path(), &args, b"id,event\n2,12\n", &[&format!(
            "invalid probe input: <stdin> has the header \"id,event\", {probe} has \"event,id\": the part files carry one header"
        )]);
        let out = path_str(dir.path(), "fine");
        let all = [&["semijoin", "-o", &out, "--overwrite", "--no-progress"][..], &args].concat();
        ok(&run_with_stdin(&all, b"event,id\r\n12,2\r\n"));
        assert_eq!(std::fs::read_to_string(format!("{out}/part-00000")).unwrap(), "event,id\n12,2\r\n10,1\n", "{exact:?}");
    }
}

/// A tmpfs of `size` mounted at `dir/small`, unmounted when dropped; `None` where mounting is
/// not allowed.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(dir: &Path, size: &str) -> Option<SmallDisk> {
        let point = dir.join("small");
        std::fs::create_dir(&point).ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&point)
            .stderr(std::process::Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        ok.then_some(SmallDisk(point))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn the_disk_filling_up_while_writing() {
    let dir = tempdir();
    let Some(disk) = SmallDisk::mount(dir.path(), "64k") else {
        eprintln!("skipped: cannot mount a small tmpfs here (needs root)");
        return;
    };
    // A 1 MiB filter does not fit in 64 KiB.
    let (build, _) = inputs(dir.path());
    let out = disk.0.join("big.bloom");
    let o = run(&["build", &build, "-k", "id", "-o", out.to_str().unwrap(), "--bits", "8000000", "--hashes", "3"]);
    fails_with_any_code(&o, &["big.bloom", "No space left on device"]);
    let left: Vec<_> = std::fs::read_dir(&disk.0).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "left behind: {left:?}");

    // Records that do not fit: no _SUCCESS, no parts. The probe is a few of the shuffle join's
    // rounds for each worker, so that its parts fill the disk while it still reads; half its keys
    // are on the build side, half (for the anti-join) are not.
    let probe = dir.path().join("big-probe.csv");
    let mut text = String::from("event,id\n");
    for i in 0..400_000 {
        text.push_str(&format!("{i},{},{}\n", 1 + 2 * (i % 2), "p".repeat(20)));
    }
    std::fs::write(&probe, text).unwrap();
    for exact in [&[][..], &["--exact", "--exact-strategy", "shuffle"], &["--exact", "--anti", "--exact-strategy", "shuffle"]] {
        let joined = disk.0.join("joined");
        let args = [
            "semijoin", "--build", &build, "--build-key", "id", "--probe", probe.to_str().unwrap(), "--probe-key", "id",
            "-o", joined.to_str().unwrap(), "-w", "2",
        ];
        let o = run(&[&args[..], exact].concat());
        fails_with_any_code(&o, &["No space left on device"]);
        assert!(!joined.join("_SUCCESS").exists(), "{exact:?}");
        let parts = std::fs::read_dir(&joined).map(|d| d.filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("part-")).count()).unwrap_or(0);
        assert_eq!(parts, 0, "{exact:?}");
    }
}

#[test]
fn bad_hostfiles() {
    let dir = tempdir();
    let (build, _) = inputs(dir.path());
    let garbled = path_str(dir.path(), "garbled-hosts");
    std::fs::write(&garbled, "127.0.0.1:2101\n# a comment\nnot an address\n").unwrap();
    build_fails(dir.path(), &build, "id", &["-n", "2", "--hostfile", &garbled], &["garbled-hosts:3", "expected host:port"]);
    let short = path_str(dir.path(), "short-hosts");
    std::fs::write(&short, "127.0.0.1:2101\n").unwrap();
    build_fails(dir.path(), &build, "id", &["-n", "2", "--hostfile", &short], &["short-hosts lists 1 address(es), but -n is 2"]);
    build_fails(dir.path(), &build, "id", &["-n", "2", "--hostfile", &path_str(dir.path(), "missing-hosts")], &["missing-hosts", "No such file"]);
}

/// `gen` refuses a thread count of 0 or past the cap before writing anything (a mistyped count
/// had failed to spawn its threads, panicking and leaving tens of thousands of hidden part files).
#[test]
fn gen_refuses_thread_counts_out_of_range() {
    let dir = tempdir();
    let out = path_str(dir.path(), "data");
    for workers in ["0", "100000"] {
        let o = run(&["gen", "semijoin-bench", "--build-rows", "10", "--probe-rows", "10", "-o", &out, "-w", workers]);
        fails_with(&o, &["invalid --workers", &format!("{workers} is not between 1 and 1024 generator threads")]);
        assert!(!Path::new(&out).exists() || names_in(&out).is_empty(), "{:?}", names_in(&out));
    }
    ok(&run(&["gen", "semijoin-bench", "--build-rows", "10", "--probe-rows", "10", "-o", &out, "-w", "3"]));
    assert_eq!(names_in(&out), ["build.csv", "probe.csv"]);
}
