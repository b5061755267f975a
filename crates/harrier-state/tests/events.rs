//! The state engine fed with synthetic events, as the sensor writes them.

use harrier_schema::decode::decode;
use harrier_state::testing::{exec, exit, fork, sockaddr_in as inet, syscall, P};
use harrier_state::{FdType, State, L4};

const ID: &str = "3f1c0e5a9b7d2e4f6a8c0b1d3e5f7a9c2b4d6e8f0a1c3e5b7d9f1a3c5e7b9d0f";
const CHILD: u32 = 4_000_001;

fn apply(s: &mut State, b: &[u8]) {
    s.apply(&decode(b).expect("test events decode"));
}

/// This test process, seeded from /proc, forks CHILD, which execs.
fn with_child() -> (State, u32) {
    let me = std::process::id();
    let mut s = State::new();
    s.scan_proc(Some(me));
    apply(&mut s, &fork(1, me, CHILD, CHILD, "sh"));
    apply(&mut s, &exec(2, CHILD, CHILD, "ls", &format!("/system.slice/docker-{ID}.scope")));
    let ev = syscall(
        3,
        CHILD,
        "execve",
        0,
        &[
            ("args", P::B(b"/bin/ls\0-l\0/tmp\0")),
            ("exe", P::B(b"/usr/bin/ls")),
            ("cwd", P::B(b"/srv")),
            ("uid", P::I(1000)),
            ("euid", P::I(1000)),
            ("loginuid", P::I(1000)),
            ("exe_flags", P::I(2)),
            ("cap_effective", P::I(0x20)),
            ("cap_permitted", P::I(0x220)),
            ("cap_inheritable", P::I(0x200)),
        ],
    );
    apply(&mut s, &ev);
    (s, me)
}

#[test]
fn fork_then_exec_fills_the_child() {
    let (s, me) = with_child();
    let p = s.process(CHILD).expect("the child is known");
    assert_eq!((p.pid, p.ppid, p.name()), (CHILD, me, "ls"));
    assert_eq!((&*p.exe, &*p.exepath, &*p.cwd), ("/bin/ls", "/usr/bin/ls", "/srv"));
    assert_eq!(p.args().collect::<Vec<_>>(), ["-l", "/tmp"]);
    assert_eq!((p.uid, p.euid, p.loginuid, p.cap_effective), (1000, 1000, 1000, 0x20));
    assert_eq!((p.cap_permitted, p.cap_inheritable), (0x220, 0x200));
    assert!(p.is_exe_from_memfd() && !p.is_exe_upper_layer());
    assert_eq!(p.container_id(), &ID[..12]);
    assert_eq!(p.container.as_ref().unwrap().runtime, "docker");
    let parent = s.ancestors(CHILD).next().expect("the parent");
    assert_eq!(parent.pid, me);
    assert_eq!(s.process(me).unwrap().container_id(), "host");
}

