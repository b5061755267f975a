//! Enforcement in the kernel (bpf/include/guard.h): per syscall, a jump
//! program over what the kernel knows at the syscall's exit, that kills the
//! process when an enforced rule matches. Built by `harrier-engine::guard`
//! from the rules; written into the maps before attach.

use anyhow::{bail, Result};
use libbpf_rs::{MapCore, MapFlags};

/// Instructions per syscall's program (`HR_G_INS`).
pub const MAX_INS: usize = 128;
/// Syscalls with a program (`HR_G_PROGS`).
pub const MAX_PROGS: usize = 32;
/// Enforced rules (`HR_G_RULES`).
pub const MAX_RULES: usize = 64;
/// String bytes a set entry may have (`HR_G_STR`).
pub const MAX_STR: usize = 128;
/// Substrings the programs may search for (`HR_G_NEEDLES`).
pub const MAX_NEEDLES: usize = 64;
/// Bytes a substring may have (`HR_G_NEEDLE`).
pub const MAX_NEEDLE: usize = 32;
/// Atoms of a program's quick test (`HR_G_QUICK`).
pub const MAX_ATOMS: usize = 8;

/// Jump targets beyond the program: a verdict.
pub const NO_MATCH: u16 = 0xffff;
pub const KILL: u16 = 0x8000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Src {
    /// The event's kernel-resolved path (fd.name of an open).
    Path,
    /// The thread's name (proc.name).
    Comm,
    /// An ancestor's process name: 1 is the parent (proc.pname, proc.aname[n]).
    Ancestor(u8),
    /// argv[0] at an execve/execveat exit (proc.exe).
    Exe,
    /// The effective uid (user.uid).
    Uid,
    /// argv[1..] joined by spaces at an execve/execveat exit (proc.args).
    Args,
    /// The record's variable parameter `index` (0: the first, at record
    /// offset `first`), up to its NUL (evt.arg.* of strings and paths).
    Param { index: u8, first: u32 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Success,
    /// `(flags & mask) == value`.
    Flags {
        mask: u32,
        value: u32,
    },
    /// The source's string is in set `set` (`dirs`: a directory set).
    StrIn {
        src: Src,
        set: u32,
        dirs: bool,
    },
    /// The task's cgroup is one user space knows as a host cgroup.
    HostCgroup,
    /// Rule `rule` reached a term only user space knows: always "true".
    Defer {
        rule: u16,
    },
    /// `(u32 at record offset off & mask) == value` (a fixed parameter).
    Num {
        off: u32,
        mask: u32,
        value: u32,
    },
    /// The source's string holds needle `needle` as `mode` says (no value:
    /// false). A miss on a cut string proves nothing: test [`Op::Whole`].
    Substr {
        src: Src,
        needle: u32,
        mode: Mode,
    },
    /// The source's string has no value, or was not cut to [`MAX_STR`].
    Whole {
        src: Src,
    },
    /// The process (its thread-group leader) started more than `ns` before the event.
    Age {
        ns: u64,
    },
}

/// How [`Op::Substr`] matches (`enum hr_g_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    Contains,
    /// ASCII case folded: the needle is stored lower case.
    IContains,
    EndsWith,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ins {
    pub op: Op,
    pub t: u16,
    pub f: u16,
}

#[derive(Debug, Clone, Default)]
pub struct Program {
    pub nr: u32,
    pub ins: Vec<Ins>,
    pub quick: Quick,
}

/// What the capture handler tests before it hands an event to the guard
/// program: a condition every event the program can act on meets. The
/// default lets every event on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Quick {
    /// Only a call that succeeded goes on.
    pub ok: bool,
    /// Then one of these must hold (None: no test).
    pub atoms: Option<Vec<Atom>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Atom {
    /// The path's first 8 bytes (as a native u64, NULs past its end), masked.
    Head {
        mask: u64,
        value: u64,
    },
    Flags {
        mask: u32,
        value: u32,
    },
}

impl Atom {
    /// The head atom of a string's first bytes (at most 8; with `nul`, its
    /// end too when it fits); None: no byte to test.
    pub fn head(bytes: &[u8], nul: bool) -> Option<Atom> {
        let mut b = bytes.to_vec();
        if nul {
            b.push(0);
        }
        let n = b.len().min(8);
        if n == 0 {
            return None;
        }
        let (mut m, mut v) = ([0u8; 8], [0u8; 8]);
        m[..n].fill(0xff);
        v[..n].copy_from_slice(&b[..n]);
        Some(Atom::Head { mask: u64::from_ne_bytes(m), value: u64::from_ne_bytes(v) })
    }

    /// The same test on the first `n` bytes only (a flags atom is kept).
    pub fn cut(self, n: usize) -> Atom {
        match self {
            Atom::Head { mask, value } => {
                let keep = if n >= 8 {
                    u64::MAX
                } else {
                    u64::from_ne_bytes(std::array::from_fn(|i| if i < n { 0xff } else { 0 }))
                };
                Atom::Head { mask: mask & keep, value: value & keep }
            }
            f => f,
        }
    }

    /// Whether the event's path head (None: no path) and flags pass.
    pub fn holds(self, head: Option<&[u8]>, flags: u32) -> bool {
        match self {
            Atom::Head { mask, value } => head.is_some_and(|h| {
                let mut b = [0u8; 8];
                let n = h.len().min(8);
                b[..n].copy_from_slice(&h[..n]);
                u64::from_ne_bytes(b) & mask == value
            }),
            Atom::Flags { mask, value } => flags & mask == value,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Entry {
    Exact(Vec<u8>),
    Prefix(Vec<u8>),
    /// A directory: "D/" in a directory set.
    Dir(Vec<u8>),
}

#[derive(Debug, Clone, Default)]
pub struct Guard {
    pub programs: Vec<Program>,
    /// (set, entry).
    pub strings: Vec<(u32, Entry)>,
    /// The substrings [`Op::Substr`] names, by index (lower case for `IContains`).
    pub needles: Vec<Vec<u8>>,
    /// Kills per rule per second.
    pub rate: u32,
    /// A deferred rule stops the task until user space decides.
    pub hold: bool,
}

/// A task the kernel stopped for user space's verdict (`struct hr_g_held`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub tid: u32,
    pub ts: u64,
    pub tgid: u32,
    pub rule: u16,
}

/// What the kernel last did to a thread (`struct hr_g_log`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogEntry {
    pub ts: u64,
    pub acted_ns: u64,
    pub rule: u16,
    pub outcome: Outcome,
    pub err: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Killed,
    Failed,
    RateLimited,
    Protected,
    Deferred,
    /// Deferred, and stopped until user space decides (`Guard::hold`).
    Held,
}

pub const OUTCOMES: [Outcome; 6] = [
    Outcome::Killed,
    Outcome::Failed,
    Outcome::RateLimited,
    Outcome::Protected,
    Outcome::Deferred,
    Outcome::Held,
];

impl Outcome {
    fn from_code(c: u8) -> Option<Outcome> {
        OUTCOMES.get((c as usize).checked_sub(1)?).copied()
    }
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Killed => "killed",
            Outcome::Failed => "failed",
            Outcome::RateLimited => "rate_limited",
            Outcome::Protected => "protected",
            Outcome::Deferred => "deferred",
            Outcome::Held => "held",
        }
    }
}

