//! What Harrier needs from the kernel, probed before loading: a kernel that
//! lacks a feature gets one line naming it and the first Linux that has it,
//! instead of a verifier log. The newest entry of each list sets the oldest
//! supported kernel (README, "Kernels"). Used by the capture engine and the bypass.

use anyhow::{bail, Result};
use libbpf_sys as sys;

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
    fn present(&self) -> Option<bool> {
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
        };
        match r {
            1 => Some(true),
            0 => Some(false),
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

    #[test]
    fn the_bypass_names_what_it_misses() {
        let err = check_with(BYPASS, |f| Some(!f.name.starts_with("uprobes"))).unwrap_err().to_string();
        assert!(
            err.contains("lacks uprobes (CONFIG_UPROBE_EVENTS)") && err.ends_with("Linux 4.17 or newer"),
            "{err}"
        );
    }
}
