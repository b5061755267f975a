//! What `harrier run` has the kernel collect (harrier_capture::Collect): the
//! parameters its rules, outputs and state tables read, and nothing else.
//!
//! The state tables read every parameter but a few, listed in [`OPTIONAL`]:
//! the path an open was asked for (the kernel's `fullpath` names the file),
//! the address a connect was asked for (the socket's `peer` and `local` are
//! the truth), an exec's filename and argv (the new image's exe and args
//! are read from the task), its environment (only proc.env reads it), and
//! the data buffers. Each of those is collected only when a rule or output
//! field can read it. When no field reads a syscall's pointer arguments as
//! the caller passed them, its entry copies go too: no sys_enter program, and
//! a failed call's arguments are read at exit (flagged `args_at_exit`).

use harrier_capture::Collect;
use harrier_rules::events::EventType;
use harrier_rules::expr::FieldSel;
use harrier_rules::fields::{harrier_param_name, FieldArg};
use harrier_rules::ruleset::RuleSet;
use harrier_rules::Field;
use harrier_schema::SyscallInfo;

/// When a parameter no state table needs is still collected.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// Only for a field that reads it.
    Asked,
    /// Also when the call failed: a failed open has no `fullpath`, so its
    /// path is the only name the file has.
    OnFailure,
}

/// Parameters no state table reads: (syscalls, parameter, when kept).
const OPTIONAL: &[(&[&str], &str, Keep)] = &[
    (&["open", "openat", "openat2", "creat"], "path", Keep::OnFailure),
    (&["connect"], "addr", Keep::Asked),
    (&["execve", "execveat"], "filename", Keep::Asked),
    (&["execve", "execveat"], "argv", Keep::Asked),
    (&["execve", "execveat"], "env", Keep::Asked),
    (&["read", "write", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev"], "data", Keep::Asked),
    (&["sendto", "sendmsg", "recvfrom", "recvmsg"], "data", Keep::Asked),
];

/// Which parameters the rules' and outputs' fields can read.
enum Reads {
    /// Every parameter of every event (evt.args, evt.arg[0]...).
    All,
    /// These parameters, by Harrier's names.
    Some(Vec<String>),
}

/// The Harrier parameter of `syscall` that Falco's parameter `name` reads
/// (evt.arg.pathname of an execveat is its filename).
fn param_source(syscall: &str, name: &str) -> String {
    let falco =
        harrier_schema::falco_params::params(syscall).and_then(|ps| ps.iter().find(|p| p.name == name));
    falco.map_or_else(|| harrier_param_name(name), |p| p.src).to_string()
}

fn reads(syscall: &str, sels: &[&FieldSel], keep_env: bool) -> Reads {
    let mut names: Vec<String> = Vec::new();
    for sel in sels {
        match sel.field {
            Field::EvtArg | Field::EvtRawarg => match &sel.arg {
                FieldArg::Key(k) => names.push(param_source(syscall, k)),
                _ => return Reads::All,
            },
            Field::EvtArgs | Field::EvtInfo => return Reads::All,
            Field::FdNameraw => names.push("path".into()),
            Field::FsPathName | Field::FsPathNameraw => names.push("path".into()),
            Field::EvtBuffer | Field::EvtBuflen => names.push("data".into()),
            _ => {}
        }
    }
    if keep_env {
        names.push("env".into());
    }
    Reads::Some(names)
}

/// The selections of the active rules that can match events of syscall `s`:
/// a rule's condition and output are only evaluated on its own event types.
fn selections_for<'r>(rules: &'r RuleSet, s: &SyscallInfo) -> Vec<&'r FieldSel> {
    let Some(ty) = EventType::from_name(s.name) else { return Vec::new() };
    let matching = rules.rules().iter().filter(|r| r.is_active() && r.event_types.contains(ty));
    matching.flat_map(|r| r.selections()).collect()
}

