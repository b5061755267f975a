//! Falco's parameter lists for the syscalls its rules read: the names, order
//! and kinds of the exit events of Falco's event table (driver/event_table.c
//! at libs 0.25.4), each mapped to the Harrier parameter it comes from. With
//! them `evt.arg.<name>`, `evt.arg[N]` and `evt.args` read as in Falco
//! (`evt.arg.name` of an openat is its path, `evt.arg.filename` of a chmod
//! too). Syscalls not listed keep Harrier's own names. A Falco parameter that
//! Harrier does not capture (openat's dev and ino) is left out.

/// How Falco writes a parameter (its PT_* type and print format).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// PT_FD: the number, resolved as `<typechar>name` of the fd, AT_FDCWD or an errno.
    Fd,
    /// PT_ERRNO: the return value, resolved as its errno name when negative.
    Errno,
    /// PT_FSPATH: the path, resolved against the cwd when relative.
    Path,
    /// PT_FSRELPATH: the path, resolved against the directory fd in the named
    /// Harrier parameter (or the cwd for AT_FDCWD) when relative.
    RelPath(&'static str),
    /// PT_CHARBUF: the text as is.
    Str,
    /// Numbers: decimal (signed), hexadecimal (%X), octal (%#o).
    Dec,
    Hex,
    Oct,
    /// Flags or an enum with names: a renderer of [`crate::render`] (Falco's names).
    Named(&'static str),
    /// PT_UID / PT_GID: the id, resolved as the user's or group's name.
    Uid,
    Gid,
    /// PT_PID: the pid, resolved as the process's name.
    Pid,
    /// socket's flags: SOCK_NONBLOCK/SOCK_CLOEXEC of the type, as open flags.
    SockFlags,
}

/// One of Falco's parameters: its name, the Harrier parameter ("ret": the
/// return value) and how it is written.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    pub name: &'static str,
    pub src: &'static str,
    pub kind: Kind,
}

const fn p(name: &'static str, src: &'static str, kind: Kind) -> Param {
    Param { name, src, kind }
}

use Kind::*;

/// A constant list (so that `&[...]` of const calls is promoted to 'static).
macro_rules! list {
    ($($e:expr),* $(,)?) => {{
        const L: &[Param] = &[$($e),*];
        L
    }};
}

const RES: Param = p("res", "ret", Errno);
const FD_RET: Param = p("fd", "ret", Fd);

/// Falco's parameters of `syscall`'s exit event, if this module maps them.
pub fn params(syscall: &str) -> Option<&'static [Param]> {
    Some(match syscall {
        "open" => list![
            FD_RET,
            p("name", "path", Path),
            p("flags", "flags", Named("falco_open_flags")),
            p("mode", "mode", Oct),
        ],
        "openat" => list![
            FD_RET,
            p("dirfd", "dirfd", Fd),
            p("name", "path", RelPath("dirfd")),
            p("flags", "flags", Named("falco_open_flags")),
            p("mode", "mode", Oct),
        ],
        "openat2" => list![
            FD_RET,
            p("dirfd", "dirfd", Fd),
            p("name", "path", RelPath("dirfd")),
            p("flags", "flags", Named("falco_open_flags")),
            p("mode", "mode", Oct),
            p("resolve", "resolve", Named("resolve_flags")),
        ],
        "creat" => list![FD_RET, p("name", "path", Path), p("mode", "mode", Oct)],
        "chmod" => list![RES, p("filename", "path", Path), p("mode", "mode", Named("falco_mode"))],
        "fchmod" => list![RES, p("fd", "fd", Fd), p("mode", "mode", Named("falco_mode"))],
        "fchmodat" => list![
            RES,
            p("dirfd", "dirfd", Fd),
            p("filename", "path", RelPath("dirfd")),
            p("mode", "mode", Named("falco_mode")),
        ],
        "unlink" | "rmdir" => list![RES, p("path", "path", Path)],
        "unlinkat" => list![
            RES,
            p("dirfd", "dirfd", Fd),
            p("name", "path", RelPath("dirfd")),
            p("flags", "flags", Named("falco_unlinkat_flags")),
        ],
        "rename" | "link" => list![RES, p("oldpath", "oldpath", Path), p("newpath", "newpath", Path)],
        "renameat" => list![
            RES,
            p("olddirfd", "olddirfd", Fd),
            p("oldpath", "oldpath", RelPath("olddirfd")),
            p("newdirfd", "newdirfd", Fd),
            p("newpath", "newpath", RelPath("newdirfd")),
        ],
        "renameat2" => list![
            RES,
            p("olddirfd", "olddirfd", Fd),
            p("oldpath", "oldpath", RelPath("olddirfd")),
            p("newdirfd", "newdirfd", Fd),
            p("newpath", "newpath", RelPath("newdirfd")),
            p("flags", "flags", Named("falco_renameat2_flags")),
        ],
        "linkat" => list![
            RES,
            p("olddir", "olddirfd", Fd),
            p("oldpath", "oldpath", RelPath("olddirfd")),
            p("newdir", "newdirfd", Fd),
            p("newpath", "newpath", RelPath("newdirfd")),
            p("flags", "flags", Named("falco_linkat_flags")),
        ],
        "symlink" => list![RES, p("target", "target", Str), p("linkpath", "linkpath", Path)],
        "symlinkat" => list![
            RES,
            p("target", "target", Str),
            p("linkdirfd", "newdirfd", Fd),
            p("linkpath", "linkpath", RelPath("newdirfd")),
        ],
        "mkdir" => list![RES, p("path", "path", Path), p("mode", "mode", Hex)],
        "mkdirat" => {
            list![RES, p("dirfd", "dirfd", Fd), p("path", "path", RelPath("dirfd")), p("mode", "mode", Hex)]
        }
        "setuid" => list![RES, p("uid", "uid", Uid)],
        "setgid" => list![RES, p("gid", "gid", Gid)],
        "setreuid" => list![RES, p("ruid", "ruid", Uid), p("euid", "euid", Uid)],
        // Falco's table types setregid's ids as PT_UID (user names).
        "setregid" => list![RES, p("rgid", "rgid", Uid), p("egid", "egid", Uid)],
        "setresuid" => list![RES, p("ruid", "ruid", Uid), p("euid", "euid", Uid), p("suid", "suid", Uid)],
        "setresgid" => list![RES, p("rgid", "rgid", Gid), p("egid", "egid", Gid), p("sgid", "sgid", Gid)],
        "socket" => list![
            FD_RET,
            p("domain", "domain", Named("falco_socket_family")),
            p("type", "type", Dec),
            p("proto", "protocol", Dec),
            p("flags", "type", SockFlags),
        ],
        "ptrace" => list![RES, p("request", "request", Named("falco_ptrace_request")), p("pid", "pid", Pid)],
        "kill" => list![RES, p("pid", "pid", Pid), p("sig", "sig", Named("signal"))],
        "chown" => list![RES, p("path", "path", Path), p("uid", "uid", Dec), p("gid", "gid", Dec)],
        "fchownat" => list![
            RES,
            p("dirfd", "dirfd", Fd),
            p("pathname", "path", RelPath("dirfd")),
            p("uid", "uid", Dec),
            p("gid", "gid", Dec),
        ],
        "memfd_create" => list![FD_RET, p("name", "name", Str)],
        "bpf" => list![FD_RET, p("cmd", "cmd", Named("falco_bpf_cmd"))],
        "execve" => list![
            RES,
            p("exe", "exe", Str),
            p("tty", "tty", Dec),
            p("loginuid", "loginuid", Uid),
            p("flags", "exe_flags", Named("falco_exe_flags")),
            p("filename", "filename", Path),
        ],
        "execveat" => list![
            RES,
            p("dirfd", "dirfd", Fd),
            p("pathname", "filename", RelPath("dirfd")),
            p("flags", "flags", Named("at_flags")),
        ],
        _ => return None,
    })
}

