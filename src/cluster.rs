//! Cluster settings: timely's `-w`, `-n`, `-p` and a hostfile, parsed by our own CLI (timely's
//! getopts parser rejects unknown flags, and clap's `-h` would collide with timely's hostfile
//! flag) and turned into a `timely::Config`. Also the connect timeout timely lacks: a process whose
//! peers never come up would otherwise retry forever.

use crate::error::{Error, Result};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

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

/// Ends the process with a clear message if the workers have not started (meaning the peers
/// never all connected) within the timeout. Call `connected()` on the returned guard from a
/// worker once the dataflow runs.
pub struct ConnectWatchdog {
    connected: Arc<AtomicBool>,
}

impl ConnectWatchdog {
    /// Starts watching; single-process jobs need no watchdog but get a harmless one.
    pub fn start(config: &ClusterConfig) -> Self {
        if config.processes > 1 {
            crate::cleanup::exit_on_lost_peer();
        }
        let connected = Arc::new(AtomicBool::new(config.processes == 1));
        if config.processes > 1 {
            let flag = Arc::clone(&connected);
            let timeout = config.connect_timeout;
            let addresses = config.addresses.join(", ");
            let process = config.process;
            std::thread::spawn(move || {
                std::thread::sleep(timeout);
                if !flag.load(Ordering::SeqCst) {
                    eprintln!(
                        "bloomflow: error: process {process} could not connect to all peers within {}s \
                         (--connect-timeout); are all processes started with the same hostfile? addresses: {addresses}",
                        timeout.as_secs()
                    );
                    std::process::exit(1);
                }
            });
        }
        ConnectWatchdog { connected }
    }

    /// A handle workers use to report that the network is up.
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.connected)
    }
}
