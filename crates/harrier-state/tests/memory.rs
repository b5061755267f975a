//! RSS of the state engine with 10,000 live processes holding 10 fds each,
//! built from events. Run:
//! cargo test --release -p harrier-state --test memory -- --ignored --nocapture

use harrier_schema::decode::decode;
use harrier_state::testing::{fork, sockaddr_in, syscall, P};
use harrier_state::State;

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn rss_with_10000_processes_of_10_fds() {
    const N: u32 = 10_000;
    const BASE: u32 = 5_000_000;
    let me = std::process::id();
    let mut s = State::new();
    s.scan_proc(Some(me));
    // Events are built ahead so that only the tables' growth is measured.
    let forks: Vec<Vec<u8>> = (0..N).map(|i| fork(i as u64, me, BASE + i, BASE + i, "worker")).collect();
    let mut execs = Vec::new();
    for i in 0..N {
        let args = format!("/usr/bin/worker\0--id\0{i}\0");
        execs.push(syscall(
            0,
            BASE + i,
            "execve",
            0,
            &[("args", P::B(args.as_bytes())), ("exe", P::B(b"/usr/bin/worker")), ("cwd", P::B(b"/srv/app"))],
        ));
    }
    let mut opens = Vec::new();
    for i in 0..N {
        for fd in 0..10 {
            let path = format!("/var/lib/app/{i}/file{fd}");
            opens.push(syscall(0, BASE + i, "openat", 3 + fd, &[("fullpath", P::B(path.as_bytes()))]));
        }
    }
    let before = rss_bytes();
    for b in forks.iter().chain(&execs) {
        s.apply(&decode(b).unwrap());
    }
    let procs = rss_bytes();
    for b in &opens {
        s.apply(&decode(b).unwrap());
    }
    let after = rss_bytes();
    assert_eq!(s.len() as u32, N + 1);
    assert_eq!(s.fd(BASE + 9_999, 12).map(|f| &*f.name), Some("/var/lib/app/9999/file9"));
    let per_proc = (procs - before) / N as u64;
    let per_fd = (after - procs) / (N as u64 * 10);
    println!(
        "10,000 processes x 10 fds: tables {:.1} MiB RSS ({} B/process incl. its own exe/args/cwd strings, {} B/fd incl. a unique 25-byte path)",
        (after - before) as f64 / (1 << 20) as f64,
        per_proc,
        per_fd
    );
    assert!(after - before < 64 << 20, "bounded: under 64 MiB");
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn ns_per_applied_event() {
    let me = std::process::id();
    let child = 5_500_000;
    let mut s = State::new();
    s.scan_proc(Some(me));
    s.apply(&decode(&fork(0, me, child, child, "w")).unwrap());
    let (local, peer) = (sockaddr_in(40_000, [10, 0, 0, 1]), sockaddr_in(443, [93, 184, 216, 34]));
    let close = syscall(1, child, "close", 0, &[("fd", P::I(3))]);
    let cases: [(&str, Vec<Vec<u8>>); 4] = [
        ("read (no state change)", vec![syscall(1, child, "read", 10, &[("fd", P::I(3))])]),
        (
            "fcntl F_SETFD (update)",
            vec![syscall(1, child, "fcntl", 0, &[("fd", P::I(3)), ("cmd", P::I(2)), ("arg", P::I(1))])],
        ),
        (
            "openat + close (insert, remove)",
            vec![syscall(1, child, "openat", 3, &[("fullpath", P::B(b"/etc/hosts"))]), close.clone()],
        ),
        (
            "socket + connect + close",
            vec![
                syscall(1, child, "socket", 3, &[("domain", P::I(2)), ("type", P::I(1))]),
                syscall(
                    1,
                    child,
                    "connect",
                    0,
                    &[("fd", P::I(3)), ("local", P::B(&local)), ("peer", P::B(&peer))],
                ),
                close,
            ],
        ),
    ];
    for (name, events) in &cases {
        let events: Vec<_> = events.iter().map(|b| decode(b).unwrap()).collect();
        let n = 1_000_000;
        let t = std::time::Instant::now();
        for _ in 0..n {
            for e in &events {
                s.apply(e);
            }
        }
        println!(
            "{name}: {:.1} ns per round (decode not included)",
            t.elapsed().as_nanos() as f64 / n as f64
        );
    }
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn seeding_all_of_proc() {
    let before = rss_bytes();
    let t = std::time::Instant::now();
    let mut s = State::new();
    s.scan_proc(None);
    let took = t.elapsed();
    let fds: usize = s.processes().map(|p| p.fds.len()).sum();
    println!(
        "seeded {} processes ({} threads, {fds} fds) from /proc in {:.1} ms, {:.1} MiB RSS",
        s.len(),
        s.thread_count(),
        took.as_secs_f64() * 1e3,
        (rss_bytes() - before) as f64 / (1 << 20) as f64
    );
    assert!(s.len() > 1);
}
