//! Memory limits: a filter larger than the memory this machine has is refused before allocating,
//! with a message saying how much it needs.

use crate::error::{Error, Result};

/// Bytes of memory available to this process: `MemAvailable` from /proc/meminfo, or unlimited
/// where that cannot be read.
pub fn available_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(u64::MAX)
}

/// Refuses an allocation of `bytes` for `what` when it exceeds the memory available.
pub fn check_allocation(bytes: u64, what: &str) -> Result<()> {
    let available = available_memory();
    if bytes > available {
        return Err(Error::Job(format!(
            "{what} needs {} but only {} of memory is available",
            human_bytes(bytes),
            human_bytes(available)
        )));
    }
    Ok(())
}

/// Formats a byte count with a binary unit, e.g. `1.5 GiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// Asks the kernel to back the whole pages inside `start..start + bytes` with transparent huge
/// pages. madvise refuses (EINVAL) a start that is not page-aligned, and a large allocation
/// starts a few bytes into its first page (its allocator's header), so the range is trimmed to
/// whole pages first: passed as it was, the advice was refused for every filter.
pub(crate) fn advise_huge_pages(start: usize, bytes: usize) {
    const PAGE: usize = 4096;
    let first = start.next_multiple_of(PAGE);
    let end = (start + bytes) / PAGE * PAGE;
    if end <= first {
        return;
    }
    #[cfg(target_os = "linux")]
    // SAFETY: the range is whole pages inside the caller's allocation; madvise only advises
    // the kernel about it and changes no contents.
    unsafe {
        libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE);
    }
}

/// The pages a large zeroed block is backed by: see [`zeroed_huge`] and [`zeroed_written`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pages {
    /// Transparent huge pages, asked for with `madvise`.
    Huge,
    /// The kernel's usual 4 KiB pages.
    Small,
}

/// Allocates `n` zeroed values, asking the kernel for transparent huge pages when the block is
/// large: a filter is accessed at random, once per record, and with 4 KiB pages each access may
/// also miss the TLB, and each first touch fault. Where huge pages are not available this is a
/// plain zeroed allocation.
///
/// The memory is allocated untouched, advised, and only then zeroed, which writes every page
/// once. The order matters twice over:
/// - a page already touched stays a 4 KiB page. A zeroed allocation of this alignment (64) is
///   not calloc but an allocation and a memset, which touched every page before the advice
///   could take effect: no filter ever got a huge page;
/// - a fresh page that is read before it is written maps the kernel's shared zero page, and the
///   first write must replace that mapping and flush every CPU's TLB entry for it: with two
///   workers running, an inter-processor interrupt per page (a VM exit on a virtual machine),
///   which took an eighth of a two-worker semi-join's time.
pub fn zeroed_huge<T: bytemuck::Zeroable>(n: usize) -> Vec<T> {
    zeroed_pages(n, Pages::Huge, &mut || {}, 1)
}

/// [`zeroed_huge`], its pages written by `threads` threads at once: for a filter that a
/// process's workers share, made before they start, as large as the partials they would
/// otherwise zero each at the same time.
pub fn zeroed_huge_parallel<T: bytemuck::Zeroable>(n: usize, threads: usize) -> Vec<T> {
    zeroed_pages(n, Pages::Huge, &mut || {}, threads)
}

/// `n` zeroed values in 4 KiB pages, every page written now (not left to map the shared zero
/// page, as [`zeroed_huge`] explains): for a large block that is looked up far less often than a
/// filter, such as the exact join's key table (probed by the Bloom step's survivors only). On a
/// virtual machine a huge page often comes from memory the host has not backed yet, whose first
/// touch costs 1.2–2 ms a MB, where 4 KiB pages, recycled from what earlier processes freed, cost
/// about 0.45 ms a MB, and a warm huge page 0.04. Measured on the benchmark's exact semi-join, the
/// key set's phase (the broadcast and the table's build), medians of 15 interleaved rounds: 2
/// processes × 1, where each process builds the whole 24 MB table, 119 -> 105 ms (the slowest
/// 177 -> 119); 1 × 2 37 -> 29 ms; `-w 1`, which alone rarely meets cold memory, 40 -> 49 ms.
///
/// Written from 64 KiB up, not from 4 MiB as huge blocks are: the tables of a key set's
/// partition are read before they are written (a probe for an empty slot), and with `-w 2` on
/// the benchmark each worker's 3 MB partition was left to the zero page: that phase took 28.8
/// and 26.4 ms, 14.7 and 16.5 with the pages written (medians of 9 runs, two series); `-w 1`,
/// whose one table is past 4 MiB, 18.7 ms either way.
pub fn zeroed_written<T: bytemuck::Zeroable>(n: usize) -> Vec<T> {
    zeroed_written_ticking(n, &mut || {})
}

