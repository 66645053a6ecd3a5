//! Shared by the reader targets: the readers take paths, so each input is written to a file in
//! memory-backed storage, then read through format detection as `info` and `query` would.

use std::path::PathBuf;

pub fn scratch_file() -> PathBuf {
    let dir = if std::path::Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    dir.join(format!("bloomflow-fuzz-{}", std::process::id()))
}

/// Reads `bytes` as a filter file; any error is fine, a panic or an abort is a bug. A filter
/// that loads must answer queries without panicking.
pub fn read(bytes: &[u8]) {
    let path = scratch_file();
    std::fs::write(&path, bytes).unwrap();
    if let Ok((stored, _format)) = bloomflow::format::load_any(&path) {
        let filter = stored.into_query_filter();
        let mut answers = Vec::new();
        filter.contains_batch(&[b"probe", b"", b"a longer key of thirty bytes.."], &mut answers);
        assert_eq!(answers.len(), 3);
        let _ = (filter.estimated_fpp(), filter.fill_ratio());
    }
}
