use super::*;
use harrier_capture::guard::{Ins, Mode, MAX_STR};
use harrier_rules::ruleset::LoadOptions;
use harrier_schema::syscall_by_name;

/// What the kernel sees of one event.
#[derive(Clone)]
pub(crate) struct Ev {
    pub ret: i64,
    pub flags: u32,
    pub path: Option<&'static str>,
    pub comm: &'static str,
    pub ancestors: Vec<&'static str>,
    pub exe: Option<&'static str>,
    pub args: Option<&'static str>,
    pub uid: u32,
    pub host: bool,
    /// The record's variable parameters, and its fixed u32 (ptrace's request).
    pub params: Vec<&'static str>,
    pub num: u32,
    /// ns since the process started.
    pub age: u64,
}

pub(crate) fn ev(comm: &'static str, path: &'static str) -> Ev {
    Ev {
        ret: 3,
        flags: 0,
        path: Some(path),
        comm,
        ancestors: vec!["bash", "sshd", "systemd"],
        exe: None,
        args: None,
        uid: 1000,
        host: true,
        params: vec![],
        num: 0,
        age: 60_000_000_000,
    }
}

#[derive(Debug, PartialEq)]
pub(crate) enum Verdict {
    Kill(u16),
    Deferred(u16),
    Pass,
}

fn in_set(g: &Guard, set: u32, dirs: bool, s: &[u8]) -> bool {
    // The trie's longest match, as guard.h's hr_g_str_in uses it.
    let best = g
        .strings
        .iter()
        .filter(|(id, _)| *id == set)
        .filter_map(|(_, e)| match e {
            Entry::Exact(b) => (b == s).then_some(b.len() + 1),
            Entry::Prefix(b) | Entry::Dir(b) => s.starts_with(b).then_some(b.len()),
        })
        .max();
    match best {
        None => false,
        Some(n) if dirs => !s[n..].contains(&b'/'),
        Some(_) => true,
    }
}

/// The string the kernel loads for `src`.
fn value(e: &Ev, src: &Src) -> Option<Vec<u8>> {
    let s = match src {
        Src::Path => e.path.filter(|_| e.ret >= 0)?,
        Src::Comm => e.comm,
        Src::Ancestor(n) => e.ancestors.get(*n as usize - 1)?,
        Src::Exe => e.exe?,
        Src::Args => e.args?,
        Src::Uid => return Some(e.uid.to_le_bytes().to_vec()),
        Src::Param { index, .. } => e.params.get(*index as usize)?,
    };
    Some(s.as_bytes().to_vec())
}

/// The capture handler's quick test, then guard.h's loop, in Rust. Every
/// test's event checks that the quick test never rejects what the program
/// would kill.
pub(crate) fn run(g: &Guard, nr: u32, e: &Ev) -> Verdict {
    let Some(p) = g.programs.iter().find(|p| p.nr == nr) else { return Verdict::Pass };
    let head = e.path.filter(|_| e.ret >= 0).map(str::as_bytes);
    let q = &p.quick;
    let passes =
        (!q.ok || e.ret >= 0) && q.atoms.as_ref().is_none_or(|a| a.iter().any(|x| x.holds(head, e.flags)));
    let v = run_program(g, p, e);
    if !passes {
        assert!(!matches!(v, Verdict::Kill(_)), "the quick test {q:?} rejects a kill: {v:?}");
        return Verdict::Pass;
    }
    v
}

fn run_program(g: &Guard, p: &Program, e: &Ev) -> Verdict {
    let (mut pc, mut deferred) = (0usize, None);
    loop {
        let Ins { op, t, f } = &p.ins[pc];
        let r = match op {
            GOp::Success => e.ret >= 0,
            GOp::Flags { mask, value } => e.flags & mask == *value,
            GOp::HostCgroup => e.host,
            GOp::Num { mask, value, .. } => e.num & mask == *value,
            GOp::Defer { rule } => {
                deferred.get_or_insert(*rule);
                true
            }
            GOp::StrIn { src, set, dirs } => value(e, src).is_some_and(|s| in_set(g, *set, *dirs, &s)),
            GOp::Whole { src } => value(e, src).is_none_or(|s| s.len() < MAX_STR),
            GOp::Age { ns } => e.age > *ns,
            GOp::Substr { src, needle, mode } => value(e, src).is_some_and(|s| {
                // The kernel sees the first MAX_STR bytes.
                let hay = &s[..s.len().min(MAX_STR)];
                let n = &g.needles[*needle as usize];
                match mode {
                    Mode::Contains => hay.windows(n.len()).any(|w| w == &n[..]),
                    Mode::IContains => hay.windows(n.len()).any(|w| w.to_ascii_lowercase() == n[..]),
                    Mode::EndsWith => hay.ends_with(n),
                }
            }),
        };
        let next = if r { *t } else { *f };
        if next == NO_MATCH {
            return deferred.map_or(Verdict::Pass, Verdict::Deferred);
        }
        if next & KILL != 0 {
            return Verdict::Kill(next & !KILL);
        }
        assert!(next as usize > pc, "jumps go forward");
        pc = next as usize;
    }
}

