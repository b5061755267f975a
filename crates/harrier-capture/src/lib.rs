//! Harrier's exit-only syscall sensor, user-space side: choose syscalls,
//! load and attach the BPF programs, drain the per-CPU rings, report stats.
//!
//! ```no_run
//! let cfg = harrier_capture::Config::new(harrier_capture::parse_syscalls("openat,read")?);
//! let mut s = harrier_capture::Session::start(&cfg, Box::new(|ev| { let _ = ev; }))?;
//! s.drain()?;
//! println!("{}", s.stop()?.report());
//! # Ok::<(), anyhow::Error>(())
//! ```

pub mod aring;
pub mod attach;
pub mod checked;
pub mod collect;
mod cpu_layout;
pub mod current;
pub mod dircache;
mod empty;
pub mod guard;
pub mod guardian;
pub mod kfilter;
mod merge;
mod priority;
pub use merge::BACKLOG_BYTES;
mod ring;
mod session;
mod stats;
pub mod tracefs;
mod untold;
pub mod uread;
/// Kernel feature checks (shared with the bypass).
pub use harrier_kernel as kernel;
pub use untold::UntoldFds;

/// For tests of crates that load the sensor.
pub mod testing {
    /// BPF tests need root. Outside CI a non-root run skips them with a note;
    /// under CI=true a missing privilege is a failure, never a silent skip.
    pub fn bpf_available() -> bool {
        if unsafe { libc::geteuid() } == 0 {
            return true;
        }
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("CI=true but not running as root: BPF tests cannot load");
        }
        eprintln!("note: not root, skipping a BPF test");
        false
    }

    /// How many times slower than a normal machine the tests run:
    /// `HARRIER_TEST_SCALE` (default 1), set by scripts/vm-guest.sh for a
    /// kernel under emulation. Looping tests divide their counts by it and
    /// time limits multiply by it, so they test the same thing, just less often.
    pub fn scale() -> u32 {
        std::env::var("HARRIER_TEST_SCALE").ok().and_then(|v| v.parse().ok()).filter(|&n| n >= 1).unwrap_or(1)
    }

    /// `n` iterations scaled down, never below `min`.
    pub fn scaled(n: usize, min: usize) -> usize {
        (n / scale() as usize).max(min)
    }

    /// A time limit scaled up.
    pub fn slack(d: std::time::Duration) -> std::time::Duration {
        d * scale()
    }
}

pub use attach::{AttachChoice, AttachMode};
pub use collect::Collect;
pub use session::{enable_run_time_stats, Detach, EventSink, Pace, Session};
pub use stats::{ProgStats, Stats, UserCounters};

use anyhow::{bail, Result};
use harrier_schema::{syscall_by_name, SyscallInfo, SYSCALLS};

/// Kernel limits mirrored from bpf/include/harrier.h.
pub const SNAPLEN_MAX: u32 = 4096;
pub const DEFAULT_SNAPLEN: u32 = 80;
pub const DEFAULT_BUFFER_SIZE: usize = 8 << 20;
/// A ring must hold two of the largest events.
pub const MIN_BUFFER_SIZE: usize = 64 << 10;
/// The verifier accepts map value offsets below 512 MiB (BPF_MAX_VAR_OFF).
pub const MAX_BUFFER_SIZE: usize = 256 << 20;
/// Dispatcher tail-call slots (HR_NR_SLOTS): every syscall number fits.
pub const NR_SLOTS: usize = 512;
const _: () = assert!((harrier_schema::MAX_SYSCALL_NR as usize) < NR_SLOTS);

#[derive(Debug, Clone)]
pub struct Config {
    pub syscalls: Vec<&'static SyscallInfo>,
    /// With --all: leave out syscalls this kernel has no tracepoint for.
    pub skip_missing: bool,
    /// Only this process (thread group); None: every process.
    pub pid: Option<u32>,
    pub snaplen: u32,
    /// Bytes per ring: a power of two, at least [`MIN_BUFFER_SIZE`].
    pub buffer_size: usize,
    pub cpus_per_buffer: usize,
    /// Per-program run counts and times. Off by default: BPF_ENABLE_STATS
    /// turns on two clock reads per run for every BPF program on the machine
    /// (~57 ns each here) while it is held, not just for ours.
    pub run_time_stats: bool,
    /// How syscall exits reach their handlers.
    pub attach: AttachMode,
    /// Events the handlers do not send (see [`kfilter`]); None: send all.
    pub kernel_filter: Option<kfilter::KernelFilter>,
    /// Rules enforced in the kernel (see [`guard`]); None: nothing enforced.
    pub guard: Option<guard::Guard>,
    /// What each event collects (see [`collect`]); everything by default.
    pub collect: Collect,
    /// Bytes at the end of each per-CPU ring kept for priority events (the
    /// process life cycle and `priority_syscalls`): a flood of ordinary
    /// events cannot crowd them out; what it loses is counted as shed. Its
    /// last half is the life cycle's (exec too): a flood of priority
    /// syscalls cannot crowd that out either. 0: none. With the largest
    /// record's room it may take up to 2/3 of the ring.
    pub ring_reserve: usize,
    /// Syscalls whose events may use the reserve but its last half (and
    /// are kept by a full backlog). Exec always may, and uses all of it.
    pub priority_syscalls: Vec<u32>,
    /// The most bytes copied out of the rings and waiting for the sink
    /// ([`BACKLOG_BYTES`] by default); past it only priority events
    /// are kept, the rest counted as `backlog_shed`.
    pub backlog_bytes: usize,
    /// The floor of the attach plan: an empty program of the same type
    /// wherever a program would be linked (benchmarks; no events flow).
    pub empty_programs: bool,
    /// The least a sensor with entry copies can cost on the attach plan
    /// (benchmarks): the entry programs copy, every other program returns
    /// once it has the task; no events flow.
    pub entry_copies_only: bool,
    /// openat's exit handler on an fexit of `__x64_sys_openat` instead of
    /// its tracepoint (harrier-bench hook-costs: the same handler on a BPF
    /// trampoline, kernels that have them). Per-syscall attach only; refused
    /// before 6.12 (on 6.1 it crashed the traced processes: README Kernels).
    pub fexit_openat: bool,
    /// Walks stop at a directory the path cache holds ([`dircache`]), where
    /// the kernel has the hooks that invalidate it. On by default.
    pub dir_cache: bool,
    /// Time the steps of this syscall's handlers (bpf/include/steps.h;
    /// harrier-bench handler-steps): [`Session::step_sums`]. None: off.
    pub step_clock: Option<u32>,
    /// Stash slots threads may hold (a power of two up to [`STASH_SLOTS`]);
    /// one whose slot another thread holds keeps its entry copies in task
    /// storage (tests set 1 to make them). None: all of them.
    pub stash_slots: Option<u32>,
    /// Entry copies read user memory through the page tables where that
    /// works ([`uread`]); false: always by the helper. On by default.
    pub user_reads: bool,
    /// Tests: how many walked copies are checked against the helper's
    /// (uread.h: the first 64 by default).
    pub user_read_checks: Option<u64>,
    /// Tests: the check reads this many bytes further on, so it disagrees.
    pub user_read_check_skew: u64,
    /// The current task read from its per-CPU slot where that can be found
    /// ([`current`]); false: always by the helper. On by default.
    pub current_reads: bool,
    /// Tests: the check adds this to the slot's answer, so it disagrees.
    pub current_check_skew: u64,
}