// Layouts of guard.h.
const INS_SIZE: usize = 20;
const ATOM_SIZE: usize = 24;
const INS_AT: usize = 8 + MAX_ATOMS * ATOM_SIZE;
const PROG_SIZE: usize = INS_AT + MAX_INS * INS_SIZE;
const KEY_SIZE: usize = 8 + MAX_STR;
const LOG_SIZE: usize = 24;

fn src_bytes(src: &Src) -> (u8, u8, u32) {
    match src {
        Src::Path => (1, 0, 0),
        Src::Comm => (2, 0, 0),
        Src::Ancestor(n) => (3, *n, 0),
        Src::Exe => (4, 0, 0),
        Src::Uid => (5, 0, 0),
        Src::Args => (6, 0, 0),
        Src::Param { index, first } => (7, *index, *first),
    }
}

fn ins_bytes(i: &Ins) -> [u8; INS_SIZE] {
    let mut b = [0u8; INS_SIZE];
    let (op, src, depth, a, bb, c) = match &i.op {
        Op::Success => (1, 0, 0, 0, 0, 0),
        Op::Flags { mask, value } => (2, 0, 0, 0, *mask, *value),
        Op::StrIn { src, set, dirs } => {
            let (s, d, c) = src_bytes(src);
            (3, s, d, *set, *dirs as u32, c)
        }
        Op::HostCgroup => (4, 0, 0, 0, 0, 0),
        Op::Defer { rule } => (5, 0, 0, *rule as u32, 0, 0),
        Op::Num { off, mask, value } => (6, 0, 0, *off, *mask, *value),
        Op::Substr { src, needle, mode } => {
            let (s, d, c) = src_bytes(src);
            (7, s, d, *needle, *mode as u32, c)
        }
        Op::Whole { src } => {
            let (s, d, c) = src_bytes(src);
            (8, s, d, 0, 0, c)
        }
        Op::Age { ns } => (9, 0, 0, 0, (*ns >> 32) as u32, *ns as u32),
    };
    b[0] = op;
    b[1] = src;
    b[2] = depth;
    b[4..6].copy_from_slice(&i.t.to_ne_bytes());
    b[6..8].copy_from_slice(&i.f.to_ne_bytes());
    b[8..12].copy_from_slice(&a.to_ne_bytes());
    b[12..16].copy_from_slice(&bb.to_ne_bytes());
    b[16..20].copy_from_slice(&c.to_ne_bytes());
    b
}

