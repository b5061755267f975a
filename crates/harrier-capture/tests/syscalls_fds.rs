//! The descriptor-making syscalls the state engine tracks (schema v3): the
//! fd numbers, including those the kernel writes to user memory (pipe,
//! pipe2, socketpair), and the task fields execve does not take from its
//! arguments.

mod common;
use common::*;

fn close(fds: &[i64]) {
    for &fd in fds {
        sys(libc::SYS_close, &[fd]);
    }
}

#[test]
fn pipes_and_socketpairs_report_both_fds() {
    if !bpf_available() {
        return;
    }
    let mut p = [0i32; 2];
    let mut p2 = [0i32; 2];
    let mut sp = [0i32; 2];
    let (mut r1, mut r2, mut r3, mut bad) = (0, 0, 0, 0);
    let c = capture("pipe,pipe2,socketpair", || {
        r1 = sys(libc::SYS_pipe, &[p.as_mut_ptr() as i64]);
        r2 = sys(libc::SYS_pipe2, &[p2.as_mut_ptr() as i64, libc::O_CLOEXEC as i64]);
        r3 = sys(
            libc::SYS_socketpair,
            &[libc::AF_UNIX as i64, libc::SOCK_STREAM as i64, 0, sp.as_mut_ptr() as i64],
        );
        bad = sys(libc::SYS_pipe2, &[p2.as_mut_ptr() as i64, -1]);
    });
    assert_eq!((r1, r2, r3), (0, 0, 0));
    expect(&only(&c, "pipe"), 0, &[("fd0", p[0] as i64), ("fd1", p[1] as i64)]);
    let e = exactly(&c, "pipe2", 2);
    expect(&e[0], 0, &[("fd0", p2[0] as i64), ("fd1", p2[1] as i64), ("flags", libc::O_CLOEXEC as i64)]);
    assert_eq!(names(&e[0], "flags"), "O_RDONLY|O_CLOEXEC");
    assert_eq!(e[1].ret, bad, "a failed pipe2 is reported with its error");
    assert!(bad < 0);
    let s = only(&c, "socketpair");
    expect(&s, 0, &[("fd0", sp[0] as i64), ("fd1", sp[1] as i64), ("domain", libc::AF_UNIX as i64)]);
    close(&[p[0], p[1], p2[0], p2[1], sp[0], sp[1]].map(|f| f as i64));
}

#[test]
fn anonymous_inode_fds_are_typed() {
    if !bpf_available() {
        return;
    }
    let name = cstr("harrier-memfd");
    let mut fds = Vec::new();
    let c = capture(
        "memfd_create,eventfd2,timerfd_create,inotify_init1,epoll_create1,signalfd4,close_range",
        || {
            fds.push(sys(libc::SYS_memfd_create, &[name.as_ptr() as i64, libc::MFD_CLOEXEC as i64]));
            fds.push(sys(libc::SYS_eventfd2, &[7, libc::EFD_CLOEXEC as i64]));
            fds.push(sys(libc::SYS_timerfd_create, &[libc::CLOCK_MONOTONIC as i64, 0]));
            fds.push(sys(libc::SYS_inotify_init1, &[0]));
            fds.push(sys(libc::SYS_epoll_create1, &[0]));
            let mask = 0u64;
            fds.push(sys(libc::SYS_signalfd4, &[-1, &mask as *const u64 as i64, 8, 0]));
            // One fd per close_range: other tests' threads share this fd table,
            // and a range [min, max] would close their fds too (it closed a
            // sensor's BPF program fd mid-attach: EBADF/EINVAL in CI).
            close(&fds[..5]);
            let last = fds[5];
            assert_eq!(sys(libc::SYS_close_range, &[last, last, 0]), 0);
        },
    );
    assert!(fds.iter().all(|&f| f >= 0), "{fds:?}");
    let m = only(&c, "memfd_create");
    expect(&m, fds[0], &[("flags", libc::MFD_CLOEXEC as i64)]);
    assert_eq!(text(&m, "name"), "harrier-memfd");
    expect(&only(&c, "eventfd2"), fds[1], &[("initval", 7)]);
    expect(&only(&c, "timerfd_create"), fds[2], &[("clockid", libc::CLOCK_MONOTONIC as i64)]);
    expect(&only(&c, "inotify_init1"), fds[3], &[]);
    expect(&only(&c, "epoll_create1"), fds[4], &[]);
    expect(&only(&c, "signalfd4"), fds[5], &[("fd", -1)]);
    expect(&only(&c, "close_range"), 0, &[("first", fds[5]), ("last", fds[5])]);
}