/// Whether Falco's event table says this syscall's exit event uses, makes or
/// closes an fd (EF_USES_FD, EF_CREATES_FD, EF_DESTROYS_FD): only then do its
/// fd.* fields have a value, empty when it has no fd (`fd.name` of an unlinkat).
pub fn uses_fd(syscall: &str) -> bool {
    const USES_FD: &[&str] = &[
        "accept",
        "accept4",
        "bind",
        "bpf",
        "close",
        "connect",
        "copy_file_range",
        "creat",
        "dup",
        "dup2",
        "dup3",
        "epoll_create",
        "epoll_create1",
        "eventfd",
        "eventfd2",
        "fchdir",
        "fchmod",
        "fchmodat",
        "fchown",
        "fchownat",
        "fcntl",
        "finit_module",
        "flock",
        "fsconfig",
        "fstat",
        "getdents",
        "getdents64",
        "getsockopt",
        "inotify_init",
        "inotify_init1",
        "io_uring_enter",
        "io_uring_register",
        "io_uring_setup",
        "ioctl",
        "listen",
        "llseek",
        "lseek",
        "memfd_create",
        "mkdirat",
        "mknodat",
        "mmap",
        "mmap2",
        "newfstatat",
        "open",
        "open_by_handle_at",
        "openat",
        "openat2",
        "pidfd_getfd",
        "pidfd_open",
        "pipe",
        "pipe2",
        "pread64",
        "preadv",
        "pwrite64",
        "pwritev",
        "read",
        "readv",
        "recv",
        "recvfrom",
        "recvmmsg",
        "recvmsg",
        "send",
        "sendfile",
        "sendmmsg",
        "sendmsg",
        "sendto",
        "setns",
        "setsockopt",
        "shutdown",
        "signalfd",
        "signalfd4",
        "socket",
        "socketpair",
        "splice",
        "symlinkat",
        "timerfd_create",
        "unlinkat",
        "userfaultfd",
        "write",
        "writev",
    ];
    USES_FD.contains(&syscall)
}

/// Whether any syscall has a Falco parameter of this name, and which: for
/// indexing rules by the events their `evt.arg.<name>` can read.
pub fn syscalls_with(name: &str) -> impl Iterator<Item = &'static str> + '_ {
    crate::SYSCALLS
        .iter()
        .map(|s| s.name)
        .filter(move |s| params(s).is_some_and(|ps| ps.iter().any(|p| p.name == name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every mapped parameter names a parameter the syscall has (or its return value).
    #[test]
    fn every_source_exists() {
        for sc in crate::SYSCALLS {
            let Some(ps) = params(sc.name) else { continue };
            let have = sc.params.unwrap_or(&[]);
            for p in ps {
                let ok = p.src == "ret" || have.iter().any(|d| d.name == p.src);
                assert!(ok, "{}: {} reads {}, which it does not have", sc.name, p.name, p.src);
                if let RelPath(dirfd) = p.kind {
                    assert!(have.iter().any(|d| d.name == dirfd), "{}: no {dirfd}", sc.name);
                }
                if let Named(r) = p.kind {
                    assert!(crate::render::render(r, 0).is_some(), "{}: renderer {r}", sc.name);
                }
            }
        }
        assert!(syscalls_with("filename").any(|s| s == "chmod"));
    }
}
