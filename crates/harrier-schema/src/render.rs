//! Turns raw syscall argument values into the names a Falco/strace user expects.
//!
//! Each renderer is one table of x86_64 values; `render` picks it by the name
//! used after the `/` in schema/events.tbl. Flag sets join names with `|` and
//! append unknown bits as hex; enums fall back to the decimal number.

use tables::*;

type Table = &'static [(u64, &'static str)];

/// All renderer names this module knows (schema/events.tbl may use only these).
#[rustfmt::skip]
pub const RENDERERS: &[&str] = &[
    "open_flags", "mode", "at_flags", "resolve_flags", "rename_flags", "fcntl_cmd",
    "mount_flags", "umount_flags", "clone_flags", "prctl_option", "ptrace_request", "signal",
    "socket_family", "socket_type", "msg_flags", "shutdown_how", "sockopt_level", "clockid",
    "epoll_op", "epoll_events", "capabilities", "exe_flags",
];

/// Renders `value` with the named decoder; None if the renderer name is unknown.
pub fn render(renderer: &str, value: u64) -> Option<String> {
    Some(match renderer {
        "open_flags" => open_flags(value),
        "mode" => mode(value),
        "at_flags" => flags(value, AT),
        "resolve_flags" => flags(value, RESOLVE),
        "rename_flags" => flags(value, RENAME),
        "fcntl_cmd" => enumeration(value, FCNTL),
        "mount_flags" => mount_flags(value),
        "umount_flags" => flags(value, UMOUNT),
        "clone_flags" => clone_flags(value),
        "prctl_option" => enumeration(value, PRCTL),
        "ptrace_request" => enumeration(value, PTRACE),
        "signal" => signal(value),
        "socket_family" => enumeration(value, AF),
        "socket_type" => socket_type(value),
        "msg_flags" => flags(value, MSG),
        "shutdown_how" => enumeration(value, SHUT),
        "sockopt_level" => enumeration(value, SOL),
        "clockid" => clockid(value),
        "epoll_op" => enumeration(value, EPOLL_CTL),
        "epoll_events" => flags(value, EPOLL),
        "capabilities" => capabilities(value),
        "exe_flags" => flags(value, EXE),
        falco if falco.starts_with("falco_") => return crate::falco::render(falco, value),
        _ => return None,
    })
}

/// Names of the table entries whose bits are all set, in table order, plus the
/// bits no entry claimed. Multi-bit entries (O_SYNC, O_TMPFILE) must precede
/// the single bits they contain so they win.
fn split(mut value: u64, table: Table) -> (Vec<String>, u64) {
    let mut names = Vec::new();
    for &(bits, name) in table {
        if bits != 0 && value & bits == bits {
            names.push(name.to_string());
            value &= !bits;
        }
    }
    (names, value)
}

/// Joins names and a hex leftover with `|`; nothing at all renders as "0".
fn join(mut names: Vec<String>, rest: u64) -> String {
    if rest != 0 {
        names.push(format!("{rest:#x}"));
    }
    if names.is_empty() {
        "0".to_string()
    } else {
        names.join("|")
    }
}

/// A plain flag set.
fn flags(value: u64, table: Table) -> String {
    let (names, rest) = split(value, table);
    join(names, rest)
}

/// A capability set as Falco writes thread.cap_effective: names joined with
/// spaces ("CAP_CHOWN CAP_SYS_MODULE"), unknown bits in hex, an empty set empty.
fn capabilities(value: u64) -> String {
    let mut names = Vec::new();
    for (bit, name) in CAPS.iter().enumerate() {
        if value & (1 << bit) != 0 {
            names.push(name.to_string());
        }
    }
    let rest = value & !((1u64 << CAPS.len()) - 1);
    if rest != 0 {
        names.push(format!("{rest:#x}"));
    }
    names.join(" ")
}

/// One name for a known value, else the decimal number.
fn enumeration(value: u64, table: Table) -> String {
    lookup(value, table).map_or_else(|| value.to_string(), str::to_string)
}

fn lookup(value: u64, table: Table) -> Option<&'static str> {
    table.iter().find(|&&(v, _)| v == value).map(|&(_, name)| name)
}

