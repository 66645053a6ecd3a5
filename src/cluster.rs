//! Cluster settings: timely's `-w`, `-n`, `-p` and a hostfile, parsed by our own CLI (timely's
//! getopts parser rejects unknown flags, and clap's `-h` would collide with timely's hostfile
//! flag) and turned into a `timely::Config`. Also the connect timeout timely lacks: a process whose
//! peers never come up would otherwise retry forever.

use crate::error::{Error, Result};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The most worker threads a process runs. timely connects every worker with every other by
/// channels, so its memory and start-up time grow with the square of the workers: about 3.5 KiB
/// a pair, measured; `-w 512` took 0.9 GiB and 15 s before its first record on 2 cores, and
/// `-w 2000` 13 GiB and six minutes. A mistyped `-w 100000` would be killed for want of memory;
/// it is refused instead. One worker a core is the fastest.
pub const MAX_WORKERS: usize = 1024;

/// Where this process sits in the job.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// Worker threads in this process (`-w`).
    pub workers: usize,
    /// Processes in the job (`-n`).
    pub processes: usize,
    /// This process's index (`-p`).
    pub process: usize,
    /// `host:port` per process, in process order.
    pub addresses: Vec<String>,
    /// How long to wait for every peer before giving up.
    pub connect_timeout: Duration,
}

impl ClusterConfig {
    /// A single process with `workers` threads.
    pub fn local(workers: usize) -> Self {
        ClusterConfig {
            workers,
            processes: 1,
            process: 0,
            addresses: Vec::new(),
            connect_timeout: Duration::from_secs(60),
        }
    }

    /// Validates the flags and reads the hostfile (when more than one process).
    pub fn new(workers: usize, processes: usize, process: usize, hostfile: Option<&PathBuf>, connect_timeout: Duration) -> Result<Self> {
        check_workers(workers)?;
        if processes == 0 {
            return Err(Error::invalid("processes (-n)", "must be at least 1"));
        }
        if process >= processes {
            return Err(Error::invalid(
                "process (-p)",
                format!("{process} is not below the number of processes {processes} (indexes are 0-based)"),
            ));
        }
        let addresses = match (processes, hostfile) {
            (1, _) => Vec::new(),
            (_, None) => (0..processes).map(|i| format!("localhost:{}", 2101 + i)).collect(),
            (_, Some(path)) => read_hostfile(path, processes)?,
        };
        Ok(ClusterConfig { workers, processes, process, addresses, connect_timeout })
    }

    /// Total workers across all processes.
    pub fn peers(&self) -> usize {
        self.workers * self.processes
    }

    /// The timely configuration for this process.
    pub fn timely_config(&self) -> timely::Config {
        let communication = if self.processes > 1 {
            timely::CommunicationConfig::Cluster {
                threads: self.workers,
                process: self.process,
                addresses: self.addresses.clone(),
                report: false,
                zerocopy: false,
            }
        } else if self.workers > 1 {
            timely::CommunicationConfig::Process(self.workers)
        } else {
            timely::CommunicationConfig::Thread
        };
        timely::Config { communication, worker: timely::WorkerConfig::default() }
    }
}

/// Refuses a worker count of 0, or of more than [`MAX_WORKERS`].
pub fn check_workers(workers: usize) -> Result<()> {
    if workers == 0 {
        return Err(Error::invalid("workers (-w)", "must be at least 1"));
    }
    if workers > MAX_WORKERS {
        return Err(Error::invalid(
            "workers (-w)",
            format!("{workers} is more than the {MAX_WORKERS} a process runs (timely's channels grow with the square of the workers; one worker a core is fastest)"),
        ));
    }
    Ok(())
}

/// Reads `host:port` lines (blank lines and `#` comments ignored); needs one per process.
fn read_hostfile(path: &PathBuf, processes: usize) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let mut addresses = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let valid = line.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !valid {
            return Err(Error::Malformed {
                path: path.display().to_string(),
                line: i as u64 + 1,
                reason: format!("expected host:port, found {line:?}"),
            });
        }
        addresses.push(line.to_string());
    }
    if addresses.len() < processes {
        return Err(Error::invalid(
            "hostfile",
            format!("{} lists {} address(es), but -n is {processes}", path.display(), addresses.len()),
        ));
    }
    addresses.truncate(processes);
    Ok(addresses)
}