const MACROS: &str = r#"
- list: shell_binaries
  items: [bash, sh, zsh]
- list: sensitive_file_names
  items: [/etc/shadow, /etc/sudoers]
- macro: open_read
  condition: (evt.type in (open,openat,openat2) and evt.is_open_read=true and fd.typechar='f' and fd.num>=0)
- macro: sensitive_files
  condition: (fd.name in (sensitive_file_names) or fd.directory in (/etc/sudoers.d, /etc/pam.d))
- macro: ansible_running_python
  condition: (proc.name in (python, pypy, python3) and proc.cmdline contains ansible)
- macro: perl_running_updmap
  condition: (proc.cmdline startswith "perl /usr/bin/updmap")
- macro: container
  condition: (container.id != host)
- rule: Read sensitive
  desc: t
  condition: >
    open_read and sensitive_files and not proc.name in (shell_binaries, cat)
    and not ansible_running_python and not perl_running_updmap
    and not proc.pname in (sudo) and not proc.aname[2] startswith google_
    and not (container and container.image.repository in (trusted))
  output: o
  priority: WARNING
- rule: Exec from shm
  desc: t
  condition: >
    evt.type = execve and (proc.exe startswith "/dev/shm/" or (proc.cwd startswith "/dev/shm/" and proc.exe startswith "./")
    or (proc.cwd startswith "/dev/shm/" and proc.args startswith "./"))
  output: o
  priority: WARNING
"#;

fn plan(exempt: &Exempt) -> Plan {
    let rs = RuleSet::load(&[("t.yaml", MACROS.to_string())], &LoadOptions::default()).unwrap();
    let idx = |n: &str| rs.rules().iter().position(|r| r.name == n).unwrap() as u32;
    let sys: Vec<_> = ["openat", "execve", "read"].iter().map(|n| syscall_by_name(n).unwrap()).collect();
    compile(&rs, &[idx("Read sensitive"), idx("Exec from shm")], exempt, &sys, 100, true).unwrap()
}

const OPENAT: u32 = 257;
const EXECVE: u32 = 59;

#[test]
fn a_sensitive_read_by_an_untrusted_name_is_killed_in_the_kernel() {
    let p = plan(&Exempt::default());
    assert_eq!(run(&p.guard, OPENAT, &ev("hrsteal", "/etc/shadow")), Verdict::Kill(0));
    assert_eq!(run(&p.guard, OPENAT, &ev("hrsteal", "/etc/pam.d/sshd")), Verdict::Kill(0));
    // Not sensitive, a trusted name, not for reading, a failed open, a directory.
    assert_eq!(run(&p.guard, OPENAT, &ev("hrsteal", "/etc/pam.d/x/y")), Verdict::Pass);
    assert_eq!(run(&p.guard, OPENAT, &ev("hrsteal", "/etc/hosts")), Verdict::Pass);
    assert_eq!(run(&p.guard, OPENAT, &ev("cat", "/etc/shadow")), Verdict::Pass);
    assert_eq!(run(&p.guard, OPENAT, &Ev { flags: 1, ..ev("hrsteal", "/etc/shadow") }), Verdict::Pass);
    assert_eq!(run(&p.guard, OPENAT, &Ev { ret: -13, ..ev("hrsteal", "/etc/shadow") }), Verdict::Pass);
    assert_eq!(run(&p.guard, OPENAT, &Ev { flags: 0o200000, ..ev("x", "/etc/shadow") }), Verdict::Pass);
    // O_RDWR reads too.
    assert_eq!(run(&p.guard, OPENAT, &Ev { flags: 2, ..ev("hrsteal", "/etc/shadow") }), Verdict::Kill(0));
    // Parents and ancestors.
    let parent = Ev { ancestors: vec!["sudo"], ..ev("hrsteal", "/etc/shadow") };
    assert_eq!(run(&p.guard, OPENAT, &parent), Verdict::Pass);
    let grand = Ev { ancestors: vec!["a", "google_x"], ..ev("hrsteal", "/etc/shadow") };
    assert_eq!(run(&p.guard, OPENAT, &grand), Verdict::Pass);
    let orphan = Ev { ancestors: vec![], ..ev("hrsteal", "/etc/shadow") };
    assert_eq!(run(&p.guard, OPENAT, &orphan), Verdict::Kill(0));
    // An open of any other path ends at the program's first test.
    let open = p.guard.programs.iter().find(|p| p.nr == OPENAT).unwrap();
    let path_test = |i: &Ins| matches!(i.op, GOp::StrIn { src: Src::Path, .. });
    assert!(path_test(&open.ins[0]) && open.ins[0].f == 1, "{:?}", open.ins);
    assert!(path_test(&open.ins[1]) && open.ins[1].f == NO_MATCH, "{:?}", open.ins);
}

