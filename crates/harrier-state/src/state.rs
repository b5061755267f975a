//! The state engine: processes, their fds, users and containers, kept
//! current from the event stream.

use crate::container::Containers;
use crate::fd::{Fd, FdType, Tuple, L4};
use crate::names::Names;
use crate::process::{Comm, Process};
use crate::users::Users;
use crate::IdMap;
use harrier_schema::decode::Value;
use harrier_schema::decode::{Event, Meta};
use harrier_schema::view::{Known, SyscallParams, SyscallView};

const O_DIRECTORY: u64 = 0o200000;
const O_CLOEXEC: u64 = 0o2000000;
const SOCK_CLOEXEC: u64 = 0o2000000;
const SOCK_NONBLOCK: u64 = 0o4000;
const MFD_CLOEXEC: u64 = 1;
const FD_CLOEXEC: u64 = 1;
const F_DUPFD: i64 = 0;
const F_SETFD: i64 = 2;
const F_DUPFD_CLOEXEC: i64 = 1030;
const CLOSE_RANGE_CLOEXEC: u64 = 4;
const EINPROGRESS: i64 = 115;
const AF_UNIX: u64 = 1;
const AF_INET: u64 = 2;
const AF_INET6: u64 = 10;
const AF_NETLINK: u64 = 16;

/// Counters of what the engine could not resolve (never silent).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StateStats {
    /// Events from a thread no table knew (and /proc no longer had).
    pub unknown_threads: u64,
    /// fd operations on a descriptor the table did not hold (dup of, connect on...).
    pub unknown_fds: u64,
    pub processes_freed: u64,
    /// Processes the watcher could not be told of (its table full): the
    /// kernel sends every close of theirs.
    pub unwatched: u64,
}

/// Told when the tables start and stop following a process, once its fd
/// table is made (from its parent's at fork, or from /proc) and once it is
/// freed: a kernel filter that keeps back the closes of fds the tables never
/// had needs to know whose fds the tables hold (harrier-capture's UntoldFds).
pub trait ProcessWatcher {
    /// False: the watcher could not take it (counted as unwatched).
    fn followed(&mut self, pid: u32) -> bool;
    fn forgotten(&mut self, pid: u32);
}

pub struct State {
    /// tid → pid (thread group).
    pub(crate) threads: IdMap<u32, u32>,
    pub(crate) procs: IdMap<u32, Process>,
    /// Exited threads, freed one batch late: another CPU's ring may still
    /// hold older events of theirs in the batch being applied.
    exited: Vec<u32>,
    exited_last_batch: Vec<u32>,
    pub users: Users,
    pub containers: Containers,
    pub stats: StateStats,
    /// Indexed by syscall number: does it change state?
    relevant: Vec<bool>,
    /// Read unknown threads from /proc (off for tables rebuilt from a capture file).
    pub(crate) read_proc: bool,
    /// Threads /proc did not have in this batch: their further events do not
    /// read /proc again (a vanished process can leave many events behind).
    not_in_proc: IdMap<u32, ()>,
    /// Falco's fd.name_changed: the last syscall applied renamed the fd it
    /// names (a connect, a bind, a datagram sent to a new destination).
    pub fd_name_changed: bool,
    /// Keep each process's environment (from exec events and /proc): set it
    /// before seeding when a rule or output reads proc.env. Off, no
    /// environment is stored (up to 4 KiB per process otherwise).
    pub keep_env: bool,
    watcher: Option<Box<dyn ProcessWatcher>>,
    /// Descriptor names, shared and reused (no allocation per open or connect).
    names: Names,
}

/// The syscalls whose events change the tables.
pub const STATE_SYSCALLS: &[&str] = &[
    "execve",
    "execveat",
    "open",
    "openat",
    "openat2",
    "creat",
    "close",
    "close_range",
    "dup",
    "dup2",
    "dup3",
    "fcntl",
    "socket",
    "connect",
    "bind",
    "accept",
    "accept4",
    "pipe",
    "pipe2",
    "socketpair",
    "memfd_create",
    "eventfd",
    "eventfd2",
    "signalfd",
    "signalfd4",
    "timerfd_create",
    "inotify_init",
    "inotify_init1",
    "epoll_create",
    "epoll_create1",
    "chdir",
    "fchdir",
    "setuid",
    "setreuid",
    "setresuid",
    "setgid",
    "setregid",
    "setresgid",
    "capset",
    "setsid",
    "setpgid",
];

