//! The records fswatch's BPF side writes (bpf/include/fswatch.h), read in
//! place: an [`FsEvent`] borrows the ring bytes and allocates nothing.

use anyhow::{bail, Context, Result};

pub const HEADER_LEN: usize = 16;
/// Header + `struct fw_fixed`.
pub const FIXED_END: usize = 16 + 64;
pub const PATH_MAX: usize = 4096;
pub const EVENT_MAX: usize = FIXED_END + 2 * (2 + PATH_MAX);

/// A path's length word may carry a mark (`FW_PATH_*`, bpf/include/fswatch.h):
/// the path inline after what teaches its directory to the reader's cache...
pub const PATH_TEACH: u16 = 0x4000;
/// ...or its directory by reference to that cache, then the leaf.
pub const PATH_DREF: u16 = 0x8000;
/// The length proper.
pub const PATH_LEN: u16 = 0x3fff;

/// Event kinds, `FW_EV_*`, by wire number.
pub const KINDS: [(&str, u16); 8] = [
    ("open", 1),
    ("mkdir", 2),
    ("link", 3),
    ("rename", 4),
    ("setattr", 5),
    ("unlink", 6),
    ("rmdir", 7),
    ("modify", 8),
];

pub fn kind_name(k: u16) -> &'static str {
    KINDS.iter().find(|(_, n)| *n == k).map_or("unknown", |(s, _)| s)
}

pub fn kind_by_name(name: &str) -> Option<u16> {
    KINDS.iter().find(|(s, _)| *s == name).map(|(_, n)| *n)
}

/// `FW_F_*`: what a path could not take from kernel objects, or what is odd about it.
pub const FLAGS: [(&str, u32); 11] = [
    ("truncated", 1 << 0),
    ("deleted", 1 << 1),
    ("detached", 1 << 2),
    ("memfd", 1 << 3),
    ("unresolved", 1 << 4),
    ("name_from_arg", 1 << 5),
    ("mount_guess", 1 << 6),
    ("alias_guess", 1 << 7),
    ("disconnected", 1 << 8),
    ("created", 1 << 9),
    ("symlink", 1 << 10),
];
pub const F_UNRESOLVED: u32 = 1 << 4;
pub const F_TRUNCATED: u32 = 1 << 0;
/// The source path's flags sit in the high 16 bits.
pub const SOURCE_SHIFT: u32 = 16;

/// Flags that mean part of the path was not taken from kernel objects (or
/// not exactly): truncated, detached, unresolved, name_from_arg,
/// mount_guess, alias_guess, disconnected. Not deleted, memfd, created, symlink.
pub const NOT_EXACT: u32 = 1 | 1 << 2 | 1 << 4 | 1 << 5 | 1 << 6 | 1 << 7 | 1 << 8;

/// One event, borrowed from the ring.
#[derive(Clone, Copy, Debug)]
pub struct FsEvent<'a> {
    pub ts: u64,
    pub tid: u32,
    pub kind: u16,
    pub ret: i64,
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
    pub flags: u32,
    /// Kernel dev_t: major << 20 | minor.
    pub dev: u32,
    pub mnt_id: u32,
    pub ino: u64,
    comm: &'a [u8],
    pub nr: u32,
    pub path: &'a [u8],
    /// rename: where the entry was; link: the inode's other name.
    pub source: Option<&'a [u8]>,
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

