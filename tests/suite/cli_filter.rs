//! The filter commands run as a user would: `info`, `query`, `merge`, on files the test writes.

use crate::util::*;
use bloomflow::format::{native, StoredFilter};
use bloomflow::hashing::{BlockKernel, HadoopHash, Scheme};
use bloomflow::{BloomFilter, CountingBloomFilter, FilterSpec, Layout};

fn write_filter(dir: &std::path::Path, name: &str, spec: FilterSpec, keys: &[&str]) -> String {
    let mut f = BloomFilter::new(spec);
    for k in keys {
        f.insert(k.as_bytes());
    }
    let path = dir.join(name);
    native::write_plain(&path, &f).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn every_command_has_help() {
    let commands = ["info", "query", "merge", "intersect", "fold", "remove", "build", "semijoin", "demo", "gen", "gen semijoin-bench"];
    for cmd in std::iter::once(vec!["--help"]).chain(commands.iter().map(|c| c.split(' ').chain(["--help"]).collect())) {
        let out = ok(&run(&cmd));
        assert!(out.contains("Usage"), "{cmd:?}: {out}");
    }
}

#[test]
fn query_answers_arguments_in_order() {
    let dir = tempdir();
    let f = write_filter(dir.path(), "a.bloom", FilterSpec::native(10_000, 7, 0).unwrap(), &["apple", "pear"]);
    let out = ok(&run(&["query", &f, "pear", "zebra-not-there", "apple"]));
    assert_eq!(out, "pear\tmaybe\nzebra-not-there\tno\napple\tmaybe\n");
}

#[test]
fn query_reads_stdin_lines_with_lf_or_crlf() {
    let dir = tempdir();
    let f = write_filter(dir.path(), "a.bloom", FilterSpec::native(10_000, 7, 0).unwrap(), &["apple", "pear", ""]);
    let out = ok(&run_with_stdin(&["query", &f], b"apple\r\nnope\n\npear"));
    assert_eq!(out, "apple\tmaybe\nnope\tno\n\tmaybe\npear\tmaybe\n");
    // Lines ended by CR alone, told from standard input's first bytes.
    assert_eq!(ok(&run_with_stdin(&["query", &f], b"apple\rnope\r\rpear")), out);
}

/// Standard input is answered a batch at a time: every line's answer must stay with its key,
/// across batches, with the last line lacking its newline, for both layouts.
#[test]
fn query_answers_many_stdin_lines_in_order() {
    let dir = tempdir();
    let present: Vec<String> = (0..3000).filter(|i| i % 3 == 0).map(|i| format!("key-{i}")).collect();
    let present: Vec<&str> = present.iter().map(String::as_str).collect();
    for layout in [Layout::Standard, Layout::Blocked] {
        let spec = FilterSpec::sized_for(Scheme::NativeLookup3, layout, 1000, 0.01, 0).unwrap();
        let f = write_filter(dir.path(), "many.bloom", spec, &present);
        let filter = native::read(std::path::Path::new(&f)).unwrap().into_plain().unwrap();
        let keys: Vec<String> = (0..3000).map(|i| format!("key-{i}")).collect();
        let input = keys.join("\n");
        let expected: String = keys.iter().map(|k| format!("{k}\t{}\n", if filter.contains(k.as_bytes()) { "maybe" } else { "no" })).collect();
        assert_eq!(ok(&run_with_stdin(&["query", &f], input.as_bytes())), expected, "{layout}");
        // No false negatives, and not every key answers maybe (the batches are not all-true).
        assert!(present.iter().all(|k| expected.contains(&format!("{k}\tmaybe\n"))), "{layout}");
        assert!(expected.matches("\tno\n").count() > 1500, "{layout}");
    }
}

/// The answer lines repeat each key exactly, whatever its length (the query copies keys of
/// 4–16 bytes as two overlapping words): every length 0–40, over several batches and blocks of
/// output; and the answers of the batches before a key that fails are written.
#[test]
fn query_echoes_keys_of_every_length() {
    let dir = tempdir();
    let keys: Vec<String> = (0..30_000usize).map(|i| (0..i % 41).map(|j| (b'a' + ((i * 7 + j * 13) % 26) as u8) as char).collect()).collect();
    let present: Vec<&str> = keys.iter().step_by(2).map(String::as_str).collect();
    let f = write_filter(dir.path(), "a.bloom", FilterSpec::sized_for(Scheme::NativeLookup3, Layout::Blocked, 20_000, 0.01, 0).unwrap(), &present);
    let filter = native::read(std::path::Path::new(&f)).unwrap().into_plain().unwrap();
    let expected: String = keys.iter().map(|k| format!("{k}\t{}\n", if filter.contains(k.as_bytes()) { "maybe" } else { "no" })).collect();
    assert_eq!(ok(&run_with_stdin(&["query", &f], keys.join("\n").as_bytes())), expected);
    assert!(present.iter().all(|k| expected.contains(&format!("\n{k}\tmaybe\n")) || k.is_empty()));
    // A long filter: the lines before the bad key are answered on standard output.
    let f = write_filter(dir.path(), "long.bloom", FilterSpec::native(10_000, 7, 0).unwrap(), &[]);
    let input: String = (0..3000).map(|i| if i == 2999 { "x\n".to_string() } else { format!("{}\n", i * 1_000_003) }).collect();
    let out = run_with_stdin(&["query", &f, "--key-type", "long"], input.as_bytes());
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Every batch of 1024 keys before the failing one, in order.
    let answered: Vec<String> = (0..2048).map(|i| format!("{}\tno", i * 1_000_003)).collect();
    assert!(!out.status.success() && stdout.lines().take(2048).eq(answered.iter().map(String::as_str)), "{stdout:.200}");
}

/// A key that `--key-type long` cannot parse is named by where it came from.
#[test]
fn query_names_the_line_or_argument_of_a_key_that_is_not_a_long() {
    let dir = tempdir();
    let f = write_filter(dir.path(), "a.bloom", FilterSpec::native(10_000, 7, 0).unwrap(), &[]);
    let input: String = (0..2000).map(|i| if i == 1499 { "12x\n".to_string() } else { format!("{i}\n") }).collect();
    fails_with(&run_with_stdin(&["query", &f, "--key-type", "long"], input.as_bytes()), &["standard input line 1500", "\"12x\"", "signed 64-bit"]);
    fails_with(&run(&["query", &f, "--key-type", "long", "--", "7", "-3", "x"]), &["key argument 3", "\"x\""]);
}

/// `--null-key`: a key written as the NULL text is answered no without a lookup (the filters
/// here hold that very text, so a lookup would say maybe), as is a composite key with an
/// unquoted NULL field, while a quoted one is text; with `--key-type long`, a NULL is not parsed.
#[test]
fn query_answers_no_for_a_null_key() {
    let dir = tempdir();
    let spec = FilterSpec::native(10_000, 7, 0).unwrap();
    let f = write_filter(dir.path(), "a.bloom", spec, &["apple", "\\N", ""]);
    assert_eq!(ok(&run_with_stdin(&["query", &f], b"apple\n\\N\n\n")), "apple\tmaybe\n\\N\tmaybe\n\tmaybe\n");
    assert_eq!(ok(&run_with_stdin(&["query", &f, "--null-key", "\\N"], b"apple\n\\N\n\n")), "apple\tmaybe\n\\N\tno\n\tmaybe\n");
    assert_eq!(ok(&run(&["query", &f, "--null-key", "", "apple", "", "\\N"])), "apple\tmaybe\n\tno\n\\N\tmaybe\n");

    // Composite keys, as the jobs compose them: each field after its length.
    let composed = |fields: &[&str]| {
        let mut key = Vec::new();
        for field in fields {
            bloomflow::records::push_with_length(&mut key, field.as_bytes());
        }
        String::from_utf8(key).unwrap()
    };
    let (x1, null1) = (composed(&["x", "1"]), composed(&["\\N", "1"]));
    let pairs = write_filter(dir.path(), "pairs.bloom", spec, &[&x1, &null1]);
    let keys = ["x,1", "\\N,1", "\"\\N\",1"];
    assert_eq!(ok(&run(&[&["query", &pairs, "--composite", ","][..], &keys].concat())), "x,1\tmaybe\n\\N,1\tmaybe\n\"\\N\",1\tmaybe\n");
    let with_null = ok(&run(&[&["query", &pairs, "--composite", ",", "--null-key", "\\N"][..], &keys].concat()));
    assert_eq!(with_null, "x,1\tmaybe\n\\N,1\tno\n\"\\N\",1\tmaybe\n");

    // Longs: the NULL text is not a number, and is not parsed.
    let seven = String::from_utf8(7i64.to_le_bytes().to_vec()).unwrap();
    let longs = write_filter(dir.path(), "longs.bloom", spec, &[&seven]);
    assert_eq!(ok(&run(&["query", &longs, "--key-type", "long", "--null-key", "\\N", "--", "7", "\\N", "8"])), "7\tmaybe\n\\N\tno\n8\tno\n");
    fails_with(&run(&["query", &longs, "--key-type", "long", "--", "7", "\\N"]), &["key argument 2", "signed 64-bit"]);

    // A NULL text no unquoted field can hold is refused, as the jobs refuse it.
    fails_with(&run(&["query", &pairs, "--composite", ",", "--null-key", "a,b", "x,1"]), &["invalid --null-key \"a,b\"", "','"]);
}

#[test]
fn query_into_a_closed_pipe_is_not_an_error() {
    let dir = tempdir();
    let f = write_filter(dir.path(), "a.bloom", FilterSpec::native(10_000, 7, 0).unwrap(), &["k"]);
    let input: Vec<u8> = (0..200_000).flat_map(|i| format!("key{i}\n").into_bytes()).collect();
    let mut child = bin()
        .args(["query", &f])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        use std::io::Write;
        let _ = stdin.write_all(&input);
    });
    drop(child.stdout.take()); // the reader goes away at once
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    assert!(out.status.success(), "{:?} {}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn info_reports_parameters_in_text_and_json() {
    let dir = tempdir();
    let mut f = BloomFilter::with_rate(1000, 0.01).unwrap();
    for i in 0..1000 {
        f.insert(&key(7, i));
    }
    let path = dir.path().join("i.bloom");
    native::write_plain(&path, &f).unwrap();
    let p = path.to_string_lossy();
    let text = ok(&run(&["info", &p]));
    assert!(text.contains("bits (m)              9586"), "{text}");
    assert!(text.contains("hashes (k)            7"), "{text}");
    assert!(text.contains("format                native v1"), "{text}");
    assert!(text.contains("query kernel          (standard layout)"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&ok(&run(&["info", &p, "--json"]))).unwrap();
    assert!(json["query_kernel"].is_null(), "{json}");
    assert_eq!(json["kind"], "bloom");
    assert_eq!(json["bits"], 9586);
    assert_eq!(json["hashes"], 7);
    assert_eq!(json["items_inserted"], 1000);
    assert_eq!(json["bits_set"], f.bits_set());
    assert_eq!(json["target_fpp"], 0.01);
    let est = json["estimated_items"].as_f64().unwrap();
    assert!((est - 1000.0).abs() < 50.0, "{est}");
    let fpp = json["estimated_fpp"].as_f64().unwrap();
    assert!((0.005..0.02).contains(&fpp), "{fpp}");
}

/// A blocked filter names the query code this CPU runs for it.
#[test]
fn info_names_the_query_kernel_of_a_blocked_filter() {
    let dir = tempdir();
    let spec = FilterSpec::sized_for(Scheme::NativeLookup3, Layout::Blocked, 1000, 0.01, 0).unwrap();
    let path = dir.path().join("b.bloom");
    native::write_plain(&path, &BloomFilter::new(spec)).unwrap();
    let p = path.to_string_lossy();
    let kernel = BlockKernel::detect().name();
    assert!(ok(&run(&["info", &p])).contains(&format!("query kernel          {kernel} (this CPU)")));
    let json: serde_json::Value = serde_json::from_str(&ok(&run(&["info", &p, "--json"]))).unwrap();
    assert_eq!(json["query_kernel"], kernel);
    assert_eq!(json["layout"], "blocked");

    // BLOOMFLOW_KERNEL caps the choice; a name that is no kernel's is ignored with a warning.
    let with_env = |value: &str| bin().args(["info", &p]).env("BLOOMFLOW_KERNEL", value).output().unwrap();
    assert!(ok(&with_env("portable")).contains("query kernel          portable (this CPU)"));
    let out = with_env("sse9");
    assert!(ok(&out).contains(&format!("query kernel          {kernel} (this CPU)")));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ignoring BLOOMFLOW_KERNEL=\"sse9\""), "{stderr}");
}

