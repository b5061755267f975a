//! The reader for the per-CPU array rings (`struct hr_aring` in harrier.h).
//!
//! BPF writes each record in place and then moves `head`; records are 8-byte
//! aligned and never wrap (one that would start past `size - ARING_SLACK`
//! starts the next lap instead), so every record is one slice of the mapping.

use anyhow::{bail, Result};
use harrier_schema::wire::{ARING_DATA, ARING_SLACK, HEADER_LEN};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// The whole array map, mapped once; ring i is entry i.
pub struct ArrayRings {
    base: *mut u8,
    len: usize,
    count: usize,
    entry: usize,
    size: usize,
    /// No record starts later than `size - slack`, none is longer.
    slack: usize,
}

impl ArrayRings {
    /// Maps `count` rings of `size` data bytes (the map's value is `ARING_DATA + size`).
    pub fn map(fd: BorrowedFd<'_>, count: usize, size: usize) -> Result<ArrayRings> {
        Self::map_with_slack(fd, count, size, ARING_SLACK)
    }

    /// As `map`, for a producer whose records are at most `slack` bytes (and
    /// that starts none later than `size - slack`): fswatch's are smaller
    /// than the capture engine's, so its rings can be smaller.
    pub fn map_with_slack(fd: BorrowedFd<'_>, count: usize, size: usize, slack: usize) -> Result<ArrayRings> {
        if slack < HEADER_LEN || slack >= size {
            bail!("rings of {size} bytes cannot keep {slack} bytes of slack");
        }
        let entry = ARING_DATA + size;
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize };
        let len = (count * entry).div_ceil(page) * page;
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let base =
            unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
        if base == libc::MAP_FAILED {
            bail!("mapping the rings: {}", std::io::Error::last_os_error());
        }
        Ok(ArrayRings { base: base.cast(), len, count, entry, size, slack })
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// Hands every published record of ring `i` to `f`; returns how many.
    /// A record with an impossible length is a bug, reported as an error.
    pub fn consume(&self, i: usize, f: &mut impl FnMut(&[u8])) -> Result<usize> {
        // SAFETY: entry i lies inside the mapping; head and tail are 8-byte aligned.
        let ring = unsafe { self.base.add(i * self.entry) };
        let head = unsafe { &*(ring as *const AtomicU64) }.load(Ordering::Acquire);
        let tail_word = unsafe { &*(ring.add(64) as *const AtomicU64) };
        let data = unsafe { ring.add(ARING_DATA) };
        let (mask, last) = (self.size as u64 - 1, (self.size - self.slack) as u64);
        let mut tail = tail_word.load(Ordering::Relaxed);
        let mut n = 0;
        while tail < head {
            let off = tail & mask;
            if off > last {
                tail += mask + 1 - off;
                continue;
            }
            // SAFETY: off <= size - slack, and a record is at most that long.
            let rec = unsafe { data.add(off as usize) };
            let len = u16::from_le_bytes(unsafe { [*rec.add(14), *rec.add(15)] }) as usize;
            if !(HEADER_LEN..=self.slack).contains(&len) {
                bail!("ring {i}: a record of {len} bytes at offset {off}: the ring is corrupt");
            }
            f(unsafe { std::slice::from_raw_parts(rec, len) });
            n += 1;
            tail += ((len + 7) & !7) as u64;
        }
        // Release: our reads of the records happen before BPF may reuse them.
        tail_word.store(tail, Ordering::Release);
        Ok(n)
    }
}

impl Drop for ArrayRings {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}
