//! Which syscalls each event kind needs, by tracepoint name: the exit
//! program is attached to those only (bpf/include/fswatch/syscalls.h's
//! switch is the other half and must list the same ones).

use anyhow::{bail, Result};

/// (syscall, event kinds that need it): FW_EV_* numbers (wire::KINDS).
/// unlinkat serves both unlink and rmdir (AT_REMOVEDIR).
pub const SYSCALLS: [(&str, &[u16]); 35] = [
    ("open", &[1]),
    ("creat", &[1]),
    ("openat", &[1]),
    ("openat2", &[1]),
    ("mkdir", &[2]),
    ("mkdirat", &[2]),
    ("link", &[3]),
    ("symlink", &[3]),
    ("linkat", &[3]),
    ("symlinkat", &[3]),
    ("rename", &[4]),
    ("renameat", &[4]),
    ("renameat2", &[4]),
    ("fchmod", &[5]),
    ("fchown", &[5]),
    ("ftruncate", &[5]),
    ("chmod", &[5]),
    ("chown", &[5]),
    ("lchown", &[5]),
    ("truncate", &[5]),
    ("utime", &[5]),
    ("utimes", &[5]),
    ("fchmodat", &[5]),
    ("fchmodat2", &[5]),
    ("fchownat", &[5]),
    ("futimesat", &[5]),
    ("utimensat", &[5]),
    ("unlink", &[6]),
    ("unlinkat", &[6, 7]),
    ("rmdir", &[7]),
    ("write", &[8]),
    ("pwrite64", &[8]),
    ("writev", &[8]),
    ("pwritev", &[8]),
    ("pwritev2", &[8]),
];

/// The syscalls the kinds in `mask` (1 << kind) need.
pub fn selected(mask: u32) -> Vec<&'static str> {
    SYSCALLS.iter().filter(|(_, kinds)| kinds.iter().any(|k| mask & (1 << k) != 0)).map(|(n, _)| *n).collect()
}

/// The syscalls that move or remove directories: with the verdict cache on,
/// their exits are attached whatever the events (bpf/include/fswatch/cache.h
/// ends their invalidation there).
pub const SHAPE_CHANGERS: [&str; 5] = ["rename", "renameat", "renameat2", "rmdir", "unlinkat"];

/// The selected syscalls, and with `shape` the ones that move or remove directories.
pub fn attached(mask: u32, shape: bool) -> Vec<&'static str> {
    let mut v = selected(mask);
    if shape {
        v.extend(SHAPE_CHANGERS.iter().filter(|n| !v.contains(n)).collect::<Vec<_>>());
    }
    v
}

/// (tracepoint name, id) of each attached syscall's exit tracepoint
/// (`attached`). A syscall this kernel lacks (fchmodat2 before 6.6) is left
/// out: nothing can make it.
pub fn exit_tracepoints(mask: u32, shape: bool) -> Result<Vec<(String, u64)>> {
    let names: Vec<String> = attached(mask, shape).iter().map(|n| format!("sys_exit_{n}")).collect();
    let ids = harrier_capture::tracefs::tracepoint_ids("syscalls", &names)?;
    let found: Vec<(String, u64)> = names.into_iter().zip(ids).filter_map(|(n, id)| Some((n, id?))).collect();
    if found.is_empty() {
        bail!("none of the selected syscalls has an exit tracepoint on this kernel");
    }
    Ok(found)
}

/// The bit of (dev, ino) in the kernel's watch summary (fw_watch_bit, state.h).
pub fn watch_bit(dev: u32, ino: u64) -> usize {
    ((ino ^ ((dev as u64) << 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 51) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_select_their_syscalls() {
        let rmdir = selected(1 << 7);
        assert_eq!(rmdir, ["unlinkat", "rmdir"]);
        assert!(selected(1 << 1).contains(&"openat2"));
        assert!(!selected(1 << 1).contains(&"write"), "modify's syscalls only with modify");
        assert_eq!(selected(0x1fe).len(), SYSCALLS.len(), "every kind: every syscall");
        assert!(watch_bit(u32::MAX, u64::MAX) < 8192);
        let open_only = attached(1 << 1, true);
        for n in SHAPE_CHANGERS {
            assert!(open_only.contains(&n), "{n}: the verdict cache needs its exit");
        }
        assert_eq!(attached(0x1fe, true).len(), SYSCALLS.len(), "no syscall twice");
        assert!(!attached(1 << 1, false).contains(&"rmdir"));
    }
}
