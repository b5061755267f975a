//! fragments resolution: the event names its leaf's directory by key
//! (dev, mount id, inode) and carries "/" + the leaf's name; the kernel's
//! `fragments` map holds each directory's (parent key, name, changed).
//! Joining reads the map: a directory missing (evicted from the LRU) or
//! changed after the event (renamed since: the name it had then is gone)
//! leaves the path flagged unresolved, never silently wrong.
//!
//! The reader keeps the entries it looked up, so a warm join makes no
//! syscall. The kernel adds one to a counter (`fw_frag_writes`, in its
//! mmapped .bss) after every insert or rewrite of an entry, before it
//! publishes the event that needs it; before resolving each event the
//! reader compares the counter with the value its cache was filled at and
//! empties the cache when it moved. An entry cached is therefore never older
//! than the last write before the event (LRU evictions happen only on
//! inserts, so they move it too), and the `changed` > event time check sees
//! renames since, as without the cache.

use crate::wire::{rewrite_paths, FIXED_END, PATH_LEN, PATH_MAX};
use anyhow::{bail, Result};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// `struct fw_frag`: parent key 16, changed 8, len 4, pad 4, name 256.
const FRAG_VALUE: usize = 16 + 8 + 8 + 256;
pub const FKEY: usize = 16;
/// Directories climbed at most (the kernel's walk stops at 2048 steps).
const MAX_CHAIN: usize = 2048;

/// What joining records' paths found and cost.
#[derive(Default, Debug, Clone, Copy)]
pub struct JoinStats {
    /// A directory was not in the map (evicted).
    pub missing: u64,
    /// A directory changed after the event.
    pub stale: u64,
    /// Map lookups (syscalls): entries not in the reader's cache.
    pub lookups: u64,
    /// Times the cache was emptied because the kernel wrote an entry.
    pub flushes: u64,
}

/// A fragment as cached: its parent's key, when it changed, and its name
/// (`len` bytes at `at` of FragMap::names).
#[derive(Clone, Copy)]
struct Cached {
    parent: [u8; FKEY],
    changed: u64,
    at: u32,
    len: u8,
}

/// Keys are the kernel's (dev, mount id, inode): a multiply-rotate hash,
/// not SipHash (nothing here is chosen by an attacker who sees the table).
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(26) ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

pub struct FragMap {
    fd: i32,
    /// The kernel's write counter (fw_frag_writes), or None: no cache.
    writes: Option<*const AtomicU64>,
    /// The counter's value the cache holds entries for.
    seen: u64,
    cache: HashMap<[u8; FKEY], Cached, BuildHasherDefault<KeyHasher>>,
    /// Cached entries' names; emptied with the cache (which bounds it: the
    /// map's entries at one count).
    names: Vec<u8>,
    /// (at, len) of the names found climbing, reused: a join allocates
    /// nothing once warm.
    chain: Vec<(u32, u8)>,
}

// The counter is only read, atomically; the watcher that owns this keeps
// the mapping alive.
unsafe impl Send for FragMap {}

impl FragMap {
    /// `fd`: the fragments map; `writes`: the kernel's write counter
    /// (None: every join looks every directory up).
    ///
    /// # Safety
    /// `writes` must point at an 8-byte aligned u64 that stays mapped as
    /// long as this FragMap (the skeleton's .bss) and that only atomic
    /// operations write.
    pub unsafe fn new(fd: i32, writes: Option<*const AtomicU64>) -> FragMap {
        FragMap { fd, writes, seen: 0, cache: HashMap::default(), names: Vec::new(), chain: Vec::new() }
    }

    fn lookup(&self, key: &[u8; FKEY], v: &mut [u8; FRAG_VALUE]) -> bool {
        // SAFETY: key and value buffers are the map's key and value sizes.
        unsafe { libbpf_sys::bpf_map_lookup_elem(self.fd, key.as_ptr().cast(), v.as_mut_ptr().cast()) == 0 }
    }