/// Collect for the attached `syscalls`, given the rule set and whether the
/// state keeps environments (proc.env).
pub fn collect(rules: &RuleSet, syscalls: &[&'static SyscallInfo], keep_env: bool) -> Collect {
    let mut c = Collect::all();
    for s in syscalls {
        let Some(params) = s.params else { continue };
        let Reads::Some(read) = reads(s.name, &selections_for(rules, s), keep_env) else { continue };
        let mut at_entry_read = false;
        for p in params.iter() {
            let optional = OPTIONAL.iter().find(|(sys, name, _)| sys.contains(&s.name) && *name == p.name);
            let asked = read.iter().any(|r| r == p.name);
            match optional {
                Some(_) if asked => at_entry_read |= p.at_enter,
                // Known names; an error would mean the table and this list disagree.
                Some((_, _, Keep::Asked)) => c.skip(s.name, p.name).expect("optional parameter"),
                Some((_, _, Keep::OnFailure)) => {
                    c.skip_on_success(s.name, p.name).expect("optional parameter")
                }
                None => at_entry_read |= p.at_enter && p.wire == harrier_schema::Wire::Bytes,
            }
        }
        if params.iter().any(|p| p.at_enter) && !at_entry_read {
            c.read_at_exit(s.name).expect("has entry copies");
        }
    }
    c
}

/// Syscalls that keep their entry copies when copies are turned off: after
/// a successful exec the caller's memory is gone, so there the copy is the
/// only source of the arguments, not a guard against races.
const COPIED_ONLY_AT_ENTRY: &[&str] = &["execve", "execveat"];

/// No entry copies (`entry_copies: false`, `harrier run --no-entry-copies`):
/// pointer arguments are read at exit, as Falco reads them where its TOCTOU
/// programs do not attach. No sys_enter program runs (on this kind of host
/// about a third of `harrier run`'s added cost on an open-heavy load), but a
/// thread that rewrites a path while the call runs decides what fd.nameraw
/// says; the kernel's truth (fd.name, a socket's peer) stays exact.
pub fn without_entry_copies(c: &mut Collect, syscalls: &[&'static SyscallInfo]) {
    for s in syscalls {
        let copied = s.params.unwrap_or_default().iter().any(|p| p.at_enter);
        if copied && !COPIED_ONLY_AT_ENTRY.contains(&s.name) {
            c.read_at_exit(s.name).expect("has entry copies");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harrier_rules::ruleset::LoadOptions;

    fn rules(yaml: &str) -> RuleSet {
        RuleSet::load(&[("r.yaml", yaml)], &LoadOptions::default()).unwrap()
    }

    fn syscalls(names: &str) -> Vec<&'static SyscallInfo> {
        names.split(',').map(|n| harrier_schema::syscall_by_name(n).unwrap()).collect()
    }

    const OPEN_RULE: &str = "- rule: r\n  desc: d\n  condition: evt.type = openat and fd.name = /etc/shadow\n  output: \"%fd.name %proc.cmdline\"\n  priority: WARNING\n";

    #[test]
    fn without_entry_copies_reads_at_exit_all_but_an_exec() {
        let calls = syscalls("openat,connect,execve");
        let mut c = Collect::all();
        assert!(calls.iter().all(|s| !c.reads_at_exit(s.nr)), "{}", c.summary());
        without_entry_copies(&mut c, &calls);
        assert!(c.reads_at_exit(calls[0].nr) && c.reads_at_exit(calls[1].nr), "{}", c.summary());
        assert!(!c.reads_at_exit(calls[2].nr), "an exec's copy is its only source: {}", c.summary());
    }

    #[test]
    fn rules_that_read_no_argument_leave_the_copies_out() {
        let c = collect(&rules(OPEN_RULE), &syscalls("openat,connect,execve"), false);
        assert_eq!(
            c.summary(),
            "connect (no addr, read at exit); execve (no filename, no argv, no env, read at exit); \
             openat (path on failure only, read at exit)"
        );
    }

    #[test]
    fn a_field_that_reads_an_argument_keeps_it_and_its_entry_copy() {
        let r = rules(&OPEN_RULE.replace("fd.name = /etc/shadow", "evt.arg.name = /etc/shadow"));
        let c = collect(&r, &syscalls("openat,execve"), true);
        let openat = harrier_schema::syscall_by_name("openat").unwrap().nr;
        assert_eq!((c.skipped(openat), c.skipped_on_success(openat)), (0, 0));
        assert!(!c.reads_at_exit(openat), "evt.arg.name is the path as passed: copied at entry");
        assert_eq!(c.summary(), "execve (no filename, no argv, read at exit)", "proc.env keeps env");
        // evt.args reads every parameter, of the rule's own events only.
        let all = rules(&OPEN_RULE.replace("%fd.name", "%evt.args"));
        let c = collect(&all, &syscalls("openat,execve"), false);
        assert_eq!(c.summary(), "execve (no filename, no argv, no env, read at exit)");
    }

    #[test]
    fn falco_parameter_names_keep_the_harrier_parameter_they_read() {
        let r = rules(
            &OPEN_RULE
                .replace("openat", "execveat")
                .replace("fd.name = /etc/shadow", "evt.arg.pathname = /x"),
        );
        let c = collect(&r, &syscalls("execveat"), false);
        assert_eq!(c.summary(), "execveat (no argv, no env)", "pathname is execveat's filename");
    }
}
