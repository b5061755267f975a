//! single-fragment resolution: the kernel writes each path whole as a record
//! of its CPU's path ring (the mmapped `frags` map, bpf/include/fswatch.h)
//! and the event names the record's offset and sequence number. Reading an
//! event turns it into the ringbuf layout (paths inline), so everything
//! after the drain is the same in every mode.

use crate::dirrefs::DirRefs;
use crate::wire::{rewrite_paths, PATH_LEN, PATH_MAX};
use anyhow::{bail, Result};
use harrier_schema::wire::ARING_DATA;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// A path record's header: u64 seq, u32 len, u32 pad (FW_FRAG_HDR).
const HDR: usize = 16;
/// A path by reference: u32 offset, u64 seq (FW_FRAG_REF).
pub const FRAG_REF: usize = 12;

/// The per-CPU path rings, mapped: paths are only read; the reader writes
/// each ring's tail, which only the doorbell reads (bpf/include/fswatch/doorbell.h).
pub struct FragSlots {
    base: *mut u8,
    len: usize,
    count: usize,
    /// Bytes of data per ring (the event ring's size).
    size: usize,
}

// Paths are only read, with the kernel's seq protocol; head and tail are atomics.
unsafe impl Send for FragSlots {}

impl FragSlots {
    pub fn map(fd: BorrowedFd<'_>, count: usize, size: usize) -> Result<FragSlots> {
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize };
        let len = (count * (ARING_DATA + size)).div_ceil(page) * page;
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let base =
            unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
        if base == libc::MAP_FAILED {
            bail!("mapping the path rings: {}", std::io::Error::last_os_error());
        }
        Ok(FragSlots { base: base.cast(), len, count, size })
    }

    fn word(&self, ring: usize, at: usize) -> &AtomicU64 {
        assert!(ring < self.count);
        // SAFETY: inside the mapping, 8-byte aligned (entries are multiples of 8).
        unsafe { &*(self.base.add(ring * (ARING_DATA + self.size) + at) as *const AtomicU64) }
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

    /// Copies the path record at `off` of ring `ring` into `out` if it still holds `seq`.
    fn read(&self, ring: usize, off: usize, seq: u64, out: &mut Vec<u8>) -> bool {
        if seq == 0 || ring >= self.count || !off.is_multiple_of(8) || off + HDR + PATH_MAX > self.size {
            return false;
        }
        // SAFETY: the record's header and largest body lie inside ring `ring`
        // (checked above); the header is 8-byte aligned.
        let p = unsafe { self.base.add(ring * (ARING_DATA + self.size) + ARING_DATA + off) };
        let seq_word = unsafe { &*(p as *const AtomicU64) };
        if seq_word.load(Ordering::Acquire) != seq {
            return false;
        }
        let n = (u32::from_le_bytes(unsafe { [*p.add(8), *p.add(9), *p.add(10), *p.add(11)] }) as usize)
            .min(PATH_MAX);
        let at = out.len();
        out.extend_from_slice(&(n as u16).to_le_bytes());
        out.extend_from_slice(unsafe { std::slice::from_raw_parts(p.add(HDR), n) });
        // Overwritten while copied: the seq changed (the kernel zeroes it first).
        fence(Ordering::Acquire);
        if seq_word.load(Ordering::Relaxed) != seq {
            out.truncate(at);
            return false;
        }
        true
    }

    /// Appends `rec` to `out` with its path references replaced by the paths;
    /// a path no longer in its slot is left empty and flagged unresolved.
    /// Returns how many were. Paths the kernel wrote inline for the reader's
    /// directory cache (marked) go to `dirs`.
    /// `ring`: the event ring `rec` came from (its CPU's path ring holds the paths).
    pub fn resolve(
        &self,
        rec: &[u8],
        ring: usize,
        out: &mut Vec<u8>,
        mut dirs: Option<&mut DirRefs>,
    ) -> Result<u64> {
        rewrite_paths(rec, out, |word, body, out| {
            if word & !PATH_LEN != 0 {
                return match dirs.as_deref_mut() {
                    Some(d) => d.put(word, body, out),
                    None => {
                        bail!("a path marked {:#x} without the reader's directory cache", word & !PATH_LEN)
                    }
                };
            }
            if body.len() != FRAG_REF {
                bail!("path reference of {} bytes is not {FRAG_REF}", body.len());
            }
            let at = u32::from_le_bytes(body[..4].try_into().unwrap()) as usize;
            let seq = u64::from_le_bytes(body[4..12].try_into().unwrap());
            Ok(self.read(ring, at, seq, out))
        })
    }
}

impl Drop for FragSlots {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{FIXED_END, F_UNRESOLVED, SOURCE_SHIFT};

    const SIZE: usize = 64 << 10;

    /// Two path rings in anonymous memory, as the kernel would leave them.
    fn rings() -> FragSlots {
        let len = 2 * (ARING_DATA + SIZE);
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        let base = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, -1, 0) };
        assert_ne!(base, libc::MAP_FAILED);
        FragSlots { base: base.cast(), len, count: 2, size: SIZE }
    }

    fn put(s: &FragSlots, ring: usize, off: usize, seq: u64, path: &[u8]) {
        let at = ring * (ARING_DATA + SIZE) + ARING_DATA + off;
        let p = unsafe { std::slice::from_raw_parts_mut(s.base.add(at), HDR + path.len()) };
        p[..8].copy_from_slice(&seq.to_le_bytes());
        p[8..12].copy_from_slice(&(path.len() as u32).to_le_bytes());
        p[HDR..].copy_from_slice(path);
    }

    fn reference(rec: &mut Vec<u8>, off: u32, seq: u64) {
        rec.extend_from_slice(&(FRAG_REF as u16).to_le_bytes());
        rec.extend_from_slice(&off.to_le_bytes());
        rec.extend_from_slice(&seq.to_le_bytes());
    }

    #[test]
    fn references_become_paths_and_overwritten_ones_are_flagged() {
        let s = rings();
        put(&s, 1, 64, 7, b"/w/a");
        put(&s, 1, 0, 8, b"/w/old");
        put(&s, 0, 64, 9, b"/elsewhere");
        let mut rec = vec![0u8; FIXED_END];
        reference(&mut rec, 64, 7);
        reference(&mut rec, 0, 5); // offset 0 now holds seq 8: overwritten
        let mut out = vec![1, 2, 3]; // what the arena already holds stays
        assert_eq!(s.resolve(&rec, 1, &mut out, None).unwrap(), 1);
        assert_eq!(&out[..3], &[1, 2, 3]);
        let e = crate::FsEvent::parse(&out[3..]).unwrap();
        assert_eq!(e.path, b"/w/a", "ring 1's record, not ring 0's at the same offset");
        assert_eq!(e.source, Some(&b""[..]));
        assert_eq!(e.flags, F_UNRESOLVED << SOURCE_SHIFT);
        let mut far = vec![0u8; FIXED_END];
        reference(&mut far, (SIZE - 8) as u32, 7);
        assert_eq!(s.resolve(&far, 1, &mut Vec::new(), None).unwrap(), 1, "an offset past the ring is lost");
        let mut bad = vec![0u8; FIXED_END];
        bad.extend_from_slice(&[4, 0, 1, 2, 3, 4]);
        assert!(s.resolve(&bad, 0, &mut Vec::new(), None).is_err(), "a malformed reference is an error");
    }
}
