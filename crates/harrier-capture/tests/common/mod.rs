//! Shared by the BPF integration tests: run a workload under a real sensor
//! and collect what it reported.
#![allow(dead_code)]

use harrier_capture::{parse_syscalls, Config, Session, Stats};
use harrier_schema::decode::{decode, Event, SyscallEvent};
use std::cell::RefCell;
use std::rc::Rc;

/// BPF tests need root. Outside CI a non-root run skips them with a note;
/// under CI=true a missing privilege is a failure, never a silent skip.
pub fn bpf_available() -> bool {
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true but not running as root: BPF tests cannot load");
    }
    eprintln!("note: not root, skipping a BPF test");
    false
}

pub fn gettid() -> u32 {
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Events as owned bytes, decoded on demand.
pub struct Captured {
    pub events: Vec<Vec<u8>>,
    pub stats: Stats,
}

impl Captured {
    /// Syscall events of one thread, in order.
    pub fn of_tid(&self, tid: u32) -> Vec<SyscallEvent<'_>> {
        self.events
            .iter()
            .filter_map(|b| match decode(b).expect("every event decodes") {
                Event::Syscall(e) if e.header.tid == tid => Some(e),
                _ => None,
            })
            .collect()
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

/// Captures `syscalls` for process `pid` (None: this process) while `work` runs.
pub fn capture_with(cfg: Config, work: impl FnOnce()) -> Captured {
    let events = Rc::new(RefCell::new(Vec::new()));
    let sink = events.clone();
    let mut s = Session::start(&cfg, Box::new(move |b| sink.borrow_mut().push(b.to_vec())))
        .expect("the sensor starts");
    work();
    s.drain().unwrap();
    let stats = s.stop().expect("the sensor stops");
    let events = Rc::try_unwrap(events).unwrap().into_inner();
    Captured { events, stats }
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
