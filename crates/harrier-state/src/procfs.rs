//! Seeding from /proc: processes that existed before the sensor attached,
//! their descriptors, and their sockets' addresses from /proc/net.

use crate::container::Containers;
use crate::fd::{type_of_link, Fd, FdType, Tuple, L4};
use crate::process::{Comm, Process, EXE_MEMFD, EXE_WRITABLE};
use crate::state::{socket_fd, State};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

const O_CLOEXEC: u32 = 0o2000000;

fn numbered(dir: &str) -> Vec<u32> {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

fn link(p: &str) -> Option<String> {
    std::fs::read_link(p).ok().map(|l| l.to_string_lossy().into_owned())
}

/// /proc/PID/environ, at most [`crate::process::ENV_MAX`] bytes as the kernel
/// side keeps; true when there was more.
fn read_env(pid: u32) -> std::io::Result<(Vec<u8>, bool)> {
    use std::io::Read;
    let max = crate::process::ENV_MAX;
    let mut buf = Vec::with_capacity(max + 1);
    std::fs::File::open(format!("/proc/{pid}/environ"))?.take(max as u64 + 1).read_to_end(&mut buf)?;
    let cut = buf.len() > max;
    buf.truncate(max);
    Ok((buf, cut))
}

/// Sockets of one network namespace: inode → descriptor template.
type Sockets = HashMap<u64, Fd>;

pub(crate) fn scan(state: &mut State, only: Option<u32>) {
    let pids = only.map_or_else(|| numbered("/proc"), |p| vec![p]);
    let mut netns: HashMap<String, Sockets> = HashMap::new();
    for pid in pids {
        let Some((mut p, tids)) = read_process(pid, &mut state.containers, state.keep_env) else { continue };
        // Sockets are listed per network namespace: read each one once.
        let ns = link(&format!("/proc/{pid}/ns/net")).unwrap_or_default();
        let socks = netns.entry(ns).or_insert_with(|| read_sockets(pid));
        read_fds(&mut p, socks);
        state.insert_process(p, &tids);
        state.warm_users(pid);
    }
}

/// The process that thread `tid` belongs to, with its threads, if still alive.
pub(crate) fn read_process_of(
    tid: u32,
    containers: &mut Containers,
    env: bool,
) -> Option<(Process, Vec<u32>)> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let tgid = field(&status, "Tgid:")?.parse().ok()?;
    let (mut p, tids) = read_process(tgid, containers, env)?;
    read_fds(&mut p, &read_sockets(tgid));
    Some((p, tids))
}

/// EXE_WRITABLE for a process already running, as Falco's /proc scan judges it: the
/// owner may (chmod), root may unless the file system is read-only, others by the
/// mode's group or other bits (without ACLs, supplementary groups or capabilities).
fn exe_writable(pid: u32, m: &std::fs::Metadata, euid: u32, egid: u32) -> bool {
    if m.uid() == euid {
        return true;
    }
    if euid == 0 {
        let Ok(path) = std::ffi::CString::new(format!("/proc/{pid}/exe")) else { return false };
        // SAFETY: a NUL-terminated path; access(2) only reads it.
        return unsafe { libc::access(path.as_ptr(), libc::W_OK) } == 0;
    }
    let bits = if m.gid() == egid { 0o020 } else { 0o002 };
    m.mode() & bits != 0
}

fn field<'a>(status: &'a str, name: &str) -> Option<&'a str> {
    status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim)
}

