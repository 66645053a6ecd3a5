//! Files that must not outlive a failed process: temporary files register here while they are
//! being written (and a replaced output directory while it is removed), so that a process that
//! has to exit at once (a lost peer) removes them first.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

static IN_PROGRESS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Notes that `path` is being written.
pub fn register(path: &Path) {
    if let Ok(mut list) = IN_PROGRESS.lock() {
        list.push(path.to_path_buf());
    }
}

/// Notes that `path` is finished (renamed or removed).
pub fn unregister(path: &Path) {
    if let Ok(mut list) = IN_PROGRESS.lock() {
        list.retain(|p| p != path);
    }
}

/// Removes every file still being written (and every directory registered: a replaced output
/// being removed), then the output directories their parts leave empty.
pub fn remove_all() {
    if let Ok(list) = IN_PROGRESS.lock() {
        for path in list.iter() {
            if path.is_dir() {
                let _ = std::fs::remove_dir_all(path);
            } else {
                let _ = std::fs::remove_file(path);
            }
        }
        for path in list.iter() {
            remove_empty_output(path);
        }
    }
}

/// Where `path` was a task's file in an output's `_temporary/`, removes that directory and the
/// output directory if nothing else is in them, as a failed job does (`output::abort_task`).
/// `remove_dir` removes only an empty directory, so a peer's part keeps them.
fn remove_empty_output(path: &Path) {
    let temporary = path.parent().filter(|dir| dir.file_name() == Some(std::ffi::OsStr::new(crate::output::TEMPORARY)));
    if let Some(output) = temporary.and_then(Path::parent) {
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
        eprintln!("bloomflow: interrupted: this process removed its unfinished files and committed no output");
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
            let payload = info.payload();
            let message = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("");
            if message.contains("timely communication error") || message.contains("MergeQueue poisoned") {
                // Several network threads may fail at once: the first reports and exits.
                static EXITING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
                if EXITING.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    loop {
                        std::thread::park();
                    }
                }
                remove_all();
                eprintln!(
                    "bloomflow: error: lost the connection to a peer process ({message}); \
                     the job failed and this process committed no output"
                );
                std::process::exit(1);
            }
            default(info);
        }));
    });
}
