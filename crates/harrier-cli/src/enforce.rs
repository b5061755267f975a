//! `enforce`: which rules act on the process, what the kernel decides of
//! them (harrier-engine's guard), and the host cgroups it may trust.

use anyhow::{bail, Result};
use harrier_capture::guard::Guard;
use harrier_engine::enforce::{Action, Enforcer};
use harrier_engine::guard::{self, Decision};
use harrier_falco::config::{EnforceEntry, RunConfig};
use harrier_rules::ruleset::RuleSet;
use harrier_schema::SyscallInfo;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The enforced rules, kill ones first (their guard ids), each once.
pub(crate) fn select(rules: &RuleSet, entries: &[EnforceEntry]) -> Result<Vec<(u32, Action)>> {
    let mut out: Vec<(u32, Action)> = Vec::new();
    for e in entries {
        let named: Vec<u32> = rules
            .rules()
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_active() && e.what.names(&r.name, &r.tags))
            .map(|(i, _)| i as u32)
            .collect();
        if named.is_empty() {
            bail!("enforce: {:?} names no enabled rule", e.what);
        }
        for i in named {
            match out.iter_mut().find(|(r, _)| *r == i) {
                Some(x) => x.1 = e.action,
                None => out.push((i, e.action)),
            }
        }
    }
    out.sort_by_key(|(_, a)| *a != Action::Kill);
    Ok(out)
}

pub(crate) struct Setup {
    pub enforced: Vec<(u32, Action)>,
    pub guard: Option<Guard>,
    pub enforcer: Enforcer,
}

/// The kernel's programs for the kill rules and the user-space side for all.
pub(crate) fn setup(
    rules: &RuleSet,
    c: &RunConfig,
    syscalls: &[&'static SyscallInfo],
) -> Result<Option<Setup>> {
    let enforced = select(rules, &c.enforce)?;
    if enforced.is_empty() {
        return Ok(None);
    }
    let kills: Vec<u32> = enforced.iter().filter(|(_, a)| *a == Action::Kill).map(|(r, _)| *r).collect();
    let all: Vec<u32> = enforced.iter().map(|(r, _)| *r).collect();
    let decisions =
        guard::compile(rules, &all, &c.enforce_exempt, syscalls, c.enforce_rate, c.enforce_hold)?.decisions;
    let guard = if kills.is_empty() {
        None
    } else {
        Some(
            guard::compile(rules, &kills, &c.enforce_exempt, syscalls, c.enforce_rate, c.enforce_hold)?.guard,
        )
    };
    let enforcer =
        Enforcer::new(rules.rules().len(), &enforced, decisions, c.enforce_exempt.clone(), c.enforce_rate);
    Ok(Some(Setup { enforced, guard, enforcer }))
}

/// One line per enforced rule for the start of `harrier run`.
pub(crate) fn summary(enforced: &[(u32, Action)], decisions: &[Decision]) -> Vec<String> {
    enforced
        .iter()
        .zip(decisions)
        .map(|((_, a), d)| {
            let act = if *a == Action::Kill { "kill" } else { "dry-run" };
            format!("enforce ({act}) '{}': {}", d.rule, d.summary())
        })
        .collect()
}

/// Cgroup v2 ids that hold no container (by the same tests as the state's
/// container lookup): the kernel decides container.* terms for their tasks.
pub(crate) fn host_cgroups() -> Vec<u64> {
    let root = Path::new("/sys/fs/cgroup");
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        if out.len() >= 8000 {
            break;
        }
        let rel = format!("/{}", dir.strip_prefix(root).unwrap_or(&dir).display());
        let rel = if rel == "/" { rel } else { rel.trim_end_matches('/').to_string() };
        let leaf = rel.rsplit('/').find(|c| !c.is_empty()).unwrap_or("");
        let runc = !leaf.is_empty() && Path::new("/run/runc").join(leaf).join("state.json").exists();
        if harrier_state::container::id_from_cgroup(&rel).is_some() || runc {
            continue; // nor below it: a container's own cgroups
        }
        if let Ok(m) = std::fs::metadata(&dir) {
            out.push(m.ino());
        }
        if let Ok(rd) = std::fs::read_dir(&dir) {
            stack.extend(rd.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()));
        }
    }
    out
}

/// Tasks the kernel holds whose event the rules have judged (it is older
/// than the latest event by a millisecond, or the hold is 200 ms old):
/// killed ones are forgotten, the others resumed.
pub(crate) fn resolve_held(s: &harrier_capture::Session, e: &mut harrier_engine::Engine) {
    let now = harrier_engine::monotonic_now();
    for h in s.held() {
        if h.ts + 1_000_000 > e.last_ts && now.saturating_sub(h.ts) < 200_000_000 {
            continue;
        }
        let killed = e.enforcer_mut().is_some_and(|en| en.take_killed(h.tid, h.ts));
        if !killed {
            if let Some(en) = e.enforcer_mut() {
                en.resumed(h.rule);
            }
        }
        s.release(&h, !killed);
    }
}
