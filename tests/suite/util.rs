//! Helpers shared by the integration tests: temporary directories, running the built binary,
//! deterministic keys.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::io::Write;

/// A temporary directory removed when dropped.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("bloomflow-test-").tempdir().unwrap()
}

/// The built `bloomflow` binary.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bloomflow"))
}

/// Runs `bloomflow ARGS` with `stdin` as its standard input.
pub fn run_with_stdin(args: &[&str], stdin: &[u8]) -> Output {
    run_with_stdin_and_env(args, stdin, &[])
}

/// [`run_with_stdin`] with environment variables `vars` set.
pub fn run_with_stdin_and_env(args: &[&str], stdin: &[u8], vars: &[(&str, &str)]) -> Output {
    let mut child = bin()
        .args(args)
        .envs(vars.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Written by a thread of its own while the output is read: a command that answers as it
    // reads would otherwise fill its output pipe and wait, as this would on its input pipe.
    // A command that fails before it reads its input (a refused option) may have exited and
    // closed the pipe already: its output is what the test checks, not the write.
    let mut pipe = child.stdin.take().unwrap();
    let input = stdin.to_vec();
    let writer = std::thread::spawn(move || match pipe.write_all(&input) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        written => written.unwrap(),
    });
    let output = finish(child, args);
    writer.join().unwrap();
    output
}

/// Runs `bloomflow ARGS` with no standard input.
pub fn run(args: &[&str]) -> Output {
    run_with_env(args, &[])
}

/// [`run`] with environment variables `vars` set.
pub fn run_with_env(args: &[&str], vars: &[(&str, &str)]) -> Output {
    let child = bin().args(args).envs(vars.iter().copied()).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    finish(child, args)
}

/// Longest one command may run: a command that hangs (workers that wait on each other forever)
/// fails its test instead of stalling the whole suite.
const RUN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// Waits for `child` and returns its output, or kills it and fails once [`RUN_TIMEOUT`] has
/// passed.
fn finish(child: std::process::Child, args: &[&str]) -> Output {
    let pid = child.id();
    let (done, waited) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match waited.recv_timeout(RUN_TIMEOUT) {
        Ok(output) => {
            waiter.join().unwrap();
            output.unwrap()
        }
        Err(_) => {
            // SAFETY: kill sends a signal to the child's process id, which this test owns and
            // has not yet reaped.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
            let _ = waiter.join();
            panic!("bloomflow {args:?} did not finish within {RUN_TIMEOUT:?}");
        }
    }
}

/// Asserts success and returns stdout as text, printing stderr on failure.
#[track_caller]
pub fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "expected success, got {:?}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Asserts a clean failure (non-zero exit, no panic) whose stderr contains every `needle`.
#[track_caller]
pub fn fails_with(out: &Output, needles: &[&str]) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "expected failure; stdout:\n{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    assert!(!stderr.contains("panicked"), "panic:\n{stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "stderr lacks {needle:?}:\n{stderr}");
    }
    stderr
}

/// Asserts that every process of a cluster run succeeded; returns process 0's stdout (the job's
/// summary, which only process 0 prints).
#[track_caller]
pub fn all_ok(outs: &[Output]) -> String {
    for o in &outs[1..] {
        ok(o);
    }
    ok(&outs[0])
}

/// The names in `dir`, sorted; none where it does not exist.
pub fn names_in(dir: impl AsRef<Path>) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir).map(|d| d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()).unwrap_or_default();
    names.sort();
    names
}

/// The key count a build's summary says it estimated ("estimated at most N keys ...").
pub fn estimated_keys(summary: &str) -> u64 {
    summary
        .split("estimated at most ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no estimate in {summary}"))
}

/// A path inside `dir` as a string.
pub fn path_str(dir: &Path, name: &str) -> String {
    dir.join(name).to_string_lossy().into_owned()
}

pub fn join(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// splitmix64, for deterministic keys.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A deterministic string key of 8–20 bytes for index `i` in namespace `ns`; distinct (ns, i)
/// give distinct keys, since `ns-i-` is a unique prefix.
pub fn key(ns: u64, i: u64) -> Vec<u8> {
    let h = splitmix64(i ^ (ns << 56));
    let target = 8 + (h % 13) as usize;
    let mut k = format!("{ns}-{i}-{h:016x}").into_bytes();
    let prefix = format!("{ns}-{i}-").len();
    k.truncate(target.max(prefix));
    k
}

/// A hostfile of `n` free loopback ports in `dir`.
pub fn hostfile(dir: &Path, n: usize) -> PathBuf {
    let lines: Vec<String> = (0..n).map(|_| format!("127.0.0.1:{}\n", free_port())).collect();
    let path = dir.join(format!("hosts-{}", lines[0].trim().replace([':', '.'], "_")));
    std::fs::write(&path, lines.concat()).unwrap();
    path
}

/// A loopback port free now, below the kernel's ephemeral range, as `jobs/local-cluster.sh`
/// picks them. A port from `bind(0)` comes from that range, from which the kernel also takes the
/// local ports of outgoing connections: between the hostfile's writing and the job's listen,
/// another test's connection could take it (a clean clone's CI run failed on "Address already
/// in use"). Below the range only a listener holds a port, and the tests of this binary never
/// pick the same one twice.
fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ports = ephemeral_floor() - 20_000;
    loop {
        // Spread by this process's id, so that two test binaries run at once start apart.
        let port = 20_000 + (std::process::id().wrapping_mul(7_919) + NEXT.fetch_add(1, Ordering::Relaxed)) % ports;
        if std::net::TcpListener::bind(("127.0.0.1", port as u16)).is_ok() {
            return port as u16;
        }
    }
}

