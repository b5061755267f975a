//! Values as Falco's libsinsp (libs 0.25.4) writes them in `evt.arg.*`,
//! `evt.args` and `evt.res`: its errno names, and its names for the flag and
//! enum parameters of the syscalls its rules read. Falco's driver first turns
//! some kernel values into its own numbering (open flags, ptrace requests);
//! a set with no name is written as that number in decimal.
//!
//! Reference (read, not copied): driver/flags_table.c and ppm_flag_helpers.h,
//! userspace/libsinsp/event.cpp (`get_param_as_str`) and utils.cpp
//! (`errno_to_str`) at libs 0.25.4.

type Table = &'static [(u64, &'static str)];

/// The renderers of this module, by the names `render::render` knows them.
pub const RENDERERS: &[&str] = &[
    "falco_open_flags",
    "falco_mode",
    "falco_unlinkat_flags",
    "falco_linkat_flags",
    "falco_renameat2_flags",
    "falco_socket_family",
    "falco_bpf_cmd",
    "falco_ptrace_request",
    "falco_exe_flags",
];

/// Falco's rendering of `value` (the kernel's) with renderer `name`: the names
/// if any applies, else the number in Falco's numbering.
pub fn render(name: &str, value: u64) -> Option<String> {
    let (num, names) = parts(name, value)?;
    Some(if names.is_empty() { num } else { names })
}

/// Falco's two texts for a parameter: the number as it prints it and the names
/// ("" when none apply), as `evt.args` shows them (`flags=4097(O_RDONLY|O_CLOEXEC)`).
pub fn parts(name: &str, value: u64) -> Option<(String, String)> {
    Some(match name {
        "falco_open_flags" => {
            let ppm = open_flags_to_ppm(value);
            (ppm.to_string(), flag_names(ppm, FILE_FLAGS))
        }
        "falco_mode" => (oct(value), mode_names(value)),
        "falco_exe_flags" => {
            // Harrier's exe_flags bits (upper, memfd, writable, lower) in Falco's numbering.
            let ppm = [(4, 1), (1, 2), (2, 4), (8, 8)]
                .iter()
                .filter(|(h, _)| value & h != 0)
                .fold(0, |acc, (_, p)| acc | p);
            (ppm.to_string(), flag_names(ppm, EXE_FLAGS))
        }
        "falco_unlinkat_flags" => (value.to_string(), flag_names(value, UNLINKAT)),
        "falco_linkat_flags" => (value.to_string(), flag_names(value, LINKAT)),
        "falco_renameat2_flags" => (value.to_string(), flag_names(value, RENAMEAT2)),
        "falco_socket_family" => (value.to_string(), enum_names(value, SOCKET_FAMILIES)),
        "falco_bpf_cmd" => (value.to_string(), enum_names(value, BPF_COMMANDS)),
        "falco_ptrace_request" => {
            let ppm = ptrace_to_ppm(value);
            (ppm.to_string(), enum_names(ppm, PTRACE_REQUESTS))
        }
        _ => return None,
    })
}

/// printf's `%#o`: a leading 0 unless the value is 0.
pub fn oct(v: u64) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("0{v:o}")
    }
}

/// Falco's names for its open flags (a PPM_O_* value), "" when none apply.
pub fn open_flag_names(ppm: u64) -> String {
    flag_names(ppm, FILE_FLAGS)
}

/// A flag set: the entries whose bits are all set, in table order, each
/// clearing its bits; a zero entry only for a zero value; done once an
/// entry equals the whole value.
fn flag_names(value: u64, table: Table) -> String {
    let mut left = value;
    let mut out: Vec<&str> = Vec::new();
    for &(bits, name) in table {
        let hit = (bits == 0 && value == 0) || (bits != 0 && left != 0 && left & bits == bits);
        if hit {
            out.push(name);
            left &= !bits;
            if bits == value {
                break;
            }
        }
    }
    out.join("|")
}

/// An enum: every entry equal to the value (AF_LOCAL and AF_UNIX are both 1).
fn enum_names(value: u64, table: Table) -> String {
    table.iter().filter(|(v, _)| *v == value).map(|(_, n)| *n).collect::<Vec<_>>().join("|")
}

