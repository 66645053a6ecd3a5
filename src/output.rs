//! Hadoop-style job output: a directory with one `part-WWWWW` per worker, each written under
//! `DIR/_temporary/` and moved into place when the worker's task succeeds, then `_SUCCESS` (the
//! job's statistics as JSON) written last, by worker 0, only once every worker has succeeded.
//! A directory without `_SUCCESS` is the output of a failed or unfinished job.

use crate::atomic::{AtomicFile, Writeback};
use crate::compressed::{Compression, OutputCompression};
use crate::error::{Error, Result};
use crate::hadoop_blocks::{BlockCodec, HadoopBlockWriter};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

pub const TEMPORARY: &str = "_temporary";
pub const SUCCESS: &str = "_SUCCESS";

/// The name of worker `w`'s part file, with the suffix of its compression (`.gz`, `.zst`, ...),
/// as Hadoop names a compressed job's parts.
pub fn part_name(worker: usize, compression: Compression) -> String {
    format!("part-{worker:05}{}", compression.suffix())
}

/// Refuses an output (a filter file or a semi-join's directory) that is one of the job's input
/// files or holds one: a directory of inputs is read with everything beneath it, so a rerun
/// would read the last run's filter or parts as records (Spark refuses this too: "Cannot
/// overwrite a path that is also being read from"). An output that does not exist yet holds
/// nothing.
pub fn check_not_an_input<'a>(output: &Path, inputs: impl IntoIterator<Item = &'a crate::splits::Input>) -> Result<()> {
    let Ok(output_at) = std::fs::canonicalize(output) else { return Ok(()) };
    for input in inputs {
        if let crate::splits::Input::File { path, .. } = input {
            let Ok(at) = std::fs::canonicalize(path) else { continue };
            if at.starts_with(&output_at) {
                let what = if at == output_at { "is".to_string() } else { format!("holds {}, which is", path.display()) };
                return Err(Error::invalid("output", format!("{} {what} an input of the job: write the output elsewhere", output.display())));
            }
        }
    }
    Ok(())
}

/// An output directory replaced by [`prepare`]: moved aside at once, and removed by a thread of
/// its own while the job runs. Dropping this waits for the removal.
pub struct Replaced(Option<std::thread::JoinHandle<()>>);

impl Drop for Replaced {
    fn drop(&mut self) {
        if let Some(removal) = self.0.take() {
            let _ = removal.join();
        }
    }
}

/// Checks the output directory before a job starts ([`check`]): an existing one is refused
/// unless `overwrite`, in which case process 0 replaces it (every process checks, so that all
/// of them refuse at once rather than waiting for a peer that already gave up).
///
/// The old directory is renamed to a hidden sibling, which takes no time, and removed in the
/// background: removing the parts of the last semi-join (75 MB) took 17 ms before any work
/// began, 6% of a two-worker run. Its large files are shortened step by step first
/// (`shrink_files`), since a plain unlink of each made the workers' reads wait for it.
pub fn prepare(dir: &Path, overwrite: bool, process: usize) -> Result<Replaced> {
    check(dir, overwrite, process)?;
    let replaced = match process == 0 && (dir.exists() || dir.is_symlink()) {
        true => move_aside(dir)?,
        false => Replaced(None),
    };
    // Missing parents are created, as Hadoop does.
    let parent = parent_of(dir);
    std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
    Ok(replaced)
}