#[test]
fn info_shows_counting_filters() {
    let dir = tempdir();
    let mut c = CountingBloomFilter::with_rate(100, 0.01).unwrap();
    c.insert(b"x");
    let path = dir.path().join("c.bloom");
    native::write_counting(&path, &c).unwrap();
    let info = |path: &std::path::Path| -> serde_json::Value { serde_json::from_str(&ok(&run(&["info", &path.to_string_lossy(), "--json"]))).unwrap() };
    let json = info(&path);
    assert_eq!(json["kind"], "counting-bloom");
    assert_eq!(json["bits_set"], 7);
    assert_eq!(json["saturated_counters"], 0);
    // "x" 15 times in all: its 7 counters saturate, and the text says so.
    (0..14).for_each(|_| c.insert(b"x"));
    native::write_counting(&path, &c).unwrap();
    assert_eq!(info(&path)["saturated_counters"], 7);
    let text = ok(&run(&["info", &path.to_string_lossy()]));
    assert!(text.contains("saturated counters    7 (at 15"), "{text}");
    // A plain filter has no such row.
    let plain = dir.path().join("p.bloom");
    native::write_plain(&plain, &c.to_bloom_filter()).unwrap();
    assert!(info(&plain).get("saturated_counters").is_none());
}

#[test]
fn merge_ors_compatible_filters() {
    let dir = tempdir();
    let spec = FilterSpec::native(10_000, 5, 3).unwrap();
    let a = write_filter(dir.path(), "a.bloom", spec, &["a1", "a2"]);
    let b = write_filter(dir.path(), "b.bloom", spec, &["b1"]);
    let c = write_filter(dir.path(), "c.bloom", spec, &["c1"]);
    let out = path_str(dir.path(), "out.bloom");
    ok(&run(&["merge", &a, &b, &c, "-o", &out]));
    let answers = ok(&run(&["query", &out, "a1", "a2", "b1", "c1"]));
    assert_eq!(answers.matches("maybe").count(), 4, "{answers}");
    let expected = write_filter(dir.path(), "all.bloom", spec, &["a1", "a2", "b1", "c1"]);
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&expected).unwrap());
}