#[test]
fn terms_only_user_space_knows_defer_when_reached() {
    let p = plan(&Exempt::default());
    // python: the command line decides.
    assert_eq!(run(&p.guard, OPENAT, &ev("python3", "/etc/shadow")), Verdict::Deferred(0));
    // perl: updmap's command line might.
    assert_eq!(run(&p.guard, OPENAT, &ev("perl", "/etc/shadow")), Verdict::Deferred(0));
    assert_eq!(run(&p.guard, OPENAT, &ev("perl x", "/etc/shadow")), Verdict::Deferred(0));
    // A cgroup not known as the host's: the container's image decides.
    assert_eq!(
        run(&p.guard, OPENAT, &Ev { host: false, ..ev("hrsteal", "/etc/shadow") }),
        Verdict::Deferred(0)
    );
    // Not reached: not deferred.
    assert_eq!(run(&p.guard, OPENAT, &ev("python3", "/etc/hosts")), Verdict::Pass);
    let d = &p.decisions[0];
    assert_eq!(d.syscalls, ["openat"]);
    assert!(d.user_space.is_none());
    for t in ["proc.cmdline", "container.image.repository"] {
        assert!(d.deferred.iter().any(|x| x == t), "{t} in {:?}", d.deferred);
    }
}

#[test]
fn execs_are_decided_on_argv() {
    let p = plan(&Exempt::default());
    let exec = |exe: &'static str, args: &'static str| Ev {
        exe: Some(exe),
        args: Some(args),
        path: None,
        ..ev("x", "")
    };
    assert_eq!(run(&p.guard, EXECVE, &exec("/dev/shm/drop", "")), Verdict::Kill(1));
    assert_eq!(run(&p.guard, EXECVE, &exec("/usr/bin/ls", "-l /dev/shm")), Verdict::Pass);
    // The working directory decides these.
    assert_eq!(run(&p.guard, EXECVE, &exec("./drop", "")), Verdict::Deferred(1));
    assert_eq!(run(&p.guard, EXECVE, &exec("sh", "./drop")), Verdict::Deferred(1));
    // A failed exec keeps the old program's fields: user space decides.
    assert_eq!(run(&p.guard, EXECVE, &Ev { ret: -2, ..exec("/dev/shm/drop", "") }), Verdict::Deferred(1));
    assert_eq!(p.decisions[1].syscalls, ["execve"]);
}

#[test]
fn exempt_names_and_users_are_never_acted_on() {
    let p = plan(&Exempt { comms: vec![b"hrsteal".to_vec()], uids: vec![4242] });
    assert_eq!(run(&p.guard, OPENAT, &ev("hrsteal", "/etc/shadow")), Verdict::Pass);
    assert_eq!(run(&p.guard, OPENAT, &Ev { uid: 4242, ..ev("other", "/etc/shadow") }), Verdict::Pass);
    assert_eq!(run(&p.guard, OPENAT, &ev("other", "/etc/shadow")), Verdict::Kill(0));
}

#[test]
fn rules_of_other_syscalls_or_unknown_terms_stay_in_user_space() {
    let y = "- rule: R\n  desc: t\n  condition: evt.type = openat and proc.cwd contains x\n  output: o\n  priority: WARNING\n\
             - rule: S\n  desc: t\n  condition: evt.type = connect\n  output: o\n  priority: WARNING\n";
    let rs = RuleSet::load(&[("t.yaml", y.to_string())], &LoadOptions::default()).unwrap();
    let p =
        compile(&rs, &[0, 1], &Exempt::default(), &[syscall_by_name("openat").unwrap()], 1, true).unwrap();
    assert_eq!(p.decisions[0].summary(), "user space (needs proc.cwd)");
    assert_eq!(p.decisions[1].summary(), "user space (none of its syscalls is captured)");
    assert!(p.guard.programs.is_empty());
}

