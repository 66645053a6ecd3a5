//! Counting filters from the command line: `build --counting` on any number of workers and
//! processes, and `remove`.

use crate::util::*;
use bloomflow::format;
use bloomflow::CountingBloomFilter;
use std::path::Path;
use std::time::Duration;

/// A CSV of `rows` records whose key `c<i % distinct>` repeats: with 40 rows to a key some
/// counters pass 15 and saturate. Returns its path and its keys in order.
fn write_repeating_csv(dir: &Path, rows: usize, distinct: usize) -> (String, Vec<String>) {
    let keys: Vec<String> = (0..rows).map(|i| format!("c{}", splitmix64(i as u64) as usize % distinct)).collect();
    let text: String = std::iter::once("id,key\n".to_string()).chain(keys.iter().enumerate().map(|(i, k)| format!("{i},{k}\n"))).collect();
    let path = dir.join("in.csv");
    std::fs::write(&path, text).unwrap();
    (path.to_string_lossy().into_owned(), keys)
}

fn load_counting(path: &str) -> CountingBloomFilter {
    format::load(Path::new(path)).unwrap().into_counting().unwrap_or_else(|why| panic!("{path}: {why}, where a counting one was built"))
}

/// The library's counting filter of `keys`, inserted one by one, of `like`'s identity.
fn library_filter(like: &CountingBloomFilter, keys: &[String]) -> CountingBloomFilter {
    let mut filter = CountingBloomFilter::new(*like.spec());
    keys.iter().for_each(|k| filter.insert(k.as_bytes()));
    filter
}

/// The counters a distributed build writes are the ones the keys inserted one by one make
/// (added across partials, saturating as one filter saturates), the same bytes for any worker
/// count and split size, in both layouts.
#[test]
fn a_counting_build_counts_every_key_as_one_filter_does_for_any_worker_count() {
    let dir = tempdir();
    let (input, keys) = write_repeating_csv(dir.path(), 20_000, 500);
    for layout in ["standard", "blocked"] {
        let reference = path_str(dir.path(), &format!("{layout}.bloom"));
        let base = ["build", &input, "-k", "key", "--counting", "--layout", layout, "--expected-items", "500", "--no-progress"];
        let summary = ok(&run(&[&base[..], &["-o", &reference]].concat()));
        assert!(summary.contains("counters (m)") && summary.contains("keys inserted      20000"), "{summary}");
        let built = load_counting(&reference);
        let one_by_one = library_filter(&built, &keys);
        assert!(built.words() == one_by_one.words(), "{layout}: the counters differ from the keys inserted one by one");
        assert_eq!(built.items_inserted(), 20_000);
        assert!(built.words().iter().any(|w| (0..16).any(|lane| w >> (4 * lane) & 0xF == 15)), "{layout}: no counter saturated");
        let reference_bytes = std::fs::read(&reference).unwrap();
        for (w, split) in [("2", "3000"), ("3", "777"), ("2", "1")] {
            let out = path_str(dir.path(), &format!("{layout}-{w}-{split}.bloom"));
            ok(&run(&[&base[..], &["-o", &out, "-w", w, "--split-size", split]].concat()));
            assert!(std::fs::read(&out).unwrap() == reference_bytes, "{layout}: -w {w} --split-size {split}: other bytes");
        }
        // Read as a plain filter, every key is there.
        let answers = ok(&run_with_stdin(&["query", &reference], keys.join("\n").as_bytes()));
        assert!(answers.lines().all(|l| l.ends_with("\tmaybe")), "{layout}: a key answered no");
    }
}

