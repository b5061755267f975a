//! Entry copies of user memory read through the task's page tables
//! (bpf/include/uread.h) instead of by bpf_probe_read_user(_str), which
//! costs ~100 ns a call on kernels with the SRSO and retpoline mitigations.
//! Here: what the programs must know of the machine (the paging depth, where
//! RAM ends, how wide a physical address is), and whether the walk is used.

use crate::kernel::RDONLY_CAST;

/// How a session's programs copy user memory at syscall entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserReads {
    /// By the page-table walk: the tables' depth, one past the highest RAM
    /// address, and the physical address bits of an entry.
    Walk { levels: u32, ram_end: u64, pfn_mask: u64 },
    /// By the helper, and why.
    Helper(String),
}

/// What the programs say of the walk once they ran (uread.h's state).
pub type WalkState = crate::checked::Checked;

impl UserReads {
    /// Whether the session walks: asked for, the kernel has plain loads
    /// (bpf_rdonly_cast), and this machine's layout can be read.
    pub fn choose(asked: bool) -> UserReads {
        if !asked {
            return UserReads::Helper("turned off".into());
        }
        if let Some(why) = RDONLY_CAST.missing() {
            return UserReads::Helper(why);
        }
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        Self::from_machine(&read("/proc/iomem"), &read("/proc/cpuinfo"), five_level_paging())
    }

    /// `choose`'s reading of /proc/iomem and /proc/cpuinfo (tests give them).
    pub fn from_machine(iomem: &str, cpuinfo: &str, five_level: bool) -> UserReads {
        let Some(ram_end) = ram_end(iomem) else {
            return UserReads::Helper("/proc/iomem shows no RAM addresses (it needs root)".into());
        };
        let Some(bits) = phys_bits(cpuinfo) else {
            return UserReads::Helper("/proc/cpuinfo gives no physical address size".into());
        };
        UserReads::Walk {
            levels: if five_level { 5 } else { 4 },
            ram_end,
            pfn_mask: ((1u64 << bits) - 1) & !0xfff,
        }
    }

    /// The programs' uread_levels, uread_ram_end and uread_pfn_mask (0: the helper).
    pub fn rodata(&self) -> (u32, u64, u64) {
        match *self {
            UserReads::Walk { levels, ram_end, pfn_mask } => (levels, ram_end, pfn_mask),
            UserReads::Helper(_) => (0, 0, 0),
        }
    }

    pub fn is_walk(&self) -> bool {
        matches!(self, UserReads::Walk { .. })
    }

    /// One line for the start of a session.
    pub fn describe(&self) -> String {
        match self {
            UserReads::Walk { levels, .. } => {
                format!("entry copies: read through the page tables ({levels} levels), checked against the helper first")
            }
            UserReads::Helper(why) => format!("entry copies: read by the helper ({why})"),
        }
    }
}

/// One past the highest "System RAM" address; None where it reads as 0 (not root).
fn ram_end(iomem: &str) -> Option<u64> {
    let end = iomem
        .lines()
        .filter_map(|l| l.split_once(" : "))
        .filter(|(_, name)| name.trim() == "System RAM")
        .filter_map(|(range, _)| u64::from_str_radix(range.trim().split_once('-')?.1, 16).ok())
        .max()?;
    (end > 0).then(|| end + 1)
}

/// "address sizes : 48 bits physical, 48 bits virtual" → 48.
fn phys_bits(cpuinfo: &str) -> Option<u32> {
    let line = cpuinfo.lines().find(|l| l.starts_with("address sizes"))?;
    let bits: u32 = line.split_once(':')?.1.split_whitespace().next()?.parse().ok()?;
    (32..=52).contains(&bits).then_some(bits)
}

/// Whether user space reaches past 47 bits (5-level paging): the kernel
/// gives such an address only where it has one, to a hint above them.
fn five_level_paging() -> bool {
    let hint = (1usize << 56) as *mut libc::c_void;
    let p =
        unsafe { libc::mmap(hint, 4096, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
    if p == libc::MAP_FAILED {
        return false;
    }
    unsafe { libc::munmap(p, 4096) };
    p as usize >= 1 << 47
}

#[cfg(test)]
mod tests {
    use super::*;

    const IOMEM: &str = "00000000-00000fff : Reserved\n00001000-0009fbff : System RAM\n\
                         000f0000-000fffff : System ROM\n00100000-bfffffff : System RAM\n  \
                         01000000-01ffffff : Kernel code\n100000000-63fffffff : System RAM\n";
    const CPUINFO: &str = "processor\t: 0\naddress sizes\t: 48 bits physical, 48 bits virtual\n";

    #[test]
    fn the_layout_comes_from_iomem_and_cpuinfo() {
        let r = UserReads::from_machine(IOMEM, CPUINFO, false);
        assert_eq!(r, UserReads::Walk { levels: 4, ram_end: 0x640000000, pfn_mask: 0x0000_ffff_ffff_f000 });
        let r =
            UserReads::from_machine(IOMEM, &CPUINFO.replace("48 bits physical", "52 bits physical"), true);
        assert_eq!(r, UserReads::Walk { levels: 5, ram_end: 0x640000000, pfn_mask: 0x000f_ffff_ffff_f000 });
    }

    #[test]
    fn without_root_or_a_size_the_helper_copies() {
        let hidden = "00000000-00000000 : System RAM\n00000000-00000000 : System RAM\n";
        let r = UserReads::from_machine(hidden, CPUINFO, false);
        assert!(matches!(&r, UserReads::Helper(why) if why.contains("needs root")), "{r:?}");
        let r = UserReads::from_machine(IOMEM, "processor\t: 0\n", false);
        assert!(matches!(&r, UserReads::Helper(why) if why.contains("physical address size")), "{r:?}");
        assert_eq!(UserReads::choose(false), UserReads::Helper("turned off".into()));
    }

    #[test]
    fn a_cpu_without_la57_has_four_levels() {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
        let la57 =
            cpuinfo.lines().any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "la57"));
        assert!(la57 || !five_level_paging(), "5-level paging on a CPU without la57");
    }
}