/// `HR_STASH_SLOTS` (bpf/capture.bpf.c): entry copies' per-thread slots.
pub const STASH_SLOTS: u32 = 4096;

impl Config {
    pub fn new(syscalls: Vec<&'static SyscallInfo>) -> Config {
        Config {
            syscalls,
            skip_missing: false,
            pid: None,
            snaplen: DEFAULT_SNAPLEN,
            buffer_size: DEFAULT_BUFFER_SIZE,
            cpus_per_buffer: 1,
            run_time_stats: false,
            attach: AttachMode::Auto,
            kernel_filter: None,
            guard: None,
            collect: Collect::all(),
            ring_reserve: 0,
            priority_syscalls: Vec::new(),
            backlog_bytes: merge::BACKLOG_BYTES,
            empty_programs: false,
            entry_copies_only: false,
            fexit_openat: false,
            dir_cache: true,
            step_clock: None,
            stash_slots: None,
            user_reads: true,
            user_read_checks: None,
            user_read_check_skew: 0,
            current_reads: true,
            current_check_skew: 0,
        }
    }

    /// Every x86_64 syscall this kernel can trace.
    pub fn all() -> Config {
        Config { skip_missing: true, ..Config::new(SYSCALLS.iter().collect()) }
    }

    pub fn validate(&self) -> Result<()> {
        if self.syscalls.is_empty() {
            bail!("no syscalls selected");
        }
        if self.snaplen > SNAPLEN_MAX {
            bail!("snaplen {} is larger than the maximum, {SNAPLEN_MAX}", self.snaplen);
        }
        let size = self.buffer_size;
        if size < MIN_BUFFER_SIZE || !size.is_power_of_two() || size > MAX_BUFFER_SIZE {
            bail!("buffer size {size} must be a power of two between 64K and 256M");
        }
        if self.cpus_per_buffer == 0 {
            bail!("cpus per buffer must be at least 1");
        }
        if self.ring_reserve > 0 && self.ring_reserve + harrier_schema::wire::ARING_SLACK > size * 2 / 3 {
            bail!(
                "ring reserve {} leaves too little of the {size}-byte ring to ordinary events",
                self.ring_reserve
            );
        }
        Ok(())
    }
}

/// "openat,read,write" → the syscalls, or an error naming the unknown one.
pub fn parse_syscalls(list: &str) -> Result<Vec<&'static SyscallInfo>> {
    let mut out: Vec<&'static SyscallInfo> = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match syscall_by_name(name) {
            Some(s) if out.iter().any(|o| o.nr == s.nr) => {}
            Some(s) => out.push(s),
            None => bail!("unknown syscall '{name}'"),
        }
    }
    if out.is_empty() {
        bail!("empty syscall list");
    }
    Ok(out)
}

/// "8M", "64k", "4096" → bytes.
pub fn parse_size(s: &str) -> Result<usize> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    match num.parse::<usize>().ok().and_then(|n| n.checked_mul(mult)) {
        Some(n) => Ok(n),
        None => bail!("bad size '{s}' (expected e.g. 4096, 64K, 8M)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syscall_lists() {
        let v = parse_syscalls("openat, read,openat").unwrap();
        assert_eq!(v.iter().map(|s| s.name).collect::<Vec<_>>(), ["openat", "read"]);
        assert_eq!(parse_syscalls("read,frob").unwrap_err().to_string(), "unknown syscall 'frob'");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("8M").unwrap(), 8 << 20);
        assert_eq!(parse_size("64k").unwrap(), 65536);
        assert!(parse_size("lots").is_err());
        let mut c = Config::new(parse_syscalls("read").unwrap());
        c.buffer_size = 5000;
        assert!(c.validate().unwrap_err().to_string().contains("power of two"));
        c.buffer_size = 4096;
        assert!(c.validate().unwrap_err().to_string().contains("between 64K and 256M"));
        c.buffer_size = 65536;
        c.snaplen = 5000;
        assert!(c.validate().unwrap_err().to_string().contains("snaplen"));
    }
}