/// Everything but the descriptors; the environment only when `env` (it is
/// kept only when a rule or output reads proc.env).
fn read_process(pid: u32, containers: &mut Containers, env: bool) -> Option<(Process, Vec<u32>)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The comm in stat may hold spaces and parentheses: fields follow the last ')'.
    let rest: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let num = |i: usize| rest.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let ids = |name: &str, i: usize| {
        field(&status, name).and_then(|v| v.split_whitespace().nth(i)?.parse::<u32>().ok()).unwrap_or(0)
    };
    let last = |name: &str| field(&status, name).and_then(|v| v.split_whitespace().last()?.parse().ok());
    let mut p = Process::new(pid);
    p.comm = Comm::new(field(&status, "Name:").unwrap_or(""));
    p.ppid = num(1) as u32;
    p.vpgid = last("NSpgid:").unwrap_or(num(2) as u32);
    p.sid = num(3) as u32;
    p.tty = num(4) as u32;
    // starttime is in clock ticks since boot; events use CLOCK_MONOTONIC
    // (the same on a machine that never suspended).
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    p.start_ts = num(19) * (1_000_000_000 / hz);
    p.uid = ids("Uid:", 0);
    p.euid = ids("Uid:", 1);
    p.gid = ids("Gid:", 0);
    p.egid = ids("Gid:", 1);
    p.vpid = last("NSpid:").unwrap_or(pid);
    let caps = |key| field(&status, key).and_then(|v| u64::from_str_radix(v, 16).ok()).unwrap_or(0);
    p.cap_effective = caps("CapEff:");
    p.cap_permitted = caps("CapPrm:");
    p.cap_inheritable = caps("CapInh:");
    p.loginuid = std::fs::read_to_string(format!("/proc/{pid}/loginuid"))
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(u32::MAX);
    if let Some(exe) = link(&format!("/proc/{pid}/exe")) {
        let exe = exe.strip_suffix(" (deleted)").unwrap_or(&exe);
        if exe.starts_with("/memfd:") {
            p.exe_flags |= EXE_MEMFD;
        }
        p.exepath = Arc::from(exe);
        if let Ok(m) = std::fs::metadata(format!("/proc/{pid}/exe")) {
            p.exe_ctime = (m.ctime() as u64) * 1_000_000_000 + m.ctime_nsec() as u64;
            p.exe_mtime = (m.mtime() as u64) * 1_000_000_000 + m.mtime_nsec() as u64;
            if exe_writable(pid, &m, p.euid, p.egid) {
                p.exe_flags |= EXE_WRITABLE;
            }
        }
    }
    if let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) {
        p.set_argv(&cmdline);
    }
    if let Some(cwd) = link(&format!("/proc/{pid}/cwd")) {
        p.cwd = Arc::from(cwd.as_str());
    }
    if env {
        if let Ok(block) = read_env(pid) {
            p.set_env(&block.0, block.1);
        }
    }
    if let Ok(cg) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) {
        p.container = containers.lookup(cgroup_of(&cg));
    }
    let mut tids = numbered(&format!("/proc/{pid}/task"));
    if tids.is_empty() {
        tids.push(pid);
    }
    Some((p, tids))
}

/// The path BPF would report (task.h): the first v1 hierarchy with a
/// controller that places the task below the root, else the unified one.
fn cgroup_of(text: &str) -> &str {
    let mut unified = "/";
    for l in text.lines() {
        let mut parts = l.splitn(3, ':');
        let (_, ctrl, path) = (parts.next(), parts.next().unwrap_or(""), parts.next().unwrap_or("/"));
        if ctrl.is_empty() {
            unified = path;
        } else if !ctrl.starts_with("name=") && path != "/" {
            return path;
        }
    }
    unified
}

fn read_fds(p: &mut Process, socks: &Sockets) {
    let dir = format!("/proc/{}/fd", p.pid);
    for fd in numbered(&dir) {
        let Some(name) = link(&format!("{dir}/{fd}")) else { continue };
        let flags = std::fs::read_to_string(format!("/proc/{}/fdinfo/{fd}", p.pid))
            .ok()
            .and_then(|i| field(&i, "flags:").and_then(|f| u32::from_str_radix(f, 8).ok()))
            .unwrap_or(0);
        let mut f = if let Some(ino) = name.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) {
            let ino: u64 = ino.parse().unwrap_or(0);
            socks.get(&ino).cloned().unwrap_or_else(|| Fd::new(FdType::Socket, Arc::from(""), false))
        } else {
            let mut typ = type_of_link(&name);
            if typ == FdType::File && std::fs::metadata(&name).is_ok_and(|m| m.is_dir()) {
                typ = FdType::Directory;
            }
            let name = if typ == FdType::Memfd {
                name.trim_start_matches('/').trim_end_matches(" (deleted)")
            } else {
                &name
            };
            Fd::new(typ, Arc::from(name), false)
        };
        f.cloexec = flags & O_CLOEXEC != 0;
        if !f.typ.is_socket() {
            f.flags = flags;
        }
        p.fds.insert(fd as i32, f);
    }
}