/// The access mode is a 2-bit enum (O_RDONLY is 0), the rest are flags.
fn open_flags(value: u64) -> String {
    let access = ["O_RDONLY", "O_WRONLY", "O_RDWR", "O_ACCMODE"][(value & 3) as usize];
    let (mut names, rest) = split(value & !3, OPEN);
    names.insert(0, access.to_string());
    join(names, rest)
}

/// strace style: the file type (if any) by name, permissions in octal ("0644").
fn mode(value: u64) -> String {
    let ty = lookup(value & 0o170000, S_IF);
    let perms = value & if ty.is_some() { 0o7777 } else { 0o177777 };
    let mut names: Vec<String> = ty.map(str::to_string).into_iter().collect();
    if perms != 0 || ty.is_some() {
        names.push(format!("0{perms:02o}"));
    }
    join(names, value & !0o177777)
}

/// MS_MGC_VAL in the top 16 bits is the pre-2.4 magic: the kernel drops the
/// whole top half then, so it must not be read as MS_POSIXACL and friends.
fn mount_flags(value: u64) -> String {
    if value & 0xffff_0000 == 0xc0ed_0000 {
        let (mut names, rest) = split(value & !0xffff_0000, MS);
        names.insert(0, "MS_MGC_VAL".to_string());
        return join(names, rest);
    }
    flags(value, MS)
}

/// The low byte is CSIGNAL, the exit signal (at most 64), except 0x80 which is
/// CLONE_NEWTIME (unshare/setns/clone3). strace prints the signal last.
fn clone_flags(value: u64) -> String {
    let sig = value & 0x7f;
    let (mut names, mut rest) = split(value & !0x7f, CLONE);
    match sig {
        0 => {}
        1..=64 => names.push(signal(sig)),
        _ => rest |= sig,
    }
    join(names, rest)
}

/// Real-time signals are named like strace does: SIGRT_<n-32> (kernel SIGRTMIN is 32).
fn signal(value: u64) -> String {
    match value {
        32..=64 => format!("SIGRT_{}", value - 32),
        _ => enumeration(value, SIG),
    }
}

/// The low 4 bits are the type; accept4 passes only the flags, so a zero type
/// prints nothing.
fn socket_type(value: u64) -> String {
    let ty = value & 0xf;
    let (mut names, mut rest) = split(value & !0xf, SOCK_FLAGS);
    match lookup(ty, SOCK) {
        Some(name) => names.insert(0, name.to_string()),
        None => rest |= ty,
    }
    join(names, rest)
}

/// Negative ids (as u32) are dynamic per-process/thread CPU clocks: show them signed.
fn clockid(value: u64) -> String {
    match lookup(value, CLOCK) {
        Some(name) => name.to_string(),
        None if (0x8000_0000..=0xffff_ffff).contains(&value) => (value as u32 as i32).to_string(),
        None => value.to_string(),
    }
}

/// The x86_64 values, one table per renderer, laid out densely by hand.
#[rustfmt::skip]
mod tables {
    use super::Table;

    /// Capability names by bit number (linux/capability.h).
    pub(super) const CAPS: [&str; 41] = [
        "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
        "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
        "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW",
        "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT",
        "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
        "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
        "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE",
        "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ",
        "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
    ];

    pub(super) const OPEN: Table = &[
        (0o100, "O_CREAT"), (0o200, "O_EXCL"), (0o400, "O_NOCTTY"), (0o1000, "O_TRUNC"),
        (0o2000, "O_APPEND"), (0o4000, "O_NONBLOCK"), (0o4010000, "O_SYNC"), (0o10000, "O_DSYNC"),
        (0o20000, "O_ASYNC"), (0o40000, "O_DIRECT"), (0o100000, "O_LARGEFILE"),
        (0o20200000, "O_TMPFILE"), (0o200000, "O_DIRECTORY"), (0o400000, "O_NOFOLLOW"),
        (0o1000000, "O_NOATIME"), (0o2000000, "O_CLOEXEC"), (0o10000000, "O_PATH"),
    ];

