//! The engine's state: harrier-state's tables behind the [`StateView`] the
//! field extraction reads.

use crate::view::{ContainerInfo, FdInfo, ProcInfo, StateView, Tuple, UserInfo};
use harrier_schema::decode::{decode, Event, Meta, Value as Param};
use harrier_schema::family::{self, Family};
use harrier_schema::view::SyscallView;
use harrier_state::fd::FdType;
use harrier_state::{Process, State, STATE_SYSCALLS};

struct UntoldWatch(harrier_capture::UntoldFds);

impl harrier_state::ProcessWatcher for UntoldWatch {
    fn followed(&mut self, pid: u32) -> bool {
        self.0.follow(pid)
    }

    fn forgotten(&mut self, pid: u32) {
        self.0.forget(pid)
    }
}

/// harrier-state's tables, fed only the events that change them.
pub struct EngineState {
    pub tables: State,
    /// By syscall number: does the state need this syscall's events?
    wanted: Vec<bool>,
}

impl Default for EngineState {
    fn default() -> Self {
        EngineState::new()
    }
}

impl EngineState {
    pub fn new() -> EngineState {
        let mut wanted = vec![false; harrier_schema::MAX_SYSCALL_NR as usize + 1];
        for s in STATE_SYSCALLS.iter().filter_map(|n| harrier_schema::syscall_by_name(n)) {
            wanted[s.nr as usize] = true;
        }
        EngineState { tables: State::new(), wanted }
    }

    /// Tells the kernel which processes the tables follow, so that it keeps
    /// back the closes of fds whose opens it kept back (call before
    /// [`Self::scan_proc`]).
    pub fn watch_untold(&mut self, fds: harrier_capture::UntoldFds) {
        self.tables.set_watcher(Box::new(UntoldWatch(fds)));
    }

    /// Seeds the tables from /proc (call once the sensor is attached).
    pub fn scan_proc(&mut self) {
        self.tables.scan_proc(None);
    }

    /// A life-cycle event; returns the tid of an exiting process leader
    /// (Falco's procexit).
    pub fn apply_meta(&mut self, bytes: &[u8]) -> Option<u32> {
        let ev = decode(bytes).ok()?;
        let exit = match &ev {
            Event::Meta(h, Meta::Exit { pid }) if h.tid == *pid => Some(h.tid),
            _ => None,
        };
        self.tables.apply(&ev);
        if let Event::Meta(h, _) = &ev {
            self.warm_names(h.tid);
        }
        exit
    }

    /// A syscall event, read in place; the common event, which no table needs,
    /// costs one lookup.
    pub fn apply(&mut self, v: &SyscallView) {
        self.tables.fd_name_changed = false;
        let family = family::of(v.syscall.nr);
        if family.contains(Family::SEND) {
            // Frequent: read from the view, never decoded (see State::apply_send).
            if let (true, Some(fd), Some(Param::Bytes(addr))) =
                (v.ret >= 0, v.named("fd").and_then(|f| f.as_i64()), v.named("addr"))
            {
                self.tables.apply_send(v.header.tid, fd as i32, addr);
            }
            return;
        }
        if !self.wanted.get(v.syscall.nr as usize).copied().unwrap_or(false) {
            return;
        }
        self.tables.apply_view(v);
        if family.contains(Family::EXEC) || family.contains(Family::SETUID) {
            self.warm_names(v.header.tid);
        }
    }

    /// Looks up the process's user, login user and group once, so that
    /// extraction (a shared borrow) finds them cached. Falco's user and group
    /// are the effective ids.
    fn warm_names(&mut self, tid: u32) {
        let Some(p) = self.tables.process(tid) else { return };
        let (uid, gid, login) = (p.euid, p.egid, p.loginuid);
        self.tables.users.user(uid);
        self.tables.users.group(gid);
        if login != u32::MAX {
            self.tables.users.user(login);
        }
    }

    pub fn end_batch(&mut self) {
        self.tables.end_batch();
    }
}

