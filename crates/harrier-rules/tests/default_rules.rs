//! The default ruleset: each rule fires on its behaviour and stays quiet on the benign
//! neighbour of it (with fake events; the real actions are the integration's tests).

mod common;

use common::with_proc;
use harrier_rules::loader::Priority;
use harrier_rules::ruleset::{LoadOptions, RuleMatching, RuleSet, RuleStatus};
use harrier_rules::testing::{FakeEvent, Owned};

fn default_rules() -> RuleSet {
    let opts = LoadOptions { rule_matching: RuleMatching::All, ..Default::default() };
    RuleSet::load(&[(harrier_rules::DEFAULT_RULES_NAME, harrier_rules::DEFAULT_RULES)], &opts)
        .unwrap_or_else(|d| panic!("{d:?}"))
}

fn fired(rs: &RuleSet, ev: &FakeEvent) -> Vec<String> {
    let mut v = Vec::new();
    rs.evaluate(ev, |r| v.push(r.name.clone()));
    v
}

fn proc(ty: &str, name: &str, parent: &str) -> FakeEvent {
    with_proc(FakeEvent::new(ty), name, &format!("/usr/bin/{name}"), &format!("{name} x"), parent)
}

fn open(name: &str, path: &str, flags: u64) -> FakeEvent {
    let (dir, file) = path.rsplit_once('/').unwrap();
    proc("openat", name, "bash")
        .set("fd.name", path)
        .set("fd.directory", if dir.is_empty() { "/" } else { dir })
        .set("fd.filename", file)
        .set("evt.rawres", 3i64)
        .set("evt.arg.flags", Owned::Flags(flags, "open_flags"))
        .set("evt.is_open_read", flags & 3 != 1)
        .set("evt.is_open_write", flags & 3 != 0)
}

fn in_container(ev: FakeEvent) -> FakeEvent {
    ev.set("container.id", "0123456789ab").set("container.name", "web")
}

const O_WRONLY: u64 = 1;
const O_CREAT: u64 = 0o100;
const O_TRUNC: u64 = 0o1000;

#[test]
fn every_rule_loads_and_is_active() {
    let rs = default_rules();
    let rep = rs.check_report();
    println!("{rep}");
    assert_eq!(rep.active(), rs.rules().len());
    for r in rs.rules() {
        assert_eq!(r.status, RuleStatus::Evaluable, "{}", r.name);
        assert!(!r.event_types.is_all(), "{} needs every event type", r.name);
    }
    // Falco's names and priorities where the behaviour is the same.
    for (name, prio) in [
        ("Read sensitive file untrusted", Priority::Warning),
        ("Write below binary dir", Priority::Error),
        ("Run shell untrusted", Priority::Notice),
        ("PTRACE attached to process", Priority::Warning),
        ("PTRACE anti-debug attempt", Priority::Notice),
        ("Execution from /dev/shm", Priority::Warning),
        ("Fileless execution via memfd_create", Priority::Critical),
        ("Clear Log Activities", Priority::Warning),
        ("Create Symlink Over Sensitive Files", Priority::Warning),
        ("Create Hardlink Over Sensitive Files", Priority::Warning),
        ("Change thread namespace", Priority::Notice),
        ("Packet socket created in container", Priority::Notice),
        ("Terminal shell in container", Priority::Notice),
        ("Detect release_agent File Container Escapes", Priority::Critical),
    ] {
        let r = rs.rules().iter().find(|r| r.name == name).unwrap_or_else(|| panic!("missing {name}"));
        assert_eq!(r.priority, prio, "{name}");
    }
    let used: Vec<&str> = rs.fields_used().iter().map(|f| f.name()).collect();
    println!("fields: {used:?}");
    for f in ["evt.type", "proc.name", "fd.name", "evt.arg", "proc.aname", "container.id", "user.name"] {
        assert!(used.contains(&f), "{f} not in {used:?}");
    }
    let attach = rs.event_types().syscall_names();
    println!("attach: {attach:?}");
    assert!(!attach.contains(&"read") && !attach.contains(&"write"), "{attach:?}");
}

