//! What Harrier needs from the kernel, probed before loading: a kernel that
//! lacks a feature gets one line naming it and the first Linux that has it,
//! instead of a verifier log. The newest entry of each list sets the oldest
//! supported kernel (README, "Kernels"). Used by the capture engine and the bypass;
//! fswatch picks its hooks from the FSWATCH_* features (harrier-fswatch's hooks.rs).

use anyhow::{bail, Result};
use libbpf_sys as sys;

mod btf;

/// One kernel feature and how to tell whether this kernel has it.
pub struct Feature {
    pub name: &'static str,
    /// The first mainline release that has it.
    pub since: &'static str,
    probe: Probe,
}

enum Probe {
    /// A helper callable from a program type.
    Helper(sys::bpf_prog_type, sys::bpf_func_id),
    MapType(sys::bpf_map_type),
    /// Array maps user space can mmap.
    MmapableArray,
    /// Kernel BTF, which tp_btf programs and CO-RE need.
    Btf,
    /// A perf event source in /sys/bus/event_source/devices.
    EventSource(&'static str),
    /// tp_btf targets: every one's `btf_trace_<name>` in the kernel's BTF.
    BtfTracepoints(&'static [&'static str]),
    /// A function (or kfunc) in the kernel's BTF.
    BtfFunc(&'static str),
    /// An fentry program on this function loads and attaches (BPF trampolines:
    /// a kernel can have them and still refuse, e.g. locked down).
    Fentry(&'static str),
}

const TP: sys::bpf_prog_type = sys::BPF_PROG_TYPE_TRACEPOINT;
const KPROBE: sys::bpf_prog_type = sys::BPF_PROG_TYPE_KPROBE; // uprobes too
const RAW_TP: sys::bpf_prog_type = sys::BPF_PROG_TYPE_RAW_TRACEPOINT;

/// What the capture engine uses, newest first.
pub const CAPTURE: &[Feature] = &[
    Feature { name: "the bpf_loop helper", since: "5.17", probe: Probe::Helper(TP, sys::BPF_FUNC_loop) },
    Feature {
        name: "the bpf_task_pt_regs helper",
        since: "5.15",
        probe: Probe::Helper(TP, sys::BPF_FUNC_task_pt_regs),
    },
    Feature {
        name: "the bpf_get_current_task_btf helper",
        since: "5.11",
        probe: Probe::Helper(TP, sys::BPF_FUNC_get_current_task_btf),
    },
    Feature {
        name: "BPF task storage",
        since: "5.11",
        probe: Probe::MapType(sys::BPF_MAP_TYPE_TASK_STORAGE),
    },
    Feature { name: "the BPF ring buffer", since: "5.8", probe: Probe::MapType(sys::BPF_MAP_TYPE_RINGBUF) },
    Feature { name: "mmapable BPF arrays (BPF_F_MMAPABLE)", since: "5.5", probe: Probe::MmapableArray },
    Feature { name: "kernel BTF (/sys/kernel/btf/vmlinux)", since: "5.5", probe: Probe::Btf },
];

/// fs/inode.c's ctime tracepoints: harrier fswatch's first choice of hooks.
pub const FSWATCH_CTIME: Feature = Feature {
    name: "fs/inode.c's ctime tracepoints (inode_set_ctime_to_ts, ctime_ns_xchg, ctime_xchg_skip)",
    since: "6.13",
    probe: Probe::BtfTracepoints(&["inode_set_ctime_to_ts", "ctime_ns_xchg", "ctime_xchg_skip"]),
};

/// BPF trampolines: fswatch's fentry hooks on the vfs_* functions.
pub const FSWATCH_FENTRY: Feature = Feature {
    name: "BPF trampolines (fentry, CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS)",
    since: "5.5",
    probe: Probe::Fentry("vfs_unlink"),
};

/// kprobes: fswatch's last choice, on the same functions.
pub const FSWATCH_KPROBES: Feature =
    Feature { name: "kprobes (CONFIG_KPROBE_EVENTS)", since: "4.17", probe: Probe::EventSource("kprobe") };

/// Plain loads through pointers the verifier does not type (bpf_core_cast);
/// without it fswatch reads each field with a helper call.
pub const RDONLY_CAST: Feature =
    Feature { name: "the bpf_rdonly_cast kfunc", since: "6.2", probe: Probe::BtfFunc("bpf_rdonly_cast") };

/// What the bypass uses, newest first. Its BPF atomics (fetch-and-add,
/// cmpxchg, xchg: 5.12) are older than bpf_loop, so bpf_loop covers them.
pub const BYPASS: &[Feature] = &[
    Feature { name: "the bpf_loop helper", since: "5.17", probe: Probe::Helper(RAW_TP, sys::BPF_FUNC_loop) },
    Feature {
        name: "the bpf_get_current_task_btf helper in uprobes",
        since: "5.11",
        probe: Probe::Helper(KPROBE, sys::BPF_FUNC_get_current_task_btf),
    },
    Feature {
        name: "BPF task storage",
        since: "5.11",
        probe: Probe::MapType(sys::BPF_MAP_TYPE_TASK_STORAGE),
    },
    Feature { name: "mmapable BPF arrays (BPF_F_MMAPABLE)", since: "5.5", probe: Probe::MmapableArray },
    Feature { name: "kernel BTF (/sys/kernel/btf/vmlinux)", since: "5.5", probe: Probe::Btf },
    Feature { name: "uprobes (CONFIG_UPROBE_EVENTS)", since: "4.17", probe: Probe::EventSource("uprobe") },
];

impl Feature {
    /// Some(false) when the kernel lacks it; None when the probe itself could
    /// not run (no privileges): the load then reports what is wrong.
    pub fn present(&self) -> Option<bool> {
        let r = match self.probe {
            Probe::Helper(prog, helper) => unsafe {
                sys::libbpf_probe_bpf_helper(prog, helper, std::ptr::null())
            },
            Probe::MapType(t) => unsafe { sys::libbpf_probe_bpf_map_type(t, std::ptr::null()) },
            Probe::MmapableArray => mmapable_array(),
            Probe::Btf => return Some(std::path::Path::new("/sys/kernel/btf/vmlinux").exists()),
            Probe::EventSource(name) => {
                return Some(std::path::Path::new("/sys/bus/event_source/devices").join(name).exists())
            }
            Probe::BtfTracepoints(names) => return btf::has_all(names, "btf_trace_", sys::BTF_KIND_TYPEDEF),
            Probe::BtfFunc(name) => return btf::has_all(&[name], "", sys::BTF_KIND_FUNC),
            Probe::Fentry(func) => match btf::fentry_attaches(func) {
                Ok(()) => 1,
                // Refused as root: this kernel cannot (EPERM: locked down here).
                Err(_) if unsafe { libc::geteuid() } == 0 => 0,
                Err(e) => -e,
            },
        };
        match r {
            1 => Some(true),
            0 => Some(false),
            _ => None,
        }
    }
}

impl Feature {
    /// "this kernel lacks NAME (Linux SINCE)" when it probes as absent.
    pub fn missing(&self) -> Option<String> {
        (self.present() == Some(false))
            .then(|| format!("this kernel lacks {} (Linux {})", self.name, self.since))
    }

    /// Why a feature that probes as absent is absent, when the probe can say
    /// more than its name (an fentry program refused: the error).
    pub fn refusal(&self) -> Option<String> {
        match self.probe {
            Probe::Fentry(func) => btf::fentry_refusal(func),
            _ => None,
        }
    }
}

fn mmapable_array() -> i32 {
    let opts = sys::bpf_map_create_opts {
        sz: std::mem::size_of::<sys::bpf_map_create_opts>() as _,
        map_flags: sys::BPF_F_MMAPABLE,
        ..Default::default()
    };
    let fd = unsafe { sys::bpf_map_create(sys::BPF_MAP_TYPE_ARRAY, std::ptr::null(), 4, 8, 1, &opts) };
    if fd >= 0 {
        unsafe { libc::close(fd) };
        return 1;
    }
    // EINVAL: the flag is unknown; anything else (EPERM...) says nothing.
    if -fd == libc::EINVAL {
        0
    } else {
        fd
    }
}

/// Fails with one line when this kernel lacks one of `features`.
pub fn check(features: &[Feature]) -> Result<()> {
    check_with(features, Feature::present)
}

/// `check` with the probe given (tests).
pub fn check_with(features: &[Feature], present: impl Fn(&Feature) -> Option<bool>) -> Result<()> {
    if let Some(f) = features.iter().find(|f| present(f) == Some(false)) {
        bail!(
            "this kernel ({}) lacks {}, which Harrier needs: Linux {} or newer",
            release(),
            f.name,
            f.since
        );
    }
    Ok(())
}

/// `uname -r`.
pub fn release() -> String {
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".into();
    }
    unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_feature_is_named_with_its_first_kernel() {
        let err = check_with(CAPTURE, |f| Some(!f.name.contains("bpf_loop"))).unwrap_err().to_string();
        assert!(err.contains("lacks the bpf_loop helper") && err.ends_with("Linux 5.17 or newer"), "{err}");
        assert!(!err.contains('\n'), "one line: {err}");
        let err = check_with(CAPTURE, |f| Some(!f.name.contains("ring buffer"))).unwrap_err().to_string();
        assert!(err.contains("the BPF ring buffer") && err.contains("Linux 5.8"), "{err}");
    }

    #[test]
    fn a_probe_that_cannot_run_blocks_nothing() {
        assert!(check_with(CAPTURE, |_| None).is_ok());
    }

    #[test]
    fn features_are_listed_newest_first() {
        let v = |s: &str| s.split('.').map(|n| n.parse::<u32>().unwrap()).collect::<Vec<_>>();
        for list in [CAPTURE, BYPASS] {
            assert!(list.windows(2).all(|w| v(w[0].since) >= v(w[1].since)));
        }
    }

    /// Probed for real; the kernel matrix runs this on each kernel tested.
    #[test]
    fn this_kernel_has_every_feature_harrier_needs() {
        if unsafe { libc::geteuid() } != 0 {
            // The probes load BPF: root only. CI never passes by skipping.
            assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "CI=true but not root");
            eprintln!("note: not root, skipping the kernel feature probes");
            return;
        }
        check(CAPTURE).unwrap();
        check(BYPASS).unwrap();
    }

    /// fswatch's hook probes, for real: each answers as root, and an fentry
    /// program refused says why (this VM: EPERM; the Debian guests load it).
    #[test]
    fn fswatch_hook_probes_answer() {
        if unsafe { libc::geteuid() } != 0 {
            assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "CI=true but not root");
            eprintln!("note: not root, skipping the fswatch hook probes");
            return;
        }
        for f in [&FSWATCH_CTIME, &FSWATCH_FENTRY, &FSWATCH_KPROBES, &RDONLY_CAST] {
            let p = f.present();
            eprintln!("{}: {p:?}", f.name);
            assert!(p.is_some(), "{}: the probe did not run", f.name);
        }
        let fentry = FSWATCH_FENTRY.present() == Some(true);
        assert_eq!(FSWATCH_FENTRY.refusal().is_none(), fentry, "{:?}", FSWATCH_FENTRY.refusal());
    }

    #[test]
    fn the_bypass_names_what_it_misses() {
        let err = check_with(BYPASS, |f| Some(!f.name.starts_with("uprobes"))).unwrap_err().to_string();
        assert!(
            err.contains("lacks uprobes (CONFIG_UPROBE_EVENTS)") && err.ends_with("Linux 4.17 or newer"),
            "{err}"
        );
    }
}
