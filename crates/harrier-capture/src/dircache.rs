//! The path cache of capture's dentry walks (bpf/include/tree/dircache.h)
//! and the hooks that invalidate it (tree/inval.h), the same cache code and
//! invalidation fswatch uses: on where the kernel has fs/inode.c's ctime
//! tracepoints (6.13+) or, before, BPF trampolines for fentry on the vfs_*
//! calls that move or free a directory; off elsewhere (every walk then goes
//! to the root).

use crate::kernel::{FSWATCH_CTIME, FSWATCH_FENTRY};

/// The ctime hooks: every inode whose ctime changes, directories among them.
pub const CTIME_PROGS: [&str; 3] = ["hr_tree_ctime_set", "hr_tree_ctime_xchg", "hr_tree_ctime_skip"];
/// Before 6.13: fentry on vfs_rmdir and vfs_rename.
pub const FENTRY_PROGS: [&str; 2] = ["hr_tree_f_rmdir", "hr_tree_f_rename"];
/// The program that closes a rename's or rmdir's record at its exit.
pub const EXIT_PROG: &str = "hr_tree_sys_exit";
/// The syscalls whose exits it is attached to (inval.h's hr_tree_is_rename, hr_tree_is_rmdir).
pub const EXITS: [&str; 5] = ["rename", "renameat", "renameat2", "rmdir", "unlinkat"];

/// Bytes of one entry per CPU: struct hr_dcval and the LRU's per-CPU slot.
const ENTRY: usize = 1024 + 56 + 48;
/// The cache's memory in all, whatever the CPU count.
const BUDGET: usize = 8 << 20;

/// Why the cache is on or off for a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirCache {
    /// On, with the ctime tracepoints (true) or the fentry hooks.
    On { ctime: bool },
    /// Off, and why (one line).
    Off(String),
}

impl DirCache {
    /// Whether the session uses it: asked for (Config::dir_cache), events
    /// flow (not a benchmark's empty programs or entry copies only), and the
    /// kernel has the hooks.
    pub fn choose(asked: bool, no_events: bool) -> DirCache {
        Self::choose_with(asked, no_events, FSWATCH_CTIME.present(), || FSWATCH_FENTRY.present())
    }

    /// `choose` with the kernel's answers given (tests fake them). A probe
    /// that could not run (no privileges) is no answer: the load says.
    pub fn choose_with(
        asked: bool,
        no_events: bool,
        ctime: Option<bool>,
        fentry: impl Fn() -> Option<bool>,
    ) -> DirCache {
        if !asked {
            return DirCache::Off("turned off".into());
        }
        if no_events {
            return DirCache::Off("no events flow (benchmark)".into());
        }
        if ctime != Some(false) {
            return DirCache::On { ctime: true };
        }
        if fentry() != Some(false) {
            return DirCache::On { ctime: false };
        }
        let (c, f) = (&FSWATCH_CTIME, &FSWATCH_FENTRY);
        DirCache::Off(format!(
            "this kernel lacks {} (Linux {}) and {}: every walk goes to the root",
            c.name, c.since, f.name
        ))
    }

    pub fn is_on(&self) -> bool {
        matches!(self, DirCache::On { .. })
    }

    /// The map's entries: ~8 MiB in all, 1 where the cache is off.
    pub fn entries(&self, ncpus: usize) -> u32 {
        match self {
            DirCache::On { .. } => (BUDGET / (ENTRY * ncpus.max(1))).clamp(64, 4096) as u32,
            DirCache::Off(_) => 1,
        }
    }

    /// The programs loaded with it.
    pub fn programs(&self) -> Vec<&'static str> {
        match self {
            DirCache::On { ctime: true } => CTIME_PROGS.iter().copied().chain([EXIT_PROG]).collect(),
            DirCache::On { ctime: false } => FENTRY_PROGS.iter().copied().chain([EXIT_PROG]).collect(),
            DirCache::Off(_) => Vec::new(),
        }
    }

    /// The hooks that invalidate it, attached after the exits.
    pub fn hooks(&self) -> &'static [&'static str] {
        match self {
            DirCache::On { ctime: true } => &CTIME_PROGS,
            DirCache::On { ctime: false } => &FENTRY_PROGS,
            DirCache::Off(_) => &[],
        }
    }

    /// "path cache: on (...)" / "path cache: off (why)".
    pub fn describe(&self) -> String {
        match self {
            DirCache::On { ctime: true } => "path cache: on (ctime tracepoints)".into(),
            DirCache::On { ctime: false } => "path cache: on (fentry on vfs_rmdir, vfs_rename)".into(),
            DirCache::Off(why) => format!("path cache: off ({why})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_where_the_hooks_are() {
        let yes = || Some(true);
        let no = || Some(false);
        let on = DirCache::choose_with(true, false, Some(true), no);
        assert_eq!((on.describe().as_str(), on.hooks().len()), ("path cache: on (ctime tracepoints)", 3));
        // Debian's 6.1 and 6.12: no ctime tracepoints, fentry.
        let on = DirCache::choose_with(true, false, Some(false), yes);
        assert_eq!(on.hooks(), FENTRY_PROGS);
        assert_eq!(on.programs(), ["hr_tree_f_rmdir", "hr_tree_f_rename", EXIT_PROG]);
        // A probe that could not run is no answer.
        assert!(DirCache::choose_with(true, false, None, no).is_on());
        let off = DirCache::choose_with(true, false, Some(false), no);
        assert!(
            off.describe().starts_with("path cache: off (this kernel lacks fs/inode.c's ctime"),
            "{off:?}"
        );
        assert!(off.describe().contains("and BPF trampolines"), "{off:?}");
        assert_eq!((off.programs().len(), off.entries(2)), (0, 1));
        assert_eq!(
            DirCache::choose_with(false, false, Some(true), yes).describe(),
            "path cache: off (turned off)"
        );
        assert!(!DirCache::choose_with(true, true, Some(true), yes).is_on());
    }

    #[test]
    fn its_memory_does_not_grow_with_the_cpus() {
        let on = DirCache::On { ctime: true };
        assert_eq!(on.entries(2), 3718);
        assert_eq!(on.entries(64), 116);
        assert_eq!(on.entries(1024), 64);
    }
}
