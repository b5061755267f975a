//! Every typed process syscall: exec, the fork family (seen in parent and
//! child), credentials, capabilities, signals, namespaces, prctl, ptrace.
//!
//! Syscalls that would change this test process for good (credentials,
//! capabilities, namespaces, exec, exit) run in a forked child parked on a pipe
//! until the capture has started; the capture then filters on the child's pid.
//! A child of a multi-threaded process must not allocate, so child work is
//! raw syscalls on values prepared before the fork.

mod common;

use harrier_capture::AttachMode::{self, Dispatcher, PerSyscall};
use test_case::test_case;

use common::*;
use harrier_capture::{parse_syscalls, Collect, Config};
use harrier_schema::decode::{Event, Meta, SyscallEvent, Value};
use libc::{EBADF, EINVAL, ENOENT, EPERM, ESRCH};
use std::ffi::CString;
use std::fs::File;
use std::os::fd::AsRawFd;

/// Never an open descriptor: far above any fd table.
const BADFD: i64 = 1_000_000;
/// A pid above pid_max: no such process.
const NO_PID: i64 = i32::MAX as i64;

fn ptr<T>(p: *const T) -> i64 {
    p as i64
}

/// A forked child waiting on a pipe; `run` lets it go and reaps it. A child
/// never released (a failed assertion) is killed and reaped on drop.
struct Child {
    pid: i32,
    go: i32,
    reaped: bool,
}

/// Forks a child that waits for `Child::run`, then does `work` and exits 0.
fn fork_parked(work: impl FnOnce()) -> Child {
    let mut p = [0; 2];
    assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let mut b = 0u8;
        unsafe { libc::read(p[0], (&mut b as *mut u8).cast(), 1) };
        work();
        unsafe { libc::_exit(0) };
    }
    unsafe { libc::close(p[0]) };
    Child { pid, go: p[1], reaped: false }
}

impl Child {
    /// Releases the child and waits for it to end; returns the wait status.
    fn run(&mut self) -> i32 {
        unsafe {
            libc::write(self.go, b"g".as_ptr().cast(), 1);
            libc::close(self.go);
        }
        self.reaped = true;
        wait(self.pid)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if !self.reaped {
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            wait(self.pid);
        }
    }
}

/// Reaps `pid`; returns its wait status.
fn wait(pid: i32) -> i32 {
    let mut status = 0;
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, libc::__WALL) }, pid);
    status
}

/// Captures `syscalls` in a parked child while it does `work`.
/// Returns the events, the child's pid and its wait status.
fn capture_child(syscalls: &str, work: impl FnOnce()) -> (Captured, u32, i32) {
    capture_child_with(syscalls, Collect::all(), work)
}

fn capture_child_with(syscalls: &str, collect: Collect, work: impl FnOnce()) -> (Captured, u32, i32) {
    let mut child = fork_parked(work);
    let mut cfg = Config::new(parse_syscalls(syscalls).unwrap());
    cfg.pid = Some(child.pid as u32);
    cfg.collect = collect;
    let mut status = 0;
    let c = capture_with(cfg, || status = child.run());
    (c, child.pid as u32, status)
}

/// Exactly `n` events named `name` from thread `tid` (another process's too).
fn of<'a>(c: &'a Captured, tid: u32, name: &str, n: usize) -> Vec<SyscallEvent<'a>> {
    let v = named_in_order(c, tid, name);
    assert_eq!(v.len(), n, "expected {n} {name} events from tid {tid}, got {v:#?}");
    v
}

fn exited(status: i32, code: i32) {
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == code,
        "child status {status:#x}, expected exit {code}"
    );
}

/// A NULL-terminated pointer array over `strings`, for execve's argv.
fn argv(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings.iter().map(|s| s.as_ptr()).chain([std::ptr::null()]).collect()
}

/// The exe/args/cwd trio of a successful exec of /usr/bin/true.
fn exec_image(e: &SyscallEvent, args: &[u8], cwd: &str) {
    let exe = std::fs::canonicalize("/usr/bin/true").unwrap();
    assert_eq!(text(e, "exe"), exe.to_str().unwrap());
    assert_eq!(bytes(e, "args"), args, "the new image's argument block");
    assert_eq!(text(e, "cwd"), cwd);
}