/// chmod's mode: Falco's walk stops at an entry equal to the whole value and
/// names it last; otherwise as a flag set (which gives the same names).
fn mode_names(value: u64) -> String {
    let mut left = value;
    let mut out: Vec<&str> = Vec::new();
    for &(bits, name) in CHMOD_MODE {
        if bits == value {
            out.push(name);
            break;
        }
        if left != 0 && left & bits == bits {
            out.push(name);
            left &= !bits;
        }
    }
    out.join("|")
}

/// Falco's driver's open flags (PPM_O_*) from the kernel's.
pub fn open_flags_to_ppm(k: u64) -> u64 {
    let mut r = match k & 3 {
        1 => 2, // O_WRONLY
        2 => 3, // O_RDWR
        _ => 1, // O_RDONLY
    };
    // (kernel bit, Falco's bit); O_TMPFILE and O_SYNC are tested as any of their
    // bits, as the driver does (so O_DIRECTORY also reads as O_TMPFILE).
    const MAP: [(u64, u64); 12] = [
        (0o100, 1 << 2),       // O_CREAT
        (0o20200000, 1 << 13), // O_TMPFILE
        (0o2000, 1 << 3),      // O_APPEND
        (0o10000, 1 << 4),     // O_DSYNC
        (0o200, 1 << 5),       // O_EXCL
        (0o4000, 1 << 6),      // O_NONBLOCK
        (0o4010000, 1 << 7),   // O_SYNC
        (0o1000, 1 << 8),      // O_TRUNC
        (0o40000, 1 << 9),     // O_DIRECT
        (0o200000, 1 << 10),   // O_DIRECTORY
        (0o100000, 1 << 11),   // O_LARGEFILE
        (0o2000000, 1 << 12),  // O_CLOEXEC
    ];
    for (kbit, pbit) in MAP {
        if k & kbit != 0 {
            r |= pbit;
        }
    }
    r
}

/// Falco's driver's ptrace request numbers from the kernel's.
fn ptrace_to_ppm(k: u64) -> u64 {
    const MAP: [(u64, u64); 36] = [
        (0, 1),
        (1, 2),
        (2, 3),
        (3, 4),
        (4, 5),
        (5, 6),
        (6, 7),
        (7, 8),
        (8, 9),
        (9, 10),
        (16, 11),
        (17, 12),
        (24, 13),
        (0x4200, 14),
        (0x4201, 15),
        (0x4202, 16),
        (0x4203, 17),
        (0x4204, 18),
        (0x4205, 19),
        (0x4206, 20),
        (0x4207, 21),
        (0x4208, 22),
        (0x4209, 23),
        (0x420a, 24),
        (0x420b, 25),
        (12, 26),
        (13, 27),
        (14, 28),
        (15, 29),
        (18, 30),
        (19, 31),
        (21, 32),
        (25, 33),
        (26, 34),
        (30, 35),
        (31, 36),
    ];
    match k {
        32 => 37, // PTRACE_SYSEMU_SINGLESTEP
        33 => 38, // PTRACE_SINGLEBLOCK
        _ => MAP.iter().find(|(kv, _)| *kv == k).map_or(0, |(_, p)| *p),
    }
}

/// Linux's errno names as Falco writes them (`evt.res`, `res=-2(ENOENT)`); None
/// where Falco has no name (it then writes the number).
pub fn errno_name(errno: i64) -> Option<&'static str> {
    let e = usize::try_from(errno).ok()?;
    let name = match e {
        1..=125 => ERRNO[e - 1],
        512..=515 => ["ERESTARTSYS", "ERESTARTNOINTR", "ERESTARTNOHAND", "ENOIOCTLCMD"][e - 512],
        521..=530 => [
            "EBADHANDLE",
            "ENOTSYNC",
            "EBADCOOKIE",
            "ENOTSUPP",
            "ETOOSMALL",
            "ESERVERFAULT",
            "EBADTYPE",
            "EJUKEBOX",
            "EIOCBQUEUED",
            "EIOCBRETRY",
        ][e - 521],
        _ => "",
    };
    (!name.is_empty()).then_some(name)
}