#[test]
fn descriptors_follow_open_dup_close_pipe_socket_and_exec() {
    let (mut s, _) = with_child();
    let open = syscall(
        4,
        CHILD,
        "openat",
        3,
        &[("path", P::B(b"../lib/x")), ("fullpath", P::B(b"/usr/lib/x")), ("flags", P::I(0))],
    );
    apply(&mut s, &open);
    apply(&mut s, &syscall(5, CHILD, "dup2", 7, &[("oldfd", P::I(3)), ("newfd", P::I(7))]));
    apply(&mut s, &syscall(6, CHILD, "close", 0, &[("fd", P::I(3))]));
    assert!(s.fd(CHILD, 3).is_none());
    let f = s.fd(CHILD, 7).expect("the dup");
    assert_eq!((&*f.name, f.directory(), f.filename(), f.typ), ("/usr/lib/x", "/usr/lib", "x", FdType::File));
    apply(
        &mut s,
        &syscall(7, CHILD, "pipe2", 0, &[("flags", P::I(0o2000000)), ("fd0", P::I(4)), ("fd1", P::I(5))]),
    );
    assert_eq!(s.fd(CHILD, 5).unwrap().typ, FdType::Pipe);
    apply(&mut s, &syscall(8, CHILD, "socket", 6, &[("domain", P::I(2)), ("type", P::I(1))]));
    let (local, peer) = (inet(40000, [10, 0, 0, 1]), inet(443, [93, 184, 216, 34]));
    apply(
        &mut s,
        &syscall(9, CHILD, "connect", 0, &[("fd", P::I(6)), ("local", P::B(&local)), ("peer", P::B(&peer))]),
    );
    let sock = s.fd(CHILD, 6).unwrap();
    let t = sock.tuple.as_ref().unwrap();
    assert_eq!((sock.typ, t.l4, t.sport, t.dport), (FdType::Ipv4, L4::Tcp, 40000, 443));
    assert_eq!(&*sock.name, "10.0.0.1:40000->93.184.216.34:443");
    apply(
        &mut s,
        &syscall(
            10,
            CHILD,
            "accept4",
            8,
            &[("fd", P::I(6)), ("flags", P::I(0o2000000)), ("peer", P::B(&peer)), ("local", P::B(&local))],
        ),
    );
    // Accepted: the peer is the client, named first as Falco does.
    assert_eq!(&*s.fd(CHILD, 8).unwrap().name, "93.184.216.34:443->10.0.0.1:40000");
    // exec drops the close-on-exec ones (the pipe, the accepted socket).
    apply(&mut s, &exec(11, CHILD, CHILD, "true", "/"));
    assert!(s.fd(CHILD, 4).is_none() && s.fd(CHILD, 5).is_none() && s.fd(CHILD, 8).is_none());
    assert!(s.fd(CHILD, 7).is_some() && s.fd(CHILD, 6).is_some());
    assert_eq!(s.process(CHILD).unwrap().container_id(), "host", "exec'd in the root cgroup");
}

#[test]
fn threads_share_the_process_and_exits_free_it_one_batch_late() {
    let (mut s, _) = with_child();
    let thread = CHILD + 1;
    apply(&mut s, &fork(4, CHILD, thread, CHILD, "ls"));
    apply(&mut s, &syscall(5, thread, "openat", 9, &[("fullpath", P::B(b"/etc/passwd"))]));
    assert_eq!(&*s.fd(CHILD, 9).unwrap().name, "/etc/passwd", "threads share one fd table");
    assert_eq!(s.process(thread).unwrap().pid, CHILD);
    apply(&mut s, &exit(6, thread, CHILD));
    apply(&mut s, &exit(7, CHILD, CHILD));
    s.end_batch();
    assert!(s.process(CHILD).is_some(), "kept for one more batch");
    s.end_batch();
    assert!(s.process(CHILD).is_none() && s.process(thread).is_none());
    assert_eq!(s.stats.processes_freed, 1);
}

#[test]
fn a_forked_child_gets_a_copy_of_the_fds_and_setuid_updates_creds() {
    let (mut s, _) = with_child();
    apply(&mut s, &syscall(4, CHILD, "openat", 3, &[("fullpath", P::B(b"/a"))]));
    apply(&mut s, &fork(5, CHILD, CHILD + 10, CHILD + 10, "ls"));
    apply(&mut s, &syscall(6, CHILD + 10, "close", 0, &[("fd", P::I(3))]));
    assert!(s.fd(CHILD + 10, 3).is_none());
    assert!(s.fd(CHILD, 3).is_some(), "the parent's table is its own");
    apply(
        &mut s,
        &syscall(
            7,
            CHILD + 10,
            "setresuid",
            0,
            &[
                ("cur_uid", P::I(0)),
                ("cur_euid", P::I(0)),
                ("cur_cap_effective", P::I(-1)),
                ("cur_cap_permitted", P::I(-1)),
            ],
        ),
    );
    let c = s.process(CHILD + 10).unwrap();
    assert_eq!((c.uid, c.euid, c.cap_effective, c.cap_permitted), (0, 0, u64::MAX, u64::MAX));
    apply(
        &mut s,
        &syscall(
            8,
            CHILD + 10,
            "setsid",
            77,
            &[("cur_sid", P::I(CHILD as i64 + 10)), ("cur_vpgid", P::I(77))],
        ),
    );
    let c = s.process(CHILD + 10).unwrap();
    assert_eq!((c.sid, c.vpgid), (CHILD + 10, 77));
    let names: Vec<_> = s.ancestors(CHILD + 10).map(|p| p.pid).take(2).collect();
    assert_eq!(names, [CHILD, std::process::id()]);
}

