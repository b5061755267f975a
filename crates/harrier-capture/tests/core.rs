//! The sensor's core promises: one event per syscall at exit, open paths
//! that a racing thread cannot falsify, and drops that are counted exactly.

mod common;

use harrier_capture::AttachMode::{self, Dispatcher, PerSyscall};
use test_case::test_case;

use common::{bpf_available, capture, capture_with, gettid};
use harrier_capture::testing::{scaled, slack};
use harrier_capture::{parse_syscalls, Config};
use harrier_schema::decode::Value;
use harrier_schema::wire::CpuStats;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn raw_getpid() -> i64 {
    unsafe { libc::syscall(libc::SYS_getpid) }
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn exactly_one_exit_event_per_syscall(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let n = scaled(20_000, 1000);
    let c = capture("getpid,getppid", || {
        for _ in 0..n {
            raw_getpid();
        }
    });
    let mine = c.of_tid(gettid());
    let pid = std::process::id() as i64;
    assert_eq!(mine.len(), n, "one event per getpid call, nothing else");
    assert!(mine.iter().all(|e| e.syscall.name == "getpid" && e.ret == pid));
    assert!(mine.windows(2).all(|w| w[0].header.ts <= w[1].header.ts));
    let sizes: Vec<usize> = c.events.iter().map(Vec::len).collect();
    assert!(sizes.contains(&24), "a getpid event is 24 bytes");
    assert_eq!(c.stats.total_drops(), 0);
}

/// Two same-length paths, differing in one byte, so flipping is one store;
/// long ones (past the stash's inline room, BPF's HR_STASH_SHORT) if asked.
struct FlipTarget {
    _dir: common::TempDir,
    buf: Box<[AtomicU8]>,
    flip_at: usize,
}

impl FlipTarget {
    fn new(long: bool) -> FlipTarget {
        let dir = common::TempDir::new("toctou"); // removed on drop, also when the test fails
        for name in ["a", "b"] {
            std::fs::write(dir.path(name), name).unwrap();
        }
        let name = if long { format!("{}a", "./".repeat(200)) } else { "a".into() };
        let path = format!("{}\0", dir.path(&name));
        let buf: Box<[AtomicU8]> = path.bytes().map(AtomicU8::new).collect();
        FlipTarget { flip_at: path.len() - 2, _dir: dir, buf }
    }

    fn ptr(&self) -> *const libc::c_char {
        self.buf.as_ptr().cast()
    }
}

fn fd_target(fd: i32) -> String {
    std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap().display().to_string()
}

/// With entry copies, and without (`harrier run` when no rule reads the path
/// argument): the kernel-resolved `fullpath` is the truth either way.
#[test_case(PerSyscall, true, false ; "per_syscall")]
#[test_case(Dispatcher, true, false ; "dispatcher")]
#[test_case(PerSyscall, true, true ; "per_syscall_long_paths")]
#[test_case(PerSyscall, false, false ; "per_syscall_no_entry_copies")]
#[test_case(Dispatcher, false, false ; "dispatcher_no_entry_copies")]
fn open_paths_survive_a_racing_thread(mode: AttachMode, entry_copies: bool, long: bool) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    // Open until both files were opened often: the flipper needs CPU time,
    // which parallel tests may hold.
    const MAX_OPENS: usize = 50_000;
    let target = Arc::new(FlipTarget::new(long));
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (t, stop) = (target.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for c in [b'b', b'a'] {
                    t.buf[t.flip_at].store(c, Ordering::Relaxed);
                }
            }
        })
    };
    let mut opened = Vec::new();
    let mut calls = 0;
    let mut cfg = Config::new(parse_syscalls("openat,open").unwrap());
    cfg.pid = Some(std::process::id());
    if !entry_copies {
        for s in ["open", "openat"] {
            cfg.collect.read_at_exit(s).unwrap();
            cfg.collect.skip_on_success(s, "path").unwrap();
        }
    }
    let c = capture_with(cfg, || {
        // Bounded in time too: under emulation (the kernel matrix's guest) a
        // spinning flipper can starve this loop; the asserts below still need
        // both files seen at least once.
        let deadline = std::time::Instant::now() + harrier_capture::testing::slack(Duration::from_secs(20));
        let min_calls = harrier_capture::testing::scaled(3000, 150);
        let (mut seen_a, mut seen_b) = (0, 0);
        while calls < MAX_OPENS
            && (calls < min_calls || seen_a < 10 || seen_b < 10)
            && std::time::Instant::now() < deadline
        {
            calls += 1;
            let fd = unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, target.ptr(), libc::O_RDONLY) };
            if fd >= 0 {
                let path = fd_target(fd as i32);
                if path.ends_with("/a") {
                    seen_a += 1
                } else {
                    seen_b += 1
                }
                opened.push(path);
                unsafe { libc::close(fd as i32) };
            }
        }
    });
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();

    let events = c.named(gettid(), "openat");
    assert_eq!(events.len(), calls, "one event per openat call");
    let reported: Vec<String> = events
        .iter()
        .filter(|e| e.ret >= 0)
        .map(|e| e.param("fullpath").unwrap().as_str().unwrap())
        .collect();
    assert_eq!(reported, opened, "each event names the file the kernel opened");
    let count = |n: &str| opened.iter().filter(|p| p.ends_with(n)).count();
    assert!(count("/a") > 0 && count("/b") > 0, "the race really flipped the path");
    if !entry_copies {
        let loaded: Vec<&str> = c.stats.programs.iter().map(|p| p.name.as_str()).collect();
        assert!(!loaded.iter().any(|n| n.starts_with("hr_enter_")), "no entry program: {loaded:?}");
        assert!(events.iter().all(|e| e.param("path") == Some(&Value::Missing)), "path not collected");
        assert!(events.iter().all(|e| !e.header.args_at_exit), "nothing was read at exit");
        return;
    }
    // The entry copy is what the thread passed; it must name one of the two, whole.
    let passed_len = target.buf.len() - 1;
    assert!(events.iter().all(|e| {
        let p = e.param("path").unwrap().as_str().unwrap();
        (p.ends_with("/a") || p.ends_with("/b")) && p.len() == passed_len
    }));
    // Counted machine-wide, fallbacks may come from other threads' opens in
    // flight at attach; ours all started after it.
    assert!(events.iter().all(|e| !e.header.args_at_exit), "every exit found its entry copy");
}