/// Syscalls the tables follow when they are captured (for the rules), but
/// that are never attached for the state's sake alone: a datagram sent to a
/// new destination renames its socket (Falco's fd.name_changed), and sends
/// are too frequent to capture for that.
pub const STATE_SYSCALLS_IF_CAPTURED: &[&str] = &["sendto", "sendmsg"];

impl State {
    pub fn new() -> State {
        let mut relevant = vec![false; harrier_schema::MAX_SYSCALL_NR as usize + 1];
        let names = STATE_SYSCALLS.iter().chain(STATE_SYSCALLS_IF_CAPTURED);
        for nr in names.filter_map(|n| harrier_schema::syscall_by_name(n)).map(|s| s.nr) {
            relevant[nr as usize] = true;
        }
        State {
            threads: IdMap::default(),
            procs: IdMap::default(),
            exited: Vec::new(),
            exited_last_batch: Vec::new(),
            users: Users::default(),
            containers: Containers::new(),
            stats: StateStats::default(),
            relevant,
            read_proc: true,
            not_in_proc: IdMap::default(),
            fd_name_changed: false,
            keep_env: false,
            watcher: None,
            names: Names::default(),
        }
    }

    /// From now on, tells `w` of every process the tables make or free.
    /// Set it before the /proc scan.
    pub fn set_watcher(&mut self, w: Box<dyn ProcessWatcher>) {
        self.watcher = Some(w);
    }

    /// The container of thread `tid`'s process (None: the host or unknown).
    pub fn container(&self, tid: u32) -> Option<&crate::Container> {
        self.process(tid)?.container.as_deref()
    }

    /// Seeds the tables from /proc (all processes, or one). Call after the
    /// sensor is attached and before consuming events, so that nothing that
    /// happens in between is missed.
    pub fn scan_proc(&mut self, pid: Option<u32>) {
        crate::procfs::scan(self, pid);
    }

    /// Looks up a process read from /proc's user, group and login user, so that
    /// readers holding a shared borrow find them cached (events warm their own).
    pub(crate) fn warm_users(&mut self, pid: u32) {
        let Some(p) = self.procs.get(&pid) else { return };
        let (uid, gid, login) = (p.euid, p.egid, p.loginuid);
        self.users.user(uid);
        self.users.group(gid);
        if login != u32::MAX {
            self.users.user(login);
        }
    }

    pub(crate) fn insert_process(&mut self, p: Process, tids: &[u32]) {
        let pid = p.pid;
        for &t in tids {
            self.threads.insert(t, pid);
        }
        let mut p = p;
        p.threads = tids.len() as u32;
        self.procs.insert(pid, p);
        if let Some(w) = &mut self.watcher {
            if !w.followed(pid) {
                self.stats.unwatched += 1;
            }
        }
    }

    /// Applies one event (in timestamp order).
    pub fn apply(&mut self, ev: &Event) {
        match ev {
            Event::Meta(h, m) => self.apply_meta(h.tid, h.ts, m),
            Event::Syscall(e) => self.apply_syscall(e),
        }
    }

    /// Call after each drained batch of events.
    pub fn end_batch(&mut self) {
        self.not_in_proc.clear();
        let mut gone = std::mem::take(&mut self.exited_last_batch);
        for tid in gone.drain(..) {
            let Some(pid) = self.threads.remove(&tid) else { continue };
            if let Some(p) = self.procs.get_mut(&pid) {
                p.threads = p.threads.saturating_sub(1);
                if p.threads == 0 {
                    self.procs.remove(&pid);
                    self.stats.processes_freed += 1;
                    if let Some(w) = &mut self.watcher {
                        w.forgotten(pid);
                    }
                }
            }
        }
        self.exited_last_batch = std::mem::replace(&mut self.exited, gone);
    }

    /// The process thread `tid` belongs to.
    pub fn process(&self, tid: u32) -> Option<&Process> {
        self.procs.get(self.threads.get(&tid)?)
    }

    /// The process with this pid.
    pub fn process_by_pid(&self, pid: u32) -> Option<&Process> {
        self.procs.get(&pid)
    }