#[test]
fn users_and_groups_resolve() {
    let mut s = State::new();
    assert_eq!(&*s.users.user(0).unwrap().name, "root");
    assert_eq!(s.users.group(0), Some("root"));
}

/// Falco's fd.name_changed: a connect renames its socket, a datagram to a new
/// destination renames a UDP socket, the same destination again does not, and
/// a TCP socket keeps its peer whatever sendto names.
#[test]
fn fd_name_changed_follows_connect_and_datagram_destinations() {
    let (mut s, _) = with_child();
    apply(&mut s, &syscall(4, CHILD, "socket", 3, &[("domain", P::I(2)), ("type", P::I(2))]));
    let dns = inet(53, [8, 8, 8, 8]);
    let send = |n: u64, name: &str, fd: i64, a: &[u8]| {
        syscall(n, CHILD, name, 12, &[("fd", P::I(fd)), ("size", P::I(12)), ("addr", P::B(a))])
    };
    apply(&mut s, &send(5, "sendto", 3, &dns));
    assert!(s.fd_name_changed, "first destination");
    assert_eq!(&*s.fd(CHILD, 3).unwrap().name, "0.0.0.0:0->8.8.8.8:53");
    assert_eq!(s.fd(CHILD, 3).unwrap().tuple.as_ref().unwrap().l4, L4::Udp);
    apply(&mut s, &send(6, "sendto", 3, &dns));
    assert!(!s.fd_name_changed, "same destination");
    let other = inet(53, [1, 1, 1, 1]);
    assert!(s.apply_send(CHILD, 3, &other), "a new destination, applied from the view");
    assert!(!s.apply_send(CHILD, 3, &other), "and again");
    apply(&mut s, &send(7, "sendmsg", 3, &dns));
    assert!(s.fd_name_changed, "sendmsg's destination");
    apply(&mut s, &syscall(8, CHILD, "getpid", 0, &[]));
    assert!(!s.fd_name_changed, "an event that names no fd");

    apply(&mut s, &syscall(9, CHILD, "socket", 4, &[("domain", P::I(2)), ("type", P::I(1))]));
    let (local, peer) = (inet(40000, [10, 0, 0, 1]), inet(443, [93, 184, 216, 34]));
    let connect =
        syscall(10, CHILD, "connect", 0, &[("fd", P::I(4)), ("local", P::B(&local)), ("peer", P::B(&peer))]);
    apply(&mut s, &connect);
    assert!(s.fd_name_changed, "connect names the socket");
    apply(&mut s, &send(11, "sendto", 4, &dns));
    assert!(!s.fd_name_changed, "a connected TCP socket keeps its peer");
    assert_eq!(&*s.fd(CHILD, 4).unwrap().name, "10.0.0.1:40000->93.184.216.34:443");
    let again =
        syscall(12, CHILD, "connect", 0, &[("fd", P::I(4)), ("local", P::B(&local)), ("peer", P::B(&peer))]);
    apply(&mut s, &again);
    assert!(!s.fd_name_changed, "the same tuple again");
}

/// Records what a ProcessWatcher is told; refuses `full` once it holds that many.
struct Told(std::rc::Rc<std::cell::RefCell<Vec<(bool, u32)>>>, usize);

impl harrier_state::ProcessWatcher for Told {
    fn followed(&mut self, pid: u32) -> bool {
        let mut v = self.0.borrow_mut();
        let held = v.iter().filter(|e| e.0).count() - v.iter().filter(|e| !e.0).count();
        v.push((true, pid));
        held < self.1
    }

    fn forgotten(&mut self, pid: u32) {
        self.0.borrow_mut().push((false, pid));
    }
}

