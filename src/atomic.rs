//! Files that appear under their real name only when complete: written to a temporary name in the
//! same directory and renamed on commit, so a crash never leaves a half-written file that looks done.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;

/// Bytes written between requests to start writing them to disk.
pub const WRITEBACK_STEP: u64 = 4 << 20;

/// Bytes written between requests to the background syncer to make them durable.
pub const SYNC_STEP: u64 = 2 * WRITEBACK_STEP;

/// A file being written whose pages are made durable while it is written, so that the sync of
/// its commit has only the last few MiB left to wait for.
///
/// Every [`WRITEBACK_STEP`] bytes the kernel is asked to start writing the dirty pages
/// (`sync_file_range`, Linux), and every [`SYNC_STEP`] bytes a background thread is asked to
/// `fdatasync` the file. Starting the writes alone was not enough: on this project's virtual
/// disks an fsync's cost grows with the data written since the last one (about 1 ms per MB,
/// whenever it was written), so syncing 37 MB at commit took 30–60 ms however early its pages had
/// gone out. With the syncs made on the way by another thread, the commit's sync took 1.6–4.5 ms
/// and the whole write 7% less time (a scratch writer of 37 MB interleaved with 300 ms of work).
/// A background sync's error is kept and returned by [`Writeback::sync`], never dropped.
pub struct Writeback {
    file: File,
    pending_writeback: u64,
    pending_sync: u64,
    syncer: Option<Syncer>,
    /// False for a scratch file, read back and deleted by the job: never synced, nor written
    /// back early, since its pages may never need to reach the disk at all.
    durable: bool,
}

/// The thread that syncs a file in the background: one request at most waits, since a sync
/// covers everything written before it starts.
struct Syncer {
    requests: mpsc::SyncSender<()>,
    thread: std::thread::JoinHandle<std::io::Result<()>>,
}

impl Syncer {
    /// Starts a syncer of (a duplicate descriptor of) `file`; `None` if the descriptor or the
    /// thread cannot be had, in which case the commit's sync does all the work, as before.
    fn start(file: &File) -> Option<Syncer> {
        let file = file.try_clone().ok()?;
        let (requests, incoming) = mpsc::sync_channel::<()>(1);
        let thread = std::thread::Builder::new()
            .name("bloomflow-sync".into())
            .spawn(move || {
                for () in incoming {
                    file.sync_data()?;
                }
                Ok(())
            })
            .ok()?;
        Some(Syncer { requests, thread })
    }

    /// Asks for a sync, unless one is waiting already (it will cover this data too) or the
    /// thread has stopped on an error (which [`Syncer::stop`] returns).
    fn request(&self) {
        let _ = self.requests.try_send(());
    }

    /// Waits for the sync under way, if any, and returns the first error of any.
    fn stop(self) -> std::io::Result<()> {
        drop(self.requests);
        self.thread.join().unwrap_or_else(|_| Err(std::io::Error::other("the background sync thread panicked")))
    }
}

impl Writeback {
    pub fn new(file: File) -> Self {
        Writeback { file, pending_writeback: 0, pending_sync: 0, syncer: None, durable: true }
    }

    /// A scratch file's writer: plain writes, and [`Writeback::sync`] does nothing.
    pub fn scratch(file: File) -> Self {
        Writeback { durable: false, ..Writeback::new(file) }
    }

    /// Makes every byte written durable (an error of a background sync included): the sync
    /// of a commit. Nothing for a scratch file.
    pub fn sync(mut self) -> std::io::Result<()> {
        if let Some(syncer) = self.syncer.take() {
            syncer.stop()?;
        }
        if self.durable {
            self.file.sync_all()?;
        }
        Ok(())
    }

    /// Starts the writes of every byte written so far and a sync of them in the background, so
    /// that a later [`sync`](Self::sync) has only what comes after to wait for.
    pub fn sync_in_background(&mut self) {
        if self.durable {
            (self.pending_writeback, self.pending_sync) = (0, 0);
            self.start_writeback();
            self.request_sync();
        }
    }

    fn start_writeback(&self) {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::io::AsRawFd;
            // SAFETY: a plain system call on an open descriptor; it only schedules writes of
            // dirty pages. Its outcome is a hint: the fsync at commit reports any failure.
            unsafe {
                libc::sync_file_range(self.file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
            }
        }
    }

    fn request_sync(&mut self) {
        if self.syncer.is_none() {
            self.syncer = Syncer::start(&self.file);
        }
        if let Some(syncer) = &self.syncer {
            syncer.request();
        }
    }
}

