//! Where the programs go: which tracepoints each selected syscall needs, and
//! whether exits are reached by per-syscall tracepoints or by one dispatcher.
//!
//! Per-syscall: an unselected syscall runs no BPF (it only takes the kernel's
//! slow syscall path), but each selected event pays the perf tracepoint path,
//! and each tracepoint costs one RCU grace period (~75 ms here) to detach.
//! Dispatcher: one tp_btf sys_exit program on every syscall tail-calls the
//! selected ones; cheaper per selected event, dearer per unselected syscall,
//! one link. `auto` weighs the two with the figures in [`AUTO_RULE`].

use crate::tracefs;
use crate::Config;
use anyhow::{anyhow, bail, Context, Result};
use harrier_schema::SyscallInfo;
use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

/// How syscall exits reach their handlers (`--attach`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AttachMode {
    /// Chosen at start from the selection and the machine's syscall mix.
    #[default]
    Auto,
    /// One syscalls:sys_exit_X tracepoint per selected syscall.
    PerSyscall,
    /// One tp_btf sys_exit program, tail calls to the selected handlers.
    Dispatcher,
}

impl std::str::FromStr for AttachMode {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<AttachMode> {
        match s {
            "auto" => Ok(AttachMode::Auto),
            "per-syscall" => Ok(AttachMode::PerSyscall),
            "dispatcher" => Ok(AttachMode::Dispatcher),
            _ => bail!("unknown attach mode '{s}' (expected auto, per-syscall or dispatcher)"),
        }
    }
}

impl fmt::Display for AttachMode {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(match self {
            AttachMode::Auto => "auto",
            AttachMode::PerSyscall => "per-syscall",
            AttachMode::Dispatcher => "dispatcher",
        })
    }
}

/// The rule `auto` follows, in words (also printed by `harrier capture`).
pub const AUTO_RULE: &str = "dispatcher when per-syscall tracepoints would take more than 1 s to \
     detach (over 10 of them) or when the selected syscalls made up at least 36% of the machine's \
     syscalls in a 0.2 s sample; per-syscall otherwise";

/// Detaching a perf tracepoint waits for an RCU grace period under the
/// kernel's event_mutex (serial, ~75 ms each here): more than this many
/// would break the one-second stop.
pub const MAX_FAST_STOP_TRACEPOINTS: usize = 10;

/// Selected share of the machine's syscalls above which the dispatcher wins.
/// From `make bench-capture` (2026-11-23, stats off, wall ns per getpid): a
/// selected event costs ~73 ns less via the dispatcher (+215 vs +289), an
/// unselected syscall ~41 ns more (+116 vs +75); break-even 41 / (73 + 41).
pub const DISPATCHER_SHARE: f64 = 0.36;

pub const SAMPLE: Duration = Duration::from_millis(200);

/// Where one selected syscall's programs go.
pub(crate) struct Attachment {
    pub syscall: &'static SyscallInfo,
    /// Tracepoints its per-syscall handler sits on: sys_exit_X (sys_enter_X
    /// if it never returns), and the exit_also syscall's sys_exit.
    pub exit_ids: Vec<u64>,
    /// sys_enter_X, when an entry handler copies pointer arguments (TOCTOU).
    pub enter_id: Option<u64>,
}

impl Attachment {
    pub fn typed(&self) -> bool {
        self.syscall.params.is_some()
    }

    /// Handler on the per-syscall tracepoint(s).
    pub fn exit_prog(&self) -> String {
        match self.typed() {
            true => format!("hr_exit_{}", self.syscall.name),
            false => "hr_exit_generic".into(),
        }
    }

    /// Tail-call target of the dispatcher (None: never returns, so it stays
    /// on its sys_enter tracepoint in both modes).
    pub fn tail_prog(&self) -> Option<String> {
        match (self.syscall.noreturn, self.typed()) {
            (true, _) => None,
            (false, true) => Some(format!("hr_tail_{}", self.syscall.name)),
            (false, false) => Some("hr_tail_generic".into()),
        }
    }

    pub fn enter_prog(&self) -> Option<String> {
        self.enter_id.map(|_| format!("hr_enter_{}", self.syscall.name))
    }
}