/// [`prepare`]'s checks alone, changing nothing: for a job's plan (`semijoin --plan`), and
/// before `prepare` replaces anything. Where the parent is missing, the directory it would be
/// made in must be writable, since `prepare` makes the missing parents.
pub fn check(dir: &Path, overwrite: bool, process: usize) -> Result<()> {
    if dir.file_name().is_none() {
        // `.`, `..` or `/`: --overwrite would remove a directory the user works in.
        return Err(Error::Job(format!("output directory {} names no directory of its own: give the name of a new one", dir.display())));
    }
    if dir.exists() || dir.is_symlink() {
        if !overwrite {
            return Err(Error::Job(format!(
                "output directory {} already exists{} (use --overwrite to replace it)",
                dir.display(),
                if is_unfinished(dir) { ", the output of a job that did not finish (_temporary/, no _SUCCESS)" } else { "" }
            )));
        }
        if let Some(foreign) = not_job_output(dir)? {
            return Err(Error::Job(format!(
                "refusing to --overwrite {}: it holds {}, which no job wrote (jobs write part-* files and _ or . names); \
                 remove it yourself or choose another output directory",
                dir.display(),
                foreign.display()
            )));
        }
        if process == 0 && !dir.is_dir() {
            return Err(Error::io(dir, std::io::Error::other("exists and is not a directory")));
        }
    }
    // The parent must be writable: checked now rather than after the work is done.
    let parent = parent_of(dir);
    // Where it is missing, the nearest ancestor that exists, which `prepare` makes it in.
    let existing = parent.ancestors().find(|a| !a.as_os_str().is_empty() && a.exists()).unwrap_or(Path::new("."));
    let meta = std::fs::metadata(existing).map_err(|e| Error::io(existing, e))?;
    if !meta.is_dir() {
        return Err(Error::io(dir, std::io::Error::other(format!("{} is not a directory", existing.display()))));
    }
    if meta.permissions().readonly() {
        return Err(Error::io(dir, std::io::Error::other(format!("parent directory {} is read-only", existing.display()))));
    }
    Ok(())
}

/// The directory `dir` is made in: its parent, or the working directory.
fn parent_of(dir: &Path) -> PathBuf {
    match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Whether `dir` is what a killed job leaves: its `_temporary/` and no `_SUCCESS` (a job that
/// fails removes its `_temporary/`; one killed by SIGKILL or a lost machine cannot).
fn is_unfinished(dir: &Path) -> bool {
    dir.join(TEMPORARY).is_dir() && !dir.join(SUCCESS).exists()
}

/// The first entry of the existing output `dir` that no Hadoop-style job writes, if any: a job
/// writes `part-*` files, `_SUCCESS`, `_temporary/` and hidden files (`.crc` checksums), and
/// --overwrite replaces only such a directory, never one holding other data (`-o data` for
/// `-o data/out`, say). A directory with nothing in it is fine, and so is one that is gone: in a
/// job of several processes, process 0 moves the old output aside once it has checked it, and
/// another process may be reading it then (which failed a 2-process benchmark run with "No
/// such file or directory").
fn not_job_output(dir: &Path) -> Result<Option<PathBuf>> {
    if !dir.is_dir() {
        return Ok(None); // refused as not a directory by process 0
    }
    let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    let entries = match std::fs::read_dir(dir) {
        Err(e) if gone(&e) => return Ok(None),
        entries => entries.map_err(|e| Error::io(dir, e))?,
    };
    for entry in entries {
        let entry = match entry {
            Err(e) if gone(&e) => return Ok(None),
            entry => entry.map_err(|e| Error::io(dir, e))?,
        };
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with("part-") || crate::splits::is_hidden(&name)) {
            return Ok(Some(entry.path()));
        }
    }
    Ok(None)
}

/// Renames `dir` to a hidden sibling and removes that in a new thread; where either cannot be
/// done, removes `dir` here and now.
fn move_aside(dir: &Path) -> Result<Replaced> {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let trash = dir.with_file_name(format!(".{name}.bloomflow-replaced-{}", std::process::id()));
    let moved = crate::cleanup::unless_exiting(|| {
        let moved = std::fs::rename(dir, &trash).is_ok();
        if moved {
            // A process that must exit at once (a lost peer) removes it too.
            crate::cleanup::register(&trash);
        }
        moved
    });
    if !moved {
        std::fs::remove_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        return Ok(Replaced(None));
    }
    let removal = {
        let trash = trash.clone();
        std::thread::Builder::new().name("remove-old-output".into()).spawn(move || {
            shrink_files(&trash, 0);
            let _ = std::fs::remove_dir_all(&trash);
            crate::cleanup::unregister(&trash);
        })
    };
    match removal {
        Ok(handle) => Ok(Replaced(Some(handle))),
        Err(_) => {
            std::fs::remove_dir_all(&trash).map_err(|e| Error::io(&trash, e))?;
            crate::cleanup::unregister(&trash);
            Ok(Replaced(None))
        }
    }
}

/// Bytes a replaced output's file is shortened by at a time before it is removed.
const SHRINK_STEP: u64 = 4 << 20;

/// Shortens the large files under a replaced output directory step by step, so that removing
/// them does not stall the job's reads.
///
/// On ext4 the unlink of a 37 MB part took 23 ms, and the workers' reads of cached input waited
/// for it: reads of 256 KiB took 13–16 ms instead of 0.1–0.5 (strace of a semi-join -w 2 that
/// replaced its last output; the same in a scratch reader beside a plain unlink). Truncated
/// 4 MiB at a time first, the same file took about as long to remove, and no read waited more
/// than 0.6 ms. Only files of one link are shortened (a part the user hard-linked elsewhere
/// keeps its bytes there), never through a symbolic link; errors only skip the shortening,
/// as the removal that follows is what counts.
fn shrink_files(dir: &Path, depth: usize) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        const MAX_DEPTH: usize = 16;
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            // A directory entry's metadata does not follow a symbolic link.
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() && depth < MAX_DEPTH {
                shrink_files(&entry.path(), depth + 1);
            } else if meta.is_file() && meta.nlink() == 1 && meta.len() > SHRINK_STEP {
                let Ok(file) = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NOFOLLOW).open(entry.path()) else {
                    continue;
                };
                // The file opened must still be the one looked at, of one link.
                match file.metadata() {
                    Ok(now) if now.ino() == meta.ino() && now.dev() == meta.dev() && now.nlink() == 1 => {}
                    _ => continue,
                }
                let mut len = meta.len();
                while len > SHRINK_STEP {
                    len -= SHRINK_STEP;
                    if file.set_len(len).is_err() {
                        break;
                    }
                }
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (dir, depth);
}