/// [`zeroed_written`], calling `tick` after every 2 MiB zeroed: for a job's partial filters. A
/// worker that hands out work to the others (split claims) answers them from its tick: on a
/// virtual machine the first touch of fresh memory can take 40–50 ms for a 24 MB filter, and the
/// other workers waited that long for their first splits.
///
/// The partials were in huge pages, for the TLB. But the workers of a job zero theirs at the
/// same time, and huge pages fresh from the host were the slowest memory to touch: a `build -w 2`
/// of the 20M-row probe (two 24 MB partials) took 771 ms in huge pages and 598 in 4 KiB pages
/// (medians of 15 interleaved rounds, every round faster), its counting build 2.33 -> 1.59 s, 2
/// processes × 1 637 -> 590 ms; `-w 1`, whose one partial seldom meets cold memory, 1092 ms either
/// way (its counting build 2.66 -> 2.80 s: 96 MB of counters, more TLB misses).
pub fn zeroed_written_ticking<T: bytemuck::Zeroable>(n: usize, tick: &mut dyn FnMut()) -> Vec<T> {
    zeroed_pages(n, Pages::Small, tick, 1)
}

fn zeroed_pages<T: bytemuck::Zeroable>(n: usize, pages: Pages, tick: &mut dyn FnMut(), threads: usize) -> Vec<T> {
    const PIECE: usize = 2 << 20;
    let bytes = n * std::mem::size_of::<T>();
    // Below these, a plain zeroed allocation: huge pages only pay for blocks of several, and a
    // small block's pages cost little however they are touched.
    let smallest = match pages {
        Pages::Huge => 4 << 20,
        Pages::Small => 64 << 10,
    };
    if bytes < smallest {
        return bytemuck::zeroed_vec(n);
    }
    let layout = std::alloc::Layout::array::<T>(n).expect("a slice that fits the address space");
    // SAFETY: the layout's size is at least 64 KiB, never zero.
    let ptr = unsafe { std::alloc::alloc(layout) };
    // Hidden from the optimizer, which may otherwise turn a fresh allocation zeroed whole into
    // `calloc` (as it did where the size was a constant), leaving the pages unwritten.
    let ptr = std::hint::black_box(ptr);
    if ptr.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    if pages == Pages::Huge {
        advise_huge_pages(ptr as usize, bytes);
    }
    // Each thread writes its own run of whole pieces; this one the first, ticking.
    let runs = threads.clamp(1, bytes.div_ceil(PIECE));
    let run = |i: usize| {
        let cut = |i: usize| (bytes.div_ceil(PIECE) * i / runs * PIECE).min(bytes);
        cut(i)..cut(i + 1)
    };
    let at = ptr as usize;
    // SAFETY (both): `start..start + len` lies inside the fresh allocation of `bytes` bytes at
    // `at`, and each run is written by one thread only.
    let zero = move |start: usize| unsafe { std::ptr::write_bytes((at + start) as *mut u8, 0, PIECE.min(bytes - start)) };
    std::thread::scope(|scope| {
        for i in 1..runs {
            let others = move || run(i).step_by(PIECE).for_each(zero);
            // A thread that cannot start leaves its run to this one.
            if std::thread::Builder::new().name("zero-filter".into()).spawn_scoped(scope, others).is_err() {
                run(i).step_by(PIECE).for_each(zero);
            }
        }
        for start in run(0).step_by(PIECE) {
            zero(start);
            tick();
        }
    });
    // SAFETY: `ptr` is a fresh allocation of `layout`, `bytes` long, now written whole; all-zero
    // bytes are a valid `T` (Zeroable), so it holds n initialised values, and the Vec frees it
    // with the same layout (an array of n `T`).
    unsafe { Vec::from_raw_parts(ptr as *mut T, n, n) }
}

/// How many of the whole 4 KiB pages inside `block` are in memory, of how many (`mincore`
/// tells): for tests of which pages a block's code writes.
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn pages_in_memory<T>(block: &[T]) -> (usize, usize) {
    const PAGE: usize = 4096;
    let at = block.as_ptr() as usize;
    let (start, end) = (at.next_multiple_of(PAGE), (at + std::mem::size_of_val(block)) / PAGE * PAGE);
    let mut resident = vec![0u8; end.saturating_sub(start) / PAGE];
    if resident.is_empty() {
        return (0, 0);
    }
    // SAFETY: the range is whole pages inside `block`'s allocation, and `resident` has a byte
    // for each; mincore only reports on them.
    let status = unsafe { libc::mincore(start as *mut libc::c_void, end - start, resident.as_mut_ptr()) };
    assert_eq!(status, 0, "mincore: {}", std::io::Error::last_os_error());
    (resident.iter().filter(|&&r| r & 1 == 1).count(), resident.len())
}

