//! Input paths given as globs, as Hadoop's `FileInputFormat` takes them
//! (`hadoop jar job.jar 'logs/2026-11-*/part-*'`): a pattern is expanded by the job, on every
//! process alike, rather than by the shell, which a quoted pattern (or a cluster launcher's)
//! does not reach. The syntax is Hadoop's `GlobPattern`: `*` and `?` within one path component,
//! `[abc]`, `[a-z]` and `[!a]` (or `[^a]`), `{ab,cd}` alternatives and `\` escapes. Wildcards
//! never cross a `/`: each component of the pattern is matched against the names in the
//! directories the components before it matched, as Hadoop's `Globber` walks them. The patterns
//! themselves are compiled by `globset` (ripgrep's).
//!
//! Braces are expanded first, into the brace-free patterns they stand for, whose matches are
//! taken together: `{a,b/c}` (Hadoop's `GlobExpander` expands braces that hold a `/` so), nested
//! braces `{a,b{c,d}}`, and empty alternatives `x{,.gz}`, which Hadoop's `GlobPattern` matches
//! and `globset` would drop (silently leaving `x` unread).
//!
//! A match whose own name is hidden (`_SUCCESS`, `_temporary`, `.crc` files) is left out, as
//! `FileInputFormat`'s hidden-file filter leaves it out of `globStatus`: the last component's
//! name only, written out or matched, while the directories on the way are not filtered
//! (`d/*/x.csv` reaches `d/_y/x.csv`, as in Hadoop). Checked against Hadoop 3.4.1's
//! `globStatus` on a tree of such names, pattern by pattern.

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

/// The paths `pattern` matches, sorted, each once, hidden names left out as the module says
/// (files and directories, which the caller expands as it does any argument). An error where
/// the pattern does not compile or a directory cannot be listed; none where nothing matches
/// (the caller says so).
pub fn expand(pattern: &Path) -> Result<Vec<PathBuf>> {
    let text = pattern.to_str().ok_or_else(|| Error::invalid("input", format!("{}: a glob must be UTF-8", pattern.display())))?;
    let alternatives = expand_braces(text).map_err(|reason| Error::invalid("input", format!("{}: {reason}", pattern.display())))?;
    let mut matched = Vec::new();
    for alternative in &alternatives {
        matched.extend(expand_one(pattern, alternative)?);
    }
    // Two alternatives may match one path: it is read once.
    matched.sort();
    matched.dedup();
    Ok(matched)
}

/// The most brace-free patterns one glob may stand for: enough for any listing of dates or
/// partitions, and a bound on the directory walks of a pattern like `{a,b}{c,d}...`.
const MAX_ALTERNATIVES: usize = 4096;

/// The most braces expanded for one glob: a bound on the work of a hostile pattern of many
/// pairs that each stand for one pattern (`{a}{a}{a}...`), each of whose expansions copies it.
const MAX_EXPANSIONS: usize = 4 * MAX_ALTERNATIVES;

/// The brace-free patterns `text` stands for, in order, leftmost brace first, as Hadoop's
/// `GlobExpander` expands them. A brace inside `[...]` or escaped is a character, and one never
/// closed is left for the glob's compiler to refuse. Iterative, so that the nesting of a pattern
/// does not deepen the stack.
fn expand_braces(text: &str) -> std::result::Result<Vec<String>, String> {
    // The patterns still to expand, the next one last.
    let mut pending = vec![text.to_string()];
    let (mut out, mut expansions) = (Vec::new(), 0);
    while let Some(pattern) = pending.pop() {
        let Some((open, close, commas)) = outer_braces(&pattern) else {
            if out.len() == MAX_ALTERNATIVES {
                return Err(format!("its braces stand for more than {MAX_ALTERNATIVES} patterns"));
            }
            out.push(pattern);
            continue;
        };
        expansions += 1;
        if expansions > MAX_EXPANSIONS {
            return Err(format!("it has more braces than bloomflow expands ({MAX_EXPANSIONS})"));
        }
        let (before, after) = (&pattern[..open], &pattern[close + 1..]);
        let starts = std::iter::once(open + 1).chain(commas.iter().map(|&comma| comma + 1));
        let alternatives: Vec<String> = starts.zip(commas.iter().copied().chain([close])).map(|(start, end)| format!("{before}{}{after}", &pattern[start..end])).collect();
        pending.extend(alternatives.into_iter().rev());
    }
    Ok(out)
}

/// The byte offsets of the leftmost `{`, of the `}` that closes it and of the commas between them
/// that are not inside a nested pair: `None` where `text` has no closed pair.
fn outer_braces(text: &str) -> Option<(usize, usize, Vec<usize>)> {
    let bytes = text.as_bytes();
    let (mut open, mut depth, mut commas) = (None, 0usize, Vec::new());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            // A class: `[` then (`!` or `^`) then a first `]` that is a member, up to its `]`.
            b'[' => {
                let mut j = i + 1;
                j += usize::from(matches!(bytes.get(j), Some(b'!' | b'^')));
                j += usize::from(bytes.get(j) == Some(&b']'));
                match bytes[j.min(bytes.len())..].iter().position(|&b| b == b']') {
                    Some(at) => i = j + at,
                    None => return None,
                }
            }
            b'{' => {
                open.get_or_insert(i);
                depth += 1;
            }
            b',' if depth == 1 => commas.push(i),
            b'}' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    return open.map(|open| (open, i, commas));
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The paths one brace-free pattern matches, as [`expand`] says.
fn expand_one(pattern: &Path, text: &str) -> Result<Vec<PathBuf>> {
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
            let name = unescape(component);
            matched.into_iter().map(|path| path.join(&name)).collect()
        };
    }
    // The components written out may name nothing; a hidden name is no input.
    matched.retain(|path| path.exists() && !path.file_name().is_some_and(|name| is_hidden(&name.to_string_lossy())));
    Ok(matched)
}

