//! Per-event work on existing entries and lookups allocate nothing.

use harrier_schema::decode::decode;
use harrier_state::testing::{fork, syscall, P};
use harrier_state::State;
#[global_allocator]
static A: harrier_alloc_count::Counting = harrier_alloc_count::Counting;

#[test]
fn updates_of_existing_entries_and_lookups_do_not_allocate() {
    let me = std::process::id();
    let child = 4_100_000;
    let mut s = State::new();
    s.scan_proc(Some(me));
    s.apply(&decode(&fork(1, me, child, child, "w")).unwrap());
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
