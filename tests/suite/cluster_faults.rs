//! Cluster faults on loopback: a peer killed in the middle of a job makes every other process
//! exit non-zero within seconds, even one blocked reading its input from a pipe, and leaves no
//! filter file and no `_SUCCESS`; a rerun then succeeds. Processes that disagree about the job
//! fail as they connect; an interrupted process removes its unfinished files.

use crate::util::*;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Starts process `p` of a 2-process job with 1 worker, stdin piped.
fn start(args: &[&str], hosts: &Path, p: usize) -> Child {
    Command::new(env!("CARGO_BIN_EXE_bloomflow"))
        .args(args)
        .args(["-n", "2", "-p", &p.to_string(), "-w", "1", "--connect-timeout", "20", "--no-progress"])
        .arg("--hostfile")
        .arg(hosts)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits up to `limit` for `child` to exit; kills it and fails the test otherwise.
fn exits_within(child: &mut Child, limit: Duration) -> std::process::Output {
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the surviving process did not exit within {limit:?} of its peer's death");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    std::process::Output { status: child.wait().unwrap(), stdout: Vec::new(), stderr: stderr.into_bytes() }
}

/// Lets the processes connect and start reading.
const SETTLE: Duration = Duration::from_millis(2500);

fn probe_lines(n: usize) -> String {
    (0..n).map(|i| format!("{i},{}\n", i % 50)).collect()
}

#[test]
fn a_build_whose_peer_dies_fails_everywhere_and_writes_nothing() {
    for killed in [1usize, 0] {
        let dir = tempdir();
        let hosts = hostfile(dir.path(), 2);
        let out = path_str(dir.path(), "f.bloom");
        let args = ["build", "-", "-k", "id", "-o", &out, "--expected-items", "100"];
        // Process 0 reads standard input, which stays open: it is blocked on its input.
        let mut p0 = start(&args, &hosts, 0);
        let mut p1 = start(&args, &hosts, 1);
        p0.stdin.as_mut().unwrap().write_all(b"id\n1\n2\n3\n").unwrap();
        std::thread::sleep(SETTLE);
        let (victim, survivor) = if killed == 1 { (&mut p1, &mut p0) } else { (&mut p0, &mut p1) };
        victim.kill().unwrap();
        victim.wait().unwrap();
        let o = exits_within(survivor, Duration::from_secs(10));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "survivor succeeded: {stderr}");
        assert!(stderr.contains("lost the connection to a peer process"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(!Path::new(&out).exists());

        // A rerun succeeds and gives what an undisturbed single process gives.
        let single = path_str(dir.path(), "single.bloom");
        ok(&run_with_stdin(&["build", "-", "-k", "id", "-o", &single, "--expected-items", "100"], b"id\n1\n2\n3\n"));
        let hosts = hostfile(dir.path(), 2);
        let mut p0 = start(&args, &hosts, 0);
        let mut p1 = start(&args, &hosts, 1);
        p0.stdin.take().unwrap().write_all(b"id\n1\n2\n3\n").unwrap();
        drop(p1.stdin.take());
        assert!(exits_within(&mut p0, Duration::from_secs(30)).status.success());
        assert!(exits_within(&mut p1, Duration::from_secs(30)).status.success());
        assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&single).unwrap());
    }
}

#[test]
fn a_semijoin_whose_peer_dies_fails_everywhere_and_commits_nothing() {
    let dir = tempdir();
    let build = path_str(dir.path(), "build.csv");
    std::fs::write(&build, (0..50).step_by(3).fold(String::from("id\n"), |s, i| s + &format!("{i}\n"))).unwrap();
    let out = path_str(dir.path(), "joined");
    let hosts = hostfile(dir.path(), 2);
    let args = ["semijoin", "--build", &build, "--build-key", "id", "--probe", "-", "--probe-key", "id", "-o", &out, "--expected-items", "100", "--overwrite"];
    let mut p0 = start(&args, &hosts, 0);
    let mut p1 = start(&args, &hosts, 1);
    // Process 0 writes survivors of the first probe lines, then waits for more input.
    p0.stdin.as_mut().unwrap().write_all(format!("event,id\n{}", probe_lines(500)).as_bytes()).unwrap();
    std::thread::sleep(SETTLE);
    p1.kill().unwrap();
    p1.wait().unwrap();
    let o = exits_within(&mut p0, Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(stderr.contains("lost the connection to a peer process"), "{stderr}");
    assert!(!Path::new(&out).join("_SUCCESS").exists());
    // Nothing that looks like output: no part outside _temporary/ (the killed process may leave
    // its unfinished file inside it, as a killed Hadoop task does).
    let parts: Vec<_> = walk(Path::new(&out)).into_iter().filter(|p| p.contains("part-") && !p.contains("_temporary")).collect();
    assert!(parts.is_empty(), "part files left: {parts:?}");
    // The survivor removed its own unfinished part.
    assert!(!Path::new(&out).join("_temporary/part-00000").exists());

    // A rerun with --overwrite succeeds and matches an undisturbed single-process run.
    let input = format!("event,id\n{}", probe_lines(500));
    let single = path_str(dir.path(), "single");
    ok(&run_with_stdin(&["semijoin", "--build", &build, "--build-key", "id", "--probe", "-", "--probe-key", "id", "-o", &single, "--expected-items", "100"], input.as_bytes()));
    let hosts = hostfile(dir.path(), 2);
    let mut p0 = start(&args, &hosts, 0);
    let mut p1 = start(&args, &hosts, 1);
    p0.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    drop(p1.stdin.take());
    assert!(exits_within(&mut p0, Duration::from_secs(30)).status.success());
    assert!(exits_within(&mut p1, Duration::from_secs(30)).status.success());
    assert!(Path::new(&out).join("_SUCCESS").exists());
    assert_eq!(std::fs::read(Path::new(&out).join("part-00000")).unwrap(), std::fs::read(Path::new(&single).join("part-00000")).unwrap());
    // Process 1's worker read no split, and the header of standard input is known only to the
    // worker that reads it: its part is empty.
    assert_eq!(std::fs::read_to_string(Path::new(&out).join("part-00001")).unwrap(), "");
}

/// Every file under `dir`, as strings.
fn walk(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                found.extend(walk(&p));
            } else {
                found.push(p.to_string_lossy().into_owned());
            }
        }
    }
    found
}