/// `intersect` ANDs compatible filters: every key all of them hold answers "maybe", the result
/// holds no bit an input lacks, and a key of one input alone answers "no" (but for false
/// positives, here none expected). Counting filters keep the smaller of each pair of counters,
/// so a key in all of them stays after `remove` of the others, whatever its counts (Hadoop's
/// `and` ANDs the counters' bits, and 2 AND 1 is 0). Sizes that differ are refused without
/// `--fold`, and with it folded first; a filter of another kind is refused, nothing written.
#[test]
fn intersect_ands_compatible_filters() {
    let dir = tempdir();
    let common: Vec<String> = (0..200).map(|i| format!("both {i}")).collect();
    let only = |side: &str| -> Vec<String> { (0..300).map(|i| format!("{side} only {i}")).collect() };
    let (only_a, only_b) = (only("a"), only("b"));
    let refs = |keys: &[&Vec<String>]| -> Vec<String> { keys.iter().flat_map(|k| k.iter().cloned()).collect() };
    let out = path_str(dir.path(), "out.bloom");
    for (scheme, layout) in [(Scheme::NativeLookup3, Layout::Blocked), (Scheme::Native, Layout::Standard), (Scheme::Hadoop(HadoopHash::Jenkins), Layout::Standard), (Scheme::SparkV2, Layout::Standard)] {
        let spec = FilterSpec::with_size(scheme, layout, 64 * 512, 5, 0).unwrap();
        let write = |name: &str, keys: Vec<String>| write_filter(dir.path(), name, spec, &keys.iter().map(String::as_str).collect::<Vec<_>>());
        let (a, b, c) = (write("a.bloom", refs(&[&common, &only_a])), write("b.bloom", refs(&[&common, &only_b])), write("c.bloom", common.clone()));
        ok(&run(&["intersect", &a, &b, &c, "-o", &out]));
        let answers = ok(&run_with_stdin(&["query", &out], refs(&[&common, &only_a, &only_b]).join("\n").as_bytes()));
        let maybe: Vec<&str> = answers.lines().filter(|l| l.ends_with("\tmaybe")).collect();
        assert!(common.iter().all(|k| maybe.contains(&format!("{k}\tmaybe").as_str())), "{scheme:?} {layout:?}: a key of all three answered no");
        assert!(maybe.len() < common.len() + 5, "{scheme:?} {layout:?}: {} keys of one side answered maybe", maybe.len() - common.len());
        let bits = |path: &str| bloomflow::format::load(std::path::Path::new(path)).unwrap().into_plain().unwrap().bits().words().to_vec();
        let (result, inputs) = (bits(&out), [bits(&a), bits(&b), bits(&c)]);
        assert!(inputs.iter().all(|input| result.iter().zip(input).all(|(r, i)| r & !i == 0)), "{scheme:?} {layout:?}: a bit no input has");
        assert!(result.iter().zip(&inputs[2]).all(|(r, c)| c & !r == 0), "{scheme:?} {layout:?}: a bit of the common keys lost");
    }
    // Counting filters: "both 7" in a twice, in b once; the other keys of both removed.
    let spec = FilterSpec::native(16_000, 4, 0).unwrap();
    let counting = |name: &str, keys: &[String], repeat: &str, times: usize| {
        let mut f = CountingBloomFilter::new(spec);
        keys.iter().for_each(|k| f.insert(k.as_bytes()));
        (1..times).for_each(|_| f.insert(repeat.as_bytes()));
        let path = dir.path().join(name);
        bloomflow::format::write(&path, &StoredFilter::Counting(f)).unwrap();
        path.to_string_lossy().into_owned()
    };
    let a = counting("ca.bloom", &refs(&[&common, &only_a]), "both 7", 2);
    let b = counting("cb.bloom", &refs(&[&common, &only_b]), "both 7", 1);
    ok(&run(&["intersect", &a, &b, "-o", &out]));
    let answers = ok(&run_with_stdin(&["query", &out], refs(&[&only_a, &only_b]).join("\n").as_bytes()));
    assert!(answers.matches("\tmaybe\n").count() < 5, "{answers}");
    let others: Vec<&str> = common.iter().map(String::as_str).filter(|k| *k != "both 7").collect();
    ok(&run_with_stdin(&["remove", &out], others.join("\n").as_bytes()));
    assert_eq!(ok(&run(&["query", &out, "both 7"])), "both 7\tmaybe\n");
    // Sizes that differ; a plain filter beside a counting one.
    let small = write_filter(dir.path(), "small.bloom", FilterSpec::native(8000, 4, 0).unwrap(), &common.iter().map(String::as_str).collect::<Vec<_>>());
    let plain = path_str(dir.path(), "plain.bloom");
    let large = write_filter(dir.path(), "large.bloom", FilterSpec::native(16_000, 4, 0).unwrap(), &refs(&[&common, &only_a]).iter().map(String::as_str).collect::<Vec<_>>());
    fails_with(&run(&["intersect", &a, &large, "-o", &plain]), &["cannot intersect", "kind differs"]);
    fails_with(&run(&["intersect", &large, &small, "-o", &plain]), &["number of bits (m) differs", "--fold"]);
    assert!(!std::path::Path::new(&plain).exists());
    let o = run(&["intersect", "--fold", &large, &small, "-o", &plain]);
    ok(&o);
    assert!(String::from_utf8_lossy(&o.stderr).contains("folded to m = 8000 bits; estimated false-positive rate of the intersected filter"));
    let answers = ok(&run_with_stdin(&["query", &plain], common.join("\n").as_bytes()));
    assert_eq!(answers.matches("\tmaybe\n").count(), common.len(), "{answers}");
}

