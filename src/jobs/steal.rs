//! Work stealing for the semi-join's probe, among all the workers that write into the same output
//! directory, whatever their process, without changing what any part file holds.
//!
//! Probe splits are assigned (split i to worker i mod peers), so that each worker's part file
//! holds its splits' records in input order whoever is faster. But a worker can fall behind
//! (on a shared 2-vCPU host the two workers of `-w 2` ended their probe 5–62 ms apart, in 300
//! ms; two processes of one worker 2–88 ms apart), and the job waits for the last. So a worker
//! whose own splits are done takes the last unread split of the worker with the most left, reads
//! it into a scratch file, `_temporary/taken-SSSSS`, and its owner appends the outputs of its
//! taken splits, in input order, after its own, once every worker is done. A split is taken from
//! the back of its owner's list and the owner reads from the front, so the taken ones always come
//! after everything the owner reads itself, and the part file's bytes stay the same.
//!
//! A split is read by whoever first creates its claim, `_temporary/claim-SSSSS`, with
//! `create_new` (O_EXCL): atomic in one directory, on a local file system and on NFS alike, so
//! workers of different processes agree without a message. A worker announces itself with
//! `_temporary/probing-WWWWW` before its first claim, and takes only from workers whose
//! announcement it sees: those that share its output directory. Processes whose output
//! directories are apart (each host its own disk) then take only from their own workers, and
//! never read a split twice.

use crate::error::{Error, Result};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The claims on one job's probe splits, in its output directory's temporary area.
pub(crate) struct ProbeClaims {
    temporary: PathBuf,
    /// Each worker's splits (by global worker index), in input order.
    assigned: Vec<Vec<usize>>,
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
        ProbeClaims { temporary: dir.join(crate::output::TEMPORARY), assigned }
    }

    /// The splits worker `me` was assigned, in input order.
    pub(crate) fn assigned(&self, me: usize) -> &[usize] {
        &self.assigned[me]
    }

    /// Announces that worker `me` reads its splits here, so that others may take from it;
    /// returns the announcement's path, for [`remove`](Self::remove) once the probe is over.
    pub(crate) fn announce(&self, me: usize) -> Result<PathBuf> {
        std::fs::create_dir_all(&self.temporary).map_err(|e| Error::io(&self.temporary, e))?;
        let path = self.temporary.join(format!("probing-{me:05}"));
        std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
        crate::cleanup::register(&path);
        Ok(path)
    }

    /// Claims `split`: its claim's path if this worker is the first, None if another claimed it.
    pub(crate) fn claim(&self, split: usize) -> Result<Option<PathBuf>> {
        let path = self.temporary.join(format!("claim-{split:05}"));
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(_) => {
                crate::cleanup::register(&path);
                Ok(Some(path))
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(None),
            Err(e) => Err(Error::io(&path, e)),
        }
    }

    /// Takes a split for worker `me`, whose own splits are done: the last unclaimed split of the
    /// announced worker with the most unclaimed ones, where `can_take` allows it (standard input
    /// cannot be read elsewhere). Returns it with its claim's path; None when nothing is left.
    pub(crate) fn take(&self, me: usize, can_take: impl Fn(usize) -> bool) -> Result<Option<(Taken, PathBuf)>> {
        loop {
            let (claimed, announced) = self.look()?;
            // Unclaimed splits are a run in each list (owners claim from its front, takers its
            // last): what is left of a worker's work.
            let left = |w: usize| self.assigned[w].iter().filter(|s| !claimed.contains(s)).count();
            let last_unclaimed = |w: usize| self.assigned[w].iter().rev().find(|s| !claimed.contains(s)).copied();
            let owner = (0..self.assigned.len())
                .filter(|&w| w != me && announced.contains(&w) && last_unclaimed(w).is_some_and(&can_take))
                .max_by_key(|&w| (left(w), std::cmp::Reverse(w)));
            let Some(owner) = owner else { return Ok(None) };
            let split = last_unclaimed(owner).expect("a split to take");
            // Claimed meanwhile (by its owner or another taker): look again.
            if let Some(claim) = self.claim(split)? {
                return Ok(Some((Taken { split, owner }, claim)));
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(dir: &Path) -> ProbeClaims {
        ProbeClaims::new(dir, vec![vec![0, 3, 6, 9, 12], vec![1, 4], vec![2, 5]])
    }

    /// Each split is claimed once; a taker takes the last unclaimed split of the announced
    /// worker with the most left, looking again when its pick is claimed meanwhile.
    #[test]
    fn a_split_is_claimed_once_and_taken_from_the_back_of_the_longest_list() {
        let dir = tempfile::tempdir().unwrap();
        let claims = claims(dir.path());
        let mut made = vec![claims.announce(0).unwrap(), claims.announce(1).unwrap(), claims.announce(2).unwrap()];
        made.extend(claims.claim(0).unwrap());
        assert_eq!(claims.claim(0).unwrap(), None, "claimed twice");
        let take = |me| claims.take(me, |_| true).unwrap().map(|(taken, _)| taken);
        // Worker 0 has four left, workers 1 and 2 two each.
        assert_eq!(take(2), Some(Taken { split: 12, owner: 0 }));
        assert_eq!(take(2), Some(Taken { split: 9, owner: 0 }));
        // Worker 0 claims 3 and 6 meanwhile; its list is done. Ties go to the lower index.
        made.extend(claims.claim(3).unwrap());
        made.extend(claims.claim(6).unwrap());
        assert_eq!(take(2), Some(Taken { split: 4, owner: 1 }));
        assert_eq!(claims.claim(4).unwrap(), None, "the owner finds its split taken");
        assert_eq!(take(0), Some(Taken { split: 5, owner: 2 }));
        assert_eq!(take(0), Some(Taken { split: 1, owner: 1 }));
        assert_eq!(take(1), Some(Taken { split: 2, owner: 2 }));
        assert_eq!(take(1), None, "every split is claimed");
        ProbeClaims::remove(&mut made);
        let left: Vec<_> = std::fs::read_dir(dir.path().join("_temporary")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 6, "the takers' six claims stay: {left:?}");
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