/// Where `jobs/local-cluster.sh`'s ports end: the start of the kernel's ephemeral range, or
/// 61000 where that starts too low to leave room above 20000.
pub fn ephemeral_floor() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u32>().ok())
        .filter(|&low| low > 21_024)
        .unwrap_or(61_000)
}

/// Runs `bloomflow ARGS -n N -p I -w W --hostfile H` for every process on loopback, kills them
/// all if they have not finished within `timeout`, and returns each process's output.
pub fn run_cluster(dir: &Path, processes: usize, workers: usize, args: &[&str], timeout: std::time::Duration) -> Vec<Output> {
    let workers = workers.to_string();
    run_cluster_each(dir, processes, |_| [args, &["-w", &workers]].concat().iter().map(|a| a.to_string()).collect(), timeout)
}

/// [`run_cluster`] with each process's own arguments, `args(p)` for process `p`.
pub fn run_cluster_each(dir: &Path, processes: usize, args: impl Fn(usize) -> Vec<String>, timeout: std::time::Duration) -> Vec<Output> {
    run_cluster_piped(dir, processes, args, None, None, timeout)
}

/// [`run_cluster`] with `stdin` piped into process 0, as a launcher gives the job its standard
/// input; the other processes' standard input is empty.
pub fn run_cluster_with_stdin(dir: &Path, processes: usize, workers: usize, args: &[&str], stdin: &[u8], timeout: std::time::Duration) -> Vec<Output> {
    run_cluster_with_stdin_once(dir, (processes, None), workers, args, stdin, || true, timeout)
}

/// A test's condition for writing a job's standard input.
type Ready = Box<dyn Fn() -> bool + Send>;

/// [`run_cluster_with_stdin`] with `stdin` written only once `ready` holds (asked every 5 ms,
/// for up to 30 s): process 0's worker 0, which reads it, is held up until then. `processes` is
/// the count and, if given, each process's working directory, as processes on separate hosts
/// would see one relative path as separate directories.
pub fn run_cluster_with_stdin_once(
    dir: &Path,
    (processes, homes): (usize, Option<&[PathBuf]>),
    workers: usize,
    args: &[&str],
    stdin: &[u8],
    ready: impl Fn() -> bool + Send + 'static,
    timeout: std::time::Duration,
) -> Vec<Output> {
    let workers = workers.to_string();
    let args = |_| [args, &["-w", &workers]].concat().iter().map(|a| a.to_string()).collect();
    run_cluster_piped(dir, processes, args, Some((stdin, Box::new(ready))), homes, timeout)
}

fn run_cluster_piped(
    dir: &Path,
    processes: usize,
    args: impl Fn(usize) -> Vec<String>,
    stdin: Option<(&[u8], Ready)>,
    homes: Option<&[PathBuf]>,
    timeout: std::time::Duration,
) -> Vec<Output> {
    let hosts = hostfile(dir, processes);
    let mut children: Vec<_> = (0..processes)
        .map(|p| {
            let mut command = bin();
            if let Some(homes) = homes {
                command.current_dir(&homes[p]);
            }
            command
                .args(args(p))
                .args(["-n", &processes.to_string(), "-p", &p.to_string()])
                .arg("--hostfile")
                .arg(&hosts)
                .arg("--connect-timeout")
                .arg("20")
                .stdin(if p == 0 && stdin.is_some() { Stdio::piped() } else { Stdio::null() })
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let held = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    if let Some((bytes, ready)) = stdin {
        // Written from a thread, so that a large input cannot block on a full pipe while the
        // test waits below.
        let mut pipe = children[0].stdin.take().unwrap();
        let bytes = bytes.to_vec();
        let held = std::sync::Arc::clone(&held);
        std::thread::spawn(move || {
            let waited = std::time::Instant::now();
            while !ready() {
                if waited.elapsed() > std::time::Duration::from_secs(30) {
                    held.store(false, std::sync::atomic::Ordering::Relaxed);
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            let _ = pipe.write_all(&bytes);
        });
    }
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if children.iter_mut().all(|c| c.try_wait().unwrap().is_some()) {
            break;
        }
        if std::time::Instant::now() > deadline {
            for c in &mut children {
                let _ = c.kill();
            }
            let outs: Vec<_> = children.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
            let errs: Vec<_> = outs.iter().map(|o| String::from_utf8_lossy(&o.stderr).to_string()).collect();
            panic!("cluster did not finish within {timeout:?}; stderr: {errs:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let outs = children.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    assert!(held.load(std::sync::atomic::Ordering::Relaxed), "standard input was written after 30 s without its condition");
    outs
}

/// Asserts that a job's statistics hold its timeline: exactly `phases`, in order, at times that
/// never go back, the last no later than the job's elapsed time.
#[track_caller]
pub fn check_timeline(stats: &serde_json::Value, phases: &[&str]) {
    let marks = stats["timeline"].as_array().unwrap_or_else(|| panic!("no timeline: {stats}"));
    let names: Vec<&str> = marks.iter().map(|m| m["phase"].as_str().unwrap()).collect();
    assert_eq!(names, phases);
    let secs: Vec<f64> = marks.iter().map(|m| m["secs"].as_f64().unwrap()).collect();
    assert!(secs[0] >= 0.0 && secs.windows(2).all(|w| w[0] <= w[1]), "{secs:?}");
    assert!(*secs.last().unwrap() <= stats["elapsed_secs"].as_f64().unwrap(), "{secs:?} past {}", stats["elapsed_secs"]);
}
