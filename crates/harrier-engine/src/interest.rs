//! Which syscalls `harrier run` captures: those the loaded rules can match
//! (their evt.type sets) and those the state tables need to stay true. A
//! syscall neither needs is never attached.

use harrier_rules::ruleset::RuleSet;
use harrier_schema::{syscall_by_name, SyscallInfo, SYSCALLS};

/// Syscalls the process, fd and user tables are kept from (fork, exec and
/// exit come from sched tracepoints in every session).
pub use harrier_state::STATE_SYSCALLS;

/// The capture selection and where it came from.
#[derive(Debug)]
pub struct Interest {
    pub syscalls: Vec<&'static SyscallInfo>,
    /// Needed by rules only, by state only, by both.
    pub rules_only: usize,
    pub state_only: usize,
    pub both: usize,
    /// Rules that match every event type: capturing all syscalls for them
    /// would cost every syscall on the machine, so they see typed syscalls only.
    pub unbounded_rules: Vec<String>,
}

impl Interest {
    pub fn summary(&self) -> String {
        format!(
            "{} syscalls attached: {} for rules, {} for state, {} for both",
            self.syscalls.len(),
            self.rules_only,
            self.state_only,
            self.both
        )
    }
}

pub fn interest(rules: &RuleSet) -> Interest {
    let mut unbounded_rules = Vec::new();
    let mut wanted = vec![false; harrier_schema::MAX_SYSCALL_NR as usize + 1];
    let types = rules.event_types();
    if types.len() * 2 > harrier_rules::events::EVENT_TYPE_COUNT / 2 {
        // Some rule has no evt.type: typed syscalls only (see field doc).
        for r in rules.rules().iter().filter(|r| r.is_active()) {
            if r.event_types.len() * 2 > harrier_rules::events::EVENT_TYPE_COUNT / 2 {
                unbounded_rules.push(r.name.clone());
            }
        }
        for s in SYSCALLS.iter().filter(|s| s.params.is_some()) {
            wanted[s.nr as usize] = true;
        }
    } else {
        for t in types.iter().filter(|t| t.is_syscall()) {
            wanted[t.0 as usize] = true;
        }
    }
    let state: Vec<u32> = STATE_SYSCALLS.iter().filter_map(|n| syscall_by_name(n)).map(|s| s.nr).collect();
    let (mut rules_only, mut state_only, mut both) = (0, 0, 0);
    let mut syscalls = Vec::new();
    for s in SYSCALLS {
        let by_rules = wanted[s.nr as usize];
        let by_state = state.contains(&s.nr);
        match (by_rules, by_state) {
            (true, true) => both += 1,
            (true, false) => rules_only += 1,
            (false, true) => state_only += 1,
            (false, false) => continue,
        }
        syscalls.push(s);
    }
    Interest { syscalls, rules_only, state_only, both, unbounded_rules }
}

/// Syscalls whose events may use the kernel rings' reserve
/// (harrier_capture::Config::ring_reserve; exec always may, from which
/// every later alert names its process): the event types of the rules at
/// or above `keep_rank` (the outputs' keep_priority, as harrier_outputs::rank
/// counts: 0 is Emergency). A flood of lesser events then cannot crowd them
/// out in the kernel any more than in the outputs' queues.
pub fn priority_syscalls(rules: &RuleSet, keep_rank: usize) -> Vec<u32> {
    let mut nrs = Vec::new();
    let severe = rules
        .rules()
        .iter()
        .filter(|r| r.is_active() && harrier_outputs::rank(r.priority.as_str()) <= keep_rank);
    for r in severe {
        for t in r.event_types.iter().filter(|t| t.is_syscall()) {
            if let Some(s) = syscall_by_name(t.name()) {
                nrs.push(s.nr);
            }
        }
    }
    nrs.sort_unstable();
    nrs.dedup();
    nrs
}

#[cfg(test)]
mod tests {
    use super::*;
    use harrier_rules::ruleset::LoadOptions;

    #[test]
    fn the_severe_rules_events_may_use_the_reserve() {
        let yaml =
            "- rule: a\n  desc: d\n  condition: evt.type = ptrace\n  output: x\n  priority: CRITICAL\n\
                    - rule: b\n  desc: d\n  condition: evt.type = openat\n  output: x\n  priority: WARNING\n";
        let rules = RuleSet::load(&[("r.yaml", yaml)], &LoadOptions::default()).unwrap();
        let names = |v: Vec<u32>| -> Vec<&str> {
            v.iter().map(|&n| harrier_schema::syscall_by_nr(n).unwrap().name).collect()
        };
        assert_eq!(names(priority_syscalls(&rules, 2)), ["ptrace"]);
        assert_eq!(names(priority_syscalls(&rules, 4)), ["ptrace", "openat"]);
    }
}