    pub(super) const S_IF: Table = &[
        (0o140000, "S_IFSOCK"), (0o120000, "S_IFLNK"), (0o100000, "S_IFREG"), (0o60000, "S_IFBLK"),
        (0o40000, "S_IFDIR"), (0o20000, "S_IFCHR"), (0o10000, "S_IFIFO"),
    ];

    /// execve's exe_flags bits (harrier-state's Process::exe_flags), by Falco's names in
    /// Falco's order (driver/flags_table.c's execve_flags).
    pub(super) const EXE: Table =
        &[(4, "EXE_WRITABLE"), (1, "EXE_UPPER_LAYER"), (2, "EXE_FROM_MEMFD"), (8, "EXE_LOWER_LAYER")];

    /// 0x200 is also AT_EACCESS (faccessat) and AT_HANDLE_FID; the table only uses
    /// at_flags for unlinkat/linkat/fchownat/execveat, where AT_REMOVEDIR is right.
    pub(super) const AT: Table = &[
        (0x100, "AT_SYMLINK_NOFOLLOW"), (0x200, "AT_REMOVEDIR"), (0x400, "AT_SYMLINK_FOLLOW"),
        (0x800, "AT_NO_AUTOMOUNT"), (0x1000, "AT_EMPTY_PATH"), (0x2000, "AT_STATX_FORCE_SYNC"),
        (0x4000, "AT_STATX_DONT_SYNC"), (0x8000, "AT_RECURSIVE"),
    ];

    pub(super) const RESOLVE: Table = &[
        (0x01, "RESOLVE_NO_XDEV"), (0x02, "RESOLVE_NO_MAGICLINKS"), (0x04, "RESOLVE_NO_SYMLINKS"),
        (0x08, "RESOLVE_BENEATH"), (0x10, "RESOLVE_IN_ROOT"), (0x20, "RESOLVE_CACHED"),
    ];

    pub(super) const RENAME: Table = &[
        (1, "RENAME_NOREPLACE"), (2, "RENAME_EXCHANGE"), (4, "RENAME_WHITEOUT"),
    ];

    pub(super) const FCNTL: Table = &[
        (0, "F_DUPFD"), (1, "F_GETFD"), (2, "F_SETFD"), (3, "F_GETFL"), (4, "F_SETFL"),
        (5, "F_GETLK"), (6, "F_SETLK"), (7, "F_SETLKW"), (8, "F_SETOWN"), (9, "F_GETOWN"),
        (10, "F_SETSIG"), (11, "F_GETSIG"), (15, "F_SETOWN_EX"), (16, "F_GETOWN_EX"),
        (17, "F_GETOWNER_UIDS"), (36, "F_OFD_GETLK"), (37, "F_OFD_SETLK"), (38, "F_OFD_SETLKW"),
        (1024, "F_SETLEASE"), (1025, "F_GETLEASE"), (1026, "F_NOTIFY"), (1027, "F_DUPFD_QUERY"),
        (1028, "F_CREATED_QUERY"), (1029, "F_CANCELLK"), (1030, "F_DUPFD_CLOEXEC"),
        (1031, "F_SETPIPE_SZ"), (1032, "F_GETPIPE_SZ"), (1033, "F_ADD_SEALS"),
        (1034, "F_GET_SEALS"), (1035, "F_GET_RW_HINT"), (1036, "F_SET_RW_HINT"),
        (1037, "F_GET_FILE_RW_HINT"), (1038, "F_SET_FILE_RW_HINT"),
    ];

    pub(super) const MS: Table = &[
        (1, "MS_RDONLY"), (2, "MS_NOSUID"), (4, "MS_NODEV"), (8, "MS_NOEXEC"),
        (16, "MS_SYNCHRONOUS"), (32, "MS_REMOUNT"), (64, "MS_MANDLOCK"), (128, "MS_DIRSYNC"),
        (256, "MS_NOSYMFOLLOW"), (1024, "MS_NOATIME"), (2048, "MS_NODIRATIME"), (4096, "MS_BIND"),
        (8192, "MS_MOVE"), (16384, "MS_REC"), (32768, "MS_SILENT"), (1 << 16, "MS_POSIXACL"),
        (1 << 17, "MS_UNBINDABLE"), (1 << 18, "MS_PRIVATE"), (1 << 19, "MS_SLAVE"),
        (1 << 20, "MS_SHARED"), (1 << 21, "MS_RELATIME"), (1 << 22, "MS_KERNMOUNT"),
        (1 << 23, "MS_I_VERSION"), (1 << 24, "MS_STRICTATIME"), (1 << 25, "MS_LAZYTIME"),
    ];