impl<'a> FsEvent<'a> {
    pub fn parse(b: &'a [u8]) -> Result<FsEvent<'a>> {
        if b.len() < FIXED_END + 2 {
            bail!("event of {} bytes is shorter than {}", b.len(), FIXED_END + 2);
        }
        let mut off = FIXED_END;
        let mut var = || -> Result<Option<&'a [u8]>> {
            if off == b.len() {
                return Ok(None);
            }
            if off + 2 > b.len() {
                bail!("path length at byte {off} past the end ({})", b.len());
            }
            let n = u16::from_le_bytes([b[off], b[off + 1]]) as usize;
            if off + 2 + n > b.len() {
                bail!("path at byte {off} of {n} bytes runs past the end ({})", b.len());
            }
            let s = &b[off + 2..off + 2 + n];
            off += 2 + n;
            Ok(Some(s))
        };
        let path = var()?.unwrap_or(&[]);
        let source = var()?;
        Ok(FsEvent {
            ts: u64_at(b, 0),
            tid: u32_at(b, 8),
            kind: u16::from_le_bytes([b[12], b[13]]),
            ret: u64_at(b, 16) as i64,
            pid: u32_at(b, 24),
            uid: u32_at(b, 28),
            gid: u32_at(b, 32),
            flags: u32_at(b, 36),
            dev: u32_at(b, 40),
            mnt_id: u32_at(b, 44),
            ino: u64_at(b, 48),
            comm: &b[56..72],
            nr: u32_at(b, 72),
            path,
            source,
        })
    }

    pub fn kind_name(&self) -> &'static str {
        kind_name(self.kind)
    }

    pub fn comm(&self) -> &'a [u8] {
        let n = self.comm.iter().position(|&c| c == 0).unwrap_or(self.comm.len());
        &self.comm[..n]
    }

    pub fn path_flags(&self) -> u32 {
        self.flags & 0xffff
    }

    pub fn source_flags(&self) -> u32 {
        self.flags >> SOURCE_SHIFT
    }

    /// Any part of a path could not be resolved from kernel objects.
    pub fn unresolved(&self) -> bool {
        (self.path_flags() | self.source_flags()) & NOT_EXACT != 0
    }

    /// (major, minor) as user space writes them.
    pub fn dev_pair(&self) -> (u32, u32) {
        (self.dev >> 20, self.dev & ((1 << 20) - 1))
    }
}

/// Appends `rec` to `out` with each of its paths replaced by what `put`
/// appends for it (u16 length + bytes) given the path's length word and
/// body; a path `put` cannot resolve (false) is left empty and flagged
/// unresolved. Returns how many were. The reader's modes turn their path
/// forms into the ringbuf layout with it, so what follows the drain is the
/// same in every mode.
pub fn rewrite_paths(
    rec: &[u8],
    out: &mut Vec<u8>,
    mut put: impl FnMut(u16, &[u8], &mut Vec<u8>) -> Result<bool>,
) -> Result<u64> {
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
        if off + 2 > rec.len() {
            bail!("path at byte {off} past the end ({})", rec.len());
        }
        let word = u16::from_le_bytes([rec[off], rec[off + 1]]);
        let n = (word & PATH_LEN) as usize;
        if off + 2 + n > rec.len() {
            bail!("path at byte {off} of {n} bytes runs past the end ({})", rec.len());
        }
        let at = out.len();
        let body = &rec[off + 2..off + 2 + n];
        if !put(word, body, out).with_context(|| format!("path {b} at byte {off}"))? {
            out.truncate(at);
            out.extend_from_slice(&0u16.to_le_bytes());
            flags |= F_UNRESOLVED << (b * SOURCE_SHIFT);
            lost += 1;
        }
        off += 2 + n;
    }
    let f = u32_at(out, start + 36) | flags;
    out[start + 36..start + 40].copy_from_slice(&f.to_le_bytes());
    let len = (out.len() - start).min(u16::MAX as usize) as u16;
    out[start + 14..start + 16].copy_from_slice(&len.to_le_bytes());
    Ok(lost)
}

/// Whether any path of `rec` carries a mark (PATH_TEACH, PATH_DREF).
pub fn has_marks(rec: &[u8]) -> bool {
    let mut off = FIXED_END;
    while off + 2 <= rec.len() {
        let word = u16::from_le_bytes([rec[off], rec[off + 1]]);
        if word & !PATH_LEN != 0 {
            return true;
        }
        off += 2 + word as usize;
    }
    false
}