#[rustfmt::skip]
const ERRNO: [&str; 125] = [
    "EPERM", "ENOENT", "ESRCH", "EINTR", "EIO", "ENXIO", "E2BIG", "ENOEXEC", "EBADF", "ECHILD",
    "EAGAIN", "ENOMEM", "EACCES", "EFAULT", "ENOTBLK", "EBUSY", "EEXIST", "EXDEV", "ENODEV",
    "ENOTDIR", "EISDIR", "EINVAL", "ENFILE", "EMFILE", "ENOTTY", "ETXTBSY", "EFBIG", "ENOSPC",
    "ESPIPE", "EROFS", "EMLINK", "EPIPE", "EDOM", "ERANGE", "EDEADLK", "ENAMETOOLONG", "ENOLCK",
    "ENOSYS", "ENOTEMPTY", "ELOOP", "", "ENOMSG", "EIDRM", "ECHRNG", "EL2NSYNC", "EL3HLT",
    "EL3RST", "ELNRNG", "EUNATCH", "ENOCSI", "EL2HLT", "EBADE", "EBADR", "EXFULL", "ENOANO",
    "EBADRQC", "EBADSLT", "", "EBFONT", "ENOSTR", "ENODATA", "ETIME", "ENOSR", "ENONET",
    "ENOPKG", "EREMOTE", "ENOLINK", "EADV", "ESRMNT", "ECOMM", "EPROTO", "EMULTIHOP", "EDOTDOT",
    "EBADMSG", "EOVERFLOW", "ENOTUNIQ", "EBADFD", "EREMCHG", "ELIBACC", "ELIBBAD", "ELIBSCN",
    "ELIBMAX", "ELIBEXEC", "EILSEQ", "ERESTART", "ESTRPIPE", "EUSERS", "ENOTSOCK",
    "EDESTADDRREQ", "EMSGSIZE", "EPROTOTYPE", "ENOPROTOOPT", "EPROTONOSUPPORT",
    "ESOCKTNOSUPPORT", "EOPNOTSUPP", "EPFNOSUPPORT", "EAFNOSUPPORT", "EADDRINUSE",
    "EADDRNOTAVAIL", "ENETDOWN", "ENETUNREACH", "ENETRESET", "ECONNABORTED", "ECONNRESET",
    "ENOBUFS", "EISCONN", "ENOTCONN", "ESHUTDOWN", "ETOOMANYREFS", "ETIMEDOUT", "ECONNREFUSED",
    "EHOSTDOWN", "EHOSTUNREACH", "EALREADY", "EINPROGRESS", "ESTALE", "EUCLEAN", "ENOTNAM",
    "ENAVAIL", "EISNAM", "EREMOTEIO", "EDQUOT", "ENOMEDIUM", "EMEDIUMTYPE", "ECANCELED",
];

/// Falco's open flag names in its order, over its numbering.
#[rustfmt::skip]
const FILE_FLAGS: Table = &[
    (1 << 11, "O_LARGEFILE"), (1 << 10, "O_DIRECTORY"), (1 << 9, "O_DIRECT"), (1 << 8, "O_TRUNC"),
    (1 << 7, "O_SYNC"), (1 << 6, "O_NONBLOCK"), (1 << 5, "O_EXCL"), (1 << 4, "O_DSYNC"),
    (1 << 3, "O_APPEND"), (1 << 2, "O_CREAT"), (3, "O_RDWR"), (2, "O_WRONLY"), (1, "O_RDONLY"),
    (1 << 12, "O_CLOEXEC"), (0, "O_NONE"), (1 << 13, "O_TMPFILE"), (1 << 14, "O_F_CREATED"),
    (1 << 15, "FD_UPPER_LAYER"), (1 << 16, "FD_LOWER_LAYER"),
];

#[rustfmt::skip]
const CHMOD_MODE: Table = &[
    (0o1, "S_IXOTH"), (0o2, "S_IWOTH"), (0o4, "S_IROTH"), (0o10, "S_IXGRP"), (0o20, "S_IWGRP"),
    (0o40, "S_IRGRP"), (0o100, "S_IXUSR"), (0o200, "S_IWUSR"), (0o400, "S_IRUSR"),
    (0o1000, "S_ISVTX"), (0o2000, "S_ISGID"), (0o4000, "S_ISUID"),
];

const EXE_FLAGS: Table =
    &[(1, "EXE_WRITABLE"), (2, "EXE_UPPER_LAYER"), (4, "EXE_FROM_MEMFD"), (8, "EXE_LOWER_LAYER")];
