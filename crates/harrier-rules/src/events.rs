//! Event types as rules see them (`evt.type`): every syscall of this machine's table by its
//! name and number, plus Falco's pseudo events, which Harrier numbers from [`PSEUDO_BASE`].

use harrier_schema::{TextKind, SYSCALLS};
use std::sync::OnceLock;

/// An event type code: a syscall number, or `PSEUDO_BASE + k` for `PSEUDO_EVENTS[k]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventType(pub u16);

/// First code of the pseudo events.
pub const PSEUDO_BASE: u16 = 1024;
/// Falco event types that are not syscalls. `procexit` is a process's end (Harrier's
/// life-cycle exit event), `container` a container's start.
pub const PSEUDO_EVENTS: &[&str] =
    &["procexit", "container", "signaldeliver", "switch", "page_fault", "pluginevent"];
/// Number of event type codes (size of per-type tables).
pub const EVENT_TYPE_COUNT: usize = PSEUDO_BASE as usize + PSEUDO_EVENTS.len();

impl EventType {
    pub fn from_name(name: &str) -> Option<EventType> {
        if let Some(k) = PSEUDO_EVENTS.iter().position(|p| *p == name) {
            return Some(EventType(PSEUDO_BASE + k as u16));
        }
        harrier_schema::syscall_by_name(name).map(|s| EventType(s.nr as u16))
    }
    pub fn name(self) -> &'static str {
        if self.0 >= PSEUDO_BASE {
            return PSEUDO_EVENTS.get((self.0 - PSEUDO_BASE) as usize).copied().unwrap_or("unknown");
        }
        harrier_schema::syscall_by_nr(self.0 as u32).map(|s| s.name).unwrap_or("unknown")
    }
    /// A syscall (as opposed to a pseudo event).
    pub fn is_syscall(self) -> bool {
        self.0 < PSEUDO_BASE
    }
}

/// A set of event types, one bit per code.
#[derive(Clone, PartialEq, Eq)]
pub struct EventSet {
    bits: Box<[u64]>,
}

const WORDS: usize = EVENT_TYPE_COUNT.div_ceil(64);

impl std::fmt::Debug for EventSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_all() {
            return f.write_str("{all}");
        }
        f.debug_set().entries(self.iter().map(|e| e.name())).finish()
    }
}

impl EventSet {
    pub fn empty() -> EventSet {
        EventSet { bits: vec![0; WORDS].into() }
    }
    /// Every known event type.
    pub fn all() -> EventSet {
        static ALL: OnceLock<EventSet> = OnceLock::new();
        ALL.get_or_init(|| {
            let mut s = EventSet::empty();
            for sc in SYSCALLS {
                s.insert(EventType(sc.nr as u16));
            }
            for k in 0..PSEUDO_EVENTS.len() {
                s.insert(EventType(PSEUDO_BASE + k as u16));
            }
            s
        })
        .clone()
    }
    pub fn from_names(names: &[&str]) -> EventSet {
        let mut s = EventSet::empty();
        for n in names {
            if let Some(e) = EventType::from_name(n) {
                s.insert(e);
            }
        }
        s
    }
    pub fn insert(&mut self, e: EventType) {
        let i = e.0 as usize;
        if i < EVENT_TYPE_COUNT {
            self.bits[i / 64] |= 1 << (i % 64);
        }
    }
    pub fn remove(&mut self, e: EventType) {
        let i = e.0 as usize;
        if i < EVENT_TYPE_COUNT {
            self.bits[i / 64] &= !(1 << (i % 64));
        }
    }
    pub fn contains(&self, e: EventType) -> bool {
        let i = e.0 as usize;
        i < EVENT_TYPE_COUNT && self.bits[i / 64] & (1 << (i % 64)) != 0
    }
    pub fn union(&self, o: &EventSet) -> EventSet {
        EventSet { bits: self.bits.iter().zip(o.bits.iter()).map(|(a, b)| a | b).collect() }
    }
    pub fn intersect(&self, o: &EventSet) -> EventSet {
        EventSet { bits: self.bits.iter().zip(o.bits.iter()).map(|(a, b)| a & b).collect() }
    }
    /// Every known event type not in this set.
    pub fn complement(&self) -> EventSet {
        let all = EventSet::all();
        EventSet { bits: self.bits.iter().zip(all.bits.iter()).map(|(a, b)| !a & b).collect() }
    }
    pub fn is_empty(&self) -> bool {
        self.bits.iter().all(|w| *w == 0)
    }
    pub fn is_all(&self) -> bool {
        *self == EventSet::all()
    }
    pub fn len(&self) -> usize {
        self.bits.iter().map(|w| w.count_ones() as usize).sum()
    }
    pub fn iter(&self) -> impl Iterator<Item = EventType> + '_ {
        (0..EVENT_TYPE_COUNT)
            .filter(|i| self.bits[i / 64] & (1 << (i % 64)) != 0)
            .map(|i| EventType(i as u16))
    }
    /// The syscall names in the set (what to attach), pseudo events left out.
    pub fn syscall_names(&self) -> Vec<&'static str> {
        self.iter().filter(|e| e.is_syscall()).map(|e| e.name()).collect()
    }
}

