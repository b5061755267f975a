//! Shared by the BPF integration tests: run a workload under a real sensor
//! and collect what it reported.
#![allow(dead_code)]

use harrier_capture::{parse_syscalls, AttachMode, Config, Session, Stats, UntoldFds};
use harrier_schema::decode::{decode, Event, SyscallEvent};
use std::cell::Cell;
use std::cell::RefCell;
use std::rc::Rc;

pub use harrier_capture::testing::bpf_available;

pub fn gettid() -> u32 {
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Events as owned bytes, decoded on demand.
pub struct Captured {
    pub events: Vec<Vec<u8>>,
    pub stats: Stats,
}

impl Captured {
    /// Syscall events of one thread, in call order. Rings are per CPU, so a
    /// thread that migrated has its events in two rings: sort by time.
    pub fn of_tid(&self, tid: u32) -> Vec<SyscallEvent<'_>> {
        let mut v: Vec<_> = self
            .events
            .iter()
            .filter_map(|b| match decode(b).expect("every event decodes") {
                Event::Syscall(e) if e.header.tid == tid => Some(e),
                _ => None,
            })
            .collect();
        v.sort_by_key(|e| e.header.ts);
        v
    }

    /// Syscall events named `name` from thread `tid`.
    pub fn named(&self, tid: u32, name: &str) -> Vec<SyscallEvent<'_>> {
        self.of_tid(tid).into_iter().filter(|e| e.syscall.name == name).collect()
    }

    /// Events of every thread of the capture (for multi-process tests).
    pub fn all(&self) -> Vec<Event<'_>> {
        self.events.iter().map(|b| decode(b).expect("every event decodes")).collect()
    }
}

thread_local! {
    /// The attach mode this test thread runs in: every capture test runs
    /// once per mode (`#[test_case]`), so both must give the same events.
    static MODE: Cell<AttachMode> = const { Cell::new(AttachMode::PerSyscall) };
}

pub fn use_mode(mode: AttachMode) {
    MODE.with(|m| m.set(mode));
}

pub fn mode() -> AttachMode {
    MODE.with(|m| m.get())
}

/// Captures with `cfg` while `work` runs; a config left on `auto` takes
/// the test's mode, so a test never depends on what `auto` would pick.
pub fn capture_with(mut cfg: Config, work: impl FnOnce()) -> Captured {
    if cfg.attach == AttachMode::Auto {
        cfg.attach = mode();
    }
    let events = Rc::new(RefCell::new(Vec::new()));
    let sink = events.clone();
    let mut s = Session::start(&cfg, Box::new(move |b| sink.borrow_mut().push(b.to_vec())))
        .expect("the sensor starts");
    work();
    s.drain().unwrap();
    let stats = s.stop().expect("the sensor stops");
    assert_eq!(stats.attach_mode, cfg.attach.to_string(), "the session ran in the mode asked for");
    let events = Rc::try_unwrap(events).unwrap().into_inner();
    Captured { events, stats }
}

/// Drains `s` on its timer until `writer` (a thread returning its tid)
/// sets `done`, then stops it: (the writer's tid, the final stats).
pub fn drain_until_done(
    mut s: Session,
    done: &std::sync::atomic::AtomicBool,
    writer: std::thread::JoinHandle<u32>,
) -> (u32, Stats) {
    let mut pace = s.pace();
    while !done.load(std::sync::atomic::Ordering::Relaxed) {
        s.sleep_and_drain(&mut pace).unwrap();
    }
    let tid = writer.join().unwrap();
    (tid, s.stop().unwrap())
}

pub fn capture(syscalls: &str, work: impl FnOnce()) -> Captured {
    let mut cfg = Config::new(parse_syscalls(syscalls).unwrap());
    cfg.pid = Some(std::process::id());
    capture_with(cfg, work)
}

/// Exactly one event named `name` from this thread; panics otherwise.
pub fn only<'a>(c: &'a Captured, name: &str) -> SyscallEvent<'a> {
    let mut v = c.named(gettid(), name);
    assert_eq!(v.len(), 1, "expected one {name} event from this thread, got {}", v.len());
    v.remove(0)
}

// ---- Helpers for the per-syscall tests (syscalls_*.rs) ----

/// An integer parameter; panics if the event lacks it.
pub fn int(e: &SyscallEvent, name: &str) -> i64 {
    e.param(name)
        .and_then(|v| v.as_i64())
        .unwrap_or_else(|| panic!("{}: no integer param {name}: {:?}", e.syscall.name, e.params))
}

/// A variable-length parameter's bytes; panics if the event lacks it.
pub fn bytes<'a>(e: &'a SyscallEvent, name: &str) -> &'a [u8] {
    e.param(name)
        .and_then(|v| v.as_bytes())
        .unwrap_or_else(|| panic!("{}: no bytes param {name}: {:?}", e.syscall.name, e.params))
}

/// A path/text parameter as a string.
pub fn text(e: &SyscallEvent, name: &str) -> String {
    String::from_utf8_lossy(bytes(e, name)).into_owned()
}

/// The rendered names of a flag/enum parameter, as `harrier capture --json` prints them.
pub fn names(e: &SyscallEvent, name: &str) -> String {
    let j = e.to_json(0, "", 0);
    j[format!("{name}_names")]
        .as_str()
        .unwrap_or_else(|| panic!("{}: no {name}_names in {j}", e.syscall.name))
        .to_string()
}

