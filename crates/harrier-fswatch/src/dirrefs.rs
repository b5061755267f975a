//! The reader's directory cache (ringbuf and single-fragment modes), the
//! user-space half of bpf/include/fswatch/dirrefs.h: directories' paths the
//! kernel taught, each in a slot, announced in the kernel's `rdirs` map so
//! that later events in the same directory carry (slot, version) and the
//! leaf's name instead of the whole path.
//!
//! A slot keeps its path until it is given to another directory, which bumps
//! its version: an event still referring to the old version (written before
//! the kernel saw the new `rdirs` entry) is reported empty and flagged, never
//! with another directory's path.

use crate::wire::{PATH_DREF, PATH_LEN, PATH_MAX, PATH_TEACH};
use anyhow::{bail, Result};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

/// `struct fw_rkey`: the directory (mount's unique id, inode, dev) and the task's root.
const RKEY: usize = 40;
/// `struct fw_teach`: the key, the state (generation, namespace event), dir_len, watched.
const TEACH: usize = 64;
/// `struct fw_rval`.
const RVAL: usize = 32;
/// (slot, version) before the leaf.
const DREF: usize = 8;

/// Directories kept at most, and bytes of their paths: the kernel map's size
/// and the reader's memory bound (16 MiB of paths; typical ones are ~100 bytes).
pub const MAX_DIRS: usize = 65536;
const MAX_BYTES: usize = 16 << 20;

type Key = [u8; RKEY];

struct Slot {
    key: Key,
    ver: u32,
    gen: u64,
    ns_event: u64,
    live: bool,
    path: Vec<u8>,
}

#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct DirStats {
    /// Directories announced to the kernel (one map update each).
    pub taught: u64,
    /// Paths rebuilt from a slot.
    pub joined: u64,
    /// References to a slot given to another directory since: reported empty, flagged.
    pub stale: u64,
    /// Teachings not kept: the cache was full of directories still valid.
    pub full: u64,
    /// Directories kept now.
    pub kept: u64,
}

pub struct DirRefs {
    /// `rdirs`, written only here.
    map_fd: i32,
    /// The caches' generation, in the object's mmapped .data: directories
    /// taught before it moved can be given up.
    gen: Option<*const AtomicU64>,
    by_key: HashMap<Key, u32>,
    slots: Vec<Slot>,
    /// Oldest first: a slot freed long ago is the least likely to be referred to.
    free: VecDeque<u32>,
    bytes: usize,
    max_dirs: usize,
    pub stats: DirStats,
}

// The raw pointer is into the skeleton's .data mapping, read only.
unsafe impl Send for DirRefs {}

impl DirRefs {
    /// # Safety
    /// `gen`, if any, points at the kernel's generation counter in a mapping
    /// that outlives this cache.
    pub unsafe fn new(map_fd: i32, gen: Option<*const AtomicU64>, max_dirs: usize) -> DirRefs {
        DirRefs {
            map_fd,
            gen,
            by_key: HashMap::new(),
            slots: Vec::new(),
            free: VecDeque::new(),
            bytes: 0,
            max_dirs,
            stats: DirStats::default(),
        }
    }

    /// Appends the path of a path word and body (u16 length + bytes): a
    /// plain one as it is, a marked one resolved; false: it refers to a slot
    /// given away since (nothing appended).
    pub fn put(&mut self, word: u16, body: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        if word & !PATH_LEN == 0 {
            out.extend_from_slice(&word.to_le_bytes());
            out.extend_from_slice(body);
            return Ok(true);
        }
        if word & PATH_DREF != 0 {
            if body.len() < DREF {
                bail!("directory reference of {} bytes is shorter than {DREF}", body.len());
            }
            let slot = u32::from_le_bytes(body[..4].try_into().unwrap()) as usize;
            let ver = u32::from_le_bytes(body[4..8].try_into().unwrap());
            let leaf = &body[DREF..];
            return Ok(match self.slots.get(slot) {
                Some(s) if s.ver == ver => {
                    let n = (s.path.len() + leaf.len()).min(PATH_MAX);
                    out.extend_from_slice(&(n as u16).to_le_bytes());
                    out.extend_from_slice(&s.path);
                    out.extend_from_slice(leaf);
                    out.truncate(out.len() - (s.path.len() + leaf.len() - n));
                    self.stats.joined += 1;
                    true
                }
                _ => {
                    self.stats.stale += 1;
                    false
                }
            });
        }
        if word & PATH_TEACH == 0 || body.len() < TEACH {
            bail!("path marked {:#x} of {} bytes is malformed", word & !PATH_LEN, body.len());
        }
        let (hdr, path) = body.split_at(TEACH);
        let dir_len = u32::from_le_bytes(hdr[56..60].try_into().unwrap()) as usize;
        if dir_len > path.len() {
            bail!("taught directory of {dir_len} bytes is longer than its path ({})", path.len());
        }
        out.extend_from_slice(&(path.len() as u16).to_le_bytes());
        out.extend_from_slice(path);
        self.learn(hdr, &path[..dir_len]);
        Ok(true)
    }