/// A file of the job's temporary area, e.g. a part file being written.
pub struct TaskFile {
    temp: PathBuf,
    writer: Option<TaskWriter>,
}

/// What writes a task file: its bytes as they come, or compressed.
enum TaskWriter {
    Plain(BufWriter<Writeback>),
    Gzip(BufWriter<flate2::write::GzEncoder<Writeback>>),
    Zstd(BufWriter<zstd::stream::write::Encoder<'static, Writeback>>),
    Deflate(BufWriter<flate2::write::ZlibEncoder<Writeback>>),
    Bzip2(BufWriter<bzip2::write::BzEncoder<Writeback>>),
    /// Snappy or LZ4 in Hadoop's block framing (which gathers a block of text itself).
    Blocks(Box<HadoopBlockWriter<BufWriter<Writeback>>>),
}

/// Bytes gathered before each write to the file (or the encoder).
const WRITE_BUFFER: usize = 1 << 20;

impl TaskWriter {
    /// A writer of `file` with `compression` (levels checked by [`OutputCompression::new`]).
    fn new(file: Writeback, compression: OutputCompression) -> std::io::Result<TaskWriter> {
        let zlib_level = || compression.level.map_or(flate2::Compression::default(), |l| flate2::Compression::new(l as u32));
        Ok(match compression.codec {
            Compression::None => TaskWriter::Plain(BufWriter::with_capacity(WRITE_BUFFER, file)),
            Compression::Gzip => TaskWriter::Gzip(BufWriter::with_capacity(WRITE_BUFFER, flate2::write::GzEncoder::new(file, zlib_level()))),
            Compression::Zstd => {
                let mut encoder = zstd::stream::write::Encoder::new(file, compression.level.unwrap_or(zstd::DEFAULT_COMPRESSION_LEVEL))?;
                // So that a reader can tell a damaged file from a whole one.
                encoder.include_checksum(true)?;
                TaskWriter::Zstd(BufWriter::with_capacity(WRITE_BUFFER, encoder))
            }
            Compression::Deflate => TaskWriter::Deflate(BufWriter::with_capacity(WRITE_BUFFER, flate2::write::ZlibEncoder::new(file, zlib_level()))),
            Compression::Bzip2 => {
                let level = compression.level.map_or(bzip2::Compression::best(), |l| bzip2::Compression::new(l as u32));
                TaskWriter::Bzip2(BufWriter::with_capacity(WRITE_BUFFER, bzip2::write::BzEncoder::new(file, level)))
            }
            Compression::Snappy => TaskWriter::Blocks(Box::new(HadoopBlockWriter::new(BufWriter::with_capacity(WRITE_BUFFER, file), BlockCodec::Snappy))),
            Compression::Lz4 => TaskWriter::Blocks(Box::new(HadoopBlockWriter::new(BufWriter::with_capacity(WRITE_BUFFER, file), BlockCodec::Lz4))),
        })
    }

