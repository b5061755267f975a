//! What the rules read of the state tables, borrowed per event. The engine's
//! field extraction (source.rs) is written against this; `state.rs` adapts
//! harrier-state's tables to it, so the two crates can change separately.

use std::net::IpAddr;

/// A process (thread group) as the rules see it.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcInfo<'a> {
    pub pid: u32,
    pub ppid: u32,
    pub comm: &'a [u8],
    /// argv[0] (Falco's proc.exe).
    pub exe: &'a [u8],
    /// The executable's full path.
    pub exepath: &'a [u8],
    /// Arguments after argv[0], NUL-separated.
    pub args: &'a [u8],
    pub cwd: &'a [u8],
    pub env: &'a [u8],
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub euid: Option<u32>,
    pub egid: Option<u32>,
    pub loginuid: Option<u32>,
    pub tty: Option<u32>,
    pub sid: Option<u32>,
    pub vpid: Option<u32>,
    pub vpgid: Option<u32>,
    pub cap_effective: Option<u64>,
    pub cap_permitted: Option<u64>,
    pub cap_inheritable: Option<u64>,
    pub exe_upper_layer: Option<bool>,
    pub exe_from_memfd: Option<bool>,
    pub exe_writable: Option<bool>,
    pub exe_lower_layer: Option<bool>,
    pub start_ns: Option<u64>,
    /// The executable's inode times (ns since the epoch; 0: unknown).
    pub exe_ctime: u64,
    pub exe_mtime: u64,
    /// Empty for host processes.
    pub container_id: &'a str,
    pub container_full_id: &'a str,
}

/// A socket's addresses: client and server as Falco orients them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuple {
    pub cip: IpAddr,
    pub cport: u16,
    pub sip: IpAddr,
    pub sport: u16,
    /// tcp, udp, raw...
    pub l4proto: &'static str,
    /// This side accepted (is the server).
    pub is_server: bool,
}

#[derive(Debug, Clone, Copy)]
pub struct FdInfo<'a> {
    pub num: i32,
    /// Falco's fd.type ("file", "ipv4", "unix", "pipe"...).
    pub type_name: &'static str,
    /// Falco's fd.typechar ("f", "4", "u", "p"...).
    pub typechar: &'static str,
    /// "ip" or "unix" for sockets (fd.sockfamily).
    pub sockfamily: Option<&'static str>,
    /// Path, or for sockets Falco's "cip:cport->sip:sport" text.
    pub name: &'a [u8],
    pub tuple: Option<Tuple>,
}

#[derive(Debug, Clone, Copy)]
pub struct UserInfo<'a> {
    pub name: &'a str,
    pub home: &'a str,
    pub shell: &'a str,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct ContainerInfo<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub image: &'a str,
    pub image_repository: &'a str,
    pub privileged: Option<bool>,
    /// docker, containerd, cri-o, podman, runc (container.type).
    pub runtime: &'a str,
    /// The Kubernetes pod (empty outside Kubernetes: the k8s.* fields then have no value).
    pub pod_name: &'a str,
    pub pod_namespace: &'a str,
    pub pod_uid: &'a str,
    /// The pod sandbox's full container id.
    pub pod_sandbox_id: &'a str,
    pub mounts: &'a [harrier_state::Mount],
}

/// The state tables, as extraction needs them. Lookups are cheap borrows.
pub trait StateView {
    /// The process thread `tid` belongs to.
    fn process(&self, tid: u32) -> Option<ProcInfo<'_>>;
    /// A process by pid (for ancestors: follow `ppid`).
    fn process_by_pid(&self, pid: u32) -> Option<ProcInfo<'_>>;
    fn fd(&self, tid: u32, fd: i32) -> Option<FdInfo<'_>>;
    fn user(&self, uid: u32) -> Option<UserInfo<'_>>;
    fn group(&self, gid: u32) -> Option<&str>;
    /// The container thread `tid`'s process runs in (None: the host).
    fn container(&self, tid: u32) -> Option<ContainerInfo<'_>>;
    /// Falco's fd.name_changed: the event being evaluated renamed the fd it
    /// names (state is applied before the rules see an event).
    fn fd_name_changed(&self) -> bool {
        false
    }
}