/// What every process of a job must agree on, compared when the processes connect. A process
/// started with other flags, by another bloomflow, or seeing other input files would otherwise
/// read the splits planned for other files (a filter silently missing keys), or size its filter
/// or its worker count differently (a panic in the merge or in timely's networking).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Agreement {
    /// Worker threads per process: timely needs the same number in every process.
    pub workers: u64,
    /// The job's input files and their bytes, to say how two processes' inputs differ.
    pub files: u64,
    pub bytes: u64,
    /// A digest of the bloomflow version and of the job's plan: its arguments, every input's
    /// path and size, the splits, the key's field in each file, the filter's identity.
    pub digest: u64,
}

impl Agreement {
    /// Bytes on the wire: the four fields, big-endian.
    const WIRE: usize = 32;

    /// The agreement of a job whose plan `plan` describes (any text that differs wherever the
    /// plans differ, such as the plan's `Debug` form).
    pub fn new(workers: usize, files: u64, bytes: u64, plan: &str) -> Self {
        let text = format!("bloomflow {}\n{plan}", env!("CARGO_PKG_VERSION"));
        let (a, b) = crate::hashing::lookup3::hashlittle2(text.as_bytes(), 0, 0);
        Agreement { workers: workers as u64, files, bytes, digest: (a as u64) << 32 | b as u64 }
    }

    fn to_wire(self) -> [u8; Self::WIRE] {
        let mut wire = [0u8; Self::WIRE];
        for (i, field) in [self.workers, self.files, self.bytes, self.digest].into_iter().enumerate() {
            wire[8 * i..8 * i + 8].copy_from_slice(&field.to_be_bytes());
        }
        wire
    }

    fn from_wire(wire: &[u8; Self::WIRE]) -> Self {
        let field = |i: usize| u64::from_be_bytes(wire[8 * i..8 * i + 8].try_into().expect("8 bytes"));
        Agreement { workers: field(0), files: field(1), bytes: field(2), digest: field(3) }
    }

    /// Fails, saying what differs, unless process `peer`'s agreement `theirs` equals this one
    /// (process `me`'s).
    fn check(&self, me: usize, theirs: &Agreement, peer: usize) -> Result<()> {
        if self == theirs {
            return Ok(());
        }
        // Told in process order, so that both processes print the same message.
        let ((a, ours), (b, other)) = if me < peer { ((me, self), (peer, theirs)) } else { ((peer, theirs), (me, self)) };
        let what = if ours.workers != other.workers {
            format!("process {a} runs {} worker(s), process {b} runs {}: give every process the same -w", ours.workers, other.workers)
        } else if (ours.files, ours.bytes) != (other.files, other.bytes) {
            format!(
                "process {a} sees {} input file(s) of {} bytes in all, process {b} sees {} of {}: every process must see the same files at the same paths",
                ours.files, ours.bytes, other.files, other.bytes
            )
        } else {
            format!(
                "processes {a} and {b} were given different arguments, run different bloomflow versions, or see files \
                 that differ in name or split plan: start every process with the same command and files"
            )
        };
        Err(Error::Job(format!("the processes disagree about the job: {what}")))
    }
}

/// Starts this process's workers and runs `func` on each, as `timely::execute` does. For a
/// cluster, the connections to the other processes are made here first, with timely's handshake
/// (each process connects to the lower-numbered ones and sends its index as a big-endian u64)
/// but a fast retry and a deadline: timely's own loop sleeps a whole second between attempts,
/// prints to stdout, and never gives up. A worker that panics ends the process
/// ([`crate::cleanup::exit_after_worker_panic`]).
pub fn execute<T, F>(config: &ClusterConfig, agreement: impl FnOnce() -> Agreement, func: F) -> Result<timely::communication::WorkerGuards<T>>
where
    T: Send + 'static,
    F: Fn(&mut timely::worker::Worker) -> T + Send + Sync + 'static,
{
    let started = |e: String| Error::Job(format!("could not start the workers: {e}"));
    // A worker that panics ends the process: its siblings and peers would wait for it forever.
    let func = move |worker: &mut timely::worker::Worker| {
        let index = worker.index();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| func(worker))) {
            Ok(result) => result,
            Err(panic) => crate::cleanup::exit_after_worker_panic(index, panic.as_ref()),
        }
    };
    if config.processes == 1 {
        return timely::execute(config.timely_config(), func).map_err(started);
    }
    crate::cleanup::exit_on_lost_peer();
    use timely::communication::allocator::zero_copy::initialize::initialize_networking_from_sockets;
    use timely::communication::allocator::{AllocatorBuilder, ProcessBuilder};
    let sockets = connect_peers(config, &agreement())?;
    let hooks = timely::communication::Hooks::default();
    let local = ProcessBuilder::new_typed_vector(config.workers, hooks.refill.clone(), hooks.spill.clone());
    let (builders, guard) = initialize_networking_from_sockets(local, sockets, config.process, config.workers, hooks)
        .map_err(|e| started(e.to_string()))?;
    let builders = builders.into_iter().map(AllocatorBuilder::Tcp).collect();
    timely::execute::execute_from(builders, Box::new(guard), timely::WorkerConfig::default(), func).map_err(started)
}

