//! The behaviours themselves, each the real system calls a rule is about.
//! The live rule tests (harrier-engine/tests/live.rs) and the benchmark's
//! action generator both call these.

use anyhow::{bail, Context, Result};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

fn errno(what: &str) -> anyhow::Error {
    anyhow::anyhow!("{what}: {}", std::io::Error::last_os_error())
}

/// A child that does nothing until it is killed (a ptrace target). Only
/// async-signal-safe calls run in the child: the caller may have threads.
fn idle_child() -> Result<libc::pid_t> {
    match unsafe { libc::fork() } {
        -1 => Err(errno("fork")),
        0 => loop {
            unsafe { libc::pause() };
        },
        pid => Ok(pid),
    }
}

fn reap(pid: libc::pid_t) {
    let mut status = 0;
    while unsafe { libc::waitpid(pid, &mut status, 0) } == -1
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    {}
}

/// `ptrace(PTRACE_TRACEME)` in a forked child that exits at once (anti-debugging).
pub fn ptrace_traceme() -> Result<()> {
    match unsafe { libc::fork() } {
        -1 => Err(errno("fork")),
        0 => unsafe {
            libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0);
            libc::_exit(0)
        },
        pid => {
            reap(pid);
            Ok(())
        }
    }
}

/// `ptrace(PTRACE_ATTACH)` to a child of ours, which is then killed.
pub fn ptrace_attach() -> Result<()> {
    let pid = idle_child()?;
    let r = unsafe { libc::ptrace(libc::PTRACE_ATTACH, pid, 0, 0) };
    let err = (r != 0).then(|| errno("ptrace(PTRACE_ATTACH)"));
    if r == 0 {
        // Attached: the child stops; wait for the stop before detaching.
        let mut status = 0;
        unsafe { libc::waitpid(pid, &mut status, 0) };
    }
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0);
    }
    reap(pid);
    err.map_or(Ok(()), Err)
}

/// `symlink(target, link)`.
pub fn symlink(target: &str, link: &Path) -> Result<()> {
    std::os::unix::fs::symlink(target, link).with_context(|| format!("symlink to {target}"))
}

/// `link(from, to)`: a hard link (same file system).
pub fn hard_link(from: &Path, to: &Path) -> Result<()> {
    std::fs::hard_link(from, to).with_context(|| format!("hard link to {}", from.display()))
}

/// Opens `path` read-only and closes it.
pub fn open_read(path: &str) -> Result<()> {
    std::fs::File::open(path).with_context(|| format!("opening {path}"))?;
    Ok(())
}

/// Creates `path` for writing (O_CREAT|O_WRONLY) and removes it.
pub fn create_and_remove(path: &Path) -> Result<()> {
    std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    std::fs::remove_file(path).with_context(|| format!("removing {}", path.display()))
}

/// Opens `path` with O_WRONLY|O_TRUNC (what `: > file` does; clearing a log).
pub fn truncate(path: &Path) -> Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("truncating {}", path.display()))?;
    Ok(())
}

/// `setns` into this thread's own UTS namespace: a successful namespace
/// change that changes nothing (uts is per thread, so threads do not matter).
pub fn setns_own_uts() -> Result<()> {
    let fd = std::fs::File::open("/proc/thread-self/ns/uts").context("opening /proc/thread-self/ns/uts")?;
    if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWUTS) } != 0 {
        return Err(errno("setns(CLONE_NEWUTS)"));
    }
    Ok(())
}

/// A memfd holding a copy of `bin`: executing it is fileless execution.
pub fn memfd_copy(bin: &str) -> Result<OwnedFd> {
    let name = CString::new("harrier-memfd").expect("no NUL");
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(errno("memfd_create"));
    }
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let bytes = std::fs::read(bin).with_context(|| format!("reading {bin}"))?;
    let mut f = std::fs::File::from(fd.try_clone().context("dup of the memfd")?);
    std::io::Write::write_all(&mut f, &bytes).context("filling the memfd")?;
    Ok(fd)
}

/// Runs the program in a memfd (made by [`memfd_copy`]) as `/proc/self/fd/N`.
pub fn exec_memfd(fd: &OwnedFd, args: &[&str]) -> Result<()> {
    use std::os::unix::process::CommandExt;
    let raw = fd.as_raw_fd();
    let mut cmd = std::process::Command::new(format!("/proc/self/fd/{raw}"));
    cmd.args(args).stdout(std::process::Stdio::null());
    // The memfd is close-on-exec (so the sensor and other children do not
    // inherit it); the child clears the flag on its own copy before exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(raw, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let st = cmd.status().context("executing a memfd")?;
    if st.code().is_none() {
        bail!("the memfd program was killed by a signal");
    }
    Ok(())
}
