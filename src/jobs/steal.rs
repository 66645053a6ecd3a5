//! Work stealing for the semi-join's probe, among all the workers that write into the same output
//! directory, whatever their process, without changing what any part file holds.
//!
//! Probe splits are assigned (split i to worker i mod peers), so that each worker's part file
//! holds its splits' records in input order whoever is faster. But a worker can fall behind
//! (on a shared 2-vCPU host the two workers of `-w 2` ended their probe 5–62 ms apart, in 300
//! ms; two processes of one worker 2–88 ms apart), and the job waits for the last. So a worker
//! whose own splits are done takes the last unread split of the worker with the most left, reads
//! it into a scratch file, `_temporary/taken-SSSSS`, and its owner appends the outputs of its
//! taken splits, in input order, after its own: as soon as they are read where a worker of its
//! own process took them, else once every worker is done (only then would it know of another
//! process's failure). A split is taken from the back of its owner's list and the owner reads
//! from the front, so the taken ones always come after everything the owner reads itself, and
//! the part file's bytes stay the same.
//!
//! A split is read by whoever first makes its claim, `_temporary/claim-SSSSS`: a hard link to
//! the claimant's announcement, which like an exclusive create succeeds for one claimant only,
//! in one directory, on a local file system and on NFS alike, so workers of different processes
//! agree without a message. A worker announces itself with `_temporary/probing-WWWWW` before
//! the build, and takes only from workers whose announcement it sees: those that share its
//! output directory. Processes whose output directories are apart (each host its own disk) then
//! take only from their own workers, and never read a split twice.

use crate::error::{Error, Result};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// The claims on one job's probe splits, in its output directory's temporary area.
pub(crate) struct ProbeClaims {
    temporary: PathBuf,
    /// Each worker's splits (by global worker index), in input order.
    assigned: Vec<Vec<usize>>,
    /// The splits this process's workers take.
    local: LocalTakings,
}

/// A split taken from another worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Taken {
    pub split: usize,
    pub owner: usize,
}

impl ProbeClaims {
    /// The claims of a job writing into `dir`, whose workers were assigned `assigned`.
    pub(crate) fn new(dir: &Path, assigned: Vec<Vec<usize>>) -> Self {
        ProbeClaims { temporary: dir.join(crate::output::TEMPORARY), assigned, local: LocalTakings::default() }
    }

    /// The splits worker `me` was assigned, in input order.
    pub(crate) fn assigned(&self, me: usize) -> &[usize] {
        &self.assigned[me]
    }

    /// Announces that worker `me` reads its splits here, so that others may take from it;
    /// returns the announcement's path, for [`remove`](Self::remove) once the probe is over.
    pub(crate) fn announce(&self, me: usize) -> Result<PathBuf> {
        let path = self.announcement(me);
        crate::cleanup::unless_exiting(|| {
            std::fs::create_dir_all(&self.temporary).map_err(|e| Error::io(&self.temporary, e))?;
            std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
            crate::cleanup::register(&path);
            Ok(path)
        })
    }

    /// Whether `worker`'s announcement is seen here (it shares this output directory).
    pub(crate) fn announced(&self, worker: usize) -> bool {
        self.announcement(worker).exists()
    }

    fn announcement(&self, worker: usize) -> PathBuf {
        self.temporary.join(format!("probing-{worker:05}"))
    }

    /// Claims `split` for worker `me` (announced): its claim's path if `me` is the first, None
    /// if another claimed it.
    ///
    /// A claim is a hard link to the claimant's announcement: exclusive like `create_new`, but
    /// it allocates no inode, and on this host's ext4 creating a file took 0.08–0.85 ms where a
    /// link took 0.007. (It is also the lock file of NFS lore: a link whose reply was lost
    /// reports "exists" on the retry, and is known as ours by its inode.)
    pub(crate) fn claim(&self, me: usize, split: usize) -> Result<Option<PathBuf>> {
        crate::cleanup::unless_exiting(|| self.claim_linking(me, split, |from, to| std::fs::hard_link(from, to)))
    }