fn prog_bytes(p: &Program) -> Result<Vec<u8>> {
    if p.ins.len() > MAX_INS {
        bail!("syscall {}: an enforcement program of {} instructions, at most {MAX_INS}", p.nr, p.ins.len());
    }
    let mut v = vec![0u8; PROG_SIZE];
    v[0..2].copy_from_slice(&(p.ins.len() as u16).to_ne_bytes());
    let flags_off = crate::kfilter::flags_offset(p.nr).unwrap_or(0) as u16;
    v[2..4].copy_from_slice(&flags_off.to_ne_bytes());
    let atoms = p.quick.atoms.as_deref().unwrap_or(&[]);
    if atoms.len() > MAX_ATOMS || p.quick.atoms.as_ref().is_some_and(|a| a.is_empty()) {
        bail!("syscall {}: a quick test of {} atoms (1 to {MAX_ATOMS} allowed)", p.nr, atoms.len());
    }
    v[4] = p.quick.ok as u8;
    v[5] = atoms.len() as u8;
    for (k, a) in atoms.iter().enumerate() {
        let (mask, value, kind) = match *a {
            Atom::Head { mask, value } => (mask, value, 1u32),
            Atom::Flags { mask, value } => (mask as u64, value as u64, 2),
        };
        let at = 8 + k * ATOM_SIZE;
        v[at..at + 8].copy_from_slice(&mask.to_ne_bytes());
        v[at + 8..at + 16].copy_from_slice(&value.to_ne_bytes());
        v[at + 16..at + 20].copy_from_slice(&kind.to_ne_bytes());
    }
    for (k, i) in p.ins.iter().enumerate() {
        v[INS_AT + k * INS_SIZE..INS_AT + (k + 1) * INS_SIZE].copy_from_slice(&ins_bytes(i));
    }
    Ok(v)
}

/// The LPM key and value of one set entry.
pub fn key_bytes(set: u32, e: &Entry) -> Result<([u8; KEY_SIZE], u8)> {
    let (b, nul, value) = match e {
        Entry::Exact(b) => (b, true, 1),
        Entry::Prefix(b) => (b, false, 1),
        Entry::Dir(b) => (b, false, b.len().clamp(1, MAX_STR) as u8),
    };
    let n = b.len() + nul as usize;
    if n > MAX_STR || b.is_empty() && !nul {
        bail!("an enforcement string of {} bytes (1 to {} allowed)", b.len(), MAX_STR - 1);
    }
    let mut k = [0u8; KEY_SIZE];
    k[0..4].copy_from_slice(&(8 * (4 + n) as u32).to_ne_bytes());
    k[4..8].copy_from_slice(&set.to_ne_bytes());
    k[8..8 + b.len()].copy_from_slice(b);
    Ok((k, value))
}

