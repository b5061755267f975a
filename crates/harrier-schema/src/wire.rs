//! The byte layout shared with bpf/include/harrier.h.
//!
//! ```text
//! 0      8      12     14     16            24
//! | ts   | tid  | type | len  | ret (s64)   | fixed params | u16 len + bytes ... |
//! ```

pub const HEADER_LEN: usize = 16;
/// Header plus the return value: where parameters start.
pub const PARAMS_BASE: usize = 24;

/// Set in the type field when the syscall's pointer arguments were read at
/// exit, not entry: it was already in flight when the sensor attached.
pub const ARGS_AT_EXIT: u16 = 0x8000;
/// Flag in the type field: the record's `ret` has no value (a legacy capture's
/// exit that carried none, as the libs' generic event; sysdig shows `<NA>`).
/// Never set by the sensor. Below every foreign or flag bit, above every type.
pub const NO_RET: u16 = 0x0800;

/// The length word of a variable parameter the kernel did not collect
/// (nobody asked for it; `HR_VAR_ABSENT`): absent, no bytes follow.
pub const VAR_ABSENT: u16 = 0xffff;

/// Bytes after a variable parameter's length word.
pub fn var_bytes(len_word: u16) -> usize {
    if len_word == VAR_ABSENT {
        0
    } else {
        len_word as usize
    }
}

/// Process life-cycle events from sched tracepoints (type numbers above any syscall).
pub const META_FORK: u16 = 1000;
pub const META_EXEC: u16 = 1001;
pub const META_EXIT: u16 = 1002;
pub const META_COMM: u16 = 1003;
/// `Meta::Fork` flags bit: the child shares its parent's fd table (a thread, CLONE_FILES).
pub const FORK_SHARES_FILES: u32 = 1;
/// `Meta::Fork` flags bit: the child's parent is the caller's parent (CLONE_PARENT).
pub const FORK_PARENTS_PARENT: u32 = 2;

/// Per-CPU array rings (`struct hr_aring`): head at 0, tail at 64, data here.
pub const ARING_DATA: usize = 128;
/// Room a record may need, rounded up to 8 (`HR_SCRATCH` in harrier.h): no
/// record starts later than `size - ARING_SLACK`. BPF is handed this value,
/// so the verifier refuses to load if it were too small.
pub const ARING_SLACK: usize = (16384 + 2 + 4096 + 4096 + 256 + 7) & !7;

/// Drop reasons, in the order of `enum hr_drop_reason`: no room in the
/// ring, no ring for the CPU, an ordinary event refused past the reserve
/// kept for priority events.
pub const DROP_REASONS: [&str; 3] = ["ring_full", "no_ring", "shed"];

/// Per-CPU counters, laid out as `struct hr_cpu_stats`.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct CpuStats {
    pub events: u64,
    pub drops: [u64; 3],
    pub toctou_fallbacks: u64,
    pub stash_fails: u64,
    pub read_faults: u64,
    pub truncated: u64,
    /// Not sent: dropped by the kernel-side filter (counted in `events` too).
    pub filtered: u64,
    /// Path walks that stopped at a directory the path cache held
    /// (bpf/include/tree/dircache.h), and those that looked and missed.
    pub dir_hits: u64,
    pub dir_misses: u64,
    /// Path walks that stopped at a cached directory no kernel filter path
    /// can match below (bpf/include/kfdirs.h): the event kept back.
    pub dir_clear: u64,
    /// Entry copies kept in the thread's task storage: its stash slot was
    /// another thread's (bpf/capture.bpf.c, stash_slots).
    pub stash_in_task: u64,
}

impl CpuStats {
    pub const SIZE: usize = 13 * 8;

    pub fn from_bytes(b: &[u8]) -> CpuStats {
        let u = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
        CpuStats {
            events: u(0),
            drops: [u(1), u(2), u(3)],
            toctou_fallbacks: u(4),
            stash_fails: u(5),
            read_faults: u(6),
            truncated: u(7),
            filtered: u(8),
            dir_hits: u(9),
            dir_misses: u(10),
            dir_clear: u(11),
            stash_in_task: u(12),
        }
    }

    pub fn add(&mut self, o: &CpuStats) {
        self.events += o.events;
        for (d, s) in self.drops.iter_mut().zip(o.drops) {
            *d += s;
        }
        self.toctou_fallbacks += o.toctou_fallbacks;
        self.stash_fails += o.stash_fails;
        self.read_faults += o.read_faults;
        self.truncated += o.truncated;
        self.filtered += o.filtered;
        self.dir_hits += o.dir_hits;
        self.dir_misses += o.dir_misses;
        self.dir_clear += o.dir_clear;
        self.stash_in_task += o.stash_in_task;
    }

    pub fn dropped(&self) -> u64 {
        self.drops.iter().sum()
    }
}

/// The fixed 16-byte header, read without copying the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub ts: u64,
    pub tid: u32,
    /// Syscall number or `META_*`, without the `ARGS_AT_EXIT` and `NO_RET` flags.
    pub kind: u16,
    pub len: u16,
    pub args_at_exit: bool,
    /// `ret` has no value ([`NO_RET`]).
    pub no_ret: bool,
}

impl Header {
    pub fn parse(b: &[u8]) -> Option<Header> {
        if b.len() < HEADER_LEN {
            return None;
        }
        let kind = u16::from_le_bytes(b[12..14].try_into().unwrap());
        Some(Header {
            ts: u64::from_le_bytes(b[0..8].try_into().unwrap()),
            tid: u32::from_le_bytes(b[8..12].try_into().unwrap()),
            kind: kind & !(ARGS_AT_EXIT | NO_RET),
            len: u16::from_le_bytes(b[14..16].try_into().unwrap()),
            args_at_exit: kind & ARGS_AT_EXIT != 0,
            no_ret: kind & NO_RET != 0,
        })
    }

    /// Marks a record's `ret` as having no value ([`NO_RET`]).
    pub fn set_no_ret(rec: &mut [u8]) {
        if rec.len() >= HEADER_LEN {
            let kind = u16::from_le_bytes(rec[12..14].try_into().unwrap()) | NO_RET;
            rec[12..14].copy_from_slice(&kind.to_le_bytes());
        }
    }

    pub fn is_meta(&self) -> bool {
        self.kind >= META_FORK
    }
}