/// How often a connection to a peer that is not up yet is retried: soon at first (peers start
/// together, and a wait of a whole interval showed in every job's start), then less often.
const FIRST_RETRY: Duration = Duration::from_micros(100);
const RETRY: Duration = Duration::from_millis(2);

/// Waits until `listener` has a connection to accept or `timeout` has passed, without polling
/// it on a timer: a process that slept 2 ms between accepts started every job 2 ms late.
fn wait_for_connection(listener: &TcpListener, timeout: Duration) {
    #[cfg(unix)]
    {
        use std::os::unix::io::AsRawFd;
        let mut fd = libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let millis = timeout.as_millis().clamp(1, 100) as libc::c_int;
        // SAFETY: one valid pollfd for an open descriptor; poll only reads and writes it.
        unsafe {
            libc::poll(&mut fd, 1, millis);
        }
    }
    #[cfg(not(unix))]
    std::thread::sleep(timeout.min(RETRY));
}

/// One connected stream per other process (`None` at this process's own index), each past the
/// handshake: the connecting process sends its index and its [`Agreement`], the accepting one
/// answers with its own, and both fail unless the two agree.
fn connect_peers(config: &ClusterConfig, agreement: &Agreement) -> Result<Vec<Option<TcpStream>>> {
    let me = config.process;
    let deadline = deadline_after(config.connect_timeout);
    let gave_up = |waiting_for: usize| {
        Error::Job(format!(
            "process {me} could not connect to all peers within {}s (--connect-timeout): process {waiting_for} at {} \
             never answered; are all processes started with the same hostfile?",
            config.connect_timeout.as_secs(),
            config.addresses[waiting_for]
        ))
    };
    // Listen before connecting, so that higher-numbered peers can connect meanwhile.
    let listener = TcpListener::bind(&config.addresses[me])
        .map_err(|e| Error::Job(format!("process {me} cannot listen on {}: {e}", config.addresses[me])))?;
    listener.set_nonblocking(true).map_err(|e| Error::Job(e.to_string()))?;
    let mut sockets: Vec<Option<TcpStream>> = (0..config.processes).map(|_| None).collect();
    for (peer, address) in config.addresses.iter().enumerate().take(me) {
        let mut retry = FIRST_RETRY;
        loop {
            match TcpStream::connect(address) {
                Ok(mut stream) => {
                    stream.set_nodelay(true).map_err(|e| Error::Job(e.to_string()))?;
                    let handshake = |e: std::io::Error| Error::Job(format!("handshake with process {peer} at {address}: {e}"));
                    stream.write_all(&(me as u64).to_be_bytes()).map_err(handshake)?;
                    stream.write_all(&agreement.to_wire()).map_err(handshake)?;
                    let theirs = read_agreement(&mut stream, deadline).map_err(handshake)?;
                    agreement.check(me, &theirs, peer)?;
                    sockets[peer] = Some(stream);
                    break;
                }
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(retry);
                    retry = (retry * 2).min(RETRY);
                }
                Err(_) => return Err(gave_up(peer)),
            }
        }
    }
    while let Some(waiting) = (me + 1..config.processes).find(|&p| sockets[p].is_none()) {
        match listener.accept() {
            Ok((mut stream, _)) => {
                stream.set_nonblocking(false).map_err(|e| Error::Job(e.to_string()))?;
                stream.set_nodelay(true).map_err(|e| Error::Job(e.to_string()))?;
                let handshake = |e: std::io::Error| Error::Job(format!("process {me}: handshake with a connecting peer: {e}"));
                stream.set_read_timeout(Some(remaining(deadline))).map_err(handshake)?;
                let mut index = [0u8; 8];
                stream.read_exact(&mut index).map_err(handshake)?;
                let peer = u64::from_be_bytes(index) as usize;
                if peer <= me || peer >= config.processes || sockets[peer].is_some() {
                    return Err(Error::Job(format!("process {me}: unexpected connection claiming to be process {peer}")));
                }
                let theirs = read_agreement(&mut stream, deadline).map_err(handshake)?;
                // Answered before it is checked, so that the peer learns of a disagreement too.
                stream.write_all(&agreement.to_wire()).map_err(handshake)?;
                agreement.check(me, &theirs, peer)?;
                sockets[peer] = Some(stream);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                wait_for_connection(&listener, deadline.saturating_duration_since(Instant::now()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Err(gave_up(waiting)),
            Err(e) => return Err(Error::Job(format!("process {me}: accepting connections: {e}"))),
        }
    }
    Ok(sockets)
}

/// The instant `timeout` from now, or a century from now for a longer timeout: `Instant`'s `+`
/// panics past the clock's range, which `--connect-timeout 18446744073709551615` reached.
fn deadline_after(timeout: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    let now = Instant::now();
    now.checked_add(timeout.min(CENTURY)).unwrap_or(now)
}

/// Time left until `deadline`, at least a millisecond (a zero timeout means none).
fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1))
}

