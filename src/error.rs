//! The library's error type: every failure a caller may want to match on, each naming what it is about.

use std::path::PathBuf;

/// Everything that can go wrong in bloomflow's library.
///
/// Variants carry the file, line or parameter they concern so that the CLI can print them as they
/// are, without extra context.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system error on a named file.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A filter file that is not what it claims to be (bad magic, truncated, corrupt...).
    #[error("{path}: {reason}")]
    BadFilterFile { path: PathBuf, reason: String },

    /// Two filters that cannot be combined because a part of their identity differs.
    #[error("filters are incompatible: {what} differs ({left} vs {right})")]
    Incompatible {
        what: &'static str,
        left: String,
        right: String,
    },

    /// A parameter outside the range it must lie in.
    #[error("invalid {name}: {reason}")]
    InvalidParameter { name: &'static str, reason: String },

    /// A key that cannot be removed from a counting filter because it is not a member.
    #[error("key is not a member of the counting filter and cannot be removed")]
    NotAMember,

    /// Counts to take out of a counting filter that one of its counters does not hold: the keys
    /// counted include keys never inserted (false positives of the filter) or keys removed more
    /// times than they were inserted.
    #[error("removing the keys would take counter {counter} below zero (it holds {holds}, and the keys to remove count {removing} there): some were never inserted (false positives of the filter) or are removed more times than they were inserted")]
    Undercount { counter: u64, holds: u8, removing: u8 },

    /// A record that cannot be parsed, with where it is (`line` 0 where its number is not
    /// known, see [`UNCOUNTED_LINE`]).
    #[error("{}", located(path, *line, reason))]
    Malformed {
        path: String,
        line: u64,
        reason: String,
    },

    /// Keys encoded otherwise than the filter's were: every answer would be "no".
    #[error("the filter was built over keys of {filter}, but {user} gives keys of {asked}: every key would be answered \"no\"")]
    KeyMismatch {
        filter: crate::records::KeyForm,
        asked: crate::records::KeyForm,
        user: String,
    },

    /// An input file that changed after the job planned its splits (`what` says how): the job
    /// would have read its records partly as they were and partly as they are.
    #[error("{path}: the file changed while the job read it ({what}): its records would be read partly as they were and partly as they are. Inputs must not change under a job: copy or rotate a file that is being written, then run the job again")]
    InputChanged { path: PathBuf, what: String },

    /// The input is usable but something about the job as a whole is wrong.
    #[error("{0}")]
    Job(String),
}

impl Error {
    /// Wraps an I/O error with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn bad_file(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::BadFilterFile {
            path: path.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn invalid(name: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidParameter {
            name,
            reason: reason.into(),
        }
    }
}

/// The line number of a record whose number is not known: one in a bzip2 split after its
/// file's first, whose lines before it are never read (each split decodes its own blocks).
pub const UNCOUNTED_LINE: u64 = 0;

/// `path:line: reason`, or, where the line is [`UNCOUNTED_LINE`], the path and a word on why
/// it has no number (it once printed as line 0, which no line is).
pub(crate) fn located(path: &str, line: u64, reason: &str) -> String {
    if line == UNCOUNTED_LINE {
        format!("{path}: {reason} (in a part of the file whose lines are not counted: a bzip2 block after its first)")
    } else {
        format!("{path}:{line}: {reason}")
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_record_names_its_line_when_it_is_known() {
        let at = |line| Error::Malformed { path: "in.csv.bz2".into(), line, reason: "bad".into() }.to_string();
        assert_eq!(at(7), "in.csv.bz2:7: bad");
        assert_eq!(at(UNCOUNTED_LINE), "in.csv.bz2: bad (in a part of the file whose lines are not counted: a bzip2 block after its first)");
    }
}