    /// Descriptor `fd` of the process thread `tid` belongs to.
    pub fn fd(&self, tid: u32, fd: i32) -> Option<&Fd> {
        self.process(tid)?.fds.get(fd)
    }

    /// The parent, grandparent... of thread `tid`'s process, nearest first
    /// (Falco's proc.aname[1], [2]...). Stops at a pid it does not know or
    /// at a loop; allocates nothing.
    pub fn ancestors(&self, tid: u32) -> Ancestors<'_> {
        Ancestors { state: self, next: self.process(tid).map_or(0, |p| p.ppid), left: 64 }
    }

    /// Every process, in no order.
    pub fn processes(&self) -> impl Iterator<Item = &Process> {
        self.procs.values()
    }

    pub fn len(&self) -> usize {
        self.procs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.procs.is_empty()
    }

    pub fn thread_count(&self) -> usize {
        self.threads.len()
    }

    /// The process of `tid`, made from /proc if no event introduced it.
    fn proc_mut(&mut self, tid: u32) -> Option<&mut Process> {
        let pid = self.pid_of(tid)?;
        self.procs.get_mut(&pid)
    }

    /// [`State::proc_mut`]'s pid: the process borrowed beside other fields.
    fn pid_of(&mut self, tid: u32) -> Option<u32> {
        if !self.threads.contains_key(&tid) {
            let look = self.read_proc && !self.not_in_proc.contains_key(&tid);
            let found = if look {
                crate::procfs::read_process_of(tid, &mut self.containers, self.keep_env)
            } else {
                None
            };
            match found {
                Some((p, tids)) if !self.procs.contains_key(&p.pid) => {
                    let pid = p.pid;
                    self.insert_process(p, &tids);
                    self.warm_users(pid);
                }
                Some((p, _)) => {
                    self.threads.insert(tid, p.pid);
                    if let Some(q) = self.procs.get_mut(&p.pid) {
                        q.threads += 1;
                    }
                }
                None if !self.read_proc => {
                    // A replayed capture's thread its tables never introduced: an empty
                    // entry of its own, as Falco's libs make one, so its descriptors are
                    // followed from here on.
                    self.stats.unknown_threads += 1;
                    self.insert_process(Process::new(tid), &[tid]);
                }
                None => {
                    if look {
                        self.not_in_proc.insert(tid, ());
                    }
                    self.stats.unknown_threads += 1;
                    return None;
                }
            }
        }
        self.threads.get(&tid).copied()
    }

    fn apply_meta(&mut self, tid: u32, ts: u64, m: &Meta) {
        match m {
            Meta::Fork { child_tid, child_pid, comm, child_vpid, flags } => {
                let Some(parent) = self.proc_mut(tid) else {
                    // Parent unknown and gone: the child may still be in /proc.
                    self.proc_mut(*child_tid);
                    return;
                };
                if parent.pid == *child_pid {
                    parent.threads += 1;
                    self.threads.insert(*child_tid, *child_pid);
                    return;
                }
                // A new process: the child starts as a copy of its parent
                // (strings are shared Arcs; the fd table is copied, as fork does).
                let mut child = parent.clone();
                child.pid = *child_pid;
                // CLONE_PARENT (runc's container init): a sibling of the caller.
                child.ppid = if flags & harrier_schema::wire::FORK_PARENTS_PARENT != 0 {
                    parent.ppid
                } else {
                    parent.pid
                };
                child.vpid = if *child_vpid != 0 { *child_vpid } else { *child_pid };
                child.comm = Comm::new(comm);
                child.start_ts = ts;
                child.threads = 0;
                self.insert_process(child, &[*child_tid]);
            }
            Meta::Exec { old_tid, comm, cgroup } => {
                // A non-leader thread that execs takes over the leader's tid.
                if *old_tid != tid {
                    if let Some(pid) = self.threads.remove(old_tid) {
                        if let Some(p) = self.procs.get_mut(&pid) {
                            p.threads = p.threads.saturating_sub(1);
                        }
                    }
                }
                let container = if cgroup.is_empty() { None } else { Some(self.containers.lookup(cgroup)) };
                let Some(p) = self.proc_mut(tid) else { return };
                p.comm = Comm::new(comm);
                p.fds.exec();
                if let Some(c) = container {
                    p.container = c;
                }
            }
            Meta::Exit { .. } => self.exited.push(tid),
            Meta::Comm { comm } => {
                if let Some(p) = self.proc_mut(tid) {
                    if p.pid == tid {
                        p.comm = Comm::new(comm);
                    }
                }
            }
        }
    }

    /// A syscall event read in place: what the live engine feeds, with no decode.
    pub fn apply_view(&mut self, v: &SyscallView) {
        self.apply_syscall(v)
    }

    fn apply_syscall<'a>(&mut self, e: &impl SyscallParams<'a>) {
        self.fd_name_changed = false;
        let tid = e.tid();
        let ret = e.ret();
        let name = e.syscall().name;
        // Only a few syscalls change state; the rest cost one table lookup.
        let relevant = self.relevant.get(e.syscall().nr as usize).copied().unwrap_or(false);
        // A failed connect still says what its socket is (a socket() kept back).
        if !relevant || (ret < 0 && name != "connect") {
            return;
        }
        let keep_env = self.keep_env;
        let Some(p) = self.pid_of(tid).and_then(|pid| self.procs.get_mut(&pid)) else { return };
        let mut renamed = false;
        if apply_to(p, e, keep_env, &mut self.names, &mut renamed) {
            self.stats.unknown_fds += 1;
        }
        self.fd_name_changed = renamed;
    }

    /// A successful sendto/sendmsg with a destination address, applied
    /// without decoding the event (the engine calls it from the event's
    /// view): a socket that is not TCP takes the destination as its peer, as
    /// Falco's does, which renames it if the destination is new. Sets and
    /// returns [`State::fd_name_changed`]. Allocates only on a rename to a
    /// name of a length no closed socket left.
    pub fn apply_send(&mut self, tid: u32, fd: i32, addr: &[u8]) -> bool {
        let f = self.pid_of(tid).and_then(|pid| self.procs.get_mut(&pid)).and_then(|p| p.fds.get_mut(fd));
        self.fd_name_changed = f.is_some_and(|f| send_to(f, addr, &mut self.names));
        self.fd_name_changed
    }
}