#[cfg(test)]
pub(crate) mod tests {
    #[test]
    fn a_large_zeroed_block_is_zero_and_ticks_once_per_2_mib() {
        let mut ticks = 0;
        // 5 MiB and 8 bytes: two whole pieces of 2 MiB and a short third.
        let words: Vec<u64> = super::zeroed_written_ticking((5 << 17) + 1, &mut || ticks += 1);
        assert_eq!(ticks, 3);
        assert_eq!(words.len(), (5 << 17) + 1);
        assert!(words.iter().all(|&w| w == 0));
        // Small blocks are a plain zeroed allocation, with no tick.
        let mut ticks = 0;
        let small: Vec<u64> = super::zeroed_written_ticking(1000, &mut || ticks += 1);
        assert!(ticks == 0 && small.iter().all(|&w| w == 0));
        let huge: Vec<u64> = super::zeroed_huge((5 << 17) + 1);
        assert!(huge.len() == (5 << 17) + 1 && huge.iter().all(|&w| w == 0));
    }

    /// Zeroed by several threads, a block is written whole, every page of it: the runs cover it
    /// however its size divides among the threads.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_block_zeroed_by_several_threads_is_written_whole() {
        for (words, threads) in [((5 << 17) + 1, 3), (1 << 20, 2), ((4 << 17) + 7, 8), (1 << 20, 1)] {
            let block: Vec<u64> = super::zeroed_huge_parallel(words, threads);
            assert_eq!(block.len(), words);
            assert!(block.iter().all(|&w| w == 0));
            let (in_memory, pages) = super::pages_in_memory(&block);
            assert_eq!(in_memory, pages, "{words} words by {threads} threads: {} of {pages} pages not written", pages - in_memory);
        }
        let spec = crate::spec::FilterSpec::native(1 << 26, 3, 0).expect("valid");
        assert_eq!(crate::filter::BloomFilter::new_shared(spec, 2).bits().count_ones(), 0);
    }

    /// A block of 64 KiB to 4 MiB from `zeroed_written` has every page in memory before it is
    /// read: written, not left for the zero page (a fresh mapping left untouched has none).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_mid_sized_written_block_has_every_page_in_memory() {
        for bytes in [64 << 10, 3 << 20, (4 << 20) - 8] {
            let block: Vec<u64> = super::zeroed_written(bytes / 8);
            let (in_memory, pages) = super::pages_in_memory(&block);
            assert_eq!(in_memory, pages, "{} of {pages} pages of a {bytes}-byte block not in memory", pages - in_memory);
            assert!(block.iter().all(|&w| w == 0));
        }
    }

    /// The flags of the memory mapping that holds `address`, as /proc/self/smaps lists them
    /// (`hg`: advised for huge pages), or None where there is no such file.
    #[cfg(target_os = "linux")]
    pub(crate) fn mapping_flags(address: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ').filter(|(range, _)| range.contains('-') && !range.ends_with(':')) {
                let (start, end) = range.split_once('-').expect("a range");
                let (start, end) = (usize::from_str_radix(start, 16).ok()?, usize::from_str_radix(end, 16).ok()?);
                inside = (start..end).contains(&address);
            } else if let Some(flags) = line.strip_prefix("VmFlags:").filter(|_| inside) {
                return Some(flags.to_string());
            }
        }
        None
    }

    /// A filter's block is advised for huge pages; a key table's and a job's partial filter's
    /// are not.
    ///
    /// The blocks are 64 MiB, past the largest size (32 MiB) up to which glibc's malloc may
    /// serve a block from memory it freed before instead of mapping it fresh: blocks of 8 MiB
    /// sometimes came from memory another test's huge block had left advised, and the test
    /// failed when run beside the others.
    #[cfg(target_os = "linux")]
    #[test]
    fn only_the_huge_block_is_advised_for_huge_pages() {
        let huge: Vec<u64> = super::zeroed_huge(1 << 23);
        let written: Vec<u64> = super::zeroed_written(1 << 23);
        let partial = crate::bits::BitArray::new_partial(64 << 23, &mut || {});
        let partial_flags = mapping_flags(partial.words().as_ptr() as usize + 4096);
        let (Some(huge_flags), Some(written_flags), Some(partial_flags)) = (mapping_flags(huge.as_ptr() as usize + 4096), mapping_flags(written.as_ptr() as usize + 4096), partial_flags) else {
            eprintln!("skipped: no /proc/self/smaps");
            return;
        };
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            eprintln!("skipped: this kernel has no transparent huge pages to advise");
            return;
        }
        assert!(huge_flags.split_whitespace().any(|f| f == "hg"), "{huge_flags}");
        assert!(!written_flags.split_whitespace().any(|f| f == "hg"), "{written_flags}");
        assert!(!partial_flags.split_whitespace().any(|f| f == "hg"), "{partial_flags}");
    }
}