/// Sockets of `pid`'s network namespace from its /proc/PID/net tables.
fn read_sockets(pid: u32) -> Sockets {
    let mut out = Sockets::new();
    let mut names = crate::names::Names::default();
    for (file, v6, l4) in
        [("tcp", false, L4::Tcp), ("tcp6", true, L4::Tcp), ("udp", false, L4::Udp), ("udp6", true, L4::Udp)]
    {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{file}")) else { continue };
        for l in text.lines().skip(1) {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let (Some(local), Some(remote), Some(ino)) = (cols.get(1), cols.get(2), cols.get(9)) else {
                continue;
            };
            let (Some((sip, sport)), Some((dip, dport)), Ok(ino)) =
                (hex_addr(local), hex_addr(remote), ino.parse::<u64>())
            else {
                continue;
            };
            let mut f = socket_fd(if v6 { 10 } else { 2 }, 0, 0, &mut names);
            // Which side accepted is not in /proc/net: seeded sockets count as clients.
            let t = Tuple { v6, l4, sip, dip, sport, dport, server: false };
            f.name = t.name_arc();
            f.tuple = Some(Box::new(t));
            out.insert(ino, f);
        }
    }
    if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/unix")) {
        for l in text.lines().skip(1) {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let Some(Ok(ino)) = cols.get(6).map(|i| i.parse::<u64>()) else { continue };
            let mut f = socket_fd(1, 0, 0, &mut names);
            f.name = Arc::from(cols.get(7).copied().unwrap_or(""));
            out.insert(ino, f);
        }
    }
    out
}

/// "0100007F:1F90" (IPv4: one u32 in host order) or 32 hex digits (IPv6: four
/// u32 in host order), then the port in hex.
fn hex_addr(s: &str) -> Option<([u8; 16], u16)> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let mut out = [0u8; 16];
    if ip.len() != 8 && ip.len() != 32 {
        return None;
    }
    for (i, chunk) in ip.as_bytes().chunks(8).enumerate() {
        let w = u32::from_str_radix(std::str::from_utf8(chunk).ok()?, 16).ok()?;
        out[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
    }
    Some((out, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_addresses() {
        let (ip, port) = hex_addr("0100007F:1F90").unwrap();
        assert_eq!((&ip[..4], port), (&[127, 0, 0, 1][..], 8080));
        let (ip, _) = hex_addr("00000000000000000000000001000000:0016").unwrap();
        assert_eq!(std::net::Ipv6Addr::from(ip), std::net::Ipv6Addr::LOCALHOST);
    }

    #[test]
    fn cgroup_choice_matches_the_kernel_side() {
        let text = "9:name=systemd:/\n4:memory:/process_api/1b6b\n1:cpu:/\n0::/\n";
        assert_eq!(cgroup_of(text), "/process_api/1b6b");
        assert_eq!(cgroup_of("0::/system.slice/x.service\n"), "/system.slice/x.service");
    }

    #[test]
    fn this_process_is_seeded_with_its_fds_and_sockets() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let file = std::fs::File::open("/etc/hostname").unwrap();
        let mut s = State::new();
        let me = std::process::id();
        s.scan_proc(Some(me));
        let p = s.process(me).expect("seeded");
        assert_eq!(p.pid, me);
        assert_eq!(&*p.exepath, std::fs::read_link("/proc/self/exe").unwrap().to_str().unwrap());
        assert_eq!(&*p.cwd, std::env::current_dir().unwrap().to_str().unwrap());
        use std::os::fd::AsRawFd;
        let f = s.fd(me, file.as_raw_fd()).expect("the open file");
        assert_eq!(&*f.name, "/etc/hostname");
        assert!(f.cloexec, "std opens with O_CLOEXEC");
        let sock = s.fd(me, l.as_raw_fd()).expect("the listener");
        assert_eq!(sock.typ, FdType::Ipv4);
        let t = sock.tuple.as_ref().unwrap();
        assert_eq!((t.sport, t.l4), (port, L4::Tcp));
    }
}