#[test]
fn string_and_named_parameters_are_tested_as_falco_writes_them() {
    let y = "- list: sensitive_file_names\n  items: [/etc/shadow]\n\
             - rule: Symlink\n  desc: t\n  condition: evt.type in (symlink, symlinkat) and evt.arg.target in (sensitive_file_names)\n  output: o\n  priority: WARNING\n\
             - rule: Hardlink\n  desc: t\n  condition: evt.type in (link, linkat) and evt.arg.oldpath in (sensitive_file_names)\n  output: o\n  priority: WARNING\n\
             - rule: Traceme\n  desc: t\n  condition: evt.type = ptrace and evt.arg.request contains PTRACE_TRACEME\n  output: o\n  priority: WARNING\n";
    let rs = RuleSet::load(&[("t.yaml", y.to_string())], &LoadOptions::default()).unwrap();
    let sys: Vec<_> = ["symlinkat", "linkat", "ptrace"].iter().map(|n| syscall_by_name(n).unwrap()).collect();
    let p = compile(&rs, &[0, 1, 2], &Exempt::default(), &sys, 1, true).unwrap();
    let nr = |n: &str| syscall_by_name(n).unwrap().nr;
    let with = |params: Vec<&'static str>, num: u32| Ev { params, num, path: None, ..ev("x", "") };
    // symlinkat: target, linkpath. The target as written (no resolution).
    assert_eq!(run(&p.guard, nr("symlinkat"), &with(vec!["/etc/shadow", "l"], 0)), Verdict::Kill(0));
    assert_eq!(run(&p.guard, nr("symlinkat"), &with(vec!["/etc/hosts", "l"], 0)), Verdict::Pass);
    // linkat's oldpath: absolute decides; relative is user space's (resolved against a dir fd).
    assert_eq!(run(&p.guard, nr("linkat"), &with(vec!["/etc/shadow", "l"], 0)), Verdict::Kill(1));
    assert_eq!(run(&p.guard, nr("linkat"), &with(vec!["shadow", "l"], 0)), Verdict::Deferred(1));
    // ptrace's request by Falco's name: PTRACE_TRACEME is 0.
    assert_eq!(run(&p.guard, nr("ptrace"), &with(vec![], 0)), Verdict::Kill(2));
    assert_eq!(run(&p.guard, nr("ptrace"), &with(vec![], 16)), Verdict::Pass);
    assert!(p.decisions.iter().all(|d| d.user_space.is_none()), "{:?}", p.decisions);
}

fn compiled(y: &str, syscalls: &[&str]) -> Plan {
    let rs = RuleSet::load(&[("t.yaml", y.to_string())], &LoadOptions::default()).unwrap();
    let sys: Vec<_> = syscalls.iter().map(|n| syscall_by_name(n).unwrap()).collect();
    let all: Vec<u32> = (0..rs.rules().len() as u32).collect();
    compile(&rs, &all, &Exempt::default(), &sys, 1, true).unwrap()
}

fn exec(comm: &'static str, args: &'static str) -> Ev {
    Ev { exe: Some("/usr/bin/x"), args: Some(args), path: None, ..ev(comm, "") }
}

#[test]
fn substrings_of_arguments_are_searched_and_a_cut_string_proves_only_a_find() {
    let y = "- rule: Keys\n  desc: t\n  condition: evt.type = execve and proc.name = find and (proc.args contains id_rsa or proc.args icontains \"BEGIN Private\")\n  output: o\n  priority: WARNING\n\
             - rule: Aws\n  desc: t\n  condition: evt.type = execve and proc.name = find and proc.args endswith \".aws/credentials\"\n  output: o\n  priority: WARNING\n";
    let p = compiled(y, &["execve"]);
    assert!(p.decisions.iter().all(|d| d.deferred.is_empty() || d.deferred == ["proc.args"]));
    assert_eq!(run(&p.guard, EXECVE, &exec("find", "/tmp -maxdepth 1 -iname id_rsa")), Verdict::Kill(0));
    assert_eq!(run(&p.guard, EXECVE, &exec("find", "-r begin PRIVATE key")), Verdict::Kill(0));
    assert_eq!(run(&p.guard, EXECVE, &exec("find", "/tmp -iname .aws/credentials")), Verdict::Kill(1));
    assert_eq!(run(&p.guard, EXECVE, &exec("find", "/tmp -iname .aws/credentials.bak")), Verdict::Pass);
    assert_eq!(run(&p.guard, EXECVE, &exec("ls", "id_rsa")), Verdict::Pass);
    assert_eq!(run(&p.guard, EXECVE, &exec("find", "/tmp -name x")), Verdict::Pass);
    // Past the kernel's 128 bytes: a find in them still counts, a miss is user space's.
    let long: &'static str = Box::leak(format!("{} id_rsa", "a".repeat(140)).into_boxed_str());
    assert_eq!(run(&p.guard, EXECVE, &exec("find", long)), Verdict::Deferred(0));
    let early: &'static str = Box::leak(format!("id_rsa {}", "a".repeat(140)).into_boxed_str());
    assert_eq!(run(&p.guard, EXECVE, &exec("find", early)), Verdict::Kill(0));
    assert_eq!(
        p.guard.needles,
        [b"id_rsa".to_vec(), b"begin private".to_vec(), b".aws/credentials".to_vec()]
    );
}