/// The `struct hr_g_needle` of one substring.
pub fn needle_bytes(n: &[u8]) -> Result<[u8; 4 + MAX_NEEDLE]> {
    if n.is_empty() || n.len() > MAX_NEEDLE {
        bail!("an enforcement substring of {} bytes (1 to {MAX_NEEDLE} allowed)", n.len());
    }
    let mut v = [0u8; 4 + MAX_NEEDLE];
    v[0..4].copy_from_slice(&(n.len() as u32).to_ne_bytes());
    v[4..4 + n.len()].copy_from_slice(n);
    Ok(v)
}

pub(crate) fn install(skel: &crate::session::CaptureSkel, g: &Guard) -> Result<()> {
    if g.programs.len() > MAX_PROGS {
        bail!("{} syscalls with enforcement programs, at most {MAX_PROGS}", g.programs.len());
    }
    if g.needles.len() > MAX_NEEDLES {
        bail!("{} enforcement substrings, at most {MAX_NEEDLES}", g.needles.len());
    }
    for (i, n) in g.needles.iter().enumerate() {
        skel.maps.guard_needles.update(&(i as u32).to_ne_bytes(), &needle_bytes(n)?, MapFlags::ANY)?;
    }
    for (set, e) in &g.strings {
        let (k, v) = key_bytes(*set, e)?;
        skel.maps.guard_strs.update(&k, &[v], MapFlags::ANY)?;
    }
    for (slot, p) in g.programs.iter().enumerate() {
        skel.maps.guard_progs.update(&(slot as u32).to_ne_bytes(), &prog_bytes(p)?, MapFlags::ANY)?;
        skel.maps.guard_index.update(&p.nr.to_ne_bytes(), &(slot as u32 + 1).to_ne_bytes(), MapFlags::ANY)?;
    }
    Ok(())
}

/// Removes every program (nothing is enforced meanwhile), then the strings.
pub(crate) fn clear(skel: &crate::session::CaptureSkel) -> Result<()> {
    for nr in 0..skel.maps.guard_index.info()?.info.max_entries {
        skel.maps.guard_index.update(&nr.to_ne_bytes(), &0u32.to_ne_bytes(), MapFlags::ANY)?;
    }
    let keys: Vec<Vec<u8>> = skel.maps.guard_strs.keys().collect();
    for k in keys {
        skel.maps.guard_strs.delete(&k)?;
    }
    Ok(())
}

pub(crate) fn log_of(skel: &crate::session::CaptureSkel, tid: u32) -> Option<LogEntry> {
    parse_log(&skel.maps.guard_log.lookup(&tid.to_ne_bytes(), MapFlags::ANY).ok()??)
}

pub(crate) fn parse_log(v: &[u8]) -> Option<LogEntry> {
    if v.len() < LOG_SIZE {
        return None;
    }
    Some(LogEntry {
        ts: u64::from_ne_bytes(v[0..8].try_into().unwrap()),
        acted_ns: u64::from_ne_bytes(v[8..16].try_into().unwrap()),
        rule: u16::from_ne_bytes(v[16..18].try_into().unwrap()),
        outcome: Outcome::from_code(v[18])?,
        err: i32::from_ne_bytes(v[20..24].try_into().unwrap()),
    })
}

/// Per rule, the count of each outcome (in [`OUTCOMES`] order).
pub(crate) fn stats(skel: &crate::session::CaptureSkel, rules: usize) -> Vec<[u64; 6]> {
    (0..rules.min(MAX_RULES) as u32)
        .map(|r| {
            let v = skel.maps.guard_stats.lookup(&r.to_ne_bytes(), MapFlags::ANY).ok().flatten();
            let mut out = [0u64; 6];
            if let Some(v) = v {
                for (i, o) in out.iter_mut().enumerate() {
                    let at = 8 * (i + 1);
                    *o = u64::from_ne_bytes(v[at..at + 8].try_into().unwrap());
                }
            }
            out
        })
        .collect()
}

fn parse_held(k: &[u8], v: &[u8]) -> Option<Held> {
    Some(Held {
        tid: u32::from_ne_bytes(k.get(0..4)?.try_into().ok()?),
        ts: u64::from_ne_bytes(v.get(0..8)?.try_into().ok()?),
        tgid: u32::from_ne_bytes(v.get(8..12)?.try_into().ok()?),
        rule: u16::from_ne_bytes(v.get(12..14)?.try_into().ok()?),
    })
}

