//! A reader for one BPF ring buffer, mapped directly.
//!
//! libbpf's ring_buffer__consume() calls back through C for every record and
//! publishes the consumer position after each one. Reading the mapping here
//! keeps the per-event path to a header check and a slice, and publishes the
//! position once per batch: the consumer's CPU per event is what the sensor's
//! cost budget is about.

use anyhow::{bail, Result};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// From linux/bpf.h: a record being written, a record given up.
const BUSY_BIT: u32 = 1 << 31;
const DISCARD_BIT: u32 = 1 << 30;
const HDR_SZ: usize = 8;

pub struct Ring {
    consumer: *mut u8,
    producer: *mut u8,
    page: usize,
    size: usize,
}

fn page_size() -> usize {
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

impl Ring {
    /// Maps a BPF_MAP_TYPE_RINGBUF of `size` data bytes (a power of two).
    pub fn map(fd: BorrowedFd<'_>, size: usize) -> Result<Ring> {
        let page = page_size();
        let fd = fd.as_raw_fd();
        // Page 0: the consumer position (ours to write). Then the producer
        // position and the data, mapped twice in a row by the kernel so that
        // a record that wraps around reads as one slice.
        let consumer = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if consumer == libc::MAP_FAILED {
            bail!("mapping a ring: {}", std::io::Error::last_os_error());
        }
        let producer = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page + 2 * size,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                page as i64,
            )
        };
        if producer == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            unsafe { libc::munmap(consumer, page) };
            bail!("mapping a ring: {e}");
        }
        Ok(Ring { consumer: consumer.cast(), producer: producer.cast(), page, size })
    }

    fn consumer_pos(&self) -> &AtomicU64 {
        // SAFETY: the first word of the consumer page, mapped for our lifetime.
        unsafe { &*(self.consumer as *const AtomicU64) }
    }

    fn producer_pos(&self) -> &AtomicU64 {
        unsafe { &*(self.producer as *const AtomicU64) }
    }

    /// Hands every complete record to `f`; returns how many it handed over.
    pub fn consume(&mut self, f: &mut impl FnMut(&[u8])) -> usize {
        let mask = self.size as u64 - 1;
        let data = unsafe { self.producer.add(self.page) };
        let mut cons = self.consumer_pos().load(Ordering::Relaxed);
        let prod = self.producer_pos().load(Ordering::Acquire);
        let mut n = 0;
        while cons < prod {
            let at = unsafe { data.add((cons & mask) as usize) };
            // SAFETY: record headers are 8-byte aligned inside the mapping.
            let hdr = unsafe { &*(at as *const AtomicU32) }.load(Ordering::Acquire);
            if hdr & BUSY_BIT != 0 {
                break; // still being written: next time
            }
            let len = (hdr & !(BUSY_BIT | DISCARD_BIT)) as usize;
            if hdr & DISCARD_BIT == 0 {
                // SAFETY: the double mapping makes [at+8, at+8+len) contiguous.
                f(unsafe { std::slice::from_raw_parts(at.add(HDR_SZ), len) });
                n += 1;
            }
            cons += ((len + HDR_SZ + 7) & !7) as u64;
        }
        self.consumer_pos().store(cons, Ordering::Release);
        n
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        unsafe {
            libc::munmap(self.consumer.cast(), self.page);
            libc::munmap(self.producer.cast(), self.page + 2 * self.size);
        }
    }
}