/// Forks a child that moves into a temp dir and then runs `exec` on the
/// prepared values; returns the execve/execveat event's capture, pid and cwd.
fn exec_in_child(syscall: &str, exec: impl FnOnce()) -> (Captured, u32, String) {
    exec_in_child_with(syscall, Collect::all(), exec)
}

fn exec_in_child_with(syscall: &str, collect: Collect, exec: impl FnOnce()) -> (Captured, u32, String) {
    let d = TempDir::new(syscall);
    let cwd = std::fs::canonicalize(&d.0).unwrap().to_str().unwrap().to_string();
    let dc = cstr(&cwd);
    let (c, pid, status) = capture_child_with(syscall, collect, || {
        sys(libc::SYS_chdir, &[ptr(dc.as_ptr())]);
        exec();
        unsafe { libc::_exit(127) };
    });
    exited(status, 0);
    (c, pid, cwd)
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn execve_success(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let path = cstr("/usr/bin/true");
    let args = [cstr("true"), cstr("arg one")];
    let envs = [cstr("HARRIER_TEST_MARK=xyz"), cstr("B=two words")];
    let (av, env) = (argv(&args), argv(&envs));
    // Both selected: a successful execve exits on the same tracepoint as a
    // successful execveat, and must be reported once, as itself.
    let (c, pid, cwd) = exec_in_child("execve,execveat", || {
        sys(libc::SYS_execve, &[ptr(path.as_ptr()), ptr(av.as_ptr()), ptr(env.as_ptr())]);
    });
    let e = of(&c, pid, "execve", 1);
    of(&c, pid, "execveat", 0);
    expect(&e[0], 0, &[("tgid", pid as i64)]);
    assert_eq!(text(&e[0], "filename"), "/usr/bin/true", "taken at entry, before exec resets the registers");
    exec_image(&e[0], b"true\0arg one\0", &cwd);
    let block: &[u8] = b"HARRIER_TEST_MARK=xyz\0B=two words\0";
    assert_eq!(bytes(&e[0], "env"), block, "the new image's environment block");
    expect(&e[0], 0, &[("env_size", block.len() as i64)]);
    // Root execs with every capability the bounding set allows; the
    // inheritable set passes through unchanged.
    let (bounding, inheritable) = (own_caps("CapBnd:"), own_caps("CapInh:"));
    expect(&e[0], 0, &[("cap_permitted", bounding), ("cap_inheritable", inheritable)]);
    assert!(!e[0].header.args_at_exit, "the exit found its entry copy");
    // exec renames the task on its way; its exec event carries the name, so
    // that rename is not an event of its own (prctl's is, below).
    let renames = c
        .all()
        .into_iter()
        .filter(|ev| matches!(ev, Event::Meta(h, Meta::Comm { .. }) if h.tid == pid))
        .count();
    assert_eq!(renames, 0, "a comm event for the exec's own rename");
}

/// One capability set of this process, from /proc/self/status.
fn own_caps(key: &str) -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let hex = status.lines().find_map(|l| l.strip_prefix(key)).unwrap_or_else(|| panic!("{key} in status"));
    u64::from_str_radix(hex.trim(), 16).unwrap() as i64
}