/// Syscalls that return a new fd (their fd fields describe it).
const FD_CREATING: &[&str] = &[
    "open",
    "openat",
    "openat2",
    "creat",
    "socket",
    "accept",
    "accept4",
    "dup",
    "dup2",
    "dup3",
    "fcntl",
    "pipe",
    "pipe2",
    "memfd_create",
    "socketpair",
    "eventfd",
    "eventfd2",
    "signalfd",
    "signalfd4",
    "timerfd_create",
    "inotify_init",
    "inotify_init1",
    "epoll_create",
    "epoll_create1",
    "userfaultfd",
    "bpf",
    "perf_event_open",
    "pidfd_open",
    "open_by_handle_at",
    "fanotify_init",
    "io_uring_setup",
];
const NET: &[&str] = &[
    "socket",
    "connect",
    "accept",
    "accept4",
    "bind",
    "listen",
    "sendto",
    "recvfrom",
    "sendmsg",
    "recvmsg",
    "shutdown",
    "setsockopt",
    "getsockopt",
    "socketpair",
    "getsockname",
    "getpeername",
    "sendmmsg",
    "recvmmsg",
];
const OPENS: &[&str] = &["open", "openat", "openat2", "creat", "open_by_handle_at"];

/// Events with an fd argument or that create an fd.
pub fn fd_events() -> &'static EventSet {
    static S: OnceLock<EventSet> = OnceLock::new();
    S.get_or_init(|| {
        let mut s = EventSet::from_names(FD_CREATING);
        for sc in SYSCALLS {
            if let Some(params) = sc.params {
                if params.iter().any(|p| p.text == TextKind::Fd && matches!(p.name, "fd" | "oldfd")) {
                    s.insert(EventType(sc.nr as u16));
                }
            }
        }
        s
    })
}

/// Events that name a file: opens and every typed syscall with a path parameter.
pub fn file_events() -> &'static EventSet {
    static S: OnceLock<EventSet> = OnceLock::new();
    S.get_or_init(|| {
        let mut s = EventSet::from_names(OPENS);
        for sc in SYSCALLS {
            if let Some(params) = sc.params {
                if params.iter().any(|p| p.text == TextKind::Path) {
                    s.insert(EventType(sc.nr as u16));
                }
            }
        }
        s
    })
}

pub fn net_events() -> &'static EventSet {
    static S: OnceLock<EventSet> = OnceLock::new();
    S.get_or_init(|| EventSet::from_names(NET))
}

/// The open-style events (evt.is_open_*).
pub fn open_events() -> EventSet {
    EventSet::from_names(OPENS)
}

/// Events that have the parameter Falco calls `falco_name` (`evt.arg.flags`). Untyped
/// syscalls carry raw arguments only, so they have no named parameters.
pub fn param_events(falco_name: &str) -> EventSet {
    let name = crate::fields::harrier_param_name(falco_name);
    let mut s = EventSet::empty();
    for sc in SYSCALLS {
        // Falco's own parameter list where it is mapped: exactly its names.
        if let Some(ps) = harrier_schema::falco_params::params(sc.name) {
            if ps.iter().any(|p| p.name == falco_name) {
                s.insert(EventType(sc.nr as u16));
            }
            continue;
        }
        let Some(params) = sc.params else { continue };
        let has = name == "ret"
            || params.iter().any(|p| p.name == name)
            || (name == "flags" && params.iter().any(|p| p.name == "exe_flags"))
            || (falco_name == "fd" && FD_CREATING.contains(&sc.name));
        if has {
            s.insert(EventType(sc.nr as u16));
        }
    }
    s
}