/// The tasks held now.
pub(crate) fn held(map: &dyn MapCore) -> Vec<Held> {
    let keys: Vec<Vec<u8>> = map.keys().collect();
    keys.iter().filter_map(|k| parse_held(k, &map.lookup(k, MapFlags::ANY).ok()??)).collect()
}

/// Lets a held task go on (SIGCONT to its process), or forgets one that was
/// killed: its entry goes either way.
pub(crate) fn release(map: &dyn MapCore, h: &Held, resume: bool) {
    // The entry goes first: once resumed, the thread may be held again at
    // once under the same key, and a delete after SIGCONT would drop that
    // new entry and leave the thread stopped for good (seen under make test).
    let _ = map.delete(&h.tid.to_ne_bytes());
    if resume {
        // SAFETY: kill(2) with plain integers.
        unsafe { libc::kill(h.tgid as i32, libc::SIGCONT) };
    }
}

pub(crate) fn add_host_cgroups(skel: &crate::session::CaptureSkel, ids: &[u64]) -> Result<()> {
    for id in ids {
        skel.maps.host_cgroups.update(&id.to_ne_bytes(), &[1], MapFlags::ANY)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_lpm_rules() {
        let (k, v) = key_bytes(3, &Entry::Exact(b"/etc/shadow".to_vec())).unwrap();
        assert_eq!(u32::from_ne_bytes(k[0..4].try_into().unwrap()), 8 * (4 + 12));
        assert_eq!(u32::from_ne_bytes(k[4..8].try_into().unwrap()), 3);
        assert_eq!((&k[8..19], k[19], v), (&b"/etc/shadow"[..], 0, 1));
        let (k, v) = key_bytes(1, &Entry::Dir(b"/etc/pam.d/".to_vec())).unwrap();
        assert_eq!((u32::from_ne_bytes(k[0..4].try_into().unwrap()), v), (8 * (4 + 11), 11));
        assert!(key_bytes(1, &Entry::Exact(vec![b'a'; MAX_STR])).is_err());
        assert!(key_bytes(1, &Entry::Prefix(vec![b'a'; MAX_STR])).is_ok());
    }

    #[test]
    fn head_atoms_end_strings_with_their_nul_and_cut_cleanly() {
        let shadow = Atom::head(b"/etc/shadow", true).unwrap();
        assert!(shadow.holds(Some(b"/etc/shadow"), 0));
        assert!(!shadow.holds(Some(b"/var/tmp/x"), 0) && !shadow.holds(None, 0));
        let root = Atom::head(b"/", true).unwrap();
        assert!(root.holds(Some(b"/"), 0) && !root.holds(Some(b"/a"), 0));
        // Cut to 1 byte, "/" loses its NUL: any absolute path.
        assert_eq!(Some(root.cut(1)), Atom::head(b"/", false));
        assert_eq!(Some(shadow.cut(5)), Atom::head(b"/etc/", false));
        assert_eq!(Atom::head(b"", false), None);
        let p = Program {
            nr: 257,
            ins: vec![],
            quick: Quick { ok: true, atoms: Some(vec![shadow, Atom::Flags { mask: 0o1000, value: 0o1000 }]) },
        };
        let b = prog_bytes(&p).unwrap();
        assert_eq!((b[4], b[5]), (1, 2));
        assert_eq!(&b[8 + 8..8 + 16], &b"/etc/sha"[..]);
        assert_eq!(u32::from_ne_bytes(b[8 + ATOM_SIZE + 16..8 + ATOM_SIZE + 20].try_into().unwrap()), 2);
        assert!(prog_bytes(&Program { quick: Quick { ok: false, atoms: Some(vec![]) }, ..p }).is_err());
    }

    #[test]
    fn instructions_have_the_c_layout() {
        let b = ins_bytes(&Ins {
            op: Op::StrIn { src: Src::Ancestor(2), set: 7, dirs: true },
            t: 5,
            f: KILL | 3,
        });
        assert_eq!(&b[0..3], &[3, 3, 2]);
        assert_eq!(u16::from_ne_bytes(b[4..6].try_into().unwrap()), 5);
        assert_eq!(u16::from_ne_bytes(b[6..8].try_into().unwrap()), KILL | 3);
        assert_eq!(u32::from_ne_bytes(b[8..12].try_into().unwrap()), 7);
        assert_eq!(u32::from_ne_bytes(b[12..16].try_into().unwrap()), 1);
    }
}