/// Whether thread `tid` of this process is inside syscall `nr` right now.
fn blocked_in(tid: u32, nr: i64) -> bool {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).unwrap_or_default();
    s.split(' ').next() == Some(nr.to_string().as_str())
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn an_open_in_flight_at_attach_is_flagged(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    // A reader's open of a FIFO blocks until a writer opens it: it entered
    // before the sensor attached and exits after, with no entry copy.
    let dir = common::TempDir::new("inflight");
    let fifo = dir.path("fifo");
    let cpath = common::cstr(&fifo);
    assert_eq!(unsafe { libc::mkfifo(cpath.as_ptr(), 0o600) }, 0);
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = {
        let cpath = cpath.clone();
        std::thread::spawn(move || {
            tx.send(gettid()).unwrap();
            unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, cpath.as_ptr(), libc::O_RDONLY) }
        })
    };
    let reader_tid = rx.recv().unwrap();
    while !blocked_in(reader_tid, libc::SYS_openat) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let c = capture("openat", || {
        let fd = unsafe { libc::open(cpath.as_ptr(), libc::O_WRONLY) };
        assert!(fd >= 0);
        let rfd = reader.join().unwrap();
        assert!(rfd >= 0);
        unsafe { libc::close(fd) };
        unsafe { libc::close(rfd as i32) };
    });
    let late = c.named(reader_tid, "openat");
    assert_eq!(late.len(), 1, "the in-flight open still gives its one event");
    assert!(late[0].header.args_at_exit, "its arguments were read at exit, and it says so");
    assert_eq!(late[0].param("path").unwrap().as_str().unwrap(), fifo);
    let ours = c.named(gettid(), "openat");
    assert!(ours.len() == 1 && !ours[0].header.args_at_exit);
    assert!(c.stats.kernel_total().toctou_fallbacks >= 1);
}

/// A child that makes `n` getpid calls once `go` is readable, then exits.
fn spawn_getpid_child(n: usize) -> (libc::pid_t, i32) {
    spawn_calls_child(&[(libc::SYS_getpid, n)])
}