/// sendto/sendmsg to `addr` on `f`: see [`State::apply_send`]. True if renamed.
fn send_to(f: &mut Fd, addr: &[u8], names: &mut Names) -> bool {
    let tcp = f.tuple.as_ref().is_some_and(|t| t.l4 == L4::Tcp);
    if addr.len() < 2 || (tcp && !f.name.is_empty()) {
        return false;
    }
    if let Some(t) = f.tuple.as_mut() {
        let Some((ip, port)) = inet(addr) else { return false };
        if t.dip == ip && t.dport == port && !f.name.is_empty() {
            return false;
        }
        // A protocol still unknown is UDP: TCP cannot change its peer.
        if t.l4 == L4::Unknown {
            t.l4 = L4::Udp;
        }
    } else if f.typ != FdType::Unix || same_unix_path(&f.name, addr) {
        // (checked without allocating: datagrams to /dev/log are frequent)
        return false;
    }
    set_addresses(f, None, Some(addr), names)
}

impl Default for State {
    fn default() -> State {
        State::new()
    }
}

/// Applies a state-changing syscall to its process; true if it named a
/// descriptor the table did not hold.
/// `renamed` is set when the event changed the name of the fd it names.
fn apply_to<'a>(
    p: &mut Process,
    e: &impl SyscallParams<'a>,
    keep_env: bool,
    names: &mut Names,
    renamed: &mut bool,
) -> bool {
    let ret = e.ret();
    let name = e.syscall().name;
    let mut unknown_fd = false;
    let u = |n: &str| e.int(n).map(|v| v as u64);
    let b = |n: &str| e.bytes(n).filter(|b| !b.is_empty());
    // The parameters of the frequent events (open, close), read without a search by name.
    let known_u = |k: Known| e.known(k).and_then(|v| v.as_i64()).map(|v| v as u64);
    let known_b = |k: Known| match e.known(k) {
        Some(Value::Bytes(b)) if !b.is_empty() => Some(b),
        _ => None,
    };
    let fd_of = |n: &str| u(n).map(|v| v as i32);
    let new_fd = ret as i32;
    match name {
        "execve" | "execveat" => {
            if let Some(a) = b("args") {
                p.set_argv(a);
            }
            if let Some(x) = b("exe") {
                p.exepath = names.get(x);
            }
            if let Some(c) = b("cwd") {
                p.cwd = names.get(c);
            }
            // The new image's environment; absent (an older schema's record) is unknown.
            match e.bytes("env") {
                Some(env) if keep_env => {
                    let size = u("env_size").unwrap_or(0) as usize;
                    p.set_env(env, size > env.len());
                }
                _ => p.clear_env(),
            }
            let set = |f: &mut u32, n: &str| {
                if let Some(v) = u(n) {
                    *f = v as u32;
                }
            };
            set(&mut p.uid, "uid");
            set(&mut p.gid, "gid");
            set(&mut p.euid, "euid");
            set(&mut p.egid, "egid");
            set(&mut p.loginuid, "loginuid");
            set(&mut p.tty, "tty");
            set(&mut p.sid, "sid");
            set(&mut p.vpid, "vpid");
            set(&mut p.vpgid, "vpgid");
            set(&mut p.exe_flags, "exe_flags");
            p.cap_effective = u("cap_effective").unwrap_or(p.cap_effective);
            p.cap_permitted = u("cap_permitted").unwrap_or(p.cap_permitted);
            p.cap_inheritable = u("cap_inheritable").unwrap_or(p.cap_inheritable);
            p.exe_ctime = u("exe_ctime").unwrap_or(p.exe_ctime);
            p.exe_mtime = u("exe_mtime").unwrap_or(p.exe_mtime);
        }
        "open" | "openat" | "openat2" | "creat" => {
            let flags = known_u(Known::Flags).unwrap_or(0);
            let path = known_b(Known::Fullpath).or_else(|| known_b(Known::Path)).unwrap_or_default();
            // Falco names a reopened pipe by the path asked for instead
            // (docs/falco-differences.md, reopened-pipe).
            let typ = crate::fd::type_of_open(&path, flags & O_DIRECTORY != 0);
            let mut f = Fd::new(typ, names.get(path), flags & O_CLOEXEC != 0);
            f.flags = flags as u32;
            p.fds.insert(new_fd, f);
        }
        "close" => {
            if let Some(fd) = known_u(Known::Fd).map(|v| v as i32) {
                match p.fds.remove(fd) {
                    Some(f) => names.closed(f),
                    None => unknown_fd = true,
                }
            }
        }
        "close_range" => {
            let flags = u("flags").unwrap_or(0);
            p.fds.close_range(
                u("first").unwrap_or(0) as u32,
                u("last").unwrap_or(0) as u32,
                flags & CLOSE_RANGE_CLOEXEC != 0,
            );
        }
        "dup" | "dup2" | "dup3" => {
            let old = fd_of("oldfd").unwrap_or(-1);
            let cloexec = u("flags").unwrap_or(0) & O_CLOEXEC != 0;
            if p.fds.get(old).is_some() {
                p.fds.dup(old, new_fd, cloexec);
            } else if let Some(mut f) = described_socket(b("sock"), b("local"), b("peer"), names) {
                // A socket whose socket() the kernel filter kept back.
                f.cloexec = cloexec;
                p.fds.insert(new_fd, f);
            } else {
                // What new_fd held before (dup2 closes it) is gone either way.
                unknown_fd = true;
                if let Some(f) = p.fds.remove(new_fd) {
                    names.closed(f);
                }
            }
        }
        "fcntl" => {
            let fd = fd_of("fd").unwrap_or(-1);
            match u("cmd").unwrap_or(u64::MAX) as i64 {
                F_DUPFD => p.fds.dup(fd, new_fd, false),
                F_DUPFD_CLOEXEC => p.fds.dup(fd, new_fd, true),
                F_SETFD => {
                    if let Some(f) = p.fds.get_mut(fd) {
                        f.cloexec = u("arg").unwrap_or(0) & FD_CLOEXEC != 0;
                    }
                }
                _ => {}
            }
        }
        "socket" => {
            let family = u("domain").unwrap_or(0);
            let typ = u("type").unwrap_or(0);
            let mut f = socket_fd(family, typ & 0xf, u("protocol").unwrap_or(0), names);
            f.cloexec = typ & SOCK_CLOEXEC != 0;
            f.flags = typ as u32;
            p.fds.insert(new_fd, f);
        }
        "connect" | "bind" => {
            let fd = fd_of("fd").unwrap_or(-1);
            let local = b("local");
            let peer = if name == "connect" { b("peer").or_else(|| b("addr")) } else { None };
            // The addresses only of a connect that succeeded or is in progress
            // (not the one a refused connect asked for).
            let connected = ret >= 0 || ret == -EINPROGRESS;
            let (local, peer) = if connected { (local, peer) } else { (None, None) };
            if p.fds.get(fd).is_none() {
                // Its socket() kept back by the kernel filter: the connect says what it is.
                let Some(f) = described_socket(b("sock"), local, peer, names) else {
                    return connected;
                };
                p.fds.insert(fd, f);
                *renamed = connected;
            } else if let Some(f) = p.fds.get_mut(fd).filter(|_| connected) {
                *renamed = set_addresses(f, local, peer, names);
            }
        }
        "sendto" | "sendmsg" => {
            let fd = fd_of("fd").unwrap_or(-1);
            let Some(f) = p.fds.get_mut(fd) else {
                return true;
            };
            if let Some(addr) = b("addr") {
                *renamed = send_to(f, addr, names);
            }
        }
        "accept" | "accept4" => {
            let listener = fd_of("fd").and_then(|fd| p.fds.get(fd));
            let l4 = listener.and_then(|l| l.tuple.as_ref()).map_or(L4::Tcp, |t| t.l4);
            let peer = b("peer").or_else(|| b("addr"));
            let family = peer
                .or(b("local"))
                .map_or(0, |a| u16::from_le_bytes([a[0], a.get(1).copied().unwrap_or(0)]) as u64);
            let family = if family == 0 { listener.map_or(AF_INET, |l| family_of(l.typ)) } else { family };
            let mut f = socket_fd(family, 1, 0, names);
            if let Some(t) = f.tuple.as_mut() {
                t.l4 = l4;
                t.server = true;
            }
            f.cloexec = u("flags").unwrap_or(0) & SOCK_CLOEXEC != 0;
            set_addresses(&mut f, b("local"), peer, names);
            p.fds.insert(new_fd, f);
        }
        "pipe" | "pipe2" | "socketpair" => {
            let cloexec = (u("flags").unwrap_or(0) | u("type").unwrap_or(0)) & O_CLOEXEC != 0;
            let f = if name == "socketpair" {
                let mut f = socket_fd(u("domain").unwrap_or(AF_UNIX), u("type").unwrap_or(0) & 0xf, 0, names);
                f.cloexec = cloexec;
                f
            } else {
                Fd::new(FdType::Pipe, names.get(b"pipe"), cloexec)
            };
            for n in ["fd0", "fd1"] {
                if let Some(fd) = fd_of(n) {
                    p.fds.insert(fd, f.clone());
                }
            }
        }
        "memfd_create" => {
            let mut buf = [0u8; MEMFD_NAME_MAX];
            let f = Fd::new(
                FdType::Memfd,
                names.get(memfd_name(b("name").unwrap_or_default(), &mut buf)),
                u("flags").unwrap_or(0) & MFD_CLOEXEC != 0,
            );
            p.fds.insert(new_fd, f);
        }
        "signalfd" | "signalfd4" if fd_of("fd").is_some_and(|fd| fd >= 0) => {}
        _ if anon_name(name).is_some() => {
            let (typ, n) = anon_name(name).unwrap_or((FdType::Other, ""));
            p.fds.insert(
                new_fd,
                Fd::new(typ, names.get(n.as_bytes()), u("flags").unwrap_or(0) & O_CLOEXEC != 0),
            );
        }
        // setpgid may name another process; only the caller's own group is read.
        "setsid" | "setpgid" if u("pid").unwrap_or(0) == 0 || u("pid") == Some(p.vpid as u64) => {
            p.sid = u("cur_sid").map_or(p.sid, |v| v as u32);
            p.vpgid = u("cur_vpgid").map_or(p.vpgid, |v| v as u32);
        }
        "chdir" | "fchdir" => {
            if let Some(c) = b("cwd") {
                p.cwd = names.get(c);
            }
        }
        "setuid" | "setreuid" | "setresuid" | "setgid" | "setregid" | "setresgid" | "capset" => {
            let set = |f: &mut u32, n: &str| {
                if let Some(v) = u(n) {
                    *f = v as u32;
                }
            };
            set(&mut p.uid, "cur_uid");
            set(&mut p.euid, "cur_euid");
            set(&mut p.gid, "cur_gid");
            set(&mut p.egid, "cur_egid");
            p.cap_effective = u("cur_cap_effective").unwrap_or(p.cap_effective);
            p.cap_permitted = u("cur_cap_permitted").unwrap_or(p.cap_permitted);
            p.cap_inheritable = u("cur_cap_inheritable").unwrap_or(p.cap_inheritable);
        }
        _ => {}
    }
    unknown_fd
}