    pub(super) const UMOUNT: Table = &[
        (1, "MNT_FORCE"), (2, "MNT_DETACH"), (4, "MNT_EXPIRE"), (8, "UMOUNT_NOFOLLOW"),
    ];

    pub(super) const CLONE: Table = &[
        (0x80, "CLONE_NEWTIME"), (0x100, "CLONE_VM"), (0x200, "CLONE_FS"), (0x400, "CLONE_FILES"),
        (0x800, "CLONE_SIGHAND"), (0x1000, "CLONE_PIDFD"), (0x2000, "CLONE_PTRACE"),
        (0x4000, "CLONE_VFORK"), (0x8000, "CLONE_PARENT"), (0x10000, "CLONE_THREAD"),
        (0x20000, "CLONE_NEWNS"), (0x40000, "CLONE_SYSVSEM"), (0x80000, "CLONE_SETTLS"),
        (0x100000, "CLONE_PARENT_SETTID"), (0x200000, "CLONE_CHILD_CLEARTID"),
        (0x400000, "CLONE_DETACHED"), (0x800000, "CLONE_UNTRACED"),
        (0x1000000, "CLONE_CHILD_SETTID"), (0x2000000, "CLONE_NEWCGROUP"),
        (0x4000000, "CLONE_NEWUTS"), (0x8000000, "CLONE_NEWIPC"), (0x10000000, "CLONE_NEWUSER"),
        (0x20000000, "CLONE_NEWPID"), (0x40000000, "CLONE_NEWNET"), (0x80000000, "CLONE_IO"),
        (0x100000000, "CLONE_CLEAR_SIGHAND"), (0x200000000, "CLONE_INTO_CGROUP"),
    ];

    /// The options that mean something on x86_64 (no SVE/PAC/SME/RISC-V/PPC ones).
    pub(super) const PRCTL: Table = &[
        (1, "PR_SET_PDEATHSIG"), (2, "PR_GET_PDEATHSIG"), (3, "PR_GET_DUMPABLE"),
        (4, "PR_SET_DUMPABLE"), (7, "PR_GET_KEEPCAPS"), (8, "PR_SET_KEEPCAPS"),
        (13, "PR_GET_TIMING"), (14, "PR_SET_TIMING"), (15, "PR_SET_NAME"), (16, "PR_GET_NAME"),
        (21, "PR_GET_SECCOMP"), (22, "PR_SET_SECCOMP"), (23, "PR_CAPBSET_READ"),
        (24, "PR_CAPBSET_DROP"), (25, "PR_GET_TSC"), (26, "PR_SET_TSC"), (27, "PR_GET_SECUREBITS"),
        (28, "PR_SET_SECUREBITS"), (29, "PR_SET_TIMERSLACK"), (30, "PR_GET_TIMERSLACK"),
        (31, "PR_TASK_PERF_EVENTS_DISABLE"), (32, "PR_TASK_PERF_EVENTS_ENABLE"),
        (33, "PR_MCE_KILL"), (34, "PR_MCE_KILL_GET"), (35, "PR_SET_MM"),
        (36, "PR_SET_CHILD_SUBREAPER"), (37, "PR_GET_CHILD_SUBREAPER"), (38, "PR_SET_NO_NEW_PRIVS"),
        (39, "PR_GET_NO_NEW_PRIVS"), (40, "PR_GET_TID_ADDRESS"), (41, "PR_SET_THP_DISABLE"),
        (42, "PR_GET_THP_DISABLE"), (47, "PR_CAP_AMBIENT"), (52, "PR_GET_SPECULATION_CTRL"),
        (53, "PR_SET_SPECULATION_CTRL"), (57, "PR_SET_IO_FLUSHER"), (58, "PR_GET_IO_FLUSHER"),
        (59, "PR_SET_SYSCALL_USER_DISPATCH"), (62, "PR_SCHED_CORE"), (65, "PR_SET_MDWE"),
        (66, "PR_GET_MDWE"), (67, "PR_SET_MEMORY_MERGE"), (68, "PR_GET_MEMORY_MERGE"),
        (0x53564d41, "PR_SET_VMA"), (0x59616d61, "PR_SET_PTRACER"),
    ];