/// A child that makes, once `go` is readable, each (syscall, count) of
/// `calls` in order (raw, no arguments), then exits.
fn spawn_calls_child(calls: &[(libc::c_long, usize)]) -> (libc::pid_t, i32) {
    let mut p = [0i32; 2];
    assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
    match unsafe { libc::fork() } {
        0 => unsafe {
            // Only raw syscalls here: the parent is multi-threaded. If the
            // test fails before releasing us, the parent's exit kills us.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            libc::close(p[1]);
            let mut b = 0u8;
            if libc::read(p[0], (&mut b as *mut u8).cast(), 1) != 1 {
                libc::_exit(1);
            }
            for &(nr, n) in calls {
                for _ in 0..n {
                    // Null arguments: an execve fails (EFAULT) and returns.
                    libc::syscall(nr, 0, 0, 0);
                }
            }
            libc::_exit(0);
        },
        pid => {
            unsafe { libc::close(p[0]) };
            (pid, p[1])
        }
    }
}

/// Lets a child of spawn_calls_child go and waits until it exited cleanly.
fn release_and_reap(child: libc::pid_t, go: i32) {
    unsafe {
        libc::write(go, b"g".as_ptr().cast(), 1);
        let mut status = 0;
        libc::waitpid(child, &mut status, 0);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        libc::close(go);
    }
}

/// A paused consumer, a small ring and a getpid child: generated =
/// received + counted drops, exactly.
fn drops_are_counted_exactly(cpus_per_buffer: usize) {
    // Far more than the ~2700 a 64 KiB ring holds, even scaled down.
    let n = scaled(50_000, 10_000);
    let (child, go) = spawn_getpid_child(n);
    let mut cfg = Config::new(parse_syscalls("getpid").unwrap());
    cfg.pid = Some(child as u32);
    cfg.buffer_size = 64 << 10; // ~2700 events: the rest must be counted as dropped
    cfg.cpus_per_buffer = cpus_per_buffer;
    // The consumer is paused: nothing is read until the child is done.
    let c = capture_with(cfg, || release_and_reap(child, go));
    let getpids = c.all().iter().filter(|e| matches!(e, harrier_schema::decode::Event::Syscall(_))).count();
    let k = c.stats.kernel_total();
    // n getpid events plus the child's exit (a life-cycle event).
    assert_eq!(k.events, n as u64 + 1, "the kernel saw every event");
    assert!(k.dropped() > 0, "a 64 KiB ring cannot hold {n} events");
    assert_eq!(c.stats.user.events + k.dropped(), k.events, "received + dropped = generated");
    assert!(getpids > 1000 && getpids < n);
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn drops_are_counted_exactly_in_per_cpu_rings(mode: AttachMode) {
    common::use_mode(mode);
    if bpf_available() {
        drops_are_counted_exactly(1);
    }
}

/// The ring reserve's tests: a ring of 128 KiB, 48 KiB of it (and the
/// largest record's room) the reserve, exec's the last half of that.
const RESERVE_RING: usize = 128 << 10;
const RESERVE: usize = 48 << 10;

/// `flood` calls of one syscall then `after` of another by a child, getppid
/// the priority syscall, the consumer paused: how many of each got in
/// (the flood's first), and the kernel's counts.
fn flood_then(flood: (libc::c_long, usize), after: (libc::c_long, usize)) -> (usize, usize, CpuStats) {
    let (child, go) = spawn_calls_child(&[flood, after]);
    let name = |nr| harrier_schema::syscall_by_nr(nr as u32).unwrap().name;
    let mut cfg = Config::new(parse_syscalls(&format!("{},{}", name(flood.0), name(after.0))).unwrap());
    cfg.pid = Some(child as u32);
    cfg.buffer_size = RESERVE_RING;
    cfg.ring_reserve = RESERVE;
    cfg.priority_syscalls = vec![libc::SYS_getppid as u32];
    let c = capture_with(cfg, || release_and_reap(child, go));
    let count = |nr| c.of_tid(child as u32).iter().filter(|e| e.syscall.name == name(nr)).count();
    let k = c.stats.kernel_total();
    assert_eq!(c.stats.user.events + k.dropped(), k.events, "received + dropped = generated");
    (count(flood.0), count(after.0), k)
}

/// A flood of ordinary events (getpid) then a few priority ones (getppid):
/// the flood stops at the reserve line and is counted as shed, every
/// priority event still gets in, and the count stays exact.
#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn a_flood_cannot_crowd_out_priority_events(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let (n, m) = (scaled(50_000, 10_000), 200); // 72 bytes each: 14.4 KiB, in the reserve's first half
    let (getpids, getppids, k) = flood_then((libc::SYS_getpid, n), (libc::SYS_getppid, m));
    assert_eq!(getppids, m, "every priority event got in: {k:?}");
    assert!(getpids > 1000 && getpids < n);
    let [ring_full, _, shed] = k.drops;
    assert_eq!((ring_full, shed), (0, (n - getpids) as u64), "the flood's losses are shed ones");
}