/// Reads a peer's [`Agreement`], waiting until `deadline` at most, and leaves the stream
/// blocking with no timeout, as timely's networking expects it.
fn read_agreement(stream: &mut TcpStream, deadline: Instant) -> std::io::Result<Agreement> {
    stream.set_read_timeout(Some(remaining(deadline)))?;
    let mut wire = [0u8; Agreement::WIRE];
    stream.read_exact(&mut wire)?;
    stream.set_read_timeout(None)?;
    Ok(Agreement::from_wire(&wire))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--connect-timeout 18446744073709551615` panicked in `Instant`'s `+`; it now waits a
    /// century, and a usual timeout is kept as it is.
    #[test]
    fn a_timeout_past_the_clock_s_range_waits_a_century() {
        let year = Duration::from_secs(365 * 24 * 3600);
        assert!(deadline_after(Duration::from_secs(u64::MAX)) > Instant::now() + 99 * year);
        assert!(deadline_after(Duration::MAX) > Instant::now() + 99 * year);
        let before = Instant::now();
        let deadline = deadline_after(Duration::from_secs(20));
        assert!(deadline >= before + Duration::from_secs(20) && deadline <= Instant::now() + Duration::from_secs(20));
    }

    /// A worker that panics ends its process with status 1 and a message naming it, instead of
    /// leaving its siblings waiting for it forever. The test runs itself again as a child
    /// process (a panicking worker exits the process it is in): there, worker 1 panics while
    /// worker 0 steps for ever.
    #[test]
    fn a_panicking_worker_ends_the_process_instead_of_hanging_it() {
        const CHILD: &str = "BLOOMFLOW_TEST_PANICKING_WORKER";
        if std::env::var_os(CHILD).is_some() {
            let agreement = || unreachable!("one process makes no agreement");
            let _ = execute(&ClusterConfig::local(2), agreement, |worker| {
                if worker.index() == 1 {
                    panic!("injected for the test");
                }
                loop {
                    worker.step_or_park(Some(Duration::from_millis(10)));
                }
            });
            unreachable!("the workers never finish");
        }
        let name = "cluster::tests::a_panicking_worker_ends_the_process_instead_of_hanging_it";
        let mut child = std::process::Command::new(std::env::current_exe().expect("the test binary"))
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the test binary runs");
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().expect("waitable") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("the process of a panicked worker was still running after 60 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().expect("piped"), &mut stderr).expect("readable");
        assert_eq!(status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("bloomflow: error: worker 1 failed: injected for the test"), "{stderr}");
    }

    /// An agreement crosses the wire whole, and plans that differ anywhere differ in digest.
    #[test]
    fn agreements_cross_the_wire_and_digest_their_plans() {
        let ours = Agreement::new(2, 3, 4000, "build\nplan");
        assert_eq!(Agreement::from_wire(&ours.to_wire()), ours);
        assert_eq!(Agreement::new(2, 3, 4000, "build\nplan"), ours);
        assert_ne!(Agreement::new(2, 3, 4000, "build\nplan ").digest, ours.digest);
        assert!(ours.check(0, &ours, 1).is_ok());
        let other = Agreement::new(2, 3, 4000, "build\nother plan");
        let err = ours.check(1, &other, 0).unwrap_err().to_string();
        assert!(err.contains("processes 0 and 1 were given different arguments"), "{err}");
    }
}