/// The /proc link name of the descriptor an anonymous-inode syscall makes.
fn anon_name(syscall: &str) -> Option<(FdType, &'static str)> {
    Some(match syscall {
        "eventfd" | "eventfd2" => (FdType::Event, "anon_inode:[eventfd]"),
        "signalfd" | "signalfd4" => (FdType::Signalfd, "anon_inode:[signalfd]"),
        "timerfd_create" => (FdType::Timerfd, "anon_inode:[timerfd]"),
        "inotify_init" | "inotify_init1" => (FdType::Inotify, "anon_inode:inotify"),
        "epoll_create" | "epoll_create1" => (FdType::Eventpoll, "anon_inode:[eventpoll]"),
        _ => return None,
    })
}

fn family_of(t: FdType) -> u64 {
    match t {
        FdType::Ipv6 => AF_INET6,
        FdType::Unix => AF_UNIX,
        _ => AF_INET,
    }
}

/// The entry socket() would have made, from what the kernel says a socket is
/// (events.tbl's socktype: family, type, protocol, fd flags, u16 each) and its
/// addresses. None: no description (no socket, or an older schema's record).
fn described_socket(
    sock: Option<&[u8]>,
    local: Option<&[u8]>,
    peer: Option<&[u8]>,
    names: &mut Names,
) -> Option<Fd> {
    let v = sock.filter(|s| s.len() >= 8)?;
    let at = |i: usize| u16::from_le_bytes([v[2 * i], v[2 * i + 1]]) as u64;
    let (family, typ, protocol, fd_flags) = (at(0), at(1), at(2), at(3));
    let mut f = socket_fd(family, typ, protocol, names);
    f.cloexec = fd_flags & 1 != 0;
    let flag = |bit: u64, v: u64| if fd_flags & bit != 0 { v } else { 0 };
    f.flags = (typ | flag(1, SOCK_CLOEXEC) | flag(2, SOCK_NONBLOCK)) as u32;
    set_addresses(&mut f, local, peer, names);
    Some(f)
}

