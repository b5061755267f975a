//! The reader's wake-up (bpf/include/fswatch/doorbell.h): a one-page BPF
//! ringbuf a CPU writes one record to when one of its rings passes a quarter
//! full. The reader sleeps on it (epoll, through libbpf's ring_buffer) with
//! its timer as the timeout. Also the path rings' tails, which only the
//! doorbell reads: the reader moves them as it drains.

use anyhow::{anyhow, bail, Result};
use harrier_schema::wire::ARING_DATA;
use libbpf_rs::{MapCore, RingBuffer, RingBufferBuilder};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Why `Watcher::wait` returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    /// A ring passed its wake level: drain now.
    Doorbell,
    /// The timeout passed (or a signal came) with every ring below half.
    Timeout,
}

pub(crate) struct Doorbell {
    rb: RingBuffer<'static>,
    /// Doorbell records consumed (the callback's count).
    rung: Arc<AtomicU64>,
}

impl Doorbell {
    pub fn new(map: &dyn MapCore) -> Result<Doorbell> {
        let rung = Arc::new(AtomicU64::new(0));
        let count = Arc::clone(&rung);
        let mut b = RingBufferBuilder::new();
        b.add(map, move |_| {
            count.fetch_add(1, Ordering::Relaxed);
            0
        })?;
        Ok(Doorbell { rb: b.build()?, rung })
    }

    /// Sleeps until a doorbell record is there or `timeout` passes
    /// (rounded up to whole milliseconds, epoll's unit); consumes the records.
    pub fn wait(&self, timeout: Duration) -> Result<Woke> {
        let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128 - 1) as u64;
        let before = self.rung.load(Ordering::Relaxed);
        let n = self.rb.poll_raw(Duration::from_millis(ms));
        if n < 0 && n != -libc::EINTR {
            bail!("waiting on the doorbell: {}", std::io::Error::from_raw_os_error(-n));
        }
        Ok(if self.rung.load(Ordering::Relaxed) > before { Woke::Doorbell } else { Woke::Timeout })
    }
}

/// The path rings' (single-fragment) head and tail words, mapped.
pub(crate) struct PathTails {
    base: *mut u8,
    len: usize,
    count: usize,
    entry: usize,
}

impl PathTails {
    pub fn map(fd: BorrowedFd<'_>, count: usize, size: usize) -> Result<PathTails> {
        let entry = ARING_DATA + size;
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize };
        let len = (count * entry).div_ceil(page) * page;
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let base =
            unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
        if base == libc::MAP_FAILED {
            return Err(anyhow!("mapping the path rings' tails: {}", std::io::Error::last_os_error()));
        }
        Ok(PathTails { base: base.cast(), len, count, entry })
    }

    fn word(&self, ring: usize, at: usize) -> &AtomicU64 {
        assert!(ring < self.count);
        // SAFETY: inside the mapping, 8-byte aligned (entries are multiples of 8).
        unsafe { &*(self.base.add(ring * self.entry + at) as *const AtomicU64) }
    }

    /// Path ring `ring`'s head: read before draining its events.
    pub fn head(&self, ring: usize) -> u64 {
        self.word(ring, 0).load(Ordering::Acquire)
    }

    /// Marks path ring `ring` read up to `head` (as read before the drain:
    /// the paths of the events drained are before it, give or take the one
    /// event being written then).
    pub fn set_tail(&self, ring: usize, head: u64) {
        self.word(ring, 64).store(head, Ordering::Release);
    }
}

impl Drop for PathTails {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}
