//! Neutral descriptions of the state a legacy capture carries besides its
//! events: the machine, the processes and their fds at capture start, users,
//! groups, network interfaces, and per-thread CPU usage (proc-info events).

/// The section header block: the file's format version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionHeader {
    pub major: u16,
    pub minor: u16,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MachineInfo {
    pub num_cpus: u32,
    pub memory_bytes: u64,
    pub max_pid: u64,
    pub hostname: String,
    /// Boot time in ns since the epoch (0 in files written before it existed).
    pub boot_ts: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessSnapshot {
    pub tid: u64,
    pub pid: u64,
    pub ppid: u64,
    /// -1 where the file's process-list version has no such field.
    pub sid: i64,
    pub vpgid: i64,
    pub vtid: i64,
    pub vpid: i64,
    pub comm: String,
    /// argv[0].
    pub exe: String,
    /// Absolute path of the executable (process list v7 and later).
    pub exepath: String,
    pub args: Vec<String>,
    pub cwd: String,
    pub env: Vec<String>,
    pub uid: u32,
    pub gid: u32,
    /// u32::MAX when unknown.
    pub loginuid: u32,
    pub tty: u32,
    pub fdlimit: u64,
    pub flags: u32,
    pub cap_effective: u64,
    pub cap_permitted: u64,
    pub cap_inheritable: u64,
    /// cgroups as "subsystem=path" strings.
    pub cgroups: Vec<String>,
    pub root: String,
    /// Container id, when the cgroup paths name one (docker, cri, podman...).
    pub container_id: String,
    pub exe_ino: u64,
    pub exe_ino_ctime: u64,
    pub exe_ino_mtime: u64,
    /// From the file's fd-list blocks for this thread.
    pub fds: Vec<FdSnapshot>,
}

/// The kind of an open descriptor, as the legacy format records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FdKind {
    File,
    Directory,
    Ipv4Socket,
    Ipv6Socket,
    Ipv4Server,
    Ipv6Server,
    Fifo,
    Unix,
    Event,
    Signalfd,
    Eventpoll,
    Inotify,
    Timerfd,
    Netlink,
    Bpf,
    Userfaultfd,
    IoUring,
    Memfd,
    Pidfd,
    Unsupported,
    /// A type number this reader does not know (a newer writer).
    Other(u8),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tuple {
    /// "tcp", "udp", "raw", "icmp" or the number.
    pub l4proto: String,
    pub sip: std::net::IpAddr,
    pub sport: u16,
    pub dip: std::net::IpAddr,
    pub dport: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FdSnapshot {
    pub fd: i64,
    pub ino: u64,
    pub kind: FdKind,
    /// The path, or for sockets "sip:sport->dip:dport" / the unix path.
    pub name: String,
    pub open_flags: u32,
    pub tuple: Option<Tuple>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub uid: u32,
    pub gid: u32,
    pub name: String,
    pub home: String,
    pub shell: String,
    pub container_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub gid: u32,
    pub name: String,
    pub container_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub addr: std::net::IpAddr,
    pub netmask: std::net::IpAddr,
    pub bcast: std::net::IpAddr,
    pub linkspeed: u64,
}

/// State from the file's metadata blocks and state events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Snapshot {
    Machine(MachineInfo),
    /// One thread of the process list, with its fds.
    Process(Box<ProcessSnapshot>),
    Users(Vec<User>),
    Groups(Vec<Group>),
    Interfaces(Vec<Interface>),
    /// A user-added event (ts, user).
    UserAdded(u64, User),
    GroupAdded(u64, Group),
    /// A proc-info event: CPU time of a thread so far, in clock ticks.
    ProcInfo {
        ts: u64,
        tid: u64,
        cpu_user: u64,
        cpu_system: u64,
    },
}

/// The container id in cgroup paths (docker, containerd/CRI, cri-o, podman):
/// 64 hex digits as the last component or inside "<runtime>-<id>.scope",
/// shortened to 12 as Falco shows it; empty for the host.
pub fn container_id_of(cgroups: &[String]) -> String {
    for cg in cgroups {
        let path = cg.split_once('=').map_or(cg.as_str(), |(_, p)| p);
        for comp in path.rsplit('/') {
            let id = comp.strip_suffix(".scope").map_or(comp, |s| s.rsplit('-').next().unwrap_or(s));
            if id.len() == 64 && id.bytes().all(|c| c.is_ascii_hexdigit()) {
                return id[..12].to_string();
            }
        }
    }
    String::new()
}
