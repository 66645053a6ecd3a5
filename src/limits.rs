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

/// Allocates `n` zeroed values, asking the kernel for transparent huge pages when the block is
/// large: a filter or key table is accessed at random, and with 4 KiB pages each access may also
/// miss the TLB, and each first touch fault. Where huge pages are not available this is a plain
/// zeroed allocation.
///
/// Every page is then written once, here. A fresh page that is read before it is written maps
/// the kernel's shared zero page, and the first write must replace that mapping and flush every
/// CPU's TLB entry for it: with two workers running, an inter-processor interrupt per page (a VM
/// exit on a virtual machine), which took an eighth of a two-worker semi-join's time.
pub fn zeroed_huge<T: bytemuck::Zeroable>(n: usize) -> Vec<T> {
    let mut v: Vec<T> = bytemuck::zeroed_vec(n);
    let bytes = n * std::mem::size_of::<T>();
    if bytes >= 4 << 20 {
        #[cfg(target_os = "linux")]
        // SAFETY: madvise only advises the kernel about the allocation's own address range;
        // it changes no contents (the pages are still zero and untouched).
        unsafe {
            libc::madvise(v.as_ptr() as *mut libc::c_void, bytes, libc::MADV_HUGEPAGE);
        }
    }
    let base = v.as_mut_ptr() as *mut u8;
    for offset in (0..bytes).step_by(4096) {
        // SAFETY: the offset is inside the allocation of `bytes` bytes, and writing a zero byte
        // over zeroed memory keeps every value of the Zeroable T as it was. Volatile, so that the
        // compiler cannot drop a write it knows stores what is already there.
        unsafe { std::ptr::write_volatile(base.add(offset), 0) };
    }
    v
}