impl Write for Writeback {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        if !self.durable {
            return Ok(n);
        }
        self.pending_writeback += n as u64;
        self.pending_sync += n as u64;
        if self.pending_writeback >= WRITEBACK_STEP {
            self.pending_writeback = 0;
            self.start_writeback();
        }
        if self.pending_sync >= SYNC_STEP {
            self.pending_sync = 0;
            self.request_sync();
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// A file being written under a temporary name; `commit` moves it into place, dropping it
/// without committing deletes it.
pub struct AtomicFile {
    target: PathBuf,
    temp: PathBuf,
    writer: Option<BufWriter<Writeback>>,
}

impl AtomicFile {
    /// Starts writing what will become `target`.
    pub fn create(target: &Path) -> Result<Self> {
        let name = target
            .file_name()
            .ok_or_else(|| Error::io(target, std::io::Error::other("not a file path")))?
            .to_string_lossy();
        let temp = target.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
        let file = crate::cleanup::unless_exiting(|| {
            let file = File::create(&temp).map_err(|e| Error::io(target, e))?;
            crate::cleanup::register(&temp);
            Ok::<_, Error>(file)
        })?;
        Ok(AtomicFile {
            target: target.to_path_buf(),
            temp,
            writer: Some(BufWriter::with_capacity(1 << 20, Writeback::new(file))),
        })
    }

    /// The path the file will have once committed.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Flushes, syncs and renames into place. On failure the temporary file is removed.
    pub fn commit(mut self) -> Result<()> {
        let writer = self.writer.take().expect("writer present until commit");
        let outcome = (|| {
            let file = writer.into_inner().map_err(|e| Error::io(&self.target, e.into_error()))?;
            file.sync().map_err(|e| Error::io(&self.target, e))?;
            // Not once the process is exiting: what it said it committed is what it did.
            // Recorded as it is renamed, behind the same gate: an interrupt that comes after
            // says so, instead of "committed no output".
            crate::cleanup::unless_exiting(|| {
                std::fs::rename(&self.temp, &self.target)?;
                crate::cleanup::committed(&self.target);
                Ok(())
            })
            .map_err(|e| Error::io(&self.target, e))
        })();
        if outcome.is_err() {
            let _ = std::fs::remove_file(&self.temp);
        }
        crate::cleanup::unregister(&self.temp);
        outcome
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writer.as_mut().expect("writer present until commit").write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.writer.as_mut().expect("writer present until commit").flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.writer.take().is_some() {
            let _ = std::fs::remove_file(&self.temp);
            crate::cleanup::unregister(&self.temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_committed_file_holds_every_byte_written_past_several_writeback_and_sync_steps() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.bin");
        let mut file = AtomicFile::create(&target).unwrap();
        let mut want = Vec::new();
        let mut rng = crate::xorshift::XorShift::new(7);
        // Pieces of odd sizes, small and larger than the buffer, 3 background syncs' worth.
        while want.len() < 3 * SYNC_STEP as usize {
            let len = (rng.next() % (3 << 20)) as usize + 1;
            let piece: Vec<u8> = (0..len).map(|i| (i as u64 ^ rng.next()) as u8).collect();
            file.write_all(&piece).unwrap();
            want.extend_from_slice(&piece);
        }
        assert!(!target.exists(), "nothing under the real name before the commit");
        file.commit().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), want);
    }

    /// A commit is recorded for the interrupt's message; a file dropped uncommitted is not.
    #[test]
    fn a_commit_is_recorded_and_an_abandoned_file_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let (kept, dropped) = (dir.path().join("kept"), dir.path().join("dropped"));
        let mut f = AtomicFile::create(&kept).unwrap();
        f.write_all(b"x").unwrap();
        f.commit().unwrap();
        drop(AtomicFile::create(&dropped).unwrap());
        let committed = crate::cleanup::committed_so_far();
        assert!(committed.contains(&kept), "{committed:?}");
        assert!(!committed.contains(&dropped) && !dropped.exists(), "{committed:?}");
    }

    /// A background sync's failure is not lost: `stop` returns it. (/dev/null cannot be synced:
    /// Linux answers EINVAL.)
    #[cfg(target_os = "linux")]
    #[test]
    fn a_background_sync_error_is_returned_when_the_syncer_stops() {
        let file = std::fs::OpenOptions::new().write(true).open("/dev/null").unwrap();
        let syncer = Syncer::start(&file).expect("a thread and a descriptor");
        syncer.request();
        let err = syncer.stop().expect_err("the sync of /dev/null fails");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");

        // And a syncer that was never asked has nothing to report.
        let idle = Syncer::start(&file).expect("a thread and a descriptor");
        idle.stop().unwrap();
    }

    /// A durable file is synced in the background as it grows; a scratch file never is, and
    /// both hold every byte written.
    #[test]
    fn only_durable_files_are_synced_in_the_background() {
        let dir = tempfile::tempdir().unwrap();
        let piece = vec![7u8; (SYNC_STEP / 4) as usize + 3];
        for durable in [true, false] {
            let path = dir.path().join(format!("f-{durable}"));
            let file = File::create(&path).unwrap();
            let mut w = if durable { Writeback::new(file) } else { Writeback::scratch(file) };
            for _ in 0..9 {
                w.write_all(&piece).unwrap();
            }
            assert_eq!(w.syncer.is_some(), durable, "durable: {durable}");
            w.sync().unwrap();
            assert_eq!(std::fs::metadata(&path).unwrap().len(), 9 * piece.len() as u64);
        }
    }
}
