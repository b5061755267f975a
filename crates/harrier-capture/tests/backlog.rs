//! A sink slower than the syscalls it is handed: the drain copies the rings
//! out between slices of its work, so a burst many times a ring's size
//! reaches it whole, in order.

mod common;

use common::{bpf_available, gettid};
use harrier_capture::{parse_syscalls, Config};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A sixth of the burst: it must hold what the writer makes while the drain
/// sleeps its longest (50 ms while the rings are quiet) or waits for a CPU.
const RING: usize = 1 << 20;

/// The writer's pace makes a ring last at least this long.
const RING_LASTS: Duration = Duration::from_millis(200);

/// A write(2) of 64 bytes to /dev/null, `fd` already open.
fn write64(fd: i32) {
    let buf = [0x5au8; 64];
    unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
}

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// What a flood left: the capture, the writer's tid, its writes and getpids.
struct Flood {
    c: common::Captured,
    tid: u32,
    fd: i32,
    writes: u64,
    getpids: u64,
    per_event: Duration,
    period: Duration,
    /// The longest the sink went uncalled: the drain was not scheduled.
    longest_gap: Duration,
}

/// 60,000 writes (and a getpid every 100th, priority) from a thread to a
/// sink that falls behind; a backlog of at most `backlog` bytes.
fn flood(backlog: usize) -> Flood {
    // One at a time: each sensor sees this whole process, the other test's writes too.
    static ONE: Mutex<()> = Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null").unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&null);
    // The writer makes one event per `period` (at most a ring per RING_LASTS
    // at ~110 bytes each, or what a write takes here, with room for the
    // sensor's cost); the sink takes 3 periods per event: it falls behind
    // by 2/3 of the burst, 60,000 events, some 6 rings.
    let t = Instant::now();
    for _ in 0..2000 {
        write64(fd);
    }
    let period = (t.elapsed() / 2000 * 3).max(RING_LASTS / (RING / 110) as u32);
    let per_event = period * 3;
    let n = 60_000u32;
    let mut cfg = Config::new(parse_syscalls("write,getpid").unwrap());
    cfg.pid = Some(std::process::id());
    cfg.buffer_size = RING;
    cfg.snaplen = 64;
    cfg.backlog_bytes = backlog;
    cfg.priority_syscalls = vec![libc::SYS_getpid as u32];
    // The ring reserve: a ring that overflows all the same keeps the getpids.
    cfg.ring_reserve = RING / 8;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let gap = Arc::new(Mutex::new(Duration::ZERO));
    let (sink, longest) = (seen.clone(), gap.clone());
    let mut last: Option<Instant> = None;
    let s = harrier_capture::Session::start(
        &cfg,
        Box::new(move |b| {
            // From one call's start to the next's: a wait for a CPU shows.
            let now = Instant::now();
            if let Some(l) = last {
                let mut g = longest.lock().unwrap();
                *g = (*g).max(now - l);
            }
            last = Some(now);
            spin(per_event);
            sink.lock().unwrap().push(b.to_vec());
        }),
    )
    .expect("the sensor starts");
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let done = done.clone();
        std::thread::spawn(move || {
            // Never faster than the pace, even after this thread waited
            // for a CPU: the ring's figure below holds.
            let mut next = Instant::now();
            for i in 0..n {
                spin(next.saturating_duration_since(Instant::now()));
                next = next.max(Instant::now()) + period;
                write64(fd);
                if i % 100 == 0 {
                    unsafe { libc::syscall(libc::SYS_getpid) };
                }
            }
            done.store(true, Ordering::Relaxed);
            gettid()
        })
    };
    let (tid, stats) = common::drain_until_done(s, &done, writer);
    drop(null);
    let c = common::Captured { events: std::mem::take(&mut *seen.lock().unwrap()), stats };
    let longest_gap = *gap.lock().unwrap();
    Flood { c, tid, fd, writes: n as u64, getpids: n.div_ceil(100) as u64, per_event, period, longest_gap }
}

impl Flood {
    /// Kernel drops are the machine's, not the backlog's, only if the
    /// drain was off the CPU longer than a ring lasts at the writer's pace
    /// (a loaded host: the test's threads wait their turn).
    fn check_kernel_drops(&self) {
        let (k, u) = (self.c.stats.kernel_total(), &self.c.stats.user);
        if k.dropped() == 0 {
            return;
        }
        let per_event_bytes = u.bytes / u.events.max(1);
        let ring_lasts = self.period * (RING as u64 / per_event_bytes.max(1)) as u32;
        assert!(
            self.longest_gap > ring_lasts,
            "dropped in the kernel although the drain ran every {:?} at worst (a ring lasts {ring_lasts:?}): {k:?}, {u:?} (a sink of {:?} per event)",
            self.longest_gap,
            self.per_event
        );
        eprintln!("note: {} kernel drops: the drain was off the CPU for {:?}", k.dropped(), self.longest_gap);
    }

    /// Timestamps of the writer's writes to /dev/null the sink got.
    fn writes_seen(&self) -> Vec<u64> {
        let ours = |e: &&harrier_schema::decode::SyscallEvent| {
            e.param("fd").and_then(|v| v.as_i64()) == Some(self.fd as i64)
        };
        self.c.named(self.tid, "write").iter().filter(ours).map(|e| e.header.ts).collect()
    }
}

#[test]
fn a_burst_of_many_rings_reaches_a_slow_sink_whole() {
    if !bpf_available() {
        return;
    }
    let f = flood(harrier_capture::BACKLOG_BYTES);
    let (stats, k) = (&f.c.stats, f.c.stats.kernel_total());
    f.check_kernel_drops();
    let writes = f.writes_seen();
    assert_eq!(writes.len() as u64 + k.dropped(), f.writes, "every write reached the sink (or is counted)");
    assert!(writes.windows(2).all(|w| w[0] <= w[1]), "in time order");
    assert_eq!(f.c.named(f.tid, "getpid").len() as u64, f.getpids);
    assert!(
        stats.user.backlog_peak > RING as u64,
        "the backlog held more than a ring ({} bytes): the sink was not the slower side",
        stats.user.backlog_peak
    );
}

/// Past its limit the backlog sheds ordinary events, never the priority
/// ones, and the rings keep flowing: nothing is dropped in the kernel
/// (unless the drain was not scheduled for longer than a ring lasts).
#[test]
fn a_full_backlog_sheds_ordinary_events_and_keeps_the_priority_ones() {
    if !bpf_available() {
        return;
    }
    // Two rings: one copy (at most a ring) never takes it past its priority
    // room, half as much again, so the rings never wait on it.
    let f = flood(2 * RING);
    let (u, k) = (&f.c.stats.user, f.c.stats.kernel_total());
    f.check_kernel_drops();
    let writes = f.writes_seen().len() as u64;
    assert!(u.backlog_shed > 0 && writes < f.writes, "the backlog shed: {u:?}");
    assert_eq!(writes + u.backlog_shed + k.dropped(), f.writes, "each write delivered or counted");
    assert_eq!(f.c.named(f.tid, "getpid").len() as u64, f.getpids, "every priority event kept");
    assert_eq!(f.c.stats.total_drops(), u.backlog_shed + k.dropped());
}
