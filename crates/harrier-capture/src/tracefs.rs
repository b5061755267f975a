//! Tracepoint ids, needed to attach to syscalls:sys_{enter,exit}_* tracepoints.
//!
//! Many hosts (this one included) do not mount tracefs. Rather than mount it
//! for everyone, a forked child mounts it in a private mount namespace, reads
//! the ids and exits: the namespace, and the mount, vanish with it.

use anyhow::{bail, Context, Result};
use std::ffi::CString;
use std::path::Path;

/// From linux/perf_event.h (not in the libc crate).
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

const MOUNTED: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

fn id_path(root: &str, category: &str, name: &str) -> String {
    format!("{root}/events/{category}/{name}/id")
}

/// Ids of `category:name` tracepoints, None for those this kernel lacks.
pub fn tracepoint_ids(category: &str, names: &[String]) -> Result<Vec<Option<u64>>> {
    for root in MOUNTED {
        if Path::new(&format!("{root}/events")).is_dir() {
            return Ok(names
                .iter()
                .map(|n| std::fs::read_to_string(id_path(root, category, n)).ok())
                .map(|s| s.and_then(|s| s.trim().parse().ok()))
                .collect());
        }
    }
    read_in_private_mount(category, names)
}

fn read_in_private_mount(category: &str, names: &[String]) -> Result<Vec<Option<u64>>> {
    // Everything the child touches is prepared here: after fork() in a
    // multi-threaded process it may only make raw syscalls.
    let paths: Vec<CString> =
        names.iter().map(|n| CString::new(id_path(MOUNTED[0], category, n)).unwrap()).collect();
    let target = CString::new(MOUNTED[0]).unwrap();
    let tracefs = CString::new("tracefs").unwrap();
    let root = CString::new("/").unwrap();
    let mut ids = vec![u64::MAX; names.len()];
    let mut pipe = [0i32; 2];
    // SAFETY: plain syscalls; the child only uses memory allocated above and _exits.
    unsafe {
        if libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            bail!("pipe: {}", std::io::Error::last_os_error());
        }
        let pid = libc::fork();
        if pid < 0 {
            bail!("fork: {}", std::io::Error::last_os_error());
        }
        if pid == 0 {
            libc::close(pipe[0]);
            let ok = libc::unshare(libc::CLONE_NEWNS) == 0
                && libc::mount(
                    std::ptr::null(),
                    root.as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ) == 0
                && libc::mount(tracefs.as_ptr(), target.as_ptr(), tracefs.as_ptr(), 0, std::ptr::null()) == 0;
            if !ok {
                libc::_exit(2);
            }
            for p in &paths {
                let id = read_u64(p);
                libc::write(pipe[1], (&id as *const u64).cast(), 8);
            }
            libc::_exit(0);
        }
        libc::close(pipe[1]);
        let want = ids.len() * 8;
        let mut got = 0;
        while got < want {
            let n = libc::read(pipe[0], ids.as_mut_ptr().cast::<u8>().add(got).cast(), want - got);
            if n <= 0 {
                break;
            }
            got += n as usize;
        }
        libc::close(pipe[0]);
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 || got != want {
            bail!("cannot mount tracefs to look up tracepoints (needs CAP_SYS_ADMIN)");
        }
    }
    Ok(ids.into_iter().map(|id| (id != u64::MAX).then_some(id)).collect())
}

/// Async-signal-safe: parses the decimal number in a small file, u64::MAX if none.
unsafe fn read_u64(path: &CString) -> u64 {
    let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return u64::MAX;
    }
    let mut buf = [0u8; 32];
    let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
    libc::close(fd);
    let mut v: u64 = 0;
    let mut digits = 0;
    for &c in buf.iter().take(n.max(0) as usize) {
        if !c.is_ascii_digit() {
            break;
        }
        v = v * 10 + (c - b'0') as u64;
        digits += 1;
    }
    if digits == 0 {
        u64::MAX
    } else {
        v
    }
}

/// Opens the perf event a BPF program attaches to, on CPU 0 for all tasks
/// (tracepoint programs then run on every CPU, as libbpf does it).
pub fn open_tracepoint_event(id: u64) -> Result<i32> {
    // SAFETY: perf_event_attr is plain data; zero is a valid default.
    let mut attr: libbpf_sys::perf_event_attr = unsafe { std::mem::zeroed() };
    attr.type_ = libbpf_sys::PERF_TYPE_TRACEPOINT;
    attr.size = std::mem::size_of::<libbpf_sys::perf_event_attr>() as u32;
    attr.config = id;
    attr.__bindgen_anon_1.sample_period = 1;
    attr.__bindgen_anon_2.wakeup_events = 1;
    let fd = unsafe {
        libc::syscall(libc::SYS_perf_event_open, &attr as *const _, -1, 0, -1, PERF_FLAG_FD_CLOEXEC)
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("perf_event_open");
    }
    Ok(fd as i32)
}
