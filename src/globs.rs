//! Input paths given as globs, as Hadoop's `FileInputFormat` takes them
//! (`hadoop jar job.jar 'logs/2026-11-*/part-*'`): a pattern is expanded by the job, on every
//! process alike, rather than by the shell, which a quoted pattern (or a cluster launcher's)
//! does not reach. The syntax is Hadoop's `GlobPattern`: `*` and `?` within one path component,
//! `[abc]`, `[a-z]` and `[!a]` (or `[^a]`), `{ab,cd}` alternatives and `\` escapes. Wildcards
//! never cross a `/`: each component of the pattern is matched against the names in the
//! directories the components before it matched, as Hadoop's `Globber` walks them. The patterns
//! themselves are compiled by `globset` (ripgrep's).

use crate::error::{Error, Result};
use crate::splits::is_hidden;
use globset::{GlobBuilder, GlobMatcher};
use std::path::{Path, PathBuf};

/// The characters that make a path component a pattern.
const WILDCARDS: &[char] = &['*', '?', '[', '{'];

/// Whether `arg` holds a wildcard. The caller takes an argument as a glob only where no path
/// of that name exists, so that a file whose name holds a `*` or a `[` is still read as itself.
pub fn is_glob(arg: &Path) -> bool {
    arg.to_str().is_some_and(|s| s.contains(WILDCARDS))
}

/// The paths `pattern` matches, sorted (files and directories, which the caller expands as it
/// does any argument). A name a wildcard component matched is left out when it is hidden
/// (`_SUCCESS`, `_temporary`, `.crc` files), as Hadoop's input listing leaves it out; a name
/// written out in the pattern is taken as written. An error where the pattern does not compile
/// or a directory cannot be listed; none where nothing matches (the caller says so).
pub fn expand(pattern: &Path) -> Result<Vec<PathBuf>> {
    let text = pattern.to_str().ok_or_else(|| Error::invalid("input", format!("{}: a glob must be UTF-8", pattern.display())))?;
    let start = if text.starts_with('/') { PathBuf::from("/") } else { PathBuf::new() };
    let mut matched = vec![start];
    for component in text.split('/').filter(|c| !c.is_empty() && *c != ".") {
        matched = if component.contains(WILDCARDS) {
            let glob = compile(pattern, component)?;
            let mut next = Vec::new();
            for dir in &matched {
                names_matching(dir, &glob, &mut next)?;
            }
            next
        } else {
            matched.into_iter().map(|path| path.join(component)).collect()
        };
    }
    // The components written out may name nothing.
    matched.retain(|path| path.exists());
    matched.sort();
    Ok(matched)
}

/// One component of `pattern`, compiled: `/` is never matched (each component is matched alone
/// anyway) and `\` escapes the character after it.
fn compile(pattern: &Path, component: &str) -> Result<GlobMatcher> {
    let glob = GlobBuilder::new(component).literal_separator(true).backslash_escape(true).build();
    glob.map(|g| g.compile_matcher()).map_err(|e| Error::invalid("input", format!("{}: not a valid glob: {e}", pattern.display())))
}

/// Adds the paths of the names in directory `dir` that `glob` matches, hidden names left out, to
/// `out`. A `dir` that is no directory (a file a component before matched) holds none.
fn names_matching(dir: &Path, glob: &GlobMatcher, out: &mut Vec<PathBuf>) -> Result<()> {
    let listed = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let entries = match std::fs::read_dir(listed) {
        Ok(entries) => entries,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => return Ok(()),
        Err(e) => return Err(Error::io(listed, e)),
    };
    for entry in entries {
        let name = entry.map_err(|e| Error::io(listed, e))?.file_name();
        if !is_hidden(&name.to_string_lossy()) && glob.is_match(&name) {
            out.push(dir.join(name));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree of two job outputs (part files beside `_SUCCESS`, a `.crc` and a `_temporary/`),
    /// a file beside them and a file whose name holds a wildcard.
    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a/part-00000", "a/part-00001", "a/_SUCCESS", "a/.part-00000.crc", "a/_temporary/part-00002", "b/part-00000", "b/part-00010", "c.csv", "odd[1].csv"] {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x\n").unwrap();
        }
        dir
    }

    /// The matches of `pattern` under `dir`, relative to it.
    fn matches(dir: &Path, pattern: &str) -> Vec<String> {
        let found = expand(&dir.join(pattern)).unwrap();
        found.iter().map(|p| p.strip_prefix(dir).unwrap().to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn each_component_matches_the_names_of_the_directories_before_it() {
        let dir = tree();
        let d = dir.path();
        assert_eq!(matches(d, "*/part-*"), ["a/part-00000", "a/part-00001", "b/part-00000", "b/part-00010"]);
        assert_eq!(matches(d, "?/part-0000?"), ["a/part-00000", "a/part-00001", "b/part-00000"]);
        assert_eq!(matches(d, "[ab]/part-0000[!0]"), ["a/part-00001"]);
        assert_eq!(matches(d, "{b,c.csv}"), ["b", "c.csv"]);
        assert_eq!(matches(d, "{a,b}/part-00000"), ["a/part-00000", "b/part-00000"]);
        // A wildcard never crosses a `/`, and matches no hidden name.
        assert_eq!(matches(d, "*"), ["a", "b", "c.csv", "odd[1].csv"]);
        assert_eq!(matches(d, "a/*"), ["a/part-00000", "a/part-00001"]);
        assert_eq!(matches(d, "*/part-00002"), Vec::<String>::new());
        // Written out, a hidden name is taken as written; an escaped bracket is a bracket.
        assert_eq!(matches(d, "a/_temporary/*"), ["a/_temporary/part-00002"]);
        assert_eq!(matches(d, "odd\\[1\\].*"), ["odd[1].csv"]);
        assert_eq!(matches(d, "nothing-*"), Vec::<String>::new());
    }

    #[test]
    fn a_relative_pattern_is_read_from_the_current_directory_and_a_bad_one_is_refused() {
        // The crate's own directory, as cargo runs its tests.
        assert_eq!(expand(Path::new("Cargo.t?ml")).unwrap(), [PathBuf::from("Cargo.toml")]);
        assert_eq!(expand(Path::new("./src/lib.r[s]")).unwrap(), [PathBuf::from("src/lib.rs")]);
        let err = expand(Path::new("data/[a-")).unwrap_err().to_string();
        assert!(err.contains("data/[a-") && err.contains("not a valid glob"), "{err}");
        assert!(is_glob(Path::new("logs/2026-*")) && !is_glob(Path::new("logs/2026-11")));
        // A name that is not UTF-8 is no glob, and expanding it is refused.
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let not_utf8 = Path::new(std::ffi::OsStr::from_bytes(b"logs/\xff*"));
            assert!(!is_glob(not_utf8));
            assert!(expand(not_utf8).unwrap_err().to_string().contains("a glob must be UTF-8"));
        }
    }
}