/// `merge --fold`: filters alike but in size fold to the greatest common divisor of their
/// sizes (bits; blocks; Spark's words) and merge into exactly the filter of that size that holds
/// all their keys, byte for byte, for every scheme and layout, plain and counting. Without
/// `--fold` the sizes are refused, naming it; a fold so small that the filter would answer
/// "maybe" for most absent keys is refused, and nothing is written.
#[test]
fn merge_folds_filters_of_different_sizes_to_their_common_size() {
    let dir = tempdir();
    let keys_a: Vec<String> = (0..300).map(|i| format!("a{i}")).collect();
    let keys_b: Vec<String> = (0..200).map(|i| format!("b{i}")).collect();
    let jenkins = Scheme::Hadoop(HadoopHash::Jenkins);
    // (scheme, layout, m of a, m of b, their common size): a is folded in every case.
    let cases = [
        (Scheme::NativeLookup3, Layout::Standard, 3 * 4096, 2 * 4096, 4096),
        (Scheme::NativeLookup3, Layout::Blocked, 3 * 8 * 512, 2 * 8 * 512, 8 * 512),
        (Scheme::Native, Layout::Standard, 16_000, 8000, 8000),
        (jenkins, Layout::Standard, 9000, 6000, 3000),
        (Scheme::SparkV2, Layout::Standard, 64 * 90, 64 * 60, 64 * 30),
    ];
    let out = path_str(dir.path(), "out.bloom");
    // Plain filters of every case; counting ones, whose counters fold by saturating sums, of two.
    let runs = cases.iter().map(|&case| (false, case)).chain([cases[1], cases[3]].map(|case| (true, case)));
    for (counting, (scheme, layout, m_a, m_b, common)) in runs {
        let what = format!("{}{scheme:?} {layout:?}", if counting { "counting " } else { "" });
        let spec = |bits| FilterSpec::with_size(scheme, layout, bits, 4, 0).unwrap();
        // a says it was sized for its keys; folded, it is sized explicitly, as `both` is.
        let write = |name: &str, bits, keys: &[&String]| {
            let (path, sized) = (dir.path().join(name), name == "a.bloom");
            let stored = match counting {
                false => {
                    let mut f = BloomFilter::new(spec(bits));
                    if sized {
                        f = f.sized_for(300, 0.01);
                    }
                    keys.iter().for_each(|k| f.insert(k.as_bytes()));
                    StoredFilter::Plain(f)
                }
                true => {
                    let mut c = CountingBloomFilter::new(spec(bits));
                    if sized {
                        c = c.sized_for(300, 0.01);
                    }
                    keys.iter().for_each(|k| c.insert(k.as_bytes()));
                    StoredFilter::Counting(c)
                }
            };
            bloomflow::format::write(&path, &stored).unwrap();
            path.to_string_lossy().into_owned()
        };
        let a = write("a.bloom", m_a, &keys_a.iter().collect::<Vec<_>>());
        let b = write("b.bloom", m_b, &keys_b.iter().collect::<Vec<_>>());
        let both = write("both.bloom", common, &keys_a.iter().chain(&keys_b).collect::<Vec<_>>());
        fails_with(&run(&["merge", &a, &b, "-o", &out]), &["number of bits (m) differs", "--fold"]);
        let note = run(&["merge", "--fold", &a, &b, "-o", &out]);
        ok(&note);
        let note = String::from_utf8_lossy(&note.stderr);
        assert!(note.contains(&format!("folded to m = {common} bits")), "{what}: {note}");
        assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&both).unwrap(), "{what}");
        std::fs::remove_file(&out).unwrap();
    }
    // 10,000 and 10,001 bits share one bit.
    let a = write_filter(dir.path(), "a.bloom", FilterSpec::native(10_000, 5, 0).unwrap(), &["a"]);
    let b = write_filter(dir.path(), "b.bloom", FilterSpec::native(10_001, 5, 0).unwrap(), &["b"]);
    fails_with(&run(&["merge", "--fold", &a, &b, "-o", &out]), &["folded to m = 1 bits", "nothing written"]);
    assert!(!std::path::Path::new(&out).exists());
}