    /// [`claim`](Self::claim), making links with `link`. Where the file system makes none
    /// (some FUSE or SMB mounts), the claim is an exclusive create instead, which is just as
    /// exclusive alongside links of the same name.
    fn claim_linking(&self, me: usize, split: usize, link: impl Fn(&Path, &Path) -> std::io::Result<()>) -> Result<Option<PathBuf>> {
        let path = self.temporary.join(format!("claim-{split:05}"));
        let announcement = self.announcement(me);
        let made = match link(&announcement, &path) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(same_file(&announcement, &path).then(|| self.made(path))),
            Err(_) => std::fs::OpenOptions::new().write(true).create_new(true).open(&path).map(drop),
            Ok(()) => Ok(()),
        };
        match made {
            Ok(()) => Ok(Some(self.made(path))),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(None),
            Err(e) => Err(Error::io(&path, e)),
        }
    }

    /// Registers a claim made, for removal if the process must exit mid-job.
    fn made(&self, claim: PathBuf) -> PathBuf {
        crate::cleanup::register(&claim);
        claim
    }

    /// Takes a split for worker `me`, whose own splits are done: the last unclaimed split of the
    /// announced worker with the most unclaimed ones, where `can_take` allows it (standard input
    /// cannot be read elsewhere). Returns it with its claim's path; None when nothing is left.
    pub(crate) fn take(&self, me: usize, can_take: impl Fn(usize) -> bool) -> Result<Option<(Taken, PathBuf)>> {
        self.take_seeing(me, can_take, || self.look())
    }

    /// [`take`](Self::take), with the claims and announcements as `look` lists them.
    fn take_seeing(
        &self,
        me: usize,
        can_take: impl Fn(usize) -> bool,
        look: impl Fn() -> Result<(HashSet<usize>, HashSet<usize>)>,
    ) -> Result<Option<(Taken, PathBuf)>> {
        // Splits found claimed when this worker tried them: a listing may not show them yet
        // (an NFS client caches a directory's entries for seconds), and without these the
        // loop would try the same split again until it did.
        let mut refused = HashSet::new();
        loop {
            let (mut claimed, announced) = look()?;
            claimed.extend(&refused);
            // Unclaimed splits are a run in each list (owners claim from its front, takers its
            // last): what is left of a worker's work.
            let left = |w: usize| self.assigned[w].iter().filter(|s| !claimed.contains(s)).count();
            let last_unclaimed = |w: usize| self.assigned[w].iter().rev().find(|s| !claimed.contains(s)).copied();
            let owner = (0..self.assigned.len())
                .filter(|&w| w != me && announced.contains(&w) && last_unclaimed(w).is_some_and(&can_take))
                .max_by_key(|&w| (left(w), std::cmp::Reverse(w)));
            let Some(owner) = owner else { return Ok(None) };
            let split = last_unclaimed(owner).expect("a split to take");
            self.local.start(split);
            match self.claim(me, split) {
                Ok(Some(claim)) => return Ok(Some((Taken { split, owner }, claim))),
                // Claimed meanwhile (by its owner or another taker): look again.
                Ok(None) => {
                    self.local.forget(split);
                    refused.insert(split);
                }
                Err(e) => {
                    self.local.forget(split);
                    return Err(e);
                }
            }
        }
    }

    /// Split `split`, taken by a worker of this process, is read into `output` (or, with None,
    /// its read failed).
    pub(crate) fn taken_read(&self, split: usize, output: Option<PathBuf>) {
        match output {
            Some(output) => self.local.finish(split, output),
            None => self.local.forget(split),
        }
    }

    /// The output of the taken split `split`, once read, if a worker of this process took it:
    /// its owner appends it at once. None if another process took it (its owner appends it
    /// once every worker is done), if its read failed or if `abort` is set.
    pub(crate) fn read_here(&self, split: usize, abort: &AtomicBool) -> Option<PathBuf> {
        self.local.wait(split, abort)
    }

    /// The claimed splits and the announced workers.
    fn look(&self) -> Result<(HashSet<usize>, HashSet<usize>)> {
        let (mut claimed, mut announced) = (HashSet::new(), HashSet::new());
        for entry in std::fs::read_dir(&self.temporary).map_err(|e| Error::io(&self.temporary, e))? {
            let name = entry.map_err(|e| Error::io(&self.temporary, e))?.file_name();
            let name = name.to_string_lossy();
            let number = |prefix: &str| name.strip_prefix(prefix).and_then(|n| n.parse::<usize>().ok());
            if let Some(split) = number("claim-") {
                claimed.insert(split);
            } else if let Some(worker) = number("probing-") {
                announced.insert(worker);
            }
        }
        Ok((claimed, announced))
    }

    /// The name, in the temporary area, of the output of taken split `split`.
    pub(crate) fn taken_name(split: usize) -> String {
        format!("taken-{split:05}")
    }

    /// The path of the output of taken split `split`, as its owner finds it.
    pub(crate) fn taken_output(&self, split: usize) -> PathBuf {
        self.temporary.join(Self::taken_name(split))
    }

    /// Removes claims, announcements or taken outputs, once no worker needs them any more.
    pub(crate) fn remove(paths: &mut Vec<PathBuf>) {
        for path in paths.drain(..) {
            crate::output::discard(&path);
        }
    }
}

