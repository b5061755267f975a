//! A tmpfs mounted for one test (always unmounted), raw syscalls, and event
//! collection for the fswatch tests.
#![allow(dead_code)]

use harrier_fswatch::{Config, FsEvent, Hooks, Resolution, Watcher};
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
        ..config()
    };
    Watcher::start(&cfg).unwrap_or_else(|e| panic!("starting the watcher: {e:#}"))
}

/// The hooks the tests ask for: HARRIER_FSWATCH_HOOKS (tracepoints, fentry,
/// kprobes: scripts/vm-guest.sh runs the suite again with kprobes), else the
/// best this kernel has.
pub fn hooks() -> Option<Hooks> {
    let v = std::env::var("HARRIER_FSWATCH_HOOKS").ok().filter(|v| !v.is_empty() && v != "auto")?;
    Some(v.parse().unwrap_or_else(|e| panic!("HARRIER_FSWATCH_HOOKS: {e}")))
}

/// The tests' defaults: Config::default() with the hooks asked for.
pub fn config() -> Config {
    Config { hooks: hooks(), ..Config::default() }
}

/// Everything in the rings now. BPF writes an event before the syscall
/// returns, so after an operation one drain sees all of its events.
pub fn drain(w: &mut Watcher) -> Vec<Seen> {
    let mut v = Vec::new();
    w.drain(|e| v.push(Seen::of(e))).unwrap();
    v
}

/// False on a kernel with none of the hooks fswatch can use, after checking
/// that the watcher refuses to start there with one line naming what is
/// missing and the first kernels that have it; under CI=true that fails (a
/// BPF test never passes by skipping). Hooks asked for with
/// HARRIER_FSWATCH_HOOKS that this kernel lacks fail at once.
pub fn supported() -> bool {
    if std::env::var("HARRIER_BPF_LOG").is_ok() {
        // libbpf's messages, the verifier's log included: what a load that
        // fails on another kernel (a guest of scripts/test-kernels.sh) says.
        libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, |_, s: String| eprint!("{s}"))));
    }
    let why = match harrier_fswatch::hooks::choose(hooks()) {
        Ok(c) => {
            eprintln!("fswatch {}", c.describe());
            return true;
        }
        Err(e) => e.to_string(),
    };
    assert!(hooks().is_none(), "HARRIER_FSWATCH_HOOKS asks for hooks this kernel lacks: {why}");
    let cfg = Config { pid: Some(std::process::id()), ..config() };
    let msg = format!("{:#}", Watcher::start(&cfg).err().expect("the watcher refuses this kernel"));
    assert!(
        msg.contains("has none of the hooks harrier fswatch needs") && msg.contains("(Linux 6.13)"),
        "{msg}"
    );
    assert!(!msg.contains('\n'), "{msg}");
    assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "CI=true on a kernel fswatch cannot use: {msg}");
    eprintln!("note: {msg}: skipped");
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