/// `fold` shrinks a filter built for a million keys that holds 5,000 to a whole fraction of its
/// size that meets the rate it was sized for, and the result is exactly the filter of that size
/// holding those keys (bits, or counters), recorded as sized for them. Folded again, it is
/// written unchanged; a stricter `--fpp` folds less; a file that records no rate needs `--fpp`.
#[test]
fn fold_shrinks_an_oversized_filter_to_the_filter_of_the_smaller_size() {
    let dir = tempdir();
    let input = join(dir.path(), "keys.csv");
    let keys: Vec<String> = (0..5000).map(|i| format!("k{i}")).collect();
    std::fs::write(&input, format!("id\n{}\n", keys.join("\n"))).unwrap();
    let input = input.to_string_lossy().into_owned();
    for counting in [false, true] {
        let (big, small) = (path_str(dir.path(), "big.bloom"), path_str(dir.path(), "small.bloom"));
        let mut build = vec!["build", "-k", "id", "--expected-items", "1000000", "-o", &big, &input];
        if counting {
            build.push("--counting");
        }
        ok(&run(&build));
        let out = run(&["fold", &big, "-o", &small]);
        ok(&out);
        let note = String::from_utf8_lossy(&out.stderr).into_owned();
        let (before, after) = (bloomflow::format::load(big.as_ref()).unwrap(), bloomflow::format::load(small.as_ref()).unwrap());
        let keys = keys.iter().map(|k| k.as_bytes());
        match (before, after) {
            (bloomflow::StoredFilter::Plain(before), bloomflow::StoredFilter::Plain(after)) => {
                let spec = *after.spec();
                assert!(spec.bits * 20 < before.spec().bits, "{note}: {} of {} bits", spec.bits, before.spec().bits);
                assert_eq!((spec.hashes, after.target_fpp()), (before.spec().hashes, 0.01));
                assert!(after.estimated_fpp() <= 0.01 && (5000..6000).contains(&after.expected_items()), "{note}");
                let mut direct = BloomFilter::new(spec);
                keys.for_each(|k| direct.insert(k));
                assert_eq!(direct.bits(), after.bits(), "{note}");
                assert!(note.contains(&format!("m = {} -> {} bits", before.spec().bits, spec.bits)), "{note}");
            }
            (bloomflow::StoredFilter::Counting(before), bloomflow::StoredFilter::Counting(after)) => {
                assert!(after.spec().bits * 20 < before.spec().bits, "{note}");
                assert!(after.estimated_fpp() <= 0.01 && after.target_fpp() == 0.01, "{note}");
                let mut direct = CountingBloomFilter::new(*after.spec());
                keys.for_each(|k| direct.insert(k));
                assert_eq!(direct.words(), after.words(), "counting: {note}");
            }
            _ => panic!("the kind changed"),
        }
        // Folded as far as the rate allows already.
        let again = path_str(dir.path(), "again.bloom");
        let out = run(&["fold", &small, "-o", &again]);
        ok(&out);
        assert!(String::from_utf8_lossy(&out.stderr).contains("written unchanged"));
        assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&small).unwrap());
    }
    // A stricter rate keeps more bits.
    let (big, strict) = (path_str(dir.path(), "big.bloom"), path_str(dir.path(), "strict.bloom"));
    ok(&run(&["build", "-k", "id", "--expected-items", "1000000", "-o", &big, &input]));
    ok(&run(&["fold", &big, "-o", &strict, "--fpp", "0.0001"]));
    let small = path_str(dir.path(), "small.bloom");
    ok(&run(&["fold", &big, "-o", &small]));
    let bits = |path: &str| bloomflow::format::load(path.as_ref()).unwrap().into_plain().unwrap().spec().bits;
    assert!(bits(&strict) > bits(&small), "{} vs {}", bits(&strict), bits(&small));
    // `info` points at `fold` where a filter holds under an eighth of the keys it was sized for.
    let hint = "`bloomflow fold` can shrink it";
    let text = ok(&run(&["info", &big]));
    assert!(text.contains("holds about") && text.contains(hint), "{text}");
    assert!(!ok(&run(&["info", &small])).contains(hint));
    // A filter made through the library with --bits records no rate.
    let explicit = write_filter(dir.path(), "explicit.bloom", FilterSpec::native(1 << 20, 5, 0).unwrap(), &["a"]);
    fails_with(&run(&["fold", &explicit, "-o", &strict]), &["explicit.bloom", "records no false-positive rate", "--fpp"]);
    fails_with(&run(&["fold", &explicit, "-o", &strict, "--fpp", "1.5"]), &["invalid --fpp 1.5"]);
}