    /// Keeps directory `hdr.key`'s path `dir` as valid in `hdr`'s state and
    /// announces it, unless it is already known in that state or a newer one.
    fn learn(&mut self, hdr: &[u8], dir: &[u8]) {
        let key: Key = hdr[..RKEY].try_into().unwrap();
        let gen = u64::from_le_bytes(hdr[40..48].try_into().unwrap());
        let ns_event = u64::from_le_bytes(hdr[48..56].try_into().unwrap());
        let watched = u32::from_le_bytes(hdr[60..64].try_into().unwrap());
        if let Some(&s) = self.by_key.get(&key) {
            let old = &self.slots[s as usize];
            // Events taught with the state the kernel now announces, or an
            // older one, were in flight before the announcement.
            if (gen, ns_event) <= (old.gen, old.ns_event) {
                return;
            }
            self.release(s);
        }
        let s = match self.alloc(dir.len()) {
            Some(s) => s,
            None => {
                self.collect();
                match self.alloc(dir.len()) {
                    Some(s) => s,
                    None => {
                        // The kernel must not keep referring to a released slot.
                        unsafe { libbpf_sys::bpf_map_delete_elem(self.map_fd, key.as_ptr().cast()) };
                        self.stats.full += 1;
                        return;
                    }
                }
            }
        };
        let slot = &mut self.slots[s as usize];
        slot.key = key;
        slot.ver = slot.ver.wrapping_add(1);
        slot.gen = gen;
        slot.ns_event = ns_event;
        slot.live = true;
        slot.path.clear();
        slot.path.extend_from_slice(dir);
        self.bytes += dir.len();
        let mut val = [0u8; RVAL];
        val[..8].copy_from_slice(&gen.to_ne_bytes());
        val[8..16].copy_from_slice(&ns_event.to_ne_bytes());
        val[16..20].copy_from_slice(&s.to_ne_bytes());
        val[20..24].copy_from_slice(&slot.ver.to_ne_bytes());
        val[24..28].copy_from_slice(&watched.to_ne_bytes());
        // The slot is filled before the kernel can refer to it.
        let rc = unsafe {
            libbpf_sys::bpf_map_update_elem(self.map_fd, key.as_ptr().cast(), val.as_ptr().cast(), 0)
        };
        if rc != 0 {
            self.release(s);
            self.stats.full += 1;
            return;
        }
        self.by_key.insert(key, s);
        self.stats.taught += 1;
    }

    /// A slot for a path of n bytes: a new one while there is room (a freed
    /// slot keeps its path readable for late references as long as possible),
    /// else the slot freed first.
    fn alloc(&mut self, n: usize) -> Option<u32> {
        if self.bytes + n > MAX_BYTES {
            return None;
        }
        if self.slots.len() < self.max_dirs {
            self.slots.push(Slot {
                key: [0; RKEY],
                ver: 0,
                gen: 0,
                ns_event: 0,
                live: false,
                path: Vec::new(),
            });
            return Some((self.slots.len() - 1) as u32);
        }
        self.free.pop_front()
    }

    /// Frees slot s for another directory (its path stays readable until then).
    fn release(&mut self, s: u32) {
        let slot = &mut self.slots[s as usize];
        if slot.live {
            slot.live = false;
            self.bytes -= slot.path.len();
            if self.by_key.get(&slot.key) == Some(&s) {
                self.by_key.remove(&slot.key);
            }
            self.free.push_back(s);
        }
    }

    /// Gives up the directories taught before the generation last moved: the
    /// kernel will not refer to them again (a rename or rmdir since).
    fn collect(&mut self) {
        // SAFETY: see new(); the kernel only adds to the counter.
        let Some(now) = self.gen.map(|g| unsafe { (*g).load(Ordering::Relaxed) }) else { return };
        for s in 0..self.slots.len() as u32 {
            let slot = &self.slots[s as usize];
            if slot.live && slot.gen < now {
                unsafe { libbpf_sys::bpf_map_delete_elem(self.map_fd, slot.key.as_ptr().cast()) };
                self.release(s);
            }
        }
    }