    #[inline]
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            TaskWriter::Plain(w) => w.write_all(bytes),
            TaskWriter::Gzip(w) => w.write_all(bytes),
            TaskWriter::Zstd(w) => w.write_all(bytes),
            TaskWriter::Deflate(w) => w.write_all(bytes),
            TaskWriter::Bzip2(w) => w.write_all(bytes),
            TaskWriter::Blocks(w) => w.write_all(bytes),
        }
    }

    /// Writes out what is buffered and ends a compressed stream (its trailer: without it the
    /// file reads as truncated), giving back the file's writer.
    fn finish(self) -> std::io::Result<Writeback> {
        match self {
            TaskWriter::Plain(w) => w.into_inner().map_err(|e| e.into_error()),
            TaskWriter::Gzip(w) => w.into_inner().map_err(|e| e.into_error())?.finish(),
            TaskWriter::Zstd(w) => w.into_inner().map_err(|e| e.into_error())?.finish(),
            TaskWriter::Deflate(w) => w.into_inner().map_err(|e| e.into_error())?.finish(),
            TaskWriter::Bzip2(w) => w.into_inner().map_err(|e| e.into_error())?.finish(),
            TaskWriter::Blocks(w) => w.finish()?.into_inner().map_err(|e| e.into_error()),
        }
    }
}

impl TaskFile {
    /// Creates `DIR/_temporary/NAME` (and the directories above it), written with `compression`.
    pub fn create(dir: &Path, name: &str, compression: OutputCompression) -> Result<TaskFile> {
        TaskFile::create_with(dir, name, compression, Writeback::new)
    }

    /// Creates a scratch file `DIR/_temporary/NAME` that the job reads back and deletes, such
    /// as the exact join's survivors: never synced. Syncing the shuffle anti-join's copy of every
    /// probe record (1.4 GB) made up a third of the job's disk time.
    pub fn create_scratch(dir: &Path, name: &str) -> Result<TaskFile> {
        TaskFile::create_with(dir, name, OutputCompression::NONE, Writeback::scratch)
    }

    fn create_with(dir: &Path, name: &str, compression: OutputCompression, writer: fn(File) -> Writeback) -> Result<TaskFile> {
        let temp_dir = dir.join(TEMPORARY);
        let temp = temp_dir.join(name);
        let file = crate::cleanup::unless_exiting(|| {
            std::fs::create_dir_all(&temp_dir).map_err(|e| Error::io(&temp_dir, e))?;
            let file = File::create(&temp).map_err(|e| Error::io(&temp, e))?;
            crate::cleanup::register(&temp);
            Ok::<_, Error>(file)
        })?;
        let writer = TaskWriter::new(writer(file), compression).map_err(|e| Error::io(&temp, e))?;
        Ok(TaskFile { temp, writer: Some(writer) })
    }

    /// The path while being written.
    pub fn path(&self) -> &Path {
        &self.temp
    }