    /// Empties the cache if the kernel wrote an entry since it was filled.
    /// Called before each event is resolved (after it was read from its ring:
    /// the ring's acquire orders this load after the kernel's writes for it).
    fn validate(&mut self, st: &mut JoinStats) {
        let Some(w) = self.writes else {
            self.cache.clear();
            self.names.clear();
            return;
        };
        // SAFETY: see new().
        let now = unsafe { (*w).load(Ordering::Acquire) };
        if now != self.seen {
            // clear() keeps the capacity: refilling allocates nothing.
            self.cache.clear();
            self.names.clear();
            self.seen = now;
            st.flushes += 1;
        }
    }

    /// Directory `key`'s entry, from the cache or the map (then cached).
    fn entry(&mut self, key: &[u8; FKEY], st: &mut JoinStats) -> Option<Cached> {
        if let Some(e) = self.cache.get(key) {
            return Some(*e);
        }
        let mut v = [0u8; FRAG_VALUE];
        st.lookups += 1;
        if !self.lookup(key, &mut v) {
            return None;
        }
        let len = (u32::from_le_bytes(v[24..28].try_into().unwrap()) as usize).min(255);
        let e = Cached {
            parent: v[..FKEY].try_into().unwrap(),
            changed: u64::from_le_bytes(v[16..24].try_into().unwrap()),
            at: self.names.len() as u32,
            len: len as u8,
        };
        self.names.extend_from_slice(&v[32..32 + len]);
        self.cache.insert(*key, e);
        Some(e)
    }

