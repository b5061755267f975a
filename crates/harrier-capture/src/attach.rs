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
use anyhow::{anyhow, bail, Result};
use harrier_schema::SyscallInfo;
use std::collections::HashMap;
use std::fmt;

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
pub const AUTO_RULE: &str = "per-syscall (an unselected syscall runs no BPF), unless that means more \
     than 80 tracepoints, which would take over 4 s to detach: then the dispatcher";

/// Detaching a perf tracepoint waits for grace periods under the kernel's
/// event_mutex (serial, ~50 ms each here). The final figures come first
/// (Session::finish), but the process exits only once they are detached:
/// more than this many would keep it past 4 s.
///
/// Why per-syscall is the default, measured here (2026-11-26, Falco's stable
/// rules, thread CPU ns per syscall, 3 interleaved rounds): a getpid loop (an
/// unselected syscall) +20-35 per-syscall, +76-79 with the dispatcher; an
/// open/close/connect/exec mix (every syscall selected) +400-440 either way.
pub const MAX_PER_SYSCALL_TRACEPOINTS: usize = 80;

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
        AttachMode::Auto => rule(plan),
        mode => AttachChoice { mode, reason: "requested".into(), selected_share: None, tracepoints: 0 },
    };
    choice.tracepoints = tracepoints(plan, choice.mode);
    Ok(choice)
}

/// What `auto` picks for `cfg`.
pub fn auto_choice(cfg: &Config) -> Result<AttachChoice> {
    Ok(rule(&plan(cfg)?))
}

/// The rule of [`AUTO_RULE`].
fn rule(plan: &[Attachment]) -> AttachChoice {
    let n = tracepoints(plan, AttachMode::PerSyscall);
    let (mode, reason) = match n > MAX_PER_SYSCALL_TRACEPOINTS {
        true => {
            (AttachMode::Dispatcher, format!("{n} per-syscall tracepoints would take over 4 s to detach"))
        }
        false => (AttachMode::PerSyscall, format!("{n} tracepoints; an unselected syscall runs no BPF")),
    };
    AttachChoice { mode, reason, selected_share: None, tracepoints: tracepoints(plan, mode) }
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

    #[test]
    fn auto_takes_per_syscall_tracepoints_unless_there_are_too_many() {
        let c = rule(&plan_of(&["read", "write", "openat"]));
        assert_eq!((c.mode, c.tracepoints), (AttachMode::PerSyscall, 4), "{}", c.reason);
        let many: Vec<&str> = harrier_schema::SYSCALLS.iter().take(81).map(|s| s.name).collect();
        let c = rule(&plan_of(&many));
        assert_eq!(c.mode, AttachMode::Dispatcher, "{}", c.reason);
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