/// A flood of priority events (getppid, as openat is when a Critical rule
/// reads it) then execs (failing ones): the flood stops at the reserve's
/// last half, which is exec's, and every exec gets in.
#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn a_flood_of_priority_events_cannot_crowd_out_exec(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    let (n, m) = (scaled(50_000, 10_000), 20);
    let (getppids, execs, k) = flood_then((libc::SYS_getppid, n), (libc::SYS_execve, m));
    assert_eq!(execs, m, "every exec got in: {k:?}");
    // The ring up to the reserve and its first half: ~1,100 here.
    assert!(getppids > 500 && getppids < n, "{getppids} getppids");
    let [ring_full, _, shed] = k.drops;
    assert_eq!((ring_full, shed), (0, (n - getppids) as u64), "the flood's losses are shed ones");
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn drops_are_counted_exactly_in_shared_rings(mode: AttachMode) {
    common::use_mode(mode);
    if bpf_available() {
        drops_are_counted_exactly(64); // one BPF ringbuf, whichever CPU the child runs on
    }
}

/// Writes of changing sizes, each carrying its sequence number, through a
/// 64 KiB per-CPU ring drained as it goes: many laps, so records meet the
/// end of the ring at every offset, and each one must come out whole.
#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn records_survive_many_laps_of_a_small_ring(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    // ~140 bytes per event, ~4 MiB: scaled down to half, still far over the
    // 8 laps asserted below even if an emulated drain loses some to drops.
    let n = scaled(30_000, 15_000) as u32;
    let mut cfg = Config::new(parse_syscalls("write").unwrap());
    cfg.pid = Some(std::process::id());
    cfg.attach = mode;
    cfg.buffer_size = 64 << 10;
    cfg.snaplen = 200;
    const LAPS: u64 = 8 * (64 << 10);
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = events.clone();
    // Bytes received so far: the writer goes on until the ring went round
    // 8 times, however many events a slow (emulated) drain lost to drops.
    let received = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = received.clone();
    let s = harrier_capture::Session::start(
        &cfg,
        Box::new(move |b| {
            seen.fetch_add(b.len() as u64, Ordering::Relaxed);
            sink.lock().unwrap().push(b.to_vec())
        }),
    )
    .expect("the sensor starts");
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let done = done.clone();
        std::thread::spawn(move || {
            let null = std::fs::OpenOptions::new().write(true).open("/dev/null").unwrap();
            let fd = std::os::fd::AsRawFd::as_raw_fd(&null);
            let mut buf = [0xabu8; 200];
            let deadline = std::time::Instant::now() + slack(std::time::Duration::from_secs(30));
            let enough = |seq: u32| {
                seq >= n
                    && (received.load(Ordering::Relaxed) > LAPS + (64 << 10)
                        || std::time::Instant::now() > deadline)
            };
            for seq in (0..).take_while(|&seq| !enough(seq)) {
                buf[..4].copy_from_slice(&seq.to_le_bytes());
                let len = 4 + (seq as usize * 7) % 196;
                unsafe { libc::write(fd, buf.as_ptr().cast(), len) };
                if seq % 64 == 0 {
                    // ~9 KB per ms: a 5 ms drain interval stays under one 64 KiB lap.
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            done.store(true, Ordering::Relaxed);
            gettid()
        })
    };
    let (tid, stats) = common::drain_until_done(s, &done, writer);
    let events = std::mem::take(&mut *events.lock().unwrap());
    let c = common::Captured { events, stats };
    let writes = c.named(tid, "write");
    let mut last = None;
    for e in &writes {
        let data = e.param("data").unwrap().as_bytes().unwrap();
        let seq = u32::from_le_bytes(data[..4].try_into().unwrap());
        assert_eq!(e.ret as usize, 4 + (seq as usize * 7) % 196);
        assert_eq!(data.len(), e.ret as usize, "the whole buffer, under the snaplen");
        assert!(data[4..].iter().all(|&b| b == 0xab));
        assert!(last.is_none_or(|l| seq > l), "in order, none twice");
        last = Some(seq);
    }
    let k = c.stats.kernel_total();
    assert_eq!(c.stats.user.events + k.dropped(), k.events, "received + dropped = generated");
    assert!(c.stats.user.bytes > LAPS, "the ring went round 8 times ({} bytes)", c.stats.user.bytes);
    assert!(writes.len() as u64 + k.dropped() >= n as u64);
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn bad_configuration_is_refused_before_loading(mode: AttachMode) {
    common::use_mode(mode);
    let mut cfg = Config::new(parse_syscalls("read").unwrap());
    cfg.buffer_size = 12345;
    let err = harrier_capture::Session::start(&cfg, Box::new(|_| {})).err().unwrap();
    assert!(err.to_string().contains("power of two"), "{err}");
}

/// A struct sockaddr_in for 127.0.0.1 whose port another thread can flip
/// with one 16-bit store.
struct FlipAddr(Box<[std::sync::atomic::AtomicU16; 8]>);

impl FlipAddr {
    fn new(port: u16) -> FlipAddr {
        let w = |v: u16| std::sync::atomic::AtomicU16::new(v);
        let ip = [127u8, 0, 0, 1];
        let (ip_lo, ip_hi) = (u16::from_ne_bytes([ip[0], ip[1]]), u16::from_ne_bytes([ip[2], ip[3]]));
        FlipAddr(Box::new([
            w(libc::AF_INET as u16),
            w(port.to_be()),
            w(ip_lo),
            w(ip_hi),
            w(0),
            w(0),
            w(0),
            w(0),
        ]))
    }

    fn set_port(&self, port: u16) {
        self.0[1].store(port.to_be(), Ordering::Relaxed);
    }
}

fn peer_port(fd: i32) -> u16 {
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of_val(&sa) as libc::socklen_t;
    assert_eq!(unsafe { libc::getpeername(fd, (&mut sa as *mut libc::sockaddr_in).cast(), &mut len) }, 0);
    u16::from_be(sa.sin_port)
}

#[test_case(PerSyscall ; "per_syscall")]
#[test_case(Dispatcher ; "dispatcher")]
fn connect_peers_survive_a_racing_thread(mode: AttachMode) {
    common::use_mode(mode);
    if !bpf_available() {
        return;
    }
    // Connect until both ports were hit often (the flipper needs CPU time,
    // which parallel tests may hold), accepting as we go to keep the
    // backlogs empty.
    const MAX_CONNECTS: usize = 5000;
    let listeners = [
        std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
        std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
    ];
    listeners.iter().for_each(|l| l.set_nonblocking(true).unwrap());
    let ports = listeners.each_ref().map(|l| l.local_addr().unwrap().port());
    let addr = Arc::new(FlipAddr::new(ports[0]));
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (a, stop) = (addr.clone(), stop.clone());
        std::thread::spawn(move || {
            // A yield after each store: where the two threads share one CPU (an
            // emulated guest runs its vCPUs on one host thread) the connecting
            // thread then also runs while the second port is set.
            while !stop.load(Ordering::Relaxed) {
                a.set_port(ports[1]);
                std::thread::yield_now();
                a.set_port(ports[0]);
                std::thread::yield_now();
            }
        })
    };
    let mut connected = Vec::new();
    let hits = |c: &[String], p: u16| c.iter().filter(|a| a.ends_with(&format!(":{p}"))).count();
    let c = capture("connect", || {
        let deadline = std::time::Instant::now() + harrier_capture::testing::slack(Duration::from_secs(20));
        while connected.len() < MAX_CONNECTS
            && (hits(&connected, ports[0]) < 10 || hits(&connected, ports[1]) < 10)
            && std::time::Instant::now() < deadline
        {
            let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
            let r = unsafe { libc::syscall(libc::SYS_connect, fd, addr.0.as_ptr(), 16) };
            assert_eq!(r, 0, "connect to a listening loopback port: {}", std::io::Error::last_os_error());
            connected.push(format!("127.0.0.1:{}", peer_port(fd)));
            unsafe { libc::close(fd) };
            listeners.iter().for_each(|l| while l.accept().is_ok() {});
        }
    });
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();

    let reported: Vec<String> = c
        .named(gettid(), "connect")
        .iter()
        .map(|e| harrier_schema::sockaddr::format(e.param("peer").unwrap().as_bytes().unwrap()))
        .collect();
    assert_eq!(reported, connected, "each event names the peer the kernel connected to");
    assert!(hits(&connected, ports[1]) > 0, "the race really flipped the port");
}

#[test]
fn this_kernel_has_every_feature_the_sensor_needs() {
    if !bpf_available() {
        return;
    }
    // Probed for real (the kernel matrix runs this on each kernel tested).
    harrier_capture::kernel::check(harrier_capture::kernel::CAPTURE).unwrap();
}