/// Processes merge their counters over the network into the bytes one process writes, from
/// partials or from a filter each process's workers count into together.
#[test]
fn counting_builds_are_byte_identical_across_processes_on_loopback() {
    let dir = tempdir();
    // About 10 records a key: counters below 15, which the partials must add, not OR.
    let (input, _) = write_repeating_csv(dir.path(), 200_000, 20_000);
    let reference = path_str(dir.path(), "one.bloom");
    let args = ["build", &input, "-k", "key", "--counting", "--bits", "400000", "--hashes", "4", "--split-size", "40000", "--no-progress"];
    ok(&run(&[&args[..], &["-o", &reference]].concat()));
    for (processes, workers, per) in [(2, 1, "worker"), (2, 2, "worker"), (2, 2, "process")] {
        let out = path_str(dir.path(), &format!("c{processes}x{workers}-{per}.bloom"));
        let stats = path_str(dir.path(), &format!("c{processes}x{workers}-{per}.json"));
        let args = [&args[..], &["-o", &out, "--stats-json", &stats, "--filter-per", per]].concat();
        // Splits are claimed, not dealt: the merge is tested only where both processes read,
        // which a loaded machine may not give at once (one process claimed every split while
        // the other's workers waited for a core). Every run's bytes must be the reference's.
        let both_read = |readers: &[u64]| readers.iter().any(|&w| w < workers as u64) && readers.iter().any(|&w| w >= workers as u64);
        let mut readers = Vec::new();
        for _ in 0..5 {
            all_ok(&run_cluster(dir.path(), processes, workers, &args, Duration::from_secs(60)));
            assert!(std::fs::read(&out).unwrap() == std::fs::read(&reference).unwrap(), "{processes} x {workers}, a filter per {per}: other bytes than one process's");
            let stats: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
            readers = stats["per_worker"].as_array().unwrap().iter().filter(|w| w["scan"]["records"].as_u64().unwrap() > 0).map(|w| w["worker"].as_u64().unwrap()).collect();
            if both_read(&readers) {
                break;
            }
            std::fs::remove_file(&out).unwrap();
        }
        assert!(both_read(&readers), "{processes} x {workers}: read by workers {readers:?} only, in 5 runs");
    }
}

/// `remove` takes keys out as the library's `remove` does, once per line: the keys left all
/// answer maybe, and removing every key leaves only saturated counters.
#[test]
fn remove_takes_each_key_out_once_per_line_and_keeps_every_other_key() {
    let dir = tempdir();
    let (input, keys) = write_repeating_csv(dir.path(), 6_000, 1500);
    let built = path_str(dir.path(), "built.bloom");
    ok(&run(&["build", &input, "-k", "key", "--counting", "--expected-items", "1500", "-o", &built, "--no-progress"]));
    // Every occurrence of an eighth of the keys is removed, and every third record's key of the
    // rest: those only in part.
    let whole = |k: &str| k[1..].parse::<u64>().unwrap() % 8 == 0;
    let (gone, kept): (Vec<_>, Vec<_>) = keys.iter().enumerate().partition(|(i, k)| i % 3 == 0 || whole(k));
    let gone: Vec<String> = gone.into_iter().map(|(_, k)| k.clone()).collect();
    let out = path_str(dir.path(), "after.bloom");
    let summary = ok(&run_with_stdin(&["remove", &built, "-o", &out], gone.join("\n").as_bytes()));
    assert!(summary.contains(&format!("removed {} key(s); wrote {out}", gone.len())), "{summary}");

    let mut expected = load_counting(&built);
    gone.iter().for_each(|k| expected.remove(k.as_bytes()).unwrap());
    let after = load_counting(&out);
    assert!(after.words() == expected.words(), "the counters differ from the library's removals");
    assert_eq!(after.items_inserted(), 6_000 - gone.len() as u64);
    let kept: Vec<&str> = kept.into_iter().map(|(_, k)| k.as_str()).collect();
    let answers = ok(&run_with_stdin(&["query", &out], kept.join("\n").as_bytes()));
    assert!(answers.lines().all(|l| l.ends_with("\tmaybe")), "a key still inserted answers no");
    // Keys removed as often as they were inserted mostly answer no now.
    let all_gone: Vec<&String> = gone.iter().filter(|k| !kept.contains(&k.as_str())).collect();
    assert!(!all_gone.is_empty());
    let no = all_gone.iter().filter(|k| !after.contains(k.as_bytes())).count();
    assert!(no * 10 >= all_gone.len() * 9, "{no} of {} removed keys answer no", all_gone.len());

    // Every key removed, in place: only saturated counters are left.
    ok(&run_with_stdin(&["remove", &built], keys.join("\n").as_bytes()));
    let emptied = load_counting(&built);
    assert_eq!(emptied.items_inserted(), 0);
    assert!(emptied.words().iter().all(|w| (0..16).all(|lane| matches!(w >> (4 * lane) & 0xF, 0 | 15))), "a counter neither 0 nor saturated");
}

/// A counting filter built from 1,000 records of 100 keys, in `dir`: its input, the records'
/// keys, and the filter's path.
fn small_counting_filter(dir: &Path) -> (String, Vec<String>, String) {
    let (input, keys) = write_repeating_csv(dir, 1_000, 100);
    let built = path_str(dir, "built.bloom");
    ok(&run(&["build", &input, "-k", "key", "--counting", "-o", &built, "--no-progress"]));
    (input, keys, built)
}