/// An environment larger than the 4 KiB kept: cut at 4096 bytes, env_size
/// says how large it was, and the truncated counter counts it.
#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn execve_large_env_is_cut_and_flagged(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let path = cstr("/usr/bin/true");
    let args = [cstr("true")];
    let big = format!("BIG={}", "v".repeat(6000));
    let envs = [cstr("FIRST=1"), cstr(&big)];
    let (av, env) = (argv(&args), argv(&envs));
    let (c, pid, _) = exec_in_child("execve", || {
        sys(libc::SYS_execve, &[ptr(path.as_ptr()), ptr(av.as_ptr()), ptr(env.as_ptr())]);
    });
    let e = of(&c, pid, "execve", 1);
    let full = 8 + big.len() + 1;
    expect(&e[0], 0, &[("env_size", full as i64)]);
    let got = bytes(&e[0], "env");
    assert_eq!(got.len(), 4096, "cut at 4 KiB");
    assert!(got.starts_with(b"FIRST=1\0BIG=vvv"), "{:?}", &got[..20]);
    assert!(c.stats.kernel_total().truncated >= 1, "the cut is counted");
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn execveat_success(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    // An fd of the binary itself with an empty path (fexecve).
    let bin = File::open("/usr/bin/true").unwrap();
    let (bfd, empty) = (bin.as_raw_fd() as i64, cstr(""));
    let args = [cstr("true")];
    let (av, env) = (argv(&args), [std::ptr::null::<libc::c_char>()]);
    let flags = libc::AT_EMPTY_PATH as i64;
    let (c, pid, cwd) = exec_in_child("execve,execveat", || {
        let a = [bfd, ptr(empty.as_ptr()), ptr(av.as_ptr()), ptr(env.as_ptr()), flags];
        sys(libc::SYS_execveat, &a);
    });
    let e = of(&c, pid, "execveat", 1);
    of(&c, pid, "execve", 0); // its exit comes on execve's tracepoint: not a second event
    assert!(!e[0].header.args_at_exit, "the exit found its entry copy");
    expect(&e[0], 0, &[("tgid", pid as i64), ("dirfd", bfd), ("flags", flags)]);
    assert_eq!(names(&e[0], "flags"), "AT_EMPTY_PATH");
    exec_image(&e[0], b"true\0", &cwd);
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn execve_execveat_failure(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let usr_bin = File::open("/usr/bin").unwrap();
    let (missing, rel) = (cstr("/no/such/harrier-bin"), cstr("no-such-harrier-bin"));
    let args = [cstr("harrier-bin"), cstr("-x"), cstr("")];
    let (av, env) = (argv(&args), [std::ptr::null::<libc::c_char>()]);
    let dfd = usr_bin.as_raw_fd() as i64;
    let c = capture("execve,execveat", || {
        sys(libc::SYS_execve, &[ptr(missing.as_ptr()), ptr(av.as_ptr()), ptr(env.as_ptr())]);
        let a = [dfd, ptr(rel.as_ptr()), ptr(av.as_ptr()), ptr(env.as_ptr()), 0];
        sys(libc::SYS_execveat, &a);
    });
    let me = std::process::id() as i64;
    // The argv strings, each with its NUL (the empty one is just a NUL).
    let joined: &[u8] = b"harrier-bin\0-x\0\0";
    let e = only(&c, "execve");
    expect(&e, -ENOENT as i64, &[("tgid", me)]);
    assert_eq!(text(&e, "filename"), "/no/such/harrier-bin");
    assert_eq!(bytes(&e, "argv"), joined);
    // No new image: the image fields stay empty.
    for f in ["exe", "args", "cwd", "env"] {
        assert_eq!(bytes(&e, f), b"", "{f} of a failed execve");
    }
    expect(&e, -ENOENT as i64, &[("env_size", 0)]);
    let e = only(&c, "execveat");
    expect(&e, -ENOENT as i64, &[("tgid", me), ("dirfd", dfd), ("flags", 0)]);
    assert_eq!(text(&e, "filename"), "no-such-harrier-bin");
    assert_eq!(bytes(&e, "argv"), joined);
    for f in ["exe", "args", "cwd", "env"] {
        assert_eq!(bytes(&e, f), b"", "{f} of a failed execveat");
    }
}

/// Exec arguments read at exit (`harrier run` when no rule reads them): no
/// entry program, and a successful exec's pointer arguments are gone by its
/// exit, so its filename is absent and a successful execveat reports as
/// execve, as Falco's exit events do. A failed exec keeps its image: its
/// arguments are read at exit, and the event says so.
#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn exec_arguments_read_at_exit(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let mut collect = Collect::all();
    collect.read_at_exit("execve").unwrap();
    collect.read_at_exit("execveat").unwrap();
    let bin = File::open("/usr/bin/true").unwrap();
    let (bfd, empty) = (bin.as_raw_fd() as i64, cstr(""));
    let args = [cstr("true")];
    let (av, env) = (argv(&args), [std::ptr::null::<libc::c_char>()]);
    let (c, pid, cwd) = exec_in_child_with("execve,execveat", collect.clone(), || {
        let a = [bfd, ptr(empty.as_ptr()), ptr(av.as_ptr()), ptr(env.as_ptr()), libc::AT_EMPTY_PATH as i64];
        sys(libc::SYS_execveat, &a);
    });
    let loaded: Vec<&str> = c.stats.programs.iter().map(|p| p.name.as_str()).collect();
    assert!(!loaded.iter().any(|n| n.starts_with("hr_enter_")), "no entry program: {loaded:?}");
    let e = of(&c, pid, "execve", 1);
    of(&c, pid, "execveat", 0);
    assert_eq!(e[0].param("filename"), Some(&Value::Missing), "gone with the old image");
    assert!(!e[0].header.args_at_exit, "no argument was read at exit");
    exec_image(&e[0], b"true\0", &cwd);
    assert_eq!(c.stats.kernel_total().toctou_fallbacks, 0, "no entry copy was expected");

    let missing = cstr("/no/such/harrier-bin");
    let mut cfg = Config::new(parse_syscalls("execve,execveat").unwrap());
    cfg.pid = Some(std::process::id());
    cfg.collect = collect;
    let c = capture_with(cfg, || {
        sys(libc::SYS_execve, &[ptr(missing.as_ptr()), ptr(av.as_ptr()), ptr(env.as_ptr())]);
        let a = [libc::AT_FDCWD as i64, ptr(missing.as_ptr()), ptr(av.as_ptr()), ptr(env.as_ptr()), 0];
        sys(libc::SYS_execveat, &a);
    });
    for name in ["execve", "execveat"] {
        let e = only(&c, name);
        assert_eq!(e.ret, -ENOENT as i64);
        assert_eq!(text(&e, "filename"), "/no/such/harrier-bin", "{name}: read at exit");
        assert!(e.header.args_at_exit, "{name}: and it says so");
    }
}