#[test]
fn a_memfd_executable_and_the_process_age_are_the_kernels_to_tell() {
    let y = "- rule: Memfd\n  desc: t\n  condition: evt.type = execve and proc.is_exe_from_memfd=true and not proc.name in (runc)\n  output: o\n  priority: WARNING\n\
             - rule: Old\n  desc: t\n  condition: evt.type = openat and fd.name = /etc/shadow and proc.name = httpd and not proc.duration <= 5000000000\n  output: o\n  priority: WARNING\n";
    let p = compiled(y, &["execve", "openat"]);
    let memfd = harrier_state::process::EXE_MEMFD;
    // Only a failed call is left to user space.
    assert!(p.decisions.iter().all(|d| d.user_space.is_none() && d.deferred.len() == 1), "{:?}", p.decisions);
    assert_eq!(run(&p.guard, EXECVE, &Ev { num: memfd, ..exec("3", "") }), Verdict::Kill(0));
    assert_eq!(run(&p.guard, EXECVE, &Ev { num: memfd, ..exec("runc", "") }), Verdict::Pass);
    assert_eq!(run(&p.guard, EXECVE, &exec("3", "")), Verdict::Pass);
    // A failed exec leaves the old program's fields.
    assert_eq!(run(&p.guard, EXECVE, &Ev { num: memfd, ret: -2, ..exec("3", "") }), Verdict::Deferred(0));
    let old = Ev { age: 6_000_000_000, ..ev("httpd", "/etc/shadow") };
    assert_eq!(run(&p.guard, OPENAT, &old), Verdict::Kill(1));
    assert_eq!(run(&p.guard, OPENAT, &Ev { age: 5_000_000_000, ..old.clone() }), Verdict::Pass);
    assert_eq!(run(&p.guard, OPENAT, &Ev { comm: "nginx", ..old }), Verdict::Pass);
}

#[test]
fn most_opens_end_at_the_handlers_quick_test() {
    let p = plan(&Exempt::default());
    let open = p.guard.programs.iter().find(|p| p.nr == OPENAT).unwrap();
    let q = &open.quick;
    let head = |s: &str| q.atoms.as_ref().unwrap().iter().any(|a| a.holds(Some(s.as_bytes()), 0));
    assert!(q.ok, "a failed open goes no further: {q:?}");
    assert!(head("/etc/shadow") && head("/etc/sudoers.d/x") && head("/etc/pam.d/sshd"), "{q:?}");
    assert!(!head("/var/tmp/x") && !head("/etc/hosts") && !head("/usr/lib/libc.so.6"), "{q:?}");
}

#[test]
fn a_quick_test_over_its_atoms_cuts_its_heads_shorter() {
    let names: Vec<String> = (0..12).map(|i| format!("/d{i:02}/secret")).collect();
    let y = format!(
        "- rule: Many\n  desc: t\n  condition: evt.type = openat and fd.num >= 0 and fd.name in ({})\n  output: o\n  priority: WARNING\n",
        names.join(", ")
    );
    let p = compiled(&y, &["openat"]);
    let q = &p.guard.programs[0].quick;
    let atoms = q.atoms.as_ref().unwrap();
    assert!(atoms.len() <= harrier_capture::guard::MAX_ATOMS && atoms.len() > 1, "{q:?}");
    for n in &names {
        assert!(atoms.iter().any(|a| a.holds(Some(n.as_bytes()), 0)), "{n} rejected by {q:?}");
        assert_eq!(run(&p.guard, OPENAT, &ev("x", Box::leak(n.clone().into_boxed_str()))), Verdict::Kill(0));
    }
    assert_eq!(run(&p.guard, OPENAT, &ev("x", "/etc/other")), Verdict::Pass);
}
