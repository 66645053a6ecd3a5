//! What a job tells its user: per-worker reports that travel through the dataflow, the final
//! statistics (printed and written as JSON), and a progress bar on a terminal.

use crate::scan::ScanStats;
use serde::{Deserialize, Serialize};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One worker's account of its part of a job, broadcast so that every worker knows the totals
/// and whether any worker failed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerReport {
    pub worker: usize,
    pub scan: ScanStats,
    /// Keys inserted into the partial filter (build side) or records kept (probe side).
    pub keys: u64,
    pub elapsed_secs: f64,
    /// Bytes of build keys this worker kept for an exact broadcast join; `None` when it kept
    /// none or they passed the broadcast limit.
    #[serde(default)]
    pub collected_key_bytes: Option<u64>,
    /// The keys it kept (each once where they repeat: see
    /// [`crate::keyset::KeyArena::holding_each_key_once`]), and of those the numbers, the other
    /// short keys and the big numbers, for the exact set's tables (see
    /// [`crate::keyset::KeyCounts`]): every process sizes those tables before the keys arrive.
    #[serde(default)]
    pub collected_keys: u64,
    #[serde(default)]
    pub collected_number_keys: u64,
    #[serde(default)]
    pub collected_short_keys: u64,
    #[serde(default)]
    pub collected_big_number_keys: u64,
    /// The smallest and the largest of those numbers, by which the set may hold them as bits.
    #[serde(default)]
    pub collected_numbers_range: Option<(u32, u32)>,
    /// Keys a subtract job skipped because the filter answers `no` for them (`--skip-absent`).
    #[serde(default)]
    pub absent_keys: u64,
    /// Set when this worker failed; the job then fails everywhere and writes nothing.
    pub error: Option<String>,
}

/// Where a job's time went: when its first worker reached each phase, in seconds since the
/// process started the job (planning the inputs and connecting to the other processes come
/// before the first mark). Printed in the summary and written to the statistics.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Timeline(Vec<PhaseMark>);

/// A phase reached, and when.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseMark {
    pub phase: &'static str,
    pub secs: f64,
}

impl Timeline {
    /// Marks `phase` as reached now, `started` being when the job started.
    pub fn mark(&mut self, phase: &'static str, started: std::time::Instant) {
        self.0.push(PhaseMark { phase, secs: started.elapsed().as_secs_f64() });
    }

    pub fn marks(&self) -> &[PhaseMark] {
        &self.0
    }

    /// The marks in one line: "workers running 0.004 s, filter merged 0.512 s".
    pub fn describe(&self) -> String {
        self.0.iter().map(|m| format!("{} {:.3} s", m.phase, m.secs)).collect::<Vec<_>>().join(", ")
    }
}

/// The first failure among the reports, naming the worker.
pub fn first_failure(reports: &[WorkerReport]) -> Option<String> {
    reports.iter().find_map(|r| r.error.clone())
}

/// Megabytes (10^6 bytes) per second.
pub fn mb_per_sec(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 / 1e6 / secs
    } else {
        0.0
    }
}

/// A progress bar on stderr (bytes read of total, rate) while a job runs, only when stderr is a
/// terminal; it reads a counter the workers bump.
pub struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    /// Starts drawing if `enabled` and stderr is a terminal. `total` is the bytes this process
    /// expects to read, which the job may raise once it knows of more reading to do.
    pub fn start(enabled: bool, label: &str, total: Arc<AtomicU64>, counter: Arc<AtomicU64>) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        if !enabled || !std::io::stderr().is_terminal() {
            return Progress { stop, thread: None };
        }
        let bar = indicatif::ProgressBar::new(total.load(Ordering::Relaxed));
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{msg} [{bar:40}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_message(label.to_string());
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                let done = counter.load(Ordering::Relaxed);
                // A process's total is its fair share of the input, but its workers claim splits
                // as they go and may read more: the total then grows, so the bar never shows
                // more than 100%.
                let length = total.load(Ordering::Relaxed).max(done);
                if length != bar.length().unwrap_or(0) {
                    bar.set_length(length);
                }
                bar.set_position(done);
                std::thread::sleep(Duration::from_millis(100));
            }
            bar.finish_and_clear();
        });
        Progress { stop, thread: Some(thread) }
    }

    /// Removes the bar.
    pub fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