/// A new socket descriptor of this family, type (SOCK_STREAM...) and protocol.
pub(crate) fn socket_fd(family: u64, typ: u64, protocol: u64, names: &mut Names) -> Fd {
    let ftype = match family {
        AF_INET => FdType::Ipv4,
        AF_INET6 => FdType::Ipv6,
        AF_UNIX => FdType::Unix,
        AF_NETLINK => FdType::Netlink,
        _ => FdType::Socket,
    };
    let mut f = Fd::new(ftype, names.empty(), false);
    if matches!(ftype, FdType::Ipv4 | FdType::Ipv6) {
        let l4 = match (typ, protocol) {
            (_, 6) | (1, 0) => L4::Tcp,
            (_, 17) | (2, 0) => L4::Udp,
            (_, 1) | (_, 58) => L4::Icmp,
            (3, _) => L4::Raw,
            _ => L4::Unknown,
        };
        f.tuple = Some(names.tuple(Tuple { v6: ftype == FdType::Ipv6, l4, ..Default::default() }));
    }
    f
}

/// Fills an inet tuple (or a unix name) from kernel sockaddrs and renames
/// the fd; true if its name changed.
fn set_addresses(f: &mut Fd, local: Option<&[u8]>, peer: Option<&[u8]>, names: &mut Names) -> bool {
    if f.typ == FdType::Unix {
        // Falco names a unix socket by the path it is bound or connected to.
        let mut buf = [0u8; UNIX_NAME_MAX];
        return match peer.or(local).and_then(|a| unix_path(a, &mut buf)) {
            Some(path) if *String::from_utf8_lossy(path) != *f.name => {
                f.name = names.get(path);
                true
            }
            _ => false,
        };
    }
    let Some(t) = f.tuple.as_mut() else { return false };
    if let Some((ip, port)) = local.and_then(inet) {
        t.sip = ip;
        t.sport = port;
    }
    if let Some((ip, port)) = peer.and_then(inet) {
        t.dip = ip;
        t.dport = port;
    }
    // An IPv6 socket talking IPv4 (both ends ::ffff:a.b.c.d) is an IPv4 socket to
    // Falco (libsinsp turns such tuples into IPv4 ones).
    if t.v6 && v4_mapped(&t.sip) && v4_mapped(&t.dip) {
        for ip in [&mut t.sip, &mut t.dip] {
            let v4 = [ip[12], ip[13], ip[14], ip[15]];
            *ip = [0; 16];
            ip[..4].copy_from_slice(&v4);
        }
        t.v6 = false;
        f.typ = FdType::Ipv4;
    }
    names.rename_socket(&mut f.name, t.name_buf().as_str())
}