/// What a raw syscall returned, the way the kernel (and the event) reports it:
/// the value, or -errno.
pub fn kret(r: libc::c_long) -> i64 {
    if r == -1 {
        -(std::io::Error::last_os_error().raw_os_error().unwrap() as i64)
    } else {
        r
    }
}

pub fn cstr(s: &str) -> std::ffi::CString {
    std::ffi::CString::new(s).unwrap()
}

/// A C string's address, as a raw syscall's argument.
pub fn cptr(s: &std::ffi::CString) -> i64 {
    s.as_ptr() as i64
}

/// AT_FDCWD as a raw syscall's argument.
pub const AT_FDCWD64: i64 = libc::AT_FDCWD as i64;

/// A fresh directory under the temp dir, unique per process and thread,
/// removed with everything in it when dropped.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        TempDir::under(&std::env::temp_dir(), tag)
    }

    /// One under `root` (a test that needs a short path: /tmp, whatever TMPDIR says).
    pub fn under(root: &std::path::Path, tag: &str) -> TempDir {
        let p = root.join(format!("harrier-{tag}-{}-{}", std::process::id(), gettid()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    /// `name` inside the directory, as a string for C calls.
    pub fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Events named `name` from thread `tid`, in time order: the rings are per
/// CPU, so a thread that migrated between two calls has them in two rings,
/// and ring order is not call order.
pub fn named_in_order<'a>(c: &'a Captured, tid: u32, name: &str) -> Vec<SyscallEvent<'a>> {
    let mut v = c.named(tid, name);
    v.sort_by_key(|e| e.header.ts);
    v
}

/// Exactly `n` events named `name` from this thread, in order.
pub fn exactly<'a>(c: &'a Captured, name: &str, n: usize) -> Vec<SyscallEvent<'a>> {
    let v = named_in_order(c, gettid(), name);
    assert_eq!(v.len(), n, "expected {n} {name} events from this thread, got {v:#?}");
    v
}

/// Asserts an event's return value and integer parameters.
pub fn expect(e: &SyscallEvent, ret: i64, ints: &[(&str, i64)]) {
    assert_eq!(e.ret, ret, "{} ret: {e:?}", e.syscall.name);
    for &(name, want) in ints {
        assert_eq!(int(e, name), want, "{} param {name}: {e:?}", e.syscall.name);
    }
}

/// A raw syscall with exactly these arguments (pointers passed `as i64`),
/// returning what the kernel returned: the value or -errno.
pub fn sys(nr: libc::c_long, args: &[i64]) -> i64 {
    let mut a = [0i64; 6];
    a[..args.len()].copy_from_slice(args);
    kret(unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) })
}

/// Syscall `name`'s number.
pub fn nr(name: &str) -> u32 {
    harrier_schema::syscall_by_name(name).unwrap().nr
}

/// A capture of `work`, which is handed the session's untold record, this
/// process followed.
pub fn capture_followed(alone: &Alone, cfg: Config, work: impl FnOnce(&UntoldFds)) -> Captured {
    capture_named(alone, cfg, &[], work)
}

/// A test that follows this process holds this for its whole run, set-up and
/// sinks included. Its threads share the process's untold record and fd
/// numbers: a number another test's thread takes between a close and its
/// exit makes that close sent (the exit sees the number held again), and a
/// session another test starts opens fds of its own.
pub struct Alone(#[allow(dead_code)] std::sync::MutexGuard<'static, ()>);

pub fn alone() -> Alone {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    Alone(ONE.lock().unwrap_or_else(|e| e.into_inner()))
}

/// As capture_followed, with `named` the addresses of the rules' names (kf_peers).
pub fn capture_named(
    _alone: &Alone,
    cfg: Config,
    named: &[std::net::IpAddr],
    work: impl FnOnce(&UntoldFds),
) -> Captured {
    let events = Rc::new(RefCell::new(Vec::new()));
    let sink = events.clone();
    let mut s = Session::start(&cfg, Box::new(move |b| sink.borrow_mut().push(b.to_vec()))).unwrap();
    let peers = s.named_peers().unwrap().expect("the kernel filter is on");
    peers.set(named).unwrap();
    assert_eq!(peers.get(), named, "kf_peers holds the names' addresses");
    let untold = s.untold_fds().unwrap().expect("the kernel filter is on");
    assert!(untold.follow(std::process::id()), "the record is written");
    // The session's set-up may close an fd on this thread after close is
    // attached (the 6.12 guest saw one, once): closes_sent counts from here.
    assert_eq!(unsafe { libc::close(WORK_STARTS) }, -1, "close({WORK_STARTS}) fails and is sent");
    work(&untold);
    untold.forget(std::process::id());
    s.drain().unwrap();
    let stats = s.stop().unwrap();
    Captured { events: Rc::try_unwrap(events).unwrap().into_inner(), stats }
}

pub fn close(fd: i32) {
    assert_eq!(unsafe { libc::close(fd) }, 0, "close {fd}");
}

/// The fd of the close that marks where a capture's work starts.
const WORK_STARTS: i32 = -1;

/// The closes thread tid's work sent (after capture_named's marker, if any).
pub fn closes_sent(c: &Captured, tid: u32) -> Vec<i64> {
    let all: Vec<i64> = c.named(tid, "close").iter().map(|e| int(e, "fd")).collect();
    let from = all.iter().rposition(|&fd| fd == WORK_STARTS as i64).map_or(0, |i| i + 1);
    all[from..].to_vec()
}