/// The splits this process's workers take, so that an owner in this process can append their
/// outputs as soon as they are read rather than after every worker of the job is done: it
/// learns of a failure here from the process's abort flag, where of another process's only at
/// the end. (Appending after the end made 1 process × 2 wait for the owner's copy and sync:
/// slower in 17 of 24 interleaved rounds.)
#[derive(Default)]
struct LocalTakings {
    /// Split -> its output, once read.
    state: Mutex<HashMap<usize, Option<PathBuf>>>,
    read: Condvar,
}

const LOCKED: &str = "no worker panics holding the takings' lock";

impl LocalTakings {
    /// A worker of this process is about to claim `split` of another's (before the claim, so
    /// that an owner that finds its split claimed finds it here too).
    fn start(&self, split: usize) {
        self.state.lock().expect(LOCKED).insert(split, None);
    }

    /// `split` is read into `output`.
    fn finish(&self, split: usize, output: PathBuf) {
        self.state.lock().expect(LOCKED).insert(split, Some(output));
        self.read.notify_all();
    }

    /// `split` was not claimed after all, or its read failed.
    fn forget(&self, split: usize) {
        self.state.lock().expect(LOCKED).remove(&split);
        self.read.notify_all();
    }

    /// The output of `split`, taken from its owner, once read by a worker of this process;
    /// None if another process took it, its read failed, or `abort` is set (the job fails).
    fn wait(&self, split: usize, abort: &AtomicBool) -> Option<PathBuf> {
        let mut state = self.state.lock().expect(LOCKED);
        loop {
            match state.get(&split) {
                Some(Some(output)) => return Some(output.clone()),
                Some(None) if !abort.load(Ordering::Relaxed) => {
                    // A timeout, so that an abort raised without a notice is seen too.
                    state = self.read.wait_timeout(state, Duration::from_millis(5)).expect(LOCKED).0;
                }
                _ => return None,
            }
        }
    }
}

