//! Shared by the tests: Falco's rule files and realistic fake events.
#![allow(dead_code)]

use harrier_rules::testing::{FakeEvent, Owned};
use std::path::PathBuf;

/// FALCO_RULES_DIR, else the first `shared/data/falco-rules` above the crate, else
/// /work/shared/data/falco-rules (the project's machines keep Falco's files there; they are
/// not copied into the repository). Under CI=true a missing directory fails the test.
pub fn falco_rules_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("FALCO_RULES_DIR") {
        return Some(PathBuf::from(d));
    }
    let mut p = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    loop {
        let c = p.join("shared/data/falco-rules");
        if c.join("falco_rules.yaml").exists() {
            return Some(c);
        }
        if !p.pop() {
            break;
        }
    }
    // A clone elsewhere on the project's machines.
    let fixed = PathBuf::from("/work/shared/data/falco-rules");
    if fixed.join("falco_rules.yaml").exists() {
        return Some(fixed);
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("Falco's rule files not found: set FALCO_RULES_DIR");
    }
    eprintln!("note: Falco's rule files not found (set FALCO_RULES_DIR); skipped");
    None
}

pub fn read_falco(names: &[&str]) -> Option<Vec<(String, String)>> {
    let dir = falco_rules_dir()?;
    Some(
        names
            .iter()
            .map(|n| {
                let p = dir.join(n);
                (
                    p.display().to_string(),
                    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
                )
            })
            .collect(),
    )
}

/// The process fields every event carries.
pub fn with_proc(ev: FakeEvent, name: &str, exepath: &str, cmdline: &str, parent: &str) -> FakeEvent {
    ev.set("proc.name", name)
        .set("proc.exe", exepath)
        .set("proc.exepath", exepath)
        .set("proc.cmdline", cmdline)
        .set("proc.args", cmdline.split_once(' ').map(|x| x.1).unwrap_or(""))
        .set("proc.pname", parent)
        .set("proc.pexe", "/usr/bin/bash")
        .set("proc.pexepath", "/usr/bin/bash")
        .set("proc.pcmdline", "bash")
        .set("proc.aname[2]", "sshd")
        .set("proc.aname[3]", "systemd")
        .set_all("proc.aname", vec![parent.into(), "sshd".into(), "systemd".into()])
        .set("proc.pid", 4242u64)
        .set("proc.ppid", 4000u64)
        .set("proc.vpid", 4242u64)
        .set("proc.sid", 4000u64)
        .set("proc.sname", "bash")
        .set("proc.tty", 34816u64)
        .set("proc.cwd", "/root/")
        .set("proc.is_exe_upper_layer", false)
        .set("proc.is_exe_from_memfd", false)
        .set("proc.is_vpgid_leader", false)
        .set("user.name", "root")
        .set("user.uid", 0u64)
        .set("user.loginuid", 1000i64)
        .set("user.loginname", "alice")
        .set("group.gid", 0u64)
        .set("group.name", "root")
        .set("container.id", "host")
        .set("container.name", "host")
        .set("thread.cap_effective", Owned::Flags(0, "open_flags"))
}

/// A mix of events like a busy host's: opens, execs, connects, a socket, a ptrace.
pub fn event_mix() -> Vec<FakeEvent> {
    let open = |path: &str, flags: u64, name: &str| {
        with_proc(
            FakeEvent::new("openat"),
            name,
            &format!("/usr/bin/{name}"),
            &format!("{name} {path}"),
            "bash",
        )
        .set("fd.name", path)
        .set("fd.nameraw", path)
        .set("fd.directory", path.rsplit_once('/').map(|x| x.0).unwrap_or("/"))
        .set("fd.filename", path.rsplit_once('/').map(|x| x.1).unwrap_or(""))
        .set("fd.typechar", "f")
        .set("fd.type", "file")
        .set("fd.num", 3i64)
        .set("evt.arg.flags", Owned::Flags(flags, "open_flags"))
        .set("evt.rawres", 3i64)
        .set("evt.res", "SUCCESS")
        .set("evt.is_open_read", flags & 3 != 1)
        .set("evt.is_open_write", flags & 3 != 0)
    };
    vec![
        open("/etc/shadow", 0, "cat"),
        open("/usr/lib/x86_64-linux-gnu/libc.so.6", 0o2000000, "ls"),
        open("/var/log/syslog", 0o1101, "truncate"),
        open("/tmp/x", 0o101, "vim"),
        with_proc(FakeEvent::new("execve"), "sh", "/usr/bin/sh", "sh -c id", "nginx")
            .set("evt.arg.flags", 0u64)
            .set("evt.rawres", 0i64),
        with_proc(FakeEvent::new("execve"), "ls", "/usr/bin/ls", "ls -l", "bash").set("evt.rawres", 0i64),
        with_proc(FakeEvent::new("connect"), "curl", "/usr/bin/curl", "curl http://x", "bash")
            .set("fd.name", "10.0.0.1:5000->1.1.1.1:443")
            .set("fd.typechar", "4")
            .set("fd.type", "ipv4")
            .set("fd.l4proto", "tcp")
            .set("fd.sip", Owned::Ip("1.1.1.1".parse().unwrap()))
            .set("fd.sport", 443u64)
            .set("fd.rport", 443u64)
            .set("fd.lport", 5000u64)
            .set("evt.rawres", 0i64),
        with_proc(FakeEvent::new("socket"), "tcpdump", "/usr/bin/tcpdump", "tcpdump -i any", "bash")
            .set("evt.arg.domain", Owned::Flags(17, "socket_family")),
        with_proc(FakeEvent::new("ptrace"), "gdb", "/usr/bin/gdb", "gdb -p 1", "bash")
            .set("evt.arg.request", Owned::Flags(16, "ptrace_request"))
            .set("evt.rawres", 0i64),
        with_proc(FakeEvent::new("read"), "redis", "/usr/bin/redis", "redis", "systemd")
            .set("fd.name", "/dev/null")
            .set("fd.typechar", "f"),
    ]
}
