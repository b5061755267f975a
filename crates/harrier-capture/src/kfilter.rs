//! Kernel-side filtering (bpf/include/kfilter.h): which events the handlers
//! do not send. Built by a consumer that knows what it can use (`harrier run`
//! from its rules and state needs), written into the BPF maps before attach.

use anyhow::{bail, Context, Result};
use harrier_schema::wire::PARAMS_BASE;
use harrier_schema::{syscall_by_nr, Wire};
use libbpf_rs::{MapCore, MapFlags};

/// Clauses per syscall the BPF side evaluates (`HR_KF_CLAUSES`).
pub const MAX_CLAUSES: usize = 4;
/// Longest prefix or exact path an entry may have (`HR_KF_PATH`).
pub const MAX_PATH: usize = 124;

/// One way an event can be worth sending: all of its conditions hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Clause {
    /// The call succeeded (ret >= 0).
    pub need_success: bool,
    /// The `flags` parameter has one of these bits (0: any flags).
    pub flags_any: u32,
    /// The kernel-resolved path (`fullpath`) matches one of these; None: any
    /// path. A failed call has no resolved path and passes this test.
    pub paths: Option<Vec<PathMatch>>,
    /// The path as the caller passed it (the entry copy) has "..": a
    /// traversal. Unknown (read at exit, or long) counts as having it.
    pub raw_dotdot: bool,
    /// A u32 parameter equals this value (socket's `domain` is AF_PACKET).
    pub arg_eq: Option<(&'static str, u32)>,
    /// connect: the socket's protocol (IPPROTO_TCP...; 0: any).
    pub l4: u8,
    /// connect: the peer is an address of a name rules compare fd.sip with
    /// ([`NamedPeers`]).
    pub peer_named: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathMatch {
    Prefix(Vec<u8>),
    Exact(Vec<u8>),
}

impl PathMatch {
    fn bytes(&self) -> &[u8] {
        match self {
            PathMatch::Prefix(b) | PathMatch::Exact(b) => b,
        }
    }
}

/// Per syscall: send an event when any clause holds (no clauses: always),
/// unless its process name is dropped.
#[derive(Debug, Clone, Default)]
pub struct SyscallFilter {
    pub nr: u32,
    pub clauses: Vec<Clause>,
    /// Process names (comm, at most 15 bytes) whose events of this syscall are dropped.
    pub drop_comms: Vec<Vec<u8>>,
    /// close only: a close of an fd the consumer was never told of (its
    /// open kept back, bpf/include/untold.h) is dropped too. The consumer
    /// must say which processes it follows ([`crate::UntoldFds`]).
    pub untold: bool,
}

#[derive(Debug, Clone, Default)]
pub struct KernelFilter {
    pub syscalls: Vec<SyscallFilter>,
}

impl KernelFilter {
    pub fn is_empty(&self) -> bool {
        self.syscalls.iter().all(|s| s.clauses.is_empty() && s.drop_comms.is_empty() && !s.untold)
    }
}

/// Record offset of syscall nr's u32 `flags` parameter (the low half of a
/// u64 one), if it has one.
pub fn flags_offset(nr: u32) -> Option<u32> {
    param_offset(nr, "flags")
}

/// Record offset of syscall nr's integer parameter `name` (a u64's low
/// half), if it has one: fixed parameters are laid out in table order.
pub fn param_offset(nr: u32, name: &str) -> Option<u32> {
    let mut off = PARAMS_BASE;
    for p in syscall_by_nr(nr)?.params? {
        let size = p.wire.fixed_size()?;
        if p.name == name && matches!(p.wire, Wire::U32 | Wire::I32 | Wire::U64) {
            return Some(off as u32);
        }
        off += size;
    }
    None
}

/// A handle on the kernel filter's `kf_peers`: the addresses of the names
/// rules compare a server's address with (`fd.sip.name = x`), which connect's
/// `peer_named` clauses test. User space rewrites them after each lookup.
pub struct NamedPeers {
    map: libbpf_rs::MapHandle,
    /// `kf_peers_n`: how many `map` holds (0: the kernel looks nothing up).
    count: libbpf_rs::MapHandle,
}

impl NamedPeers {
    pub(crate) fn new(map: &libbpf_rs::Map, count: &libbpf_rs::Map) -> Result<NamedPeers> {
        Ok(NamedPeers {
            map: libbpf_rs::MapHandle::try_from(map)?,
            count: libbpf_rs::MapHandle::try_from(count)?,
        })
    }

    fn set_count(&self, n: usize) -> Result<()> {
        self.count.update(&0u32.to_ne_bytes(), &(n as u32).to_ne_bytes(), MapFlags::ANY).context("kf_peers_n")
    }

    /// The key of an address: IPv6, or IPv4 mapped (::ffff:a.b.c.d).
    fn key(ip: std::net::IpAddr) -> [u8; 16] {
        match ip.to_canonical() {
            std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
            std::net::IpAddr::V6(v6) => v6.octets(),
        }
    }

    /// Makes the map hold exactly `addrs`: the new ones go in (and the
    /// count says there are some) before the old ones go, so an address in
    /// both is never missing.
    pub fn set(&self, addrs: &[std::net::IpAddr]) -> Result<()> {
        let keep: Vec<[u8; 16]> = addrs.iter().map(|&a| Self::key(a)).collect();
        for k in &keep {
            self.map.update(k, &[1], MapFlags::ANY).context("writing kf_peers")?;
        }
        self.set_count(keep.len())?;
        let old: Vec<Vec<u8>> = self.map.keys().filter(|k| !keep.iter().any(|n| n[..] == k[..])).collect();
        for k in old {
            let _ = self.map.delete(&k);
        }
        Ok(())
    }

    /// The addresses held (tests).
    pub fn get(&self) -> Vec<std::net::IpAddr> {
        let v6 = |k: Vec<u8>| std::net::Ipv6Addr::from(<[u8; 16]>::try_from(&k[..]).unwrap_or_default());
        self.map.keys().map(|k| std::net::IpAddr::V6(v6(k)).to_canonical()).collect()
    }
}

/// Which syscall argument (0-5) syscall nr's parameter `name` is, if it is one.
fn param_arg(nr: u32, name: &str) -> Option<u8> {
    syscall_by_nr(nr)?.params?.iter().find(|p| p.name == name)?.arg
}

/// Whether syscall nr's handler gives the filter a kernel-resolved path.
pub fn has_resolved_path(nr: u32) -> bool {
    syscall_by_nr(nr).and_then(|s| s.params).is_some_and(|ps| ps.iter().any(|p| p.name == "fullpath"))
}

// Layouts of kfilter.h.
const CLAUSE_SIZE: usize = 16;
const KF_SIZE: usize = 8 + MAX_CLAUSES * CLAUSE_SIZE;
const PATH_KEY_SIZE: usize = 4 + 2 + 1 + MAX_PATH + 1;
const COMM_KEY_SIZE: usize = 4 + 16;

fn kf_value(f: &SyscallFilter) -> Result<[u8; KF_SIZE]> {
    let mut v = [0u8; KF_SIZE];
    if f.clauses.len() > MAX_CLAUSES {
        bail!("syscall {}: {} kernel filter clauses, at most {MAX_CLAUSES}", f.nr, f.clauses.len());
    }
    v[0] = !f.clauses.is_empty() as u8;
    v[1] = !f.drop_comms.is_empty() as u8;
    v[2] = (!f.clauses.is_empty() && f.clauses.iter().all(|c| c.need_success)) as u8;
    if f.untold && syscall_by_nr(f.nr).map(|s| s.name) != Some("close") {
        bail!("syscall {}: only close can drop what was never told", f.nr);
    }
    v[3] = f.untold as u8;
    // Judged before the handler writes anything (kfilter.h, socket only).
    let args_only = |c: &Clause| c.flags_any == 0 && c.paths.is_none() && !c.raw_dotdot;
    v[4] = (syscall_by_nr(f.nr).map(|s| s.name) == Some("socket")
        && !f.clauses.is_empty()
        && f.clauses.iter().all(args_only)) as u8;
    for (i, c) in f.clauses.iter().enumerate() {
        let at = 8 + i * CLAUSE_SIZE;
        v[at] = 1;
        v[at + 1] = c.need_success as u8;
        if c.paths.is_some() {
            if !has_resolved_path(f.nr) {
                bail!("syscall {}: a path clause, but its event has no resolved path", f.nr);
            }
            v[at + 2] = 1;
        }
        v[at + 3] = c.raw_dotdot as u8;
        if (c.l4 != 0 || c.peer_named) && syscall_by_nr(f.nr).map(|s| s.name) != Some("connect") {
            bail!("syscall {}: only connect's clauses test its socket", f.nr);
        }
        v[at + 6] = c.l4;
        v[at + 7] = c.peer_named as u8;
        let (off, value) = match (c.flags_any, c.arg_eq) {
            (0, None) => continue,
            (0, Some((name, value))) => {
                v[at + 4] = 1;
                v[at + 5] = param_arg(f.nr, name)
                    .with_context(|| format!("syscall {}: {name} is no syscall argument", f.nr))?;
                let off = param_offset(f.nr, name)
                    .with_context(|| format!("syscall {} has no integer parameter {name}", f.nr))?;
                (off, value)
            }
            (flags, None) => (
                flags_offset(f.nr).with_context(|| format!("syscall {} has no flags parameter", f.nr))?,
                flags,
            ),
            _ => bail!("syscall {}: a clause tests both flags and an argument's value", f.nr),
        };
        v[at + 8..at + 12].copy_from_slice(&off.to_ne_bytes());
        v[at + 12..at + 16].copy_from_slice(&value.to_ne_bytes());
    }
    Ok(v)
}

fn path_key(nr: u32, clause: usize, m: &PathMatch) -> Result<[u8; PATH_KEY_SIZE]> {
    let b = m.bytes();
    if b.len() > MAX_PATH {
        bail!("kernel filter path longer than {MAX_PATH} bytes: {}", String::from_utf8_lossy(b));
    }
    let n = b.len() + matches!(m, PathMatch::Exact(_)) as usize;
    let mut k = [0u8; PATH_KEY_SIZE];
    k[0..4].copy_from_slice(&(8 * (3 + n) as u32).to_ne_bytes());
    k[4..6].copy_from_slice(&(nr as u16).to_ne_bytes());
    k[6] = clause as u8;
    k[7..7 + b.len()].copy_from_slice(b);
    Ok(k)
}

/// Words of the lead bitmap (`HR_KF_LEAD_WORDS`): one bit per (byte 1, byte 2).
const LEAD_WORDS: usize = 1024;

/// The leads (a path's bytes 1 and 2, 0 past its end) some entry can match,
/// as bits: the BPF side looks a path up in the trie only if its lead's bit
/// is set. A prefix of 3 bytes or more fixes its lead; a shorter one
/// matches every lead it begins (all of them for "/" or ""); an exact name
/// is its own lead, NUL included.
fn leads(f: &KernelFilter) -> Vec<u64> {
    let mut w = vec![0u64; LEAD_WORDS];
    let mut set = |lead: usize| w[lead >> 6] |= 1 << (lead & 63);
    let paths = f.syscalls.iter().flat_map(|s| &s.clauses).flat_map(|c| c.paths.iter().flatten());
    for m in paths {
        let b = m.bytes();
        let at = |i: usize| b.get(i).copied().unwrap_or(0) as usize;
        match m {
            PathMatch::Prefix(_) if b.len() < 2 => (0..1 << 16).for_each(&mut set),
            PathMatch::Prefix(_) if b.len() == 2 => (0..256).for_each(|lo| set(at(1) << 8 | lo)),
            _ => set(at(1) << 8 | at(2)),
        }
    }
    w
}

/// Bytes of `struct hr_kf_dir_key` (kfdirs.h): the prefix length, the path.
const DIR_KEY_SIZE: usize = 4 + MAX_PATH + 4;

/// kf_dirs (bpf/include/kfdirs.h): every entry's bytes (an exact name as a
/// prefix), and every prefix of one that ends in '/', each with its length
/// and whether some entry is a prefix of it. A directory below which the
/// trie finds no entry cannot hold a path any entry matches.
fn dir_trie(f: &KernelFilter) -> std::collections::BTreeMap<Vec<u8>, bool> {
    let paths = f.syscalls.iter().flat_map(|s| &s.clauses).flat_map(|c| c.paths.iter().flatten());
    let entries: std::collections::BTreeSet<&[u8]> = paths.map(|m| m.bytes()).collect();
    let covered = |p: &[u8]| entries.iter().any(|e| p.starts_with(e));
    let mut nodes = std::collections::BTreeMap::new();
    for e in &entries {
        nodes.insert(e.to_vec(), true);
        for (i, _) in e.iter().enumerate().filter(|(_, &b)| b == b'/') {
            let p = &e[..=i];
            nodes.entry(p.to_vec()).or_insert_with(|| covered(p));
        }
    }
    nodes
}

fn dir_key(path: &[u8]) -> [u8; DIR_KEY_SIZE] {
    let mut k = [0u8; DIR_KEY_SIZE];
    k[0..4].copy_from_slice(&(8 * path.len() as u32).to_ne_bytes());
    k[4..4 + path.len()].copy_from_slice(path);
    k
}

/// The filter generations written (kfdirs.h's kf_gen), process-wide so a
/// verdict cached for one is never taken for a later one.
static LAST_GEN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Sets kf_gen: 0 turns the directory verdicts off (while the maps change).
fn set_gen(skel: &mut crate::session::CaptureSkel, gen: u32) {
    if let Some(bss) = skel.maps.bss_data.as_deref_mut() {
        unsafe { std::ptr::write_volatile(&mut bss.kf_gen, gen) };
    }
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

fn next_gen() -> u32 {
    let g = LAST_GEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed).wrapping_add(1);
    if g == 0 {
        next_gen()
    } else {
        g
    }
}

/// Writes kf_dirs; false if the trie has no room for them all (the verdicts
/// then stay off: every open is walked whole and looked up, as without them).
fn write_dirs(skel: &crate::session::CaptureSkel, f: &KernelFilter) -> Result<bool> {
    let nodes = dir_trie(f);
    if nodes.len() > skel.maps.kf_dirs.info()?.info.max_entries as usize {
        return Ok(false);
    }
    for (path, covered) in &nodes {
        let mut v = [0u8; 4];
        v[0..2].copy_from_slice(&(path.len() as u16).to_ne_bytes());
        v[2] = *covered as u8;
        skel.maps.kf_dirs.update(&dir_key(path), &v, MapFlags::ANY).context("writing kf_dirs")?;
    }
    Ok(true)
}

fn write_leads(skel: &crate::session::CaptureSkel, words: &[u64]) -> Result<()> {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
    skel.maps.kf_leads.update(&0u32.to_ne_bytes(), &bytes, MapFlags::ANY).context("writing kf_leads")
}

/// Writes the filter into the loaded object's maps: the leads, then a
/// syscall's paths and names before its entry, so a live update never keeps
/// back an event that both the old and the new filter would send; the
/// directory verdicts (kfdirs.h) turn on last, with a new generation.
pub(crate) fn install(skel: &mut crate::session::CaptureSkel, f: &KernelFilter) -> Result<()> {
    set_gen(skel, 0);
    let dirs = write_dirs(skel, f)?;
    write_leads(skel, &leads(f))?;
    for s in &f.syscalls {
        for (i, c) in s.clauses.iter().enumerate() {
            for m in c.paths.iter().flatten() {
                skel.maps.kf_paths.update(&path_key(s.nr, i, m)?, &[1], MapFlags::ANY)?;
            }
        }
        for comm in &s.drop_comms {
            let mut k = [0u8; COMM_KEY_SIZE];
            k[0..4].copy_from_slice(&s.nr.to_ne_bytes());
            let n = comm.len().min(15);
            k[4..4 + n].copy_from_slice(&comm[..n]);
            skel.maps.kf_comms.update(&k, &[1], MapFlags::ANY)?;
        }
        skel.maps.kfilter.update(&s.nr.to_ne_bytes(), &kf_value(s)?, MapFlags::ANY)?;
    }
    if dirs {
        set_gen(skel, next_gen());
    }
    Ok(())
}

/// Empties the filter: the directory verdicts and every entry first
/// (everything is sent meanwhile), then the paths and names.
pub(crate) fn clear(skel: &mut crate::session::CaptureSkel) -> Result<()> {
    set_gen(skel, 0);
    let empty = [0u8; KF_SIZE];
    for nr in 0..skel.maps.kfilter.info()?.info.max_entries {
        skel.maps.kfilter.update(&nr.to_ne_bytes(), &empty, MapFlags::ANY)?;
    }
    for map in [&skel.maps.kf_paths, &skel.maps.kf_comms, &skel.maps.kf_dirs] {
        let keys: Vec<Vec<u8>> = map.keys().collect();
        for k in keys {
            map.delete(&k)?;
        }
    }
    write_leads(skel, &[0; LEAD_WORDS])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_flags_offsets_follow_the_table() {
        let nr = |n| harrier_schema::syscall_by_name(n).unwrap().nr;
        // openat: dirfd (s32) then flags.
        assert_eq!(flags_offset(nr("openat")), Some(PARAMS_BASE as u32 + 4));
        assert_eq!(flags_offset(nr("open")), Some(PARAMS_BASE as u32));
        assert!(flags_offset(nr("read")).is_none());
        assert!(has_resolved_path(nr("openat2")) && !has_resolved_path(nr("unlink")));
    }

    #[test]
    fn leads_cover_every_path_an_entry_matches() {
        let bit = |w: &[u64], p: &[u8]| {
            let at = |i: usize| p.get(i).copied().unwrap_or(0) as usize;
            let lead = at(1) << 8 | at(2);
            w[lead >> 6] >> (lead & 63) & 1 == 1
        };
        let with = |paths: Vec<PathMatch>| {
            let c = Clause { need_success: true, paths: Some(paths), ..Default::default() };
            leads(&KernelFilter {
                syscalls: vec![SyscallFilter {
                    nr: 257,
                    clauses: vec![c],
                    drop_comms: vec![],
                    untold: false,
                }],
            })
        };
        let w = with(vec![PathMatch::Prefix(b"/etc/".to_vec()), PathMatch::Exact(b"/".to_vec())]);
        assert!(bit(&w, b"/etc/shadow") && bit(&w, b"/et") && bit(&w, b"/"));
        assert!(!bit(&w, b"/var/tmp/x") && !bit(&w, b"/e") && !bit(&w, b"/ex"));
        let w = with(vec![PathMatch::Prefix(b"/p".to_vec())]);
        assert!(bit(&w, b"/proc/1") && bit(&w, b"/p") && bit(&w, b"/pa") && !bit(&w, b"/q"));
        let w = with(vec![PathMatch::Prefix(b"/".to_vec())]);
        assert!(bit(&w, b"/anything") && bit(&w, b"pipe:[1]") && bit(&w, b"/"));
        assert_eq!(with(vec![]).iter().sum::<u64>(), 0, "no entries, no leads");
    }

    /// Whether kfdirs.h finds directory d clear: the longest node that is a
    /// prefix of d + "/" is missing, or shorter and uncovered.
    fn clear_below(nodes: &std::collections::BTreeMap<Vec<u8>, bool>, d: &[u8]) -> bool {
        let key = [d, b"/"].concat();
        let best = nodes.iter().filter(|(p, _)| key.starts_with(p)).max_by_key(|(p, _)| p.len());
        best.is_none_or(|(p, &covered)| !covered && p.len() < key.len())
    }

    #[test]
    fn dir_verdicts_clear_only_directories_no_entry_reaches() {
        let c = Clause {
            need_success: true,
            paths: Some(vec![
                PathMatch::Prefix(b"/etc/".to_vec()),
                PathMatch::Exact(b"/srv/x/y".to_vec()),
                PathMatch::Prefix(b"/usr/lib/pyth".to_vec()),
            ]),
            ..Default::default()
        };
        let f = KernelFilter {
            syscalls: vec![SyscallFilter { nr: 257, clauses: vec![c], ..Default::default() }],
        };
        let nodes = dir_trie(&f);
        for d in ["/var/tmp", "/srv/z", "/srv/x/z", "/usr/lib/perl5", "/usr/libexec", "/e", "/etcx"] {
            assert!(clear_below(&nodes, d.as_bytes()), "{d} should be clear");
        }
        let reached = ["/etc", "/etc/ssl/certs", "/srv", "/srv/x", "/srv/x/y", "/usr", "/usr/lib"];
        for d in reached.into_iter().chain(["/usr/lib/pyth", "/usr/lib/python3"]) {
            assert!(!clear_below(&nodes, d.as_bytes()), "{d} should not be clear");
        }
        let root = KernelFilter {
            syscalls: vec![SyscallFilter {
                nr: 257,
                clauses: vec![Clause {
                    paths: Some(vec![PathMatch::Prefix(b"/".to_vec())]),
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        assert!(!clear_below(&dir_trie(&root), b"/var/tmp"), "'/' reaches everything");
        assert_eq!(u32::from_ne_bytes(dir_key(b"/etc/")[0..4].try_into().unwrap()), 40);
    }

    #[test]
    fn exact_names_include_their_nul() {
        let k = path_key(257, 1, &PathMatch::Exact(b"/etc/shadow".to_vec())).unwrap();
        assert_eq!(u32::from_ne_bytes(k[0..4].try_into().unwrap()), 8 * (3 + 12));
        assert_eq!(&k[7..18], b"/etc/shadow");
        assert_eq!(k[18], 0);
        let k = path_key(257, 0, &PathMatch::Prefix(b"/etc/".to_vec())).unwrap();
        assert_eq!(u32::from_ne_bytes(k[0..4].try_into().unwrap()), 8 * (3 + 5));
        assert!(path_key(257, 0, &PathMatch::Prefix(vec![b'a'; 200])).is_err());
    }
}