/// A key the filter answers `no` for fails the removal, naming where it was given, and nothing
/// is written; `--skip-absent` skips and counts it. A plain filter is refused.
#[test]
fn remove_refuses_an_absent_key_or_a_plain_filter_and_writes_nothing() {
    let dir = tempdir();
    let (input, keys, built) = small_counting_filter(dir.path());
    let before = std::fs::read(&built).unwrap();
    let absent = (0..).map(|i| format!("absent-{i}")).find(|k| !load_counting(&built).contains(k.as_bytes())).unwrap();

    fails_with(&run(&["remove", &built, &keys[0], &absent]), &["key argument 2", &absent, "definitely not in", "nothing was written"]);
    let stdin = format!("{}\n{}\n{absent}\n", keys[0], keys[1]);
    fails_with(&run_with_stdin(&["remove", &built], stdin.as_bytes()), &["standard input line 3", &absent]);
    let out = path_str(dir.path(), "out.bloom");
    fails_with(&run(&["remove", &built, &absent, "-o", &out]), &["key argument 1"]);
    assert!(std::fs::read(&built).unwrap() == before, "the filter changed");
    assert!(!Path::new(&out).exists(), "an output was written");

    let summary = ok(&run(&["remove", &built, &keys[0], &absent, "--skip-absent", "-o", &out]));
    assert!(summary.contains("removed 1 key(s)") && summary.contains("skipped 1 key(s) the filter answers `no` for"), "{summary}");
    assert_eq!(load_counting(&out).items_inserted(), 999);

    let plain = path_str(dir.path(), "plain.bloom");
    ok(&run(&["build", &input, "-k", "key", "-o", &plain, "--no-progress"]));
    fails_with(&run(&["remove", &plain, &keys[0]]), &["plain Bloom filter", "build --counting"]);
    let spark = path_str(dir.path(), "spark.bin");
    fails_with(&run(&["build", &input, "-k", "key", "--counting", "--format", "spark", "--expected-items", "100", "-o", &spark, "--no-progress"]), &["--counting", "Spark has no counting filter"]);
    assert!(!Path::new(&spark).exists(), "a Spark counting filter was written");
}

/// A NULL key (`--null-key`), which no build inserts, is skipped and counted, not looked up:
/// not even a key that the NULL text's bytes would remove.
#[test]
fn remove_skips_null_keys() {
    let dir = tempdir();
    let (_, keys, built) = small_counting_filter(dir.path());
    let out = path_str(dir.path(), "out.bloom");
    // keys[0] as the NULL text: both lines are NULL keys, and nothing is removed.
    let stdin = format!("{0}\n{0}\n", keys[0]);
    let summary = ok(&run_with_stdin(&["remove", &built, "--null-key", &keys[0], "-o", &out], stdin.as_bytes()));
    assert!(summary.contains("removed 0 key(s)") && summary.contains("skipped 2 NULL key(s)"), "{summary}");
    assert!(std::fs::read(&out).unwrap() == std::fs::read(&built).unwrap(), "a NULL key changed the counters");
}