fn info(p: &Process) -> ProcInfo<'_> {
    let c = p.container.as_deref();
    ProcInfo {
        pid: p.pid,
        ppid: p.ppid,
        comm: p.comm.as_bytes(),
        exe: p.exe.as_bytes(),
        exepath: p.exepath.as_bytes(),
        args: p.args.as_bytes(),
        cwd: p.cwd.as_bytes(),
        env: &p.env,
        uid: Some(p.uid),
        gid: Some(p.gid),
        euid: Some(p.euid),
        egid: Some(p.egid),
        loginuid: Some(p.loginuid),
        tty: Some(p.tty),
        sid: Some(p.sid),
        vpid: Some(p.vpid),
        vpgid: Some(p.vpgid),
        cap_effective: Some(p.cap_effective),
        cap_permitted: Some(p.cap_permitted),
        cap_inheritable: Some(p.cap_inheritable),
        exe_upper_layer: Some(p.is_exe_upper_layer()),
        exe_from_memfd: Some(p.is_exe_from_memfd()),
        exe_writable: Some(p.is_exe_writable()),
        exe_lower_layer: Some(p.is_exe_lower_layer()),
        start_ns: (p.start_ts != 0).then_some(p.start_ts),
        exe_ctime: p.exe_ctime,
        exe_mtime: p.exe_mtime,
        container_id: c.map_or("", |c| &c.id),
        container_full_id: c.map_or("", |c| &c.full_id),
    }
}

impl StateView for EngineState {
    fn process(&self, tid: u32) -> Option<ProcInfo<'_>> {
        self.tables.process(tid).map(info)
    }

    fn process_by_pid(&self, pid: u32) -> Option<ProcInfo<'_>> {
        self.tables.process_by_pid(pid).map(info)
    }

    fn fd(&self, tid: u32, fd: i32) -> Option<FdInfo<'_>> {
        let f = self.tables.fd(tid, fd)?;
        let tuple = f.tuple.as_deref().map(|t| {
            // harrier-state keeps local (s*) and peer (d*); Falco orients by
            // client and server.
            let (cip, cport, sip, sport) = match t.server {
                false => (t.sip(), t.sport, t.dip(), t.dport),
                true => (t.dip(), t.dport, t.sip(), t.sport),
            };
            Tuple { cip, cport, sip, sport, l4proto: t.l4.name(), is_server: t.server }
        });
        let sockfamily = match f.typ {
            FdType::Ipv4 | FdType::Ipv6 => Some("ip"),
            FdType::Unix => Some("unix"),
            _ => None,
        };
        Some(FdInfo {
            num: fd,
            type_name: f.typ.name(),
            typechar: typechar_str(f.typ),
            sockfamily,
            name: f.name.as_bytes(),
            tuple,
        })
    }

    fn user(&self, uid: u32) -> Option<UserInfo<'_>> {
        self.tables.users.cached_user(uid).map(|u| UserInfo {
            name: &u.name,
            home: &u.homedir,
            shell: &u.shell,
        })
    }

    fn group(&self, gid: u32) -> Option<&str> {
        self.tables.users.cached_group(gid)
    }

    fn container(&self, tid: u32) -> Option<ContainerInfo<'_>> {
        self.tables.container(tid).map(|c| ContainerInfo {
            id: &c.id,
            name: &c.name,
            image: &c.image,
            image_repository: &c.image_repository,
            privileged: Some(c.privileged),
            runtime: c.runtime,
            pod_name: &c.pod.name,
            pod_namespace: &c.pod.namespace,
            pod_uid: &c.pod.uid,
            pod_sandbox_id: &c.pod.sandbox_id,
            mounts: &c.mounts,
        })
    }

    fn fd_name_changed(&self) -> bool {
        self.tables.fd_name_changed
    }
}

/// fd.typechar as a string without allocating.
pub(crate) fn typechar_str(t: FdType) -> &'static str {
    TYPECHARS.iter().find(|(c, _)| *c == t.typechar()).map_or("o", |(_, s)| s)
}

const TYPECHARS: [(char, &str); 14] = [
    ('f', "f"),
    ('d', "d"),
    ('4', "4"),
    ('6', "6"),
    ('u', "u"),
    ('s', "s"),
    ('p', "p"),
    ('m', "m"),
    ('e', "e"),
    ('t', "t"),
    ('i', "i"),
    ('l', "l"),
    ('n', "n"),
    ('o', "o"),
];
