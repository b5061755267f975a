//! Per-event work on existing entries and lookups allocate nothing.

use harrier_schema::decode::decode;
use harrier_state::testing::{fork, sockaddr_in as inet, syscall, P};
use harrier_state::State;
#[global_allocator]
static A: harrier_alloc_count::Counting = harrier_alloc_count::Counting;

/// The tables of this process seeded from /proc, with `child` forked from it.
fn with_child(child: u32) -> State {
    let me = std::process::id();
    let mut s = State::new();
    s.scan_proc(Some(me));
    s.apply(&decode(&fork(1, me, child, child, "w")).unwrap());
    s
}

#[test]
fn updates_of_existing_entries_and_lookups_do_not_allocate() {
    let me = std::process::id();
    let child = 4_100_000;
    let mut s = with_child(child);
    s.apply(&decode(&syscall(2, child, "openat", 3, &[("fullpath", P::B(b"/etc/hosts"))])).unwrap());
    let events = [
        syscall(3, child, "fcntl", 0, &[("fd", P::I(3)), ("cmd", P::I(2)), ("arg", P::I(1))]),
        syscall(4, child, "read", 10, &[("fd", P::I(3))]),
        syscall(5, child, "setuid", 0, &[("cur_uid", P::I(5)), ("cur_euid", P::I(5))]),
        syscall(6, child, "getpid", child as i64, &[]),
    ];
    let decoded: Vec<_> = events.iter().map(|b| decode(b).unwrap()).collect();
    s.apply(&decoded[0]); // warm-up
    let before = harrier_alloc_count::this_thread().allocations;
    let mut n = 0;
    for e in &decoded {
        s.apply(e);
        let p = s.process(child).unwrap();
        n += p.uid as usize + s.fd(child, 3).unwrap().name.len() + s.ancestors(child).count();
        n += s.process(me).map_or(0, |p| p.name().len());
    }
    s.end_batch();
    assert_eq!(
        harrier_alloc_count::this_thread().allocations - before,
        0,
        "allocations on the per-event path"
    );
    assert!(n > 0);
    assert!(s.fd(child, 3).unwrap().cloexec);
}

/// Opening a path again, and a socket's connect from a new ephemeral port,
/// reuse what the last close left: names are interned or rewritten.
#[test]
fn opening_connecting_and_closing_again_do_not_allocate() {
    let child = 4_100_001;
    let mut s = with_child(child);
    let peer = inet(443, [93, 184, 216, 34]);
    let ports: Vec<u16> = (40_000..40_010).collect();
    let raw: Vec<[Vec<u8>; 5]> = ports
        .iter()
        .map(|&port| {
            let local = inet(port, [10, 0, 0, 1]);
            [
                syscall(2, child, "openat", 3, &[("fullpath", P::B(b"/etc/hosts"))]),
                syscall(3, child, "close", 0, &[("fd", P::I(3))]),
                syscall(4, child, "socket", 3, &[("domain", P::I(2)), ("type", P::I(1))]),
                syscall(
                    5,
                    child,
                    "connect",
                    0,
                    &[("fd", P::I(3)), ("local", P::B(&local)), ("peer", P::B(&peer))],
                ),
                syscall(6, child, "close", 0, &[("fd", P::I(3))]),
            ]
        })
        .collect();
    let rounds: Vec<Vec<_>> = raw.iter().map(|r| r.iter().map(|b| decode(b).unwrap()).collect()).collect();
    let names: Vec<String> = ports.iter().map(|p| format!("10.0.0.1:{p}->93.184.216.34:443")).collect();
    for e in &rounds[0] {
        s.apply(e); // warm-up: the path interned, a socket's name and tuple kept
    }
    let before = harrier_alloc_count::this_thread().allocations;
    for (r, name) in rounds[1..].iter().zip(&names[1..]) {
        for e in &r[..4] {
            s.apply(e);
        }
        assert_eq!(&*s.fd(child, 3).unwrap().name, name.as_str());
        s.apply(&r[4]);
    }
    assert_eq!(
        harrier_alloc_count::this_thread().allocations - before,
        0,
        "allocations opening, connecting, closing"
    );
}

fn sockaddr_un(path: &[u8]) -> Vec<u8> {
    let mut a = vec![1, 0];
    a.extend(path);
    a.extend([0; 4]);
    a
}

/// A unix socket named by the path or the abstract name it connects to:
/// interned, Falco's "@" for an abstract one, no allocation once warm.
#[test]
fn unix_sockets_are_named_without_allocating() {
    let child = 4_100_002;
    let mut s = with_child(child);
    let cases =
        [(sockaddr_un(b"/run/x.sock"), "/run/x.sock"), (sockaddr_un(b"\0hr-abstract"), "@hr-abstract")];
    let raw: Vec<[Vec<u8>; 3]> = cases
        .iter()
        .map(|(peer, _)| {
            [
                syscall(2, child, "socket", 3, &[("domain", P::I(1)), ("type", P::I(1))]),
                syscall(3, child, "connect", 0, &[("fd", P::I(3)), ("peer", P::B(peer))]),
                syscall(4, child, "close", 0, &[("fd", P::I(3))]),
            ]
        })
        .collect();
    let rounds: Vec<Vec<_>> = raw.iter().map(|r| r.iter().map(|b| decode(b).unwrap()).collect()).collect();
    for r in &rounds {
        for e in r {
            s.apply(e); // warm-up: both names interned
        }
    }
    let before = harrier_alloc_count::this_thread().allocations;
    for (r, (_, name)) in rounds.iter().zip(&cases) {
        s.apply(&r[0]);
        s.apply(&r[1]);
        assert_eq!(&*s.fd(child, 3).unwrap().name, *name);
        s.apply(&r[2]);
    }
    assert_eq!(harrier_alloc_count::this_thread().allocations - before, 0, "allocations naming unix sockets");
}

/// A memfd is named "memfd:" and its name, as the kernel names it, with no
/// allocation once the name is interned.
#[test]
fn memfds_are_named_without_allocating() {
    let child = 4_100_003;
    let mut s = with_child(child);
    let raw = [
        syscall(2, child, "memfd_create", 3, &[("name", P::B(b"hr-jit")), ("flags", P::I(1))]),
        syscall(3, child, "close", 0, &[("fd", P::I(3))]),
    ];
    let events: Vec<_> = raw.iter().map(|b| decode(b).unwrap()).collect();
    for e in &events {
        s.apply(e); // warm-up: the name interned
    }
    let before = harrier_alloc_count::this_thread().allocations;
    s.apply(&events[0]);
    let fd = s.fd(child, 3).unwrap();
    assert_eq!((&*fd.name, fd.cloexec), ("memfd:hr-jit", true));
    s.apply(&events[1]);
    assert_eq!(harrier_alloc_count::this_thread().allocations - before, 0, "allocations naming a memfd");
}
