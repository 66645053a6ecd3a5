//! Files that must not outlive a failed process: temporary files register here while they are
//! being written (and a replaced output directory while it is removed), so that a process that
//! has to exit at once (a lost peer, a worker's panic, a signal) removes them first; and once
//! that cleanup has begun, no thread makes another ([`unless_exiting`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, Mutex, RwLock};
use std::time::{Duration, Instant};

/// The paths being written. A set: a job holds one claim per split of its input until it ends,
/// and each was unregistered from a list by a search of it, quadratic in the splits: a
/// semi-join of 10,000 small files took 3.8 s, most of it comparing paths.
static IN_PROGRESS: LazyLock<Mutex<HashSet<PathBuf>>> = LazyLock::new(|| Mutex::new(HashSet::new()));

/// The files this process has moved into place, complete: a filter, a generated file, an
/// output's `_SUCCESS`. A signal can come after the last of them and before the process exits.
static COMMITTED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The process's gate: a path is made and registered before the cleanup looks, or never.
/// Without it a worker could make a file between the cleanup's removals and the exit (a split's
/// claim, made just after the part, was left in an interrupted job's output).
static GATE: Gate = Gate::new();

/// Runs `act` unless the process is exiting (the cleanup has begun): then this thread waits
/// for the exit. Whatever makes paths (files, directories, renames into place) does it here and
/// registers the ones to remove, so that it makes nothing the cleanup would miss; and the
/// command's outcome is reported here, so that a job interrupted as it ended is not also
/// reported as finished or as failed on the files the cleanup removed.
pub fn unless_exiting<T>(act: impl FnOnce() -> T) -> T {
    GATE.pass(act).unwrap_or_else(|| loop {
        std::thread::park();
    })
}

/// Held shared by every thread making a path, and taken whole by the cleanup once it has set
/// `closed`, so that it waits for the paths being made.
struct Gate {
    lock: RwLock<()>,
    closed: AtomicBool,
}

impl Gate {
    const fn new() -> Gate {
        Gate { lock: RwLock::new(()), closed: AtomicBool::new(false) }
    }

    /// Runs `make` unless the gate is closed (None then).
    fn pass<T>(&self, make: impl FnOnce() -> T) -> Option<T> {
        let _shared = self.lock.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        (!self.closed.load(Ordering::SeqCst)).then(make)
    }

    /// Closes the gate: nothing passes from now on, and what is passing is waited for. The
    /// wait is bounded, so that the cleanup never hangs the exit.
    fn close(&self, wait: Duration) {
        self.closed.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            match self.lock.try_write() {
                Ok(_) | Err(std::sync::TryLockError::Poisoned(_)) => return,
                Err(std::sync::TryLockError::WouldBlock) => std::thread::sleep(Duration::from_micros(200)),
            }
        }
    }
}

/// Notes that `path` is being written.
pub fn register(path: &Path) {
    if let Ok(mut paths) = IN_PROGRESS.lock() {
        paths.insert(path.to_path_buf());
    }
}

/// Notes that `path` is finished (renamed or removed).
pub fn unregister(path: &Path) {
    if let Ok(mut paths) = IN_PROGRESS.lock() {
        paths.remove(path);
    }
}

/// Notes that `path` was moved into place, complete (called behind [`unless_exiting`]).
pub fn committed(path: &Path) {
    if let Ok(mut list) = COMMITTED.lock() {
        list.push(path.to_path_buf());
    }
}

/// The files this process has committed so far.
pub(crate) fn committed_so_far() -> Vec<PathBuf> {
    COMMITTED.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
}

/// What a process that stops early says of the files it had committed, complete, before: None
/// when it committed none (it then says it "committed no output").
fn committed_note(committed: &[PathBuf]) -> Option<String> {
    let list: Vec<String> = committed.iter().map(|p| p.display().to_string()).collect();
    (!list.is_empty()).then(|| format!("this process had committed {} before it stopped, complete", list.join(", ")))
}

/// Removes every file still being written (and every directory registered: a replaced output
/// being removed), then the output directories their parts leave empty. Only for a process
/// about to exit: nothing is made after it (see [`unless_exiting`]).
fn remove_all() {
    GATE.close(Duration::from_secs(1));
    if let Ok(paths) = IN_PROGRESS.lock() {
        for path in paths.iter() {
            if path.is_dir() {
                let _ = std::fs::remove_dir_all(path);
            } else {
                let _ = std::fs::remove_file(path);
            }
        }
        for path in paths.iter() {
            remove_empty_output(path);
        }
    }
}

/// Where `path` was a task's file in an output's `_temporary/` (or a part committed to the
/// output), removes that directory and the output directory if nothing else is in them, as a
/// failed job does (`output::abort_task`). `remove_dir` removes only an empty directory, so a
/// peer's part keeps them.
fn remove_empty_output(path: &Path) {
    let temporary = path.parent().filter(|dir| dir.file_name() == Some(std::ffi::OsStr::new(crate::output::TEMPORARY)));
    let committed = path.file_name().filter(|name| name.to_string_lossy().starts_with("part-")).and(path.parent());
    if let Some(output) = temporary.and_then(Path::parent).or(committed) {
        crate::output::remove_if_empty(output);
    }
}

/// Makes Ctrl-C, SIGTERM and SIGHUP end this process as a failed job ends: its unfinished
/// files removed (a filter's temporary file, unfinished and uncommitted parts, a replaced output
/// being removed), a message, and a non-zero exit (130, a shell's status for Ctrl-C). Killed
/// outright, an interrupted job left them behind.
pub fn remove_on_interrupt() {
    // Fails only if a handler is set already: then that one stands.
    let _ = ctrlc::set_handler(|| {
        remove_all();
        match committed_note(&committed_so_far()) {
            None => eprintln!("bloomflow: interrupted: this process removed its unfinished files and committed no output"),
            Some(note) => eprintln!("bloomflow: interrupted: this process removed its unfinished files; {note}"),
        }
        std::process::exit(130);
    });
}