#[test]
fn merge_refuses_a_mismatch_and_writes_nothing() {
    let dir = tempdir();
    let a = write_filter(dir.path(), "a.bloom", FilterSpec::native(10_000, 5, 0).unwrap(), &["a"]);
    let cases = [
        (FilterSpec::native(10_000, 5, 1).unwrap(), "seed differs (0 vs 1)"),
        (FilterSpec::native(10_001, 5, 0).unwrap(), "number of bits (m) differs (10000 vs 10001)"),
        (FilterSpec::native(10_000, 4, 0).unwrap(), "number of hashes (k) differs (5 vs 4)"),
    ];
    for (spec, needle) in cases {
        let b = write_filter(dir.path(), "b.bloom", spec, &["b"]);
        let out = path_str(dir.path(), "out.bloom");
        fails_with(&run(&["merge", &a, &b, "-o", &out]), &[needle, "b.bloom"]);
        assert!(!std::path::Path::new(&out).exists());
    }
}

#[test]
fn bad_filter_files_fail_cleanly_in_every_command() {
    let dir = tempdir();
    let garbage = path_str(dir.path(), "garbage.bloom");
    std::fs::write(&garbage, b"this is not a filter at all, just text").unwrap();
    let missing = path_str(dir.path(), "missing.bloom");
    fails_with(&run(&["info", &garbage]), &["garbage.bloom", "bad magic"]);
    fails_with(&run(&["query", &garbage, "k"]), &["garbage.bloom", "bad magic"]);
    fails_with(&run(&["info", &missing]), &["missing.bloom", "No such file"]);
    let d = dir.path().to_string_lossy().into_owned();
    fails_with(&run(&["query", &d, "k"]), &["is a directory"]);
    let out = path_str(dir.path(), "out.bloom");
    fails_with(&run(&["merge", &garbage, &garbage, "-o", &out]), &["bad magic"]);
    assert!(!std::path::Path::new(&out).exists());
}
