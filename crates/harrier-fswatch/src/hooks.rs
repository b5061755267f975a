//! Which kernel hooks tell fswatch what a syscall changed, chosen at start
//! from what the kernel has (docs/fswatch.md, "Hooks per kernel"):
//! fs/inode.c's ctime tracepoints (6.13+), else fentry on the vfs_*
//! functions, else kprobes on them (bpf/include/fswatch/inodes.h, vfs.h).

use anyhow::{bail, Result};
use harrier_capture::kernel::{self, Feature, FSWATCH_CTIME, FSWATCH_FENTRY, FSWATCH_KPROBES, RDONLY_CAST};

/// A set of hooks; `hooks` in bpf/fswatch.bpf.c (enum fw_hooks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Hooks {
    Tracepoints = 0,
    Fentry = 1,
    Kprobes = 2,
}

impl std::str::FromStr for Hooks {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "tracepoints" => Ok(Hooks::Tracepoints),
            "fentry" => Ok(Hooks::Fentry),
            "kprobes" => Ok(Hooks::Kprobes),
            _ => bail!("unknown hooks '{s}' (expected auto, tracepoints, fentry or kprobes)"),
        }
    }
}

/// The vfs_* functions the fentry and kprobe sets hook (vfs.h's FW_VFS_HOOK).
pub const VFS_FUNCS: [&str; 7] =
    ["vfs_unlink", "vfs_rmdir", "vfs_mkdir", "vfs_symlink", "vfs_link", "vfs_rename", "notify_change"];

impl Hooks {
    pub fn name(self) -> &'static str {
        match self {
            Hooks::Tracepoints => "tracepoints",
            Hooks::Fentry => "fentry",
            Hooks::Kprobes => "kprobes",
        }
    }

    /// The kernel feature this set needs.
    pub fn feature(self) -> &'static Feature {
        match self {
            Hooks::Tracepoints => &FSWATCH_CTIME,
            Hooks::Fentry => &FSWATCH_FENTRY,
            Hooks::Kprobes => &FSWATCH_KPROBES,
        }
    }

    /// The BPF programs that record a syscall's changes with this set.
    pub fn programs(self) -> Vec<String> {
        match self {
            Hooks::Tracepoints => {
                ["fw_ctime_set", "fw_ctime_xchg", "fw_ctime_skip"].map(String::from).to_vec()
            }
            Hooks::Fentry | Hooks::Kprobes => {
                let p = if self == Hooks::Fentry { "fw_f_" } else { "fw_k_" };
                ["unlink", "rmdir", "mkdir", "symlink", "link", "rename", "setattr"]
                    .iter()
                    .map(|f| format!("{p}{f}"))
                    .collect()
            }
        }
    }

    fn what(self) -> String {
        match self {
            Hooks::Tracepoints => "fs/inode.c's ctime tracepoints (tp_btf)".into(),
            Hooks::Fentry => format!("fentry on {}", VFS_FUNCS.join(", ")),
            Hooks::Kprobes => format!("kprobes on {}", VFS_FUNCS.join(", ")),
        }
    }
}

/// The hooks picked, and how the BPF side reads kernel objects there.
#[derive(Debug, Clone)]
pub struct Choice {
    pub hooks: Hooks,
    /// bpf_rdonly_cast exists (6.2+): plain loads, else probe reads (FW_CAST).
    pub plain_loads: bool,
    /// One line: the hooks and why (what this kernel lacks, and since when).
    pub why: String,
}

impl Choice {
    /// "hooks: fentry on vfs_unlink, ...: this kernel (6.1.0-56-amd64) lacks ...".
    pub fn describe(&self) -> String {
        format!("hooks: {}: {}", self.hooks.what(), self.why)
    }
}

fn lacks(f: &Feature) -> String {
    format!("{} (Linux {})", f.name, f.since)
}

/// Picks the hooks on this kernel; `forced`: --hooks (fails in one line if
/// the kernel cannot).
pub fn choose(forced: Option<Hooks>) -> Result<Choice> {
    choose_with(forced, &kernel::release(), Feature::present, Feature::refusal)
}

