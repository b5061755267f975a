//! The redis-workload syscalls: time, sleep, epoll and getpid.
//! Raw syscalls, so the vDSO cannot answer gettimeofday/clock_gettime
//! without entering the kernel.

mod common;

use harrier_capture::AttachMode::{self, Dispatcher, PerSyscall};
use test_case::test_case;

use common::*;
use harrier_schema::decode::{decode, Event};
use libc::{EBADF, EEXIST, EFAULT, EINVAL, ENOENT};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Never an open descriptor: far above any fd table.
const BADFD: i64 = 1_000_000;

/// Lengths of this thread's raw `name` events, as they came off the ring.
fn raw_lengths(c: &Captured, name: &str) -> Vec<usize> {
    let tid = gettid();
    c.events
        .iter()
        .filter(
            |b| matches!(decode(b), Ok(Event::Syscall(e)) if e.header.tid == tid && e.syscall.name == name),
        )
        .map(|b| b.len())
        .collect()
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn getpid_is_a_bare_24_byte_event(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let mut pid = 0;
    let c = capture("getpid", || pid = sys(libc::SYS_getpid, &[]));
    assert_eq!(pid, std::process::id() as i64);
    let e = only(&c, "getpid");
    assert_eq!(e.ret, pid);
    assert!(e.params.is_empty(), "getpid has no parameters: {:?}", e.params);
    assert_eq!(raw_lengths(&c, "getpid"), [24], "header + return value only");
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn gettimeofday_and_clock_gettime(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    let mut tv: libc::timeval = unsafe { std::mem::zeroed() };
    let (tsp, tvp) = (&mut ts as *mut _ as i64, &mut tv as *mut _ as i64);
    let mono = libc::CLOCK_MONOTONIC as i64;
    let c = capture("gettimeofday,clock_gettime", || {
        sys(libc::SYS_gettimeofday, &[tvp, 0]);
        sys(libc::SYS_gettimeofday, &[1, 0]); // an unmapped address
        sys(libc::SYS_clock_gettime, &[mono, tsp]);
        sys(libc::SYS_clock_gettime, &[9999, tsp]);
    });
    assert!(tv.tv_sec > 0 && ts.tv_sec > 0, "the calls did run");
    let e = exactly(&c, "gettimeofday", 2);
    assert_eq!((e[0].ret, e[1].ret), (0, -EFAULT as i64));
    assert!(e[0].params.is_empty());
    assert_eq!(raw_lengths(&c, "gettimeofday"), [24, 24]);

    let e = exactly(&c, "clock_gettime", 2);
    expect(&e[0], 0, &[("clockid", mono)]);
    assert_eq!(names(&e[0], "clockid"), "CLOCK_MONOTONIC");
    expect(&e[1], -EINVAL as i64, &[("clockid", 9999)]);
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn clock_nanosleep_relative_absolute_and_invalid(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let short = libc::timespec { tv_sec: 0, tv_nsec: 1_000_000 };
    let past = libc::timespec { tv_sec: 1, tv_nsec: 0 };
    let bad = libc::timespec { tv_sec: 0, tv_nsec: 2_000_000_000 };
    let p = |t: &libc::timespec| t as *const _ as i64;
    let (mono, real) = (libc::CLOCK_MONOTONIC as i64, libc::CLOCK_REALTIME as i64);
    let abstime = libc::TIMER_ABSTIME as i64;
    let c = capture("clock_nanosleep", || {
        sys(libc::SYS_clock_nanosleep, &[mono, 0, p(&short), 0]);
        // An absolute time long past returns at once.
        sys(libc::SYS_clock_nanosleep, &[real, abstime, p(&past), 0]);
        sys(libc::SYS_clock_nanosleep, &[mono, 0, p(&bad), 0]);
    });
    let e = exactly(&c, "clock_nanosleep", 3);
    expect(&e[0], 0, &[("clockid", mono), ("flags", 0)]);
    expect(&e[1], 0, &[("clockid", real), ("flags", abstime)]);
    assert_eq!(names(&e[1], "clockid"), "CLOCK_REALTIME");
    expect(&e[2], -EINVAL as i64, &[("clockid", mono), ("flags", 0)]);
}

/// A pipe: (read end, write end), closed on drop.
fn pipe() -> (OwnedFd, OwnedFd) {
    let mut p = [0; 2];
    assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) }
}

fn raw(fd: &OwnedFd) -> i64 {
    fd.as_raw_fd() as i64
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn epoll_ctl_and_epoll_wait(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    assert!(ep >= 0);
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    let (a, b) = (pipe(), pipe());
    let (epfd, ar, aw, br, bw) = (raw(&ep), raw(&a.0), raw(&a.1), raw(&b.0), raw(&b.1));
    let edge_in = (libc::EPOLLIN | libc::EPOLLET) as u32;
    let ev = libc::epoll_event { events: edge_in, u64: 7 };
    let evp = &ev as *const _ as i64;
    let mut ready = [libc::epoll_event { events: 0, u64: 0 }; 8];
    let rp = ready.as_mut_ptr() as i64;
    let (add, del) = (libc::EPOLL_CTL_ADD as i64, libc::EPOLL_CTL_DEL as i64);
    let c = capture("epoll_ctl,epoll_wait", || {
        sys(libc::SYS_epoll_ctl, &[epfd, add, ar, evp]);
        sys(libc::SYS_epoll_ctl, &[epfd, add, br, evp]);
        sys(libc::SYS_epoll_ctl, &[epfd, add, ar, evp]);
        sys(libc::SYS_epoll_ctl, &[epfd, del, aw, evp]);
        sys(libc::SYS_write, &[aw, b"x".as_ptr() as i64, 1]);
        sys(libc::SYS_write, &[bw, b"x".as_ptr() as i64, 1]);
        sys(libc::SYS_epoll_wait, &[epfd, rp, 8, 0]);
        // Edge-triggered: both were reported, nothing is new; waits 5 ms.
        sys(libc::SYS_epoll_wait, &[epfd, rp, 8, 5]);
        sys(libc::SYS_epoll_wait, &[epfd, rp, 0, 0]);
        sys(libc::SYS_epoll_wait, &[BADFD, rp, 8, 0]);
    });
    let events = edge_in as i64;
    let e = exactly(&c, "epoll_ctl", 4);
    expect(&e[0], 0, &[("epfd", epfd), ("op", add), ("fd", ar), ("events", events)]);
    assert_eq!(names(&e[0], "op"), "EPOLL_CTL_ADD");
    assert_eq!(names(&e[0], "events"), "EPOLLIN|EPOLLET");
    expect(&e[1], 0, &[("epfd", epfd), ("op", add), ("fd", br), ("events", events)]);
    expect(&e[2], -EEXIST as i64, &[("epfd", epfd), ("op", add), ("fd", ar), ("events", events)]);
    expect(&e[3], -ENOENT as i64, &[("epfd", epfd), ("op", del), ("fd", aw), ("events", events)]);

    let e = exactly(&c, "epoll_wait", 4);
    expect(&e[0], 2, &[("epfd", epfd), ("maxevents", 8), ("timeout", 0)]);
    expect(&e[1], 0, &[("epfd", epfd), ("maxevents", 8), ("timeout", 5)]);
    expect(&e[2], -EINVAL as i64, &[("epfd", epfd), ("maxevents", 0), ("timeout", 0)]);
    expect(&e[3], -EBADF as i64, &[("epfd", BADFD), ("maxevents", 8), ("timeout", 0)]);
}