    /// Appends bytes.
    #[inline]
    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        let w = self.writer.as_mut().expect("open until committed");
        w.write_all(bytes).map_err(|e| Error::io(&self.temp, e))
    }

    /// Starts a sync of what is written so far in the background ([`Writeback::sync_in_background`]),
    /// for a file that stays open a while before more is written and it is finished. Only a
    /// plain file: a compressor's buffered bytes could not be flushed without changing its stream.
    pub fn sync_so_far(&mut self) -> Result<()> {
        if let Some(TaskWriter::Plain(w)) = self.writer.as_mut() {
            w.flush().map_err(|e| Error::io(&self.temp, e))?;
            w.get_mut().sync_in_background();
        }
        Ok(())
    }

    /// Flushes (ending a compressed stream) and syncs, leaving the file in the temporary area
    /// (for a later read). On failure the file is removed.
    pub fn finish(mut self) -> Result<PathBuf> {
        let w = self.writer.take().expect("open until committed");
        let temp = std::mem::take(&mut self.temp);
        let synced = w
            .finish()
            .map_err(|e| Error::io(&temp, e))
            .and_then(|w| w.sync().map_err(|e| Error::io(&temp, e)));
        if let Err(e) = synced {
            let _ = std::fs::remove_file(&temp);
            crate::cleanup::unregister(&temp);
            return Err(e);
        }
        Ok(temp)
    }
}

/// Moves a finished task file from `DIR/_temporary/` to `DIR`: the task's commit, done once the
/// job knows every task succeeded.
pub fn commit_task(dir: &Path, temp: &Path) -> Result<PathBuf> {
    let target = dir.join(temp.file_name().expect("task files have names"));
    crate::cleanup::unless_exiting(|| {
        if let Err(e) = std::fs::rename(temp, &target) {
            discard(temp);
            return Err(Error::io(&target, e));
        }
        crate::cleanup::unregister(temp);
        // A committed part is removed too if the process must exit before the job commits.
        crate::cleanup::register(&target);
        Ok(target)
    })
}

/// Removes a finished task file that will not be committed.
pub fn discard(temp: &Path) {
    let _ = std::fs::remove_file(temp);
    crate::cleanup::unregister(temp);
}

impl Drop for TaskFile {
    fn drop(&mut self) {
        if self.writer.take().is_some() {
            let _ = std::fs::remove_file(&self.temp);
            crate::cleanup::unregister(&self.temp);
        }
    }
}

/// Writes `DIR/_SUCCESS` with `json`, after removing the (by then empty) temporary area.
pub fn write_success(dir: &Path, json: &[u8]) -> Result<()> {
    let _ = std::fs::remove_dir_all(dir.join(TEMPORARY));
    let mut f = AtomicFile::create(&dir.join(SUCCESS))?;
    f.write_all(json).map_err(|e| Error::io(dir.join(SUCCESS), e))?;
    f.commit()
}

/// Removes what a worker wrote as `part` (see [`part_name`]) after a failed job, then the
/// temporary area and the output directory where nothing else is left in them: a failed job
/// leaves no directory that a rerun would have to be told to overwrite. Every worker tries, once
/// all have stopped writing; `remove_dir` removes only an empty directory, so the last worker
/// to remove its part removes them.
pub fn abort_task(dir: &Path, part: &str) {
    let _ = std::fs::remove_file(dir.join(part));
    let _ = std::fs::remove_file(dir.join(TEMPORARY).join(part));
    remove_if_empty(dir);
}