    pub(super) const PTRACE: Table = &[
        (0, "PTRACE_TRACEME"), (1, "PTRACE_PEEKTEXT"), (2, "PTRACE_PEEKDATA"),
        (3, "PTRACE_PEEKUSER"), (4, "PTRACE_POKETEXT"), (5, "PTRACE_POKEDATA"),
        (6, "PTRACE_POKEUSER"), (7, "PTRACE_CONT"), (8, "PTRACE_KILL"), (9, "PTRACE_SINGLESTEP"),
        (12, "PTRACE_GETREGS"), (13, "PTRACE_SETREGS"), (14, "PTRACE_GETFPREGS"),
        (15, "PTRACE_SETFPREGS"), (16, "PTRACE_ATTACH"), (17, "PTRACE_DETACH"),
        (18, "PTRACE_GETFPXREGS"), (19, "PTRACE_SETFPXREGS"), (24, "PTRACE_SYSCALL"),
        (25, "PTRACE_GET_THREAD_AREA"), (26, "PTRACE_SET_THREAD_AREA"), (30, "PTRACE_ARCH_PRCTL"),
        (31, "PTRACE_SYSEMU"), (32, "PTRACE_SYSEMU_SINGLESTEP"), (33, "PTRACE_SINGLEBLOCK"),
        (0x4200, "PTRACE_SETOPTIONS"), (0x4201, "PTRACE_GETEVENTMSG"),
        (0x4202, "PTRACE_GETSIGINFO"), (0x4203, "PTRACE_SETSIGINFO"), (0x4204, "PTRACE_GETREGSET"),
        (0x4205, "PTRACE_SETREGSET"), (0x4206, "PTRACE_SEIZE"), (0x4207, "PTRACE_INTERRUPT"),
        (0x4208, "PTRACE_LISTEN"), (0x4209, "PTRACE_PEEKSIGINFO"), (0x420a, "PTRACE_GETSIGMASK"),
        (0x420b, "PTRACE_SETSIGMASK"), (0x420c, "PTRACE_SECCOMP_GET_FILTER"),
        (0x420d, "PTRACE_SECCOMP_GET_METADATA"), (0x420e, "PTRACE_GET_SYSCALL_INFO"),
        (0x420f, "PTRACE_GET_RSEQ_CONFIGURATION"),
        (0x4210, "PTRACE_SET_SYSCALL_USER_DISPATCH_CONFIG"),
        (0x4211, "PTRACE_GET_SYSCALL_USER_DISPATCH_CONFIG"),
    ];

    pub(super) const SIG: Table = &[
        (1, "SIGHUP"), (2, "SIGINT"), (3, "SIGQUIT"), (4, "SIGILL"), (5, "SIGTRAP"), (6, "SIGABRT"),
        (7, "SIGBUS"), (8, "SIGFPE"), (9, "SIGKILL"), (10, "SIGUSR1"), (11, "SIGSEGV"),
        (12, "SIGUSR2"), (13, "SIGPIPE"), (14, "SIGALRM"), (15, "SIGTERM"), (16, "SIGSTKFLT"),
        (17, "SIGCHLD"), (18, "SIGCONT"), (19, "SIGSTOP"), (20, "SIGTSTP"), (21, "SIGTTIN"),
        (22, "SIGTTOU"), (23, "SIGURG"), (24, "SIGXCPU"), (25, "SIGXFSZ"), (26, "SIGVTALRM"),
        (27, "SIGPROF"), (28, "SIGWINCH"), (29, "SIGIO"), (30, "SIGPWR"), (31, "SIGSYS"),
    ];

