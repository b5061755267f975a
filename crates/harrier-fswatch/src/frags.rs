//! single-fragment resolution: the kernel writes each path whole as a record
//! of its CPU's path ring (the mmapped `frags` map, bpf/include/fswatch.h)
//! and the event names the record's offset and sequence number. Reading an
//! event turns it into the ringbuf layout (paths inline), so everything
//! after the drain is the same in every mode.

use crate::wire::{FIXED_END, F_UNRESOLVED, PATH_MAX, SOURCE_SHIFT};
use anyhow::{bail, Result};
use harrier_schema::wire::ARING_DATA;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// A path record's header: u64 seq, u32 len, u32 pad (FW_FRAG_HDR).
const HDR: usize = 16;
/// A path by reference: u32 offset, u64 seq (FW_FRAG_REF).
pub const FRAG_REF: usize = 12;

/// The per-CPU path rings, mapped read-only.
pub struct FragSlots {
    base: *mut u8,
    len: usize,
    count: usize,
    /// Bytes of data per ring (the event ring's size).
    size: usize,
}

// The mapping is only read, through &self, with the kernel's seq protocol.
unsafe impl Send for FragSlots {}

impl FragSlots {
    pub fn map(fd: BorrowedFd<'_>, count: usize, size: usize) -> Result<FragSlots> {
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize };
        let len = (count * (ARING_DATA + size)).div_ceil(page) * page;
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, fd.as_raw_fd(), 0)
        };
        if base == libc::MAP_FAILED {
            bail!("mapping the path rings: {}", std::io::Error::last_os_error());
        }
        Ok(FragSlots { base: base.cast(), len, count, size })
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
    /// Returns how many were.
    /// `ring`: the event ring `rec` came from (its CPU's path ring holds the paths).
    pub fn resolve(&self, rec: &[u8], ring: usize, out: &mut Vec<u8>) -> Result<u64> {
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
            let at = u32::from_le_bytes(rec[off + 2..off + 6].try_into().unwrap()) as usize;
            let seq = u64::from_le_bytes(rec[off + 6..off + 14].try_into().unwrap());
            off += 2 + FRAG_REF;
            if !self.read(ring, at, seq, out) {
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
        assert_eq!(s.resolve(&rec, 1, &mut out).unwrap(), 1);
        assert_eq!(&out[..3], &[1, 2, 3]);
        let e = crate::FsEvent::parse(&out[3..]).unwrap();
        assert_eq!(e.path, b"/w/a", "ring 1's record, not ring 0's at the same offset");
        assert_eq!(e.source, Some(&b""[..]));
        assert_eq!(e.flags, F_UNRESOLVED << SOURCE_SHIFT);
        let mut far = vec![0u8; FIXED_END];
        reference(&mut far, (SIZE - 8) as u32, 7);
        assert_eq!(s.resolve(&far, 1, &mut Vec::new()).unwrap(), 1, "an offset past the ring is lost");
        let mut bad = vec![0u8; FIXED_END];
        bad.extend_from_slice(&[4, 0, 1, 2, 3, 4]);
        assert!(s.resolve(&bad, 0, &mut Vec::new()).is_err(), "a malformed reference is an error");
    }
}

/// fragments resolution: the event names its leaf's directory by key
/// (dev, mount id, inode) and carries "/" + the leaf's name; the kernel's
/// `fragments` map holds each directory's (parent key, name, changed).
/// Joining reads the map: a directory missing (evicted from the LRU) or
/// changed after the event (renamed since: the name it had then is gone)
/// leaves the path flagged unresolved, never silently wrong.
pub struct FragMap {
    fd: i32,
    /// Names found climbing, reused: a join allocates nothing once warm.
    names: Vec<(usize, usize)>,
    buf: Vec<u8>,
}

/// `struct fw_frag`: parent key 16, changed 8, len 4, pad 4, name 256.
const FRAG_VALUE: usize = 16 + 8 + 8 + 256;
pub const FKEY: usize = 16;
/// Directories climbed at most (the kernel's walk stops at 2048 steps).
const MAX_CHAIN: usize = 2048;

/// What joining a record's paths found.
#[derive(Default, Debug, Clone, Copy)]
pub struct JoinStats {
    /// A directory was not in the map (evicted).
    pub missing: u64,
    /// A directory changed after the event.
    pub stale: u64,
}