/// Processes that disagree about the job fail at once, every one naming what differs, and
/// write nothing: other `-w`, other input files (which would read splits planned for other
/// files: a filter silently missing keys), other filter sizes (a panic in the merge), other
/// semi-join flags. The same command everywhere still succeeds.
#[test]
fn processes_that_disagree_about_the_job_fail_naming_the_difference() {
    let dir = tempdir();
    let small = path_str(dir.path(), "small.csv");
    let large = path_str(dir.path(), "large.csv");
    std::fs::write(&small, probe_lines(100)).unwrap();
    std::fs::write(&large, probe_lines(300)).unwrap();
    let out = path_str(dir.path(), "f.bloom");
    let build = |input: &str, extra: &[&str]| -> Vec<String> {
        [&["build", input, "-k", "1", "--no-header", "-o", &out, "--no-progress", "--expected-items", "400"][..], extra].concat().iter().map(|a| a.to_string()).collect()
    };
    let cases: [(&str, [Vec<String>; 2]); 3] = [
        ("process 0 runs 1 worker(s), process 1 runs 2: give every process the same -w", [build(&small, &["-w", "1"]), build(&small, &["-w", "2"])]),
        ("every process must see the same files at the same paths", [build(&small, &[]), build(&large, &[])]),
        ("were given different arguments", [build(&small, &[]), build(&small, &["--fpp", "0.001"])]),
    ];
    for (needle, args) in cases {
        let outs = run_cluster_each(dir.path(), 2, |p| args[p].clone(), Duration::from_secs(60));
        for (p, o) in outs.iter().enumerate() {
            fails_with(o, &["the processes disagree about the job", needle]);
            assert!(!Path::new(&out).exists(), "{needle}: process {p} left a filter");
        }
    }

    let semijoin = |exact: bool| -> Vec<String> {
        let out = path_str(dir.path(), "joined");
        let mut args = vec!["semijoin", "--build", &small, "--build-key", "2", "--probe", &large, "--probe-key", "2", "--no-header", "-o", &out, "--no-progress"];
        if exact {
            args.push("--exact");
        }
        args.iter().map(|a| a.to_string()).collect()
    };
    let outs = run_cluster_each(dir.path(), 2, |p| semijoin(p == 1), Duration::from_secs(60));
    for o in &outs {
        fails_with(o, &["the processes disagree about the job", "were given different arguments"]);
    }
    assert!(!dir.path().join("joined").exists(), "a disagreeing semi-join left output");

    let outs = run_cluster_each(dir.path(), 2, |_| build(&small, &[]), Duration::from_secs(60));
    outs.iter().for_each(|o| {
        ok(o);
    });
    assert!(Path::new(&out).exists());
}

/// An interrupted job (Ctrl-C, or SIGTERM from a scheduler) ends as a failed one: its unfinished
/// part and the output directory it made are removed, nothing is committed, and it exits 130
/// saying so.
#[cfg(unix)]
#[test]
fn an_interrupted_semijoin_removes_its_unfinished_part() {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let dir = tempdir();
        let build = path_str(dir.path(), "b.csv");
        std::fs::write(&build, "id\n1\n2\n").unwrap();
        let out = dir.path().join("joined");
        let mut child = Command::new(env!("CARGO_BIN_EXE_bloomflow"))
            .args(["semijoin", "--build", &build, "--build-key", "id", "--probe", "-", "--probe-key", "id", "--no-progress", "-o"])
            .arg(&out)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The probe stays open: the job is reading it, its part begun, when the signal comes.
        child.stdin.as_mut().unwrap().write_all(format!("id\n{}", probe_lines(5000)).as_bytes()).unwrap();
        let part = out.join("_temporary").join("part-00000");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !part.exists() {
            assert!(Instant::now() < deadline, "the job never began its part");
            std::thread::sleep(Duration::from_millis(10));
        }
        // SAFETY: kill sends a signal to the child's pid; it touches no memory.
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
        let o = exits_within(&mut child, Duration::from_secs(10));
        assert_eq!(o.status.code(), Some(130), "signal {signal}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stderr).contains("interrupted: this process removed its unfinished files and committed no output"));
        assert!(!part.exists(), "signal {signal}: the unfinished part is left");
        // Nor the output directory the job made, so that a rerun needs no --overwrite.
        assert!(!out.exists(), "signal {signal}: left {:?}", names_in(&out));
    }
}