    pub(super) const AF: Table = &[
        (0, "AF_UNSPEC"), (1, "AF_UNIX"), (2, "AF_INET"), (3, "AF_AX25"), (4, "AF_IPX"),
        (5, "AF_APPLETALK"), (6, "AF_NETROM"), (7, "AF_BRIDGE"), (8, "AF_ATMPVC"), (9, "AF_X25"),
        (10, "AF_INET6"), (11, "AF_ROSE"), (12, "AF_DECnet"), (13, "AF_NETBEUI"),
        (14, "AF_SECURITY"), (15, "AF_KEY"), (16, "AF_NETLINK"), (17, "AF_PACKET"), (18, "AF_ASH"),
        (19, "AF_ECONET"), (20, "AF_ATMSVC"), (21, "AF_RDS"), (22, "AF_SNA"), (23, "AF_IRDA"),
        (24, "AF_PPPOX"), (25, "AF_WANPIPE"), (26, "AF_LLC"), (27, "AF_IB"), (28, "AF_MPLS"),
        (29, "AF_CAN"), (30, "AF_TIPC"), (31, "AF_BLUETOOTH"), (32, "AF_IUCV"), (33, "AF_RXRPC"),
        (34, "AF_ISDN"), (35, "AF_PHONET"), (36, "AF_IEEE802154"), (37, "AF_CAIF"), (38, "AF_ALG"),
        (39, "AF_NFC"), (40, "AF_VSOCK"), (41, "AF_KCM"), (42, "AF_QIPCRTR"), (43, "AF_SMC"),
        (44, "AF_XDP"), (45, "AF_MCTP"),
    ];

    pub(super) const SOCK: Table = &[
        (1, "SOCK_STREAM"), (2, "SOCK_DGRAM"), (3, "SOCK_RAW"), (4, "SOCK_RDM"),
        (5, "SOCK_SEQPACKET"), (6, "SOCK_DCCP"), (10, "SOCK_PACKET"),
    ];

    pub(super) const SOCK_FLAGS: Table = &[(0o4000, "SOCK_NONBLOCK"), (0o2000000, "SOCK_CLOEXEC")];

    pub(super) const MSG: Table = &[
        (0x1, "MSG_OOB"), (0x2, "MSG_PEEK"), (0x4, "MSG_DONTROUTE"), (0x8, "MSG_CTRUNC"),
        (0x10, "MSG_PROXY"), (0x20, "MSG_TRUNC"), (0x40, "MSG_DONTWAIT"), (0x80, "MSG_EOR"),
        (0x100, "MSG_WAITALL"), (0x200, "MSG_FIN"), (0x400, "MSG_SYN"), (0x800, "MSG_CONFIRM"),
        (0x1000, "MSG_RST"), (0x2000, "MSG_ERRQUEUE"), (0x4000, "MSG_NOSIGNAL"),
        (0x8000, "MSG_MORE"), (0x10000, "MSG_WAITFORONE"), (0x40000, "MSG_BATCH"),
        (0x2000000, "MSG_SOCK_DEVMEM"), (0x4000000, "MSG_ZEROCOPY"), (0x20000000, "MSG_FASTOPEN"),
        (0x40000000, "MSG_CMSG_CLOEXEC"),
    ];

    pub(super) const SHUT: Table = &[(0, "SHUT_RD"), (1, "SHUT_WR"), (2, "SHUT_RDWR")];

    /// Levels below 256 are IPPROTO numbers; only those with socket options are named.
    pub(super) const SOL: Table = &[
        (0, "SOL_IP"), (1, "SOL_SOCKET"), (6, "SOL_TCP"), (17, "SOL_UDP"), (41, "SOL_IPV6"),
        (58, "SOL_ICMPV6"), (132, "SOL_SCTP"), (136, "SOL_UDPLITE"), (255, "SOL_RAW"),
        (256, "SOL_IPX"), (257, "SOL_AX25"), (258, "SOL_ATALK"), (259, "SOL_NETROM"),
        (260, "SOL_ROSE"), (261, "SOL_DECNET"), (262, "SOL_X25"), (263, "SOL_PACKET"),
        (264, "SOL_ATM"), (265, "SOL_AAL"), (266, "SOL_IRDA"), (267, "SOL_NETBEUI"),
        (268, "SOL_LLC"), (269, "SOL_DCCP"), (270, "SOL_NETLINK"), (271, "SOL_TIPC"),
        (272, "SOL_RXRPC"), (273, "SOL_PPPOL2TP"), (274, "SOL_BLUETOOTH"), (275, "SOL_PNPIPE"),
        (276, "SOL_RDS"), (277, "SOL_IUCV"), (278, "SOL_CAIF"), (279, "SOL_ALG"), (280, "SOL_NFC"),
        (281, "SOL_KCM"), (282, "SOL_TLS"), (283, "SOL_XDP"), (284, "SOL_MPTCP"), (285, "SOL_MCTP"),
        (286, "SOL_SMC"), (287, "SOL_VSOCK"),
    ];