/// `choose` with the kernel's answers given (tests fake them): `present` as
/// Feature::present, `refusal` as Feature::refusal.
pub fn choose_with(
    forced: Option<Hooks>,
    release: &str,
    present: impl Fn(&Feature) -> Option<bool>,
    refusal: impl Fn(&Feature) -> Option<String>,
) -> Result<Choice> {
    // A probe that could not run (no privileges) is no answer: the load says what is wrong.
    let has = |f: &Feature| present(f) != Some(false);
    let plain_loads = has(&RDONLY_CAST);
    let mut why = Vec::new();
    let hooks = match forced {
        Some(h) if has(h.feature()) => {
            why.push(format!("asked for with --hooks {}", h.name()));
            h
        }
        Some(h) => {
            let f = h.feature();
            let detail = refusal(f).map(|r| format!(" ({r})")).unwrap_or_default();
            bail!(
                "this kernel ({release}) lacks {}{detail}, which harrier fswatch --hooks {} needs: Linux {} or newer",
                f.name,
                h.name(),
                f.since
            );
        }
        None => {
            let mut missing = Vec::new();
            let mut pick = None;
            for h in [Hooks::Tracepoints, Hooks::Fentry, Hooks::Kprobes] {
                if has(h.feature()) {
                    pick = Some(h);
                    break;
                }
                let detail = refusal(h.feature()).map(|r| format!(": {r}")).unwrap_or_default();
                missing.push(format!("{}{detail}", lacks(h.feature())));
            }
            let Some(h) = pick else {
                bail!(
                    "this kernel ({release}) has none of the hooks harrier fswatch needs to resolve paths from \
                     kernel objects: {}",
                    missing.join("; ")
                );
            };
            if missing.is_empty() {
                why.push(format!("this kernel has them (Linux {}+)", FSWATCH_CTIME.since));
            } else {
                why.push(format!("this kernel ({release}) lacks {}", missing.join("; ")));
            }
            h
        }
    };
    if !plain_loads {
        why.push(format!("fields read with bpf_probe_read_kernel: it lacks {}", lacks(&RDONLY_CAST)));
    }
    Ok(Choice { hooks, plain_loads, why: why.join("; ") })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel that has the features whose names contain one of `has`.
    fn kernel(has: &'static [&'static str]) -> impl Fn(&Feature) -> Option<bool> {
        move |f| Some(has.iter().any(|h| f.name.contains(h)))
    }

    fn no_refusal(_: &Feature) -> Option<String> {
        None
    }

    #[test]
    fn the_best_hooks_the_kernel_has() {
        let all = kernel(&["ctime", "trampolines", "kprobes", "rdonly"]);
        let c = choose_with(None, "6.18.0", &all, no_refusal).unwrap();
        assert_eq!((c.hooks, c.plain_loads), (Hooks::Tracepoints, true));
        assert_eq!(
            c.describe(),
            "hooks: fs/inode.c's ctime tracepoints (tp_btf): this kernel has them (Linux 6.13+)"
        );

        // Debian 12's 6.12: no ctime tracepoints.
        let c =
            choose_with(None, "6.12.117", kernel(&["trampolines", "kprobes", "rdonly"]), no_refusal).unwrap();
        assert_eq!((c.hooks, c.plain_loads), (Hooks::Fentry, true));
        let d = c.describe();
        assert!(d.starts_with("hooks: fentry on vfs_unlink, vfs_rmdir, vfs_mkdir"), "{d}");
        assert!(d.contains("this kernel (6.12.117) lacks fs/inode.c's ctime tracepoints"), "{d}");
        assert!(d.contains("(Linux 6.13)") && !d.contains('\n'), "{d}");

        // Debian 12's 6.1: no cast either.
        let c = choose_with(None, "6.1.0", kernel(&["trampolines", "kprobes"]), no_refusal).unwrap();
        assert_eq!((c.hooks, c.plain_loads), (Hooks::Fentry, false));
        assert!(c.describe().contains("it lacks the bpf_rdonly_cast kfunc (Linux 6.2)"), "{}", c.describe());

        // Trampolines refused (this VM): kprobes, and why not fentry.
        let refused = |f: &Feature| f.name.contains("trampolines").then(|| "EPERM".to_string());
        let c = choose_with(None, "6.6.0", kernel(&["kprobes", "rdonly"]), refused).unwrap();
        assert_eq!(c.hooks, Hooks::Kprobes);
        assert!(c.describe().starts_with("hooks: kprobes on vfs_unlink"), "{}", c.describe());
        assert!(c.why.contains(
            "BPF trampolines (fentry, CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS) (Linux 5.5): EPERM"
        ));
    }

    #[test]
    fn a_kernel_without_any_gets_one_line() {
        let e = choose_with(None, "5.15.0", kernel(&["rdonly"]), no_refusal).unwrap_err().to_string();
        assert!(e.starts_with("this kernel (5.15.0) has none of the hooks harrier fswatch needs"), "{e}");
        for f in ["ctime tracepoints", "(Linux 6.13)", "fentry", "(Linux 5.5)", "kprobes", "(Linux 4.17)"] {
            assert!(e.contains(f), "{f} not in {e}");
        }
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn forced_hooks_the_kernel_lacks_are_refused_in_one_line() {
        let refused =
            |f: &Feature| f.name.contains("trampolines").then(|| "Operation not permitted".to_string());
        let tp_only = kernel(&["ctime", "rdonly"]);
        let e = choose_with(Some(Hooks::Fentry), "6.18.0", &tp_only, refused).unwrap_err().to_string();
        assert_eq!(
            e,
            "this kernel (6.18.0) lacks BPF trampolines (fentry, CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS) \
             (Operation not permitted), which harrier fswatch --hooks fentry needs: Linux 5.5 or newer"
        );
        let e = choose_with(Some(Hooks::Kprobes), "6.18.0", &tp_only, no_refusal).unwrap_err().to_string();
        assert!(
            e.contains("lacks kprobes (CONFIG_KPROBE_EVENTS), which harrier fswatch --hooks kprobes"),
            "{e}"
        );
        let c = choose_with(
            Some(Hooks::Kprobes),
            "6.1.0",
            kernel(&["ctime", "trampolines", "kprobes"]),
            no_refusal,
        )
        .unwrap();
        assert_eq!(c.hooks, Hooks::Kprobes);
        assert!(c.why.starts_with("asked for with --hooks kprobes"), "{}", c.why);
        // A probe that could not run (not root) blocks nothing.
        assert_eq!(choose_with(None, "6.1.0", |_| None, no_refusal).unwrap().hooks, Hooks::Tracepoints);
    }

    #[test]
    fn names_parse() {
        for h in [Hooks::Tracepoints, Hooks::Fentry, Hooks::Kprobes] {
            assert_eq!(h.name().parse::<Hooks>().unwrap(), h);
            assert_eq!(h.programs().len(), if h == Hooks::Tracepoints { 3 } else { VFS_FUNCS.len() });
        }
        assert!("lsm".parse::<Hooks>().unwrap_err().to_string().contains("expected auto, tracepoints"));
    }
}