/// Removes the output directory `dir` and its `_temporary/` where nothing is left in them, as
/// a failed or interrupted job leaves them: the job made both (an output directory that
/// existed was refused or moved aside by [`prepare`]).
pub(crate) fn remove_if_empty(dir: &Path) {
    let _ = std::fs::remove_dir(dir.join(TEMPORARY));
    let _ = std::fs::remove_dir(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `check` refuses what `prepare` would refuse and changes nothing: missing parents are
    /// judged by the directory they would be made in, and are not made.
    #[test]
    fn check_refuses_as_prepare_does_and_changes_nothing() {
        let root = tempfile::tempdir().unwrap();
        let missing = root.path().join("a/b/out");
        check(&missing, false, 0).unwrap();
        assert!(!root.path().join("a").exists(), "check made a parent");
        let file = root.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let under_file = check(&file.join("b/out"), false, 0).unwrap_err().to_string();
        assert!(under_file.contains("is not a directory"), "{under_file}");
        let done = root.path().join("done");
        std::fs::create_dir(&done).unwrap();
        std::fs::write(done.join("part-00000"), b"x").unwrap();
        assert!(check(&done, false, 0).unwrap_err().to_string().contains("already exists"));
        check(&done, true, 0).unwrap();
        assert!(done.join("part-00000").exists(), "check replaced the output");
        let locked = root.path().join("locked");
        std::fs::create_dir(&locked).unwrap();
        let mut permissions = std::fs::metadata(&locked).unwrap().permissions();
        permissions.set_readonly(true);
        std::fs::set_permissions(&locked, permissions).unwrap();
        for out in [locked.join("out"), locked.join("x/out")] {
            let refused = check(&out, false, 0).unwrap_err().to_string();
            assert!(refused.contains("is read-only"), "{refused}");
        }
    }

    /// A part synced so far and then written more holds every byte in order, plain or
    /// compressed (whose stream the early sync leaves alone).
    #[test]
    fn a_part_synced_so_far_and_written_more_holds_it_all() {
        let dir = tempfile::tempdir().unwrap();
        let first: Vec<u8> = (0..5_000_000usize).map(|i| b"abcdefghij\n"[i % 11]).collect();
        for codec in [Compression::None, Compression::Gzip] {
            let mut part = TaskFile::create(dir.path(), &format!("part-{codec:?}"), OutputCompression { codec, level: None }).unwrap();
            part.write(&first).unwrap();
            part.sync_so_far().unwrap();
            part.write(b"then more\n").unwrap();
            let file = std::fs::File::open(part.finish().unwrap()).unwrap();
            let mut text = Vec::new();
            match codec {
                Compression::Gzip => std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(file), &mut text),
                _ => std::io::Read::read_to_end(&mut { file }, &mut text),
            }
            .unwrap();
            assert!(text == [&first[..], b"then more\n"].concat(), "{codec:?}");
        }
    }

    /// A replaced output's large files are emptied before removal, but never a file with a
    /// second link (the user's copy) nor the target of a symbolic link.
    #[cfg(unix)]
    #[test]
    fn an_output_moved_aside_while_it_is_checked_is_no_error() {
        // Another process checks the old output while process 0 moves it aside: here one thread
        // moves it back and forth while the other checks it for 2 s: some checks see it go
        // midway (there at `is_dir`, gone at `read_dir`), which failed the check before.
        let dir = tempfile::tempdir().unwrap();
        let (out, aside) = (dir.path().join("out"), dir.path().join(".out.old"));
        std::fs::create_dir(&out).unwrap();
        for i in 0..50 {
            std::fs::write(out.join(format!("part-{i:05}")), "").unwrap();
        }
        let stop = std::sync::atomic::AtomicBool::new(false);
        let checked = std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = std::fs::rename(&out, &aside);
                    let _ = std::fs::rename(&aside, &out);
                }
            });
            let started = std::time::Instant::now();
            let mut checked = Ok(None);
            while started.elapsed() < std::time::Duration::from_secs(2) && matches!(checked, Ok(None)) {
                checked = not_job_output(&out);
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            checked
        });
        assert!(matches!(checked, Ok(None)), "{checked:?}");
    }

    #[test]
    fn shrinking_a_replaced_output_spares_hard_links_and_symlink_targets() {
        let root = tempfile::tempdir().unwrap();
        let (old, kept) = (root.path().join("old"), root.path().join("kept"));
        std::fs::create_dir_all(old.join("nested")).unwrap();
        std::fs::create_dir(&kept).unwrap();
        let big = vec![b'x'; 3 * SHRINK_STEP as usize + 5];
        for part in ["part-00000", "nested/part-00001", "linked"] {
            std::fs::write(old.join(part), &big).unwrap();
        }
        std::fs::hard_link(old.join("linked"), kept.join("linked")).unwrap();
        std::fs::write(kept.join("target"), &big).unwrap();
        std::os::unix::fs::symlink(kept.join("target"), old.join("symlink")).unwrap();

        shrink_files(&old, 0);
        for part in ["part-00000", "nested/part-00001"] {
            assert!(std::fs::metadata(old.join(part)).unwrap().len() <= SHRINK_STEP, "{part} shortened");
        }
        assert_eq!(std::fs::read(kept.join("linked")).unwrap(), big, "a hard-linked part keeps its bytes");
        assert_eq!(std::fs::read(kept.join("target")).unwrap(), big, "a symlink's target keeps its bytes");
    }
}