/// Makes a lost peer process end this one at once, cleanly: timely's network threads panic with
/// "timely communication error" when a connection breaks, and the workers would notice only when
/// they next step (never, if one is blocked reading a pipe). The hook removes this process's
/// unfinished files, says what happened, and exits non-zero. Other panics (bugs) keep the
/// default report.
pub fn exit_on_lost_peer() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = panic_message(info.payload());
            if message.contains("timely communication error") || message.contains("MergeQueue poisoned") {
                exit_failed(&format!("lost the connection to a peer process ({message})"));
            }
            default(info);
        }));
    });
}

/// The text of a panic's payload (a `String` or a `&str`; empty otherwise).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload.downcast_ref::<String>().map(String::as_str).or_else(|| payload.downcast_ref::<&str>().copied()).unwrap_or("")
}

/// Ends this process after worker `worker` panicked (a bug): its unfinished files removed, a
/// message, exit status 1. The other workers would otherwise wait forever for the panicked one,
/// at a barrier or for its part of a dataflow, and the job would hang instead of failing; with
/// this process gone, its peer processes lose their connection to it and fail too.
pub fn exit_after_worker_panic(worker: usize, payload: &(dyn std::any::Any + Send)) -> ! {
    exit_failed(&format!("worker {worker} failed: {} (a bug in bloomflow; please report it)", panic_message(payload)))
}

/// Removes the unfinished files, says why the job failed, and exits with status 1. Only the
/// first thread to call it does: several threads may fail at once (every network thread when a
/// peer is lost), and the others wait for the exit.
fn exit_failed(why: &str) -> ! {
    static EXITING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if EXITING.swap(true, std::sync::atomic::Ordering::SeqCst) {
        loop {
            std::thread::park();
        }
    }
    remove_all();
    match committed_note(&committed_so_far()) {
        None => eprintln!("bloomflow: error: {why}; the job failed and this process committed no output"),
        Some(note) => eprintln!("bloomflow: error: {why}; {note}"),
    }
    std::process::exit(1);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::{Arc, Barrier};

    /// A process that stops early says it committed no output only when it committed none;
    /// else it names the files it had committed.
    #[test]
    fn a_stopped_process_names_the_files_it_had_committed() {
        assert_eq!(committed_note(&[]), None);
        let note = committed_note(&[PathBuf::from("out/f.bloom"), PathBuf::from("out/_SUCCESS")]);
        assert_eq!(note.as_deref(), Some("this process had committed out/f.bloom, out/_SUCCESS before it stopped, complete"));
    }

    /// Closing waits for what is passing the gate, and nothing passes after: what a thread makes
    /// is either done before the close returns, or never done.
    #[test]
    fn a_closed_gate_waits_for_what_is_passing_and_lets_nothing_after() {
        let gate = Arc::new(Gate::new());
        let made = Arc::new(AtomicUsize::new(0));
        let inside = Arc::new(Barrier::new(2));
        let passing = {
            let (gate, made, inside) = (gate.clone(), made.clone(), inside.clone());
            std::thread::spawn(move || {
                gate.pass(|| {
                    inside.wait();
                    // Still making when the close begins.
                    std::thread::sleep(Duration::from_millis(100));
                    made.fetch_add(1, Ordering::SeqCst);
                })
            })
        };
        inside.wait();
        gate.close(Duration::from_secs(10));
        assert_eq!(made.load(Ordering::SeqCst), 1, "the close returned before what was passing was made");
        assert_eq!(passing.join().unwrap(), Some(()));
        let after = gate.pass(|| made.fetch_add(1, Ordering::SeqCst));
        assert_eq!(after, None);
        assert_eq!(made.load(Ordering::SeqCst), 1, "a path was made after the close");
    }

    /// After its files are removed, an output directory goes with its empty `_temporary/`,
    /// whether the file was a task's in `_temporary/` or a part committed to the output; a
    /// directory that still holds something stays, and so does the directory of a file that is
    /// neither (a filter's temporary file beside the user's other files).
    #[test]
    fn an_output_left_empty_goes_with_its_files() {
        let dir = tempfile::tempdir().unwrap();
        for file in ["_temporary/part-00000", "part-00000"] {
            let out = dir.path().join("out");
            std::fs::create_dir_all(out.join("_temporary")).unwrap();
            remove_empty_output(&out.join(file));
            assert!(!out.exists(), "{file}: the emptied output is left");
        }
        let out = dir.path().join("kept");
        std::fs::create_dir_all(out.join("_temporary")).unwrap();
        std::fs::write(out.join("part-00001"), b"a peer's part").unwrap();
        remove_empty_output(&out.join("part-00000"));
        assert!(out.join("part-00001").exists() && !out.join("_temporary").exists());
        let user = dir.path().join("user");
        std::fs::create_dir(&user).unwrap();
        remove_empty_output(&user.join(".f.bloom.tmp-1"));
        assert!(user.exists(), "a directory no job made is removed");
    }

    /// A close whose wait runs out (a thread stuck passing) still closes.
    #[test]
    fn a_close_is_bounded() {
        let gate = Arc::new(Gate::new());
        let held = gate.lock.read().unwrap();
        let started = Instant::now();
        gate.close(Duration::from_millis(50));
        assert!(started.elapsed() < Duration::from_secs(5));
        drop(held);
        assert_eq!(gate.pass(|| 1), None);
    }
}
