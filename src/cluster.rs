//! Cluster settings: timely's `-w`, `-n`, `-p` and a hostfile, parsed by our own CLI (timely's
//! getopts parser rejects unknown flags, and clap's `-h` would collide with timely's hostfile
//! flag) and turned into a `timely::Config`. Also the connect timeout timely lacks: a process whose
//! peers never come up would otherwise retry forever.

use crate::error::{Error, Result};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

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
        if workers == 0 {
            return Err(Error::invalid("workers (-w)", "must be at least 1"));
        }
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

/// Starts this process's workers and runs `func` on each, as `timely::execute` does. For a
/// cluster, the connections to the other processes are made here first, with timely's handshake
/// (each process connects to the lower-numbered ones and sends its index as a big-endian u64)
/// but a fast retry and a deadline: timely's own loop sleeps a whole second between attempts,
/// prints to stdout, and never gives up.
pub fn execute<T, F>(config: &ClusterConfig, func: F) -> Result<timely::communication::WorkerGuards<T>>
where
    T: Send + 'static,
    F: Fn(&mut timely::worker::Worker) -> T + Send + Sync + 'static,
{
    let started = |e: String| Error::Job(format!("could not start the workers: {e}"));
    if config.processes == 1 {
        return timely::execute(config.timely_config(), func).map_err(started);
    }
    crate::cleanup::exit_on_lost_peer();
    use timely::communication::allocator::zero_copy::initialize::initialize_networking_from_sockets;
    use timely::communication::allocator::{AllocatorBuilder, ProcessBuilder};
    let sockets = connect_peers(config)?;
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

/// One connected stream per other process (`None` at this process's own index).
fn connect_peers(config: &ClusterConfig) -> Result<Vec<Option<TcpStream>>> {
    let me = config.process;
    let deadline = Instant::now() + config.connect_timeout;
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
                    stream.write_all(&(me as u64).to_be_bytes()).map_err(|e| Error::Job(format!("handshake with {address}: {e}")))?;
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
                let mut index = [0u8; 8];
                stream.read_exact(&mut index).map_err(|e| Error::Job(format!("handshake: {e}")))?;
                let peer = u64::from_be_bytes(index) as usize;
                if peer <= me || peer >= config.processes || sockets[peer].is_some() {
                    return Err(Error::Job(format!("process {me}: unexpected connection claiming to be process {peer}")));
                }
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