/// Resolves every tracepoint the selection needs, with one id lookup (which
/// may have to mount tracefs privately). Syscalls without one are an error,
/// or skipped with `skip_missing` (--all): the kernel does not have them.
/// A syscall whose arguments are read at exit (`collect`) needs no sys_enter
/// tracepoint, and its exit is only its own (exit_also needs the entry copy).
pub(crate) fn plan(cfg: &Config) -> Result<Vec<Attachment>> {
    let main_tp = |s: &SyscallInfo| match s.noreturn {
        true => format!("sys_enter_{}", s.tracepoint),
        false => format!("sys_exit_{}", s.tracepoint),
    };
    let mut names = Vec::new();
    for s in &cfg.syscalls {
        names.push(main_tp(s));
        names.push(format!("sys_enter_{}", s.tracepoint));
        names.extend(s.exit_also.map(|o| format!("sys_exit_{o}")));
    }
    let found = tracefs::tracepoint_ids("syscalls", &names)?;
    let ids: HashMap<&str, u64> =
        names.iter().zip(found).filter_map(|(n, id)| Some((n.as_str(), id?))).collect();
    let id_of = |name: &str| ids.get(name).copied();
    let require = |name: String| id_of(&name).ok_or_else(|| anyhow!("no tracepoint {name} on this kernel"));
    let mut plan = Vec::new();
    for &s in &cfg.syscalls {
        let Some(main) = id_of(&main_tp(s)) else {
            if cfg.skip_missing {
                continue;
            }
            bail!("syscall '{}' has no tracepoint on this kernel", s.name);
        };
        let copies = !cfg.collect.reads_at_exit(s.nr);
        let mut exit_ids = vec![main];
        if let Some(other) = s.exit_also.filter(|_| copies) {
            exit_ids.push(require(format!("sys_exit_{other}"))?);
        }
        let enter_id = match s.params {
            Some(params) if copies && params.iter().any(|p| p.at_enter) => {
                Some(require(format!("sys_enter_{}", s.tracepoint))?)
            }
            _ => None,
        };
        plan.push(Attachment { syscall: s, exit_ids, enter_id });
    }
    Ok(plan)
}

/// Perf tracepoints (each one grace period to detach) a mode needs.
pub(crate) fn tracepoints(plan: &[Attachment], mode: AttachMode) -> usize {
    let enters = plan.iter().filter(|a| a.enter_id.is_some()).count();
    match mode {
        AttachMode::Dispatcher => enters + plan.iter().filter(|a| a.syscall.noreturn).count(),
        _ => enters + plan.iter().map(|a| a.exit_ids.len()).sum::<usize>(),
    }
}

/// What `auto` (or the user) chose, and why.
#[derive(Debug, Clone)]
pub struct AttachChoice {
    pub mode: AttachMode,
    pub reason: String,
    /// Selected share of the sampled syscalls, when a sample was taken.
    pub selected_share: Option<f64>,
    /// Perf tracepoints this mode attaches (each ~75 ms to detach).
    pub tracepoints: usize,
}

pub(crate) fn choose(requested: AttachMode, plan: &[Attachment]) -> Result<AttachChoice> {
    let mut choice = match requested {
        AttachMode::Auto => {
            rule(plan, || sample_syscalls(SAMPLE).context("sampling the machine's syscalls"))?
        }
        mode => AttachChoice { mode, reason: "requested".into(), selected_share: None, tracepoints: 0 },
    };
    choice.tracepoints = tracepoints(plan, choice.mode);
    Ok(choice)
}

/// What `auto` picks for `cfg` given a syscall sample (counts by number),
/// e.g. one taken while a benchmark's workload runs.
pub fn auto_choice(cfg: &Config, counts: &[u64]) -> Result<AttachChoice> {
    rule(&plan(cfg)?, || Ok(counts.to_vec()))
}

/// The rule of [`AUTO_RULE`]; samples only when the stop budget allows
/// per-syscall tracepoints at all.
fn rule(plan: &[Attachment], sample: impl FnOnce() -> Result<Vec<u64>>) -> Result<AttachChoice> {
    let per_syscall = tracepoints(plan, AttachMode::PerSyscall);
    if per_syscall > MAX_FAST_STOP_TRACEPOINTS {
        return Ok(AttachChoice {
            mode: AttachMode::Dispatcher,
            reason: format!("{per_syscall} per-syscall tracepoints would not detach within 1 s"),
            selected_share: None,
            tracepoints: tracepoints(plan, AttachMode::Dispatcher),
        });
    }
    let counts = sample()?;
    let total: u64 = counts.iter().sum();
    let selected: u64 = plan.iter().filter_map(|a| counts.get(a.syscall.nr as usize)).sum();
    let share = if total == 0 { 0.0 } else { selected as f64 / total as f64 };
    let mode = if share >= DISPATCHER_SHARE { AttachMode::Dispatcher } else { AttachMode::PerSyscall };
    Ok(AttachChoice {
        mode,
        reason: format!(
            "selected syscalls were {:.0}% of {total} sampled (dispatcher from {:.0}%)",
            share * 100.0,
            DISPATCHER_SHARE * 100.0
        ),
        selected_share: Some(share),
        tracepoints: tracepoints(plan, mode),
    })
}