    pub fn stats(&self) -> DirStats {
        DirStats { kept: self.by_key.len() as u64, ..self.stats }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{rewrite_paths, FsEvent, FIXED_END, F_UNRESOLVED};
    use harrier_capture::testing::bpf_available;

    /// A BPF hash map shaped like `rdirs` (root: CAP_BPF).
    fn map(max: u32) -> i32 {
        let name = std::ffi::CString::new("fw_test_rdirs").unwrap();
        let opts = libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
            map_flags: libbpf_sys::BPF_F_NO_PREALLOC,
            ..Default::default()
        };
        let fd = unsafe {
            libbpf_sys::bpf_map_create(
                libbpf_sys::BPF_MAP_TYPE_HASH,
                name.as_ptr(),
                RKEY as u32,
                RVAL as u32,
                max,
                &opts,
            )
        };
        assert!(fd >= 0, "creating a test map: {}", std::io::Error::last_os_error());
        fd
    }

    fn teach(rec: &mut Vec<u8>, ino: u64, gen: u64, path: &[u8], dir_len: usize) {
        let mut hdr = [0u8; TEACH];
        hdr[8..16].copy_from_slice(&ino.to_le_bytes());
        hdr[40..48].copy_from_slice(&gen.to_le_bytes());
        hdr[56..60].copy_from_slice(&(dir_len as u32).to_le_bytes());
        rec.extend_from_slice(&(PATH_TEACH | (TEACH + path.len()) as u16).to_le_bytes());
        rec.extend_from_slice(&hdr);
        rec.extend_from_slice(path);
    }

    fn dref(rec: &mut Vec<u8>, slot: u32, ver: u32, leaf: &[u8]) {
        rec.extend_from_slice(&(PATH_DREF | (DREF + leaf.len()) as u16).to_le_bytes());
        rec.extend_from_slice(&slot.to_le_bytes());
        rec.extend_from_slice(&ver.to_le_bytes());
        rec.extend_from_slice(leaf);
    }

    fn resolve(d: &mut DirRefs, rec: &[u8]) -> (Vec<u8>, u64) {
        let mut out = Vec::new();
        let lost = rewrite_paths(rec, &mut out, |w, b, o| d.put(w, b, o)).unwrap();
        (out, lost)
    }

    #[test]
    fn taught_directories_are_referred_to_and_given_up_slots_are_never_misread() {
        if !bpf_available() {
            return;
        }
        let fd = map(2);
        let gen = AtomicU64::new(5);
        let mut d = unsafe { DirRefs::new(fd, Some(&gen as *const AtomicU64), 2) };
        let mut rec = vec![0u8; FIXED_END];
        teach(&mut rec, 10, 5, b"/w/a/f", 4);
        let (out, lost) = resolve(&mut d, &rec);
        assert_eq!((FsEvent::parse(&out).unwrap().path, lost), (&b"/w/a/f"[..], 0));
        assert_eq!((d.stats().kept as usize, d.stats.taught), (1, 1));
        // Taught again in the same state (in flight meanwhile): kept as it is.
        resolve(&mut d, &rec);
        assert_eq!(d.stats.taught, 1);

        let mut rec = vec![0u8; FIXED_END];
        dref(&mut rec, 0, 1, b"/g");
        dref(&mut rec, 0, 2, b"/h"); // a version the slot never had
        let (out, lost) = resolve(&mut d, &rec);
        let e = FsEvent::parse(&out).unwrap();
        assert_eq!((e.path, e.source, lost), (&b"/w/a/g"[..], Some(&b""[..]), 1));
        assert_eq!(e.flags, F_UNRESOLVED << 16);

        // The directory renamed (a newer generation): another slot, the old one
        // still readable until it is given away.
        gen.store(6, Ordering::Relaxed);
        let mut rec = vec![0u8; FIXED_END];
        teach(&mut rec, 10, 6, b"/w/b/f", 4);
        resolve(&mut d, &rec);
        assert_eq!((d.stats().kept as usize, d.stats.taught), (1, 2));
        let mut old = vec![0u8; FIXED_END];
        dref(&mut old, 0, 1, b"/g");
        assert_eq!(FsEvent::parse(&resolve(&mut d, &old).0).unwrap().path, b"/w/a/g");
        // Two more directories: slot 0 is given to one of them, and the old
        // reference no longer resolves.
        for ino in [11, 12] {
            let mut rec = vec![0u8; FIXED_END];
            teach(&mut rec, ino, 6, b"/x/y", 2);
            resolve(&mut d, &rec);
        }
        let (out, lost) = resolve(&mut d, &old);
        assert_eq!((FsEvent::parse(&out).unwrap().path, lost), (&b""[..], 1));
        assert_eq!(
            (d.stats().kept as usize, d.stats.full),
            (2, 1),
            "two slots: the third directory was not kept"
        );
        unsafe { libc::close(fd) };
    }
}