fn v4_mapped(ip: &[u8; 16]) -> bool {
    ip[..10].iter().all(|&b| b == 0) && ip[10] == 0xff && ip[11] == 0xff
}

/// (address as 16 bytes, port in host order) from an inet/inet6 sockaddr.
fn inet(a: &[u8]) -> Option<([u8; 16], u16)> {
    let family = u16::from_le_bytes([*a.first()?, *a.get(1)?]) as u64;
    let port = u16::from_be_bytes([*a.get(2)?, *a.get(3)?]);
    let mut ip = [0u8; 16];
    match family {
        AF_INET => ip[..4].copy_from_slice(a.get(4..8)?),
        AF_INET6 => ip.copy_from_slice(a.get(8..24)?),
        _ => return None,
    }
    Some((ip, port))
}

/// Is `a` the unix sockaddr of a socket already named `name` (a path, not abstract)?
fn same_unix_path(name: &str, a: &[u8]) -> bool {
    let path = a.get(2..).unwrap_or_default();
    let end = path.iter().position(|&c| c == 0).unwrap_or(path.len());
    !name.is_empty() && end > 0 && name.as_bytes() == &path[..end]
}

/// "@" and sun_path's 108 bytes.
const UNIX_NAME_MAX: usize = 109;

/// "memfd:" and the name: the kernel's own name for the file (the name is
/// at most 249 bytes, or memfd_create fails).
const MEMFD_NAME_MAX: usize = 6 + 255;