/// Names of the set flags, for output.
pub fn flag_names(flags: u32) -> impl Iterator<Item = &'static str> {
    FLAGS.iter().filter(move |(_, b)| flags & b != 0).map(|(n, _)| *n)
}

/// `struct fw_stats`, one CPU's kernel counters.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct KernelStats {
    pub events: u64,
    pub drops_ring_full: u64,
    pub drops_no_ring: u64,
    pub filtered: u64,
    pub failed: u64,
    pub unresolved: u64,
    pub no_entry: u64,
    pub slots_full: u64,
    /// Watch checks the verdict cache decided (bpf/include/fswatch/cache.h).
    pub cache_hits: u64,
    /// Watch checks that climbed to the root or to a watched ancestor.
    pub cache_misses: u64,
    /// Paths whose directory part came from the path cache.
    pub path_hits: u64,
    /// Paths walked to the root with names.
    pub path_misses: u64,
    /// Paths sent as a reference to the reader's directory cache (dirrefs.rs).
    pub dir_refs: u64,
}

impl KernelStats {
    pub const SIZE: usize = 104;

    pub fn from_bytes(b: &[u8]) -> KernelStats {
        let f = |i: usize| u64_at(b, i * 8);
        KernelStats {
            events: f(0),
            drops_ring_full: f(1),
            drops_no_ring: f(2),
            filtered: f(3),
            failed: f(4),
            unresolved: f(5),
            no_entry: f(6),
            slots_full: f(7),
            cache_hits: f(8),
            cache_misses: f(9),
            path_hits: f(10),
            path_misses: f(11),
            dir_refs: f(12),
        }
    }

    pub fn add(&mut self, o: &KernelStats) {
        self.events += o.events;
        self.drops_ring_full += o.drops_ring_full;
        self.drops_no_ring += o.drops_no_ring;
        self.filtered += o.filtered;
        self.failed += o.failed;
        self.unresolved += o.unresolved;
        self.no_entry += o.no_entry;
        self.slots_full += o.slots_full;
        self.cache_hits += o.cache_hits;
        self.cache_misses += o.cache_misses;
        self.path_hits += o.path_hits;
        self.path_misses += o.path_misses;
        self.dir_refs += o.dir_refs;
    }

    pub fn drops(&self) -> u64 {
        self.drops_ring_full + self.drops_no_ring
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_record_and_rejects_short_ones() {
        let mut b = vec![0u8; FIXED_END];
        b[12] = 4; // rename
        b[24..28].copy_from_slice(&7u32.to_le_bytes());
        b[36..40].copy_from_slice(&((1u32 << 16) | 1).to_le_bytes());
        b[56..59].copy_from_slice(b"cat");
        b.extend_from_slice(&3u16.to_le_bytes());
        b.extend_from_slice(b"/a/");
        b.extend_from_slice(&2u16.to_le_bytes());
        b.extend_from_slice(b"/b");
        let e = FsEvent::parse(&b).unwrap();
        assert_eq!((e.kind_name(), e.pid, e.comm()), ("rename", 7, &b"cat"[..]));
        assert_eq!((e.path, e.source), (&b"/a/"[..], Some(&b"/b"[..])));
        assert_eq!((e.path_flags(), e.source_flags()), (1, 1));
        assert!(e.unresolved());
        let cut = &b[..b.len() - 1];
        assert!(FsEvent::parse(cut).unwrap_err().to_string().contains("runs past the end"));
        assert!(FsEvent::parse(&b[..10]).is_err());
    }

    #[test]
    fn names() {
        assert_eq!(kind_by_name("rmdir"), Some(7));
        assert_eq!(kind_by_name("frob"), None);
        assert_eq!(flag_names(0b10001).collect::<Vec<_>>(), ["truncated", "unresolved"]);
    }
}