const UNLINKAT: Table = &[(0x200, "AT_REMOVEDIR")];
const LINKAT: Table = &[(0x400, "AT_SYMLINK_FOLLOW"), (0x1000, "AT_EMPTY_PATH")];
const RENAMEAT2: Table = &[(1, "RENAME_NOREPLACE"), (2, "RENAME_EXCHANGE"), (4, "RENAME_WHITEOUT")];

#[rustfmt::skip]
const SOCKET_FAMILIES: Table = &[
    (39, "AF_NFC"), (38, "AF_ALG"), (37, "AF_CAIF"), (36, "AF_IEEE802154"), (35, "AF_PHONET"),
    (34, "AF_ISDN"), (33, "AF_RXRPC"), (32, "AF_IUCV"), (31, "AF_BLUETOOTH"), (30, "AF_TIPC"),
    (29, "AF_CAN"), (26, "AF_LLC"), (25, "AF_WANPIPE"), (24, "AF_PPPOX"), (23, "AF_IRDA"),
    (22, "AF_SNA"), (21, "AF_RDS"), (20, "AF_ATMSVC"), (19, "AF_ECONET"), (18, "AF_ASH"),
    (17, "AF_PACKET"), (16, "AF_ROUTE"), (16, "AF_NETLINK"), (15, "AF_KEY"), (14, "AF_SECURITY"),
    (13, "AF_NETBEUI"), (12, "AF_DECnet"), (11, "AF_ROSE"), (10, "AF_INET6"), (9, "AF_X25"),
    (8, "AF_ATMPVC"), (7, "AF_BRIDGE"), (6, "AF_NETROM"), (5, "AF_APPLETALK"), (4, "AF_IPX"),
    (3, "AF_AX25"), (2, "AF_INET"), (1, "AF_LOCAL"), (1, "AF_UNIX"), (0, "AF_UNSPEC"),
];

#[rustfmt::skip]
const BPF_COMMANDS: Table = &[
    (0, "BPF_MAP_CREATE"), (1, "BPF_MAP_LOOKUP_ELEM"), (2, "BPF_MAP_UPDATE_ELEM"),
    (3, "BPF_MAP_DELETE_ELEM"), (4, "BPF_MAP_GET_NEXT_KEY"), (5, "BPF_PROG_LOAD"),
    (6, "BPF_OBJ_PIN"), (7, "BPF_OBJ_GET"), (8, "BPF_PROG_ATTACH"), (9, "BPF_PROG_DETACH"),
    (10, "BPF_PROG_TEST_RUN"), (10, "BPF_PROG_RUN"), (11, "BPF_PROG_GET_NEXT_ID"),
    (12, "BPF_MAP_GET_NEXT_ID"), (13, "BPF_PROG_GET_FD_BY_ID"), (14, "BPF_MAP_GET_FD_BY_ID"),
    (15, "BPF_OBJ_GET_INFO_BY_FD"), (16, "BPF_PROG_QUERY"), (17, "BPF_RAW_TRACEPOINT_OPEN"),
    (18, "BPF_BTF_LOAD"), (19, "BPF_BTF_GET_FD_BY_ID"), (20, "BPF_TASK_FD_QUERY"),
    (21, "BPF_MAP_LOOKUP_AND_DELETE_ELEM"), (22, "BPF_MAP_FREEZE"), (23, "BPF_BTF_GET_NEXT_ID"),
    (24, "BPF_MAP_LOOKUP_BATCH"), (25, "BPF_MAP_LOOKUP_AND_DELETE_BATCH"),
    (26, "BPF_MAP_UPDATE_BATCH"), (27, "BPF_MAP_DELETE_BATCH"), (28, "BPF_LINK_CREATE"),
    (29, "BPF_LINK_UPDATE"), (30, "BPF_LINK_GET_FD_BY_ID"), (31, "BPF_LINK_GET_NEXT_ID"),
    (32, "BPF_ENABLE_STATS"), (33, "BPF_ITER_CREATE"), (34, "BPF_LINK_DETACH"),
    (35, "BPF_PROG_BIND_MAP"),
];