mod sample_skel {
    include!(concat!(env!("OUT_DIR"), "/sample.skel.rs"));
}

/// The machine's syscalls by number over `window`, the sensor's own excluded.
pub fn sample_syscalls(window: Duration) -> Result<Vec<u64>> {
    use libbpf_rs::skel::{OpenSkel, SkelBuilder};
    use libbpf_rs::MapCore;
    let mut storage = std::mem::MaybeUninit::uninit();
    let mut open = sample_skel::SampleSkelBuilder::default().open(&mut storage)?;
    let rodata = open.maps.rodata_data.as_deref_mut().ok_or_else(|| anyhow!("no .rodata"))?;
    rodata.self_tgid = std::process::id();
    let skel = open.load().context("loading the syscall sampler")?;
    let link = skel.progs.hr_sample.attach().context("attaching the syscall sampler")?;
    std::thread::sleep(window);
    drop(link);
    let mut counts = Vec::new();
    for nr in 0..crate::NR_SLOTS as u32 {
        let per_cpu = skel.maps.counts.lookup_percpu(&nr.to_ne_bytes(), libbpf_rs::MapFlags::ANY)?;
        let sum = per_cpu.into_iter().flatten().map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap())).sum();
        counts.push(sum);
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use harrier_schema::syscall_by_name;

    fn plan_of(names: &[&str]) -> Vec<Attachment> {
        names
            .iter()
            .map(|n| {
                let s = syscall_by_name(n).unwrap();
                let enter_id = s.params.is_some_and(|p| p.iter().any(|p| p.at_enter)).then_some(2);
                Attachment { syscall: s, exit_ids: vec![1], enter_id }
            })
            .collect()
    }

    fn counts(pairs: &[(&str, u64)]) -> Vec<u64> {
        let mut v = vec![0; crate::NR_SLOTS];
        for (n, c) in pairs {
            v[syscall_by_name(n).unwrap().nr as usize] = *c;
        }
        v
    }

    #[test]
    fn auto_takes_the_dispatcher_when_the_selection_is_most_of_the_load() {
        let plan = plan_of(&["read", "write"]);
        let busy = rule(&plan, || Ok(counts(&[("read", 60), ("write", 30), ("futex", 10)]))).unwrap();
        assert_eq!(busy.mode, AttachMode::Dispatcher, "{}", busy.reason);
        let sparse = rule(&plan, || Ok(counts(&[("read", 10), ("futex", 90)]))).unwrap();
        assert_eq!(sparse.mode, AttachMode::PerSyscall, "{}", sparse.reason);
        let idle = rule(&plan, || Ok(counts(&[]))).unwrap();
        assert_eq!(idle.mode, AttachMode::PerSyscall, "an idle machine pays nothing per-syscall");
    }

    #[test]
    fn auto_keeps_the_stop_under_a_second_without_sampling() {
        let many: Vec<&str> = harrier_schema::SYSCALLS.iter().take(11).map(|s| s.name).collect();
        let c = rule(&plan_of(&many), || panic!("no sample needed")).unwrap();
        assert_eq!(c.mode, AttachMode::Dispatcher);
        // openat: an exit and an entry tracepoint per-syscall; only the entry with the dispatcher.
        let p = plan_of(&["openat", "exit_group", "read"]);
        assert_eq!(tracepoints(&p, AttachMode::PerSyscall), 4);
        assert_eq!(tracepoints(&p, AttachMode::Dispatcher), 2);
    }

    #[test]
    fn attach_modes_parse_by_name() {
        assert_eq!("dispatcher".parse::<AttachMode>().unwrap(), AttachMode::Dispatcher);
        assert!("fast".parse::<AttachMode>().unwrap_err().to_string().contains("unknown attach mode 'fast'"));
    }
}