/// A memfd's name written in `buf`, not built in a String.
fn memfd_name<'b>(name: &[u8], buf: &'b mut [u8; MEMFD_NAME_MAX]) -> &'b [u8] {
    let len = name.len().min(MEMFD_NAME_MAX - 6);
    buf[..6].copy_from_slice(b"memfd:");
    buf[6..6 + len].copy_from_slice(&name[..len]);
    &buf[..6 + len]
}

/// A unix sockaddr's name as Falco gives it ("@name" for an abstract one,
/// its trailing NULs cut), written in `buf`.
fn unix_path<'b>(a: &[u8], buf: &'b mut [u8; UNIX_NAME_MAX]) -> Option<&'b [u8]> {
    let path = a.get(2..)?;
    let (name, at) = match path.first()? {
        0 => {
            let n = &path[1..];
            let zeros = n.iter().rev().take_while(|&&c| c == 0).count();
            buf[0] = b'@';
            (&n[..n.len() - zeros], 1)
        }
        _ => (&path[..path.iter().position(|&c| c == 0).unwrap_or(path.len())], 0),
    };
    let len = name.len().min(UNIX_NAME_MAX - at);
    buf[at..at + len].copy_from_slice(&name[..len]);
    Some(&buf[..at + len])
}

/// Ancestors by ppid, nearest first; see [`State::ancestors`].
pub struct Ancestors<'a> {
    state: &'a State,
    next: u32,
    left: u32,
}

impl<'a> Iterator for Ancestors<'a> {
    type Item = &'a Process;

    fn next(&mut self) -> Option<&'a Process> {
        if self.next == 0 || self.left == 0 {
            return None;
        }
        self.left -= 1;
        let p = self.state.procs.get(&self.next)?;
        // pid 1's ppid is 0; a self-parented entry would loop.
        self.next = if p.ppid == p.pid { 0 } else { p.ppid };
        Some(p)
    }
}