    pub(super) const CLOCK: Table = &[
        (0, "CLOCK_REALTIME"), (1, "CLOCK_MONOTONIC"), (2, "CLOCK_PROCESS_CPUTIME_ID"),
        (3, "CLOCK_THREAD_CPUTIME_ID"), (4, "CLOCK_MONOTONIC_RAW"), (5, "CLOCK_REALTIME_COARSE"),
        (6, "CLOCK_MONOTONIC_COARSE"), (7, "CLOCK_BOOTTIME"), (8, "CLOCK_REALTIME_ALARM"),
        (9, "CLOCK_BOOTTIME_ALARM"), (11, "CLOCK_TAI"),
    ];

    pub(super) const EPOLL_CTL: Table = &[
        (1, "EPOLL_CTL_ADD"), (2, "EPOLL_CTL_DEL"), (3, "EPOLL_CTL_MOD"),
    ];

    pub(super) const EPOLL: Table = &[
        (0x1, "EPOLLIN"), (0x2, "EPOLLPRI"), (0x4, "EPOLLOUT"), (0x8, "EPOLLERR"),
        (0x10, "EPOLLHUP"), (0x20, "EPOLLNVAL"), (0x40, "EPOLLRDNORM"), (0x80, "EPOLLRDBAND"),
        (0x100, "EPOLLWRNORM"), (0x200, "EPOLLWRBAND"), (0x400, "EPOLLMSG"), (0x2000, "EPOLLRDHUP"),
        (1 << 28, "EPOLLEXCLUSIVE"), (1 << 29, "EPOLLWAKEUP"), (1 << 30, "EPOLLONESHOT"),
        (1 << 31, "EPOLLET"),
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(renderer: &str, value: u64) -> String {
        render(renderer, value).unwrap()
    }

    #[test]
    fn exe_flags_by_falcos_names() {
        assert_eq!(r("exe_flags", 3), "EXE_UPPER_LAYER|EXE_FROM_MEMFD");
        assert_eq!(r("exe_flags", 6), "EXE_WRITABLE|EXE_FROM_MEMFD");
        assert_eq!(r("exe_flags", 12), "EXE_WRITABLE|EXE_LOWER_LAYER");
        assert_eq!(r("exe_flags", 0), "0");
        assert_eq!(r("exe_flags", 2), "EXE_FROM_MEMFD");
    }

    #[test]
    fn open_flags_and_composites() {
        assert_eq!(r("open_flags", 0o2101101), "O_WRONLY|O_CREAT|O_TRUNC|O_LARGEFILE|O_CLOEXEC");
        assert_eq!(r("open_flags", 0), "O_RDONLY");
        assert_eq!(r("open_flags", 0o4010002), "O_RDWR|O_SYNC");
        assert_eq!(r("open_flags", 0o10002), "O_RDWR|O_DSYNC");
        assert_eq!(r("open_flags", 0o20200002), "O_RDWR|O_TMPFILE");
        assert_eq!(r("open_flags", 0o200000), "O_RDONLY|O_DIRECTORY");
        assert_eq!(r("open_flags", 0o4000000), "O_RDONLY|0x100000"); // __O_SYNC alone
    }

    #[test]
    fn mode_like_strace() {
        assert_eq!(r("mode", 0o100644), "S_IFREG|0644");
        assert_eq!(r("mode", 0o755), "0755");
        assert_eq!(r("mode", 0o4755), "04755");
        assert_eq!(r("mode", 0o7), "007");
        assert_eq!(r("mode", 0), "0");
        assert_eq!(r("mode", 0o20000), "S_IFCHR|000");
        assert_eq!(r("mode", 0o1000644), "0644|0x40000");
    }

    #[test]
    fn clone_flags_with_signal_and_newtime() {
        assert_eq!(
            r("clone_flags", 0x3d0f00),
            "CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|\
             CLONE_SETTLS|CLONE_PARENT_SETTID|CLONE_CHILD_CLEARTID"
        );
        assert_eq!(r("clone_flags", 0x1200011), "CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD");
        assert_eq!(r("clone_flags", 0x80), "CLONE_NEWTIME");
        assert_eq!(r("clone_flags", 0x100000000), "CLONE_CLEAR_SIGHAND");
        assert_eq!(r("clone_flags", 0x7f), "0x7f");
        assert_eq!(r("clone_flags", 0), "0");
    }

    #[test]
    fn socket_type_and_accept4_flags() {
        assert_eq!(r("socket_type", 0x80801), "SOCK_STREAM|SOCK_NONBLOCK|SOCK_CLOEXEC");
        assert_eq!(r("socket_type", 0o2000000), "SOCK_CLOEXEC");
        assert_eq!(r("socket_type", 0), "0");
        assert_eq!(r("socket_type", 2), "SOCK_DGRAM");
        assert_eq!(r("socket_type", 0x100007), "0x100007");
    }

    #[test]
    fn enums_fall_back_to_decimal() {
        assert_eq!(r("fcntl_cmd", 1030), "F_DUPFD_CLOEXEC");
        assert_eq!(r("fcntl_cmd", 999), "999");
        assert_eq!(r("ptrace_request", 0x4206), "PTRACE_SEIZE");
        assert_eq!(r("prctl_option", 38), "PR_SET_NO_NEW_PRIVS");
        assert_eq!(r("socket_family", 10), "AF_INET6");
        assert_eq!(r("sockopt_level", 0), "SOL_IP");
        assert_eq!(r("shutdown_how", 2), "SHUT_RDWR");
    }

    #[test]
    fn signals_and_clocks() {
        assert_eq!(r("signal", 0), "0");
        assert_eq!(r("signal", 9), "SIGKILL");
        assert_eq!(r("signal", 34), "SIGRT_2");
        assert_eq!(r("signal", 65), "65");
        assert_eq!(r("clockid", 1), "CLOCK_MONOTONIC");
        assert_eq!(r("clockid", 0xffff_fffa), "-6");
    }

    #[test]
    fn flag_sets_and_leftovers() {
        assert_eq!(r("epoll_events", 0x8000_0001), "EPOLLIN|EPOLLET");
        assert_eq!(r("msg_flags", 0x4040), "MSG_DONTWAIT|MSG_NOSIGNAL");
        assert_eq!(r("msg_flags", 0), "0");
        assert_eq!(r("at_flags", 0x1100), "AT_SYMLINK_NOFOLLOW|AT_EMPTY_PATH");
        assert_eq!(r("rename_flags", 0x11), "RENAME_NOREPLACE|0x10");
        assert_eq!(r("mount_flags", 0x5000), "MS_BIND|MS_REC");
        assert_eq!(r("mount_flags", 0xc0ed_0001), "MS_MGC_VAL|MS_RDONLY");
        assert_eq!(r("umount_flags", 2), "MNT_DETACH");
        assert_eq!(r("resolve_flags", 0x18), "RESOLVE_BENEATH|RESOLVE_IN_ROOT");
    }

    #[test]
    fn capabilities_as_falco_writes_them() {
        // A runc container's default set plus CAP_SYS_MODULE (seen in the 6.1 guest).
        assert_eq!(
            r("capabilities", 536_937_504),
            "CAP_KILL CAP_NET_BIND_SERVICE CAP_SYS_MODULE CAP_AUDIT_WRITE"
        );
        assert_eq!(r("capabilities", 0), "");
        assert_eq!(r("capabilities", 1 << 40 | 1 << 41), "CAP_CHECKPOINT_RESTORE 0x20000000000");
    }

    #[test]
    fn unknown_renderer_and_table_names() {
        assert_eq!(render("no_such_renderer", 1), None);
        for name in RENDERERS {
            assert!(render(name, 0).is_some(), "{name} listed but not dispatched");
        }
    }
}
