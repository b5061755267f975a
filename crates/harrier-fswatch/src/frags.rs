//! single-fragment resolution: the kernel writes each path whole into a slot
//! of the mmapped `frags` array (struct fw_frag, bpf/include/fswatch.h) and
//! the event names the slot and its sequence number. Reading a record turns
//! it into the ringbuf layout (paths inline), so everything after the drain
//! is the same in every mode.

use crate::wire::{FIXED_END, F_UNRESOLVED, PATH_MAX, SOURCE_SHIFT};
use anyhow::{bail, Result};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// struct fw_frag: seq, len, pad, path.
const SLOT: usize = 16 + PATH_MAX;
/// A path by reference: u32 slot, u64 seq (FW_FRAG_REF).
pub const FRAG_REF: usize = 12;

pub struct FragSlots {
    base: *mut u8,
    len: usize,
    count: usize,
}

// The mapping is only read, through &self, with the kernel's seq protocol.
unsafe impl Send for FragSlots {}

impl FragSlots {
    pub fn map(fd: BorrowedFd<'_>, count: usize) -> Result<FragSlots> {
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize };
        let len = (count * SLOT).div_ceil(page) * page;
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, fd.as_raw_fd(), 0)
        };
        if base == libc::MAP_FAILED {
            bail!("mapping the path slots: {}", std::io::Error::last_os_error());
        }
        Ok(FragSlots { base: base.cast(), len, count })
    }

    /// Copies slot `slot` into `out` if it still holds `seq`.
    fn read(&self, slot: usize, seq: u64, out: &mut Vec<u8>) -> bool {
        if seq == 0 || slot >= self.count {
            return false;
        }
        // SAFETY: slot < count, so the slot lies inside the mapping; seq is 8-byte aligned.
        let p = unsafe { self.base.add(slot * SLOT) };
        let seq_word = unsafe { &*(p as *const AtomicU64) };
        if seq_word.load(Ordering::Acquire) != seq {
            return false;
        }
        let n = (u32::from_le_bytes(unsafe { [*p.add(8), *p.add(9), *p.add(10), *p.add(11)] }) as usize)
            .min(PATH_MAX);
        let at = out.len();
        out.extend_from_slice(&(n as u16).to_le_bytes());
        out.extend_from_slice(unsafe { std::slice::from_raw_parts(p.add(16), n) });
        // Rewritten while copied: the seq changed (the kernel zeroes it first).
        fence(Ordering::Acquire);
        if seq_word.load(Ordering::Relaxed) != seq {
            out.truncate(at);
            return false;
        }
        true
    }

    /// Appends `rec` to `out` with its path references replaced by the paths;
    /// a path no longer in its slot is left empty and flagged unresolved.
    /// Returns how many were.
    pub fn resolve(&self, rec: &[u8], out: &mut Vec<u8>) -> Result<u64> {
        if rec.len() < FIXED_END {
            bail!("event of {} bytes is shorter than {FIXED_END}", rec.len());
        }
        let start = out.len();
        out.extend_from_slice(&rec[..FIXED_END]);
        let (mut off, mut lost, mut flags) = (FIXED_END, 0, 0u32);
        for b in 0..2u32 {
            if off == rec.len() {
                break;
            }
            if off + 2 + FRAG_REF > rec.len()
                || u16::from_le_bytes([rec[off], rec[off + 1]]) as usize != FRAG_REF
            {
                bail!("path reference at byte {off} is not {FRAG_REF} bytes");
            }
            let slot = u32::from_le_bytes(rec[off + 2..off + 6].try_into().unwrap()) as usize;
            let seq = u64::from_le_bytes(rec[off + 6..off + 14].try_into().unwrap());
            off += 2 + FRAG_REF;
            if !self.read(slot, seq, out) {
                out.extend_from_slice(&0u16.to_le_bytes());
                flags |= F_UNRESOLVED << (b * SOURCE_SHIFT);
                lost += 1;
            }
        }
        let f = u32::from_le_bytes(out[start + 36..start + 40].try_into().unwrap()) | flags;
        out[start + 36..start + 40].copy_from_slice(&f.to_le_bytes());
        let len = (out.len() - start).min(u16::MAX as usize) as u16;
        out[start + 14..start + 16].copy_from_slice(&len.to_le_bytes());
        Ok(lost)
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

    /// Two slots in anonymous memory, as the kernel would leave them.
    fn slots() -> FragSlots {
        let len = 2 * SLOT;
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        let base = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, -1, 0) };
        assert_ne!(base, libc::MAP_FAILED);
        FragSlots { base: base.cast(), len, count: 2 }
    }

    fn put(s: &FragSlots, slot: usize, seq: u64, path: &[u8]) {
        let p = unsafe { std::slice::from_raw_parts_mut(s.base.add(slot * SLOT), SLOT) };
        p[..8].copy_from_slice(&seq.to_le_bytes());
        p[8..12].copy_from_slice(&(path.len() as u32).to_le_bytes());
        p[16..16 + path.len()].copy_from_slice(path);
    }

    fn reference(rec: &mut Vec<u8>, slot: u32, seq: u64) {
        rec.extend_from_slice(&(FRAG_REF as u16).to_le_bytes());
        rec.extend_from_slice(&slot.to_le_bytes());
        rec.extend_from_slice(&seq.to_le_bytes());
    }

    #[test]
    fn references_become_paths_and_reused_slots_are_flagged() {
        let s = slots();
        put(&s, 1, 7, b"/w/a");
        put(&s, 0, 8, b"/w/old");
        let mut rec = vec![0u8; FIXED_END];
        reference(&mut rec, 1, 7);
        reference(&mut rec, 0, 5); // slot 0 now holds seq 8: reused
        let mut out = vec![1, 2, 3]; // what the arena already holds stays
        assert_eq!(s.resolve(&rec, &mut out).unwrap(), 1);
        assert_eq!(&out[..3], &[1, 2, 3]);
        let e = crate::FsEvent::parse(&out[3..]).unwrap();
        assert_eq!(e.path, b"/w/a");
        assert_eq!(e.source, Some(&b""[..]));
        assert_eq!(e.flags, F_UNRESOLVED << SOURCE_SHIFT);
        let mut bad = vec![0u8; FIXED_END];
        bad.extend_from_slice(&[4, 0, 1, 2, 3, 4]);
        assert!(s.resolve(&bad, &mut Vec::new()).is_err(), "a malformed reference is an error");
    }
}