#[test]
fn the_watcher_hears_of_each_table_made_and_freed() {
    let me = std::process::id();
    let told = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let mut s = State::new();
    s.set_watcher(Box::new(Told(told.clone(), 2)));
    s.scan_proc(Some(me));
    apply(&mut s, &fork(1, me, CHILD, CHILD, "sh"));
    apply(&mut s, &fork(2, CHILD, CHILD + 1, CHILD, "sh")); // a thread: no table of its own
    apply(&mut s, &fork(3, CHILD, CHILD + 2, CHILD + 2, "sh"));
    assert_eq!(*told.borrow(), [(true, me), (true, CHILD), (true, CHILD + 2)]);
    assert_eq!(s.stats.unwatched, 1, "the third did not fit");
    for (ts, tid) in [(4, CHILD + 1), (5, CHILD)] {
        apply(&mut s, &exit(ts, tid, CHILD));
    }
    s.end_batch();
    s.end_batch();
    assert_eq!(told.borrow().last(), Some(&(false, CHILD)), "freed with its last thread");
}

/// events.tbl's socktype: family, type, protocol, fd flags (u16 each).
fn socktype(family: u16, typ: u16, protocol: u16, fd_flags: u16) -> Vec<u8> {
    [family, typ, protocol, fd_flags].iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[test]
fn a_socket_never_seen_is_made_from_its_connect_or_dup() {
    let (mut s, _) = with_child();
    let (local, peer) = (inet(40000, [10, 0, 0, 1]), inet(53, [10, 0, 0, 2]));
    // The kernel filter kept socket() back: the connect says what fd 6 is.
    let sock = socktype(2, 2, 17, 1);
    let args = [("fd", P::I(906)), ("local", P::B(&local)), ("peer", P::B(&peer)), ("sock", P::B(&sock))];
    apply(&mut s, &syscall(4, CHILD, "connect", 0, &args));
    let f = s.fd(CHILD, 906).expect("made from the connect");
    let t = f.tuple.as_ref().unwrap();
    assert_eq!((f.typ, t.l4, t.dport, f.cloexec), (FdType::Ipv4, L4::Udp, 53, true));
    assert_eq!(&*f.name, "10.0.0.1:40000->10.0.0.2:53");
    assert_eq!(s.stats.unknown_fds, 0);
    // A dup of another such socket: the new fd is made from the dup's description.
    let sock = socktype(2, 1, 6, 0);
    let args = [
        ("oldfd", P::I(909)),
        ("newfd", P::I(1)),
        ("local", P::B(&local)),
        ("peer", P::B(&peer)),
        ("sock", P::B(&sock)),
    ];
    apply(&mut s, &syscall(5, CHILD, "dup2", 1, &args));
    let f = s.fd(CHILD, 1).expect("made from the dup");
    assert_eq!((f.typ, f.tuple.as_ref().unwrap().l4, f.cloexec), (FdType::Ipv4, L4::Tcp, false));
    assert!(s.fd(CHILD, 909).is_none(), "the old fd stays unknown (its close is kept back too)");
    // Without a description (a file never told of), what the new fd held is gone.
    apply(&mut s, &syscall(6, CHILD, "dup2", 1, &[("oldfd", P::I(910)), ("newfd", P::I(1))]));
    assert!(s.fd(CHILD, 1).is_none(), "dup2 replaced fd 1");
    assert_eq!(s.stats.unknown_fds, 1);
    // A failed connect with no description (no socket) makes nothing, nor counts.
    apply(&mut s, &syscall(7, CHILD, "connect", -88, &[("fd", P::I(911)), ("peer", P::B(&peer))]));
    assert!(s.fd(CHILD, 911).is_none());
    assert_eq!(s.stats.unknown_fds, 1);
    // A refused one still says what its socket is: the entry, without addresses.
    let sock = socktype(2, 1, 6, 0);
    let args = [("fd", P::I(912)), ("addr", P::B(&peer)), ("sock", P::B(&sock))];
    apply(&mut s, &syscall(8, CHILD, "connect", -111, &args));
    let f = s.fd(CHILD, 912).expect("made from the failed connect");
    assert_eq!(
        (f.typ, f.tuple.as_ref().unwrap().l4, f.tuple.as_ref().unwrap().dport),
        (FdType::Ipv4, L4::Tcp, 0)
    );
}