/// Writes `keys` as a CSV of `id,key` records named `name` in `dir`.
fn write_keys_csv(dir: &Path, name: &str, keys: &[&String]) -> String {
    let text: String = std::iter::once("id,key\n".to_string()).chain(keys.iter().enumerate().map(|(i, k)| format!("{i},{k}\n"))).collect();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// `subtract` of a part of the records leaves the bytes a build of the other records writes,
/// on any number of workers and processes (no counter saturates: 3 records a key, a sparse filter).
#[test]
fn subtract_leaves_the_filter_of_the_other_records_for_any_worker_and_process_count() {
    let dir = tempdir();
    let keys: Vec<String> = (0..60_000).map(|i| format!("c{}", i % 20_000)).collect();
    let all = write_keys_csv(dir.path(), "all.csv", &keys.iter().collect::<Vec<_>>());
    let part = |every_third: bool| keys.iter().enumerate().filter(|(i, _)| (i % 3 == 0) == every_third).map(|(_, k)| k).collect::<Vec<_>>();
    let gone = write_keys_csv(dir.path(), "gone.csv", &part(true));
    let kept = write_keys_csv(dir.path(), "kept.csv", &part(false));
    let shape = ["-k", "key", "--counting", "--bits", "600000", "--hashes", "4", "--no-progress"];
    let (built, reference) = (path_str(dir.path(), "all.bloom"), path_str(dir.path(), "kept.bloom"));
    ok(&run(&[&["build", &all][..], &shape, &["-o", &built]].concat()));
    ok(&run(&[&["build", &kept][..], &shape, &["-o", &reference]].concat()));
    assert_eq!(load_counting(&built).saturated_counters(), 0, "a counter saturated: the test needs exact counts");
    let expected = std::fs::read(&reference).unwrap();

    let subtract = ["subtract", &built, &gone, "-k", "key", "--split-size", "20000", "--no-progress"];
    for (w, per) in [("1", "worker"), ("3", "worker"), ("3", "process")] {
        let out = path_str(dir.path(), &format!("w{w}-{per}.bloom"));
        let summary = ok(&run(&[&subtract[..], &["-o", &out, "-w", w, "--filter-per", per]].concat()));
        assert!(summary.contains("removed 20000 key(s)") && summary.contains("keys in filter     60000 -> 40000"), "{summary}");
        assert!(summary.contains(&format!("counts kept        one per {per}")), "{summary}");
        assert!(std::fs::read(&out).unwrap() == expected, "-w {w}, counts per {per}: not the filter of the other records");
    }
    for (workers, per) in [(1, "worker"), (2, "process")] {
        let out = path_str(dir.path(), &format!("p2x{workers}-{per}.bloom"));
        all_ok(&run_cluster(dir.path(), 2, workers, &[&subtract[..], &["-o", &out, "--filter-per", per]].concat(), Duration::from_secs(60)));
        assert!(std::fs::read(&out).unwrap() == expected, "2 processes x {workers}, counts per {per}: not the filter of the other records");
    }
    // In place by default.
    ok(&run(&subtract));
    assert!(std::fs::read(&built).unwrap() == expected, "in place: not the filter of the other records");
}

/// `subtract --plan` says what the job would do and reads and writes nothing: the filter's
/// counters and keys as `info` gives them, the counts' copies as `--filter-per` asks (a partial
/// a worker, or one a process), the splits; and it refuses what the job refuses (a plain
/// filter, an output that is an input).
#[test]
fn a_subtract_plan_says_what_the_job_would_do_and_writes_nothing() {
    let dir = tempdir();
    let keys: Vec<String> = (0..3_000).map(|i| format!("c{i}")).collect();
    let input = write_keys_csv(dir.path(), "in.csv", &keys.iter().collect::<Vec<_>>());
    let built = path_str(dir.path(), "c.bloom");
    ok(&run(&["build", &input, "-k", "key", "--counting", "--expected-items", "3000", "-o", &built, "--no-progress"]));
    let before = std::fs::read(&built).unwrap();
    let info: serde_json::Value = serde_json::from_str(&ok(&run(&["info", &built, "--json"]))).unwrap();
    let (json, out) = (path_str(dir.path(), "plan.json"), path_str(dir.path(), "out.bloom"));
    for (per, copies) in [("worker", 2), ("process", 1)] {
        let args = ["subtract", &built, &input, "-k", "key", "-o", &out, "-w", "2", "--split-size", "10000", "--filter-per", per, "--plan", "--stats-json", &json];
        let summary = ok(&run(&args));
        assert!(summary.contains("plan only (nothing read or written)"), "{summary}");
        let plan: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!((&plan["bits"], &plan["hashes"], &plan["items_inserted"]), (&info["bits"], &info["hashes"], &info["items_inserted"]), "{plan}");
        let counters = info["bits"].as_u64().unwrap().div_ceil(2);
        assert_eq!((plan["filter_per"].as_str(), plan["process_filter_bytes"].as_u64()), (Some(per), Some(copies * counters)), "{plan}");
        assert_eq!(plan["splits"].as_u64(), Some(std::fs::metadata(&input).unwrap().len().div_ceil(10_000)));
    }
    assert_eq!(std::fs::read(&built).unwrap(), before, "a plan changes no filter");
    assert!(!Path::new(&out).exists(), "a plan writes no output");
    let plain = path_str(dir.path(), "plain.bloom");
    ok(&run(&["build", &input, "-k", "key", "--expected-items", "3000", "-o", &plain, "--no-progress"]));
    fails_with(&run(&["subtract", &plain, &input, "-k", "key", "--plan"]), &["plain.bloom"]);
    fails_with(&run(&["subtract", &built, &input, "-k", "key", "-o", &input, "--plan"]), &["is an input of the job"]);
}

/// In every layout and format of counting filter (whose keys are checked and counted with the
/// same positions: blocked probes, or a standard layout's positions), a key the filter answers
/// `no` for fails `subtract`, named, in a batch of keys it holds; `--skip-absent` skips it
/// and counts the others, with counts per worker or per process.
#[test]
fn subtract_checks_each_key_in_every_counting_format() {
    let dir = tempdir();
    let (input, keys) = write_repeating_csv(dir.path(), 1_000, 100);
    let shapes: [&[&str]; 3] = [&[], &["--layout", "standard"], &["--format", "hadoop", "--bits", "20000", "--hashes", "5"]];
    for shape in shapes {
        let built = path_str(dir.path(), "built.bloom");
        ok(&run(&[&["build", &input, "-k", "key", "--counting", "-o", &built, "--no-progress"][..], shape].concat()));
        let filter = load_counting(&built);
        let absent = (0..).map(|i| format!("absent-{i}")).find(|k| !filter.contains(k.as_bytes())).unwrap();
        // The absent key amid 300 held ones, so that it is not alone in its batch or group.
        let mut batch: Vec<&String> = keys.iter().take(300).collect();
        batch.insert(150, &absent);
        let with_absent = write_keys_csv(dir.path(), "with-absent.csv", &batch);
        let mut expected = filter.clone();
        keys.iter().take(300).for_each(|key| expected.remove(key.as_bytes()).unwrap());
        let out = path_str(dir.path(), "out.bloom");
        for per in ["worker", "process"] {
            let args = ["subtract", &built, &with_absent, "-k", "key", "-o", &out, "-w", "2", "--no-progress", "--filter-per", per];
            fails_with(&run(&args), &[&format!("{absent:?}"), "definitely not in", "nothing was written"]);
            assert!(!Path::new(&out).exists(), "{shape:?}, {per}: an output was written");
            let summary = ok(&run(&[&args[..], &["--skip-absent"]].concat()));
            assert!(summary.contains("removed 300 key(s)") && summary.contains("absent keys        1 (skipped"), "{shape:?}, {per}: {summary}");
            assert!(load_counting(&out) == expected, "{shape:?}, {per}: not the filter with the 300 keys removed");
            std::fs::remove_file(&out).unwrap();
        }
    }
}

/// A key the filter answers `no` for fails the job, named, and so do keys counted more often
/// than inserted (the counter named); nothing is written either way. `--skip-absent` skips and
/// counts absent keys; a plain filter is refused.
#[test]
fn subtract_refuses_absent_keys_and_counts_past_a_counter_and_writes_nothing() {
    let dir = tempdir();
    let (input, keys, built) = small_counting_filter(dir.path());
    let before = std::fs::read(&built).unwrap();
    let absent = (0..).map(|i| format!("absent-{i}")).find(|k| !load_counting(&built).contains(k.as_bytes())).unwrap();
    let with_absent = write_keys_csv(dir.path(), "with-absent.csv", &[&keys[0], &absent, &keys[1]]);
    let out = path_str(dir.path(), "out.bloom");

    for per in ["worker", "process"] {
        let args = ["subtract", &built, &with_absent, "-k", "key", "-o", &out, "-w", "2", "--no-progress", "--filter-per", per];
        fails_with(&run(&args), &[&format!("{absent:?}"), "definitely not in", "nothing was written"]);
    }
    // The input twice: every counter that is not saturated is asked for twice what it holds.
    fails_with(&run(&["subtract", &built, &input, &input, "-k", "key", "-o", &out, "--no-progress"]), &["below zero", "never inserted", "nothing was written"]);
    assert!(!Path::new(&out).exists(), "an output was written");
    fails_with(&run(&["subtract", &built, &input, &input, "-k", "key", "--no-progress"]), &["below zero"]);
    assert!(std::fs::read(&built).unwrap() == before, "the filter changed");

    let mut expected = load_counting(&built);
    expected.remove(keys[0].as_bytes()).unwrap();
    expected.remove(keys[1].as_bytes()).unwrap();
    for per in ["worker", "process"] {
        let args = ["subtract", &built, &with_absent, "-k", "key", "-o", &out, "--skip-absent", "--no-progress", "-w", "2", "--filter-per", per];
        let summary = ok(&run(&args));
        assert!(summary.contains("removed 2 key(s)") && summary.contains("absent keys        1 (skipped"), "{per}: {summary}");
        assert!(load_counting(&out) == expected, "{per}: not the filter with the two keys removed");
    }

    let plain = path_str(dir.path(), "plain.bloom");
    ok(&run(&["build", &input, "-k", "key", "-o", &plain, "--no-progress"]));
    fails_with(&run(&["subtract", &plain, &input, "-k", "key", "--no-progress"]), &["plain Bloom filter", "build --counting"]);
    fails_with(&run(&["subtract", &built, &input, "-k", "id,key", "--no-progress"]), &["2 fields"]);
    // --key-type overrides the type the file records, and must agree with it.
    fails_with(&run(&["subtract", &built, &input, "-k", "key", "--key-type", "long", "--no-progress"]), &["1 field (long)", "would be answered"]);
    assert!(std::fs::read(&built).unwrap() == before, "the filter changed");
}