#[test]
fn each_rule_fires_on_its_behaviour_only() {
    let rs = default_rules();
    let cases: Vec<(&str, FakeEvent, Option<&str>)> = vec![
        ("shadow read by cat", open("cat", "/etc/shadow", 0), Some("Read sensitive file untrusted")),
        ("shadow read by sshd", open("sshd", "/etc/shadow", 0), None),
        (
            "sudoers.d read",
            open("python3", "/etc/sudoers.d/admins", 0),
            Some("Read sensitive file untrusted"),
        ),
        ("passwd read", open("cat", "/etc/passwd", 0), None),
        ("write /bin", open("evil", "/bin/ls", O_WRONLY | O_CREAT), Some("Write below binary dir")),
        ("dpkg writes /usr/bin", open("dpkg", "/usr/bin/ls", O_WRONLY | O_CREAT), None),
        ("read /bin", open("evil", "/bin/ls", 0), None),
        ("truncate log", open("sh", "/var/log/syslog", O_WRONLY | O_TRUNC), Some("Clear Log Activities")),
        ("logrotate truncates", open("logrotate", "/var/log/syslog", O_WRONLY | O_TRUNC), None),
        ("append to log", open("sh", "/var/log/syslog", O_WRONLY | 0o2000), None),
        (
            "truncate(2) a log",
            proc("truncate", "sh", "bash").set("evt.rawres", 0i64).set("evt.arg.path", "/var/log/auth.log"),
            Some("Clear Log Activities"),
        ),
        (
            "shell under nginx",
            proc("execve", "sh", "nginx").set("evt.rawres", 0i64),
            Some("Run shell untrusted"),
        ),
        ("shell under bash", proc("execve", "sh", "bash").set("evt.rawres", 0i64), None),
        ("failed exec under nginx", proc("execve", "sh", "nginx").set("evt.rawres", -2i64), None),
        (
            "ptrace attach",
            proc("ptrace", "gdb", "bash")
                .set("evt.rawres", 0i64)
                .set("evt.arg.request", Owned::Flags(16, "ptrace_request")),
            Some("PTRACE attached to process"),
        ),
        (
            "ptrace peek",
            proc("ptrace", "gdb", "bash")
                .set("evt.rawres", 0i64)
                .set("evt.arg.request", Owned::Flags(2, "ptrace_request")),
            None,
        ),
        (
            "ptrace traceme",
            proc("ptrace", "x", "bash")
                .set("evt.rawres", 0i64)
                .set("evt.arg.request", Owned::Flags(0, "ptrace_request")),
            Some("PTRACE anti-debug attempt"),
        ),
        (
            "exec from /dev/shm",
            proc("execve", "x", "bash")
                .set("evt.rawres", 0i64)
                .set("proc.exepath", "/dev/shm/x")
                .set("proc.exe", "/dev/shm/x"),
            Some("Execution from /dev/shm"),
        ),
        (
            "exec from memfd",
            proc("execve", "x", "bash")
                .set("evt.rawres", 0i64)
                .set("proc.is_exe_from_memfd", true)
                .set("proc.exepath", "/memfd:x (deleted)"),
            Some("Fileless execution via memfd_create"),
        ),
        (
            "symlink to shadow",
            proc("symlinkat", "ln", "bash")
                .set("evt.rawres", 0i64)
                .set("evt.arg.target", "/etc/shadow")
                .set("evt.arg.linkpath", "/tmp/s"),
            Some("Create Symlink Over Sensitive Files"),
        ),
        (
            "symlink to hosts",
            proc("symlinkat", "ln", "bash")
                .set("evt.rawres", 0i64)
                .set("evt.arg.target", "/etc/hosts")
                .set("evt.arg.linkpath", "/tmp/s"),
            None,
        ),
        (
            "hardlink to shadow",
            proc("linkat", "ln", "bash")
                .set("evt.rawres", 0i64)
                .set("evt.arg.oldpath", "/etc/shadow")
                .set("evt.arg.newpath", "/tmp/s"),
            Some("Create Hardlink Over Sensitive Files"),
        ),
        (
            "setns by a tool",
            proc("setns", "evil", "bash").set("evt.rawres", 0i64),
            Some("Change thread namespace"),
        ),
        ("setns by runc", proc("setns", "runc", "containerd-shim").set("evt.rawres", 0i64), None),
        (
            "unshare in container",
            in_container(proc("unshare", "sh", "bash").set("evt.rawres", 0i64)),
            Some("Unshare or mount in container"),
        ),
        ("unshare on host", proc("unshare", "sh", "bash").set("evt.rawres", 0i64), None),
        (
            "release_agent",
            in_container(open("sh", "/sys/fs/cgroup/x/release_agent", O_WRONLY)),
            Some("Detect release_agent File Container Escapes"),
        ),
        (
            "packet socket in container",
            in_container(
                proc("socket", "tcpdump", "sh")
                    .set("evt.rawres", 3i64)
                    .set("evt.arg.domain", Owned::Flags(17, "socket_family")),
            ),
            Some("Packet socket created in container"),
        ),
        (
            "packet socket on host",
            proc("socket", "tcpdump", "sh")
                .set("evt.rawres", 3i64)
                .set("evt.arg.domain", Owned::Flags(17, "socket_family")),
            None,
        ),
        (
            "inet socket in container",
            in_container(
                proc("socket", "curl", "sh")
                    .set("evt.rawres", 3i64)
                    .set("evt.arg.domain", Owned::Flags(2, "socket_family")),
            ),
            None,
        ),
        (
            "terminal shell in container",
            in_container(proc("execve", "bash", "runc").set("evt.rawres", 0i64)),
            Some("Terminal shell in container"),
        ),
        (
            "shell without tty in container",
            in_container(proc("execve", "bash", "runc").set("evt.rawres", 0i64).set("proc.tty", 0u64)),
            None,
        ),
        (
            "bash connects out",
            proc("connect", "bash", "sshd")
                .set("evt.rawres", 0i64)
                .set("fd.typechar", "4")
                .set("fd.sip", Owned::Ip("203.0.113.9".parse().unwrap())),
            Some("Outbound connection by unexpected program"),
        ),
        (
            "bash connects to loopback",
            proc("connect", "bash", "sshd")
                .set("evt.rawres", 0i64)
                .set("fd.typechar", "4")
                .set("fd.sip", Owned::Ip("127.0.0.1".parse().unwrap())),
            None,
        ),
        (
            "curl connects out",
            proc("connect", "curl", "bash")
                .set("evt.rawres", 0i64)
                .set("fd.typechar", "4")
                .set("fd.sip", Owned::Ip("203.0.113.9".parse().unwrap())),
            None,
        ),
    ];
    for (what, ev, want) in &cases {
        let got = fired(&rs, ev);
        let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn outputs_carry_falcos_usual_fields() {
    let rs = default_rules();
    let ev = open("cat", "/etc/shadow", 0).set("proc.env", "HOME=/root");
    let r = rs.rules().iter().find(|r| r.name == "Read sensitive file untrusted").unwrap();
    let (text, fields) = r.format_output(&ev);
    assert!(
        text.starts_with(
            "Credential file read by a program that does not manage accounts (file=/etc/shadow "
        ),
        "{text}"
    );
    assert!(text.ends_with("terminal=34816 host (id=host))"), "{text}");
    for f in [
        "fd.name",
        "proc.name",
        "proc.cmdline",
        "user.name",
        "user.uid",
        "proc.exepath",
        "proc.pname",
        "container.id",
    ] {
        assert!(fields.iter().any(|(k, _)| k == f), "{f} not in output_fields");
    }
}