/// A component without wildcards as the name it stands for: each `\` escape is the character
/// after it (`e\,f` in braces is the name `e,f`).
fn unescape(component: &str) -> String {
    let mut name = String::with_capacity(component.len());
    let mut chars = component.chars();
    while let Some(c) = chars.next() {
        name.push(if c == '\\' { chars.next().unwrap_or(c) } else { c });
    }
    name
}

/// One component of `pattern`, compiled: `/` is never matched (each component is matched alone
/// anyway) and `\` escapes the character after it.
fn compile(pattern: &Path, component: &str) -> Result<GlobMatcher> {
    let glob = GlobBuilder::new(component).literal_separator(true).backslash_escape(true).build();
    glob.map(|g| g.compile_matcher()).map_err(|e| Error::invalid("input", format!("{}: not a valid glob: {e}", pattern.display())))
}

/// Adds the paths of the names in directory `dir` that `glob` matches to `out`. A `dir` that is
/// no directory (a file a component before matched) holds none.
fn names_matching(dir: &Path, glob: &GlobMatcher, out: &mut Vec<PathBuf>) -> Result<()> {
    let listed = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let entries = match std::fs::read_dir(listed) {
        Ok(entries) => entries,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => return Ok(()),
        Err(e) => return Err(Error::io(listed, e)),
    };
    for entry in entries {
        let name = entry.map_err(|e| Error::io(listed, e))?.file_name();
        if glob.is_match(&name) {
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
        // A wildcard never crosses a `/`; a match whose own name is hidden is no match.
        assert_eq!(matches(d, "*"), ["a", "b", "c.csv", "odd[1].csv"]);
        assert_eq!(matches(d, "a/*"), ["a/part-00000", "a/part-00001"]);
        assert_eq!(matches(d, "*/part-00002"), Vec::<String>::new());
        assert_eq!(matches(d, "a/{_SUCCESS,part-00000}"), ["a/part-00000"]);
        // A hidden directory on the way to a match is walked, written out or matched; an escaped
        // bracket is a bracket.
        assert_eq!(matches(d, "a/_temporary/*"), ["a/_temporary/part-00002"]);
        assert_eq!(matches(d, "a/*/*"), ["a/_temporary/part-00002"]);
        assert_eq!(matches(d, "odd\\[1\\].*"), ["odd[1].csv"]);
        assert_eq!(matches(d, "nothing-*"), Vec::<String>::new());
    }

    /// Braces as Hadoop takes them: holding a `/`, nested, with an empty alternative; a path
    /// two alternatives match is listed once.
    #[test]
    fn braces_stand_for_each_of_their_alternatives() {
        let dir = tree();
        let d = dir.path();
        assert_eq!(matches(d, "{a/part-00001,b/*0}"), ["a/part-00001", "b/part-00000", "b/part-00010"]);
        assert_eq!(matches(d, "{a,b}/part-000{0{0,1},10}"), ["a/part-00000", "a/part-00001", "b/part-00000", "b/part-00010"]);
        assert_eq!(matches(d, "c{,.csv}"), ["c.csv"]);
        assert_eq!(matches(d, "b/part-0001{0,}"), ["b/part-00010"]);
        assert_eq!(matches(d, "b/part-000{,1}0"), ["b/part-00010"]);
        assert_eq!(matches(d, "{a,a,*}/part-00000"), ["a/part-00000", "b/part-00000"]);
        // In a class or escaped, a brace is a character.
        assert_eq!(expand_braces("x[{]{1,2}\\{3,4}").unwrap(), ["x[{]1\\{3,4}", "x[{]2\\{3,4}"]);
        assert_eq!(expand_braces("[]{]{1,2}").unwrap(), ["[]{]1", "[]{]2"]);
        assert_eq!(expand_braces("{a,{b,c}d,}e").unwrap(), ["ae", "bde", "cde", "e"]);
        // A brace never closed is left to the compiler, which refuses it.
        let err = expand(&d.join("{a,b/part-0000*")).unwrap_err().to_string();
        assert!(err.contains("not a valid glob"), "{err}");
        let many = "{0,1,2,3}".repeat(7);
        let err = expand(&d.join(&many)).unwrap_err().to_string();
        assert!(err.contains("more than 4096 patterns"), "{err}");
        // Pairs that each stand for one pattern: bounded work, no deep stack.
        let chained = "{a}".repeat(40_000);
        let err = expand(&d.join(&chained)).unwrap_err().to_string();
        assert!(err.contains("more braces than bloomflow expands (16384)"), "{}", &err[err.len() - 80..]);
        assert_eq!(expand_braces(&"{a}".repeat(1000)).unwrap(), ["a".repeat(1000)]);
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
