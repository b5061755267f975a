//! Fail open: a child process that resumes every task the kernel holds
//! for the sensor's verdict once the sensor is gone, however it went
//! (kill -9 included). It holds the held-task map and the read end of a
//! pipe only the sensor writes to: the pipe's end of file is the sensor's
//! end. It closes every other descriptor first, so no BPF link stays
//! attached through it.

use anyhow::{bail, Result};
use std::os::fd::{AsRawFd, BorrowedFd};

pub struct Guardian {
    pid: libc::pid_t,
    pipe_w: libc::c_int,
}

impl Guardian {
    /// Forks the guardian over `held` (the guard_held map's fd).
    pub fn spawn(held: BorrowedFd<'_>) -> Result<Guardian> {
        let mut p = [0 as libc::c_int; 2];
        // SAFETY: pipe2 fills the two ints.
        if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            bail!("creating the guardian's pipe: {}", std::io::Error::last_os_error());
        }
        let map = held.as_raw_fd();
        // SAFETY: the child calls only async-signal-safe syscalls and
        // libbpf's syscall wrappers (no allocation), then _exit.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            bail!("forking the guardian: {}", std::io::Error::last_os_error());
        }
        if pid == 0 {
            unsafe { guardian_main(p[0], map) }
        }
        // SAFETY: the parent keeps only the write end.
        unsafe { libc::close(p[0]) };
        Ok(Guardian { pid, pipe_w: p[1] })
    }
}

impl Drop for Guardian {
    /// The sensor's end: the guardian resumes what is still held, and exits.
    fn drop(&mut self) {
        // SAFETY: our own fd and child.
        unsafe {
            libc::close(self.pipe_w);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

unsafe fn close_but(keep: [libc::c_int; 2]) {
    let (lo, hi) = (keep[0].min(keep[1]) as u32, keep[0].max(keep[1]) as u32);
    for (from, to) in [(3, lo.wrapping_sub(1)), (lo + 1, hi.wrapping_sub(1)), (hi + 1, u32::MAX)] {
        if from <= to {
            libc::syscall(libc::SYS_close_range, from, to, 0);
        }
    }
}

unsafe fn guardian_main(pipe_r: libc::c_int, map: libc::c_int) -> ! {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        libc::signal(sig, libc::SIG_IGN);
    }
    close_but([pipe_r, map]);
    let mut b = 0u8;
    loop {
        let n = libc::read(pipe_r, &mut b as *mut u8 as *mut libc::c_void, 1);
        if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
            break;
        }
    }
    resume_all(map);
    libc::_exit(0)
}

/// Every held task resumed and its entry removed (also the sensor's own
/// last step). Raw calls: it runs in the forked child too.
pub(crate) unsafe fn resume_all(map: libc::c_int) {
    let (mut key, mut val) = (0u32, [0u8; 16]);
    // Always the first key: each one is deleted once handled.
    for _ in 0..100_000 {
        if libbpf_sys::bpf_map_get_next_key(map, std::ptr::null(), &mut key as *mut u32 as *mut _) != 0 {
            break;
        }
        if libbpf_sys::bpf_map_lookup_elem(map, &key as *const u32 as *const _, val.as_mut_ptr() as *mut _)
            == 0
        {
            let tgid = u32::from_ne_bytes([val[8], val[9], val[10], val[11]]);
            libc::kill(tgid as i32, libc::SIGCONT);
        }
        libbpf_sys::bpf_map_delete_elem(map, &key as *const u32 as *const _);
    }
}
