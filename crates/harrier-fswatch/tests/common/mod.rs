//! A tmpfs mounted for one test (always unmounted), raw syscalls, and event
//! collection for the fswatch tests.
#![allow(dead_code)]

use harrier_fswatch::{Config, FsEvent, Resolution, Watcher};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A fresh tmpfs at /tmp/harrier-fswatch-PID-TAG, unmounted and removed on drop.
pub struct TmpMount {
    pub root: PathBuf,
}

impl TmpMount {
    pub fn new(tag: &str) -> TmpMount {
        let root = PathBuf::from(format!("/tmp/harrier-fswatch-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        mount_tmpfs(&root);
        TmpMount { root }
    }
}

pub fn mount_tmpfs(at: &Path) {
    let src = CString::new("tmpfs").unwrap();
    let dst = c(at);
    let rc = unsafe { libc::mount(src.as_ptr(), dst.as_ptr(), src.as_ptr(), 0, std::ptr::null()) };
    assert_eq!(rc, 0, "mounting a tmpfs at {}: {}", at.display(), std::io::Error::last_os_error());
}

pub fn bind_mount(from: &Path, to: &Path) {
    let (s, d) = (c(from), c(to));
    let rc =
        unsafe { libc::mount(s.as_ptr(), d.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null()) };
    assert_eq!(rc, 0, "bind {} on {}: {}", from.display(), to.display(), std::io::Error::last_os_error());
}

/// mount --make-private: MS_MOVE refuses mounts below a shared one.
pub fn make_private(at: &Path) {
    let d = c(at);
    let rc = unsafe {
        libc::mount(std::ptr::null(), d.as_ptr(), std::ptr::null(), libc::MS_PRIVATE, std::ptr::null())
    };
    assert_eq!(rc, 0, "making {} private: {}", at.display(), std::io::Error::last_os_error());
}

/// mount --move.
pub fn move_mount(from: &Path, to: &Path) {
    let (s, d) = (c(from), c(to));
    let rc =
        unsafe { libc::mount(s.as_ptr(), d.as_ptr(), std::ptr::null(), libc::MS_MOVE, std::ptr::null()) };
    assert_eq!(rc, 0, "moving {} to {}: {}", from.display(), to.display(), std::io::Error::last_os_error());
}

pub fn umount(at: &Path) {
    let d = c(at);
    unsafe { libc::umount2(d.as_ptr(), libc::MNT_DETACH) };
}

impl Drop for TmpMount {
    fn drop(&mut self) {
        // Lazily: a mount below (bind, tmpfs) goes with it.
        umount(&self.root);
        let _ = std::fs::remove_dir(&self.root);
    }
}

pub fn c(p: impl AsRef<Path>) -> CString {
    CString::new(p.as_ref().as_os_str().as_bytes()).unwrap()
}

/// Checks a raw syscall's result.
pub fn ok(rc: i64, what: &str) -> i64 {
    assert!(rc >= 0, "{what}: {}", std::io::Error::last_os_error());
    rc
}

/// (kind, path, source) of an event, paths as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub kind: String,
    pub path: String,
    pub source: Option<String>,
    pub flags: u32,
    pub ino: u64,
    pub pid: u32,
}

impl Seen {
    pub fn of(e: &FsEvent) -> Seen {
        Seen {
            kind: e.kind_name().to_string(),
            path: String::from_utf8_lossy(e.path).into_owned(),
            source: e.source.map(|s| String::from_utf8_lossy(s).into_owned()),
            flags: e.flags,
            ino: e.ino,
            pid: e.pid,
        }
    }
}

pub fn watcher(paths: &[&Path], events: &str, recursive: bool) -> Watcher {
    watcher_in(paths, events, recursive, Resolution::Ringbuf, true)
}

/// `prefilter`: Config::prefilter (the watch check before the walk).
pub fn watcher_in(
    paths: &[&Path],
    events: &str,
    recursive: bool,
    resolution: Resolution,
    prefilter: bool,
) -> Watcher {
    let cfg = Config {
        paths: paths.iter().map(|p| p.to_path_buf()).collect(),
        events: harrier_fswatch::parse_events(events).unwrap(),
        recursive,
        resolution,
        prefilter,
        pid: Some(std::process::id()),
        ..Config::default()
    };
    Watcher::start(&cfg).unwrap_or_else(|e| panic!("starting the watcher: {e:#}"))
}

/// Everything in the rings now. BPF writes an event before the syscall
/// returns, so after an operation one drain sees all of its events.
pub fn drain(w: &mut Watcher) -> Vec<Seen> {
    let mut v = Vec::new();
    w.drain(|e| v.push(Seen::of(e))).unwrap();
    v
}

/// False on a kernel without the timestamp tracepoints, after checking that
/// the watcher refuses to start there with one line naming the missing hook
/// and the first kernel that has it.
pub fn supported() -> bool {
    if harrier_fswatch::missing_hooks().is_empty() {
        return true;
    }
    let cfg = Config { pid: Some(std::process::id()), ..Config::default() };
    let msg = format!("{:#}", Watcher::start(&cfg).err().expect("the watcher refuses this kernel"));
    let want = format!(
        "tracepoint, which harrier fswatch needs to resolve paths from kernel objects: Linux {} or newer",
        harrier_fswatch::HOOKS_SINCE
    );
    assert!(msg.contains(&want) && !msg.contains('\n'), "{msg}");
    false
}

pub fn rename(a: &Path, b: &Path) {
    ok(unsafe { libc::rename(c(a).as_ptr(), c(b).as_ptr()) } as i64, &format!("rename {a:?} {b:?}"));
}

/// renameat2(RENAME_EXCHANGE): a and b trade places.
pub fn exchange(a: &Path, b: &Path) {
    const RENAME_EXCHANGE: libc::c_uint = 2;
    let rc = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            c(a).as_ptr(),
            libc::AT_FDCWD,
            c(b).as_ptr(),
            RENAME_EXCHANGE,
        )
    };
    ok(rc, "renameat2(RENAME_EXCHANGE)");
}

/// Keeps this thread on the CPU it runs on until dropped: the kernel's
/// caches and rings are per CPU, so the events of a pinned thread meet the
/// entries its earlier events left, and fill one ring.
pub struct Pinned(libc::cpu_set_t);

impl Pinned {
    pub fn here() -> Pinned {
        unsafe {
            let mut old: libc::cpu_set_t = std::mem::zeroed();
            ok(libc::sched_getaffinity(0, std::mem::size_of_val(&old), &mut old) as i64, "sched_getaffinity");
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(ok(libc::sched_getcpu() as i64, "sched_getcpu") as usize, &mut one);
            ok(libc::sched_setaffinity(0, std::mem::size_of_val(&one), &one) as i64, "sched_setaffinity");
            Pinned(old)
        }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&self.0), &self.0) };
    }
}