/// Whether `a` and `b` are links to one file (false where either cannot be read).
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (a, b);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(dir: &Path) -> ProbeClaims {
        ProbeClaims::new(dir, vec![vec![0, 3, 6, 9, 12], vec![1, 4], vec![2, 5]])
    }

    /// [`claims`] with all three workers announced.
    fn announced(dir: &Path) -> ProbeClaims {
        let claims = claims(dir);
        for w in 0..3 {
            claims.announce(w).unwrap();
        }
        claims
    }

    /// Each split is claimed once; a taker takes the last unclaimed split of the announced
    /// worker with the most left, looking again when its pick is claimed meanwhile.
    #[test]
    fn a_split_is_claimed_once_and_taken_from_the_back_of_the_longest_list() {
        let dir = tempfile::tempdir().unwrap();
        let claims = claims(dir.path());
        let mut made = vec![claims.announce(0).unwrap(), claims.announce(1).unwrap(), claims.announce(2).unwrap()];
        made.extend(claims.claim(0, 0).unwrap());
        assert_eq!(claims.claim(1, 0).unwrap(), None, "claimed twice");
        assert!(claims.claim(0, 0).unwrap().is_some(), "a claim retried (its first reply lost) is the claimant's");
        let take = |me| claims.take(me, |_| true).unwrap().map(|(taken, _)| taken);
        // Worker 0 has four left, workers 1 and 2 two each.
        assert_eq!(take(2), Some(Taken { split: 12, owner: 0 }));
        assert_eq!(take(2), Some(Taken { split: 9, owner: 0 }));
        // Worker 0 claims 3 and 6 meanwhile; its list is done. Ties go to the lower index.
        made.extend(claims.claim(0, 3).unwrap());
        made.extend(claims.claim(0, 6).unwrap());
        assert_eq!(take(2), Some(Taken { split: 4, owner: 1 }));
        assert_eq!(claims.claim(1, 4).unwrap(), None, "the owner finds its split taken");
        assert_eq!(take(0), Some(Taken { split: 5, owner: 2 }));
        assert_eq!(take(0), Some(Taken { split: 1, owner: 1 }));
        assert_eq!(take(1), Some(Taken { split: 2, owner: 2 }));
        assert_eq!(take(1), None, "every split is claimed");
        ProbeClaims::remove(&mut made);
        let left: Vec<_> = std::fs::read_dir(dir.path().join("_temporary")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 6, "the takers' six claims stay: {left:?}");
    }

    /// An owner waits for the output of a split a worker of its process took until it is read;
    /// a split no worker of its process took, a failed read or an abort ends the wait with
    /// nothing (the owner then appends what is left once every worker is done).
    #[test]
    fn an_owner_waits_only_for_what_its_own_process_takes() {
        let dir = tempfile::tempdir().unwrap();
        let claims = announced(dir.path());
        let abort = AtomicBool::new(false);
        assert_eq!(claims.take(2, |_| true).unwrap().unwrap().0.split, 12);
        std::thread::scope(|s| {
            let waiting = s.spawn(|| claims.read_here(12, &abort));
            std::thread::sleep(Duration::from_millis(20));
            assert!(!waiting.is_finished(), "split 12 is being read");
            claims.taken_read(12, Some("twelve".into()));
            assert_eq!(waiting.join().unwrap(), Some(PathBuf::from("twelve")));
        });
        // Claimed as another process would: nothing to wait for.
        assert!(claims.claim(1, 9).unwrap().is_some());
        assert_eq!(claims.read_here(9, &abort), None);
        assert_eq!(claims.take(2, |_| true).unwrap().unwrap().0.split, 6);
        claims.taken_read(6, None);
        assert_eq!(claims.read_here(6, &abort), None, "its read failed");
        assert_eq!(claims.take(2, |_| true).unwrap().unwrap().0.split, 3);
        abort.store(true, Ordering::Relaxed);
        assert_eq!(claims.read_here(3, &abort), None, "the job is failing");
    }

    /// Where links cannot be made, claims are exclusive creates: each split is still claimed
    /// once, alongside claims made by links.
    #[test]
    fn without_links_a_claim_is_an_exclusive_create() {
        let dir = tempfile::tempdir().unwrap();
        let claims = claims(dir.path());
        claims.announce(0).unwrap();
        claims.announce(1).unwrap();
        let unsupported = |_: &Path, _: &Path| Err(std::io::Error::from(std::io::ErrorKind::Unsupported));
        let claim = claims.claim_linking(0, 3, unsupported).unwrap().expect("claimed by a create");
        assert!(!same_file(&claim, &claims.announcement(0)), "a file of its own");
        assert_eq!(claims.claim_linking(1, 3, unsupported).unwrap(), None);
        assert_eq!(claims.claim(1, 3).unwrap(), None, "a link of the same name is refused");
        assert!(claims.claim(1, 6).unwrap().is_some());
        assert_eq!(claims.claim_linking(0, 6, unsupported).unwrap(), None, "a create beside a link is refused");
    }

    /// A listing that does not show claims yet (an NFS client's cached directory) costs a
    /// refused claim per split it hides, not a loop: the taker goes on to the next split.
    #[test]
    fn a_stale_listing_does_not_make_a_taker_try_one_split_for_ever() {
        let dir = tempfile::tempdir().unwrap();
        let claims = announced(dir.path());
        assert!(claims.claim(1, 12).unwrap().is_some());
        assert!(claims.claim(1, 9).unwrap().is_some());
        let looks = std::cell::Cell::new(0);
        let stale = || {
            looks.set(looks.get() + 1);
            assert!(looks.get() < 10, "the taker keeps trying claimed splits");
            Ok((HashSet::new(), (0..3).collect()))
        };
        let (taken, _) = claims.take_seeing(2, |_| true, stale).unwrap().unwrap();
        assert_eq!(taken, Taken { split: 6, owner: 0 });
        assert_eq!(looks.get(), 3);
    }

    /// The claims' I/O errors are errors, each naming its path, not panics or silent refusals:
    /// an announcement where the output directory cannot be made (a file is in its place), and
    /// once the temporary area is gone, a claim (neither a link nor a create can be made there)
    /// and a look for splits to take.
    #[test]
    fn the_claims_io_errors_name_their_path() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("out");
        std::fs::write(&file, "").unwrap();
        let err = ProbeClaims::new(&file, vec![vec![0]]).announce(0).unwrap_err().to_string();
        assert!(err.contains("out/_temporary"), "{err}");
        let claims = announced(dir.path());
        std::fs::remove_dir_all(dir.path().join("_temporary")).unwrap();
        let err = claims.claim(0, 3).unwrap_err().to_string();
        assert!(err.contains("_temporary/claim-00003"), "{err}");
        let err = claims.take(1, |_| true).unwrap_err().to_string();
        assert!(err.contains("_temporary"), "{err}");
    }

    /// Nothing is taken from a worker that has not announced itself (its output directory is
    /// elsewhere), nor a split `can_take` refuses: then the next worker's is taken.
    #[test]
    fn only_announced_workers_and_takeable_splits_are_taken_from() {
        let dir = tempfile::tempdir().unwrap();
        let claims = claims(dir.path());
        claims.announce(1).unwrap();
        assert_eq!(claims.take(1, |_| true).unwrap(), None, "worker 0 is not announced");
        claims.announce(0).unwrap();
        claims.announce(2).unwrap();
        let (taken, claim) = claims.take(1, |s| s != 12).unwrap().unwrap();
        assert_eq!(taken, Taken { split: 5, owner: 2 });
        assert!(claim.ends_with("claim-00005"));
        assert_eq!(claims.taken_output(5), dir.path().join("_temporary/taken-00005"));
    }
}