/// struct clone_args, the CLONE_ARGS_SIZE_VER0 part (64 bytes).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
}

/// Exits a just-forked child at once (anything more is unsafe in the copy of
/// a multi-threaded process); in the parent, reaps the child.
fn child_exits_now(ret: i64) -> i64 {
    if ret == 0 {
        unsafe { libc::_exit(0) };
    }
    assert!(ret > 0, "fork-like syscall failed: {ret}");
    wait(ret as i32);
    ret
}

/// vfork whose child exits at once, without a step in Rust: the child runs on
/// the parent's stack, and Rust code does not expect a function to return
/// twice (rust-lang/libc#1596). Returns the child's pid (or -errno).
fn vfork_child_exits() -> i64 {
    let ret: i64;
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "mov eax, {exit_group}",
            "xor edi, edi",
            "syscall",
            "2:",
            exit_group = const libc::SYS_exit_group,
            inlateout("rax") libc::SYS_vfork => ret,
            out("rdi") _, out("rcx") _, out("r11") _,
            options(nostack),
        );
    }
    ret
}

/// This thread's `name` events, less the threads std spawns (CLONE_VM) while
/// the sensor stops: the capture still sees them.
fn forks<'a>(c: &'a Captured, tid: u32, name: &str) -> Vec<SyscallEvent<'a>> {
    let thread_spawn =
        |e: &SyscallEvent| e.param("flags").is_some() && int(e, "flags") & libc::CLONE_VM as i64 != 0;
    named_in_order(c, tid, name).into_iter().filter(|e| !thread_spawn(e)).collect()
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn fork_vfork_clone_clone3_seen_in_parent_and_child(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;
    let sigchld = libc::SIGCHLD as i64;
    let args = CloneArgs { flags: CLONE_CLEAR_SIGHAND, exit_signal: sigchld as u64, ..Default::default() };
    let a3 = ptr(&args as *const CloneArgs);
    let size = std::mem::size_of::<CloneArgs>() as i64;
    // The children are other processes: capture everyone, match by tid.
    let mut cfg = Config::new(parse_syscalls("fork,vfork,clone,clone3").unwrap());
    cfg.pid = None;
    let mut kids = [0i64; 4];
    let c = capture_with(cfg, || {
        kids[0] = child_exits_now(sys(libc::SYS_fork, &[]));
        kids[1] = child_exits_now(vfork_child_exits());
        kids[2] = child_exits_now(sys(libc::SYS_clone, &[sigchld, 0, 0, 0, 0]));
        kids[3] = child_exits_now(sys(libc::SYS_clone3, &[a3, size]));
        // A thread needs the parent's signal handlers.
        sys(libc::SYS_clone, &[libc::CLONE_THREAD as i64, 0, 0, 0, 0]);
        sys(libc::SYS_clone3, &[a3, 8]); // smaller than any clone_args version
    });
    let me = std::process::id() as i64;
    let tid = gettid();
    for (name, &kid) in ["fork", "vfork", "clone", "clone3"].iter().zip(&kids) {
        // Parent side: the child's pid; child side: 0, in the child's process.
        expect(&forks(&c, tid, name)[0], kid, &[("tgid", me)]);
        let child = of(&c, kid as u32, name, 1);
        expect(&child[0], 0, &[("tgid", kid)]);
    }
    let clone = forks(&c, tid, "clone");
    assert_eq!(clone.len(), 2, "{clone:#?}");
    expect(&clone[0], kids[2], &[("flags", sigchld)]);
    assert_eq!(names(&clone[0], "flags"), "SIGCHLD");
    expect(&clone[1], -EINVAL as i64, &[("flags", libc::CLONE_THREAD as i64)]);
    let child = of(&c, kids[2] as u32, "clone", 1);
    expect(&child[0], 0, &[("flags", sigchld)]);

    let clone3 = forks(&c, tid, "clone3");
    assert_eq!(clone3.len(), 2, "{clone3:#?}");
    expect(&clone3[0], kids[3], &[("flags", CLONE_CLEAR_SIGHAND as i64)]);
    assert_eq!(names(&clone3[0], "flags"), "CLONE_CLEAR_SIGHAND");
    expect(&clone3[1], -EINVAL as i64, &[("flags", CLONE_CLEAR_SIGHAND as i64)]);
    let child = of(&c, kids[3] as u32, "clone3", 1);
    expect(&child[0], 0, &[("flags", CLONE_CLEAR_SIGHAND as i64)]);
    assert_eq!(forks(&c, tid, "fork").len(), 1);
    assert_eq!(forks(&c, tid, "vfork").len(), 1);
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn exit_group_status(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let (c, pid, status) = capture_child("exit_group", || {
        sys(libc::SYS_exit_group, &[7]);
    });
    exited(status, 7);
    // exit_group never returns, so there is no return value to check.
    let e = of(&c, pid, "exit_group", 1);
    assert_eq!(int(&e[0], "status"), 7);
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn setuid_setgid_family_in_a_child(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    const KEEP: i64 = -1; // "unchanged", seen as the u32 0xffffffff
    let (c, pid, status) = capture_child("setuid,setgid,setreuid,setregid,setresuid,setresgid", || {
        // Groups first, while still root.
        sys(libc::SYS_setgid, &[1000]);
        sys(libc::SYS_setregid, &[1001, 1002]);
        sys(libc::SYS_setresgid, &[1003, 1004, 1005]);
        // Saved uid 0 lets the child take euid 0 back once.
        sys(libc::SYS_setresuid, &[2001, 2002, 0]);
        sys(libc::SYS_setreuid, &[KEEP, 0]);
        sys(libc::SYS_setuid, &[3000]);
        // Root is gone for good now: all of these fail.
        sys(libc::SYS_setuid, &[0]);
        sys(libc::SYS_setgid, &[0]);
        sys(libc::SYS_setreuid, &[0, 0]);
        sys(libc::SYS_setregid, &[0, 0]);
        sys(libc::SYS_setresuid, &[0, 0, 0]);
        sys(libc::SYS_setresgid, &[0, 0, 0]);
    });
    exited(status, 0);
    let eperm = -EPERM as i64;
    let keep = u32::MAX as i64;
    let e = of(&c, pid, "setgid", 2);
    expect(&e[0], 0, &[("gid", 1000)]);
    expect(&e[1], eperm, &[("gid", 0)]);
    let e = of(&c, pid, "setregid", 2);
    expect(&e[0], 0, &[("rgid", 1001), ("egid", 1002)]);
    expect(&e[1], eperm, &[("rgid", 0), ("egid", 0)]);
    let e = of(&c, pid, "setresgid", 2);
    expect(&e[0], 0, &[("rgid", 1003), ("egid", 1004), ("sgid", 1005)]);
    expect(&e[1], eperm, &[("rgid", 0), ("egid", 0), ("sgid", 0)]);
    let e = of(&c, pid, "setresuid", 2);
    expect(&e[0], 0, &[("ruid", 2001), ("euid", 2002), ("suid", 0)]);
    expect(&e[1], eperm, &[("ruid", 0), ("euid", 0), ("suid", 0)]);
    let e = of(&c, pid, "setreuid", 2);
    expect(&e[0], 0, &[("ruid", keep), ("euid", 0)]);
    expect(&e[1], eperm, &[("ruid", 0), ("euid", 0)]);
    let e = of(&c, pid, "setuid", 2);
    expect(&e[0], 0, &[("uid", 3000)]);
    expect(&e[1], eperm, &[("uid", 0)]);
}

/// struct __user_cap_header_struct and one __user_cap_data_struct.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn capset_in_a_child(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    const V3: u32 = 0x2008_0522; // _LINUX_CAPABILITY_VERSION_3: two data structs
    let hdr = CapHeader { version: V3, pid: 0 };
    let none = CapData { effective: 0, permitted: 0, inheritable: 0 };
    // CAP_CHOWN, CAP_KILL and CAP_SETUID; then everything, which a process
    // that just gave capabilities up may not take back.
    let keep = [CapData { effective: 0x81, permitted: 0xa1, inheritable: 0x1 }, none];
    let all = [CapData { effective: !0, permitted: !0, inheritable: 0 }, none];
    let h = ptr(&hdr as *const CapHeader);
    let (k, a) = (ptr(keep.as_ptr()), ptr(all.as_ptr()));
    let (c, pid, status) = capture_child("capset", || {
        sys(libc::SYS_capset, &[h, k]);
        sys(libc::SYS_capset, &[h, a]);
    });
    exited(status, 0);
    let e = of(&c, pid, "capset", 2);
    expect(&e[0], 0, &[("effective", 0x81), ("permitted", 0xa1), ("inheritable", 0x1)]);
    let now = [("cur_cap_effective", 0x81), ("cur_cap_permitted", 0xa1), ("cur_cap_inheritable", 0x1)];
    expect(&e[0], 0, &now);
    let all = u32::MAX as i64;
    expect(&e[1], -EPERM as i64, &[("effective", all), ("permitted", all), ("inheritable", 0)]);
    expect(&e[1], -EPERM as i64, &now);
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn prctl_set_and_get_name(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let name = cstr("harrier-prctl");
    let mut got = [0u8; 16];
    let (np, gp) = (ptr(name.as_ptr()), ptr(got.as_mut_ptr()));
    let (set, get) = (libc::PR_SET_NAME as i64, libc::PR_GET_NAME as i64);
    let c = capture("prctl", || {
        sys(libc::SYS_prctl, &[set, np, 0, 0, 0]);
        sys(libc::SYS_prctl, &[get, gp, 0, 0, 0]);
        sys(libc::SYS_prctl, &[9999, 1, 2, 0, 0]);
    });
    assert_eq!(&got[..14], b"harrier-prctl\0");
    let e = exactly(&c, "prctl", 3);
    expect(&e[0], 0, &[("option", set), ("arg2", np), ("arg3", 0)]);
    assert_eq!(names(&e[0], "option"), "PR_SET_NAME");
    expect(&e[1], 0, &[("option", get), ("arg2", gp), ("arg3", 0)]);
    assert_eq!(names(&e[1], "option"), "PR_GET_NAME");
    expect(&e[2], -EINVAL as i64, &[("option", 9999), ("arg2", 1), ("arg3", 2)]);
    // The name itself travels in the comm event of this thread.
    let tid = gettid();
    let renamed = c.all().into_iter().any(
        |ev| matches!(ev, Event::Meta(h, Meta::Comm { ref comm }) if h.tid == tid && comm == "harrier-prctl"),
    );
    assert!(renamed, "no comm event naming harrier-prctl");
}

/// Read by the tracer from the tracee's copy of this process's memory.
static MARKER: u64 = 0x4861_7272_6965_7221;

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn ptrace_attach_peek_detach(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let mut child = fork_parked(|| {});
    let (pid, addr) = (child.pid as i64, ptr(&MARKER as *const u64));
    let mut word = 0u64;
    let wp = ptr(&mut word as *mut u64);
    let (attach, peek, detach) =
        (libc::PTRACE_ATTACH as i64, libc::PTRACE_PEEKDATA as i64, libc::PTRACE_DETACH as i64);
    let c = capture("ptrace", || {
        // Waiting for the stop only if attached: a parked child never ends.
        if sys(libc::SYS_ptrace, &[attach, pid, 0, 0]) == 0 {
            assert!(libc::WIFSTOPPED(wait(pid as i32)), "the tracee stops on attach");
        }
        sys(libc::SYS_ptrace, &[peek, pid, addr, wp]);
        sys(libc::SYS_ptrace, &[detach, pid, 0, 0]);
        sys(libc::SYS_ptrace, &[attach, NO_PID, 0, 0]);
    });
    exited(child.run(), 0);
    assert_eq!(word, MARKER, "PTRACE_PEEKDATA read the tracee's word");
    let e = exactly(&c, "ptrace", 4);
    expect(&e[0], 0, &[("request", attach), ("pid", pid), ("addr", 0)]);
    assert_eq!(names(&e[0], "request"), "PTRACE_ATTACH");
    expect(&e[1], 0, &[("request", peek), ("pid", pid), ("addr", addr)]);
    expect(&e[2], 0, &[("request", detach), ("pid", pid), ("addr", 0)]);
    expect(&e[3], -ESRCH as i64, &[("request", attach), ("pid", NO_PID), ("addr", 0)]);
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn kill_and_tgkill(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let mut child = fork_parked(|| {});
    let (kid, me, tid) = (child.pid as i64, std::process::id() as i64, gettid() as i64);
    let sigkill = libc::SIGKILL as i64;
    let c = capture("kill,tgkill", || {
        sys(libc::SYS_kill, &[me, 0]);
        sys(libc::SYS_kill, &[NO_PID, 0]);
        sys(libc::SYS_kill, &[kid, sigkill]);
        sys(libc::SYS_tgkill, &[me, tid, 0]);
        sys(libc::SYS_tgkill, &[me, NO_PID, libc::SIGUSR1 as i64]);
        sys(libc::SYS_tgkill, &[0, tid, 0]);
    });
    // Released after the kill, the child would exit 0 instead of hanging.
    let status = child.run();
    assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL);

    let e = exactly(&c, "kill", 3);
    expect(&e[0], 0, &[("pid", me), ("sig", 0)]);
    expect(&e[1], -ESRCH as i64, &[("pid", NO_PID), ("sig", 0)]);
    expect(&e[2], 0, &[("pid", kid), ("sig", sigkill)]);
    assert_eq!(names(&e[2], "sig"), "SIGKILL");
    let e = exactly(&c, "tgkill", 3);
    expect(&e[0], 0, &[("tgid", me), ("tid", tid), ("sig", 0)]);
    expect(&e[1], -ESRCH as i64, &[("tgid", me), ("tid", NO_PID), ("sig", libc::SIGUSR1 as i64)]);
    assert_eq!(names(&e[1], "sig"), "SIGUSR1");
    expect(&e[2], -EINVAL as i64, &[("tgid", 0), ("tid", tid), ("sig", 0)]);
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn unshare_and_setns_in_a_child(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    // The child leaves this UTS namespace, then joins it again through this fd.
    let uts = File::open("/proc/self/ns/uts").unwrap();
    let ufd = uts.as_raw_fd() as i64;
    let newuts = libc::CLONE_NEWUTS as i64;
    let (c, pid, status) = capture_child("unshare,setns", || {
        sys(libc::SYS_unshare, &[newuts]);
        sys(libc::SYS_unshare, &[libc::CLONE_VFORK as i64]);
        sys(libc::SYS_setns, &[ufd, newuts]);
        sys(libc::SYS_setns, &[BADFD, 0]);
    });
    exited(status, 0);
    let e = of(&c, pid, "unshare", 2);
    expect(&e[0], 0, &[("flags", newuts)]);
    assert_eq!(names(&e[0], "flags"), "CLONE_NEWUTS");
    expect(&e[1], -EINVAL as i64, &[("flags", libc::CLONE_VFORK as i64)]);
    let e = of(&c, pid, "setns", 2);
    expect(&e[0], 0, &[("fd", ufd), ("nstype", newuts)]);
    assert_eq!(names(&e[0], "nstype"), "CLONE_NEWUTS");
    expect(&e[1], -EBADF as i64, &[("fd", BADFD), ("nstype", 0)]);
}
