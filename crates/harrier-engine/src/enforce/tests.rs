//! The wait for the kernel's verdict: a log the guard writes after user
//! space read the event is still the verdict; no wait where it cannot come.

use super::*;
use std::cell::Cell;
use std::rc::Rc;

const TS: u64 = 1_000;

/// One kill rule the kernel decides on openat; the log answers `log(n)` at
/// its n-th lookup (counted in the returned cell).
fn enforcer(log: impl Fn(u32) -> Option<LogEntry> + 'static) -> (Enforcer, Rc<Cell<u32>>) {
    let decision = Decision { rule: "r".into(), syscalls: vec!["openat"], ..Default::default() };
    let mut en = Enforcer::new(1, &[(0, Action::Kill)], vec![decision], Exempt::default(), 100);
    let lookups = Rc::new(Cell::new(0));
    let n = lookups.clone();
    en.set_kernel_log(Box::new(move |_| {
        n.set(n.get() + 1);
        log(n.get())
    }));
    (en, lookups)
}

fn killed_at(ts: u64) -> Option<LogEntry> {
    Some(LogEntry { ts, acted_ns: ts + 7, rule: 0, outcome: Outcome::Killed, err: 0 })
}

/// A thread no process has: a kill from user space finds it gone.
fn target() -> Target<'static> {
    Target { tid: u32::MAX, pid: u32::MAX, comm: b"gone", uid: None }
}

fn act(en: &mut Enforcer, ty: &str) -> Done {
    en.act(0, &target(), EventType::from_name(ty).unwrap(), TS, TS).unwrap()
}

#[test]
fn a_verdict_logged_after_the_event_was_read_is_the_kernels() {
    let (mut en, lookups) = enforcer(|n| if n < 3 { None } else { killed_at(TS) });
    let done = act(&mut en, "openat");
    assert_eq!((done.action, done.by, done.latency_ns), ("killed", "kernel", 7), "{done:?}");
    assert_eq!(lookups.get(), 3);
    assert_eq!(en.counts[0].kernel_late, 0);
}

#[test]
fn no_wait_on_an_event_type_the_kernel_does_not_decide() {
    let (mut en, lookups) = enforcer(|n| if n < 3 { None } else { killed_at(TS) });
    let done = act(&mut en, "execve");
    assert_eq!((done.action, done.by, done.detail.as_str()), ("failed", "user space", "already gone"));
    assert_eq!(lookups.get(), 1);
    assert_eq!(en.counts[0].kernel_late, 0, "no verdict was due");
}

#[test]
fn no_wait_once_the_thread_logged_a_later_event() {
    let (mut en, lookups) = enforcer(|_| killed_at(TS + 1));
    let done = act(&mut en, "openat");
    assert_eq!((done.action, done.by), ("failed", "user space"), "{done:?}");
    assert_eq!(lookups.get(), 1);
}

#[test]
fn a_verdict_that_never_comes_is_left_to_user_space() {
    let (mut en, lookups) = enforcer(|_| None);
    let done = act(&mut en, "openat");
    assert_eq!((done.action, done.by), ("failed", "user space"), "{done:?}");
    assert!(lookups.get() > 1, "it did not wait");
    assert_eq!(en.counts[0].kernel_late, 1, "a late verdict is counted");
    assert_eq!(en.sample()[0].1[5], 1);
}