#[rustfmt::skip]
const PTRACE_REQUESTS: Table = &[
    (38, "PTRACE_SINGLEBLOCK"), (37, "PTRACE_SYSEMU_SINGLESTEP"), (36, "PTRACE_SYSEMU"),
    (35, "PTRACE_ARCH_PRCTL"), (34, "PTRACE_SET_THREAD_AREA"), (33, "PTRACE_GET_THREAD_AREA"),
    (32, "PTRACE_OLDSETOPTIONS"), (31, "PTRACE_SETFPXREGS"), (30, "PTRACE_GETFPXREGS"),
    (29, "PTRACE_SETFPREGS"), (28, "PTRACE_GETFPREGS"), (27, "PTRACE_SETREGS"),
    (26, "PTRACE_GETREGS"), (25, "PTRACE_SETSIGMASK"), (24, "PTRACE_GETSIGMASK"),
    (23, "PTRACE_PEEKSIGINFO"), (22, "PTRACE_LISTEN"), (21, "PTRACE_INTERRUPT"),
    (20, "PTRACE_SEIZE"), (19, "PTRACE_SETREGSET"), (18, "PTRACE_GETREGSET"),
    (17, "PTRACE_SETSIGINFO"), (16, "PTRACE_GETSIGINFO"), (15, "PTRACE_GETEVENTMSG"),
    (14, "PTRACE_SETOPTIONS"), (13, "PTRACE_SYSCALL"), (12, "PTRACE_DETACH"), (11, "PTRACE_ATTACH"),
    (10, "PTRACE_SINGLESTEP"), (9, "PTRACE_KILL"), (8, "PTRACE_CONT"), (7, "PTRACE_POKEUSR"),
    (6, "PTRACE_POKEDATA"), (5, "PTRACE_POKETEXT"), (4, "PTRACE_PEEKUSR"), (3, "PTRACE_PEEKDATA"),
    (2, "PTRACE_PEEKTEXT"), (1, "PTRACE_TRACEME"), (0, "PTRACE_UNKNOWN"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_flags_in_falcos_order_and_numbering() {
        assert_eq!(render("falco_open_flags", 0o2000000).unwrap(), "O_RDONLY|O_CLOEXEC");
        // O_WRONLY|O_CREAT|O_TRUNC
        assert_eq!(render("falco_open_flags", 0o1101).unwrap(), "O_TRUNC|O_CREAT|O_WRONLY");
        assert_eq!(parts("falco_open_flags", 0o2000000).unwrap().0, "4097");
        // O_DIRECTORY reads as O_TMPFILE too, as in Falco's driver.
        assert_eq!(
            render("falco_open_flags", 0o2200000).unwrap(),
            "O_DIRECTORY|O_RDONLY|O_CLOEXEC|O_TMPFILE"
        );
    }

    #[test]
    fn chmod_modes_and_enums() {
        assert_eq!(
            render("falco_mode", 0o4755).unwrap(),
            "S_IXOTH|S_IROTH|S_IXGRP|S_IRGRP|S_IXUSR|S_IWUSR|S_IRUSR|S_ISUID"
        );
        assert_eq!(render("falco_mode", 0o4000).unwrap(), "S_ISUID");
        assert_eq!(parts("falco_mode", 0o644).unwrap().0, "0644");
        assert_eq!(render("falco_mode", 0).unwrap(), "0");
        assert_eq!(render("falco_socket_family", 1).unwrap(), "AF_LOCAL|AF_UNIX");
        assert_eq!(render("falco_socket_family", 17).unwrap(), "AF_PACKET");
        assert_eq!(render("falco_bpf_cmd", 5).unwrap(), "BPF_PROG_LOAD");
        assert_eq!(render("falco_ptrace_request", 16).unwrap(), "PTRACE_ATTACH");
        assert_eq!(render("falco_ptrace_request", 0).unwrap(), "PTRACE_TRACEME");
        assert_eq!(render("falco_unlinkat_flags", 0).unwrap(), "0");
        assert_eq!(render("falco_unlinkat_flags", 0x200).unwrap(), "AT_REMOVEDIR");
    }

    #[test]
    fn errno_names_as_falco_has_them() {
        assert_eq!(errno_name(2), Some("ENOENT"));
        assert_eq!(errno_name(115), Some("EINPROGRESS"));
        assert_eq!(errno_name(41), None);
        assert_eq!(errno_name(126), None);
        assert_eq!(errno_name(512), Some("ERESTARTSYS"));
    }
}