    /// Appends path bytes for directory `key` + `tail` to `out`: true if
    /// every fragment was there and unchanged since `ts`.
    fn join(&mut self, key: [u8; FKEY], tail: &[u8], ts: u64, out: &mut Vec<u8>, st: &mut JoinStats) -> bool {
        self.chain.clear();
        let mut k = key;
        for _ in 0..MAX_CHAIN {
            if k == [0u8; FKEY] {
                break;
            }
            let Some(e) = self.entry(&k, st) else {
                st.missing += 1;
                return false;
            };
            if e.changed > ts {
                st.stale += 1;
                return false;
            }
            if e.len > 0 {
                self.chain.push((e.at, e.len));
            }
            k = e.parent;
        }
        for &(at, len) in self.chain.iter().rev() {
            out.push(b'/');
            out.extend_from_slice(&self.names[at as usize..at as usize + len as usize]);
        }
        out.extend_from_slice(tail);
        if self.chain.is_empty() && tail.is_empty() {
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
        self.validate(st);
        let ts = u64::from_le_bytes(rec[..8].try_into().unwrap());
        rewrite_paths(rec, out, |word, body, out| {
            if word & !PATH_LEN != 0 || body.len() < FKEY {
                bail!("path reference of {} bytes (mark {:#x}) is malformed", body.len(), word & !PATH_LEN);
            }
            let key: [u8; FKEY] = body[..FKEY].try_into().unwrap();
            let len_at = out.len();
            out.extend_from_slice(&[0, 0]);
            if !self.join(key, &body[FKEY..], ts, out, st) {
                return Ok(false);
            }
            let plen = (out.len() - len_at - 2).min(PATH_MAX);
            out.truncate(len_at + 2 + plen);
            out[len_at..len_at + 2].copy_from_slice(&(plen as u16).to_le_bytes());
            Ok(true)
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::F_UNRESOLVED;
    use harrier_capture::testing::bpf_available;

    /// A BPF hash map shaped like `fragments` (root: CAP_BPF).
    struct Map(i32);

    impl Map {
        fn new() -> Map {
            let name = std::ffi::CString::new("fw_test_frags").unwrap();
            let fd = unsafe {
                libbpf_sys::bpf_map_create(
                    libbpf_sys::BPF_MAP_TYPE_HASH,
                    name.as_ptr(),
                    FKEY as u32,
                    FRAG_VALUE as u32,
                    64,
                    std::ptr::null(),
                )
            };
            assert!(fd >= 0, "creating a hash map: {}", std::io::Error::last_os_error());
            Map(fd)
        }

        fn put(&self, key: u64, parent: u64, name: &str, changed: u64) {
            let mut v = [0u8; FRAG_VALUE];
            v[..FKEY].copy_from_slice(&fkey(parent));
            v[16..24].copy_from_slice(&changed.to_le_bytes());
            v[24..28].copy_from_slice(&(name.len() as u32).to_le_bytes());
            v[32..32 + name.len()].copy_from_slice(name.as_bytes());
            let k = fkey(key);
            let rc =
                unsafe { libbpf_sys::bpf_map_update_elem(self.0, k.as_ptr().cast(), v.as_ptr().cast(), 0) };
            assert_eq!(rc, 0, "updating the map");
        }
    }

    impl Drop for Map {
        fn drop(&mut self) {
            unsafe { libc::close(self.0) };
        }
    }

    /// Key of directory `ino` (0: none); dev 1, mount 2.
    fn fkey(ino: u64) -> [u8; FKEY] {
        let mut k = [0u8; FKEY];
        if ino != 0 {
            k[..4].copy_from_slice(&1u32.to_le_bytes());
            k[4..8].copy_from_slice(&2u32.to_le_bytes());
            k[8..].copy_from_slice(&ino.to_le_bytes());
        }
        k
    }

    /// An open event at `ts` in directory `dir`, leaf "/f".
    fn event(ts: u64, dir: u64) -> Vec<u8> {
        let mut rec = vec![0u8; FIXED_END];
        rec[..8].copy_from_slice(&ts.to_le_bytes());
        rec.extend_from_slice(&((FKEY + 2) as u16).to_le_bytes());
        rec.extend_from_slice(&fkey(dir));
        rec.extend_from_slice(b"/f");
        rec
    }

    fn path(fm: &mut FragMap, rec: &[u8], st: &mut JoinStats) -> (String, u32) {
        let mut out = Vec::new();
        fm.resolve(rec, &mut out, st).unwrap();
        let e = crate::FsEvent::parse(&out).unwrap();
        (String::from_utf8_lossy(e.path).into_owned(), e.flags)
    }

    #[test]
    fn warm_joins_make_no_lookup_and_a_write_empties_the_cache() {
        if !bpf_available() {
            return;
        }
        let m = Map::new();
        // / (1) ← a (2) ← b (3)
        m.put(1, 0, "", 10);
        m.put(2, 1, "a", 10);
        m.put(3, 2, "b", 10);
        let writes = AtomicU64::new(3);
        let mut fm = unsafe { FragMap::new(m.0, Some(&writes as *const AtomicU64)) };
        let mut st = JoinStats::default();
        assert_eq!(path(&mut fm, &event(100, 3), &mut st), ("/a/b/f".into(), 0));
        assert_eq!(st.lookups, 3, "cold: one lookup per directory: {st:?}");
        assert_eq!(path(&mut fm, &event(101, 3), &mut st), ("/a/b/f".into(), 0));
        assert_eq!(st.lookups, 3, "warm: no lookup: {st:?}");

        // b renamed c by the kernel (a rewrite, then the count): the cache
        // must not answer with b.
        m.put(3, 2, "c", 150);
        writes.fetch_add(1, Ordering::Release);
        assert_eq!(path(&mut fm, &event(200, 3), &mut st), ("/a/c/f".into(), 0));
        assert_eq!((st.flushes, st.lookups), (2, 6), "emptied and refilled: {st:?}");
        // An event from before the rename, read now: flagged, not renamed.
        let (p, flags) = path(&mut fm, &event(120, 3), &mut st);
        assert_eq!((p.as_str(), flags & F_UNRESOLVED, st.stale), ("", F_UNRESOLVED, 1), "{st:?}");

        // A directory gone from the map (evicted: an insert moved the count).
        let mut missing = unsafe { FragMap::new(m.0, Some(&writes as *const AtomicU64)) };
        let mut st = JoinStats::default();
        let (p, flags) = path(&mut missing, &event(300, 9), &mut st);
        assert_eq!((p.as_str(), flags & F_UNRESOLVED, st.missing), ("", F_UNRESOLVED, 1), "{st:?}");

        // Without a counter there is no cache: every join looks up.
        let mut nocache = unsafe { FragMap::new(m.0, None) };
        let mut st = JoinStats::default();
        path(&mut nocache, &event(300, 3), &mut st);
        path(&mut nocache, &event(301, 3), &mut st);
        assert_eq!(st.lookups, 6, "{st:?}");
    }
}