impl FragMap {
    /// `fd`: the fragments map (kept open by the watcher's skeleton).
    pub fn new(fd: i32) -> FragMap {
        FragMap { fd, names: Vec::new(), buf: Vec::new() }
    }

    fn lookup(&self, key: &[u8; FKEY], v: &mut [u8; FRAG_VALUE]) -> bool {
        // SAFETY: key and value buffers are the map's key and value sizes.
        unsafe { libbpf_sys::bpf_map_lookup_elem(self.fd, key.as_ptr().cast(), v.as_mut_ptr().cast()) == 0 }
    }

    /// Appends path bytes for directory `key` + `tail` to `out`: Ok(true)
    /// if every fragment was there and unchanged since `ts`.
    fn join(&mut self, key: [u8; FKEY], tail: &[u8], ts: u64, out: &mut Vec<u8>, st: &mut JoinStats) -> bool {
        self.names.clear();
        self.buf.clear();
        let mut k = key;
        let mut v = [0u8; FRAG_VALUE];
        let mut ok = true;
        for _ in 0..MAX_CHAIN {
            if k == [0u8; FKEY] {
                break;
            }
            if !self.lookup(&k, &mut v) {
                st.missing += 1;
                ok = false;
                break;
            }
            let changed = u64::from_le_bytes(v[16..24].try_into().unwrap());
            if changed > ts {
                st.stale += 1;
                ok = false;
                break;
            }
            let len = (u32::from_le_bytes(v[24..28].try_into().unwrap()) as usize).min(255);
            if len > 0 {
                let at = self.buf.len();
                self.buf.extend_from_slice(&v[32..32 + len]);
                self.names.push((at, len));
            }
            k.copy_from_slice(&v[..FKEY]);
        }
        if !ok {
            return false;
        }
        for &(at, len) in self.names.iter().rev() {
            out.push(b'/');
            out.extend_from_slice(&self.buf[at..at + len]);
        }
        out.extend_from_slice(tail);
        if self.names.is_empty() && tail.is_empty() {
            out.push(b'/');
        }
        true
    }

    /// Appends `rec` to `out` with its fragment references joined into
    /// paths (ringbuf layout); an unjoinable path is left empty and flagged.
    pub fn resolve(&mut self, rec: &[u8], out: &mut Vec<u8>, st: &mut JoinStats) -> Result<()> {
        if rec.len() < FIXED_END {
            bail!("event of {} bytes is shorter than {FIXED_END}", rec.len());
        }
        let ts = u64::from_le_bytes(rec[..8].try_into().unwrap());
        let start = out.len();
        out.extend_from_slice(&rec[..FIXED_END]);
        let (mut off, mut flags) = (FIXED_END, 0u32);
        for b in 0..2u32 {
            if off == rec.len() {
                break;
            }
            if off + 2 > rec.len() {
                bail!("path reference at byte {off} past the end ({})", rec.len());
            }
            let n = u16::from_le_bytes([rec[off], rec[off + 1]]) as usize;
            if n < FKEY || off + 2 + n > rec.len() {
                bail!("path reference at byte {off} of {n} bytes is malformed");
            }
            let key: [u8; FKEY] = rec[off + 2..off + 2 + FKEY].try_into().unwrap();
            let tail = &rec[off + 2 + FKEY..off + 2 + n];
            off += 2 + n;
            let len_at = out.len();
            out.extend_from_slice(&[0, 0]);
            if !self.join(key, tail, ts, out, st) {
                out.truncate(len_at + 2);
                flags |= F_UNRESOLVED << (b * SOURCE_SHIFT);
            }
            let plen = (out.len() - len_at - 2).min(PATH_MAX);
            out.truncate(len_at + 2 + plen);
            out[len_at..len_at + 2].copy_from_slice(&(plen as u16).to_le_bytes());
        }
        let f = u32::from_le_bytes(out[start + 36..start + 40].try_into().unwrap()) | flags;
        out[start + 36..start + 40].copy_from_slice(&f.to_le_bytes());
        let len = (out.len() - start).min(u16::MAX as usize) as u16;
        out[start + 14..start + 16].copy_from_slice(&len.to_le_bytes());
        Ok(())
    }
}
