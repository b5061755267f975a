//! What the battery's alerts depend on in the process that runs it (the
//! runner) and its machine: recorded next to Falco's alerts (harrier-bench
//! falco-diff --expected) and read the same way by the expected-values test.

use anyhow::{Context, Result};

const OVERLAYFS_MAGIC: i64 = 0x794c_7630;
const CGROUP2_MAGIC: i64 = 0x6367_7270;

pub struct Runner {
    /// The name of its session leader (proc.sname of its children).
    pub session: String,
    /// Its working directory as Falco renders proc.cwd (a trailing `/`).
    pub cwd: String,
    /// /usr is an overlay (the test guests'): binaries in it run from a lower layer.
    pub usr_overlay: bool,
    /// cgroups are v2 (the test guests'): runc loads a BPF device filter per container.
    pub cgroup2: bool,
}

impl Runner {
    pub fn this_process() -> Result<Runner> {
        let cwd = std::env::current_dir()?.display().to_string();
        Ok(Runner {
            session: session_name()?,
            cwd: format!("{}/", cwd.trim_end_matches('/')),
            usr_overlay: fs_is("/usr/sbin", OVERLAYFS_MAGIC),
            cgroup2: fs_is("/sys/fs/cgroup", CGROUP2_MAGIC),
        })
    }
}

fn session_name() -> Result<String> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // pid (comm) state ppid pgrp session ...
    let sid =
        stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().nth(3)).context("/proc/self/stat")?;
    let comm = std::fs::read_to_string(format!("/proc/{sid}/comm"))
        .with_context(|| format!("the session leader's name (/proc/{sid}/comm)"))?;
    Ok(comm.trim().to_string())
}

/// Whether `path` is on a file system of type `magic` (statfs).
fn fs_is(path: &str, magic: i64) -> bool {
    let Ok(c) = std::ffi::CString::new(path) else { return false };
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statfs the call fills.
    unsafe { libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type as i64 == magic }
}
