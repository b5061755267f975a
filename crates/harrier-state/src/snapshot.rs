//! The state tables as plain data: what a capture file stores at its start so
//! that a reader rebuilds the state the live sensor had when it began.
//!
//! Serde-able on purpose (capture files store it as JSON): plain owned
//! types, no Arcs, names instead of enums, so another tool can read it and
//! the tables can change without changing the file format.

use crate::container::{Container, Mount, Pod};
use crate::fd::{Fd, FdType, Tuple, L4};
use crate::process::{Comm, Process};
use crate::state::State;
use crate::users::User;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub processes: Vec<SnapProcess>,
    pub users: Vec<SnapUser>,
    pub groups: Vec<SnapGroup>,
    pub containers: Vec<SnapContainer>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapProcess {
    pub pid: u32,
    pub ppid: u32,
    pub vpid: u32,
    pub vpgid: u32,
    pub sid: u32,
    pub comm: String,
    pub exe: String,
    pub exepath: String,
    /// NUL-separated arguments after argv[0].
    pub args: String,
    pub cwd: String,
    /// NUL-separated NAME=value environment, when the state kept it (left
    /// out of the JSON when empty: older readers and files are unaffected).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub env: String,
    pub uid: u32,
    pub gid: u32,
    pub euid: u32,
    pub egid: u32,
    pub loginuid: u32,
    pub tty: u32,
    pub cap_effective: u64,
    /// Left out when 0 (and so in files written before the fields existed).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cap_permitted: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cap_inheritable: u64,
    pub start_ts: u64,
    pub exe_ctime: u64,
    pub exe_mtime: u64,
    pub exe_flags: u32,
    /// Full id of the process's container, "" for the host.
    #[serde(default)]
    pub container: String,
    /// Every known thread id of the process (the pid among them).
    pub tids: Vec<u32>,
    pub fds: Vec<SnapFd>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapFd {
    pub fd: i32,
    /// Falco's fd.type name ("file", "ipv4", "unknown"...).
    #[serde(rename = "type")]
    pub typ: String,
    pub cloexec: bool,
    pub flags: u32,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuple: Option<SnapTuple>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapTuple {
    pub v6: bool,
    /// "tcp", "udp", "icmp", "raw" or "<NA>".
    pub l4: String,
    pub sip: [u8; 16],
    pub dip: [u8; 16],
    pub sport: u16,
    pub dport: u16,
    pub server: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapUser {
    pub uid: u32,
    pub name: String,
    pub home: String,
    pub shell: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapGroup {
    pub gid: u32,
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapContainer {
    pub id: String,
    pub full_id: String,
    pub name: String,
    pub image: String,
    pub image_repository: String,
    pub privileged: bool,
    pub created: String,
    pub runtime: String,
    /// The Kubernetes pod; left out of the JSON outside Kubernetes (and
    /// absent in files written before it was kept).
    #[serde(default, skip_serializing_if = "SnapPod::is_empty")]
    pub pod: SnapPod,
    /// Volumes, in the runtime's order; left out when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<SnapMount>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapPod {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub sandbox_id: String,
}

impl SnapPod {
    fn is_empty(&self) -> bool {
        *self == SnapPod::default()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapMount {
    pub source: String,
    pub dest: String,
    pub mode: String,
    pub rdwr: bool,
    pub propagation: String,
}

const FD_TYPES: [FdType; 15] = [
    FdType::File,
    FdType::Directory,
    FdType::Ipv4,
    FdType::Ipv6,
    FdType::Unix,
    FdType::Netlink,
    FdType::Socket,
    FdType::Pipe,
    FdType::Memfd,
    FdType::Event,
    FdType::Signalfd,
    FdType::Timerfd,
    FdType::Inotify,
    FdType::Eventpoll,
    FdType::Other,
];
const L4S: [L4; 5] = [L4::Unknown, L4::Tcp, L4::Udp, L4::Icmp, L4::Raw];
const RUNTIMES: [&str; 5] = ["docker", "containerd", "cri-o", "podman", "runc"];

fn fd_type(name: &str) -> FdType {
    FD_TYPES.iter().copied().find(|t| t.name() == name).unwrap_or(FdType::Other)
}

impl State {
    /// The tables as plain data. Users and groups of every process's
    /// uid/gid/euid/egid/loginuid are looked up first (NSS), so a reader on
    /// another machine sees the names this one had.
    pub fn snapshot(&mut self) -> Snapshot {
        let mut ids: Vec<(u32, u32)> = Vec::new();
        for p in self.procs.values() {
            ids.push((p.uid, p.gid));
            ids.push((p.euid, p.egid));
            if p.loginuid != u32::MAX {
                ids.push((p.loginuid, u32::MAX));
            }
        }
        for (uid, gid) in ids {
            self.users.user(uid);
            if gid != u32::MAX {
                self.users.group(gid);
            }
        }
        let mut tids: HashMap<u32, Vec<u32>> = HashMap::new();
        for (&tid, &pid) in &self.threads {
            tids.entry(pid).or_default().push(tid);
        }
        let mut processes: Vec<SnapProcess> = self
            .procs
            .values()
            .map(|p| {
                let mut t = tids.remove(&p.pid).unwrap_or_default();
                t.sort_unstable();
                snap_process(p, t)
            })
            .collect();
        processes.sort_by_key(|p| p.pid);
        let mut users: Vec<SnapUser> = self
            .users
            .users
            .values()
            .flatten()
            .map(|u| SnapUser {
                uid: u.uid,
                name: u.name.to_string(),
                home: u.homedir.to_string(),
                shell: u.shell.to_string(),
            })
            .collect();
        users.sort_by_key(|u| u.uid);
        let mut groups: Vec<SnapGroup> = self
            .users
            .groups
            .iter()
            .filter_map(|(&gid, n)| n.as_ref().map(|n| SnapGroup { gid, name: n.to_string() }))
            .collect();
        groups.sort_by_key(|g| g.gid);
        let mut containers: Vec<SnapContainer> = self
            .containers
            .by_id
            .values()
            .map(|c| SnapContainer {
                id: c.id.to_string(),
                full_id: c.full_id.to_string(),
                name: c.name.to_string(),
                image: c.image.to_string(),
                image_repository: c.image_repository.to_string(),
                privileged: c.privileged,
                created: c.created.to_string(),
                runtime: c.runtime.to_string(),
                pod: SnapPod {
                    name: c.pod.name.to_string(),
                    namespace: c.pod.namespace.to_string(),
                    uid: c.pod.uid.to_string(),
                    sandbox_id: c.pod.sandbox_id.to_string(),
                },
                mounts: c
                    .mounts
                    .iter()
                    .map(|m| SnapMount {
                        source: m.source.to_string(),
                        dest: m.dest.to_string(),
                        mode: m.mode.to_string(),
                        rdwr: m.rdwr,
                        propagation: m.propagation.to_string(),
                    })
                    .collect(),
            })
            .collect();
        containers.sort_by(|a, b| a.full_id.cmp(&b.full_id));
        Snapshot { processes, users, groups, containers }
    }

    /// Tables rebuilt from a snapshot. Nothing is read from this machine's
    /// /proc, even for threads the capture never introduced (they are
    /// counted as unknown); users and groups the snapshot names answer from
    /// it, not from NSS.
    pub fn from_snapshot(s: &Snapshot) -> State {
        let mut st = State::new();
        st.read_proc = false;
        st.restore(s);
        st
    }

    /// Adds a snapshot's entries to the tables (a later snapshot overrides
    /// entries with the same ids).
    pub fn restore(&mut self, s: &Snapshot) {
        for u in &s.users {
            let user = User {
                uid: u.uid,
                name: u.name.as_str().into(),
                homedir: u.home.as_str().into(),
                shell: u.shell.as_str().into(),
            };
            self.users.users.insert(u.uid, Some(user));
        }
        for g in &s.groups {
            self.users.groups.insert(g.gid, Some(g.name.as_str().into()));
        }
        for c in &s.containers {
            let runtime = RUNTIMES.iter().copied().find(|r| *r == c.runtime).unwrap_or("");
            let c = Container {
                id: c.id.as_str().into(),
                full_id: c.full_id.as_str().into(),
                name: c.name.as_str().into(),
                image: c.image.as_str().into(),
                image_repository: c.image_repository.as_str().into(),
                privileged: c.privileged,
                created: c.created.as_str().into(),
                runtime,
                pod: Pod {
                    name: c.pod.name.as_str().into(),
                    namespace: c.pod.namespace.as_str().into(),
                    uid: c.pod.uid.as_str().into(),
                    sandbox_id: c.pod.sandbox_id.as_str().into(),
                },
                mounts: c
                    .mounts
                    .iter()
                    .map(|m| Mount {
                        source: m.source.as_str().into(),
                        dest: m.dest.as_str().into(),
                        mode: m.mode.as_str().into(),
                        rdwr: m.rdwr,
                        propagation: m.propagation.as_str().into(),
                    })
                    .collect(),
            };
            self.containers.by_id.insert(c.full_id.clone(), Arc::new(c));
        }
        for sp in &s.processes {
            let p = process_of(sp, |id| self.containers.by_id.get(id).cloned());
            let mut tids = sp.tids.clone();
            if !tids.contains(&sp.pid) {
                tids.push(sp.pid);
            }
            self.insert_process(p, &tids);
        }
    }
}

fn snap_process(p: &Process, tids: Vec<u32>) -> SnapProcess {
    let mut fds: Vec<SnapFd> = p
        .fds
        .iter()
        .map(|(fd, f)| SnapFd {
            fd,
            typ: f.typ.name().to_string(),
            cloexec: f.cloexec,
            flags: f.flags,
            name: f.name.to_string(),
            tuple: f.tuple.as_deref().map(|t| SnapTuple {
                v6: t.v6,
                l4: t.l4.name().to_string(),
                sip: t.sip,
                dip: t.dip,
                sport: t.sport,
                dport: t.dport,
                server: t.server,
            }),
        })
        .collect();
    fds.sort_by_key(|f| f.fd);
    SnapProcess {
        pid: p.pid,
        ppid: p.ppid,
        vpid: p.vpid,
        vpgid: p.vpgid,
        sid: p.sid,
        comm: p.name().to_string(),
        exe: p.exe.to_string(),
        exepath: p.exepath.to_string(),
        args: p.args.to_string(),
        cwd: p.cwd.to_string(),
        env: String::from_utf8_lossy(&p.env).into_owned(),
        uid: p.uid,
        gid: p.gid,
        euid: p.euid,
        egid: p.egid,
        loginuid: p.loginuid,
        tty: p.tty,
        cap_effective: p.cap_effective,
        cap_permitted: p.cap_permitted,
        cap_inheritable: p.cap_inheritable,
        start_ts: p.start_ts,
        exe_ctime: p.exe_ctime,
        exe_mtime: p.exe_mtime,
        exe_flags: p.exe_flags,
        container: p.container.as_ref().map_or(String::new(), |c| c.full_id.to_string()),
        tids,
        fds,
    }
}

fn process_of(sp: &SnapProcess, container: impl Fn(&str) -> Option<Arc<Container>>) -> Process {
    let mut p = Process::new(sp.pid);
    p.ppid = sp.ppid;
    p.vpid = sp.vpid;
    p.vpgid = sp.vpgid;
    p.sid = sp.sid;
    p.comm = Comm::new(&sp.comm);
    p.exe = sp.exe.as_str().into();
    p.exepath = sp.exepath.as_str().into();
    p.args = sp.args.as_str().into();
    p.cwd = sp.cwd.as_str().into();
    p.env = Arc::from(sp.env.as_bytes());
    p.uid = sp.uid;
    p.gid = sp.gid;
    p.euid = sp.euid;
    p.egid = sp.egid;
    p.loginuid = sp.loginuid;
    p.tty = sp.tty;
    p.cap_effective = sp.cap_effective;
    p.cap_permitted = sp.cap_permitted;
    p.cap_inheritable = sp.cap_inheritable;
    p.start_ts = sp.start_ts;
    p.exe_ctime = sp.exe_ctime;
    p.exe_mtime = sp.exe_mtime;
    p.exe_flags = sp.exe_flags;
    p.container = if sp.container.is_empty() { None } else { container(&sp.container) };
    for f in &sp.fds {
        let mut fd = Fd::new(fd_type(&f.typ), f.name.as_str().into(), f.cloexec);
        fd.flags = f.flags;
        fd.tuple = f.tuple.as_ref().map(|t| {
            Box::new(Tuple {
                v6: t.v6,
                l4: L4S.iter().copied().find(|l| l.name() == t.l4).unwrap_or_default(),
                sip: t.sip,
                dip: t.dip,
                sport: t.sport,
                dport: t.dport,
                server: t.server,
            })
        });
        p.fds.insert(f.fd, fd);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Snapshot {
        Snapshot {
            processes: vec![SnapProcess {
                pid: 42,
                ppid: 1,
                vpid: 42,
                comm: "nginx".into(),
                exe: "/usr/sbin/nginx".into(),
                exepath: "/usr/sbin/nginx".into(),
                args: "-g\0daemon off;".into(),
                cwd: "/".into(),
                uid: 33,
                gid: 33,
                euid: 33,
                egid: 33,
                loginuid: u32::MAX,
                container: "c".repeat(64),
                tids: vec![42, 43],
                fds: vec![
                    SnapFd {
                        fd: 3,
                        typ: "file".into(),
                        cloexec: true,
                        flags: 0o2000000,
                        name: "/var/log/x".into(),
                        tuple: None,
                    },
                    SnapFd {
                        fd: 4,
                        typ: "ipv4".into(),
                        cloexec: false,
                        flags: 1,
                        name: "0.0.0.0:80->0.0.0.0:0".into(),
                        tuple: Some(SnapTuple {
                            l4: "tcp".into(),
                            sport: 80,
                            server: true,
                            ..Default::default()
                        }),
                    },
                ],
                ..Default::default()
            }],
            users: vec![SnapUser {
                uid: 33,
                name: "www-data".into(),
                home: "/var/www".into(),
                shell: "/bin/false".into(),
            }],
            groups: vec![SnapGroup { gid: 33, name: "www-data".into() }],
            containers: vec![SnapContainer {
                id: "c".repeat(12),
                full_id: "c".repeat(64),
                name: "web".into(),
                runtime: "docker".into(),
                pod: SnapPod { name: "web-0".into(), namespace: "prod".into(), ..Default::default() },
                mounts: vec![SnapMount {
                    source: "/srv/data".into(),
                    dest: "/data".into(),
                    rdwr: false,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    #[test]
    fn a_snapshot_restores_the_same_tables() {
        let s = sample();
        let mut st = State::from_snapshot(&s);
        let p = st.process(43).expect("thread 43 belongs to 42");
        assert_eq!((p.pid, p.name(), &*p.cwd), (42, "nginx", "/"));
        assert_eq!(p.container_id(), "cccccccccccc");
        let c = p.container.as_ref().unwrap();
        assert_eq!((&*c.pod.name, &*c.pod.namespace), ("web-0", "prod"));
        assert_eq!(c.mounts[0].to_string(), "/srv/data:/data::false:");
        assert_eq!(st.fd(43, 4).unwrap().typ, FdType::Ipv4);
        assert_eq!(st.fd(42, 4).unwrap().tuple.as_ref().unwrap().l4, L4::Tcp);
        assert_eq!(st.users.cached_user(33).unwrap().name.as_ref(), "www-data");
        // Round trip: the snapshot of the restored tables is the original.
        assert_eq!(st.snapshot(), s);
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<Snapshot>(&json).unwrap(), s);
    }

    #[test]
    fn a_container_without_pod_or_mounts_keeps_the_older_json() {
        let mut c = sample().containers.remove(0);
        (c.pod, c.mounts) = (SnapPod::default(), Vec::new());
        let json = serde_json::to_string(&c).unwrap();
        assert!(!json.contains("pod") && !json.contains("mounts"), "{json}");
        assert_eq!(serde_json::from_str::<SnapContainer>(&json).unwrap(), c);
    }
}
